//! One client connection: read, parse, run, reply, in Redis's order.
//!
//! Each read appends to the query buffer; the commands it completes run one after another
//! (each parsed with the limits in force after the previous one ran, so `AUTH` inside a
//! pipeline lifts the unauthenticated limits for what follows, as in Redis); their replies
//! are written together. The query buffer is bounded by `client-query-buffer-limit` (the
//! client is closed beyond it, without a reply, as Redis does); the reply buffer is flushed
//! whenever it passes [`REPLY_FLUSH_BYTES`], so a deep pipeline of large replies costs a
//! bounded amount of memory. After a protocol error the error is replied and the connection
//! closed.
//!
//! **Output limits.** Replies the socket has not taken are the client's pending output
//! (CLIENT LIST `omem`). While a write is blocked, the connection checks the normal class of
//! `client-output-buffer-limit` every [`LIMIT_CHECK`]: past the hard limit, or above the soft
//! limit for longer than its seconds, the client is closed (Redis's
//! `checkClientOutputBufferLimits`). A client that never reads thus costs at most a reply
//! batch plus the socket buffers, and is dropped once its limit says so.
//!
//! **Kill.** The task also waits on its registry entry's kill notification (CLIENT KILL)
//! wherever it awaits the socket.
//!
//! **Pub/sub.** A subscribed connection also waits, beside its socket read, for messages
//! published to it (`pubsub.rs`) and writes them as they come ([`deliver_messages`]), under
//! the `pubsub` class of the output limits. A connection that never subscribed has no
//! subscriber and that branch never fires.
//!
//! Layer: connection and server (the top).

use crate::clients::{ClientInfo, READ_BYTES};
use crate::cmd::table::{traits, Keys};
use crate::cmd::{dispatch_found, ConnState, Ctx, Found};
use crate::config::OutputLimit;
use crate::exec::{self, Route};
use crate::protocol::parse::{Limits, Parser};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

/// Replies are written out once this many bytes are pending.
const REPLY_FLUSH_BYTES: usize = 1024 * 1024;
/// How often a blocked write re-checks the output limits.
const LIMIT_CHECK: Duration = Duration::from_millis(50);
/// Commands of one connection queued to workers before it waits for their replies (bounds
/// the memory of a deep pipeline).
const MAX_QUEUED: usize = 1024;

/// What processing the query buffer ended with.
enum Step {
    /// Every complete request ran; read more.
    NeedInput,
    /// The reply buffer is full: write it, then continue with the buffered requests.
    Flush,
    /// Write the replies, then close (QUIT, SHUTDOWN, protocol error).
    Close,
    /// A blocking command blocked: write the replies before it, wait for its reply
    /// (dropped if CLIENT REPLY says so), then continue with the buffered requests.
    Blocked(crate::blocking::Wait, bool),
    /// CLIENT PAUSE holds this request (`pause.rs`): write the replies before it, wait for
    /// the pause to end, then run it and continue with the buffered requests.
    Paused(Box<Held>),
    /// PSYNC or SYNC: write the replies, then the connection is the replica's feed
    /// (`repl/serve.rs`).
    Replica(Box<crate::repl::serve::Handoff>),
}

/// A request looked up and routed, not run yet.
type Held = (Vec<Bytes>, Found, Route);

