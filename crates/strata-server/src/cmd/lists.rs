//! List commands (Redis's t_list.c): their arguments, replies, keyspace events and effects,
//! over the list type of `list.rs`; and the blocking pops (BLPOP, BRPOP, BLMOVE,
//! BRPOPLPUSH, BLMPOP) over the registry of `blocking.rs`. Every command reads and writes
//! its keys under their stripes (on a worker: held for it).
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::blocking::{parse_timeout, Attempt, FollowUp, ServeFn, Served};
use crate::list::{self, End, List, PosOptions};
use crate::notify::Class;
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::store::Tx;
use crate::store::TypeError;
use bytes::{Bytes, BytesMut};
use std::time::Duration;

pub static COMMANDS: &[Entry] = &[
    cmd("lpush", lpush),
    cmd("rpush", rpush),
    cmd("lpushx", lpushx),
    cmd("rpushx", rpushx),
    cmd("lpop", lpop),
    cmd("rpop", rpop),
    cmd("llen", llen),
    cmd("lrange", lrange),
    cmd("lindex", lindex),
    cmd("lset", lset),
    cmd("linsert", linsert),
    cmd("lrem", lrem),
    cmd("ltrim", ltrim),
    cmd("lpos", lpos),
    cmd("lmove", lmove),
    cmd("rpoplpush", rpoplpush),
    cmd("lmpop", lmpop),
    cmd("blpop", blpop),
    cmd("brpop", brpop),
    cmd("blmove", blmove),
    cmd("brpoplpush", brpoplpush),
    cmd("blmpop", blmpop),
];

fn parse_end(a: &[u8]) -> Result<End, CmdError> {
    if a.eq_ignore_ascii_case(b"left") {
        Ok(End::Left)
    } else if a.eq_ignore_ascii_case(b"right") {
        Ok(End::Right)
    } else {
        Err(CmdError::reply(ERR_SYNTAX))
    }
}

/// Redis's `getRangeLongFromObjectOrReply(.., 1, LONG_MAX, msg)` / `getPositiveLong...`:
/// `msg` for anything but an integer in range.
fn int_at_least(a: &[u8], min: i64, msg: &str) -> Result<i64, CmdError> {
    match parse_i64(a) {
        Some(n) if n >= min => Ok(n),
        _ => Err(CmdError::reply(msg)),
    }
}

/// Whether a blocking command may block: not while EXEC runs queued commands (Redis's
/// `CLIENT_DENY_BLOCKING`; MULTI/EXEC sets `in_exec`), where it acts as non-blocking.
fn may_block(ctx: &Ctx<'_>) -> bool {
    !ctx.conn.in_exec
}

// ---- keyspace events (t_list.c's) --------------------------------------------------------

fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// The events of a pop from `key` (none if nothing was popped), and of the key's deletion
/// when `left` elements remain.
fn notify_pop(store: &Tx<'_>, db: u8, key: &[u8], end: End, popped: usize, left: u64) {
    if popped == 0 {
        return;
    }
    let event = match end {
        End::Left => "lpop",
        End::Right => "rpop",
    };
    store.notify.event(Class::List, event, db, key);
    notify_left(store, db, key, left);
}

/// `del` when a list command left `key` empty (and so deleted it).
fn notify_left(store: &Tx<'_>, db: u8, key: &[u8], left: u64) {
    if left == 0 {
        store.notify.event(Class::Generic, "del", db, key);
    }
}

// ---- pushes and pops ----------------------------------------------------------------

fn push_generic(ctx: &mut Ctx<'_>, args: &mut Args, end: End, only_existing: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let elems = args.rest().to_vec();
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let mut l = match List::open_write(tx, db, &key)? {
        Some(l) => l,
        None if only_existing => {
            ctx.reply.int(0);
            return Ok(());
        }
        None => List::create(tx, db, &key),
    };
    let len = l.push(end, &elems)?;
    tx.notify.event(Class::List, push_event(end), db, &key);
    ctx.reply.int(len as i64);
    Ok(())
}

fn lpush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    push_generic(ctx, args, End::Left, false)
}

fn rpush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    push_generic(ctx, args, End::Right, false)
}

fn lpushx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    push_generic(ctx, args, End::Left, true)
}

fn rpushx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    push_generic(ctx, args, End::Right, true)
}

