//! kill -9 loop on the real file system: `strata stress` writes with sync, separation on and
//! GC running, and is killed with SIGKILL at a random moment; then `strata check` must pass,
//! a full `strata scan` must succeed, and every write `stress` acknowledged must be there
//! with its value (or a later version of the key). The same database is reused across
//! kills, so each run also recovers what the previous recovery left.
//!
//! The same with unsynced acknowledged writes (`stress --unsynced`, no value-log buffer): a
//! write acknowledged once it reached the OS must survive the kill too, through the mapped
//! value-log head and through `write` calls, and from writers grouped behind a leader.
//!
//! Default (prints its figures):
//!     cargo test -p strata-cli --test kill_loop -- --nocapture
//! Long run (STRATA_KILL_LOOP_KILLS kills, default 500):
//!     STRATA_KILL_LOOP_KILLS=500 cargo test -p strata-cli --test kill_loop -- --ignored \
//!         --nocapture

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options for every command on the database: the same as `stress`'s defaults, so that
/// `check` and `scan` open it the way it was written.
const OPTS: &[&str] = &[
    "--opt",
    "sep_threshold_bytes=16",
    "--opt",
    "vlog_file_bytes=65536",
    "--opt",
    "write_buffer_bytes=262144",
    "--opt",
    "target_file_size_bytes=131072",
    "--opt",
    "gc_garbage_ratio=0.2",
    "--opt",
    "gc_interval_ms=20",
];

fn strata() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata"))
}

/// FNV-1a, as `strata stress` checksums its values.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The version and hash of a value `stress` wrote for `key`, if it is intact.
fn parse_value(key: &str, v: &str) -> Option<(String, String)> {
    let rest = v.strip_prefix(key)?.strip_prefix('#')?;
    let (version, _) = rest.split_once(':')?;
    if v.len() < 16 {
        return None;
    }
    let (body, hash) = v.split_at(v.len() - 16);
    (format!("{:016x}", fnv(body.as_bytes())) == hash).then(|| (version.to_string(), hash.into()))
}

/// A small deterministic generator for kill delays.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[derive(Default, Debug)]
struct Figures {
    kills: usize,
    acked: usize,
    lost: usize,
    corrupt: usize,
}

/// Runs `stress` once and kills it after `delay`; returns its acknowledgements.
fn run_and_kill(
    dir: &Path,
    seed: u64,
    delay: Duration,
    common: &[&str],
    extra: &[&str],
) -> Vec<(String, String, String)> {
    let mut child = strata()
        .args(["stress", "--db"])
        .arg(dir)
        .args(["--seed", &seed.to_string(), "--keys", "500"])
        // Two writers unless `extra` names the count.
        .args(if extra.contains(&"--threads") {
            &[][..]
        } else {
            &["--threads", "2"][..]
        })
        .args(OPTS)
        .args(common)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run strata stress");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        // A line without its newline was cut by the kill; the write may not be complete.
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(rest) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) {
                let p: Vec<&str> = rest.split(' ').collect();
                if let [k, ver, h] = p[..] {
                    acks.push((k.to_string(), ver.to_string(), h.to_string()));
                }
            }
            line.clear();
        }
        acks
    });
    std::thread::sleep(delay);
    let exited = child.try_wait().unwrap();
    if exited.is_none() {
        child.kill().unwrap(); // SIGKILL
    }
    let status = child.wait().unwrap();
    let acks = reader.join().unwrap();
    if let Some(s) = exited {
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        panic!("stress (seed {seed}) exited by itself before the kill ({s}): {err}");
    }
    assert!(!status.success(), "stress was killed, not finished");
    acks
}

