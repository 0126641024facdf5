//! End-to-end tests of the `strata` binary. Those that open a database need the engine; the
//! ones about argument errors and missing databases run without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("cannot run the strata binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `strata args`, requires success, returns stdout.
fn ok(args: &[&str]) -> String {
    let o = strata(args);
    assert!(
        o.status.success(),
        "strata {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs `strata args`, requires exit code `code`, returns (stdout, stderr). Also requires
/// that nothing panicked and no Debug dump of an error was printed.
fn fails(args: &[&str], code: i32) -> (String, String) {
    let o = strata(args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(
        o.status.code(),
        Some(code),
        "strata {args:?}: want exit code {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        !err.contains("panicked"),
        "strata {args:?} panicked:\n{err}"
    );
    assert!(
        !err.contains("Error {") && !err.contains("InvalidArgument("),
        "strata {args:?} printed a Debug dump:\n{err}"
    );
    (out, err)
}

fn db_dir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    (t, d)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---- Without the engine ------------------------------------------------------------------

#[test]
fn every_subcommand_has_help() {
    let top = ok(&["--help"]);
    for sub in ["put", "get", "delete", "scan", "stats", "check", "bench"] {
        assert!(top.contains(sub), "top-level help lacks {sub}");
        let h = ok(&[sub, "--help"]);
        assert!(h.contains("Usage: strata "), "{sub} --help:\n{h}");
        assert!(h.lines().next().unwrap().len() > 10, "{sub} --help:\n{h}");
    }
    let b = ok(&["bench", "--help"]);
    for flag in [
        "--benchmarks",
        "--num",
        "--reads",
        "--key-size",
        "--value-size",
        "--threads",
        "--db",
        "--keep",
        "--use-existing-db",
        "--seed",
        "--sync",
        "--disable-wal",
        "--opt",
        "--seek-nexts",
        "--batch-size",
    ] {
        assert!(b.contains(flag), "bench --help lacks {flag}");
    }
    // The server answers its own --help: the directives it takes, with their defaults.
    let serve = ok(&["serve", "--help"]);
    for directive in ["port", "appendfsync", "hot-memory", "shards"] {
        assert!(
            serve.contains(directive),
            "serve --help lacks {directive}:\n{serve}"
        );
    }
}

#[test]
fn read_commands_never_create_a_database() {
    let (_t, d) = db_dir();
    for cmd in [
        vec!["get", "--db", s(&d), "k"],
        vec!["scan", "--db", s(&d)],
        vec!["stats", "--db", s(&d)],
        vec!["check", "--db", s(&d)],
    ] {
        let (_, err) = fails(&cmd, 1);
        assert!(
            err.starts_with("error: no database exists at "),
            "{cmd:?}: {err}"
        );
        assert!(!d.exists(), "{cmd:?} created {}", d.display());
    }
    // An empty directory holds no database either.
    std::fs::create_dir(&d).unwrap();
    let (_, err) = fails(&["get", "--db", s(&d), "k"], 1);
    assert!(err.contains("the directory is empty"), "{err}");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}

#[test]
fn bad_options_are_clear_errors() {
    let (_t, d) = db_dir();
    let (_, err) = fails(&["put", "--db", s(&d), "k", "v", "--opt", "bogus=1"], 1);
    assert!(err.starts_with("error: bad --opt bogus=1:"), "{err}");
    assert!(err.contains("unknown option"), "{err}");
    let (_, err) = fails(
        &["put", "--db", s(&d), "k", "v", "--opt", "num_levels=lots"],
        1,
    );
    assert!(err.contains("cannot parse"), "{err}");
    // Malformed NAME=VALUE is a usage error (clap's exit code 2).
    let (_, err) = fails(&["put", "--db", s(&d), "k", "v", "--opt", "novalue"], 2);
    assert!(err.contains("expected NAME=VALUE"), "{err}");
    let (_, err) = fails(&["bench", "--opt", "bogus=1"], 1);
    assert!(err.contains("bad --opt bogus=1"), "{err}");
    assert!(!d.exists());
}

#[test]
fn bad_hex_is_a_clear_error() {
    let (_t, d) = db_dir();
    let (_, err) = fails(&["put", "--db", s(&d), "--hex", "0g", "00"], 1);
    assert!(err.starts_with("error: bad KEY: "), "{err}");
    let (_, err) = fails(&["get", "--db", s(&d), "--hex", "abc"], 1);
    assert!(err.contains("odd number of digits"), "{err}");
}

#[test]
fn bench_rejects_bad_flags_before_doing_anything() {
    let (_, err) = fails(&["bench", "--benchmarks", "fillrandom,nosuch"], 2);
    assert!(err.contains("unknown benchmark \"nosuch\""), "{err}");
    let (_, err) = fails(&["bench", "--num", "0"], 1);
    assert!(err.contains("--num must be at least 1"), "{err}");
    let (_, err) = fails(&["bench", "--use-existing-db"], 1);
    assert!(err.contains("--use-existing-db needs --db DIR"), "{err}");
    let (_t, d) = db_dir();
    let (_, err) = fails(
        &["bench", "--use-existing-db", "--db", s(&d), "--num", "10"],
        1,
    );
    assert!(err.contains("no database exists at"), "{err}");
}

#[test]
fn bench_refuses_a_non_empty_directory() {
    let (_t, d) = db_dir();
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("precious.txt"), b"keep me").unwrap();
    let (_, err) = fails(&["bench", "--db", s(&d), "--num", "10"], 1);
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(std::fs::read(d.join("precious.txt")).unwrap(), b"keep me");
}

// ---- With the engine ---------------------------------------------------------------------

#[test]
fn put_get_delete() {
    let (_t, d) = db_dir();
    let db = s(&d);
    ok(&["put", "--db", db, "hello", "world"]);
    assert_eq!(ok(&["get", "--db", db, "hello"]), "world\n");
    ok(&["put", "--db", db, "hello", "again"]);
    assert_eq!(ok(&["get", "--db", db, "hello"]), "again\n");
    let (out, err) = fails(&["get", "--db", db, "absent"], 1);
    assert_eq!(out, "");
    assert_eq!(err.trim(), "not found");
    ok(&["delete", "--db", db, "hello"]);
    let (_, err) = fails(&["get", "--db", db, "hello"], 1);
    assert_eq!(err.trim(), "not found");
    // Deleting an absent key is fine.
    ok(&["delete", "--db", db, "never-there"]);
    ok(&["put", "--db", db, "--sync", "durable", "yes"]);
    assert_eq!(ok(&["get", "--db", db, "durable"]), "yes\n");
}

#[test]
fn put_passes_options_to_the_engine() {
    let (_t, d) = db_dir();
    let db = s(&d);
    ok(&[
        "put",
        "--db",
        db,
        "k",
        "v",
        "--opt",
        "compression=lz4",
        "--opt",
        "write_buffer_bytes=65536",
    ]);
    assert_eq!(
        ok(&["get", "--db", db, "k", "--opt", "filter=false"]),
        "v\n"
    );
}

#[test]
fn scan_ranges_limits_and_reverse() {
    let (_t, d) = db_dir();
    let db = s(&d);
    for k in ["c", "a", "e", "b", "d"] {
        ok(&["put", "--db", db, k, &format!("v{k}")]);
    }
    assert_eq!(
        ok(&["scan", "--db", db]),
        "a\tva\nb\tvb\nc\tvc\nd\tvd\ne\tve\n"
    );
    assert_eq!(
        ok(&["scan", "--db", db, "--start", "b", "--end", "d"]),
        "b\tvb\nc\tvc\n"
    );
    assert_eq!(ok(&["scan", "--db", db, "--limit", "2"]), "a\tva\nb\tvb\n");
    assert_eq!(
        ok(&["scan", "--db", db, "--reverse", "--limit", "2"]),
        "e\tve\nd\tvd\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            "--db",
            db,
            "--reverse",
            "--start",
            "b",
            "--end",
            "d"
        ]),
        "c\tvc\nb\tvb\n"
    );
    assert_eq!(
        ok(&["scan", "--db", db, "--start", "bb", "--end", "cc"]),
        "c\tvc\n"
    );
    assert_eq!(ok(&["scan", "--db", db, "--start", "x"]), "");
    // Hex bounds: 62 = "b", 64 = "d".
    assert_eq!(
        ok(&["scan", "--db", db, "--hex", "--start", "62", "--end", "0x64"]),
        "b\tvb\nc\tvc\n"
    );
    ok(&["delete", "--db", db, "c"]);
    assert_eq!(
        ok(&["scan", "--db", db, "--start", "b", "--end", "e"]),
        "b\tvb\nd\tvd\n"
    );
}

