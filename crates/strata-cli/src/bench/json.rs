//! `--json FILE`: every figure of every run, the medians and the environment, as JSON.

use super::args::BenchArgs;
use super::env;
use super::header::EngineInfo;
use super::record::Record;
use super::summary::SummaryRow;
use anyhow::{Context, Result};
use std::path::Path;

pub fn write(
    path: &Path,
    args: &BenchArgs,
    infos: &[EngineInfo],
    records: &[Record],
    summary: &[SummaryRow],
) -> Result<()> {
    let doc = serde_json::json!({
        "tool": "strata bench",
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env::git_commit(),
        // The program by its file name only: a recorded run must not name this machine's paths.
        "command_line": std::env::args()
            .enumerate()
            .map(|(i, a)| if i == 0 {
                std::path::Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
            } else {
                a
            })
            .collect::<Vec<_>>(),
        "environment": {
            "build": if env::is_debug_build() { "debug" } else { "release" },
            "warning": env::is_debug_build().then_some(
                "built without optimizations: the figures are meaningless"),
            "cores": env::cores(),
            "cpu": env::cpu_model(),
            "memory_bytes": env::memory_total(),
            "kernel": env::kernel(),
        },
        "args": {
            "benchmarks": args.benchmarks.iter().map(|b| b.name()).collect::<Vec<_>>(),
            "engines": args.engines.iter().map(|e| e.name()).collect::<Vec<_>>(),
            "rounds": args.rounds,
            "num": args.num,
            "reads": args.reads(),
            "writes": args.writes(),
            "duration": args.duration,
            "key_size": args.key_size,
            "value_size": args.value_size,
            "value_size_max": args.value_size_max,
            "threads": args.threads,
            "batch_size": args.batch_size,
            "seek_nexts": args.seek_nexts,
            "sync": args.sync,
            "disable_wal": args.disable_wal,
            "direct_io": args.direct_io,
            "cache_bytes": args.cache_bytes,
            "bloom_bits": args.bloom_bits,
            "compression": args.compression.name(),
            "seed": args.seed,
            "use_existing_db": args.use_existing_db,
            "ycsb_distribution": args.ycsb_distribution.map(|d| d.name()),
            "read_distribution": args.read_dist().name(),
            "gaussian_sigma": matches!(args.read_dist(), super::dist::ReadDist::Gaussian { .. })
                .then_some(args.gaussian_sigma),
            "opts": args.opts.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>(),
        },
        "engines": infos.iter().map(|i| serde_json::json!({
            "name": i.kind.name(),
            "options": i.options,
            "notes": i.notes,
        })).collect::<Vec<_>>(),
        "runs": records,
        "summary": summary,
    });
    let text = serde_json::to_string_pretty(&doc).context("cannot encode the results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}
