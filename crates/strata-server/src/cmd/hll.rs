//! HyperLogLog commands (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFDEBUG,
//! PFSELFTEST. A HyperLogLog is a string holding Redis's representation (`crate::hll`), so
//! GET, SET, COPY and the rest see the same bytes as on redis-server. Every command holds
//! its keys' stripe locks from the read to the write.
//!
//! PFCOUNT of one key writes too: a stale cached count is recomputed and stored, as Redis
//! does; it is read-only to clients all the same, as in Redis, and its key spec (RW) makes it
//! run holding its keys' stripes like a write.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, cstr, Args, CmdError, CmdResult, Ctx, Entry, ERR_WRONGTYPE};
use crate::hll::{count_registers, self_test, Encoding, Hll, HllError, REGISTERS};
use crate::notify::{keyspace_event as notify, Class};
use crate::store::{Meta, RType};
use crate::tuning::Limit;

pub static COMMANDS: &[Entry] = &[
    cmd("pfadd", pfadd),
    cmd("pfcount", pfcount),
    cmd("pfmerge", pfmerge),
    cmd("pfdebug", pfdebug),
    cmd("pfselftest", pfselftest),
];

const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn err(e: HllError) -> CmdError {
    CmdError::reply(match e {
        HllError::NotHll => ERR_NOT_HLL,
        HllError::Corrupt => ERR_CORRUPT,
    })
}

/// The HyperLogLog in a key's record: `WRONGTYPE` for other types, Redis's HLL `WRONGTYPE`
/// for strings that are not one.
fn hll_of(m: &Meta) -> Result<Hll, CmdError> {
    if m.rtype != RType::String {
        return Err(CmdError::reply(ERR_WRONGTYPE));
    }
    Hll::from_bytes(m.value.clone()).map_err(err)
}

/// `hll-sparse-max-bytes`: past it a sparse value becomes dense.
fn sparse_max(ctx: &Ctx<'_>) -> usize {
    ctx.shared.limits.get(Limit::HllSparseMaxBytes) as usize
}

/// Stores `h` at `key`: into `old`'s record (keeping its expiry and version) or a new one.
fn store(ctx: &Ctx<'_>, key: &[u8], old: Option<Meta>, h: Hll) -> CmdResult {
    let value = h.into_bytes();
    let m = match old {
        Some(mut m) => {
            m.size = value.len() as u64;
            m.value = value;
            m
        }
        None => Meta {
            rtype: RType::String,
            expire_ms: 0,
            version: ctx.tx.next_version(),
            size: value.len() as u64,
            value,
        },
    };
    ctx.tx.put(ctx.conn.db, key, &m)?;
    Ok(())
}

fn pfadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let elements = args.rest().to_vec();
    let max = sparse_max(ctx);
    let db = ctx.conn.db;
    let old = ctx.tx.get(db, &key)?;
    let (mut h, before) = match &old {
        Some(m) => (hll_of(m)?, Some(m.value.clone())),
        None => (Hll::new(), None),
    };
    // Creating the key counts as a change, even with no elements.
    let mut updated = old.is_none();
    let mut failed = None;
    for e in &elements {
        match h.add(e, max) {
            Ok(changed) => updated |= changed,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if updated && failed.is_none() {
        h.invalidate_cache();
    }
    // What was changed before a corrupt value was found stays, as in Redis's memory.
    if before.as_deref() != Some(h.as_bytes()) {
        store(ctx, &key, old, h)?;
    }
    if updated && failed.is_none() {
        notify(ctx, Class::String, "pfadd", db, &key);
    }
    if let Some(e) = failed {
        return Err(err(e));
    }
    ctx.reply.int(i64::from(updated));
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let keys = args.rest().to_vec();
    let db = ctx.conn.db;
    let store_ = ctx.tx;
    if keys.len() > 1 {
        // The union, in registers of a byte each; nothing is written.
        let mut max = Box::new([0u8; REGISTERS]);
        for k in &keys {
            if let Some(m) = store_.lookup_read(db, k)? {
                hll_of(&m)?.merge_into(&mut max).map_err(err)?;
            }
        }
        ctx.reply.int(count_registers(&max) as i64);
        return Ok(());
    }
    let Some(m) = store_.get(db, &keys[0])? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let mut h = hll_of(&m)?;
    let n = match h.cached_count() {
        Some(n) => n,
        None => {
            let n = h.count().map_err(err)?;
            h.set_cached_count(n);
            // The cache only saves the next count its work: when the database refuses
            // writes (MISCONF, which Redis does not apply to PFCOUNT), the count is still
            // the answer.
            let _ = store(ctx, &keys[0], Some(m), h);
            n
        }
    };
    // Redis replies its unsigned count as a signed one.
    ctx.reply.int(n as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let keys = args.rest().to_vec();
    let db = ctx.conn.db;
    let max_bytes = sparse_max(ctx);
    // The destination is one of the sources.
    let mut max = Box::new([0u8; REGISTERS]);
    let mut dense = false;
    for k in &keys {
        if let Some(m) = ctx.tx.lookup_read(db, k)? {
            let h = hll_of(&m)?;
            dense |= h.encoding() == Encoding::Dense;
            h.merge_into(&mut max).map_err(err)?;
        }
    }
    let old = ctx.tx.get(db, &keys[0])?;
    let mut h = match &old {
        Some(m) => hll_of(m)?,
        None => Hll::new(),
    };
    if dense {
        h.make_dense().map_err(err)?;
    }
    for (i, &r) in max.iter().enumerate() {
        if r != 0 {
            h.set_register(i, r, max_bytes).map_err(err)?;
        }
    }
    h.invalidate_cache();
    store(ctx, &keys[0], old, h)?;
    notify(ctx, Class::String, "pfadd", db, &keys[0]);
    ctx.reply.ok();
    Ok(())
}

fn pfdebug(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let sub = args.next_bytes()?;
    let key = args.next_bytes()?;
    let db = ctx.conn.db;
    let Some(m) = ctx.tx.get(db, &key)? else {
        return Err(CmdError::reply("ERR The specified key does not exist"));
    };
    let mut h = hll_of(&m)?;
    match sub.to_ascii_lowercase().as_slice() {
        b"getreg" => {
            if h.make_dense().map_err(err)? {
                store(ctx, &key, Some(m), h.clone())?;
            }
            let regs = h.dense_registers().unwrap_or_default();
            ctx.reply.array(regs.len());
            for r in regs {
                ctx.reply.int(i64::from(r));
            }
        }
        b"decode" => match h.decode() {
            Some(text) => ctx.reply.bulk(text.as_bytes()),
            None => return Err(CmdError::reply("ERR HLL encoding is not sparse")),
        },
        b"encoding" => ctx.reply.simple(h.encoding().name()),
        b"todense" => {
            let converted = h.make_dense().map_err(err)?;
            if converted {
                store(ctx, &key, Some(m), h)?;
            }
            ctx.reply.int(i64::from(converted));
        }
        _ => {
            let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
            msg.extend_from_slice(cstr(&sub, usize::MAX));
            msg.push(b'\'');
            return Err(CmdError::reply_bytes(msg));
        }
    }
    Ok(())
}

fn pfselftest(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    match self_test(sparse_max(ctx)) {
        Ok(()) => {
            ctx.reply.ok();
            Ok(())
        }
        Err(msg) => Err(CmdError::reply(format!("ERR {msg}"))),
    }
}
