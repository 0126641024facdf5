//! Short runs of every workload on every engine of the default build (strata, fjall; and
//! rocksdb with `--features rocksdb`, which `.ci/run` also tests), checking the counts and
//! found ratios against a replay of the key generators — never timings.

use super::args::BenchArgs;
use super::record::Record;
use super::run::execute;
use super::worker::thread_rng;
use crate::{Cli, Command};
use clap::Parser;
use std::collections::{BTreeSet, HashMap};

fn bench_args(args: &[&str]) -> BenchArgs {
    let cli = Cli::try_parse_from(["strata", "bench"].iter().chain(args.iter()).copied())
        .expect("valid arguments");
    match cli.command {
        Command::Bench(b) => *b,
        _ => unreachable!(),
    }
}

/// The first `n` keys each thread of benchmark `index` draws uniformly from `[0, num)`.
fn draws(a: &BenchArgs, index: usize, threads: std::ops::Range<usize>, n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for t in threads {
        let (mut rng, _) = thread_rng(a.seed, index, t, a.value_sizes());
        for _ in 0..n {
            out.push(rng.below(a.num));
        }
    }
    out
}

fn hits(keys: &[u64], set: &BTreeSet<u64>) -> u64 {
    keys.iter().filter(|k| set.contains(k)).count() as u64
}

fn by_label(records: &[Record]) -> HashMap<&str, &Record> {
    records.iter().map(|r| (r.benchmark.as_str(), r)).collect()
}

const DB_BENCH_SET: &str = "fillseq,readseq,readreverse,fillrandom,readrandom,readmissing,\
multireadrandom,seekrandom,overwrite,readwhilewriting,deleterandom,readrandom,compact,flush,\
waitforcompaction,stats";

fn db_bench_workloads(engine: &str) {
    let a = bench_args(&[
        "--engine",
        engine,
        "--benchmarks",
        DB_BENCH_SET,
        "--num",
        "500",
        "--threads",
        "2",
        "--batch-size",
        "7",
        "--seek-nexts",
        "3",
        "--opt",
        &format!(
            "{engine}.{}",
            match engine {
                "strata" | "sharded" => "write_buffer_bytes=65536",
                "rocksdb" | "sharded-rocksdb" => "write_buffer_size=65536",
                _ => "max_memtable_size=65536",
            }
        ),
    ]);
    let out = execute(&a).unwrap();
    let r = by_label(&out.records);
    let entry = 16 + 128u64;
    // "stats" prints but records nothing.
    assert_eq!(out.records.len(), 15);
    assert!(out
        .records
        .iter()
        .all(|r| r.engine == engine && r.round == 1));

    assert_eq!(r["fillseq"].ops, 500);
    assert_eq!(r["fillseq"].user_bytes_written, 500 * entry);
    assert_eq!(r["fillseq"].live_bytes, Some(500 * entry));
    assert!(r["fillseq"].space_amp.is_some());
    // Each thread reads the whole database.
    assert_eq!(r["readseq"].ops, 1000);
    assert_eq!(r["readreverse"].ops, 1000);

    let mut set: BTreeSet<u64> = draws(&a, 3, 0..2, 500).into_iter().collect();
    assert_eq!(r["fillrandom"].ops, 1000);
    assert_eq!(r["fillrandom"].live_bytes, Some(set.len() as u64 * entry));
    for (label, index) in [("readrandom", 4), ("multireadrandom", 6), ("seekrandom", 7)] {
        let rec = r[label];
        assert_eq!(rec.ops, 1000, "{label}");
        assert_eq!(rec.lookups, Some(1000), "{label}");
        assert_eq!(
            rec.found,
            Some(hits(&draws(&a, index, 0..2, 500), &set)),
            "{label}"
        );
    }
    assert_eq!(r["readmissing"].found, Some(0));
    assert_eq!(r["readmissing"].lookups, Some(1000));
    assert_eq!(
        r["multireadrandom"].latency.as_ref().unwrap().per,
        "batch of 7"
    );

    set.extend(draws(&a, 8, 0..2, 500));
    assert_eq!(r["overwrite"].live_bytes, Some(set.len() as u64 * entry));

    // readwhilewriting: the readers' lookups are counted; the writer (thread 2) puts
    // random keys meanwhile, so the readers find at least what was there before and at
    // most what is there after.
    let rww = r["readwhilewriting"];
    assert_eq!(rww.ops, 1000);
    let puts = rww.op_counts["writer puts"];
    let readers = draws(&a, 9, 0..2, 500);
    let found = rww.found.unwrap();
    let low = hits(&readers, &set);
    set.extend(draws(&a, 9, 2..3, puts));
    assert!(
        (low..=hits(&readers, &set)).contains(&found),
        "{found} outside {low}..={}",
        hits(&readers, &set)
    );
    assert_eq!(rww.user_bytes_written, puts * entry);
    assert_eq!(rww.live_bytes, Some(set.len() as u64 * entry));

    for k in draws(&a, 10, 0..2, 500) {
        set.remove(&k);
    }
    assert_eq!(r["deleterandom"].ops, 1000);
    assert_eq!(r["deleterandom"].live_bytes, Some(set.len() as u64 * entry));
    assert_eq!(
        r["readrandom#2"].found,
        Some(hits(&draws(&a, 11, 0..2, 500), &set))
    );
    for one in ["compact", "flush", "waitforcompaction"] {
        assert_eq!(r[one].ops, 1, "{one}");
    }
    // The summary leaves out the one-shot benchmarks.
    assert_eq!(out.summary.len(), 12);
    assert!(out.summary.iter().all(|s| s.benchmark != "compact"));
    for rec in &out.records {
        assert!(rec.found <= rec.lookups, "{}", rec.benchmark);
        if rec.ops > 1 {
            assert!(rec.latency.is_some(), "{}", rec.benchmark);
        }
    }
}