#[test]
fn binary_keys_and_values() {
    let (_t, d) = db_dir();
    let db = s(&d);
    ok(&["put", "--db", db, "--hex", "00ff", "41090a"]);
    ok(&["put", "--db", db, "tab\tkey", "back\\slash"]);
    assert_eq!(ok(&["get", "--db", db, "--hex", "00ff"]), "A\\x09\\x0a\n");
    let raw = strata(&["get", "--db", db, "--hex", "0x00FF", "--raw"]);
    assert!(raw.status.success());
    assert_eq!(raw.stdout, b"A\t\n");
    assert_eq!(
        ok(&["scan", "--db", db]),
        "\\x00\\xff\tA\\x09\\x0a\ntab\\x09key\tback\\\\slash\n"
    );
}

#[test]
fn stats_and_check_on_a_healthy_database() {
    let (_t, d) = db_dir();
    let db = s(&d);
    for i in 0..20 {
        ok(&["put", "--db", db, &format!("key{i:03}"), "value"]);
    }
    let st = ok(&["stats", "--db", db]);
    assert!(!st.trim().is_empty());
    let report = ok(&["check", "--db", db]);
    assert!(report.contains("problems:         0"), "{report}");
    assert!(report.trim_end().ends_with("OK"), "{report}");
    // Still readable afterwards.
    assert_eq!(ok(&["get", "--db", db, "key007"]), "value\n");
}

