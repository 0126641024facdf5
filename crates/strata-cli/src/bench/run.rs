//! One `strata bench` run: checks the flags, prepares the database directories, runs the
//! benchmark list on each engine for each offered rate and round, then prints the summary
//! and writes the JSON and plots.

use super::args::BenchArgs;
#[cfg(not(feature = "rocksdb"))]
use super::catalog::NO_ROCKSDB;
use super::catalog::{Benchmark, EngineKind};
use super::engine::{Engine, EngineConfig, Strata};
use super::fjall_engine::Fjall;
use super::header::{header, EngineInfo};
use super::print::summary_table;
use super::record::Record;
#[cfg(feature = "rocksdb")]
use super::rocks_engine;
use super::runner::Runner;
use super::sharded_engine::Sharded;
use super::summary::{summarize, SummaryRow};
use super::{env, json, latency_plot, plot};
use crate::dbdir::require_new_or_empty;
use crate::store::{inspect, require_bench_db, Found, Kind};
#[cfg(not(feature = "rocksdb"))]
use anyhow::bail;
use anyhow::{Context, Result};
use std::path::Path;

pub(super) fn describe(kind: EngineKind, cfg: &EngineConfig) -> Result<EngineInfo> {
    let (options, notes) = match kind {
        EngineKind::Strata => (Strata::describe(cfg)?, Strata::notes(cfg)),
        EngineKind::Fjall => (Fjall::describe(cfg)?, Fjall::notes(cfg)),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => (
            rocks_engine::Rocks::describe(cfg)?,
            rocks_engine::Rocks::notes(cfg),
        ),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => bail!(NO_ROCKSDB),
        EngineKind::Sharded => (
            Sharded::<strata::StrataEngine>::describe(cfg)?,
            Sharded::<strata::StrataEngine>::notes(cfg),
        ),
        #[cfg(feature = "rocksdb")]
        EngineKind::ShardedRocksdb => (
            Sharded::<strata::rocks::RocksEngine>::describe(cfg)?,
            Sharded::<strata::rocks::RocksEngine>::notes(cfg),
        ),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::ShardedRocksdb => bail!(NO_ROCKSDB),
    };
    Ok(EngineInfo {
        kind,
        options,
        notes,
    })
}

fn run_engine(
    kind: EngineKind,
    args: &BenchArgs,
    cfg: EngineConfig,
    dir: &Path,
    round: usize,
    labels: &[String],
) -> Result<Vec<Record>> {
    match kind {
        EngineKind::Strata => Runner::<Strata>::run(args, cfg, dir, round, labels),
        EngineKind::Fjall => Runner::<Fjall>::run(args, cfg, dir, round, labels),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Runner::<rocks_engine::Rocks>::run(args, cfg, dir, round, labels),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => bail!(NO_ROCKSDB),
        EngineKind::Sharded => {
            Runner::<Sharded<strata::StrataEngine>>::run(args, cfg, dir, round, labels)
        }
        #[cfg(feature = "rocksdb")]
        EngineKind::ShardedRocksdb => {
            Runner::<Sharded<strata::rocks::RocksEngine>>::run(args, cfg, dir, round, labels)
        }
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::ShardedRocksdb => bail!(NO_ROCKSDB),
    }
}

/// Runs `strata bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    execute(&args).map(|_| ())
}

/// Everything a run measured (read by the tests; the command prints it).
#[cfg_attr(not(test), allow(dead_code))]
pub struct RunOutcome {
    pub records: Vec<Record>,
    pub summary: Vec<SummaryRow>,
}

/// With --use-existing-db and one of Strata's engines alone, benchmarks the database in --db
/// through the API of its kind: `sharded` for a sharded database, `strata` for a single
/// engine instance, whichever of the two --engine named.
fn fit_existing_db(args: &BenchArgs) -> BenchArgs {
    let mut a = args.clone();
    if let (true, Some(d), [k @ (EngineKind::Strata | EngineKind::Sharded)]) =
        (a.use_existing_db, &a.db, a.engines.as_mut_slice())
    {
        match inspect(d) {
            Ok(Found::Db(Kind::Sharded)) => *k = EngineKind::Sharded,
            Ok(Found::Db(Kind::Engine)) => *k = EngineKind::Strata,
            _ => {}
        }
    }
    a
}

