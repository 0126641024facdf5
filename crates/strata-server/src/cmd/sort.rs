//! SORT and SORT_RO (Redis's sort.c) over lists, sets and sorted sets: BY (a constant
//! pattern skips sorting; `*` patterns and `->field` hash patterns weigh each element),
//! LIMIT, GET (`#`, patterns, `->field`), ASC/DESC, ALPHA, STORE.
//!
//! The keys that BY and GET patterns name are not in the command's key specs: SORT runs on
//! the connection's thread (`traits::CONNECTION_THREAD`) and locks them itself. They are
//! known only once the sorted key was read, so it locks the sorted key (and STORE's), reads
//! the elements, and if their patterns name keys it does not hold yet, drops its stripes,
//! takes them all and reads again, until what it holds covers what it reads.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::members;
use super::{cmd_with, Args, CmdError, CmdResult, Ctx, Entry, ERR_WRONGTYPE};
use crate::cmd::table::traits::CONNECTION_THREAD;
use crate::list::{End, List};
use crate::protocol::parse::parse_i64;
use crate::store::{Meta, RType};
use crate::zset;
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::BTreeSet;

pub static COMMANDS: &[Entry] = &[
    cmd_with("sort", sort, CONNECTION_THREAD),
    cmd_with("sort_ro", sort_ro, CONNECTION_THREAD),
];

fn sort(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// What SORT was asked to do.
struct Request {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<Bytes>,
    by: Option<Bytes>,
    /// BY names a constant pattern: no sorting.
    dontsort: bool,
    gets: Vec<Bytes>,
}

fn parse(args: &[Bytes], readonly: bool) -> Result<Request, CmdError> {
    let mut r = Request {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let is = |a: &[u8], kw: &str| a.eq_ignore_ascii_case(kw.as_bytes());
    let mut j = 0;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if is(a, "asc") {
            r.desc = false;
        } else if is(a, "desc") {
            r.desc = true;
        } else if is(a, "alpha") {
            r.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            let int = |b: &[u8]| parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT));
            r.limit_start = int(&args[j + 1])?;
            r.limit_count = int(&args[j + 2])?;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            r.store = Some(args[j + 1].clone());
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = args[j + 1].clone();
            // Redis looks for '*' with strchr (up to a NUL byte); a later BY with a '*' does
            // not undo an earlier constant one.
            if !super::cstr(&p, usize::MAX).contains(&b'*') {
                r.dontsort = true;
            }
            r.by = Some(p);
            j += 1;
        } else if is(a, "get") && left >= 1 {
            r.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok(r)
}

/// Where a pattern points for one element (Redis's `lookupKeyByPattern`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// `#`: the element itself.
    Element,
    /// A string key, or a hash's field.
    Key(Vec<u8>, Option<Vec<u8>>),
    /// No `*` in the pattern: nothing.
    Nothing,
}