#[test]
fn check_reports_corruption_with_exit_code_2() {
    let (_t, d) = db_dir();
    let db = s(&d);
    ok(&[
        "bench",
        "--db",
        db,
        "--num",
        "20000",
        "--benchmarks",
        "fillrandom,compact",
    ]);
    // Flip bytes in the middle of every large file (tables, and any log); the manifest and
    // the small files stay intact so that check can still find its way.
    let mut damaged = 0;
    for e in std::fs::read_dir(&d).unwrap() {
        let p = e.unwrap().path();
        let len = std::fs::metadata(&p).unwrap().len();
        if p.is_file() && len > 64 << 10 {
            let mut bytes = std::fs::read(&p).unwrap();
            let mid = bytes.len() / 2;
            for b in &mut bytes[mid..mid + 16] {
                *b ^= 0x5a;
            }
            std::fs::write(&p, bytes).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0, "no table to damage in {}", d.display());
    let (out, err) = fails(&["check", "--db", db], 2);
    assert!(out.contains("problem: "), "{out}");
    assert!(out.trim_end().ends_with("CORRUPT"), "{out}");
    assert!(err.contains("problem(s)"), "{err}");
}

/// The path printed on the header's "Database:" line.
fn database_line(out: &str) -> PathBuf {
    let line = out
        .lines()
        .find(|l| l.starts_with("Database:"))
        .unwrap_or_else(|| panic!("no Database: line in\n{out}"));
    let rest = line["Database:".len()..].trim();
    PathBuf::from(rest.split(" (").next().unwrap())
}

#[test]
fn bench_default_run_prints_results_and_cleans_up() {
    let out = ok(&["bench", "--num", "2000"]);
    for want in [
        "Strata:",
        "CPU:",
        "Memory:",
        "Kernel:",
        "Keys:       16 bytes each",
        "Values:     128 bytes each",
        "Entries:    2000",
        "** Engine statistics (strata) **",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let fill = out
        .lines()
        .find(|l| l.starts_with("fillrandom   : "))
        .unwrap();
    assert!(
        fill.contains(" micros/op ") && fill.contains(" operations;") && fill.ends_with(" MB/s"),
        "{fill}"
    );
    let read = out
        .lines()
        .find(|l| l.starts_with("readrandom   : "))
        .unwrap();
    assert!(read.contains(" of 2000 found)"), "{read}");
    assert!(out.contains("latency micros/op: p50 "), "{out}");
    let dir = database_line(&out);
    assert!(
        !dir.exists(),
        "temporary database {} was not removed",
        dir.display()
    );
}

#[test]
fn bench_every_workload_with_threads() {
    let all = "fillseq,readrandom,readseq,readreverse,seekrandom,multireadrandom,readmissing,\
               overwrite,deleterandom,flush,waitforcompaction,compact,stats,fillrandom";
    let out = ok(&[
        "bench",
        "--benchmarks",
        all,
        "--num",
        "3000",
        "--threads",
        "2",
        "--seek-nexts",
        "5",
        "--batch-size",
        "7",
        "--value-size",
        "100",
    ]);
    for name in all.split(',') {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name:<12} :"))),
            "no result line for {name} in\n{out}"
        );
    }
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name:<12} :")))
            .unwrap()
            .to_string()
    };
    // fillseq wrote every key of [0, 3000) once, split between the two threads.
    assert!(
        line("fillseq").contains(" micros/op "),
        "{}",
        line("fillseq")
    );
    assert!(
        line("readrandom").ends_with("(6000 of 6000 found)"),
        "{}",
        line("readrandom")
    );
    assert!(
        line("seekrandom").ends_with("(6000 of 6000 found)"),
        "{}",
        line("seekrandom")
    );
    assert!(
        line("multireadrandom").ends_with("(6000 of 6000 found)"),
        "{}",
        line("multireadrandom")
    );
    assert!(
        line("readmissing").ends_with("(0 of 6000 found)"),
        "{}",
        line("readmissing")
    );
    assert!(out.contains("latency micros/batch of 7: p50 "), "{out}");
}

