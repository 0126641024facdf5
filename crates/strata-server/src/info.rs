//! INFO: Redis's sections and field names (server.c `genRedisInfoString`) for what Strata
//! has, plus a `strata` section.
//!
//! Layer: services (above store and types; below commands).

use crate::error::CmdError;
use crate::server::{Shared, REDIS_VERSION};
use std::fmt::Write;
use std::sync::atomic::Ordering;

const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "strata",
];

/// CPU seconds (user, system) of the process, its reaped children and its main thread, from
/// /proc (zeros where there is none). /proc counts in USER_HZ ticks, 100 per second on every
/// Linux architecture Strata builds for.
fn cpu_seconds() -> [(f64, f64); 3] {
    let fields = |path: String| -> Option<Vec<u64>> {
        let stat = std::fs::read_to_string(path).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = &stat[stat.rfind(')')? + 2..];
        Some(
            rest.split_whitespace()
                .map(|f| f.parse::<u64>().unwrap_or(0))
                .collect(),
        )
    };
    let secs = |ticks: Option<&u64>| ticks.map_or(0.0, |&t| t as f64 / 100.0);
    let me = fields("/proc/self/stat".to_string()).unwrap_or_default();
    let main = fields(format!("/proc/self/task/{}/stat", std::process::id())).unwrap_or_default();
    // After the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
    [
        (secs(me.get(11)), secs(me.get(12))),
        (secs(me.get(13)), secs(me.get(14))),
        (secs(main.get(11)), secs(main.get(12))),
    ]
}

/// Resident set size in bytes, from /proc (0 where there is none).
pub(crate) fn rss_bytes() -> u64 {
    proc_status_field("VmRSS:").map_or(0, |kib| kib * 1024)
}

/// A numeric field of `/proc/self/status` (its first number: `VmRSS:  1234 kB` gives 1234);
/// `None` where there is no such file (not Linux) or field.
pub(crate) fn proc_status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(name))?;
    line.split_whitespace().next()?.parse().ok()
}

