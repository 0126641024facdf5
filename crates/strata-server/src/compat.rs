//! The Redis compatibility page (`docs/redis-compatibility.md`), rendered from the command
//! table and the configuration tables so it cannot drift from what the server does: every
//! command of redis-server 7.0.15 with its status here, and every config directive with
//! what it does. A test compares the checked-in page with this rendering;
//! `STRATA_UPDATE_COMPAT=1 cargo test -p strata-server --lib compat` rewrites it.
//!
//! Layer: connection and server (the top).

use crate::cmd::table::{redis_metadata, Meta};
use std::fmt::Write;

/// Why a command family is missing, by the command's name or group.
fn missing_reason(m: &Meta) -> &'static str {
    let name = m.name.split('|').next().unwrap_or(&m.name);
    let group = m.docs.group.as_deref().unwrap_or("");
    match (name, group) {
        ("module", _) => "no modules: answers as a server without module support",
        ("debug", _) => "no DEBUG: answers as a server with the debug command disabled",
        _ => "not built yet",
    }
}

/// Commands Strata answers with a difference from Redis worth naming.
const DIFFERENCES: &[(&str, &str)] = &[
    (
        "save",
        "writes a checkpoint of the database (a directory of table files), not an RDB file",
    ),
    (
        "bgsave",
        "writes a checkpoint of the database (a directory of table files), not an RDB file",
    ),
    ("flushdb", "ASYNC flushes synchronously"),
    ("flushall", "ASYNC flushes synchronously"),
    ("function|flush", "ASYNC flushes synchronously"),
    (
        "function|list",
        "libraries and their functions in name order (Redis: hash order, unspecified)",
    ),
    (
        "function|stats",
        "running_script names a function past busy-reply-threshold (shorter runs of \
         several clients overlap, as their keys allow)",
    ),
    (
        "object|freq",
        "answers as Redis does under an LFU policy; Strata has no eviction",
    ),
    (
        "bgrewriteaof",
        "no append-only file: syncs the write-ahead logs (the log Strata recovers from) \
         and replies as Redis does when a rewrite starts",
    ),
    (
        "module|list",
        "no modules: always empty; LOAD, LOADEX and UNLOAD answer Redis's error for \
         enable-module-command no",
    ),
    ("debug", "answers Redis's error for enable-debug-command no"),
    (
        "replicaof",
        "follows a Redis master (full sync, then the command stream; a partial resync after \
         a link drop or a restart); a replica serves replicas from its log, a copy of its \
         master's stream",
    ),
    (
        "slaveof",
        "follows a Redis master (full sync, then the command stream; a partial resync after \
         a link drop or a restart); a replica serves replicas from its log, a copy of its \
         master's stream",
    ),
    (
        "psync",
        "the backlog is the replication log on SSD (repl-backlog-size, default 1 GB); the \
         stream carries effects, as Redis's (`effects.rs`)",
    ),
    (
        "wait",
        "waits for the replicas to acknowledge the stream's end when WAIT starts (at least \
         this client's writes)",
    ),
    (
        "latency|latest",
        "events \"command\" and \"fast-command\" only (no fork, AOF or expire-cycle events), \
         in name order",
    ),
    (
        "memory|doctor",
        "Redis's empty-instance answer when no database holds a key, its no-issue answer \
         otherwise (Strata's data is on disk, not in per-key allocations)",
    ),
    (
        "memory|malloc-stats",
        "answers as a Redis built without jemalloc",
    ),
    (
        "sort",
        "ALPHA compares bytes (Redis: strcoll in the server's locale, the same in the C \
         locale); a set sorted BY a constant pattern comes out in SMEMBERS order",
    ),
    (
        "sort_ro",
        "ALPHA compares bytes (Redis: strcoll in the server's locale, the same in the C \
         locale); a set sorted BY a constant pattern comes out in SMEMBERS order",
    ),
    (
        "acl|getuser",
        "single-command rules in table order (Redis: hash order, which varies per start)",
    ),
    (
        "acl|list",
        "single-command rules in table order (Redis: hash order, which varies per start)",
    ),
    (
        "acl|cat",
        "commands in table order (Redis: hash order); `slow` and `connection` also list \
         CLIENT SETINFO and NO-TOUCH (Redis 7.2 commands Strata answers)",
    ),
    (
        "client|pause",
        "lazy expiry still deletes expired keys during a pause (active expiry waits, as in \
         Redis)",
    ),
    (
        "monitor",
        "a RESP2 client in monitor mode may run only the commands a subscriber may",
    ),
    (
        "memory|usage",
        "an estimate of the bytes the key's records hold on disk",
    ),
    (
        "xinfo|stream",
        "radix-tree-nodes is an estimate (Strata keeps entries as records, not in a radix tree)",
    ),
    (
        "xadd",
        "`~` trimming removes whole nodes of Redis's layout as Strata mirrors it: nodes of \
         stream-node-max-entries entries, stream-node-max-bytes ignored",
    ),
    (
        "xtrim",
        "`~` trimming removes whole nodes of Redis's layout as Strata mirrors it: nodes of \
         stream-node-max-entries entries, stream-node-max-bytes ignored",
    ),
    (
        "dump",
        "a stream is written as RDB 9's STREAM_LISTPACKS (Redis 7.0 writes its type 19): \
         its node holds live entries only, and Redis 7 restoring it derives entries-added, \
         max-deleted-entry-id and the groups' entries-read as for any Redis 5-6.2 payload",
    ),
    (
        "latency|histogram",
        "without arguments, commands in name order (Redis: its command table's hash order); \
         a container's subcommands in table order",
    ),
    (
        "memory|stats",
        "Redis's fields in its order; total.allocated and peak.allocated are the process's \
         resident and peak resident size, the allocator fields derived from them as a Redis \
         without jemalloc does; buffers, script caches and hash-table overheads Strata does \
         not have are 0",
    ),
    (
        "lolwut",
        "version 6's skyline is Strata's own drawing (Redis's is random too); the version \
         line is the server's REDIS_VERSION",
    ),
    (
        "latency|doctor",
        "reports and advises on the events Strata records (command, fast-command)",
    ),
    (
        "client|tracking",
        "BCAST invalidations are gathered per command, EXEC or script (Redis: per event-loop \
         turn, across clients); a RESP3 client redirected to gets invalidations only while \
         it is subscribed or tracking itself; keys past tracking-table-max-keys are evicted \
         right after the read that added them",
    ),
    (
        "cluster|links",
        "the send buffer is the bytes queued for the peer (allocated and used alike)",
    ),
    (
        "migrate",
        "a connection idle 10 s is closed by the next MIGRATE (Redis: by its cron); a \
         failed write or read on a cached connection is not retried on a new one",
    ),
    (
        "cluster|info",
        "the state is computed when asked, without Redis's 2 s start delay and rejoin \
         delay",
    ),
    (
        "cluster|nodes",
        "this node's line first, the others in id order (Redis: hash order)",
    ),
    (
        "cluster|countkeysinslot",
        "counts live keys (Redis also counts expired keys not yet removed)",
    ),
    (
        "cluster|getkeysinslot",
        "lists live keys, in key order (Redis also lists expired keys not yet removed)",
    ),
];

