//! SAVE and BGSAVE: the checkpoint under `dir/<dbfilename>` is a database of its own holding
//! one moment of the data; INFO persistence reflects the saves.

mod common;

use common::{start, Client, V};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::io::{FaultKind, FaultOp, FaultRule};
use strata_server::{ServerHandle, StartOptions};

fn info_field(c: &mut Client, field: &str) -> String {
    let V::Bulk(text) = c.q(&["INFO", "persistence"]) else {
        panic!("INFO reply");
    };
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} missing in {text}"))
        .to_string()
}

/// Where `dir/checkpoint` points.
fn checkpoint_dir(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir.join("checkpoint")).expect("the checkpoint link resolves")
}

/// Opens the checkpoint as a server of its own and reads `keys` there.
fn read_checkpoint(dir: &Path, shards: &str, keys: &[&str]) -> Vec<V> {
    let cp = checkpoint_dir(dir);
    let report = strata::Db::check(&cp, strata::DbOptions::default()).unwrap();
    assert!(report.is_ok(), "check of {}: {report:?}", cp.display());
    // A copy, so that reading does not write into the checkpoint the next SAVE replaces.
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&cp, copy.path());
    let server = start(copy.path(), &["--shards", shards]);
    let mut c = Client::connect(server.local_addr());
    let mut args = vec!["MGET"];
    args.extend_from_slice(keys);
    let V::Array(vals) = c.q(&args) else {
        panic!("MGET reply");
    };
    drop(c);
    server.shutdown().unwrap();
    vals
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn save_writes_a_checkpoint_that_opens_as_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(tmp.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["SET", "a", "1"]), V::ok());
    assert_eq!(c.q(&["SAVE"]), V::ok());
    let first = checkpoint_dir(tmp.path());
    // Written after the save: not in it.
    assert_eq!(c.q(&["SET", "b", "2"]), V::ok());
    assert_eq!(
        read_checkpoint(tmp.path(), "2", &["a", "b"]),
        vec![V::bulk("1"), V::NilBulk]
    );
    // A second save replaces the first, atomically through the link; the old one is gone.
    assert_eq!(c.q(&["SAVE"]), V::ok());
    let second = checkpoint_dir(tmp.path());
    assert_ne!(first, second);
    assert!(!first.exists(), "{} left behind", first.display());
    assert_eq!(
        read_checkpoint(tmp.path(), "2", &["a", "b"]),
        vec![V::bulk("1"), V::bulk("2")]
    );
    assert_eq!(info_field(&mut c, "rdb_saves"), "2");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(
        c.q(&["SAVE", "x"]),
        V::err("ERR wrong number of arguments for 'save' command")
    );
    assert_eq!(c.q(&["BGSAVE", "x"]), V::err("ERR syntax error"));
    assert_eq!(
        c.q(&["CONFIG", "GET", "dbfilename"]),
        V::arr(&["dbfilename", "checkpoint"])
    );
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn bgsave_runs_in_the_background_and_refuses_a_second_one() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(tmp.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    for i in 0..200 {
        assert_eq!(c.q(&["SET", &format!("k{i}"), "v"]), V::ok());
    }
    let before: u64 = info_field(&mut c, "rdb_last_save_time").parse().unwrap();
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    // Three in one write: the second and third arrive while the first runs (a save syncs
    // every shard's files and the directories: far longer than parsing two commands).
    c.send(
        &[
            common::encode(&[b"BGSAVE"]),
            common::encode(&[b"BGSAVE"]),
            common::encode(&[b"SAVE"]),
        ]
        .concat(),
    );
    assert_eq!(c.read(), V::Simple("Background saving started".to_string()));
    assert_eq!(c.read(), V::err("ERR Background save already in progress"));
    assert_eq!(c.read(), V::err("ERR Background save already in progress"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_current_bgsave_time_sec"), "-1");
    let after: u64 = info_field(&mut c, "rdb_last_save_time").parse().unwrap();
    assert!(after >= before);
    assert_eq!(
        read_checkpoint(tmp.path(), "2", &["k0", "k199"]),
        vec![V::bulk("v"), V::bulk("v")]
    );
    assert_eq!(
        c.q(&["BGSAVE", "SCHEDULE"]),
        V::Simple("Background saving started".to_string())
    );
    drop(c);
    // Shutdown waits for the save.
    server.shutdown().unwrap();
    assert!(checkpoint_dir(tmp.path()).join("SHARDS").exists());
}

/// A writer bumps a counter and three markers in one MSET (keys over several shards: a
/// cross-shard batch) while SAVE and BGSAVE run; every checkpoint holds them equal, and at
/// least the value acknowledged before the save began.
#[test]
fn checkpoints_taken_while_writing_hold_one_moment() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(tmp.path(), &["--shards", "4"]);
    let addr = server.local_addr();
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let v = i.to_string();
                let filler = format!("filler-{}", i % 100);
                assert_eq!(
                    c.q(&[
                        "MSET",
                        "counter",
                        &v,
                        "marker-a",
                        &v,
                        "marker-b",
                        &v,
                        "marker-c",
                        &v,
                        &filler,
                        "xxxxxxxxxxxx"
                    ]),
                    V::ok()
                );
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut c = Client::connect(addr);
    for round in 0..4 {
        std::thread::sleep(Duration::from_millis(30));
        let before = acked.load(Ordering::Acquire);
        if round % 2 == 0 {
            assert_eq!(c.q(&["SAVE"]), V::ok());
        } else {
            assert_eq!(
                c.q(&["BGSAVE"]),
                V::Simple("Background saving started".to_string())
            );
            while info_field(&mut c, "rdb_bgsave_in_progress") != "0" {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let got = read_checkpoint(
            tmp.path(),
            "4",
            &["counter", "marker-a", "marker-b", "marker-c"],
        );
        assert!(
            got.iter().all(|v| *v == got[0]),
            "round {round}: the MSET split: {got:?}"
        );
        let V::Bulk(n) = &got[0] else {
            panic!("round {round}: {got:?}");
        };
        let n: u64 = String::from_utf8_lossy(n).parse().unwrap();
        assert!(
            n >= before,
            "round {round}: checkpoint holds {n} < acknowledged {before}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    drop(c);
    server.shutdown().unwrap();
}

/// Starts a server whose database files go through `fs`.
fn start_over(dir: &Path, fs: strata_engine::io::FaultFs, extra: &[&str]) -> ServerHandle {
    common::start_with(
        dir,
        extra,
        StartOptions {
            fs: Some(Arc::new(fs)),
            ..StartOptions::default()
        },
    )
}

fn fault_fs() -> strata_engine::io::FaultFs {
    strata_engine::io::FaultFs::new(Arc::new(strata_engine::io::RealFs::default()))
}

fn sync_fails() -> FaultRule {
    FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio).persistent()
}

const MISCONF: &str = "MISCONF Errors writing to the AOF file: Input/output error";

/// `appendfsync always`: the write whose sync fails and every later write are refused with
/// Redis's MISCONF text; reads go on; nothing acknowledged is lost after a restart.
#[test]
fn failed_sync_refuses_writes_with_misconf_and_keeps_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = fault_fs();
    let server = start_over(tmp.path(), fs.clone(), &["--appendfsync", "always"]);
    let mut c = Client::connect(server.local_addr());
    for i in 0..50 {
        assert_eq!(c.q(&["SET", &format!("k{i}"), &i.to_string()]), V::ok());
    }
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "ok");
    fs.add_rule(sync_fails());
    assert_eq!(c.q(&["SET", "after", "x"]), V::err(MISCONF));
    assert_eq!(c.q(&["MSET", "a", "1", "b", "2"]), V::err(MISCONF));
    assert_eq!(c.q(&["INCR", "k1"]), V::err(MISCONF));
    assert_eq!(c.q(&["DEL", "k2"]), V::err(MISCONF));
    // Redis refuses PING too while writes are refused.
    assert_eq!(c.q(&["PING"]), V::err(MISCONF));
    // Reads are served.
    assert_eq!(c.q(&["GET", "k7"]), V::bulk("7"));
    assert_eq!(
        c.q(&["MGET", "k1", "k2", "after"]),
        V::Array(vec![V::bulk("1"), V::bulk("2"), V::NilBulk])
    );
    assert_eq!(c.q(&["EXISTS", "k3"]), V::Int(1));
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "err");
    drop(c);
    // The close may report the failure; what matters is the data.
    let _ = server.shutdown();
    fs.clear();
    let server = common::start(tmp.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    for i in 0..50 {
        assert_eq!(c.q(&["GET", &format!("k{i}")]), V::bulk(&i.to_string()));
    }
    assert_eq!(c.q(&["SET", "after", "x"]), V::ok());
    drop(c);
    server.shutdown().unwrap();
}

/// `appendfsync everysec`: the background sync fails; the next writes get MISCONF.
#[test]
fn failed_background_sync_refuses_later_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = fault_fs();
    let server = start_over(tmp.path(), fs.clone(), &["--appendfsync", "everysec"]);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    // Appends still succeed (no sync asked); the once-a-second sync is what fails.
    fs.add_rule(sync_fails());
    assert_eq!(c.q(&["SET", "k2", "v2"]), V::ok());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.q(&["SET", "k3", "v3"]) {
            V::Err(e) => {
                assert_eq!(e, MISCONF);
                break;
            }
            r => assert_eq!(r, V::ok()),
        }
        assert!(
            Instant::now() < deadline,
            "the failed background sync never surfaced"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "err");
    drop(c);
    let _ = server.shutdown();
}

/// A `dbfilename` naming a file of the database itself is refused at SAVE, and the database
/// is untouched.
#[test]
fn save_never_replaces_a_file_of_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["TXLOG", "shard-000", "SHARDS"] {
        let server = start(tmp.path(), &["--dbfilename", name]);
        let mut c = Client::connect(server.local_addr());
        assert_eq!(c.q(&["SET", "k", name]), V::ok());
        assert_eq!(c.q(&["SAVE"]), V::err("ERR"));
        drop(c);
        server.shutdown().unwrap();
        assert!(!std::fs::symlink_metadata(tmp.path().join(name))
            .unwrap()
            .file_type()
            .is_symlink());
        let server = start(tmp.path(), &[]);
        let mut c = Client::connect(server.local_addr());
        assert_eq!(c.q(&["GET", "k"]), V::bulk(name));
        drop(c);
        server.shutdown().unwrap();
    }
    let report = strata::Db::check(tmp.path(), strata::DbOptions::default()).unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// INFO persistence names the durability policy and when the logs were last synced: after
/// each synced write under `always`, within about a second of a write under `everysec`.
#[test]
fn info_persistence_reports_the_policy_and_the_last_sync() {
    for policy in ["always", "everysec"] {
        let tmp = tempfile::tempdir().unwrap();
        let server = start(tmp.path(), &["--appendfsync", policy]);
        let mut c = Client::connect(server.local_addr());
        assert_eq!(info_field(&mut c, "appendfsync"), policy);
        assert_eq!(info_field(&mut c, "aof_last_sync_time"), "0");
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let t: u64 = info_field(&mut c, "aof_last_sync_time").parse().unwrap();
            if t >= before {
                break;
            }
            assert!(Instant::now() < deadline, "{policy}: no sync reported");
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(c);
        server.shutdown().unwrap();
    }
}