fn pop_generic(ctx: &mut Ctx<'_>, args: &mut Args, end: End, name: &str) -> CmdResult {
    let key = args.next_bytes()?;
    if args.remaining() > 1 {
        return Err(CmdError::reply(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    let count = match args.is_done() {
        true => None,
        false => Some(int_at_least(
            &args.next_bytes()?,
            0,
            "ERR value is out of range, must be positive",
        )?),
    };
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let Some(mut l) = List::open_write(tx, db, &key)? else {
        match count {
            Some(_) => ctx.reply.null_array(),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    let popped = l.pop(end, count.unwrap_or(1) as u64)?;
    notify_pop(tx, db, &key, end, popped.len(), l.len());
    match count {
        None => ctx.reply.bulk(&popped[0]),
        Some(_) => bulks(ctx.reply, &popped),
    }
    Ok(())
}

fn bulks(reply: &mut ReplyBuf, elems: &[Vec<u8>]) {
    reply.array(elems.len());
    for e in elems {
        reply.bulk(e);
    }
}

fn lpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    pop_generic(ctx, args, End::Left, "lpop")
}

fn rpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    pop_generic(ctx, args, End::Right, "rpop")
}

// ---- reads ----------------------------------------------------------------------------

fn llen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let l = List::open(ctx.tx, ctx.conn.db, &key)?;
    let n = l.map_or(0, |l| l.len());
    ctx.reply.int(n as i64);
    Ok(())
}

fn lrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let start = args.next_i64()?;
    let stop = args.next_i64()?;
    let out = match List::open(ctx.tx, ctx.conn.db, &key)? {
        Some(l) => l.range(start, stop)?,
        None => Vec::new(),
    };
    bulks(ctx.reply, &out);
    Ok(())
}

fn lindex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let Some(l) = List::open(ctx.tx, ctx.conn.db, &key)? else {
        ctx.reply.null();
        return Ok(());
    };
    let idx = args.next_i64()?;
    let v = l.index(idx)?;
    ctx.reply.opt_bulk(v.as_deref());
    Ok(())
}