pub(super) fn execute(args: &BenchArgs) -> Result<RunOutcome> {
    let args = &fit_existing_db(args);
    args.validate()?;
    let infos = args
        .engines
        .iter()
        .map(|&k| describe(k, &args.engine_config(k)))
        .collect::<Result<Vec<_>>>()?;
    let several = args.engines.len() > 1;
    let engine_dir = |root: &Path, k: EngineKind| {
        if several {
            root.join(k.name())
        } else {
            root.to_path_buf()
        }
    };

    let (root, temp) = match &args.db {
        Some(d) if args.use_existing_db => {
            for &k in &args.engines {
                let want = match k {
                    EngineKind::Strata => Some(Kind::Engine),
                    EngineKind::Sharded => Some(Kind::Sharded),
                    _ => None,
                };
                require_bench_db(&engine_dir(d, k), want, k.name())?;
            }
            (d.clone(), None)
        }
        Some(d) => {
            require_new_or_empty(d)?;
            std::fs::create_dir_all(d)
                .with_context(|| format!("cannot create directory {}", d.display()))?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("strata-bench-")
                .tempdir()
                .context("cannot create a temporary directory for the database")?;
            (t.path().to_path_buf(), Some(t))
        }
    };

    // Each engine's L0 tier directory (Strata's engines, --opt l0_tier_dir=DIR) goes with its
    // database: like a new --db it must hold nothing the fresh benchmarks would delete.
    let tiers: Vec<_> = args
        .engines
        .iter()
        .filter_map(|&k| args.engine_config(k).l0_tier_dir())
        .collect();
    if !args.use_existing_db {
        for d in &tiers {
            require_new_or_empty(d)
                .with_context(|| format!("--opt l0_tier_dir={}", d.display()))?;
        }
    }
    if env::is_debug_build() {
        eprintln!("{}", env::DEBUG_WARNING);
    }
    print!("{}", header(args, &infos, &root, temp.is_some()));
    if !args.use_existing_db {
        let mut loaded = false;
        for b in &args.benchmarks {
            loaded |= *b == Benchmark::YcsbLoad;
            if b.ycsb().is_some() && !loaded {
                println!(
                    "Note:       {} runs before any ycsb-load: its reads find nothing \
                     (YCSB records are not db_bench's keys)",
                    b.name()
                );
                break;
            }
        }
    }

    let base_labels = args.labels();
    // With several --rate values every benchmark runs once per rate, labelled NAME@RATE.
    let multi_rate = args.rate.len() > 1;
    let rate_labels = |rate: u64| -> Vec<String> {
        if multi_rate {
            base_labels.iter().map(|l| format!("{l}@{rate}")).collect()
        } else {
            base_labels.clone()
        }
    };
    let mut records = Vec::new();
    let result = (|| -> Result<()> {
        for &rate in &args.rate {
            let mut a = args.clone();
            a.rate = vec![rate];
            let labels = rate_labels(rate);
            for round in 1..=args.rounds {
                for &k in &args.engines {
                    let dir = engine_dir(&root, k);
                    if !args.use_existing_db {
                        // Every round starts from an empty directory: ours since the start.
                        if dir.exists() {
                            std::fs::remove_dir_all(&dir)
                                .with_context(|| format!("cannot empty {}", dir.display()))?;
                        }
                        std::fs::create_dir_all(&dir)
                            .with_context(|| format!("cannot create {}", dir.display()))?;
                        a.engine_config(k).empty_l0_tier()?;
                    }
                    if several || args.rounds > 1 || multi_rate {
                        println!();
                        let at = if multi_rate {
                            format!(", offered {rate} ops/s")
                        } else {
                            String::new()
                        };
                        println!("=== {} (round {round}/{}{at}) ===", k.name(), args.rounds);
                    }
                    let recs = run_engine(k, &a, a.engine_config(k), &dir, round, &labels)?;
                    records.extend(recs);
                    if temp.is_some() && !args.keep && several {
                        // Free the space before the next engine writes its data.
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                }
            }
        }
        Ok(())
    })();
    let labels: Vec<String> = args.rate.iter().flat_map(|&r| rate_labels(r)).collect();
    let benchmarks: Vec<Benchmark> = args
        .rate
        .iter()
        .flat_map(|_| args.benchmarks.iter().copied())
        .collect();

    if temp.is_some() && !args.keep {
        // A temporary database takes its tier with it (a tmpfs holds it in memory).
        for d in &tiers {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    if let Some(t) = temp {
        if args.keep {
            println!("Database kept at {}", t.keep().display());
        } else if let Err(e) = t.close() {
            eprintln!(
                "warning: cannot remove temporary directory {}: {e}",
                root.display()
            );
        }
    }
    result?;

    let names: Vec<&str> = args.engines.iter().map(|e| e.name()).collect();
    // One-shot benchmarks (compact, flush, waitforcompaction) have no rate worth a median:
    // their lines above give their time.
    let one_shot: Vec<&String> = labels
        .iter()
        .zip(&benchmarks)
        .filter(|(_, b)| b.one_shot())
        .map(|(l, _)| l)
        .collect();
    let rated: Vec<Record> = records
        .iter()
        .filter(|r| !one_shot.contains(&&r.benchmark))
        .cloned()
        .collect();
    let summary = summarize(&rated, &names);
    if several || args.rounds > 1 || multi_rate {
        println!();
        println!(
            "** Summary: medians over {} round(s); min–max of ops/s; ratio of ops/s to {} **",
            args.rounds, names[0]
        );
        print!("{}", summary_table(&summary, names[0]));
    }
    if let Some(path) = &args.json {
        json::write(path, args, &infos, &records, &summary)?;
        println!("JSON written to {}", path.display());
    }
    if let Some(path) = &args.latency_plot {
        let curves = latency_plot::curves(args, &base_labels, &summary);
        let title = format!(
            "{} latency vs offered load:",
            base_labels.first().map(String::as_str).unwrap_or("")
        );
        latency_plot::draw(path, &title, &curves)?;
        println!("Latency plot written to {}", path.display());
    }
    if let Some(path) = &args.plot {
        let panels = plot::panels(&records, &summary);
        plot::draw(path, &names, &panels)?;
        println!("Plot written to {}", path.display());
    }
    Ok(RunOutcome { records, summary })
}
