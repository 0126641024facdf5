//! Redis directives that tune what Strata does not have (encodings, eviction, RDB/AOF files,
//! defragmentation, lazy freeing, the event loop's `hz`, keyspace notifications...). Clients
//! and deployment tools set and read them (`CONFIG SET maxmemory-policy ...`, a redis.conf
//! copied over), so they are accepted, validated as Redis validates their type, stored and
//! read back as set, with Redis 7.0's defaults (from a real `redis-server`'s
//! `CONFIG GET *`); nothing else reads them, but for `lfu-log-factor` and `lfu-decay-time`
//! (the access counters of OBJECT FREQ, `access.rs`), `hll-sparse-max-bytes` (when a sparse
//! HyperLogLog becomes dense, `hll/`), `latency-monitor-threshold` (the latency monitor's
//! threshold in milliseconds, read by the dispatcher; 0 turns it off),
//! `notify-keyspace-events` (`notify.rs`), `tracking-table-max-keys` (`tracking.rs`),
//! `latency-tracking` and `latency-tracking-info-percentiles` (`latency_histogram.rs`),
//! and the replica's directives (`masterauth`, `masteruser`, `replica-read-only`,
//! `replica-serve-stale-data`, `repl-timeout`, `replica-priority`, `replica-announce-*`:
//! `replica/`), and one of Strata's own, `repl-strata-snapshot` (`repl/ship.rs`).
//!
//! Layer: configuration (above protocol and errors).

use crate::config::parse_memory;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A tuning directive that commands read on every call (an encoding limit, a node size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    HashMaxListpackEntries,
    HashMaxListpackValue,
    SetMaxIntsetEntries,
    ZsetMaxListpackEntries,
    ZsetMaxListpackValue,
    HllSparseMaxBytes,
    StreamNodeMaxEntries,
}

impl Limit {
    const ALL: [Limit; 7] = [
        Limit::HashMaxListpackEntries,
        Limit::HashMaxListpackValue,
        Limit::SetMaxIntsetEntries,
        Limit::ZsetMaxListpackEntries,
        Limit::ZsetMaxListpackValue,
        Limit::HllSparseMaxBytes,
        Limit::StreamNodeMaxEntries,
    ];

    /// The directive's canonical name and Redis's default.
    fn directive(self) -> (&'static str, u64) {
        match self {
            Limit::HashMaxListpackEntries => ("hash-max-listpack-entries", 512),
            Limit::HashMaxListpackValue => ("hash-max-listpack-value", 64),
            Limit::SetMaxIntsetEntries => ("set-max-intset-entries", 512),
            Limit::ZsetMaxListpackEntries => ("zset-max-listpack-entries", 128),
            Limit::ZsetMaxListpackValue => ("zset-max-listpack-value", 64),
            Limit::HllSparseMaxBytes => ("hll-sparse-max-bytes", 3000),
            Limit::StreamNodeMaxEntries => ("stream-node-max-entries", 100),
        }
    }
}

/// The [`Limit`]s in force, parsed when they are set (at start and by CONFIG SET,
/// `Shared::apply_config`) rather than from the configuration's strings on every command:
/// a read is one relaxed atomic load.
pub struct Limits([AtomicU64; Limit::ALL.len()]);

impl Default for Limits {
    fn default() -> Limits {
        Limits(Limit::ALL.map(|l| AtomicU64::new(l.directive().1)))
    }
}

impl Limits {
    /// The limits of a configuration's tuning directives (`Config::tuning`).
    pub fn new(tuning: &BTreeMap<&'static str, String>) -> Limits {
        let l = Limits::default();
        l.set(tuning);
        l
    }

    /// Takes the values of `tuning`: a negative value counts as 0, an unreadable or absent
    /// one as Redis's default.
    pub fn set(&self, tuning: &BTreeMap<&'static str, String>) {
        for l in Limit::ALL {
            let (name, default) = l.directive();
            let v = tuning
                .get(name)
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(default, |n| n.max(0) as u64);
            self.0[l as usize].store(v, Ordering::Relaxed);
        }
    }

