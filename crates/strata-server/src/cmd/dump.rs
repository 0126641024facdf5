//! Moving values between keys, databases and servers: DUMP and RESTORE (Redis's
//! `cluster.c`): a key's value as a DUMP payload, and a key made from one; MOVE (`db.c`): a
//! key to another database. The payload codec is `rdb/` (`docs/format/rdb.md`); this module
//! moves values between it and the store.
//!
//! DUMP writes RDB 9 encodings with version 9 in the footer, so that every Redis from 5.0
//! to 7.4 restores Strata's payloads. RESTORE reads payloads up to version 12 (Redis 7.4;
//! Redis 7.0.15 itself stops at its own 10) in every encoding but module values and 7.4's
//! hashes with field expiries, and writes the whole value in one atomic batch. Streams go
//! through `stream/value.rs` with their consumer groups.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::table::traits::*;
use super::{cmd, cmd_with, members, Args, CmdError, CmdResult, Ctx, Entry};
use crate::list::{End, List};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::rdb::{self, Value};
use crate::store::{now_ms, Meta, RType, Tx, Writes};
use crate::stream::Stream;
use crate::tuning::Limit;
use crate::zset;

pub static COMMANDS: &[Entry] = &[
    cmd("dump", dump),
    cmd("restore", restore),
    // RESTORE as a cluster node importing a slot serves it (its `asking` flag: MIGRATE
    // sends it in cluster mode), the same command otherwise.
    cmd("restore-asking", restore),
    // Blocking I/O to the target: on the connection's thread.
    cmd_with("migrate", super::migrate::migrate, CONNECTION_THREAD),
    cmd_with("move", move_, CONNECTION_THREAD),
];

const ERR_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const ERR_BAD_DATA: &str = "ERR Bad data format";
const ERR_BUSYKEY: &str = "BUSYKEY Target key name already exists.";

/// DUMP key: the payload, or a null reply for a missing key.
fn dump(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let Some(m) = store.lookup_read(db, &key)? else {
        ctx.reply.null();
        return Ok(());
    };
    let v = load(store, db, &key, &m)?;
    ctx.reply.bulk(&rdb::dump_payload(&v));
    Ok(())
}

/// The value of `key` (metadata `m`) in the codec's form.
pub fn load(store: &Tx<'_>, db: u8, key: &[u8], m: &Meta) -> Result<Value, CmdError> {
    Ok(match m.rtype {
        RType::String => Value::String(m.value.clone()),
        RType::List => Value::List(List::from_meta(store, db, key, m.clone())?.all()?),
        RType::Hash => Value::Hash(members::load(store, db, key, m)?),
        RType::Set => Value::Set(
            members::load(store, db, key, m)?
                .into_iter()
                .map(|(member, _)| member)
                .collect(),
        ),
        // The member records, which keep a score's sign bit (-0 in a skiplist).
        RType::ZSet => Value::ZSet(zset::members_from(store, loc(db, key, m), b"", usize::MAX)?.0),
        RType::Stream => {
            let s = Stream::from_meta(db, key, m.clone())
                .ok_or_else(|| CmdError::Store(crate::stream::corrupt(key)))?;
            Value::Stream(Box::new(s.to_value(store)?))
        }
    })
}

fn loc<'a>(db: u8, key: &'a [u8], m: &Meta) -> zset::Loc<'a> {
    zset::Loc {
        db,
        key,
        version: m.version,
    }
}

