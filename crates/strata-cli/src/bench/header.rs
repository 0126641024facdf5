//! The environment header printed before the results: version, build, machine, the run's
//! settings and each engine's options.

use super::args::BenchArgs;
use super::catalog::EngineKind;
use super::dist::ReadDist;
use super::env;
use crate::text::human_bytes;
use std::path::Path;

/// What the header says about one engine.
pub struct EngineInfo {
    pub kind: EngineKind,
    pub options: String,
    pub notes: Vec<String>,
}

/// The environment header printed before the results.
pub fn header(args: &BenchArgs, infos: &[EngineInfo], dir: &Path, temp: bool) -> String {
    let mut h = String::new();
    let mut line = |k: &str, v: String| h.push_str(&format!("{k:<12}{v}\n"));
    line(
        "Strata:",
        format!(
            "version {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            env::git_commit()
        ),
    );
    let names: Vec<&str> = infos.iter().map(|i| i.kind.name()).collect();
    line("Engine:", names.join(", "));
    line(
        "Build:",
        if env::is_debug_build() {
            "debug (UNOPTIMIZED)".to_string()
        } else {
            "release".to_string()
        },
    );
    let cpu = env::cpu_model().unwrap_or_else(|| "unknown model".to_string());
    line("CPU:", format!("{} cores, {cpu}", env::cores()));
    line(
        "Memory:",
        env::memory_total().map_or("unknown".to_string(), human_bytes),
    );
    line(
        "Kernel:",
        env::kernel().unwrap_or_else(|| "unknown".to_string()),
    );
    line(
        "Keys:",
        format!(
            "{} bytes each (8-byte big-endian index, padded with '0')",
            args.key_size
        ),
    );
    line(
        "Values:",
        match args.value_size_max {
            Some(max) if max > args.value_size => format!(
                "{} to {max} bytes, uniform (random, incompressible)",
                args.value_size
            ),
            _ => format!("{} bytes each (random, incompressible)", args.value_size),
        },
    );
    line(
        "Entries:",
        match args.writes {
            Some(w) => format!("{} (writes per thread: {w})", args.num),
            None => args.num.to_string(),
        },
    );
    line(
        "Reads:",
        match args.read_dist() {
            ReadDist::Uniform => args.reads().to_string(),
            ReadDist::Gaussian { sigma_fraction } => format!(
                "{} (gaussian keys: mean {}, standard deviation {sigma_fraction} x {} keys, clamped)",
                args.reads(),
                args.num / 2,
                args.num
            ),
        },
    );
    line("Threads:", args.threads.to_string());
    if args.asynchronous {
        line(
            "Async:",
            format!(
                "puts through the asynchronous API of the sharded engines, up to {} in flight per thread; other engines write synchronously",
                args.async_depth
            ),
        );
    }
    if args.rate.iter().any(|&r| r > 0) {
        let rates: Vec<String> = args.rate.iter().map(|r| r.to_string()).collect();
        line(
            "Rate:",
            format!(
                "offered {} ops/s over all threads; latency counts from each operation's scheduled start",
                rates.join(", ")
            ),
        );
    }
    if args.duration > 0 {
        line(
            "Duration:",
            format!("{} s per random benchmark", args.duration),
        );
    }
    line(
        "RawSize:",
        format!(
            "{} (estimated)",
            human_bytes(args.num * (args.key_size + args.mean_value_size()) as u64)
        ),
    );
    let what = if temp && args.keep {
        " (temporary, kept: --keep)"
    } else if temp {
        " (temporary, removed at the end)"
    } else if args.use_existing_db {
        " (existing database)"
    } else {
        ""
    };
    let per_engine = if infos.len() > 1 {
        ", one directory per engine"
    } else {
        ""
    };
    line("Database:", format!("{}{what}{per_engine}", dir.display()));
    line(
        "Writes:",
        format!("sync={} disable_wal={}", args.sync, args.disable_wal),
    );
    line(
        "Tables:",
        format!(
            "cache={} bloom_bits={} compression={} direct_io={}",
            human_bytes(args.cache_bytes),
            args.bloom_bits,
            args.compression.name(),
            args.direct_io
        ),
    );
    if args.rounds > 1 {
        line(
            "Rounds:",
            format!("{} (engines alternate, medians reported)", args.rounds),
        );
    }
    for info in infos {
        let key = if infos.len() == 1 {
            "Options:".to_string()
        } else {
            format!("{}:", info.kind.name())
        };
        line(&key, info.options.clone());
        for n in &info.notes {
            line("Note:", format!("{}: {n}", info.kind.name()));
        }
    }
    if !args.opts.is_empty() {
        let set: Vec<String> = args.opts.iter().map(|(n, v)| format!("{n}={v}")).collect();
        line("Overrides:", set.join(" "));
    }
    if env::is_debug_build() {
        h.push_str(env::DEBUG_WARNING);
        h.push('\n');
    }
    h.push_str(&"-".repeat(48));
    h.push('\n');
    h
}

#[cfg(test)]
mod tests {
    use super::super::args::bench_args;
    use super::super::run::describe;
    use super::*;

    #[test]
    fn header_describes_the_run() {
        let a = bench_args(&["--num", "1000", "--opt", "filter=false"]).unwrap();
        let infos =
            vec![describe(EngineKind::Strata, &a.engine_config(EngineKind::Strata)).unwrap()];
        let h = header(&a, &infos, Path::new("/tmp/x"), true);
        for want in [
            "Strata:     version ",
            "Engine:     strata\n",
            "CPU:        ",
            "Memory:     ",
            "Kernel:     ",
            "Keys:       16 bytes each",
            "Values:     128 bytes each",
            "Entries:    1000\n",
            "Database:   /tmp/x (temporary, removed at the end)\n",
            "Overrides:  filter=false\n",
            "Options:    write_buffer_bytes=",
            "filter=false",
            "Tables:     cache=8.0 MiB bloom_bits=10 compression=none direct_io=false\n",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        assert_eq!(h.contains("WARNING"), cfg!(debug_assertions));

        let a = bench_args(&["--engine", "strata,fjall", "--direct-io", "--rounds", "2"]).unwrap();
        let infos: Vec<EngineInfo> = a
            .engines
            .iter()
            .map(|&k| describe(k, &a.engine_config(k)).unwrap())
            .collect();
        let h = header(&a, &infos, Path::new("/tmp/x"), false);
        for want in [
            "Engine:     strata, fjall\n",
            "strata:     write_buffer_bytes=",
            "fjall:      cache_size=8.0 MiB",
            "Note:       fjall: fjall has no direct I/O; --direct-io ignored\n",
            "Rounds:     2 (engines alternate",
            "one directory per engine",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
    }
}