#[test]
fn bench_on_a_named_directory_then_reuse_it() {
    let (_t, d) = db_dir();
    let db = s(&d);
    let out = ok(&[
        "bench",
        "--db",
        db,
        "--benchmarks",
        "fillseq",
        "--num",
        "1000",
        "--value-size",
        "10",
    ]);
    assert_eq!(database_line(&out), d);
    assert!(d.exists(), "a named --db must be kept");

    let out = ok(&[
        "bench",
        "--db",
        db,
        "--use-existing-db",
        "--benchmarks",
        "fillseq,readrandom",
        "--num",
        "1000",
    ]);
    assert!(
        out.contains("fillseq      : skipped (--use-existing-db is set)"),
        "{out}"
    );
    assert!(out.contains("(1000 of 1000 found)"), "{out}");

    // Key 5: 8-byte big-endian 5, then '0' padding to 16 bytes.
    let key5 = format!("{:016x}{}", 5, "30".repeat(8));
    let v = strata(&["get", "--db", db, "--hex", &key5, "--raw"]);
    assert!(v.status.success(), "{}", stderr(&v));
    assert_eq!(v.stdout.len(), 10);

    let scan = ok(&["scan", "--db", db, "--limit", "3"]);
    let keys: Vec<&str> = scan
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    let zeros = "\\x00".repeat(7);
    assert_eq!(
        keys,
        vec![
            format!("{zeros}\\x0000000000"),
            format!("{zeros}\\x0100000000"),
            format!("{zeros}\\x0200000000"),
        ]
    );
}

