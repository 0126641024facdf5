//! What the hash and set commands share above the types layer: streamed replies of whole
//! collections, HRANDFIELD's and SRANDMEMBER's count, and HSCAN/SSCAN. The member records,
//! encodings and sampling are `collection.rs` (re-exported here).
//!
//! Layer: commands (above services; below execution).

pub use crate::collection::*;

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::{lookup_typed, Args, CmdError, CmdResult, Ctx};
use crate::cursor;
use crate::keys::{hash_slot, prefix_end};
use crate::protocol::parse::parse_i64;
use crate::store::{Meta, RType};

/// What a streamed reply of a whole collection holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// HKEYS: an array of fields.
    Keys,
    /// HVALS: an array of values.
    Values,
    /// HGETALL: a map of fields to values.
    Pairs,
    /// SMEMBERS: a set.
    Members,
}

/// Replies the whole collection `key` as `what`, streamed from the member records (the
/// element count comes from the metadata). Intset-encoded sets (at most
/// `set-max-intset-entries` members) are sorted as Redis keeps them.
pub fn reply_all(ctx: &mut Ctx<'_>, key: &[u8], m: &Meta, what: Emit) -> CmdResult {
    let db = ctx.conn.db;
    let store = ctx.tx;
    if what == Emit::Members && !is_hashtable(m) {
        let mut v: Vec<Vec<u8>> = load(store, db, key, m)?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        sort_intset(&mut v);
        ctx.reply.set(v.len());
        for k in &v {
            ctx.reply.bulk(k);
        }
        return Ok(());
    }
    let start = ctx.reply.len();
    let n = m.size as usize;
    match what {
        Emit::Pairs => ctx.reply.map(n),
        Emit::Members => ctx.reply.set(n),
        Emit::Keys | Emit::Values => ctx.reply.array(n),
    }
    let mut seen = 0usize;
    let reply = &mut *ctx.reply;
    for_each(store, db, key, m, |k, v| {
        seen += 1;
        match what {
            Emit::Keys | Emit::Members => reply.bulk(k),
            Emit::Values => reply.bulk(v),
            Emit::Pairs => {
                reply.bulk(k);
                reply.bulk(v);
            }
        }
        true
    })?;
    if seen != n {
        ctx.reply.truncate(start);
        return Err(CmdError::Store(strata_engine::Error::Corruption {
            file: "<redis collection>".into(),
            offset: 0,
            reason: format!(
                "key {:?} counts {n} members in its metadata but has {seen} member records",
                String::from_utf8_lossy(key)
            ),
        }));
    }
    Ok(())
}

/// Redis's `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` for HRANDFIELD's and
/// SRANDMEMBER's count.
pub fn parse_count(b: &[u8]) -> Result<i64, CmdError> {
    let n = parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
    if n == i64::MIN {
        return Err(CmdError::reply(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    Ok(n)
}

// ---- HSCAN and SSCAN --------------------------------------------------------------------

/// HSCAN and SSCAN (`docs/design.md` §13.4.4). A collection still in its compact encoding
/// is returned whole with cursor 0 whatever the cursor and COUNT, as Redis does for a
/// listpack or an intset; a hashtable-encoded one is walked in member order from the
/// cursor's position, COUNT members per call, the cursor naming the position after the last
/// member examined (as SCAN's cursors name positions in the key order).
/// The COUNT and MATCH options of HSCAN, SSCAN and ZSCAN (read after the key, as Redis's
/// `scanGenericCommand` does): COUNT (default 10) and the pattern, `None` for "*".
pub fn scan_options(args: &mut Args) -> Result<(usize, Option<bytes::Bytes>), CmdError> {
    let mut count: usize = 10;
    let mut pattern: Option<bytes::Bytes> = None;
    while !args.is_done() {
        let more = args.remaining() >= 2;
        if more && args.eat("COUNT") {
            let n = args.next_i64()?;
            if n < 1 {
                return Err(CmdError::reply(ERR_SYNTAX));
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if more && args.eat("MATCH") {
            let p = args.next_bytes()?;
            pattern = (&p[..] != b"*").then_some(p);
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    Ok((count, pattern))
}

pub fn scan(ctx: &mut Ctx<'_>, args: &mut Args, rtype: RType) -> CmdResult {
    let key = args.next_bytes()?;
    let c =
        cursor::parse(&args.next_bytes()?).ok_or_else(|| CmdError::reply("ERR invalid cursor"))?;
    let db = ctx.conn.db;
    let Some(m) = lookup_typed(ctx, &key, rtype)? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let (count, pattern) = scan_options(args)?;
    let store = ctx.tx;
    let keep = |k: &[u8]| {
        pattern
            .as_ref()
            .is_none_or(|p| crate::glob::matches(p, k, false))
    };
    let mut out: Vec<Member> = Vec::new();
    let mut next_cursor = 0u64;
    if !is_hashtable(&m) {
        out = load(store, db, &key, &m)?;
        out.retain(|(k, _)| keep(k));
        if rtype == RType::Set {
            out.sort_by_key(|(k, _)| parse_i64(k).unwrap_or(0));
        }
    } else {
        let owner = scan_owner(db, &key, &m);
        let (_, bound) = ctx.shared.scan_bounds.resolve_for(&owner, c);
        let p = prefix(db, &key, &m);
        let mut lo = p.clone();
        lo.extend_from_slice(&bound);
        let mut examined = 0usize;
        let mut prev: Vec<u8> = Vec::new();
        let mut next: Option<Vec<u8>> = None;
        store.scan_range(&lo, &prefix_end(&p), false, |k, v| {
            let member = &k[p.len()..];
            if examined >= count {
                next = Some(cursor::between((0, &prev), (0, member)).1);
                return false;
            }
            examined += 1;
            prev.clear();
            prev.extend_from_slice(member);
            if keep(member) {
                out.push((member.to_vec(), v.to_vec()));
            }
            true
        })?;
        if let Some(b) = next {
            next_cursor = ctx.shared.scan_bounds.cursor_for(owner, hash_slot(&key), b);
        }
    }
    let pairs = rtype == RType::Hash;
    ctx.reply.array(2);
    ctx.reply.bulk(next_cursor.to_string().as_bytes());
    ctx.reply
        .array(if pairs { out.len() * 2 } else { out.len() });
    for (k, v) in &out {
        ctx.reply.bulk(k);
        if pairs {
            ctx.reply.bulk(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_numbers_spread() {
        let mut hits = [0usize; 4];
        for _ in 0..4000 {
            hits[crate::random::below(4)] += 1;
        }
        assert!(hits.iter().all(|&h| h > 800), "{hits:?}");
        assert!(parse_count(b"-9223372036854775808").is_err());
        assert_eq!(parse_count(b"-9223372036854775807").unwrap(), -i64::MAX);
    }
}