/// The first `*` of the pattern is replaced by the element; `->field` after it (with a
/// field name) reads a hash field.
fn target(pattern: &[u8], elem: &[u8]) -> Target {
    if pattern == b"#" {
        return Target::Element;
    }
    let pattern = super::cstr(pattern, usize::MAX);
    let Some(star) = pattern.iter().position(|&c| c == b'*') else {
        return Target::Nothing;
    };
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&f| f + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(f) => (&after[..f], Some(after[f + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(postfix);
    Target::Key(key, field)
}

/// The value a pattern finds for an element: a string key's value or a hash field's.
fn lookup(ctx: &Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let (key, field) = match target(pattern, elem) {
        Target::Element => return Ok(Some(elem.to_vec())),
        Target::Nothing => return Ok(None),
        Target::Key(k, f) => (k, f),
    };
    let db = ctx.conn.db;
    let store = ctx.tx;
    let Some(m) = store.lookup_read(db, &key)? else {
        return Ok(None);
    };
    Ok(match (field, m.rtype) {
        (Some(f), RType::Hash) => store.get_member(&members::record(db, &key, &m, &f))?,
        (None, RType::String) => Some(m.value.to_vec()),
        _ => None,
    })
}

/// The elements of the sorted key, in its own order (a set's as SMEMBERS gives it).
fn elements(ctx: &Ctx<'_>, key: &[u8], m: &Meta) -> Result<Vec<Vec<u8>>, CmdError> {
    let db = ctx.conn.db;
    let store = ctx.tx;
    Ok(match m.rtype {
        RType::List => List::from_meta(store, db, key, m.clone())?.all()?,
        RType::Set => {
            let mut v: Vec<Vec<u8>> = members::load(store, db, key, m)?
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            if !members::is_hashtable(m) {
                members::sort_intset(&mut v);
            }
            v
        }
        RType::ZSet => {
            let z = zset::Loc {
                db,
                key,
                version: m.version,
            };
            zset::by_rank(store, z, false, 0, u64::MAX)?
                .into_iter()
                .map(|(e, _)| e)
                .collect()
        }
        _ => return Err(CmdError::reply(ERR_WRONGTYPE)),
    })
}

/// The keys that the patterns name for `elems`.
fn pattern_keys(by: Option<&[u8]>, gets: &[Bytes], elems: &[Vec<u8>]) -> BTreeSet<Vec<u8>> {
    let mut keys = BTreeSet::new();
    for p in by.into_iter().chain(gets.iter().map(|g| &g[..])) {
        for e in elems {
            if let Target::Key(k, _) = target(p, e) {
                keys.insert(k);
            }
        }
    }
    keys
}

/// One element to sort: its weight as a number or as text.
struct Item {
    elem: Vec<u8>,
    score: f64,
    cmp: Option<Vec<u8>>,
}

/// C's `strtod` reading of a weight, as SORT checks it: the whole string up to a NUL,
/// in range and not NaN.
fn weight(v: &[u8]) -> Option<f64> {
    let (d, n, erange) = zset::strtod(v);
    let rest_ok = n == v.len() || v[n] == 0;
    (rest_ok && !erange && !d.is_nan()).then_some(d)
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &mut Args, readonly: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let r = parse(args.rest(), readonly)?;
    let db = ctx.conn.db;
    // The dispatcher holds the stripes of the key and the STORE destination (the key specs
    // name them) and of the keys this command asked for in an earlier run.
    let mut held: BTreeSet<Vec<u8>> = ctx.extra_keys.iter().map(|k| k.to_vec()).collect();
    held.insert(key.to_vec());
    if let Some(s) = &r.store {
        held.insert(s.to_vec());
    }
    let meta = match ctx.tx.lookup_read(db, &key)? {
        Some(m) if !matches!(m.rtype, RType::List | RType::Set | RType::ZSet) => {
            return Err(CmdError::reply(ERR_WRONGTYPE))
        }
        m => m,
    };
    let elems = match &meta {
        Some(m) => elements(ctx, &key, m)?,
        None => Vec::new(),
    };
    let rtype = meta.as_ref().map_or(RType::List, |m| m.rtype);
    let mut req_alpha = r.alpha;
    let mut dontsort = r.dontsort;
    let mut by = r.by.clone();
    // A set's own order is not replicable: with STORE it is sorted (ALPHA), as Redis
    // does for STORE and scripts.
    if dontsort && rtype == RType::Set && r.store.is_some() {
        dontsort = false;
        req_alpha = true;
        by = None;
    }
    let need = pattern_keys(by.as_deref().filter(|_| !dontsort), &r.gets, &elems);
    if !need.is_subset(&held) {
        // Nothing written yet: run again with the pattern keys' stripes held too.
        let more = need.difference(&held).map(|k| Bytes::from(k.clone()));
        return Err(CmdError::NeedKeys(more.collect()));
    }
    run(ctx, &r, rtype, elems, dontsort, req_alpha, by.as_deref())
}

/// Sorts and replies (or stores), with every key it reads locked.
fn run(
    ctx: &mut Ctx<'_>,
    r: &Request,
    rtype: RType,
    elems: Vec<Vec<u8>>,
    dontsort: bool,
    alpha: bool,
    by: Option<&[u8]>,
) -> CmdResult {
    let len = elems.len() as i64;
    let mut start = r.limit_start.max(0).min(len);
    let count = r.limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            cmp: None,
        })
        .collect();
    if dontsort {
        // Lists and sorted sets in their own order, reversed by DESC; sets as read.
        if r.desc && rtype != RType::Set {
            items.reverse();
        }
    }
    let mut conversion_error = false;
    if !dontsort {
        for it in items.iter_mut() {
            let val = match by {
                Some(p) => match lookup(ctx, p, &it.elem)? {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if alpha {
                if by.is_some() {
                    it.cmp = Some(val);
                }
            } else {
                match weight(&val) {
                    Some(d) => it.score = d,
                    None => conversion_error = true,
                }
            }
        }
        // ALPHA: Redis compares with strcoll (C strings: up to a NUL byte) when it replies,
        // and whole byte strings when it stores. Strata compares bytes, as strcoll does in
        // the C and C.UTF-8 locales.
        let stored = r.store.is_some();
        let text_cmp = |x: &[u8], y: &[u8]| -> Ordering {
            if stored {
                x.cmp(y)
            } else {
                super::cstr(x, usize::MAX).cmp(super::cstr(y, usize::MAX))
            }
        };
        let cmp = |a: &Item, b: &Item| -> Ordering {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.elem.cmp(&b.elem))
            } else if by.is_some() {
                match (&a.cmp, &b.cmp) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => text_cmp(x, y),
                }
            } else {
                text_cmp(&a.elem, &b.elem)
            };
            if r.desc {
                c.reverse()
            } else {
                c
            }
        };
        // Redis: qsort (glibc's is a stable merge sort) for the whole vector, its own
        // partial quicksort when a BY pattern is cut by LIMIT (ties land differently).
        if by.is_some() && (start != 0 || end != len - 1) {
            let (lo, hi) = (start.max(0) as usize, end.max(-1));
            if hi >= 0 {
                crate::pqsort::pqsort(&mut items, &cmp, lo, hi as usize);
            } else {
                crate::pqsort::pqsort(&mut items, &cmp, lo, usize::MAX);
            }
        } else {
            items.sort_by(cmp);
        }
    }
    if conversion_error {
        return Err(CmdError::reply(
            "ERR One or more scores can't be converted into double",
        ));
    }
    let range: &[Item] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    match &r.store {
        None => {
            let n = range.len() * r.gets.len().max(1);
            ctx.reply.array(n);
            for it in range {
                if r.gets.is_empty() {
                    ctx.reply.bulk(&it.elem);
                }
                for g in &r.gets {
                    match lookup(ctx, g, &it.elem)? {
                        Some(v) => ctx.reply.bulk(&v),
                        None => ctx.reply.null(),
                    }
                }
            }
            Ok(())
        }
        Some(dst) => {
            let mut out: Vec<Vec<u8>> = Vec::with_capacity(range.len());
            for it in range {
                if r.gets.is_empty() {
                    out.push(it.elem.clone());
                }
                for g in &r.gets {
                    out.push(lookup(ctx, g, &it.elem)?.unwrap_or_default());
                }
            }
            store_list(ctx, dst, &out)?;
            ctx.reply.int(out.len() as i64);
            Ok(())
        }
    }
}