/// MOVE key db (Redis's `moveCommand`): 1 if the key moved, 0 if it is missing here or
/// exists there. The value keeps its expiry and its access state; the member records of a
/// collection are rewritten under the destination database (a new version), and the delete
/// of the source and the write of the destination are one atomic batch.
fn move_(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if ctx.shared.cluster.is_some() {
        return Err(CmdError::reply("ERR MOVE is not allowed in cluster mode"));
    }
    let key = args.next_bytes()?;
    let n = args.next_i32()?;
    if n < 0 || n as usize >= ctx.shared.config.read().databases {
        return Err(CmdError::reply("ERR DB index is out of range"));
    }
    let (src_db, dst_db) = (ctx.conn.db, ctx.tx.dbs.physical(n as u8));
    if src_db == dst_db {
        return Err(CmdError::reply(
            "ERR source and destination objects are the same",
        ));
    }
    let store = ctx.tx;
    let Some(m) = store.get(src_db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    if store.get(dst_db, &key)?.is_some() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut moved = m.clone();
    moved.version = store.next_version();
    let mut w = Writes::new();
    store.copy_members(&mut w, (src_db, &key), &m, (dst_db, &key), moved.version)?;
    w.meta(src_db, &key, None).meta(dst_db, &key, Some(&moved));
    let access = store.access.state(src_db, &key);
    store.apply(w)?;
    store.access.carry(dst_db, &key, access);
    notify(ctx, Class::Generic, "move_from", src_db, &key);
    notify(ctx, Class::Generic, "move_to", dst_db, &key);
    ctx.reply.int(1);
    Ok(())
}

/// What RESTORE's options ask for.
struct Options {
    replace: bool,
    absttl: bool,
    idle_secs: Option<i64>,
    freq: Option<i64>,
}

/// Redis's option loop: IDLETIME and FREQ exclude each other (the second is a syntax
/// error), and each needs its argument.
fn parse_options(args: &mut Args) -> Result<Options, CmdError> {
    let mut o = Options {
        replace: false,
        absttl: false,
        idle_secs: None,
        freq: None,
    };
    while !args.is_done() {
        let more = args.remaining() >= 2;
        if args.eat("REPLACE") {
            o.replace = true;
        } else if args.eat("ABSTTL") {
            o.absttl = true;
        } else if more && o.freq.is_none() && args.eat("IDLETIME") {
            let n = args.next_i64()?;
            if n < 0 {
                return Err(CmdError::reply("ERR Invalid IDLETIME value, must be >= 0"));
            }
            o.idle_secs = Some(n);
        } else if more && o.idle_secs.is_none() && args.eat("FREQ") {
            let n = args.next_i64()?;
            if !(0..=255).contains(&n) {
                return Err(CmdError::reply(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            o.freq = Some(n);
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    Ok(o)
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency],
/// in Redis's order of checks: options, the key's existence, the TTL, the payload's footer,
/// its value.
fn restore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let ttl = args.next_bytes()?;
    let payload = args.next_bytes()?;
    let opts = parse_options(args)?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let existing = store.get(db, &key)?;
    if existing.is_some() && !opts.replace {
        return Err(CmdError::reply(ERR_BUSYKEY));
    }
    let ttl = parse_i64(&ttl).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
    if ttl < 0 {
        return Err(CmdError::reply("ERR Invalid TTL value, must be >= 0"));
    }
    let (body, _version) =
        rdb::check_payload(&payload).map_err(|_| CmdError::reply(ERR_PAYLOAD))?;
    let value = rdb::parse_body(body).map_err(|_| CmdError::reply(ERR_BAD_DATA))?;
    let now = now_ms();
    let expire_ms = match ttl as u64 {
        0 => 0,
        t if opts.absttl => t,
        t => t.saturating_add(now),
    };
    let mut w = Writes::new();
    if expire_ms != 0 && expire_ms <= now {
        // Already expired: the key is gone (replaced by nothing), as Redis does.
        if existing.is_some() {
            w.meta(db, &key, None);
            store.apply(w)?;
            notify(ctx, Class::Generic, "del", db, &key);
            ctx.effects
                .rewrite(crate::effects::argv([&b"DEL"[..], &key]));
        }
        ctx.reply.ok();
        return Ok(());
    }
    let limits = Limits::of(ctx);
    put_value(store, &mut w, db, &key, value, expire_ms, &limits);
    store.apply(w)?;
    // A relative TTL propagates as the absolute time it gave (Redis 7.0's restoreCommand).
    if expire_ms != 0 && !opts.absttl {
        let mut argv: crate::effects::Argv = args.argv().iter().map(|a| a.to_vec()).collect();
        argv[2] = crate::effects::ms_arg(expire_ms as i64);
        argv.push(b"ABSTTL".to_vec());
        ctx.effects.rewrite(argv);
    }
    set_access(ctx, &key, &opts, now);
    notify(ctx, Class::Generic, "restore", db, &key);
    ctx.reply.ok();
    Ok(())
}

/// The encoding limits a restored collection is checked against (Redis converts a loaded
/// value to the encoding its size and elements call for).
pub struct Limits {
    hash_entries: u64,
    hash_value: u64,
    set_intset_entries: u64,
    zset_entries: u64,
    zset_value: u64,
}

impl Limits {
    pub fn of(ctx: &Ctx<'_>) -> Limits {
        Limits {
            hash_entries: ctx.shared.limits.get(Limit::HashMaxListpackEntries),
            hash_value: ctx.shared.limits.get(Limit::HashMaxListpackValue),
            set_intset_entries: ctx.shared.limits.get(Limit::SetMaxIntsetEntries),
            zset_entries: ctx.shared.limits.get(Limit::ZsetMaxListpackEntries),
            zset_value: ctx.shared.limits.get(Limit::ZsetMaxListpackValue),
        }
    }
}

/// Adds to `w` the records of `value` as a new incarnation of `key` (any records of an
/// older one become unreachable), with its encoding flag set as Redis would encode it.
pub fn put_value(
    store: &Tx<'_>,
    w: &mut Writes,
    db: u8,
    key: &[u8],
    value: Value,
    expire_ms: u64,
    lim: &Limits,
) {
    let version = store.next_version();
    let mut m = match value {
        Value::String(s) => Meta {
            rtype: RType::String,
            expire_ms,
            version,
            size: s.len() as u64,
            value: s,
        },
        Value::List(items) => {
            let mut l = List::create(store, db, key);
            l.meta.expire_ms = expire_ms;
            l.stage_push(w, End::Right, &items);
            l.finish(w);
            return;
        }
        Value::Hash(pairs) => {
            let mut m = Meta::collection(RType::Hash, version);
            m.value = members::new_extras();
            let big = pairs.len() as u64 > lim.hash_entries
                || pairs
                    .iter()
                    .any(|(f, v)| f.len().max(v.len()) as u64 > lim.hash_value);
            if big {
                members::mark_hashtable(&mut m);
            }
            m.size = pairs.len() as u64;
            for (f, v) in &pairs {
                w.put_member(db, key, &members::record(db, key, &m, f), v);
            }
            m
        }
        Value::Set(items) => {
            let mut m = Meta::collection(RType::Set, version);
            m.value = members::new_extras();
            let big = items.len() as u64 > lim.set_intset_entries
                || !items.iter().all(|i| members::is_int_member(i));
            if big {
                members::mark_hashtable(&mut m);
            }
            m.size = items.len() as u64;
            for i in &items {
                w.put_member(db, key, &members::record(db, key, &m, i), b"");
            }
            m
        }
        Value::Stream(v) => {
            let mut s = Stream::from_value(w, db, key, version, &v);
            s.meta.expire_ms = expire_ms;
            s.put_meta(w);
            return;
        }
        Value::ZSet(entries) => {
            let mut m = Meta::collection(RType::ZSet, version);
            let listpack = entries.len() as u64 <= lim.zset_entries
                && entries
                    .iter()
                    .all(|(e, _)| e.len() as u64 <= lim.zset_value);
            if !listpack {
                zset::set_skiplist(&mut m);
            }
            m.size = entries.len() as u64;
            for (e, s) in &entries {
                // A listpack keeps scores as text: -0 becomes 0 (as `zsets.rs` stores them).
                let s = if listpack && *s == 0.0 { 0.0 } else { *s };
                zset::put(w, loc(db, key, &m), e, None, s);
            }
            m
        }
    };
    m.expire_ms = expire_ms;
    w.meta(db, key, Some(&m));
}

/// RESTORE's IDLETIME and FREQ (Redis's `objectSetLRUOrLFU`): under an LFU policy FREQ sets
/// the access counter, under any other IDLETIME sets the last access; the option the policy
/// does not track is ignored. Without either, the key starts as a new one.
fn set_access(ctx: &Ctx<'_>, key: &[u8], opts: &Options, now_ms: u64) {
    let lfu = ctx
        .shared
        .config
        .read()
        .get("maxmemory-policy")
        .unwrap_or_default()
        .ends_with("-lfu");
    let now_secs = now_ms / 1000;
    let mut secs = now_secs;
    let mut counter = crate::access::LFU_INIT_VAL;
    match (lfu, opts.freq, opts.idle_secs) {
        (true, Some(f), _) => counter = f as u8,
        (false, _, Some(idle)) => secs = now_secs.saturating_sub(idle as u64),
        _ => {}
    }
    let secs = u32::try_from(secs).unwrap_or(u32::MAX);
    ctx.tx.access.carry(ctx.conn.db, key, Some((secs, counter)));
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        hash_entries: 2,
        hash_value: 8,
        set_intset_entries: 2,
        zset_entries: 2,
        zset_value: 8,
    };

    /// Writes `v` as `key` and reads it back with its metadata.
    fn put_and_load(store: &Tx<'_>, key: &[u8], v: Value, expire_ms: u64) -> (Meta, Value) {
        let mut w = Writes::new();
        put_value(store, &mut w, 0, key, v, expire_ms, &LIMITS);
        store.apply(w).unwrap();
        let m = store.get(0, key).unwrap().expect("written");
        let back = load(store, 0, key, &m).unwrap();
        (m, back)
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixture is hex"))
            .collect()
    }

    #[test]
    fn values_round_trip_through_the_store_with_redis_s_encodings() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::tests::open_store(dir.path(), 2);
        let store = store.front();
        let far = now_ms() + 1_000_000;
        let cases = [
            (Value::String(b("v")), None),
            (Value::List(vec![b("a"), b(""), b("a")]), Some("quicklist")),
            (Value::Hash(vec![(b("f"), b("v"))]), Some("listpack")),
            (
                Value::Hash(vec![(b("f"), b("a value past 8"))]),
                Some("hashtable"),
            ),
            (
                Value::Hash(vec![(b("a"), b("1")), (b("b"), b("2")), (b("c"), b("3"))]),
                Some("hashtable"),
            ),
            (Value::Set(vec![b("-1"), b("2")]), Some("intset")),
            (Value::Set(vec![b("1"), b("x")]), Some("hashtable")),
            (Value::Set(vec![b("1"), b("2"), b("3")]), Some("hashtable")),
            (
                Value::ZSet(vec![(b("m"), 1.5), (b("n"), f64::NEG_INFINITY)]),
                Some("listpack"),
            ),
            (
                Value::ZSet(vec![(b("a member past 8"), 1.0)]),
                Some("skiplist"),
            ),
        ];
        for (i, (v, enc)) in cases.into_iter().enumerate() {
            let key = format!("k{i}").into_bytes();
            let (m, back) = put_and_load(&store, &key, v.clone(), far);
            assert_eq!(back, v, "{i}");
            assert_eq!(m.expire_ms, far);
            let got = match m.rtype {
                RType::String => None,
                RType::List => Some("quicklist"),
                RType::ZSet => Some(crate::zset::encoding(&m)),
                _ => members::encoding(&m),
            };
            assert_eq!(got, enc, "{i}");
        }
        // Streams keep their nodes (the last one's total in the metadata), own fields and
        // groups.
        for fx in [rdb::fixtures::STREAM_NODES, rdb::fixtures::STREAM_GROUPS] {
            let v = rdb::parse_payload(&hex(fx)).unwrap();
            let (m, back) = put_and_load(&store, b"s", v.clone(), far);
            assert_eq!((m.rtype, m.expire_ms, back), (RType::Stream, far, v));
        }
        // A listpack sorted set keeps -0 as 0, a skiplist one keeps the sign.
        let (_, small) = put_and_load(&store, b"z0", Value::ZSet(vec![(b("m"), -0.0)]), 0);
        let Value::ZSet(small) = small else { panic!() };
        assert!(small[0].1.is_sign_positive());
        let big = Value::ZSet(vec![(b("a"), -0.0), (b("b"), 1.0), (b("c"), 2.0)]);
        let (_, big) = put_and_load(&store, b"z1", big, 0);
        let Value::ZSet(big) = big else { panic!() };
        assert!(big[0].1.is_sign_negative());
        // Replacing a collection by a string: the old members are unreachable.
        let (m, back) = put_and_load(&store, b"k1", Value::String(b("now a string")), 0);
        assert_eq!(
            (m.rtype, back),
            (RType::String, Value::String(b("now a string")))
        );
    }
}