#[test]
fn bench_keep_leaves_the_temporary_database() {
    let out = ok(&["bench", "--keep", "--num", "500", "--benchmarks", "fillseq"]);
    let dir = database_line(&out);
    assert!(out.contains("Database kept at "), "{out}");
    assert!(dir.exists(), "{} was removed despite --keep", dir.display());
    assert_eq!(ok(&["scan", "--db", s(&dir)]).lines().count(), 500);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends one RESP command and reads its one-line reply (enough for the writes below).
fn resp(c: &mut std::net::TcpStream, args: &[&str]) -> String {
    use std::io::{BufRead, Write};
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    c.write_all(out.as_bytes()).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(c.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

#[test]
fn check_verifies_a_servers_redis_keys() {
    let (_t, d) = db_dir();
    let db = s(&d);
    let cfg = strata_server::Config::from_args(
        &["--port", "0", "--dir", db, "--shards", "2"].map(String::from),
    )
    .unwrap();
    let server = strata_server::start(cfg, strata_server::StartOptions::default()).unwrap();
    let mut c = std::net::TcpStream::connect(server.local_addr()).unwrap();
    for cmd in [
        &["SET", "s", "1"][..],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f", "v"],
        &["SADD", "st", "x", "y"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["DEL", "st"],
        &["SADD", "st", "q"],
    ] {
        let r = resp(&mut c, cmd);
        assert!(r.starts_with(':') || r.starts_with('+'), "{cmd:?}: {r}");
    }
    drop(c);
    server.shutdown().unwrap();
    let report = ok(&["check", "--db", db]);
    let keys = &report[report.find("== Redis keys ==").expect(&report)..];
    for want in [
        "string keys:      1\n",
        "hash keys:        1\n",
        "list keys:        1\n",
        "set keys:         1\n",
        "zset keys:        1\n",
        "member records:   7\n",
        "score records:    2\n",
        "garbage records:  2\n",
        "problems:         0\nOK\n",
    ] {
        assert!(keys.contains(want), "{want:?} not in\n{keys}");
    }
    // A hash whose size says 1 but which has no field.
    let mut meta = vec![1u8];
    meta.extend_from_slice(&0u64.to_be_bytes());
    meta.extend_from_slice(&1u64.to_be_bytes());
    meta.extend_from_slice(&1u64.to_be_bytes());
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let key = strata_server::keys::meta_key(0, b"fake");
    ok(&["put", "--db", db, "--hex", &hex(&key), &hex(&meta)]);
    let (out, err) = fails(&["check", "--db", db], 2);
    assert!(
        out.contains("problem: db 0 key \"fake\": hash size 1 but 0 member records\n"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("CORRUPT"), "{out}");
    assert!(err.contains("1 problem(s)"), "{err}");
}

/// `strata l0-space`: the table on stdout, the same figures as JSON, and the tables left in
/// --dir.
#[test]
fn l0_space_prints_and_writes_its_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tables");
    let json = tmp.path().join("space.json");
    let out = ok(&[
        "l0-space",
        "--keys",
        "2000",
        "--key-size",
        "64",
        "--dir",
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.starts_with("2000 random keys of 64 bytes"), "{out}");
    assert!(out.contains("| L0 table | "), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["keys"], 2000);
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 4);
    for t in tables {
        let path = Path::new(t["path"].as_str().unwrap());
        assert!(path.starts_with(&dir), "{path:?}");
        assert_eq!(
            std::fs::metadata(path).unwrap().len(),
            t["bytes"].as_u64().unwrap()
        );
    }
    let (_, err) = fails(&["l0-space", "--keys", "0"], 1);
    assert!(err.contains("--keys must be at least 1"), "{err}");
}