/// Replaces `dst` (of any type) by a list of `elems`, or deletes it when there are none.
fn store_list(ctx: &Ctx<'_>, dst: &[u8], elems: &[Vec<u8>]) -> CmdResult {
    let db = ctx.conn.db;
    let store = ctx.tx;
    let mut w = crate::store::Writes::new();
    if elems.is_empty() {
        if store.get(db, dst)?.is_some() {
            w.meta(db, dst, None);
        }
    } else {
        let mut l = List::create(store, db, dst);
        l.stage_push(&mut w, End::Right, elems);
        l.finish(&mut w);
    }
    if !w.is_empty() {
        store.apply(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_substitute_the_first_star_and_read_hash_fields() {
        let t = |p: &[u8]| target(p, b"7");
        assert_eq!(t(b"#"), Target::Element);
        assert_eq!(t(b"w_*"), Target::Key(b"w_7".to_vec(), None));
        assert_eq!(t(b"a*b*c"), Target::Key(b"a7b*c".to_vec(), None));
        assert_eq!(
            t(b"h_*->f"),
            Target::Key(b"h_7".to_vec(), Some(b"f".to_vec()))
        );
        // "->" with no field name, or before the star, is part of the key name.
        assert_eq!(t(b"h_*->"), Target::Key(b"h_7->".to_vec(), None));
        assert_eq!(t(b"x->*"), Target::Key(b"x->7".to_vec(), None));
        assert_eq!(t(b"nostar"), Target::Nothing);
        assert_eq!(t(b"##"), Target::Nothing);
    }

    #[test]
    fn weights_are_read_as_c_strtod_reads_them() {
        assert_eq!(weight(b"1.5"), Some(1.5));
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b" 3"), Some(3.0));
        assert_eq!(weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"2\0junk"), Some(2.0));
        assert_eq!(weight(b"3 "), None);
        assert_eq!(weight(b"abc"), None);
        assert_eq!(weight(b"nan"), None);
        assert_eq!(weight(b"1e400"), None);
    }

    #[test]
    fn options_parse_as_redis_parses_them() {
        let a = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        let r = parse(
            &a(&["BY", "nosort", "desc", "LIMIT", "1", "2", "GET", "#"]),
            false,
        )
        .unwrap();
        assert!(r.dontsort && r.desc);
        assert_eq!((r.limit_start, r.limit_count), (1, 2));
        assert!(parse(&a(&["STORE", "x"]), true).is_err());
        assert!(parse(&a(&["LIMIT", "1"]), false).is_err());
        assert!(parse(&a(&["LIMIT", "a", "1"]), false).is_err());
        assert!(!parse(&a(&["BY", "w_*"]), false).unwrap().dontsort);
    }
}