fn status(name: &str, implemented: bool, meta: &Meta) -> String {
    if !implemented {
        return format!("not supported: {}", missing_reason(meta));
    }
    match DIFFERENCES.iter().find(|(n, _)| *n == name) {
        Some((_, d)) => format!("supported, differs: {d}"),
        None => "supported".to_string(),
    }
}

/// The page.
pub fn render() -> String {
    let implemented = |name: &str| {
        let mut parts = name.splitn(2, '|');
        let top = parts
            .next()
            .and_then(|n| crate::cmd::table().get(n.as_bytes()));
        match (top, parts.next()) {
            (Some(t), None) => t.handler.is_some() || !t.subcommands.is_empty(),
            (Some(t), Some(sub)) => t.subcommand(sub.as_bytes()).is_some(),
            (None, _) => false,
        }
    };
    let mut rows = Vec::new();
    for m in redis_metadata() {
        rows.push((m, implemented(&m.name)));
        for s in &m.subcommands {
            rows.push((s, implemented(&s.name)));
        }
    }
    // Rows of Redis 7.0 itself (the 7.2 subcommands Strata answers are listed too).
    let later = |m: &Meta| {
        m.docs
            .since
            .as_deref()
            .is_some_and(|s| s.starts_with("7.2"))
    };
    let redis_rows = rows.iter().filter(|(m, _)| !later(m)).count();
    let supported = rows.iter().filter(|(m, i)| *i && !later(m)).count();
    let mut out = String::new();
    let _ = writeln!(out, "# Redis compatibility\n");
    let _ = writeln!(
        out,
        "Generated from `strata serve`'s command table (`crates/strata-server/src/compat.rs`); \
         a test fails when this page and the server disagree. Regenerate with \
         `STRATA_UPDATE_COMPAT=1 cargo test -p strata-server --lib compat`.\n"
    );
    let _ = writeln!(
        out,
        "Strata speaks Redis 7.0.15: its replies, error texts, COMMAND metadata (key specs, \
         flags, ACL categories, docs) and config directive names are Redis's. Of the \
         {redis_rows} commands and subcommands redis-server 7.0.15 lists in `COMMAND LIST`, \
         Strata implements {supported} (and CLIENT SETINFO and CLIENT NO-TOUCH from Redis \
         7.2).\n"
    );
    let _ = writeln!(out, "## Commands\n");
    let _ = writeln!(out, "| command | group | status |");
    let _ = writeln!(out, "|---|---|---|");
    for (m, imp) in &rows {
        let group = m.docs.group.as_deref().unwrap_or("");
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            m.name.replace('|', " "),
            group,
            status(&m.name, *imp, m)
        );
    }
    let _ = writeln!(out, "\n## Config directives\n");
    let _ = writeln!(
        out,
        "Directives in redis.conf syntax, as `strata serve` flags, and through CONFIG GET/SET.\n"
    );
    let _ = writeln!(out, "| directive | here |");
    let _ = writeln!(out, "|---|---|");
    let mut names: Vec<(&str, String)> = crate::config::DIRECTIVES
        .iter()
        .map(|d| {
            let what = if d.mutable {
                "acts; CONFIG SET changes it at run time"
            } else {
                "acts; fixed at start"
            };
            (d.name, what.to_string())
        })
        .collect();
    names.push((
        "user",
        "acts: an ACL user (`user <name> <rules>...`), made at start".to_string(),
    ));
    for t in crate::tuning::TUNING {
        let alias = t.alias.map_or(String::new(), |a| format!(" (alias `{a}`)"));
        if crate::replica::DIRECTIVES.contains(&t.name) {
            names.push((
                t.name,
                format!(
                    "acts on a replica (`replica/`; the link reads it at each connection, \
                     the dispatcher at each command); CONFIG SET changes it at run time{alias}"
                ),
            ));
            continue;
        }
        let what = match t.alias {
            // Read by the bus at every cron step (`cluster/link.rs`, `Env`).
            _ if matches!(
                t.name,
                "cluster-node-timeout"
                    | "cluster-migration-barrier"
                    | "cluster-allow-replica-migration"
                    | "cluster-replica-no-failover"
                    | "cluster-replica-validity-factor"
            ) =>
            {
                format!(
                    "acts in cluster mode (`cluster/`: failure detection, elections, replica \
                     migration); CONFIG SET changes it at run time{alias}"
                )
            }
            Some(a) => format!("accepted and read back, no effect here (alias `{a}`)"),
            // Stored with the tuning directives, but it acts (`notify.rs`).
            None if t.name == "notify-keyspace-events" => {
                "acts (keyspace notifications; `e` and `d` accepted, never sent: no \
                 eviction, no modules); CONFIG SET changes it at run time"
                    .to_string()
            }
            None if matches!(
                t.name,
                "latency-tracking" | "latency-tracking-info-percentiles"
            ) =>
            {
                "acts (per-command latency histograms: LATENCY HISTOGRAM, INFO latencystats); \
                 CONFIG SET changes it at run time"
                    .to_string()
            }
            None if t.name == "tracking-table-max-keys" => {
                "acts (the bound of client-side caching's table, `tracking.rs`); CONFIG SET \
                 changes it at run time"
                    .to_string()
            }
            None if matches!(
                t.name,
                "cluster-announce-ip"
                    | "cluster-announce-port"
                    | "cluster-announce-bus-port"
                    | "cluster-announce-hostname"
                    | "cluster-require-full-coverage"
                    | "cluster-allow-reads-when-down"
                    | "cluster-allow-pubsubshard-when-down"
                    | "cluster-preferred-endpoint-type"
            ) =>
            {
                "acts in cluster mode (`cluster/`: this node's address, routing, CLUSTER \
                 SLOTS/SHARDS); CONFIG SET changes it at run time"
                    .to_string()
            }
            None => "accepted and read back, no effect here".to_string(),
        };
        names.push((t.name, what));
    }
    names.sort();
    for (n, what) in names {
        let _ = writeln!(out, "| `{n}` | {what} |");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn compat_page_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/redis-compatibility.md"
        );
        let page = super::render();
        if std::env::var_os("STRATA_UPDATE_COMPAT").is_some() {
            std::fs::write(path, &page).expect("write the page");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == page,
            "docs/redis-compatibility.md is stale: STRATA_UPDATE_COMPAT=1 cargo test -p \
             strata-server --lib compat"
        );
    }
}