/// Decrements the connected-clients count and leaves the registry (and any pub/sub
/// subscription) however the connection ends.
struct ClientSlot(Arc<Shared>, Arc<ClientInfo>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if self.1.is_subscriber() {
            let _ = self.0.pubsub.leave(self.1.id, &self.1);
        }
        self.0.clients.remove(self.1.id);
        self.0.monitors.remove(self.1.id);
        self.0.store.watches.unwatch_all(self.1.id);
        self.0.store.tracking.left(&self.1);
        self.0
            .stats
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a turn of writing replies ended.
enum WriteEnd {
    /// Everything was written.
    Done,
    /// The socket took nothing for [`LIMIT_CHECK`]; the limits allowed waiting on.
    Blocked,
    /// The socket failed, the client was killed, or its output limit was passed.
    Close,
}

/// Writes `out[*off..]`, enforcing the output limit and observing CLIENT KILL while it
/// waits; `soft_since` is when the pending output first passed the soft limit.
async fn write_some<S: AsyncWrite + Unpin>(
    sock: &mut S,
    out: &[u8],
    off: &mut usize,
    info: &ClientInfo,
    limit: OutputLimit,
    soft_since: &mut Option<Instant>,
) -> WriteEnd {
    while *off < out.len() {
        let pending = out.len() - *off;
        info.omem.store(pending, Ordering::Relaxed);
        if limit.hard_bytes > 0 && pending as u64 > limit.hard_bytes {
            return WriteEnd::Close;
        }
        if limit.soft_bytes > 0 && pending as u64 > limit.soft_bytes {
            let since = *soft_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(limit.soft_secs) {
                return WriteEnd::Close;
            }
        } else {
            *soft_since = None;
        }
        // A socket with room takes the replies at once: try that before arming the
        // limit's timer and the kill notification, which cost more than the write.
        let r = match write_now(sock, &out[*off..]).await {
            Some(r) => r,
            None => tokio::select! {
                r = sock.write(&out[*off..]) => r,
                _ = tokio::time::sleep(LIMIT_CHECK) => return WriteEnd::Blocked,
                _ = info.kill.notified() => return WriteEnd::Close,
            },
        };
        match r {
            Ok(0) | Err(_) => return WriteEnd::Close,
            Ok(n) => *off += n,
        }
    }
    info.omem.store(0, Ordering::Relaxed);
    WriteEnd::Done
}

/// One write of `out` if the socket takes it without waiting; `None` if it would wait (the
/// socket's readiness is then registered, as by any poll; nothing was written).
async fn write_now<S: AsyncWrite + Unpin>(
    sock: &mut S,
    out: &[u8],
) -> Option<std::io::Result<usize>> {
    std::future::poll_fn(
        |cx| match std::pin::Pin::new(&mut *sock).poll_write(cx, out) {
            std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        },
    )
    .await
}

/// Whether a blocked client's pipeline may add to its pending output: only under a limit
/// that will close it, and only up to that limit (without one, it waits for the client).
fn may_grow(limit: OutputLimit, pending: usize) -> bool {
    let p = pending as u64;
    (limit.hard_bytes > 0 && p <= limit.hard_bytes)
        || (limit.soft_bytes > 0 && p <= limit.soft_bytes)
}

/// Serves one accepted client (already counted in `connected_clients` and registered as
/// `info`) until it leaves.
pub async fn serve<S>(shared: Arc<Shared>, mut sock: S, info: Arc<ClientInfo>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _slot = ClientSlot(shared.clone(), info.clone());
    let mut conn = shared.new_conn(info.clone());
    let mut parser = Parser::new();
    let mut buf = BytesMut::with_capacity(READ_BYTES);
    let mut reply = ReplyBuf::new(Proto::Resp2);
    let mut queued = Queued::new();
    let mut stop = shared.shutdown_receiver();
    // The request a pause held, run first once it ends.
    let mut held: Option<Held> = None;
    loop {
        let (idle, query_limit) = {
            let c = shared.config.read();
            (c.timeout_secs, c.client_query_buffer_limit)
        };
        if info.is_killed() {
            return;
        }
        buf.reserve(READ_BYTES);
        let read = async {
            if idle == 0 {
                sock.read_buf(&mut buf).await.ok()
            } else {
                tokio::time::timeout(Duration::from_secs(idle), sock.read_buf(&mut buf))
                    .await
                    .ok()
                    .and_then(|r| r.ok())
            }
        };
        let n = tokio::select! {
            n = read => n,
            _ = crate::server::stopped(&mut stop) => None,
            _ = info.kill.notified() => None,
            () = crate::pubsub::ready(conn.sub.as_ref()) => {
                if deliver_messages(&shared, &mut sock, &conn, conn.sub.as_ref(), &stop).await {
                    continue;
                }
                return;
            }
            () = crate::pubsub::ready(conn.push.as_ref()) => {
                if deliver_messages(&shared, &mut sock, &conn, conn.push.as_ref(), &stop).await {
                    continue;
                }
                return;
            }
        };
        let Some(n) = n.filter(|&n| n > 0) else {
            return; // closed, failed, idle too long, killed, or the server is stopping
        };
        if info.is_killed() {
            // Killed while the request was arriving: CLIENT KILL has replied, so nothing
            // this client sends afterwards runs.
            return;
        }
        shared
            .stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        if buf.len() > query_limit {
            return; // "Closing client that reached max query buffer length"
        }
        loop {
            info.qbuf.store(buf.len(), Ordering::Relaxed);
            info.qbuf_cap.store(buf.capacity(), Ordering::Relaxed);
            let step = run_buffered(
                &shared,
                &mut conn,
                &mut parser,
                &mut buf,
                &mut reply,
                &mut queued,
                &mut held,
            )
            .await;
            info.qbuf.store(buf.len(), Ordering::Relaxed);
            let mut step = step;
            let mut out = reply.take();
            if !out.is_empty() {
                let limit = output_limit(&shared, &conn);
                let (mut off, mut soft_since) = (0, None);
                loop {
                    match write_some(&mut sock, &out, &mut off, &info, limit, &mut soft_since).await
                    {
                        WriteEnd::Done => break,
                        WriteEnd::Close => return,
                        // The client is not reading: as Redis, keep running the requests it
                        // has sent, so that its limit sees the output it asked for.
                        WriteEnd::Blocked => {
                            if matches!(step, Step::Flush) && may_grow(limit, out.len() - off) {
                                step = run_buffered(
                                    &shared,
                                    &mut conn,
                                    &mut parser,
                                    &mut buf,
                                    &mut reply,
                                    &mut queued,
                                    &mut held,
                                )
                                .await;
                                out.extend_from_slice(&reply.take());
                            }
                        }
                    }
                }
                shared
                    .stats
                    .net_output_bytes
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
            }
            match step {
                Step::NeedInput => break,
                Step::Flush => continue,
                Step::Replica(h) => {
                    let input = buf.split();
                    crate::repl::serve::run(shared.clone(), &mut sock, input, info.clone(), *h)
                        .await;
                    return;
                }
                Step::Close => {
                    let _ = sock.shutdown().await;
                    return;
                }
                Step::Blocked(wait, dropped) => {
                    let woke =
                        wait_blocked(&shared, &mut sock, &mut buf, &info, &mut stop, wait).await;
                    match woke {
                        Some(r) if !dropped => reply.raw(&r),
                        Some(_) => {}
                        None => return,
                    }
                    continue;
                }
                Step::Paused(request) => {
                    while shared.pause.holds(&request.1, &conn) {
                        tokio::select! {
                            () = shared.pause.ended() => {}
                            _ = crate::server::stopped(&mut stop) => return,
                            _ = info.kill.notified() => return,
                        }
                    }
                    held = Some(*request);
                    continue;
                }
            }
        }
    }
}

/// Waits for a blocked command's reply (`blocking.rs`): its wake-up, its deadline (Redis's
/// timeout reply, a null array), CLIENT KILL, shutdown, or the client closing the socket
/// (bytes it sends meanwhile are kept for later, as Redis keeps them in its query buffer).
/// `None`: close the connection (the wait is withdrawn).
async fn wait_blocked<S: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    info: &ClientInfo,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    mut wait: crate::blocking::Wait,
) -> Option<BytesMut> {
    let store = &shared.store;
    info.blocked.store(true, Ordering::Relaxed);
    let out = loop {
        let deadline = wait.deadline;
        let expire = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_BYTES);
        }
        tokio::select! {
            woken = &mut wait.rx => {
                break match woken {
                    Ok(w) => match w.then {
                        Some(f) => Some(tokio::task::block_in_place(|| {
                            let tx = shared.store.front();
                            crate::blocking::around_command(shared, &tx, || f.run(&tx)).0
                        })),
                        None => Some(w.reply),
                    },
                    Err(_) => {
                        let mut r = ReplyBuf::with_capacity(wait.proto(), 8);
                        r.null_array();
                        Some(r.take())
                    }
                };
            }
            _ = expire => {
                if shared.blocked.cancel(store, &wait) {
                    let mut r = ReplyBuf::with_capacity(wait.proto(), 8);
                    r.null_array();
                    break Some(r.take());
                }
                // A serve took it meanwhile: its reply is coming.
                wait.deadline = None;
            }
            _ = info.kill.notified() => {
                shared.blocked.cancel(store, &wait);
                break None;
            }
            _ = crate::server::stopped(stop) => {
                shared.blocked.cancel(store, &wait);
                break None;
            }
            n = sock.read_buf(buf) => {
                let limit = shared.config.read().client_query_buffer_limit;
                match n {
                    Ok(n) if n > 0 && buf.len() <= limit => {
                        shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        info.qbuf.store(buf.len(), Ordering::Relaxed);
                    }
                    _ => {
                        shared.blocked.cancel(store, &wait);
                        break None;
                    }
                }
            }
        }
    };
    info.blocked.store(false, Ordering::Relaxed);
    out
}