/// Redis's `bytesToHuman`.
fn human(n: u64) -> String {
    let n = n as f64;
    let units = [
        (1u64 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in units {
        if n >= size as f64 {
            return format!("{:.2}{unit}", n / size as f64);
        }
    }
    format!("{n}B")
}

/// The INFO text for `wanted` sections (`all`, `everything`: all of them; none or
/// `default`: all but commandstats, as Redis).
pub fn render(
    shared: &Shared,
    tx: &crate::store::Tx<'_>,
    wanted: &[String],
) -> Result<String, CmdError> {
    let all = wanted
        .iter()
        .any(|w| matches!(w.as_str(), "all" | "everything"));
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut out = String::new();
    for &sec in SECTIONS {
        let by_default = default && sec != "commandstats" && sec != "latencystats";
        if !all && !by_default && !wanted.iter().any(|w| w == sec) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = sec.to_string();
        title[..1].make_ascii_uppercase();
        if sec == "cpu" {
            title = "CPU".to_string(); // as Redis spells it
        }
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in section(shared, tx, sec)? {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    Ok(out)
}

fn section(
    shared: &Shared,
    tx: &crate::store::Tx<'_>,
    sec: &str,
) -> Result<Vec<(String, String)>, CmdError> {
    let cfg = shared.config.read().clone();
    let st = &shared.stats;
    let ks = &shared.store.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
    let mut f: Vec<(String, String)> = Vec::new();
    let mut kv = |k: &str, v: String| f.push((k.to_string(), v));
    match sec {
        "server" => {
            let up = shared.started.elapsed().as_secs();
            kv("redis_version", REDIS_VERSION.to_string());
            kv("redis_mode", "standalone".to_string());
            // Redis prints `uname -s -r -m`.
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|r| format!(" {}", r.trim()))
                .unwrap_or_default();
            let os = match std::env::consts::OS {
                "linux" => "Linux",
                other => other,
            };
            kv("os", format!("{os}{release} {}", std::env::consts::ARCH));
            kv("arch_bits", (usize::BITS).to_string());
            kv("process_id", std::process::id().to_string());
            kv("run_id", shared.run_id.clone());
            let port = shared.local_addrs.first().map_or(cfg.port, |a| a.port());
            kv("tcp_port", port.to_string());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            kv("server_time_usec", now.as_micros().to_string());
            kv("uptime_in_seconds", up.to_string());
            kv("uptime_in_days", (up / 86400).to_string());
            kv(
                "executable",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            kv(
                "config_file",
                cfg.config_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
        }
        "clients" => {
            kv(
                "connected_clients",
                st.connected_clients.load(Ordering::Relaxed).to_string(),
            );
            kv("maxclients", cfg.maxclients.to_string());
            kv("blocked_clients", shared.blocked.len().to_string());
            let tracking = shared.store.tracking.client_count();
            kv("tracking_clients", tracking.to_string());
        }
        "memory" => {
            let rss = rss_bytes();
            kv("used_memory", rss.to_string());
            kv("used_memory_human", human(rss));
            kv("used_memory_rss", rss.to_string());
            kv("used_memory_rss_human", human(rss));
            kv("used_memory_lua", shared.scripts.lua_memory().to_string());
            kv(
                "used_memory_vm_eval",
                shared.scripts.lua_memory().to_string(),
            );
            kv(
                "number_of_cached_scripts",
                shared.scripts.count().to_string(),
            );
            kv(
                "number_of_functions",
                shared.functions.counts().1.to_string(),
            );
            kv("maxmemory", "0".to_string());
            kv("maxmemory_human", "0B".to_string());
            kv("maxmemory_policy", "noeviction".to_string());
        }
        "persistence" => {
            // Every write goes to the shards' logs: the log is always on, snapshots never.
            // A replica's full sync loads beside the served dataset (design §13.25).
            kv("loading", "0".to_string());
            let loading = u8::from(shared.replication.is_loading());
            kv("async_loading", loading.to_string());
            for (k, v) in shared.saves.info_fields() {
                kv(k, v);
            }
            kv("aof_enabled", "1".to_string());
            kv("aof_rewrite_in_progress", "0".to_string());
            // Strata's: the durability policy and when the logs were last synced.
            kv("appendfsync", cfg.appendfsync.name().to_string());
            kv(
                "aof_last_sync_time",
                (shared.store.last_sync_ms() / 1000).to_string(),
            );
            let ok = shared.store.db().health().is_ok();
            kv(
                "aof_last_write_status",
                if ok { "ok" } else { "err" }.to_string(),
            );
        }
        "stats" => {
            kv("total_connections_received", load(&st.connections_received));
            kv("total_commands_processed", load(&st.commands_processed));
            kv("total_net_input_bytes", load(&st.net_input_bytes));
            kv("total_net_output_bytes", load(&st.net_output_bytes));
            kv("rejected_connections", load(&st.rejected_connections));
            let m = &shared.master;
            kv("sync_full", load(&m.sync_full));
            kv("sync_partial_ok", load(&m.sync_partial_ok));
            kv("sync_partial_err", load(&m.sync_partial_err));
            kv("expired_keys", load(&ks.expired_keys));
            let stale = f64::from_bits(ks.expired_stale_perc.load(Ordering::Relaxed));
            kv("expired_stale_perc", format!("{stale:.2}"));
            kv(
                "expired_time_cap_reached_count",
                load(&ks.expired_time_cap_reached),
            );
            kv("evicted_keys", "0".to_string());
            kv("evicted_scripts", load(&shared.scripts.evicted));
            kv("keyspace_hits", load(&ks.hits));
            kv("keyspace_misses", load(&ks.misses));
            let (channels, patterns, shard) = shared.pubsub.counts();
            kv("pubsub_channels", channels.to_string());
            kv("pubsub_patterns", patterns.to_string());
            kv("pubsubshard_channels", shard.to_string());
            let (keys, items, prefixes) = shared.store.tracking.totals();
            kv("tracking_total_keys", keys.to_string());
            kv("tracking_total_items", items.to_string());
            kv("tracking_total_prefixes", prefixes.to_string());
            kv("unexpected_error_replies", "0".to_string());
            kv(
                "total_error_replies",
                shared.cmdstats.total_errors().to_string(),
            );
        }
        "commandstats" => {
            for (k, v) in shared.cmdstats.command_lines() {
                kv(&k, v);
            }
        }
        "latencystats" => {
            // Redis's `fillPercentileDistributionLatencies`, per command that ran.
            let percentiles = cfg
                .tuning
                .get("latency-tracking-info-percentiles")
                .and_then(|p| crate::latency_histogram::parse_percentiles(p))
                .unwrap_or_default();
            for (name, h) in shared.latency.histograms.merged() {
                let v: Vec<String> = percentiles
                    .iter()
                    .map(|&p| {
                        format!(
                            "p{}={:.3}",
                            crate::latency_histogram::percentile_name(p),
                            crate::latency_histogram::percentile_usec(&h, p)
                        )
                    })
                    .collect();
                kv(&format!("latency_percentiles_usec_{name}"), v.join(","));
            }
        }
        "errorstats" => {
            for (k, v) in shared.cmdstats.error_lines() {
                kv(&k, v);
            }
        }
        "replication" => {
            // The replica side (`replica/`); as a master, no replicas (not built yet).
            for (k, v) in shared.replication.info_fields(shared) {
                kv(k, v);
            }
        }
        "cluster" => kv(
            "cluster_enabled",
            u8::from(shared.cluster.is_some()).to_string(),
        ),
        "cpu" => {
            let [(user, sys), (cuser, csys), (muser, msys)] = cpu_seconds();
            kv("used_cpu_sys", format!("{sys:.6}"));
            kv("used_cpu_user", format!("{user:.6}"));
            kv("used_cpu_sys_children", format!("{csys:.6}"));
            kv("used_cpu_user_children", format!("{cuser:.6}"));
            kv("used_cpu_sys_main_thread", format!("{msys:.6}"));
            kv("used_cpu_user_main_thread", format!("{muser:.6}"));
        }
        "keyspace" => {
            // Counted by scanning each database: fine for tests and small data sets.
            for db in 0..cfg.databases {
                let (mut keys, mut expires, mut ttl_sum) = (0u64, 0u64, 0u128);
                let now = crate::store::now_ms();
                // Named by logical database, counted in its physical one (SWAPDB).
                tx.scan_db(shared.store.dbs.physical(db as u8), |_, m| {
                    keys += 1;
                    if m.expire_ms != 0 {
                        expires += 1;
                        ttl_sum += u128::from(m.expire_ms.saturating_sub(now));
                    }
                })?;
                if keys > 0 {
                    let avg = if expires > 0 {
                        ttl_sum / u128::from(expires)
                    } else {
                        0
                    };
                    kv(
                        &format!("db{db}"),
                        format!("keys={keys},expires={expires},avg_ttl={avg}"),
                    );
                }
            }
        }
        "strata" => {
            let db = shared.store.db();
            let b = db.batch_stats();
            kv("strata_version", env!("CARGO_PKG_VERSION").to_string());
            kv("strata_dir", db.path().display().to_string());
            kv("strata_shards", db.shard_count().to_string());
            kv("strata_appendfsync", cfg.appendfsync.name().to_string());
            kv("strata_write_batches", b.write_batches().to_string());
            kv("strata_write_requests", b.write_requests().to_string());
            kv("strata_direct_writes", b.direct_writes.to_string());
            kv("strata_read_batches", b.read_batches().to_string());
            kv("strata_read_requests", b.read_requests().to_string());
            kv("strata_cross_shard_parts", b.cross_shard_parts.to_string());
            kv("strata_committed_gsn", db.committed_gsn().to_string());
            let h = db.hot_stats().unwrap_or_default();
            kv("hot_memory_bytes", cfg.hot_memory_bytes.to_string());
            kv("hot_memory_used", h.used_bytes.to_string());
            kv("hot_records", h.records.to_string());
            kv("hot_hits", h.hits.to_string());
            kv("hot_misses", h.misses.to_string());
            let lookups = h.hits + h.misses;
            let rate = if lookups == 0 {
                0.0
            } else {
                h.hits as f64 / lookups as f64
            };
            kv("hot_hit_rate", format!("{rate:.4}"));
            kv("hot_evictions", h.evictions.to_string());
            // Where the rest of the memory is: the engines' parts, summed over the shards.
            let m = db.engine_memory();
            kv("strata_memtables_bytes", m.memtables.to_string());
            kv("strata_block_cache_bytes", m.block_cache.to_string());
            kv("strata_table_readers_bytes", m.table_readers.to_string());
            kv("strata_threads", thread_count().to_string());
        }
        _ => {}
    }
    Ok(f)
}

/// Threads of this process (each may hold a thread-local io_uring ring and its buffers).
fn thread_count() -> u64 {
    proc_status_field("Threads:").unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rss_and_threads_are_read() {
        // This test runs on a thread of its own beside the main thread.
        assert!(super::thread_count() >= 2);
        let rss = super::rss_bytes();
        assert!(rss > 1 << 20 && rss < 1 << 40, "{rss}");
        assert_eq!(super::proc_status_field("NoSuchField:"), None);
    }

    #[test]
    fn cpu_time_is_read() {
        // Burn 100 ms of CPU so the process has used some ticks.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let [(user, sys), _, _] = super::cpu_seconds();
        assert!(user + sys > 0.0, "user {user} sys {sys}");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(super::human(100), "100B");
        assert_eq!(super::human(1536), "1.50K");
        assert_eq!(super::human(3 << 20), "3.00M");
    }
}
