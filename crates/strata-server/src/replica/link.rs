//! The link thread: one per REPLICAOF, with blocking I/O on one TCP connection to the
//! master (Redis's `connectWithMaster`, `syncWithMaster`, `readSyncBulkPayload` and the
//! master client's input).
//!
//! A session: connect; PING; AUTH (`masteruser`, `masterauth`); REPLCONF listening-port
//! (and ip-address), REPLCONF capa eof capa psync2; PSYNC with the replication id and
//! offset the data follows (after a link drop in this process: a partial resync) or `? -1`;
//! on `+FULLRESYNC` the payload (`$<len>` or `$EOF:<mark>`, or from a Strata master the
//! snapshot stream after `$STRATA-SNAPSHOT`, `ship.rs`) is spooled to a file in `dir`
//! (so that the master's timeout never waits on the load), checked, loaded beside the served
//! dataset (an RDB once it is whole; the snapshot stream while it arrives, the load reading
//! the spool behind the receiver, `spool.rs`) and switched in with one write (design
//! §13.25); then the
//! command stream is applied through the dispatcher as the master's client, with
//! `REPLCONF ACK <offset>` every second and on GETACK.
//!
//! A failed session (connection, handshake, transfer, a file that does not load) leaves the
//! data as it was and is retried after a pause that grows from 1 to 5 seconds. A command of
//! the stream that fails to apply stops replication: the link goes down with the reason in
//! INFO and the log, and is not retried until the next REPLICAOF.

use super::batch;
use super::handshake::{parse_payload_header, parse_psync_reply, EofMark, Payload, PsyncReply};
use super::spool::{FinishOnDrop, Spool, SpoolWriter};
use super::stream::StreamReader;
use super::{LinkState, SyncProgress};
use crate::cmd::{dispatch, ConnState, Ctx};
use crate::position::{Kind, Position};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::scripting::functions::RestorePolicy;
use crate::server::Shared;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest line accepted from the master during the handshake.
const MAX_LINE: u64 = 64 << 10;
/// Socket reads wait at most this long, so the thread notices a REPLICAOF and sends its
/// ACKs on time.
const POLL: Duration = Duration::from_millis(200);
const ACK_EVERY: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How a session ended.
enum End {
    /// REPLICAOF changed the plan: this thread is no longer wanted.
    Superseded,
    /// Retry after a pause (the data is as it was before the session, or as the stream
    /// left it at a command boundary).
    Failed(String),
    /// Stop replicating (a command that does not apply, a malformed stream).
    Stopped(String),
}

impl From<std::io::Error> for End {
    fn from(e: std::io::Error) -> End {
        End::Failed(format!("I/O with the master: {e}"))
    }
}