/// The client's class of `client-output-buffer-limit`: `pubsub` while it holds a
/// subscription, else `normal` (Redis's `getClientType`).
fn output_limit(shared: &Shared, conn: &ConnState) -> OutputLimit {
    let class = if conn.in_pubsub_mode() { 2 } else { 0 };
    shared.config.read().output_limits[class]
}

/// Writes the messages published to this subscribed connection, until its outbox is empty.
/// `false`: the connection must close (the socket failed, the client was killed or passed
/// its output limit, or the server is stopping while the client does not read).
async fn deliver_messages<S: AsyncWrite + Unpin>(
    shared: &Shared,
    sock: &mut S,
    conn: &ConnState,
    mailbox: Option<&Arc<crate::pubsub::Subscriber>>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> bool {
    let Some(sub) = mailbox else { return true };
    loop {
        let out = sub.take();
        if out.is_empty() {
            return true;
        }
        let limit = output_limit(shared, conn);
        let (mut off, mut soft_since) = (0, None);
        loop {
            match write_some(sock, &out, &mut off, &conn.info, limit, &mut soft_since).await {
                WriteEnd::Done => break,
                WriteEnd::Close => return false,
                WriteEnd::Blocked if *stop.borrow() => return false,
                WriteEnd::Blocked => {}
            }
        }
        shared
            .stats
            .net_output_bytes
            .fetch_add(out.len() as u64, Ordering::Relaxed);
    }
}

/// Replies of commands queued to shard workers, in request order, each with whether CLIENT
/// REPLY drops it.
type Queued = VecDeque<(oneshot::Receiver<BytesMut>, bool)>;

/// Waits for the queued commands' replies and appends them, in order.
async fn drain(queued: &mut Queued, reply: &mut ReplyBuf) {
    while let Some((rx, dropped)) = queued.pop_front() {
        let bytes = rx.await;
        if dropped {
            continue;
        }
        match bytes {
            Ok(bytes) => reply.raw(&bytes),
            Err(_) => reply.error("ERR the shard worker stopped before the command answered"),
        }
    }
}

/// Runs every complete request in `buf`: a run of consecutive single-shard commands runs in
/// place while their shards are idle (one engine write per shard for the whole run,
/// [`run_in_place`]), other shard commands are queued to their worker (`exec.rs`), and the
/// rest run here once the queued ones have answered.
async fn run_buffered(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    parser: &mut Parser,
    buf: &mut BytesMut,
    reply: &mut ReplyBuf,
    queued: &mut Queued,
    held: &mut Option<Held>,
) -> Step {
    // A request (routed) parsed while gathering a run that belongs to the next step; first,
    // the one a pause held, which runs now.
    let mut carried: Option<Held> = held.take();
    let mut released = carried.is_some();
    // The parser's limits, read once per buffer (not per request: the configuration's lock
    // is shared by every connection) and again after each command run on this thread, the
    // only ones that change them (AUTH, HELLO, CONFIG SET).
    let mut lim = limits(shared, conn);
    loop {
        if queued.len() >= MAX_QUEUED {
            drain(queued, reply).await;
        }
        if conn.info.is_killed() {
            return Step::Close; // CLIENT KILL from another client, mid-pipeline
        }
        if carried.is_none() && reply.len() >= REPLY_FLUSH_BYTES {
            return Step::Flush;
        }
        let (argv, found, route) = match carried.take() {
            // A request held by a pause is routed again: SWAPDB may have run meanwhile.
            Some((a, _, _)) if shared.store.dbs.physical(conn.selected) != conn.db => {
                conn.db = shared.store.dbs.physical(conn.selected);
                let (found, r) = exec::route(shared, conn, &a);
                (a, found, r)
            }
            Some(x) => x,
            None => match parser.next(buf, lim) {
                Ok(Some(a)) => {
                    conn.db = shared.store.dbs.physical(conn.selected);
                    let (found, r) = exec::route(shared, conn, &a);
                    (a, found, r)
                }
                Ok(None) => {
                    drain(queued, reply).await;
                    conn.info.obl.store(reply.len(), Ordering::Relaxed);
                    return Step::NeedInput;
                }
                Err(e) => {
                    drain(queued, reply).await;
                    reply.error(&format!("ERR {}", e.0));
                    return Step::Close;
                }
            },
        };
        // CLIENT PAUSE: the request waits (its earlier replies written first); the one just
        // released runs unless FAILOVER's hold came since. The writes this step admits are
        // counted until the step ends, by when they hold their stripes or are done, so a
        // hold that comes meanwhile waits for them (`pause.rs`).
        let mut gate = shared.pause.gate(conn.id);
        if !gate.admit(&found, conn, std::mem::take(&mut released)) {
            drain(queued, reply).await;
            return Step::Paused(Box::new((argv, found, route)));
        }
        // CLIENT REPLY: a command's reply is dropped while replies are off or skipped
        // (Redis's CLIENT_REPLY_OFF / CLIENT_REPLY_SKIP).
        let skip = std::mem::take(&mut conn.skip_next);
        match route {
            Route::Shard {
                shard,
                write,
                keys,
                reads,
            } => {
                let dropped = skip || conn.reply_off;
                if is_script(&found) {
                    // A script runs alone: nothing of this connection is in flight beside it,
                    // so if it must run again on this thread, no later command ran before it.
                    drain(queued, reply).await;
                    let again = if dropped {
                        conn.skip_next = skip; // the inline run takes it
                        Some(argv)
                    } else {
                        let r = Routed {
                            argv,
                            found,
                            shard,
                            write,
                            keys,
                            reads,
                        };
                        run_script_on_shard(shared, conn, reply, queued, r).await
                    };
                    match again {
                        Some(argv) => carried = Some((argv, found, Route::Inline)),
                        None => conn.info.obl.store(reply.len(), Ordering::Relaxed),
                    }
                    continue;
                }
                let first = Routed {
                    argv,
                    found,
                    shard,
                    write,
                    keys,
                    reads,
                };
                if queued.is_empty() && !shared.store.sync_writes() && !dropped {
                    // Nothing of this connection is in flight: gather the run of pipelined
                    // single-shard commands behind this one, of any shard, and run it right
                    // here while their shards are idle (no hand-off, no channel, one engine
                    // write per shard for the whole run).
                    let mut run = vec![first];
                    let mut protocol_error = None;
                    while run.len() < MAX_RUN {
                        match parser.next(buf, lim) {
                            Ok(Some(a)) => match exec::route(shared, conn, &a) {
                                (
                                    found,
                                    Route::Shard {
                                        shard: s,
                                        write,
                                        keys,
                                        reads,
                                    },
                                ) if !is_script(&found) && gate.admit(&found, conn, false) => run
                                    .push(Routed {
                                        argv: a,
                                        found,
                                        shard: s,
                                        write,
                                        keys,
                                        reads,
                                    }),
                                (found, other) => {
                                    carried = Some((a, found, other));
                                    break;
                                }
                            },
                            Ok(None) => break,
                            Err(e) => {
                                protocol_error = Some(e);
                                break;
                            }
                        }
                    }
                    let run = run_in_place(shared, conn, reply, run);
                    if let Some(e) = protocol_error {
                        // Run what the shards did not take (queued), then the error.
                        for r in run {
                            queue_one(shared, conn, reply, queued, r, false).await;
                        }
                        drain(queued, reply).await;
                        reply.error(&format!("ERR {}", e.0));
                        return Step::Close;
                    }
                    if run.is_empty() {
                        conn.info.obl.store(reply.len(), Ordering::Relaxed);
                        continue;
                    }
                    // A shard was busy (or a stripe held) from this command on: queue the
                    // rest, in order.
                    for r in run {
                        queue_one(shared, conn, reply, queued, r, false).await;
                    }
                    continue;
                }
                queue_one(shared, conn, reply, queued, first, dropped).await;
            }
            Route::Inline => {
                drain(queued, reply).await;
                // Messages published before this command precede its reply.
                for mailbox in [&conn.sub, &conn.push].into_iter().flatten() {
                    reply.raw(&mailbox.take());
                }
                let before = reply.len();
                let in_task =
                    matches!(found, Found::Command(spec, _) if spec.has_trait(traits::IN_TASK));
                let run = || {
                    let tx = shared.store.front();
                    let mut ctx = Ctx::new(shared, &tx, &mut *conn, &mut *reply);
                    dispatch_found(&mut ctx, argv, found);
                    ctx.blocked.take()
                };
                let blocked = if in_task {
                    run()
                } else {
                    tokio::task::block_in_place(run)
                };
                if let Some(wait) = blocked {
                    conn.info.obl.store(reply.len(), Ordering::Relaxed);
                    return Step::Blocked(wait, skip || conn.reply_off);
                }
                if skip || conn.reply_off {
                    reply.truncate(before);
                }
                conn.info.obl.store(reply.len(), Ordering::Relaxed);
                lim = limits(shared, conn);
                if conn.close_after_reply {
                    return Step::Close;
                }
                if let Some(h) = conn.replica.as_mut().and_then(|r| r.handoff.take()) {
                    return Step::Replica(Box::new(h));
                }
            }
        }
    }
}

/// A request that runs on one shard, with what [`exec::route`] found for it.
struct Routed {
    argv: Vec<Bytes>,
    found: Found,
    shard: usize,
    write: bool,
    keys: Keys,
    reads: Vec<Vec<u8>>,
}

/// Longest run of pipelined commands of one shard run in place with one engine write.
const MAX_RUN: usize = 64;

/// The parser's limits for this client now.
fn limits(shared: &Shared, conn: &ConnState) -> Limits {
    let c = shared.config.read();
    Limits {
        max_bulk_bytes: c.proto_max_bulk_len,
        authenticated: conn.authenticated || !shared.acl.auth_required(),
    }
}

/// A command [`run_in_place`] ran: its shard, where its reply starts, its replication unit
/// and the blocked clients it served.
type Ran = (
    usize,
    usize,
    Option<Vec<(u8, crate::repl::Argv)>>,
    crate::blocking::Wakes,
);

/// Runs `run` (single-shard commands, of one shard or several) on this thread, in order,
/// replying into `reply`, as one or more runs ([`run_once`]): a run that stopped at a busy
/// shard is committed, and the rest start a new run, which tries that shard again. Returns
/// the commands it did not run (a tail: their stripes were held, or a shard stayed busy),
/// which the caller queues to the workers, in order.
fn run_in_place(
    shared: &Shared,
    conn: &mut ConnState,
    reply: &mut ReplyBuf,
    run: Vec<Routed>,
) -> Vec<Routed> {
    let mut run = run;
    loop {
        let before = run.len();
        let (left, busy) = run_once(shared, conn, reply, run);
        // Stop when everything ran, or nothing did (give the rest to the workers).
        if left.is_empty() || !busy || left.len() == before {
            return left;
        }
        run = left;
    }
}

/// One run: takes the first command's shard if it is idle, then runs
/// the commands in order while their shards can be taken without waiting and their keys'
/// stripes are free. Each command gets its shard's transaction as its `Ctx::tx`; each
/// shard's writes reach its engine as one write when the run ends (`strata::HeldShards`),
/// before any reply is sent, replication unit appended or blocked client woken; if a
/// shard's write fails, the replies of that shard's commands become the failure. Returns
/// the commands it did not run (a tail) and whether it stopped at a busy shard (the rest
/// may run in a new run) rather than at held stripes or a SWAPDB (the rest are queued).
fn run_once(
    shared: &Shared,
    conn: &mut ConnState,
    reply: &mut ReplyBuf,
    run: Vec<Routed>,
) -> (Vec<Routed>, bool) {
    let store = &shared.store;
    let db = store.db();
    let mut held = db.hold_shards();
    let Some(first) = run.first() else {
        return (run, false);
    };
    // Not waited for when busy: on a quiet machine, waiting up to 2 ms for it (to spare
    // the hand-off to the worker) made P16 SETs 0.35-0.40x of redis-server against
    // 0.58-0.66x without, since the two connection threads then took turns
    // (`docs/benchmarks.md`).
    if held.txn(first.shard).is_none() {
        return (run, false);
    }
    // Inline for a short run (one command at P1): a run allocates nothing of its own.
    let mut guards: SmallVec<[_; 4]> = SmallVec::new();
    let mut ran: SmallVec<[Ran; 4]> = SmallVec::new();
    // The sequencer (`repl/sequencer.rs`): from before the run's writes until its effects
    // are appended, each command's its own unit, in order; the stripes are released after.
    let seq = shared.master.seq.enter();
    if run.len() > 1 {
        store.access.warm(
            conn.db,
            run.iter()
                .flat_map(|r| r.keys.iter().map(|k| &r.argv[k.pos][..])),
        );
    }
    let mut run = run.into_iter();
    let mut left = Vec::new();
    let mut busy = false;
    for r in run.by_ref() {
        let Some(txn) = held.txn(r.shard) else {
            left.push(r);
            busy = true;
            break;
        };
        if r.write {
            let taken = store.try_lock_owned(conn.db, &exec::key_args(&r.argv, &r.keys));
            match taken {
                Some(g) => guards.push(g),
                None => {
                    left.push(r);
                    break;
                }
            }
        }
        if store.dbs.physical(conn.selected) != conn.db {
            // SWAPDB ran since the routing: `queue_one` runs it on this thread.
            left.push(r);
            break;
        }
        let start = reply.len();
        if seq.is_some() {
            conn.repl_pending = Some(Vec::new());
        }
        let wakes = store.with_shard_txn(txn, |tx| {
            let mut ctx = Ctx::new(shared, tx, &mut *conn, &mut *reply);
            dispatch_found(&mut ctx, r.argv, r.found);
            std::mem::take(&mut ctx.wakes)
        });
        let unit = conn.repl_pending.take();
        ran.push((r.shard, start, unit, wakes));
    }
    left.extend(run);
    fn outcome_in(written: &strata::Committed, shard: usize) -> Result<(), &strata::Error> {
        written
            .iter()
            .find(|(s, _)| *s == shard)
            .map_or(Ok(()), |(_, r)| r.as_ref().map(|_| ()))
    }
    // The effects are appended while the shards are still held: released first, another
    // connection's run or a worker group could write one of these keys and append its
    // effects ahead of these, and a replica would apply the two in the other order.
    let written = held.commit_then(|written| {
        for (shard, _, unit, _) in &ran {
            if let (Some(unit), Ok(())) = (unit, outcome_in(written, *shard)) {
                shared.master.append_unit(unit, unit.len() > 1);
            }
        }
    });
    let outcome = |shard: usize| outcome_in(&written, shard);
    drop(seq);
    drop(guards);
    // The replies of a shard whose write failed become the failure, in place.
    if written.iter().any(|(_, r)| r.is_err()) {
        let first = ran.first().map_or(reply.len(), |c| c.1);
        let tail = reply.split_off(first);
        let mut ends: Vec<usize> = ran.iter().skip(1).map(|c| c.1 - first).collect();
        ends.push(tail.len());
        for ((shard, start, _, _), end) in ran.iter().zip(ends) {
            match outcome(*shard) {
                Ok(()) => reply.raw(&tail[start - first..end]),
                Err(e) => reply.raw(&exec::failed_reply(shared, reply.proto, e)),
            }
        }
    }
    // Blocked clients the run served get their replies now that its writes are applied.
    for (shard, _, _, wakes) in ran {
        wakes.deliver(shared, outcome(shard));
    }
    (left, busy)
}

/// Whether `found` runs a script (EVAL and its kin).
fn is_script(found: &Found) -> bool {
    matches!(found, Found::Command(spec, _) if spec.has_trait(traits::SCRIPT))
}

/// Runs a script on the worker of its declared keys' shard and replies; returns its request
/// instead if it must run on this thread (it reached a key it did not declare: it left no
/// write and no reply). Never in place: a script may run long (until SCRIPT KILL), and this
/// thread serves other connections meanwhile, SCRIPT KILL's among them; on the worker,
/// consecutive scripts of many clients also share one engine write.
async fn run_script_on_shard(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    reply: &mut ReplyBuf,
    queued: &mut Queued,
    r: Routed,
) -> Option<Vec<Bytes>> {
    let retry = r.argv.clone();
    let before = reply.len();
    queue_one(shared, conn, reply, queued, r, false).await;
    drain(queued, reply).await;
    // A reply is never empty: an empty one is the worker's "run it again here".
    (reply.len() == before).then_some(retry)
}

/// Queues one shard command to its worker (taking its keys' stripes if it writes).
async fn queue_one(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    reply: &mut ReplyBuf,
    queued: &mut Queued,
    r: Routed,
    dropped: bool,
) {
    let guard = if r.write {
        let store = &shared.store;
        let keys = exec::key_args(&r.argv, &r.keys);
        match store.try_lock_owned(conn.db, &keys) {
            Some(g) => Some(g),
            None => {
                // A front command holds or awaits a stripe, and may await one that our
                // own commands in flight hold shared.
                drain(queued, reply).await;
                Some(tokio::task::block_in_place(|| {
                    store.lock_owned_blocking(conn.db, &keys)
                }))
            }
        }
    } else {
        None
    };
    if guard.is_some() && shared.store.dbs.physical(conn.selected) != conn.db {
        // SWAPDB ran between the routing and the stripes (it changes the map only under
        // every stripe, so now it cannot): run it here, where the dispatcher fixes its
        // database under its stripes. Reads need not: the worker fixes theirs (`exec.rs`).
        drop(guard);
        drain(queued, reply).await;
        let before = reply.len();
        tokio::task::block_in_place(|| {
            let tx = shared.store.front();
            let mut ctx = Ctx::new(shared, &tx, &mut *conn, &mut *reply);
            dispatch_found(&mut ctx, r.argv, r.found);
        });
        if dropped {
            reply.truncate(before);
        }
        return;
    }
    let proto = reply.proto;
    let rx = exec::submit(
        shared, conn, proto, r.argv, r.found, r.shard, r.reads, guard,
    );
    queued.push_back((rx, dropped));
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