    pub fn get(&self, l: Limit) -> u64 {
        self.0[l as usize].load(Ordering::Relaxed)
    }
}

/// How a value is checked and normalized.
#[derive(Clone, Copy)]
pub enum Kind {
    /// An integer, read back as given.
    Int,
    /// An integer within bounds (inclusive), read back as given.
    Range(i64, i64),
    /// A memory size with an optional unit, read back in bytes.
    Mem,
    /// `yes` or `no`.
    Bool,
    /// One of the listed words (case-insensitive, read back in lower case).
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
    /// Keyspace event classes (`notify.rs`), read back in Redis's order.
    Events,
}

/// One tuning directive: name, Redis's default, kind, and an older name Redis still accepts
/// for it (`hash-max-ziplist-entries` for `hash-max-listpack-entries`).
pub struct Tuning {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    pub alias: Option<&'static str>,
}

const fn t(name: &'static str, default: &'static str, kind: Kind) -> Tuning {
    Tuning {
        name,
        default,
        kind,
        alias: None,
    }
}

const fn a(name: &'static str, alias: &'static str, default: &'static str, kind: Kind) -> Tuning {
    Tuning {
        name,
        default,
        kind,
        alias: Some(alias),
    }
}

use Kind::*;

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// Every tuning directive, by name.
pub static TUNING: &[Tuning] = &[
    t("active-defrag-cycle-max", "25", Int),
    t("active-defrag-cycle-min", "1", Int),
    t("active-defrag-ignore-bytes", "104857600", Mem),
    t("active-defrag-max-scan-fields", "1000", Int),
    t("active-defrag-threshold-lower", "10", Int),
    t("active-defrag-threshold-upper", "100", Int),
    t("active-expire-effort", "1", Int),
    t("activedefrag", "no", Bool),
    t("activerehashing", "yes", Bool),
    t("always-show-logo", "no", Bool),
    t("aof-load-truncated", "yes", Bool),
    t("aof-rewrite-incremental-fsync", "yes", Bool),
    t("aof-timestamp-enabled", "no", Bool),
    t("aof-use-rdb-preamble", "yes", Bool),
    t("appenddirname", "appendonlydir", Str),
    t("appendfilename", "appendonly.aof", Str),
    t("appendonly", "no", Bool),
    t("auto-aof-rewrite-min-size", "67108864", Mem),
    t("auto-aof-rewrite-percentage", "100", Int),
    a("busy-reply-threshold", "lua-time-limit", "5000", Int),
    // Cluster mode (`cluster/`): read by the routing check and the bus, but for
    // `cluster-link-sendbuf-limit`, not built yet.
    t("cluster-allow-pubsubshard-when-down", "yes", Bool),
    t("cluster-allow-reads-when-down", "no", Bool),
    t("cluster-allow-replica-migration", "yes", Bool),
    t("cluster-announce-bus-port", "0", Range(0, 65535)),
    t("cluster-announce-hostname", "", Str),
    t("cluster-announce-ip", "", Str),
    t("cluster-announce-port", "0", Range(0, 65535)),
    t("cluster-announce-tls-port", "0", Range(0, 65535)),
    t("cluster-link-sendbuf-limit", "0", Mem),
    t("cluster-migration-barrier", "1", Range(0, i32::MAX as i64)),
    t("cluster-node-timeout", "15000", Range(0, i64::MAX)),
    t(
        "cluster-preferred-endpoint-type",
        "ip",
        Enum(&["ip", "hostname", "unknown-endpoint"]),
    ),
    a(
        "cluster-replica-no-failover",
        "cluster-slave-no-failover",
        "no",
        Bool,
    ),
    a(
        "cluster-replica-validity-factor",
        "cluster-slave-validity-factor",
        "10",
        Range(0, i32::MAX as i64),
    ),
    t("cluster-require-full-coverage", "yes", Bool),
    t("dynamic-hz", "yes", Bool),
    a(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        "512",
        Int,
    ),
    a(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        "64",
        Int,
    ),
    t("hll-sparse-max-bytes", "3000", Mem),
    t("hz", "10", Int),
    t("io-threads", "1", Int),
    t("io-threads-do-reads", "no", Bool),
    t("jemalloc-bg-thread", "yes", Bool),
    t("latency-monitor-threshold", "0", Int),
    t("latency-tracking", "yes", Bool),
    t("latency-tracking-info-percentiles", "50 99 99.9", Str),
    t("lazyfree-lazy-eviction", "no", Bool),
    t("lazyfree-lazy-expire", "no", Bool),
    t("lazyfree-lazy-server-del", "no", Bool),
    t("lazyfree-lazy-user-del", "no", Bool),
    t("lazyfree-lazy-user-flush", "no", Bool),
    t("lfu-decay-time", "1", Range(0, i32::MAX as i64)),
    t("lfu-log-factor", "10", Range(0, i32::MAX as i64)),
    t("list-compress-depth", "0", Int),
    a("list-max-listpack-size", "list-max-ziplist-size", "-2", Int),
    t("logfile", "", Str),
    t(
        "loglevel",
        "notice",
        Enum(&["debug", "verbose", "notice", "warning"]),
    ),
    t("maxmemory", "0", Mem),
    t("maxmemory-clients", "0", Mem),
    t("maxmemory-eviction-tenacity", "10", Int),
    t("maxmemory-policy", "noeviction", Enum(POLICIES)),
    t("maxmemory-samples", "5", Int),
    t("no-appendfsync-on-rewrite", "no", Bool),
    t("notify-keyspace-events", "", Events),
    t(
        "oom-score-adj",
        "no",
        Enum(&["no", "yes", "relative", "absolute"]),
    ),
    t("oom-score-adj-values", "0 200 800", Str),
    t("rdb-del-sync-files", "no", Bool),
    t("rdb-save-incremental-fsync", "yes", Bool),
    t("rdbchecksum", "yes", Bool),
    t("rdbcompression", "yes", Bool),
    // Replication (`replica/` reads the replica side's, `repl/` the master side's).
    t("masterauth", "", Str),
    t("masteruser", "", Str),
    a("min-replicas-max-lag", "min-slaves-max-lag", "10", Int),
    a("min-replicas-to-write", "min-slaves-to-write", "0", Int),
    // The backlog is the replication log on SSD (`repl/log.rs`), so its default is larger
    // than Redis's 1 MB in RAM.
    t("repl-backlog-size", "1073741824", Mem),
    t("repl-backlog-ttl", "3600", Int),
    t("repl-disable-tcp-nodelay", "no", Bool),
    t(
        "repl-diskless-load",
        "disabled",
        Enum(&["disabled", "on-empty-db", "swapdb"]),
    ),
    t("repl-diskless-sync", "yes", Bool),
    t("repl-diskless-sync-delay", "5", Int),
    t("repl-diskless-sync-max-replicas", "0", Int),
    a(
        "repl-ping-replica-period",
        "repl-ping-slave-period",
        "10",
        Range(1, i64::MAX),
    ),
    // Strata's own, not Redis's: whether a full sync between two Strata nodes ships the
    // snapshot's records (`repl/ship.rs`) rather than an RDB. Read by both sides: a replica
    // announces `capa strata-snapshot` only with `yes`, a master honours it only with `yes`.
    t("repl-strata-snapshot", "yes", Bool),
    t("repl-timeout", "60", Range(1, i64::MAX)),
    a("replica-announce-ip", "slave-announce-ip", "", Str),
    a(
        "replica-announce-port",
        "slave-announce-port",
        "0",
        Range(0, 65535),
    ),
    t("replica-announced", "yes", Bool),
    t("replica-ignore-disk-write-errors", "no", Bool),
    a(
        "replica-ignore-maxmemory",
        "slave-ignore-maxmemory",
        "yes",
        Bool,
    ),
    a("replica-lazy-flush", "slave-lazy-flush", "no", Bool),
    a("replica-priority", "slave-priority", "100", Int),
    a("replica-read-only", "slave-read-only", "yes", Bool),
    a(
        "replica-serve-stale-data",
        "slave-serve-stale-data",
        "yes",
        Bool,
    ),
    // RESTORE checks every payload at least as deeply as Redis's `yes` (`rdb/`), whatever
    // this says (the ACL flag `skip-sanitize-payload` skips nothing either).
    t(
        "sanitize-dump-payload",
        "no",
        Enum(&["no", "yes", "clients"]),
    ),
    t("save", "3600 1 300 100 60 10000", Str),
    t("set-max-intset-entries", "512", Int),
    t("shutdown-timeout", "10", Int),
    t("stop-writes-on-bgsave-error", "yes", Bool),
    t("stream-node-max-bytes", "4096", Mem),
    t("stream-node-max-entries", "100", Int),
    t("tcp-backlog", "511", Int),
    t("tracking-table-max-keys", "1000000", Int),
    a(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        "128",
        Int,
    ),
    a(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        "64",
        Int,
    ),
];

