//! INFO: Redis's sections and field names (server.c `genRedisInfoString`) for what Strata
//! has, plus a `strata` section.

use crate::cmd::CmdError;
use crate::server::{Shared, REDIS_VERSION};
use std::fmt::Write;
use std::sync::atomic::Ordering;

const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "keyspace",
    "strata",
];

/// Resident set size in bytes, from /proc (0 where there is none).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
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

/// The INFO text for `wanted` sections (none, `default`, `all`, `everything`: all of them).
pub fn render(shared: &Shared, wanted: &[String]) -> Result<String, CmdError> {
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "default" | "all" | "everything"));
    let mut out = String::new();
    for &sec in SECTIONS {
        if !all && !wanted.iter().any(|w| w == sec) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = sec.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in section(shared, sec)? {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    Ok(out)
}

fn section(shared: &Shared, sec: &str) -> Result<Vec<(String, String)>, CmdError> {
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
            kv("blocked_clients", "0".to_string());
        }
        "memory" => {
            let rss = rss_bytes();
            kv("used_memory", rss.to_string());
            kv("used_memory_human", human(rss));
            kv("used_memory_rss", rss.to_string());
            kv("used_memory_rss_human", human(rss));
            kv("maxmemory", "0".to_string());
            kv("maxmemory_human", "0B".to_string());
            kv("maxmemory_policy", "noeviction".to_string());
        }
        "persistence" => {
            // Every write goes to the shards' logs: the log is always on, snapshots never.
            kv("loading", "0".to_string());
            kv("async_loading", "0".to_string());
            for (k, v) in shared.saves.info_fields() {
                kv(k, v);
            }
            kv("aof_enabled", "1".to_string());
            kv("aof_rewrite_in_progress", "0".to_string());
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
            kv("expired_keys", load(&ks.expired_keys));
            kv("evicted_keys", "0".to_string());
            kv("keyspace_hits", load(&ks.hits));
            kv("keyspace_misses", load(&ks.misses));
        }
        "keyspace" => {
            // Counted by scanning each database: fine for tests and small data sets.
            for db in 0..cfg.databases {
                let (mut keys, mut expires, mut ttl_sum) = (0u64, 0u64, 0u128);
                let now = crate::store::now_ms();
                shared.store.scan_db(db as u8, |_, m| {
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
            kv("strata_read_batches", b.read_batches().to_string());
            kv("strata_read_requests", b.read_requests().to_string());
            kv("strata_cross_shard_parts", b.cross_shard_parts.to_string());
            kv("strata_committed_gsn", db.committed_gsn().to_string());
        }
        _ => {}
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_sizes() {
        assert_eq!(super::human(100), "100B");
        assert_eq!(super::human(1536), "1.50K");
        assert_eq!(super::human(3 << 20), "3.00M");
    }
}
