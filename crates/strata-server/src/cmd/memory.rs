//! MEMORY DOCTOR, MALLOC-STATS, PURGE and STATS (MEMORY USAGE and HELP are in `admin.rs`).
//!
//! Strata keeps its data on disk and in the engine's caches, not in allocations per key,
//! so there is no memory report of Redis's kind to make: DOCTOR gives Redis's answer for an
//! empty instance when no database holds a key and its "no issue" answer otherwise;
//! MALLOC-STATS answers as Redis built without jemalloc does (the allocator is chosen by
//! the binary, not by this crate); PURGE has nothing to purge and replies OK, as Redis.
//! STATS gives Redis 7.0's fields in its order: the process's resident and peak memory as
//! the allocated totals, the keys per database, Redis's derived ratios from those; what
//! Strata has none of (replication backlog, client and AOF buffers, script caches, the
//! databases' hash tables, allocator statistics) as Redis reports them when zero, the
//! allocator fields as a Redis without jemalloc derives them from the resident size.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, Args, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[
    cmd("memory|doctor", doctor),
    cmd("memory|malloc-stats", malloc_stats),
    cmd("memory|purge", purge),
    cmd("memory|stats", stats),
];

/// One MEMORY STATS value.
enum Stat {
    Int(i64),
    Float(f64),
    /// A database's hash-table overheads.
    Db,
}

fn stats(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let total = crate::info::rss_bytes() as i64;
    let peak = crate::info::proc_status_field("VmHWM:").map_or(total, |k| (k * 1024) as i64);
    let peak = peak.max(total);
    let dbs = ctx.shared.config.read().databases;
    let mut keys = 0i64;
    let mut used_dbs = Vec::new();
    for db in 0..dbs.min(256) {
        let mut n = 0i64;
        ctx.tx.scan_db(db as u8, |_, _| n += 1)?;
        if n > 0 {
            used_dbs.push(db);
            keys += n;
        }
    }
    // Redis's getMemoryOverheadData with nothing counted as overhead.
    let (startup, overhead) = (0i64, 0i64);
    let net = (total - startup).max(0);
    let dataset = total - overhead;
    let pct = |a: i64, b: i64| {
        if b > 0 {
            a as f64 * 100.0 / b as f64
        } else {
            0.0
        }
    };
    let mut fields: Vec<(String, Stat)> = vec![
        ("peak.allocated".into(), Stat::Int(peak)),
        ("total.allocated".into(), Stat::Int(total)),
        ("startup.allocated".into(), Stat::Int(startup)),
        ("replication.backlog".into(), Stat::Int(0)),
        ("clients.slaves".into(), Stat::Int(0)),
        ("clients.normal".into(), Stat::Int(0)),
        ("cluster.links".into(), Stat::Int(0)),
        ("aof.buffer".into(), Stat::Int(0)),
        ("lua.caches".into(), Stat::Int(0)),
        ("functions.caches".into(), Stat::Int(0)),
    ];
    for db in used_dbs {
        fields.push((format!("db.{db}"), Stat::Db));
    }
    let ratio = |a: i64, b: i64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    fields.extend([
        ("overhead.total".into(), Stat::Int(overhead)),
        ("keys.count".into(), Stat::Int(keys)),
        (
            "keys.bytes-per-key".into(),
            Stat::Int(if keys > 0 { net / keys } else { 0 }),
        ),
        ("dataset.bytes".into(), Stat::Int(dataset)),
        ("dataset.percentage".into(), Stat::Float(pct(dataset, net))),
        ("peak.percentage".into(), Stat::Float(pct(total, peak))),
        ("allocator.allocated".into(), Stat::Int(total)),
        ("allocator.active".into(), Stat::Int(total)),
        ("allocator.resident".into(), Stat::Int(total)),
        (
            "allocator-fragmentation.ratio".into(),
            Stat::Float(ratio(total, total)),
        ),
        ("allocator-fragmentation.bytes".into(), Stat::Int(0)),
        (
            "allocator-rss.ratio".into(),
            Stat::Float(ratio(total, total)),
        ),
        ("allocator-rss.bytes".into(), Stat::Int(0)),
        (
            "rss-overhead.ratio".into(),
            Stat::Float(ratio(total, total)),
        ),
        ("rss-overhead.bytes".into(), Stat::Int(0)),
        ("fragmentation".into(), Stat::Float(ratio(total, total))),
        ("fragmentation.bytes".into(), Stat::Int(0)),
    ]);
    let r = &mut *ctx.reply;
    r.map(fields.len());
    for (name, v) in fields {
        r.bulk(name.as_bytes());
        match v {
            Stat::Int(n) => r.int(n),
            Stat::Float(f) => r.double(f),
            Stat::Db => {
                r.map(3);
                for k in [
                    "overhead.hashtable.main",
                    "overhead.hashtable.expires",
                    "overhead.hashtable.slot-to-keys",
                ] {
                    r.bulk(k.as_bytes());
                    r.int(0);
                }
            }
        }
    }
    Ok(())
}

const EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my issues \
detector can't be used in these conditions. Please, leave for your mission on Earth and fill \
it with some data. The new Sam and I will be back to our programming as soon as I finished \
rebooting.";

const NO_ISSUE: &str = "Hi Sam, I can't find any memory issue in your instance. I can only \
account for what occurs on this base.";

fn doctor(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let dbs = ctx.shared.config.read().databases;
    let mut empty = true;
    for db in 0..dbs.min(256) {
        if ctx.tx.random_key(db as u8)?.is_some() {
            empty = false;
            break;
        }
    }
    ctx.reply
        .verbatim(if empty { EMPTY } else { NO_ISSUE }.as_bytes());
    Ok(())
}

fn malloc_stats(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply
        .verbatim(b"Stats not supported for the current allocator");
    Ok(())
}

fn purge(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.ok();
    Ok(())
}
