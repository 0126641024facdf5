//! MIGRATE (Redis's `migrateCommand`, `cluster.c`): keys moved to another server as a
//! client of it. The values go as DUMP payloads (`rdb/`) in RESTORE commands (RESTORE-ASKING
//! in cluster mode), all of one call pipelined in one write, after AUTH and SELECT when
//! needed; each key acknowledged with `+OK` is then deleted here unless COPY. It runs on the
//! connection's thread (a blocking socket with the call's timeout, as Redis blocks), holding
//! its keys' stripes, so no other command sees a key between its copy and its delete.
//!
//! Connections are cached per `host:port` (at most 64), with the database last selected on
//! them; one idle for 10 s is closed by the next MIGRATE (Redis closes it from its cron).
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::{dump, Args, CmdError, CmdResult, Ctx};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::store::{now_ms, Writes};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Idle cached connections are closed after this long (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Most connections kept (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
const CACHE_ITEMS: usize = 64;
/// Longest reply line read from the target.
const MAX_LINE: usize = 64 * 1024;

/// One cached connection to a target.
struct Cached {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// The database selected on it; -1: unknown (SELECT is sent).
    last_dbid: i64,
    last_use: Instant,
}

/// The cached connections, by `host:port`.
#[derive(Default)]
pub struct Sockets(Mutex<HashMap<String, Cached>>);

/// What MIGRATE was asked to do.
struct Request {
    host: String,
    port: String,
    dbid: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's `[user] password`.
    auth: Option<(Option<Bytes>, Bytes)>,
    keys: Vec<Bytes>,
    /// Where `keys` start in the request (3, or after KEYS).
    first_key: usize,
}

fn parse(args: &mut Args) -> Result<Request, CmdError> {
    let host = args.next_bytes()?;
    let port = args.next_bytes()?;
    let key = args.next_bytes()?;
    let db_arg = args.next_bytes()?;
    let timeout_arg = args.next_bytes()?;
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = vec![key.clone()];
    let mut first_key = 3;
    while let Some(kw) = args.next_keyword() {
        match kw.as_str() {
            "COPY" => copy = true,
            "REPLACE" => replace = true,
            "AUTH" if args.remaining() >= 1 => auth = Some((None, args.next_bytes()?)),
            "AUTH2" if args.remaining() >= 2 => {
                let user = args.next_bytes()?;
                auth = Some((Some(user), args.next_bytes()?));
            }
            "KEYS" => {
                if !key.is_empty() {
                    return Err(CmdError::reply(
                        "ERR When using MIGRATE KEYS option, the key argument must be set to \
                         the empty string",
                    ));
                }
                first_key = args.argv().len() - args.remaining();
                keys = args.rest().to_vec();
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    let int = |b: &[u8]| parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT));
    let timeout = int(&timeout_arg)?;
    let dbid = int(&db_arg)?;
    let timeout_ms = if timeout <= 0 { 1000 } else { timeout as u64 };
    Ok(Request {
        host: String::from_utf8_lossy(&host).into_owned(),
        port: String::from_utf8_lossy(&port).into_owned(),
        dbid,
        timeout: Duration::from_millis(timeout_ms),
        copy,
        replace,
        auth,
        keys,
        first_key,
    })
}

/// The positions of the keys MIGRATE `argv` moves, found by the parse it runs (Redis's
/// `migrateGetKeys`, exact for this parser): its stripes, its cluster routing and its ACL
/// key checks take these. `None` for a request the parse refuses (it touches no key).
pub fn key_positions(argv: &[Bytes]) -> Option<std::ops::Range<usize>> {
    let req = parse(&mut Args::new(argv.to_vec(), 1)).ok()?;
    Some(req.first_key..req.first_key + req.keys.len())
}

/// A command in RESP.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Connects to the target (Redis's `migrateGetSocket`), or the cached connection.
fn connect(sockets: &Sockets, req: &Request) -> Result<Cached, CmdError> {
    let name = format!("{}:{}", req.host, req.port);
    let mut cache = sockets.0.lock();
    cache.retain(|_, c| c.last_use.elapsed() < CACHE_TTL);
    if let Some(c) = cache.remove(&name) {
        return Ok(c);
    }
    let err = || CmdError::reply("IOERR error or timeout connecting to the client");
    let port: u16 = req.port.parse().map_err(|_| err())?;
    let addr = (req.host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(err)?;
    let stream = TcpStream::connect_timeout(&addr, req.timeout).map_err(|_| err())?;
    let _ = stream.set_nodelay(true);
    let writer = stream.try_clone().map_err(|_| err())?;
    Ok(Cached {
        reader: BufReader::new(stream),
        writer,
        last_dbid: -1,
        last_use: Instant::now(),
    })
}

/// Keeps a connection for the next MIGRATE to the same target.
fn keep(sockets: &Sockets, req: &Request, mut c: Cached) {
    let mut cache = sockets.0.lock();
    if cache.len() >= CACHE_ITEMS {
        // Redis drops a random one; the oldest here.
        if let Some(oldest) = cache
            .iter()
            .min_by_key(|(_, c)| c.last_use)
            .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
    }
    c.last_use = Instant::now();
    cache.insert(format!("{}:{}", req.host, req.port), c);
}

/// One reply line, without its CRLF; `None` on a timeout, a closed connection or a line
/// too long.
fn read_line(c: &mut Cached) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let n = std::io::Read::take(&mut c.reader, MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .ok()?;
    if n == 0 || !line.ends_with(b"\n") {
        return None;
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Some(line)
}

pub fn migrate(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let req = parse(args)?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    // The keys here, with their payloads and TTLs (expired ones are left out).
    let now = now_ms();
    let mut found: Vec<(Bytes, u64, Vec<u8>)> = Vec::new();
    for k in &req.keys {
        let Some(m) = store.lookup_read(db, k)? else {
            continue;
        };
        let ttl = match m.expire_ms {
            0 => 0,
            e if e <= now => continue,
            e => (e - now).max(1),
        };
        let payload = crate::rdb::dump_payload(&dump::load(store, db, k, &m)?);
        found.push((k.clone(), ttl, payload));
    }
    if found.is_empty() {
        ctx.reply.simple("NOKEY");
        return Ok(());
    }
    let sockets = &ctx.shared.migrate_sockets;
    let mut c = connect(sockets, &req)?;
    let _ = c.writer.set_write_timeout(Some(req.timeout));
    let _ = c.reader.get_ref().set_read_timeout(Some(req.timeout));
    let mut out = Vec::new();
    if let Some((user, pass)) = &req.auth {
        match user {
            Some(u) => encode(&mut out, &[b"AUTH", u, pass]),
            None => encode(&mut out, &[b"AUTH", pass]),
        }
    }
    let select = c.last_dbid != req.dbid;
    if select {
        encode(&mut out, &[b"SELECT", req.dbid.to_string().as_bytes()]);
    }
    let restore: &[u8] = if ctx.shared.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for (k, ttl, payload) in &found {
        let ttl = ttl.to_string();
        let mut argv: Vec<&[u8]> = vec![restore, k, ttl.as_bytes(), payload];
        if req.replace {
            argv.push(b"REPLACE");
        }
        encode(&mut out, &argv);
    }
    if c.writer
        .write_all(&out)
        .and_then(|()| c.writer.flush())
        .is_err()
    {
        return Err(CmdError::reply(
            "IOERR error or timeout writing to target instance",
        ));
    }
    let read_err = || CmdError::reply("IOERR error or timeout reading to target instance");
    let auth_reply = match req.auth {
        Some(_) => Some(read_line(&mut c).ok_or_else(read_err)?),
        None => None,
    };
    let select_reply = match select {
        true => Some(read_line(&mut c).ok_or_else(read_err)?),
        false => None,
    };
    let mut target_error: Option<Vec<u8>> = None;
    let mut socket_error = false;
    let mut w = Writes::new();
    let mut deleted = Vec::new();
    for (k, _, _) in &found {
        let Some(line) = read_line(&mut c) else {
            socket_error = true;
            break;
        };
        let failed = [auth_reply.as_ref(), select_reply.as_ref(), Some(&line)]
            .into_iter()
            .flatten()
            .find(|l| l.first() == Some(&b'-'));
        match failed {
            Some(e) => {
                target_error.get_or_insert_with(|| e[1..].to_vec());
            }
            None if !req.copy => {
                w.meta(db, k, None);
                deleted.push(k.clone());
            }
            None => {}
        }
    }
    if !deleted.is_empty() {
        store.apply(w)?;
        // Redis's migrateCommand: propagated as the deletion of the keys it moved.
        let mut del: crate::effects::Argv = vec![b"DEL".to_vec()];
        del.extend(deleted.iter().map(|k| k.to_vec()));
        ctx.effects.rewrite(del);
        for k in &deleted {
            notify(ctx, Class::Generic, "del", db, k);
        }
    }
    if let Some(e) = target_error {
        // The database selected there is unknown now: SELECT again next time.
        c.last_dbid = -1;
        keep(sockets, &req, c);
        let mut msg = b"ERR Target instance replied with error: ".to_vec();
        msg.extend_from_slice(&e);
        return Err(CmdError::reply_bytes(msg));
    }
    if socket_error {
        return Err(read_err());
    }
    c.last_dbid = req.dbid;
    keep(sockets, &req, c);
    ctx.reply.ok();
    Ok(())
}