#[test]
fn db_bench_workloads_on_strata() {
    db_bench_workloads("strata");
}

#[test]
fn db_bench_workloads_on_fjall() {
    db_bench_workloads("fjall");
}

#[cfg(feature = "rocksdb")]
#[test]
fn db_bench_workloads_on_rocksdb() {
    db_bench_workloads("rocksdb");
}

fn ycsb_workloads(engine: &str) {
    let a = bench_args(&[
        "--engine",
        engine,
        "--benchmarks",
        "ycsb-load,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f",
        "--num",
        "400",
        "--reads",
        "300",
        "--threads",
        "2",
        "--value-size",
        "100",
    ]);
    let out = execute(&a).unwrap();
    let r = by_label(&out.records);
    let entry = 16 + 100u64;
    assert_eq!(r["ycsb-load"].ops, 400);
    assert_eq!(r["ycsb-load"].live_bytes, Some(400 * entry));
    let mut records = 400;
    for w in ["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"] {
        let rec = r[w];
        assert_eq!(rec.ops, 600, "{w}");
        assert_eq!(rec.op_counts.values().sum::<u64>(), 600, "{w}");
        // Every read finds its record: reads only pick inserted records.
        assert_eq!(rec.found, rec.lookups, "{w}");
        if w != "ycsb-e" {
            assert!(rec.lookups.unwrap() > 0, "{w}");
        }
        records += rec.op_counts.get("insert").copied().unwrap_or(0);
        assert_eq!(rec.live_bytes, Some(records * entry), "{w}");
        for kind in rec.op_counts.keys() {
            assert!(rec.latency_by_kind.contains_key(kind), "{w} {kind}");
        }
    }
    let kinds = |w: &str| r[w].op_counts.keys().cloned().collect::<Vec<_>>();
    assert_eq!(kinds("ycsb-a"), ["read", "update"]);
    assert_eq!(kinds("ycsb-c"), ["read"]);
    assert_eq!(kinds("ycsb-d"), ["insert", "read"]);
    assert_eq!(kinds("ycsb-e"), ["insert", "scan"]);
    assert_eq!(kinds("ycsb-f"), ["read", "rmw"]);
    assert!(records > 400, "D and E inserted records");
    // A scan returns 1 to 100 records: its bytes lie in between.
    let e = r["ycsb-e"];
    assert!(e.mb_per_sec > 0.0);
}

#[test]
fn ycsb_workloads_on_strata() {
    ycsb_workloads("strata");
}

#[test]
fn ycsb_workloads_on_fjall() {
    ycsb_workloads("fjall");
}

#[cfg(feature = "rocksdb")]
#[test]
fn ycsb_workloads_on_rocksdb() {
    ycsb_workloads("rocksdb");
}