/// Runs `strata COMMAND --db DIR` with the stress options; fails the test unless it exits 0.
fn run_ok(command: &str, dir: &Path, common: &[&str], ctx: &str) -> std::process::Output {
    let o = strata()
        .args([command, "--db"])
        .arg(dir)
        .args(OPTS)
        .args(common)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{ctx}: strata {command} failed ({}):\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `check`, then a full scan; returns the scanned key/value pairs.
fn check_and_scan(dir: &Path, common: &[&str], ctx: &str) -> HashMap<String, String> {
    run_ok("check", dir, common, ctx);
    let o = run_ok("scan", dir, common, ctx);
    String::from_utf8(o.stdout)
        .expect("stress writes text")
        .lines()
        .map(|l| {
            let (k, v) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("{ctx}: bad scan line {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// `kills` runs of `stress` (with `extra` arguments), each killed, each followed by the
/// checks.
fn kill_loop(kills: usize, seed: u64, extra: &[&str]) -> Figures {
    kill_loop_with(kills, seed, &[], extra)
}

/// [`kill_loop`] with `common` options given to every command on the database (`stress`,
/// `check`, `scan`) after the stress defaults.
fn kill_loop_with(kills: usize, seed: u64, common: &[&str], extra: &[&str]) -> Figures {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut fig = Figures::default();
    // Newest acknowledged version and hash of each key.
    let mut acked: HashMap<String, (String, String)> = HashMap::new();
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for kill in 0..kills {
        let delay = Duration::from_millis(50 + next(&mut rng) % 700);
        let run_seed = seed * 100_000 + kill as u64 + 1;
        for (k, ver, h) in run_and_kill(&dir, run_seed, delay, common, extra) {
            fig.acked += 1;
            acked.insert(k, (ver, h));
        }
        fig.kills += 1;
        let ctx = format!("kill {kill} (run seed {run_seed}, after {delay:?})");
        let got = check_and_scan(&dir, common, &ctx);
        for (k, v) in &got {
            if parse_value(k, v).is_none() {
                fig.corrupt += 1;
                eprintln!("{ctx}: damaged value for {k}: {v}");
            }
        }
        for (k, (ver, h)) in &acked {
            let ok = got
                .get(k)
                .and_then(|v| parse_value(k, v))
                .is_some_and(|(gv, gh)| gv > *ver || (gv == *ver && gh == *h));
            if !ok {
                fig.lost += 1;
                eprintln!(
                    "{ctx}: acknowledged {k} version {ver} lost: scan has {:?}",
                    got.get(k)
                );
            }
        }
        if fig.lost > 0 || fig.corrupt > 0 {
            let kept = tmp.keep();
            panic!("{ctx}: {fig:?} (database kept at {})", kept.display());
        }
    }
    println!(
        "kill loop: {} kills, {} acknowledged writes ({} keys), lost {}, corrupt {}",
        fig.kills,
        fig.acked,
        acked.len(),
        fig.lost,
        fig.corrupt
    );
    fig
}

#[test]
fn kill_loop_short() {
    let fig = kill_loop(20, 1, &[]);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

/// Unsynced writes with no user-space buffer (the default): acknowledged once they reached
/// the OS, through the mapped value-log head (`vlog_head_mmap`, the default) or a `write`,
/// and a kill -9 must lose none of them.
const UNSYNCED: &[&str] = &["--unsynced", "--opt", "vlog_buffer_bytes=0"];

#[test]
fn kill_loop_unsynced_mapped_head() {
    let fig = kill_loop(12, 3, UNSYNCED);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

/// Values of 5,000 bytes through the mapped head: each store crosses page boundaries and
/// chunks fill sooner; no acknowledged write may be lost.
#[test]
fn kill_loop_unsynced_mapped_head_large_values() {
    let extra = [UNSYNCED, &["--value-size", "5000"]].concat();
    let fig = kill_loop(6, 5, &extra);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

/// Unsynced writers grouped behind a leader (`vlog_group_unsynced`, turned on here), with
/// more writers than cores so that groups form: a member is acknowledged by its leader once
/// the group's one append returned, and a kill -9 must lose none of them.
#[test]
fn kill_loop_unsynced_grouped_writers() {
    let extra = [
        UNSYNCED,
        &["--threads", "6", "--value-size", "4096"],
        &["--opt", "vlog_group_unsynced=true"],
    ]
    .concat();
    let fig = kill_loop(6, 6, &extra);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

#[test]
fn kill_loop_unsynced_written_head() {
    let extra = [UNSYNCED, &["--opt", "vlog_head_mmap=false"]].concat();
    let fig = kill_loop(6, 4, &extra);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

/// Without separation the write-ahead log is the commit log: unsynced writes acknowledged
/// once stored into its mapping (`wal_mmap`, the default) or written with `write`, and a
/// kill -9 must lose none of them.
const NO_SEPARATION: &[&str] = &["--opt", "sep_threshold_bytes=inf"];

#[test]
fn kill_loop_unsynced_mapped_wal() {
    let fig = kill_loop_with(10, 7, NO_SEPARATION, UNSYNCED);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

#[test]
fn kill_loop_unsynced_written_wal() {
    let extra = [UNSYNCED, &["--opt", "wal_mmap=false"]].concat();
    let fig = kill_loop_with(5, 8, NO_SEPARATION, &extra);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

/// Synced writes through the mapped WAL: every acknowledged write was fdatasynced.
#[test]
fn kill_loop_synced_mapped_wal() {
    let fig = kill_loop_with(5, 9, NO_SEPARATION, &[]);
    assert!(fig.acked > 0, "stress acknowledged nothing: {fig:?}");
}

#[test]
#[ignore]
fn kill_loop_long() {
    let kills = std::env::var("STRATA_KILL_LOOP_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    kill_loop(kills, 2, &[]);
    kill_loop(kills, 5, UNSYNCED);
    kill_loop_with(kills, 6, NO_SEPARATION, UNSYNCED);
}