/// The thread's body: sessions until REPLICAOF moves on or replication stops.
pub fn run(shared: Arc<Shared>, epoch: u64) {
    let r = &shared.replication;
    let mut backoff = BACKOFF_MIN;
    // The master's selected database outlives a session, as Redis's cached master keeps
    // it: a partial resync continues the stream without a new SELECT. Restored at start
    // from the persisted position.
    let mut db = r.state.lock().db;
    if !r.switch_to_following(&shared, epoch) {
        return;
    }
    loop {
        if !r.is_current(epoch) {
            break;
        }
        // A client per connection (CLIENT LIST shows it with flag M; CLIENT KILL TYPE
        // master ends the connection, and the next one resyncs).
        let addr = r
            .if_current(epoch, |st| {
                st.master.as_ref().map(|(h, p)| format!("{h}:{p}"))
            })
            .flatten()
            .unwrap_or_default();
        let info = shared.register_client(addr, String::new(), -1, false);
        info.master
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut conn = shared.new_conn(info);
        conn.master = true;
        conn.authenticated = true;
        // The master's SELECT names a logical database (SWAPDB's map, `dbmap.rs`).
        conn.selected = db;
        conn.db = shared.store.dbs.physical(db);
        let end = session(&shared, &mut conn, epoch);
        shared.clients.remove(conn.id);
        db = conn.selected;
        let was_up = r.link_up.load(std::sync::atomic::Ordering::Acquire);
        let (reason, retry) = match end {
            End::Superseded => break,
            End::Failed(reason) => (reason, true),
            End::Stopped(reason) => (reason, false),
        };
        eprintln!("strata-server: replication: {reason}");
        let marked = r.if_current(epoch, |st| {
            st.link = LinkState::Connect;
            st.sync = None;
            st.down_since.get_or_insert_with(Instant::now);
            st.last_error = Some(reason.clone());
            st.stopped = !retry;
            r.link_up.store(false, std::sync::atomic::Ordering::Release);
            r.loading.store(false, std::sync::atomic::Ordering::Release);
        });
        if marked.is_none() || !retry {
            break;
        }
        if was_up {
            backoff = BACKOFF_MIN;
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && r.is_current(epoch) {
            std::thread::sleep(POLL);
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// The master's connection, read through a buffer.
struct Link {
    r: BufReader<TcpStream>,
}

impl Link {
    fn send(&mut self, argv: &[&[u8]]) -> std::io::Result<()> {
        let mut out = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&out)
    }

    /// One line without its CR LF; empty lines (the master's keepalives) are skipped if
    /// `skip_empty`.
    fn line(&mut self, deadline: Duration, skip_empty: bool) -> Result<Vec<u8>, End> {
        let started = Instant::now();
        let mut line = Vec::new();
        loop {
            let got = (&mut self.r).take(MAX_LINE).read_until(b'\n', &mut line);
            match got {
                Ok(0) => return Err(End::Failed("the master closed the connection".into())),
                Ok(_) if line.ends_with(b"\n") => {
                    while line.last().is_some_and(|&c| c == b'\n' || c == b'\r') {
                        line.pop();
                    }
                    if line.is_empty() && skip_empty {
                        continue;
                    }
                    return Ok(line);
                }
                Ok(_) => return Err(End::Failed("line from the master too long".into())),
                Err(e) if is_timeout(&e) => {
                    if started.elapsed() > deadline {
                        return Err(End::Failed("timeout waiting for the master".into()));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sends a handshake command and returns the master's one-line answer.
    fn ask(&mut self, argv: &[&[u8]], timeout: Duration) -> Result<Vec<u8>, End> {
        self.send(argv)?;
        self.line(timeout, false)
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// One connection to the master, from connect to the link's end.
fn session(shared: &Arc<Shared>, conn: &mut ConnState, epoch: u64) -> End {
    match session_inner(shared, conn, epoch) {
        Ok(end) | Err(end) => end,
    }
}

fn session_inner(shared: &Arc<Shared>, conn: &mut ConnState, epoch: u64) -> Result<End, End> {
    let r = &shared.replication;
    let Some(master) = r.if_current(epoch, |st| {
        st.link = LinkState::Connecting;
        st.master.clone()
    }) else {
        return Ok(End::Superseded);
    };
    let Some((host, port)) = master else {
        return Ok(End::Superseded);
    };
    let (timeout, auth, user, announce_ip, announce_port, my_port) = {
        let c = shared.config.read();
        let secs = c
            .get("repl-timeout")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(60);
        let nonempty = |n: &str| c.get(n).filter(|v| !v.is_empty());
        (
            Duration::from_secs(secs.max(1)),
            nonempty("masterauth"),
            nonempty("masteruser"),
            nonempty("replica-announce-ip"),
            nonempty("replica-announce-port").filter(|p| p != "0"),
            shared
                .local_addrs
                .first()
                .map_or(c.port, |a| a.port())
                .to_string(),
        )
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| End::Failed(format!("resolving {host}:{port}: {e}")))?
        .next()
        .ok_or_else(|| End::Failed(format!("{host}:{port} has no address")))?;
    let sock = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| End::Failed(format!("connecting to {host}:{port}: {e}")))?;
    sock.set_read_timeout(Some(POLL))?;
    sock.set_write_timeout(Some(timeout))?;
    let _ = sock.set_nodelay(true);
    let mut link = Link {
        r: BufReader::with_capacity(1 << 16, sock),
    };
    if r.if_current(epoch, |st| st.link = LinkState::Handshake)
        .is_none()
    {
        return Ok(End::Superseded);
    }
    // PING: an authentication error is fine here (AUTH comes next), as Redis accepts it.
    let pong = link.ask(&[b"PING"], timeout)?;
    let auth_error = [&b"-NOAUTH"[..], b"-NOPERM", b"-ERR operation not permitted"]
        .iter()
        .any(|p| pong.starts_with(p));
    if pong.starts_with(b"-") && !auth_error {
        return Err(End::Failed(format!(
            "error reply to PING from master: '{}'",
            String::from_utf8_lossy(&pong)
        )));
    }
    if let Some(pass) = &auth {
        let reply = match &user {
            Some(u) => link.ask(&[b"AUTH", u.as_bytes(), pass.as_bytes()], timeout)?,
            None => link.ask(&[b"AUTH", pass.as_bytes()], timeout)?,
        };
        if reply.starts_with(b"-") {
            return Err(End::Failed(format!(
                "unable to AUTH to MASTER: {}",
                String::from_utf8_lossy(&reply)
            )));
        }
    }
    let port_arg = announce_port.unwrap_or(my_port);
    // Redis logs and ignores errors to REPLCONF (an old master does not know it).
    link.ask(
        &[b"REPLCONF", b"listening-port", port_arg.as_bytes()],
        timeout,
    )?;
    if let Some(ip) = &announce_ip {
        link.ask(&[b"REPLCONF", b"ip-address", ip.as_bytes()], timeout)?;
    }
    // `capa strata-snapshot`: a Strata master may send its snapshot's records instead of
    // an RDB (`ship.rs`); Redis ignores a capability it does not know.
    let snapshot = shared.config.read().get("repl-strata-snapshot").as_deref() != Some("no");
    let mut capa: Vec<&[u8]> = vec![b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"];
    if snapshot {
        capa.extend([&b"capa"[..], crate::repl::frames::CAPA.as_bytes()]);
    }
    link.ask(&capa, timeout)?;
    // A partial resync if this process applied a stream before (its data is that stream's
    // up to the offset); a full one otherwise.
    let Some(cached) = r.if_current(epoch, |st| {
        st.resumable.then(|| (st.replid.clone(), st.offset + 1))
    }) else {
        return Ok(End::Superseded);
    };
    let (id, from) = match &cached {
        Some((id, off)) => (id.clone(), off.to_string()),
        None => ("?".to_string(), "-1".to_string()),
    };
    // A master handing over (its FAILOVER) tells the target so (`repl/failover.rs`).
    let failover = &shared.master.failover;
    if failover.handing_over() {
        link.send(&[b"PSYNC", id.as_bytes(), from.as_bytes(), b"FAILOVER"])?;
    } else {
        link.send(&[b"PSYNC", id.as_bytes(), from.as_bytes()])?;
    }
    let line = link.line(timeout, true)?;
    let reply = parse_psync_reply(&line).map_err(|e| End::Failed(e.to_string()))?;
    let accepted = matches!(reply, PsyncReply::Full { .. } | PsyncReply::Continue { .. });
    failover.psync_answered(shared, accepted);
    let offset = match reply {
        PsyncReply::Full { replid, offset } => {
            // The stream after a full sync starts with its own SELECT.
            let pos = Position {
                kind: Kind::Following,
                replid,
                offset,
                db: 0,
            };
            full_sync(shared, conn, epoch, &mut link, timeout, pos, snapshot)?;
            offset
        }
        PsyncReply::Continue { replid } => {
            let Some((off, changed)) = r.if_current(epoch, |st| {
                let mut changed = false;
                if let Some(new) = replid {
                    if new != st.replid {
                        st.replid2 = std::mem::replace(&mut st.replid, new);
                        st.second_offset = st.offset as i64 + 1;
                        changed = true;
                    }
                }
                (st.offset, changed)
            }) else {
                return Ok(End::Superseded);
            };
            eprintln!("strata-server: replication: partial resync from offset {off}");
            continue_log(shared, off, changed)?;
            off
        }
        PsyncReply::TryLater(e) => return Err(End::Failed(format!("master: {e}"))),
        PsyncReply::Error(e) => {
            return Err(End::Failed(format!("master refused PSYNC: {e}")));
        }
    };
    let up = r.if_current(epoch, |st| {
        st.link = LinkState::Connected;
        st.sync = None;
        st.last_io = Some(Instant::now());
        st.down_since = None;
        st.last_error = None;
        r.link_up.store(true, std::sync::atomic::Ordering::Release);
        st.replid.clone()
    });
    let Some(replid) = up else {
        return Ok(End::Superseded);
    };
    eprintln!("strata-server: replication: connected to {host}:{port} at offset {offset}");
    let at = Stream {
        replid,
        offset,
        timeout,
    };
    apply_stream(shared, conn, epoch, &mut link, at)
}

/// After `+CONTINUE` at `off`: this server's log goes on with the master's stream if it
/// ends there (a replica's log is a copy of its master's), or starts again there. Replicas
/// of this server are disconnected if the id `changed`, to learn it (Redis does the same).
fn continue_log(shared: &Shared, off: u64, changed: bool) -> Result<(), End> {
    let master = &shared.master;
    if master.log().is_some_and(|l| l.end() == off) {
        if changed {
            master.disconnect_replicas(&shared.clients);
        }
        return Ok(());
    }
    master
        .replace_log(shared, off)
        .map(|_| ())
        .map_err(|e| End::Failed(format!("replication log: {e}")))
}

/// Receives the RDB into a spool file, checks it and loads it.
fn full_sync(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    epoch: u64,
    link: &mut Link,
    timeout: Duration,
    mut pos: Position,
    asked_snapshot: bool,
) -> Result<(), End> {
    let r = &shared.replication;
    let header = link.line(timeout, true)?;
    let payload = parse_payload_header(&header).map_err(|e| End::Failed(e.to_string()))?;
    let total = match payload {
        Payload::Sized(n) => Some(n),
        Payload::Marked(_) | Payload::Snapshot => None,
    };
    let snapshot = payload == Payload::Snapshot;
    if snapshot && !asked_snapshot {
        return Err(End::Failed(
            "the master sent a snapshot stream this replica did not announce".into(),
        ));
    }
    let started = r.if_current(epoch, |st| {
        st.link = LinkState::Sync;
        st.sync = Some(SyncProgress {
            total,
            read: 0,
            last_io: Instant::now(),
            loaded: None,
        });
    });
    if started.is_none() {
        return Err(End::Superseded);
    }
    let dir = shared.config.read().dir.clone();
    let ext = if snapshot { "snapshot" } else { "rdb" };
    let spool = SpoolFile(dir.join(format!(
        "{}{}.{ext}",
        super::spool::PREFIX,
        std::process::id()
    )));
    if !snapshot {
        let started = Instant::now();
        receive(shared, epoch, link, payload, &spool.0, timeout)?;
        eprintln!(
            "strata-server: replication: received the master's RDB in {:.2} s; loading it",
            started.elapsed().as_secs_f64()
        );
    }
    let databases = shared.config.read().databases;
    // A new generation of the keyspace, in physical databases nothing reads; clients read
    // the old dataset until the switch.
    let claim = r
        .claim_spare(&shared.store.dbs, databases)
        .map_err(End::Failed)?;
    let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 64);
    let tx = shared.store.front();
    let mut ctx = Ctx::new(shared, &tx, conn, &mut reply);
    r.loading.store(true, std::sync::atomic::Ordering::Release);
    let started = Instant::now();
    let loaded = if snapshot {
        receive_and_load(shared, epoch, link, &spool.0, timeout, &mut ctx, &claim.dbs)
    } else {
        // While the file is read, a newline to the master every second (Redis's
        // `replicationSendNewlineToMaster`): the master counts it as the replica's ACK time.
        let mut last_newline = Instant::now();
        let sock = link.r.get_ref();
        let mut tick = || {
            if last_newline.elapsed() >= ACK_EVERY {
                last_newline = Instant::now();
                let _ = (&mut &*sock).write_all(b"\n");
            }
            r.is_current(epoch)
        };
        super::load::load(&mut ctx, &spool.0, &claim.dbs, &mut tick).map_err(|e| e.to_string())
    };
    r.loading.store(false, std::sync::atomic::Ordering::Release);
    let loaded = match loaded {
        Ok((counts, functions)) => {
            eprintln!(
                "strata-server: replication: loaded {} keys ({} records) and {} libraries \
                 from the master in {:.2} s",
                counts.keys,
                counts.records,
                counts.functions,
                started.elapsed().as_secs_f64()
            );
            // The stream continues in the database the master's stream had selected at
            // the cut (`repl-stream-db`, as Redis's replica takes it); 0 if the file does
            // not say.
            pos.db = counts
                .stream_db
                .filter(|&d| usize::from(d) < databases)
                .unwrap_or(0);
            Ok(functions)
        }
        Err(e) => Err(e),
    };
    let switched = loaded.and_then(|functions| {
        let _applying = r.applying.lock();
        if !r.is_current(epoch) {
            return Err(super::load::STOPPED.to_string());
        }
        switch(shared, &claim.dbs, &functions, &pos)?;
        r.if_current(epoch, |st| {
            st.replid2 = "0".repeat(super::handshake::ID_LEN);
            st.second_offset = -1;
            st.offset = pos.offset;
            st.read_offset = pos.offset;
            st.resumable = true;
            st.db = pos.db;
            st.replid = pos.replid.clone();
        });
        // A new history: this server's log starts again at the cut (its replicas resync).
        shared
            .master
            .replace_log(shared, pos.offset)
            .map_err(|e| format!("replication log: {e}"))?;
        Ok(())
    });
    drop(claim);
    // The replaced dataset, or what a failed load wrote.
    super::garbage::clean_unmapped(shared);
    match switched {
        Ok(()) => {
            conn.selected = pos.db;
            conn.db = shared.store.dbs.physical(pos.db);
            Ok(())
        }
        Err(_) if !r.is_current(epoch) => Err(End::Superseded),
        Err(e) => Err(End::Failed(format!(
            "loading the master's {} failed (the old dataset stays): {e}",
            if snapshot { "snapshot stream" } else { "RDB" }
        ))),
    }
}

/// Switches every logical database to the loaded generation in one synced write that also
/// holds the function libraries and the stream position (`dbmap::install_generation`).
fn switch(shared: &Shared, targets: &[u8], functions: &[u8], pos: &Position) -> Result<(), String> {
    let store = &shared.store;
    let persist = |map: &[u8]| {
        let save = |libraries: &[u8]| {
            let mut b = strata::WriteBatch::new();
            b.put(&crate::dbmap::record_key(), map);
            b.put(&crate::cmd::functions::record_key(), libraries);
            crate::position::put_all(store.db(), &mut b, pos);
            store
                .write_server_records(b)
                .map_err(|e| format!("storing the new dataset's map failed: {e}"))
        };
        shared
            .functions
            .restore(functions, RestorePolicy::Flush, &save)
    };
    let tx = store.front();
    crate::dbmap::install_generation(&tx, targets, persist, |old, new| {
        shared.blocked.swap_dbs(&tx, old, new)
    })?;
    eprintln!("strata-server: replication: the master's dataset is in place");
    Ok(())
}

/// The spool file, removed when dropped.
struct SpoolFile(PathBuf);

impl Drop for SpoolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Copies the payload from the socket to `path`, synced.
fn receive(
    shared: &Arc<Shared>,
    epoch: u64,
    link: &mut Link,
    payload: Payload,
    path: &std::path::Path,
    timeout: Duration,
) -> Result<(), End> {
    let r = &shared.replication;
    let mut file = std::io::BufWriter::with_capacity(
        1 << 20,
        File::create(path).map_err(|e| End::Failed(format!("creating {}: {e}", path.display())))?,
    );
    let (mut left, mut mark) = match payload {
        Payload::Sized(n) => (Some(n), None),
        Payload::Marked(m) => (None, Some(EofMark::new(m))),
        Payload::Snapshot => unreachable!("received by receive_snapshot"),
    };
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::with_capacity(1 << 16);
    let mut last_io = Instant::now();
    let mut read = 0u64;
    let mut last_report = Instant::now();
    loop {
        if left == Some(0) {
            break;
        }
        let want = left.map_or(buf.len(), |l| l.min(buf.len() as u64) as usize);
        let n = match link.r.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(End::Failed(
                    "the master closed the connection during the transfer".into(),
                ))
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                if !r.is_current(epoch) {
                    return Err(End::Superseded);
                }
                if last_io.elapsed() > timeout {
                    return Err(End::Failed(
                        "timeout receiving the RDB from the master".into(),
                    ));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        last_io = Instant::now();
        read += n as u64;
        let done = match (&mut left, &mut mark) {
            (Some(l), _) => {
                *l -= n as u64;
                file.write_all(&buf[..n])?;
                *l == 0
            }
            (None, Some(m)) => {
                out.clear();
                let found = m.feed(&buf[..n], &mut out);
                file.write_all(&out)?;
                found
            }
            (None, None) => true,
        };
        if last_report.elapsed() > POLL || done {
            last_report = Instant::now();
            let alive = r.if_current(epoch, |st| {
                if let Some(s) = &mut st.sync {
                    s.read = read;
                    s.last_io = last_io;
                }
            });
            if alive.is_none() {
                return Err(End::Superseded);
            }
        }
        if done {
            break;
        }
    }
    let f = file.into_inner().map_err(|e| End::Failed(e.to_string()))?;
    f.sync_all()?;
    Ok(())
}

/// Receives a snapshot stream (`ship.rs`) into a spool file at `path`, every frame checked
/// on arrival, and loads it into `targets` while it arrives (`spool.rs`): the receiver on
/// a thread of its own reads the socket at the network's pace, whatever the load's (the
/// master's `repl-timeout` never waits on the ingestion), and the load on this thread reads
/// the file behind it. Err: why the transfer or the load failed (the receiver's reason
/// first: the load's is then only its consequence); nothing was installed.
fn receive_and_load(
    shared: &Arc<Shared>,
    epoch: u64,
    link: &mut Link,
    path: &std::path::Path,
    timeout: Duration,
    ctx: &mut Ctx<'_>,
    targets: &[u8],
) -> Result<(super::load::Counts, Vec<u8>), String> {
    let r = &shared.replication;
    let (spool, file) =
        Spool::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    // The newlines of the load's keepalive go through a second handle on the socket: the
    // receiver owns the link meanwhile.
    let sock = link
        .r
        .get_ref()
        .try_clone()
        .map_err(|e| format!("the master's connection: {e}"))?;
    let started = Instant::now();
    std::thread::scope(|s| {
        let spool = &spool;
        let receiver = std::thread::Builder::new()
            .name("strata-repl-recv".into())
            .spawn_scoped(s, move || {
                let _ends = FinishOnDrop(spool);
                let mut sock = Patient {
                    link,
                    r,
                    epoch,
                    timeout,
                    last_io: Instant::now(),
                    superseded: false,
                    spool,
                };
                let mut out = SpoolWriter::new(spool, file);
                let mut last_report = Instant::now();
                let mut gone = false;
                let received = super::ship::receive(&mut sock, &mut out, &mut |read| {
                    if last_report.elapsed() > POLL {
                        last_report = Instant::now();
                        gone |= r
                            .if_current(epoch, |st| {
                                if let Some(s) = &mut st.sync {
                                    s.read = read;
                                    s.last_io = Instant::now();
                                    s.loaded = Some(spool.loaded());
                                }
                            })
                            .is_none();
                    }
                });
                let end = if sock.superseded || gone {
                    Err(super::load::STOPPED.to_string())
                } else {
                    received.map_err(|e| e.to_string())
                };
                if end.is_ok() {
                    eprintln!(
                        "strata-server: replication: received the master's snapshot stream \
                         ({} bytes) in {:.2} s; the load has read {} of them",
                        spool.written(),
                        started.elapsed().as_secs_f64(),
                        spool.loaded()
                    );
                }
                spool.finish(end.clone());
                end
            })
            .map_err(|e| format!("starting the receiver: {e}"))?;
        let mut last_newline = Instant::now();
        let mut tick = || {
            // Only once the stream is in: before END, the master is still sending it.
            if spool.finished() {
                if last_newline.elapsed() >= ACK_EVERY {
                    last_newline = Instant::now();
                    let _ = (&sock).write_all(b"\n");
                }
                r.if_current(epoch, |st| {
                    if let Some(s) = &mut st.sync {
                        s.loaded = Some(spool.loaded());
                    }
                });
            }
            r.is_current(epoch)
        };
        let loaded = spool
            .reader()
            .map_err(|e| super::load::LoadError::File(format!("{}: {e}", path.display())))
            .and_then(|reader| super::ship::load(ctx, reader, targets, &mut tick));
        // A load that failed while the stream was still arriving failed on its own: its
        // reason, not the receiver's (which is then only that the load stopped).
        let load_first = loaded.is_err() && spool.abandon();
        let received = receiver
            .join()
            .unwrap_or_else(|_| Err("the receiver panicked".into()));
        match (received, loaded) {
            (_, Err(e)) if load_first => Err(e.to_string()),
            (Err(e), _) => Err(e),
            (Ok(_), loaded) => loaded.map_err(|e| e.to_string()),
        }
    })
}

/// The master's socket as a `Read` for the snapshot stream's receiver: a read that times
/// out (the socket's [`POLL`]) is retried while the link is wanted and the master has not
/// been silent for `timeout`.
struct Patient<'a> {
    link: &'a mut Link,
    r: &'a super::Replication,
    epoch: u64,
    timeout: Duration,
    last_io: Instant,
    /// REPLICAOF moved on during a read.
    superseded: bool,
    /// The load gave up: stop waiting for the master.
    spool: &'a Spool,
}

impl Read for Patient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.link.r.read(buf) {
                Err(e) if is_timeout(&e) => {
                    if !self.r.is_current(self.epoch) {
                        self.superseded = true;
                        return Err(std::io::Error::other("replication was reconfigured"));
                    }
                    if self.spool.is_abandoned() {
                        return Err(std::io::Error::other(super::spool::ABANDONED));
                    }
                    if self.last_io.elapsed() > self.timeout {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            "timeout receiving the snapshot stream from the master",
                        ));
                    }
                }
                r => {
                    self.last_io = Instant::now();
                    return r;
                }
            }
        }
    }
}

/// Applies the command stream from `offset` until the link fails or REPLICAOF moves on.
/// A session that ends inside MULTI (its queued commands never ran) leaves the offset at
/// the MULTI, so that a partial resync sends the whole transaction again.
fn apply_stream(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    epoch: u64,
    link: &mut Link,
    at: Stream,
) -> Result<End, End> {
    let mut multi_start = None;
    let end = stream_loop(shared, conn, epoch, link, at, &mut multi_start);
    if let Some(at) = multi_start {
        conn.multi = None;
        shared.replication.if_current(epoch, |st| st.offset = at);
    }
    end
}

/// Where a session's stream starts.
struct Stream {
    replid: String,
    offset: u64,
    timeout: Duration,
}

fn stream_loop(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    epoch: u64,
    link: &mut Link,
    at: Stream,
    multi_start: &mut Option<u64>,
) -> Result<End, End> {
    let Stream {
        replid,
        mut offset,
        timeout,
    } = at;
    let r = &shared.replication;
    let mut stream = StreamReader::default();
    let mut buf = BytesMut::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let mut read_offset = offset;
    let mut last_io = Instant::now();
    let mut last_ack: Option<Instant> = None;
    let max_bulk = shared.config.read().proto_max_bulk_len;
    // The bytes read and not yet in this server's log: `raw[0]` is stream byte `logged`.
    // A request goes to the log once applied, a transaction at its EXEC (Redis feeds its
    // backlog with what its master's client applied), so the log ends where the data is.
    let mut raw = Raw {
        bytes: Vec::new(),
        logged: offset,
    };
    loop {
        if !r.is_current(epoch) {
            return Ok(End::Superseded);
        }
        if conn.info.is_killed() {
            return Err(End::Failed(
                "the master's connection was killed (CLIENT KILL)".into(),
            ));
        }
        let committed = multi_start.unwrap_or(offset);
        if last_ack.is_none_or(|t| t.elapsed() >= ACK_EVERY) {
            link.send(&[b"REPLCONF", b"ACK", committed.to_string().as_bytes()])?;
            last_ack = Some(Instant::now());
        }
        match link.r.read(&mut chunk) {
            Ok(0) => return Err(End::Failed("the master closed the connection".into())),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                raw.bytes.extend_from_slice(&chunk[..n]);
                read_offset += n as u64;
                last_io = Instant::now();
            }
            Err(e) if is_timeout(&e) => {
                if last_io.elapsed() > timeout {
                    return Err(End::Failed(
                        "timeout: no data nor PING from the master".into(),
                    ));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        // Single-shard requests wait in `run` and are applied together (`batch.rs`) when a
        // request that is not one comes, when the run is full, or when the buffer holds no
        // complete request more; the others are applied alone, in order, after them.
        let mut run = Run {
            queue: VecDeque::new(),
            bytes: 0,
        };
        loop {
            let (argv, n) = match stream.next(&mut buf, max_bulk) {
                Ok(Some(got)) => got,
                Ok(None) => {
                    run.apply(shared, conn, epoch, &replid, &mut offset, &mut raw)?;
                    break;
                }
                Err(e) => {
                    run.apply(shared, conn, epoch, &replid, &mut offset, &mut raw)?;
                    return Err(End::Stopped(format!("the master's stream: {}", e.0)));
                }
            };
            if !r.is_current(epoch) {
                return Ok(End::Superseded);
            }
            let argv = if control(&argv) == Control::Apply {
                match batch::Item::route(shared, conn, argv, n) {
                    Ok(item) => {
                        run.bytes += n;
                        run.queue.push_back(item);
                        if run.queue.len() >= batch::MAX_RUN || run.bytes >= batch::MAX_RUN_BYTES {
                            run.apply(shared, conn, epoch, &replid, &mut offset, &mut raw)?;
                        }
                        continue;
                    }
                    Err(argv) => argv,
                }
            } else {
                argv
            };
            run.apply(shared, conn, epoch, &replid, &mut offset, &mut raw)?;
            match control(&argv) {
                Control::Ack => {
                    offset += n;
                    let committed = multi_start.unwrap_or(offset);
                    // Published before the ACK: whoever sees the ACK sees the offset in INFO.
                    let alive = {
                        let _applying = r.applying.lock();
                        r.if_current(epoch, |st| {
                            raw.log_to(shared, committed);
                            st.offset = committed;
                            st.read_offset = read_offset;
                        })
                    };
                    if alive.is_none() {
                        return Ok(End::Superseded);
                    }
                    link.send(&[b"REPLCONF", b"ACK", committed.to_string().as_bytes()])?;
                    last_ack = Some(Instant::now());
                    continue;
                }
                Control::Skip => {
                    offset += n;
                    let committed = multi_start.unwrap_or(offset);
                    let _applying = r.applying.lock();
                    let alive = r.if_current(epoch, |st| {
                        raw.log_to(shared, committed);
                        st.offset = committed;
                    });
                    if alive.is_none() {
                        return Ok(End::Superseded);
                    }
                    continue;
                }
                Control::Apply => {
                    let name = argv[0].to_ascii_lowercase();
                    if name == b"multi" && multi_start.is_none() {
                        *multi_start = Some(offset);
                    }
                    let _applying = r.applying.lock();
                    if !r.is_current(epoch) {
                        return Ok(End::Superseded);
                    }
                    apply_at(shared, conn, argv, &replid, offset, offset + n)?;
                    offset += n;
                    if name == b"exec" || name == b"discard" {
                        *multi_start = None;
                    }
                    // Data, log and offset move together (a full sync's cut on this
                    // server takes `applying`); inside MULTI none of them moves.
                    let committed = multi_start.unwrap_or(offset);
                    r.if_current(epoch, |st| {
                        raw.log_to(shared, committed);
                        st.offset = committed;
                        st.db = conn.selected;
                    });
                    continue;
                }
            }
        }
        let alive = r.if_current(epoch, |st| {
            st.offset = multi_start.unwrap_or(offset);
            st.read_offset = read_offset;
            st.last_io = Some(last_io);
        });
        if alive.is_none() {
            return Ok(End::Superseded);
        }
    }
}

/// Single-shard requests of the stream read and not yet applied (`batch.rs`). Never inside
/// MULTI: a request the master's client would queue routes to no shard.
struct Run {
    queue: VecDeque<batch::Item>,
    bytes: u64,
}

impl Run {
    /// Applies every queued request, in runs, each run's data, log and offset moving
    /// together under `applying`; a request no run takes (its shard stays busy) is applied
    /// alone. A request that fails stops replication, with nothing after it applied.
    fn apply(
        &mut self,
        shared: &Shared,
        conn: &mut ConnState,
        epoch: u64,
        replid: &str,
        offset: &mut u64,
        raw: &mut Raw,
    ) -> Result<(), End> {
        let r = &shared.replication;
        while !self.queue.is_empty() {
            let _applying = r.applying.lock();
            if !r.is_current(epoch) {
                return Err(End::Superseded);
            }
            let ran = batch::apply_run(shared, conn, &mut self.queue, replid, *offset);
            let mut failed = ran.failed;
            *offset += ran.bytes;
            if ran.applied == 0 && failed.is_none() {
                if let Some(item) = self.queue.pop_front() {
                    let n = item.bytes;
                    match apply_at(shared, conn, item.into_argv(), replid, *offset, *offset + n) {
                        Ok(()) => *offset += n,
                        Err(End::Stopped(reason)) => failed = Some(reason),
                        Err(end) => return Err(end),
                    }
                }
            }
            r.if_current(epoch, |st| {
                raw.log_to(shared, *offset);
                st.offset = *offset;
                st.db = conn.selected;
            });
            if let Some(reason) = failed {
                self.queue.clear();
                return Err(End::Stopped(reason));
            }
        }
        self.bytes = 0;
        Ok(())
    }
}

/// Stream bytes read and not yet appended to this server's log.
struct Raw {
    bytes: Vec<u8>,
    /// The stream offset of `bytes[0]`.
    logged: u64,
}

impl Raw {
    /// Appends the bytes up to stream offset `to` to the log (the master's stream, at the
    /// master's offsets: sub-replicas are served from it). The caller holds `applying` and
    /// has checked its epoch: the log, the data and the offset move together.
    fn log_to(&mut self, shared: &Shared, to: u64) {
        if to <= self.logged {
            return;
        }
        let k = ((to - self.logged) as usize).min(self.bytes.len());
        shared.master.append_raw(&self.bytes[..k]);
        self.bytes.drain(..k);
        self.logged = to;
    }
}

/// What the replica does with a request of the stream.
#[derive(Debug, PartialEq, Eq)]
enum Control {
    /// REPLCONF GETACK: answer with the offset (the request itself counted first).
    Ack,
    /// PING and other REPLCONF: counted, not run.
    Skip,
    Apply,
}

fn control(argv: &[Bytes]) -> Control {
    let is = |i: usize, w: &str| {
        argv.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
    };
    if is(0, "replconf") {
        if is(1, "getack") {
            return Control::Ack;
        }
        return Control::Skip;
    }
    if is(0, "ping") {
        return Control::Skip;
    }
    Control::Apply
}

/// Runs one request of the stream (bytes `from..to` of stream `replid`) with the position
/// after it in the same batch as its writes (`position.rs`). FLUSHALL and FLUSHDB write in
/// several batches: those carry the position before the request and the position after it
/// is written once they are done, so a crash in between runs the flush again (harmless: it
/// ends in the same empty databases).
fn apply_at(
    shared: &Shared,
    conn: &mut ConnState,
    argv: Vec<Bytes>,
    replid: &str,
    from: u64,
    to: u64,
) -> Result<(), End> {
    let several = [&b"flushall"[..], b"flushdb"]
        .iter()
        .any(|c| argv[0].eq_ignore_ascii_case(c));
    let pos = |offset| Position {
        kind: Kind::Following,
        replid: replid.to_string(),
        offset,
        db: conn.selected,
    };
    let during = pos(if several { from } else { to });
    let after = pos(to);
    crate::position::with(during, || apply(shared, conn, argv))?;
    if several {
        let mut b = strata::WriteBatch::new();
        crate::position::put_all(shared.store.db(), &mut b, &after);
        shared
            .store
            .write_server_records(b)
            .map_err(|e| End::Stopped(format!("storing the replication position: {e}")))?;
    }
    Ok(())
}

/// Runs one request of the stream as the master's client; an error reply stops
/// replication.
fn apply(shared: &Shared, conn: &mut ConnState, argv: Vec<Bytes>) -> Result<(), End> {
    let head: Vec<Bytes> = argv.iter().take(4).cloned().collect();
    let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 64);
    let tx = shared.store.front();
    let mut ctx = Ctx::new(shared, &tx, conn, &mut reply);
    dispatch(&mut ctx, argv);
    let out = reply.take();
    match batch::failure(&head, &out) {
        Some(reason) => Err(End::Stopped(reason)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn control_requests() {
        assert_eq!(control(&argv(&["REPLCONF", "GETACK", "*"])), Control::Ack);
        assert_eq!(control(&argv(&["replconf", "getack", "*"])), Control::Ack);
        assert_eq!(control(&argv(&["PING"])), Control::Skip);
        assert_eq!(control(&argv(&["REPLCONF", "other"])), Control::Skip);
        assert_eq!(control(&argv(&["SET", "k", "v"])), Control::Apply);
        assert_eq!(control(&argv(&["SELECT", "1"])), Control::Apply);
    }
}
