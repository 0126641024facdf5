//! The `strata` command on both kinds of database: a sharded one (`strata::Db`, the default
//! for new databases) and a single engine instance (`strata_engine::Db`, `--engine-only`).
//! Every command gives the same answers on both, opens what the directory holds, and refuses
//! (writing nothing) what it must not touch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("cannot run the strata binary")
}

/// (exit code, stdout, stderr) of `strata args`.
fn run(args: &[&str]) -> (i32, String, String) {
    let o = strata(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !err.contains("panicked"),
        "strata {args:?} panicked:\n{err}"
    );
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        err,
    )
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(
        code, 0,
        "strata {args:?} failed:\nstdout:\n{out}\nstderr:\n{err}"
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `root` (recursively) with its contents; directories as `None`.
fn listing(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        if m.is_dir() {
            out.insert(rel, None);
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else {
            out.insert(rel, Some(std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// The commands whose answers must not depend on the kind of database, run in order on `db`.
/// The first put carries `create` (the flags that choose the kind); the rest rely on the
/// command finding out what the directory holds.
fn session(db: &str, create: &[&str]) -> Vec<(i32, String, String)> {
    let mut first = vec!["put", "--db", db];
    first.extend_from_slice(create);
    first.extend_from_slice(&["c", "vc"]);
    let mut out = vec![run(&first)];
    let steps: Vec<Vec<&str>> = vec![
        vec!["put", "--db", db, "a", "va"],
        vec!["put", "--db", db, "e", "ve"],
        vec!["put", "--db", db, "b", "vb"],
        vec!["put", "--db", db, "--sync", "d", "vd"],
        vec!["put", "--db", db, "--hex", "00ff", "41090a"],
        vec!["get", "--db", db, "a"],
        vec!["get", "--db", db, "--hex", "00ff"],
        vec!["get", "--db", db, "absent"],
        vec!["put", "--db", db, "a", "again"],
        vec!["get", "--db", db, "a"],
        vec!["delete", "--db", db, "b"],
        vec!["delete", "--db", db, "never-there"],
        vec!["get", "--db", db, "b"],
        vec!["scan", "--db", db],
        vec!["scan", "--db", db, "--reverse"],
        vec!["scan", "--db", db, "--start", "b", "--end", "e"],
        vec![
            "scan",
            "--db",
            db,
            "--reverse",
            "--start",
            "a",
            "--end",
            "d",
        ],
        vec!["scan", "--db", db, "--limit", "2"],
        vec!["scan", "--db", db, "--reverse", "--limit", "2"],
        vec!["scan", "--db", db, "--start", "x"],
        vec!["gc", "--db", db, "--ratio", "2"],
    ];
    for a in steps {
        out.push(run(&a));
    }
    out
}

#[test]
fn every_command_answers_alike_on_both_kinds() {
    let t = tempfile::tempdir().unwrap();
    let (sh, en) = (t.path().join("sharded"), t.path().join("engine"));
    let a = session(s(&sh), &["--shards", "3"]);
    let b = session(s(&en), &["--engine-only"]);
    assert_eq!(a, b);
    // Spot checks that the shared answers are the right ones.
    assert_eq!(a[6].1, "va\n");
    assert_eq!(a[8], (1, String::new(), "not found\n".to_string()));
    assert_eq!(
        a[14].1,
        "\\x00\\xff\tA\\x09\\x0a\na\tagain\nc\tvc\nd\tvd\ne\tve\n"
    );
    assert_eq!(a[16].1, "c\tvc\nd\tvd\n");
    assert_eq!(a[17].1, "c\tvc\na\tagain\n");
    assert!(
        a[21].2.contains("--ratio must be between 0 and 1"),
        "{:?}",
        a[21]
    );
    // The kinds really differ on disk.
    assert!(sh.join("SHARDS").exists() && !sh.join("CURRENT").exists());
    assert!(en.join("CURRENT").exists() && !en.join("SHARDS").exists());

    // stats, check and gc succeed on both; the sharded ones report each shard and a total.
    for (db, shards) in [(&sh, Some(3)), (&en, None)] {
        let st = ok(&["stats", "--db", s(db)]);
        let ck = ok(&["check", "--db", s(db)]);
        let gc = ok(&["gc", "--db", s(db), "--ratio", "0"]);
        assert!(ck.contains("problems:         0\n"), "{ck}");
        assert!(ck.trim_end().ends_with("OK"), "{ck}");
        match shards {
            Some(n) => {
                assert!(st.starts_with("Sharded database: 3 shards\n"), "{st}");
                assert_eq!(
                    st.matches("** Strata engine stats **").count(),
                    n + 1,
                    "{st}"
                );
                assert!(st.contains("== total (3 shards) =="), "{st}");
                assert!(ck.starts_with("shards:           3\n"), "{ck}");
                assert_eq!(ck.matches("\nOK\n").count(), n + 1, "{ck}");
                assert!(ck.contains("== transaction log (TXLOG) =="), "{ck}");
                assert!(ck.contains("entries:          "), "{ck}");
                assert_eq!(gc.lines().count(), 2 * n + 2, "{gc}");
                assert!(gc.contains("shard 2: collected "), "{gc}");
                assert!(gc.contains("total: value log: "), "{gc}");
            }
            None => {
                assert!(st.starts_with("** Strata engine stats **"), "{st}");
                assert!(ck.starts_with("tables:"), "{ck}");
                assert!(gc.starts_with("collected "), "{gc}");
            }
        }
    }
}

#[test]
fn put_into_a_sharded_database_is_visible_to_strata_db() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    ok(&["put", "--db", s(&d), "--shards", "2", "hello", "world"]);
    ok(&["put", "--db", s(&d), "--shards", "2", "--hex", "0001", "ff"]);
    {
        let db = strata::Db::open(&d, strata::DbOptions::default()).unwrap();
        assert_eq!(db.shard_count(), 2);
        assert_eq!(db.get(b"hello").unwrap(), Some(b"world".to_vec()));
        assert_eq!(db.get(&[0, 1]).unwrap(), Some(vec![0xff]));
        db.put(b"from-the-api", b"yes").unwrap();
        db.close().unwrap();
    }
    assert_eq!(ok(&["get", "--db", s(&d), "hello"]), "world\n");
    assert_eq!(ok(&["get", "--db", s(&d), "from-the-api"]), "yes\n");
}

#[test]
fn a_sharded_benchmark_database_is_opened_as_one() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("shx");
    let db = s(&d);
    ok(&[
        "bench",
        "--engine",
        "sharded",
        "--shards",
        "2",
        "--db",
        db,
        "--num",
        "500",
        "--benchmarks",
        "fillrandom",
    ]);
    assert!(ok(&["stats", "--db", db]).starts_with("Sharded database: 2 shards\n"));
    ok(&["put", "--db", db, "hello", "world"]);
    assert!(
        !d.join("CURRENT").exists(),
        "put wrote an engine into the sharded database"
    );
    assert_eq!(ok(&["get", "--db", db, "hello"]), "world\n");
    assert!(ok(&["check", "--db", db]).trim_end().ends_with("OK"));
    // bench --use-existing-db benchmarks it through the sharded API, whatever --engine said.
    let out = ok(&[
        "bench",
        "--use-existing-db",
        "--db",
        db,
        "--num",
        "500",
        "--benchmarks",
        "readrandom",
    ]);
    assert!(out.contains("Engine:     sharded\n"), "{out}");
    assert!(out.contains("(500 of 500 found)"), "{out}");
    assert!(!d.join("CURRENT").exists());
}

/// Every command, with `extra` flags, on `target`: each must fail with a message containing
/// `want`, and `root` must be unchanged afterwards.
fn all_refuse(root: &Path, target: &Path, extra: &[&str], want: &str) {
    let before = listing(root);
    let db = s(target);
    let mut cmds: Vec<Vec<&str>> = vec![
        vec!["put", "--db", db, "k", "v"],
        vec!["delete", "--db", db, "k"],
        vec!["get", "--db", db, "k"],
        vec!["scan", "--db", db],
        vec!["stats", "--db", db],
        vec!["check", "--db", db],
        vec!["gc", "--db", db],
    ];
    for c in &mut cmds {
        c.extend_from_slice(extra);
    }
    for c in cmds {
        let (code, out, err) = run(&c);
        assert_eq!(
            code, 1,
            "{c:?}: want exit code 1\nstdout:\n{out}\nstderr:\n{err}"
        );
        assert!(err.starts_with("error: "), "{c:?}: {err}");
        assert!(err.contains(want), "{c:?}: want {want:?} in:\n{err}");
        assert_eq!(listing(root), before, "{c:?} changed {}", root.display());
    }
}

#[test]
fn what_is_not_the_expected_database_is_refused_and_left_alone() {
    let t = tempfile::tempdir().unwrap();
    let sh = t.path().join("sharded");
    let en = t.path().join("engine");
    ok(&["put", "--db", s(&sh), "--shards", "2", "k", "v"]);
    ok(&["put", "--db", s(&en), "--engine-only", "k", "v"]);

    // A sharded database when --engine-only is asked.
    all_refuse(&sh, &sh, &["--engine-only"], "holds a sharded database");
    // A single engine when --shards is given, and a sharded one of another count.
    all_refuse(
        &en,
        &en,
        &["--shards", "2"],
        "holds a single-engine database",
    );
    all_refuse(
        &sh,
        &sh,
        &["--shards", "3"],
        "of 2 shards, but --shards asks for 3",
    );
    // A directory holding other things.
    let junk = t.path().join("junk");
    std::fs::create_dir_all(junk.join("sub")).unwrap();
    std::fs::write(junk.join("notes.txt"), b"keep me").unwrap();
    std::fs::write(junk.join("sub/MANIFEST-000001"), b"not ours").unwrap();
    all_refuse(&junk, &junk, &[], "is not a Strata database");
    all_refuse(&junk, &junk, &["--engine-only"], "is not a Strata database");
    // A file instead of a directory.
    let file = t.path().join("file");
    std::fs::write(&file, b"plain file").unwrap();
    all_refuse(t.path(), &file, &[], "is not a directory");
    all_refuse(t.path(), &file, &["--engine-only"], "is not a directory");
    // An impossible shard count is refused before anything is created.
    let fresh = t.path().join("fresh");
    let (code, _, err) = run(&["put", "--db", s(&fresh), "--shards", "0", "k", "v"]);
    assert_eq!(code, 1);
    assert!(err.contains("--shards must be between 1 and 1024"), "{err}");
    assert!(!fresh.exists());

    // bench --use-existing-db refuses a non-database directory too.
    let before = listing(&junk);
    let (code, _, err) = run(&[
        "bench",
        "--use-existing-db",
        "--db",
        s(&junk),
        "--num",
        "10",
        "--benchmarks",
        "readrandom",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not a Strata database"), "{err}");
    assert_eq!(listing(&junk), before);
    // ... and an explicit engine list that does not fit the database.
    let both = t.path().join("both");
    std::fs::create_dir_all(&both).unwrap();
    let copy = |from: &Path, to: &Path| {
        for (rel, content) in listing(from) {
            match content {
                None => std::fs::create_dir_all(to.join(rel)).unwrap(),
                Some(c) => std::fs::write(to.join(rel), c).unwrap(),
            }
        }
    };
    copy(&sh, &both.join("strata"));
    copy(&en, &both.join("sharded"));
    let before = listing(&both);
    let (code, _, err) = run(&[
        "bench",
        "--use-existing-db",
        "--engine",
        "strata,sharded",
        "--db",
        s(&both),
        "--num",
        "10",
        "--benchmarks",
        "readrandom",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("which --engine strata does not open"), "{err}");
    assert_eq!(listing(&both), before);
}

#[test]
fn check_reports_a_damaged_sharded_database_with_exit_code_2() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    for i in 0..10 {
        ok(&["put", "--db", s(&d), "--shards", "2", &format!("k{i}"), "v"]);
    }
    // A flipped byte in the transaction log's header, then a missing shard.
    let log = d.join("TXLOG");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[3] ^= 0x20;
    std::fs::write(&log, bytes).unwrap();
    std::fs::remove_dir_all(d.join("shard-001")).unwrap();
    let (code, out, err) = run(&["check", "--db", s(&d)]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("problem: corruption in "), "{out}");
    assert!(out.contains("transaction log header"), "{out}");
    assert!(
        out.contains("shard directory (or its CURRENT file) is missing"),
        "{out}"
    );
    assert!(out.contains("== total (2 shards) ==\n"), "{out}");
    assert!(out.contains("problems:         2\n"), "{out}");
    assert!(out.trim_end().ends_with("CORRUPT"), "{out}");
    assert!(err.contains("2 problem(s)"), "{err}");
    // A damaged SHARDS file is a problem check reports, too.
    let shards = d.join("SHARDS");
    let mut bytes = std::fs::read(&shards).unwrap();
    bytes[13] ^= 1;
    std::fs::write(&shards, bytes).unwrap();
    let (code, out, _) = run(&["check", "--db", s(&d)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("SHARDS"), "{out}");
}