#[test]
fn engines_alternate_and_write_json_and_plot() {
    let t = tempfile::tempdir().unwrap();
    let json = t.path().join("r.json");
    let png = t.path().join("r.png");
    let db = t.path().join("db");
    let a = bench_args(&[
        "--engine",
        "strata,fjall",
        "--rounds",
        "2",
        "--benchmarks",
        "fillrandom,readrandom",
        "--num",
        "300",
        "--db",
        db.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    let out = execute(&a).unwrap();
    let order: Vec<(usize, &str, &str)> = out
        .records
        .iter()
        .map(|r| (r.round, r.engine.as_str(), r.benchmark.as_str()))
        .collect();
    assert_eq!(
        order,
        vec![
            (1, "strata", "fillrandom"),
            (1, "strata", "readrandom"),
            (1, "fjall", "fillrandom"),
            (1, "fjall", "readrandom"),
            (2, "strata", "fillrandom"),
            (2, "strata", "readrandom"),
            (2, "fjall", "fillrandom"),
            (2, "fjall", "readrandom"),
        ]
    );
    // Same seed, same keys: every engine and round finds the same keys.
    let found: BTreeSet<Option<u64>> = out
        .records
        .iter()
        .filter(|r| r.benchmark == "readrandom")
        .map(|r| r.found)
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(out.summary.len(), 4);
    assert!(out
        .summary
        .iter()
        .filter(|s| s.engine == "strata")
        .all(|s| s.ratio_to_first == Some(1.0) && s.rounds == 2));
    // Each engine kept its own directory.
    assert!(db.join("strata").is_dir() && db.join("fjall").is_dir());

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 8);
    assert_eq!(doc["summary"].as_array().unwrap().len(), 4);
    assert_eq!(doc["args"]["num"], 300);
    assert!(doc["environment"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(
        doc["environment"]["warning"].is_string(),
        cfg!(debug_assertions)
    );
    let run = &doc["runs"][1];
    for field in [
        "ops_per_sec",
        "latency",
        "device_bytes_written",
        "cpu_seconds",
        "peak_rss_bytes",
        "timeline",
    ] {
        assert!(!run[field].is_null(), "{field} missing in {run}");
    }
    let png_bytes = std::fs::read(&png).unwrap();
    assert_eq!(&png_bytes[..4], b"\x89PNG");
}

#[test]
fn writes_sets_the_writes_per_thread() {
    let a = bench_args(&[
        "--benchmarks",
        "fillrandom,overwrite,deleterandom,readrandom",
        "--num",
        "1000",
        "--writes",
        "100",
        "--reads",
        "50",
        "--threads",
        "2",
    ]);
    let out = execute(&a).unwrap();
    let ops: Vec<u64> = out.records.iter().map(|r| r.ops).collect();
    assert_eq!(ops, vec![200, 200, 200, 100]);
}

#[test]
fn existing_databases_are_reused() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("db");
    let d = db.to_str().unwrap();
    execute(&bench_args(&[
        "--benchmarks",
        "fillseq",
        "--num",
        "200",
        "--db",
        d,
    ]))
    .unwrap();
    let out = execute(&bench_args(&[
        "--benchmarks",
        "fillseq,readrandom",
        "--num",
        "200",
        "--db",
        d,
        "--use-existing-db",
    ]))
    .unwrap();
    // fillseq is skipped; every key is found; live bytes are unknown.
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.records[0].found, Some(200));
    assert_eq!(out.records[0].live_bytes, None);
}

#[test]
fn duration_bounds_random_benchmarks_by_time() {
    let a = bench_args(&[
        "--benchmarks",
        "fillseq,readrandom",
        "--num",
        "100",
        "--duration",
        "1",
    ]);
    let out = execute(&a).unwrap();
    // fillseq ignores --duration; readrandom runs until the deadline, past --reads.
    assert_eq!(out.records[0].ops, 100);
    assert!(out.records[1].seconds >= 1.0);
    assert_eq!(out.records[1].found, Some(out.records[1].ops));
}

#[test]
fn db_bench_workloads_on_sharded() {
    db_bench_workloads("sharded");
}

#[test]
fn ycsb_workloads_on_sharded() {
    ycsb_workloads("sharded");
}

#[cfg(feature = "rocksdb")]
#[test]
fn db_bench_workloads_on_sharded_rocksdb() {
    db_bench_workloads("sharded-rocksdb");
}

/// `--async` and a `--rate` list: every put is counted once its callback ran, each rate gets
/// its own label, and the latency plot is drawn.
#[test]
fn async_puts_and_offered_rates() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("latency.png");
    let a = bench_args(&[
        "--engine",
        "sharded,strata",
        "--benchmarks",
        "fillrandom,readrandom",
        "--num",
        "3000",
        "--threads",
        "2",
        "--shards",
        "3",
        "--async",
        "--rate",
        "20000,40000",
        "--latency-plot",
        plot.to_str().unwrap(),
    ]);
    let out = execute(&a).unwrap();
    for rate in ["20000", "40000"] {
        for e in ["sharded", "strata"] {
            let fill = out
                .records
                .iter()
                .find(|r| r.engine == e && r.benchmark == format!("fillrandom@{rate}"))
                .expect("a record per engine and rate");
            assert_eq!(fill.ops, 6000);
            assert_eq!(fill.latency.as_ref().unwrap().count, 6000, "{e} {rate}");
            let read = out
                .records
                .iter()
                .find(|r| r.engine == e && r.benchmark == format!("readrandom@{rate}"))
                .unwrap();
            assert_eq!(read.ops, 6000);
            assert!(read.found.unwrap() > 0, "the async puts are all visible");
        }
    }
    assert!(std::fs::metadata(&plot).unwrap().len() > 0);
}