/// The tuning directive called `name` (or by its alias), case-insensitive.
pub fn find(name: &str) -> Option<&'static Tuning> {
    TUNING.iter().find(|t| {
        t.name.eq_ignore_ascii_case(name) || t.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
    })
}

/// The value CONFIG GET shows for the stored `value` of `t` (the stored form keeps what
/// Redis keeps but does not show: `n` under `A` in `notify-keyspace-events`).
pub fn shown(t: &Tuning, value: String) -> String {
    match t.kind {
        Events => crate::notify::shown(&value),
        _ => value,
    }
}

/// Checks `value` for `t` and returns the form stored; the error is Redis's text.
pub fn normalize(t: &Tuning, value: &str) -> Result<String, String> {
    match t.kind {
        Int => value
            .parse::<i64>()
            .map(|n| n.to_string())
            .map_err(|_| "argument couldn't be parsed into an integer".to_string()),
        Range(min, max) => match value.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n.to_string()),
            Ok(_) => Err(format!(
                "argument must be between {min} and {max} inclusive"
            )),
            Err(_) => Err("argument couldn't be parsed into an integer".to_string()),
        },
        Mem => parse_memory(value)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".to_string()),
            "no" => Ok("no".to_string()),
            _ => Err("argument must be 'yes' or 'no'".to_string()),
        },
        Enum(words) => {
            let v = value.to_ascii_lowercase();
            if words.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                ))
            }
        }
        Str => Ok(value.to_string()),
        Events => crate::notify::normalize(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_names_unique() {
        // A directive Strata implements is never also a tuning stand-in (it would swallow
        // the real one's flag and read back twice).
        let mut seen: std::collections::HashSet<&str> =
            crate::config::DIRECTIVES.iter().map(|d| d.name).collect();
        for t in TUNING {
            assert!(seen.insert(t.name), "{}", t.name);
            if let Some(a) = t.alias {
                assert!(seen.insert(a), "{a}");
            }
            assert_eq!(normalize(t, t.default).unwrap(), t.default, "{}", t.name);
        }
        let m = find("MAXMEMORY").unwrap();
        assert_eq!(normalize(m, "1mb").unwrap(), "1048576");
        assert_eq!(
            find("hash-max-ziplist-entries").unwrap().name,
            "hash-max-listpack-entries"
        );
        assert_eq!(
            normalize(find("maxmemory-policy").unwrap(), "foo").unwrap_err(),
            "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
             volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
        );
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn limits_are_parsed_when_set() {
        let mut tuning = BTreeMap::new();
        let l = Limits::new(&tuning);
        assert_eq!(l.get(Limit::HashMaxListpackEntries), 512);
        assert_eq!(l.get(Limit::ZsetMaxListpackValue), 64);
        tuning.insert("hash-max-listpack-entries", "4".to_string());
        tuning.insert("zset-max-listpack-value", "-3".to_string());
        tuning.insert("stream-node-max-entries", "x".to_string());
        l.set(&tuning);
        assert_eq!(l.get(Limit::HashMaxListpackEntries), 4);
        assert_eq!(l.get(Limit::ZsetMaxListpackValue), 0);
        assert_eq!(l.get(Limit::StreamNodeMaxEntries), 100);
        assert_eq!(l.get(Limit::SetMaxIntsetEntries), 512);
    }
}