fn lpos(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let elem = args.next_bytes()?;
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    while let Some(opt) = args.next_keyword() {
        let more = !args.is_done();
        match opt.as_str() {
            "RANK" if more => {
                rank = args.next_i64()?;
                if rank == 0 {
                    return Err(CmdError::reply(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from \
                         the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            "COUNT" if more => {
                count = Some(int_at_least(
                    &args.next_bytes()?,
                    0,
                    "ERR COUNT can't be negative",
                )?)
            }
            "MAXLEN" if more => {
                maxlen = int_at_least(&args.next_bytes()?, 0, "ERR MAXLEN can't be negative")?
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    let Some(l) = List::open(ctx.tx, ctx.conn.db, &key)? else {
        match count {
            Some(_) => ctx.reply.array(0),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    let found = l.positions(
        &elem,
        PosOptions {
            rank,
            count,
            maxlen,
        },
    )?;
    match count {
        Some(_) => {
            ctx.reply.array(found.len());
            for p in found {
                ctx.reply.int(p as i64);
            }
        }
        None => match found.first() {
            Some(&p) => ctx.reply.int(p as i64),
            None => ctx.reply.null(),
        },
    }
    Ok(())
}

// ---- changes in place ----------------------------------------------------------------

fn lset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let Some(mut l) = List::open_write(tx, db, &key)? else {
        return Err(CmdError::reply("ERR no such key"));
    };
    let idx = args.next_i64()?;
    let elem = args.next_bytes()?;
    if !l.set(idx, &elem)? {
        return Err(CmdError::reply("ERR index out of range"));
    }
    tx.notify.event(Class::List, "lset", db, &key);
    ctx.reply.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let after = match args.next_keyword().as_deref() {
        Some("BEFORE") => false,
        Some("AFTER") => true,
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let pivot = args.next_bytes()?;
    let elem = args.next_bytes()?;
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let Some(mut l) = List::open_write(tx, db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let Some(len) = l.insert(after, &pivot, &elem)? else {
        ctx.reply.int(-1);
        return Ok(());
    };
    tx.notify.event(Class::List, "linsert", db, &key);
    ctx.reply.int(len as i64);
    Ok(())
}

fn lrem(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let count = args.next_i64()?;
    let elem = args.next_bytes()?;
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let Some(mut l) = List::open_write(tx, db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let removed = l.remove(count, &elem)?;
    if removed > 0 {
        tx.notify.event(Class::List, "lrem", db, &key);
        notify_left(tx, db, &key, l.len());
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let start = args.next_i64()?;
    let stop = args.next_i64()?;
    let (tx, db) = (ctx.tx, ctx.conn.db);
    if let Some(mut l) = List::open_write(tx, db, &key)? {
        let left = l.trim(start, stop)?;
        // Redis notifies every LTRIM of an existing list, one that trimmed nothing too.
        tx.notify.event(Class::List, "ltrim", db, &key);
        notify_left(tx, db, &key, left);
    }
    ctx.reply.ok();
    Ok(())
}

// ---- moves -----------------------------------------------------------------------------

/// LMOVE's body on locked keys, with its events: the element moved, `None` if `src` is
/// absent.
fn move_one(
    tx: &Tx<'_>,
    db: u8,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, CmdError> {
    let Some(m) = list::move_one(tx, db, src, dst, from, to)? else {
        return Ok(None);
    };
    // Redis's order: the push to the destination, then the pop from the source.
    tx.notify.event(Class::List, push_event(to), db, dst);
    notify_pop(tx, db, src, from, 1, m.src_left);
    Ok(Some(m.elem))
}

fn lmove_generic(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    let (store, db) = (ctx.tx, ctx.conn.db);
    let v = move_one(store, db, src, dst, from, to)?;
    ctx.reply.opt_bulk(v.as_deref());
    Ok(())
}

fn lmove(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let from = parse_end(&args.next_bytes()?)?;
    let to = parse_end(&args.next_bytes()?)?;
    lmove_generic(ctx, &src, &dst, from, to)
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    lmove_generic(ctx, &src, &dst, End::Right, End::Left)
}

/// LMPOP's and BLMPOP's arguments from numkeys on (Redis's `lmpopGenericCommand` order).
fn parse_mpop(args: &mut Args) -> Result<(Vec<Bytes>, End, u64), CmdError> {
    let numkeys = int_at_least(
        &args.next_bytes()?,
        1,
        "ERR numkeys should be greater than 0",
    )?;
    if numkeys as u64 >= args.remaining() as u64 {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let keys: Vec<Bytes> = (0..numkeys)
        .map(|_| args.next_bytes())
        .collect::<Result<_, _>>()?;
    let end = parse_end(&args.next_bytes()?)?;
    let mut count = None;
    while let Some(opt) = args.next_keyword() {
        if opt == "COUNT" && count.is_none() && !args.is_done() {
            count = Some(int_at_least(
                &args.next_bytes()?,
                1,
                "ERR count should be greater than 0",
            )?);
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    Ok((keys, end, count.unwrap_or(1) as u64))
}

/// A key and the elements popped from it.
type Popped = (Bytes, Vec<Vec<u8>>);

/// The non-blocking pop a served pop propagates as (Redis 7.0): `LPOP k` / `RPOP k`, or
/// with the number popped (`counted`: LMPOP, BLMPOP).
fn pop_effect(key: &[u8], end: End, popped: usize, counted: bool) -> crate::effects::Argv {
    let name: &[u8] = match end {
        End::Left => b"LPOP",
        End::Right => b"RPOP",
    };
    let mut argv = crate::effects::argv([name, key]);
    if counted {
        argv.push(popped.to_string().into_bytes());
    }
    argv
}

/// Pops up to `count` from the first non-empty list of `keys` (locked), with its events:
/// its key and elements. `WRONGTYPE` for a key of another type met before it.
fn mpop_first(
    tx: &Tx<'_>,
    db: u8,
    keys: &[Bytes],
    end: End,
    count: u64,
) -> Result<Option<Popped>, CmdError> {
    let Some(p) = list::pop_first(tx, db, keys, end, count)? else {
        return Ok(None);
    };
    let key = keys[p.index].clone();
    notify_pop(tx, db, &key, end, p.elems.len(), p.left);
    Ok(Some((key, p.elems)))
}

/// `[key, [elements]]` (LMPOP, BLMPOP) or `[key, element]` (BLPOP, BRPOP).
fn reply_key_elems(r: &mut ReplyBuf, key: &[u8], elems: &[Vec<u8>], nested: bool) {
    r.array(2);
    r.bulk(key);
    if nested {
        bulks(r, elems);
    } else {
        r.bulk(&elems[0]);
    }
}

fn lmpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let (keys, end, count) = parse_mpop(args)?;
    let (store, db) = (ctx.tx, ctx.conn.db);
    match mpop_first(store, db, &keys, end, count)? {
        Some((k, elems)) => {
            ctx.effects.rewrite(pop_effect(&k, end, elems.len(), true));
            reply_key_elems(ctx.reply, &k, &elems, true)
        }
        None => ctx.reply.null_array(),
    }
    Ok(())
}

// ---- blocking pops ---------------------------------------------------------------------

/// The serve function of a client blocked in BLPOP, BRPOP or BLMPOP: pops from the ready
/// key and replies `[key, element]` (`nested`: `[key, [elements]]`).
fn pop_serve(end: End, count: u64, nested: bool, proto: Proto) -> ServeFn {
    Box::new(
        move |store: &Tx<'_>, db: u8, key: &[u8], _extra_here: bool| {
            let mut l = match List::open_write(store, db, key) {
                Ok(None) => return Ok(Attempt::Empty),
                Err(TypeError::WrongType) => return Ok(Attempt::Skip),
                Err(e) => return Err(e.into()),
                Ok(Some(l)) => l,
            };
            let popped = l.pop(end, count)?;
            notify_pop(store, db, key, end, popped.len(), l.len());
            let ldb = store.dbs.logical(db);
            let effect = pop_effect(key, end, popped.len(), nested);
            crate::effects::push_pending([(ldb, effect)]);
            let mut r = ReplyBuf::with_capacity(proto, 64);
            reply_key_elems(&mut r, key, &popped, nested);
            Ok(Attempt::Served(Served {
                reply: r.take(),
                then: None,
            }))
        },
    )
}

/// BLPOP, BRPOP and BLMPOP on parsed arguments.
fn bpop_generic(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    end: End,
    count: u64,
    nested: bool,
    timeout: Option<Duration>,
) -> CmdResult {
    let (store, db) = (ctx.tx, ctx.conn.db);
    if let Some((k, elems)) = mpop_first(store, db, &keys, end, count)? {
        ctx.effects
            .rewrite(pop_effect(&k, end, elems.len(), nested));
        reply_key_elems(ctx.reply, &k, &elems, nested);
        return Ok(());
    }
    if !may_block(ctx) {
        ctx.reply.null_array();
        return Ok(());
    }
    let serve = pop_serve(end, count, nested, ctx.reply.proto);
    let none: &[Bytes] = &[];
    let wait = ctx.shared.blocked.block(
        store,
        ctx.conn.id,
        ctx.reply.proto,
        db,
        &keys,
        none,
        timeout,
        serve,
    );
    ctx.blocked = Some(wait);
    Ok(())
}

fn bpop(ctx: &mut Ctx<'_>, args: &mut Args, end: End) -> CmdResult {
    let rest = args.rest().to_vec();
    let (timeout, keys) = rest
        .split_last()
        .ok_or_else(|| CmdError::reply(ERR_SYNTAX))?;
    let timeout = parse_timeout(timeout)?;
    bpop_generic(ctx, keys.to_vec(), end, 1, false, timeout)
}

fn blpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bpop(ctx, args, End::Left)
}

fn brpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bpop(ctx, args, End::Right)
}

fn blmpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let timeout = args.next_bytes()?;
    let (keys, end, count) = parse_mpop(args)?;
    let timeout = parse_timeout(&timeout)?;
    bpop_generic(ctx, keys, end, count, true, timeout)
}

fn bulk_reply(proto: Proto, v: &[u8]) -> BytesMut {
    let mut r = ReplyBuf::with_capacity(proto, v.len() + 16);
    r.bulk(v);
    r.take()
}

/// The serve function of a client blocked in BLMOVE: moves one element from the ready key
/// (its source) to `dst`. When `dst` can be written in the serve's transaction (its stripe
/// is held: always off the workers; on a worker, when it lives in the same shard and its
/// stripe could be taken, see `blocking.rs`), in place; otherwise the element is popped here
/// and pushed by the woken connection (a hand-off, see `docs/design.md` §13.8).
/// `rpoplpush`: the client is in BRPOPLPUSH, propagated as RPOPLPUSH (else as LMOVE with
/// Redis's lower-case `left` / `right`).
fn move_serve(dst: Bytes, from: End, to: End, rpoplpush: bool, proto: Proto) -> ServeFn {
    Box::new(move |store: &Tx<'_>, db: u8, src: &[u8], dst_here: bool| {
        let mut l = match List::open_write(store, db, src) {
            Ok(None) => return Ok(Attempt::Empty),
            Err(TypeError::WrongType) => return Ok(Attempt::Skip),
            Err(e) => return Err(e.into()),
            Ok(Some(l)) => l,
        };
        let end_name = |e: End| -> &'static [u8] {
            match e {
                End::Left => b"left",
                End::Right => b"right",
            }
        };
        let effect = if rpoplpush {
            crate::effects::argv([&b"RPOPLPUSH"[..], src, &dst])
        } else {
            crate::effects::argv([&b"LMOVE"[..], src, &dst, end_name(from), end_name(to)])
        };
        crate::effects::push_pending([(store.dbs.logical(db), effect)]);
        if dst_here {
            let v = move_one(store, db, src, &dst, from, to)?;
            let v = v.ok_or_else(|| CmdError::reply("ERR the source list vanished"))?;
            return Ok(Attempt::Served(Served {
                reply: bulk_reply(proto, &v),
                then: None,
            }));
        }
        // Hand-off: pop now (the element is this client's at once), push from the woken
        // connection.
        let v = l.pop(from, 1)?.remove(0);
        notify_pop(store, db, src, from, 1, l.len());
        let (src, dst) = (src.to_vec(), dst.clone());
        let keys = vec![src.clone(), dst.to_vec()];
        let then = FollowUp::new(db, keys, move |store: &Tx<'_>| {
            let mut r = ReplyBuf::with_capacity(proto, 64);
            let res = (|| -> Result<(), CmdError> {
                match List::open_or_create(store, db, &dst) {
                    Err(e) => {
                        // As Redis when the destination has the wrong type: the element goes
                        // back where it came from and the client gets the error.
                        List::open_or_create(store, db, &src)?.push(from, &[&v])?;
                        store.notify.event(Class::List, push_event(from), db, &src);
                        Err(e.into())
                    }
                    Ok(mut dl) => {
                        dl.push(to, &[&v])?;
                        store.notify.event(Class::List, push_event(to), db, &dst);
                        Ok(())
                    }
                }
            })();
            match res {
                Ok(()) => r.bulk(&v),
                Err(CmdError::Reply(m)) => r.error_bytes(&m),
                Err(e) => r.error(&e.message()),
            }
            r.take()
        });
        Ok(Attempt::Served(Served {
            reply: BytesMut::new(),
            then: Some(then),
        }))
    })
}

/// BLMOVE and BRPOPLPUSH (`rpoplpush`); served at once, they propagate as LMOVE and
/// RPOPLPUSH with the arguments as called.
fn blmove_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    (src, dst): (Bytes, Bytes),
    (from, to): (End, End),
    rpoplpush: bool,
    timeout: Option<Duration>,
) -> CmdResult {
    let (store, db) = (ctx.tx, ctx.conn.db);
    if let Some(v) = move_one(store, db, &src, &dst, from, to)? {
        let mut argv: crate::effects::Argv = args.argv().iter().map(|a| a.to_vec()).collect();
        argv.pop(); // the timeout
        argv[0] = if rpoplpush {
            b"RPOPLPUSH".to_vec()
        } else {
            b"LMOVE".to_vec()
        };
        ctx.effects.rewrite(argv);
        ctx.reply.bulk(&v);
        return Ok(());
    }
    if !may_block(ctx) {
        ctx.reply.null();
        return Ok(());
    }
    let serve = move_serve(dst.clone(), from, to, rpoplpush, ctx.reply.proto);
    let wait = ctx.shared.blocked.block(
        store,
        ctx.conn.id,
        ctx.reply.proto,
        db,
        &[src],
        &[dst],
        timeout,
        serve,
    );
    ctx.blocked = Some(wait);
    Ok(())
}

fn blmove(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let from = parse_end(&args.next_bytes()?)?;
    let to = parse_end(&args.next_bytes()?)?;
    let timeout = parse_timeout(&args.next_bytes()?)?;
    blmove_generic(ctx, args, (src, dst), (from, to), false, timeout)
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let timeout = parse_timeout(&args.next_bytes()?)?;
    blmove_generic(
        ctx,
        args,
        (src, dst),
        (End::Right, End::Left),
        true,
        timeout,
    )
}