/// `--read-distribution gaussian`: each reading benchmark finds exactly the keys a replay of
/// the Gaussian draws finds in fillrandom's set, which uniform draws would not.
#[test]
fn gaussian_reads_follow_their_distribution() {
    use super::dist::ReadDist;
    let a = bench_args(&[
        "--benchmarks",
        "fillrandom,readrandom,multireadrandom,seekrandom",
        "--num",
        "2000",
        "--writes",
        "300",
        "--reads",
        "400",
        "--threads",
        "2",
        "--read-distribution",
        "gaussian",
        "--gaussian-sigma",
        "0.05",
    ]);
    let out = execute(&a).unwrap();
    let r = by_label(&out.records);
    let set: BTreeSet<u64> = draws(&a, 0, 0..2, 300).into_iter().collect();
    let d = a.read_dist();
    assert_eq!(
        d,
        ReadDist::Gaussian {
            sigma_fraction: 0.05
        }
    );
    let gaussian = |index: usize| -> Vec<u64> {
        let mut out = Vec::new();
        for t in 0..2 {
            let (mut rng, _) = thread_rng(a.seed, index, t, a.value_sizes());
            out.extend((0..400).map(|_| d.next(&mut rng, a.num)));
        }
        out
    };
    for (label, index) in [("readrandom", 1), ("multireadrandom", 2), ("seekrandom", 3)] {
        let keys = gaussian(index);
        // Every draw within 5 sigmas (500 keys) of the middle.
        assert!(keys.iter().all(|&k| (500..1500).contains(&k)), "{label}");
        assert_eq!(r[label].lookups, Some(800), "{label}");
        assert_eq!(r[label].found, Some(hits(&keys, &set)), "{label}");
        assert_ne!(
            hits(&keys, &set),
            hits(&draws(&a, index, 0..2, 400), &set),
            "{label}: the replay cannot tell the distributions apart"
        );
    }
}

/// `--opt l0_tier_dir=DIR` reaches Strata's engines: the sharded front gives each shard its
/// own subdirectory; the tier goes with the temporary database; a non-empty tier directory
/// is refused before anything is deleted.
#[test]
fn l0_tier_dir_reaches_the_engines_and_goes_with_the_database() {
    let t = tempfile::tempdir().unwrap();
    let tier = t.path().join("tier");
    let tier_opt = format!("l0_tier_dir={}", tier.display());
    for engine in ["strata", "sharded"] {
        let a = bench_args(&[
            "--engine",
            engine,
            "--benchmarks",
            "fillseq,readrandom,fillseq",
            "--num",
            "300",
            "--shards",
            "2",
            "--opt",
            &tier_opt,
        ]);
        assert_eq!(
            a.engine_config(a.engines[0]).l0_tier_dir(),
            Some(tier.clone())
        );
        let out = execute(&a).unwrap();
        assert_eq!(out.records[1].found, Some(300), "{engine}");
        assert!(
            !tier.exists(),
            "{engine}: the tier outlived its temporary database"
        );
    }
    // Kept databases keep their tier; the sharded front made one directory per shard.
    let db = t.path().join("db");
    let a = bench_args(&[
        "--engine",
        "sharded",
        "--benchmarks",
        "fillseq",
        "--num",
        "100",
        "--shards",
        "2",
        "--db",
        db.to_str().unwrap(),
        "--opt",
        &tier_opt,
    ]);
    execute(&a).unwrap();
    assert!(tier.join("shard-000").is_dir() && tier.join("shard-001").is_dir());
    std::fs::write(tier.join("shard-000").join("precious"), b"x").unwrap();
    let a = bench_args(&[
        "--benchmarks",
        "fillseq",
        "--num",
        "100",
        "--opt",
        &tier_opt,
    ]);
    let e = format!("{:#}", execute(&a).err().unwrap());
    assert!(e.contains("is not empty"), "{e}");
    assert!(tier.join("shard-000").join("precious").exists());
    // "off" turns the tier off.
    let a = bench_args(&["--opt", &tier_opt, "--opt", "l0_tier_dir=off"]);
    assert_eq!(a.engine_config(a.engines[0]).l0_tier_dir(), None);
}
