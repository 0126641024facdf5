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

use crate::cmd::{dispatch, ConnState, Ctx};
use crate::exec::{self, Route};
use crate::protocol::parse::{Limits, Parser};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use bytes::BytesMut;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Bytes asked of the socket per read (Redis's `PROTO_IOBUF_LEN`).
const READ_BYTES: usize = 16 * 1024;
/// Replies are written out once this many bytes are pending.
const REPLY_FLUSH_BYTES: usize = 1024 * 1024;
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
}

/// Decrements the connected-clients count however the connection ends.
struct ClientSlot(Arc<Shared>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0
            .stats
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one accepted client (already counted in `connected_clients`) until it leaves.
pub async fn serve(shared: Arc<Shared>, mut sock: TcpStream, addr: SocketAddr) {
    let _slot = ClientSlot(shared.clone());
    let mut conn = shared.new_conn(addr);
    let mut parser = Parser::new();
    let mut buf = BytesMut::with_capacity(READ_BYTES);
    let mut reply = ReplyBuf::new(Proto::Resp2);
    let mut queued = Queued::new();
    let mut stop = shared.shutdown_receiver();
    loop {
        let (idle, query_limit) = {
            let c = shared.config.read();
            (c.timeout_secs, c.client_query_buffer_limit)
        };
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
        };
        let Some(n) = n.filter(|&n| n > 0) else {
            return; // closed, failed, idle too long, or the server is stopping
        };
        shared
            .stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        if buf.len() > query_limit {
            return; // "Closing client that reached max query buffer length"
        }
        loop {
            let step = run_buffered(
                &shared,
                &mut conn,
                &mut parser,
                &mut buf,
                &mut reply,
                &mut queued,
            )
            .await;
            let out = reply.take();
            if !out.is_empty() {
                if sock.write_all(&out).await.is_err() {
                    return;
                }
                shared
                    .stats
                    .net_output_bytes
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
            }
            match step {
                Step::NeedInput => break,
                Step::Flush => continue,
                Step::Close => {
                    let _ = sock.shutdown().await;
                    return;
                }
            }
        }
    }
}

/// Replies of commands queued to shard workers, in request order.
type Queued = VecDeque<oneshot::Receiver<BytesMut>>;

/// Waits for the queued commands' replies and appends them, in order.
async fn drain(queued: &mut Queued, reply: &mut ReplyBuf) {
    while let Some(rx) = queued.pop_front() {
        match rx.await {
            Ok(bytes) => reply.raw(&bytes),
            Err(_) => reply.error("ERR the shard worker stopped before the command answered"),
        }
    }
}

/// Runs every complete request in `buf`: commands of one shard are queued to its worker
/// (`exec.rs`), the others run here once the queued ones have answered.
async fn run_buffered(
    shared: &Arc<Shared>,
    conn: &mut ConnState,
    parser: &mut Parser,
    buf: &mut BytesMut,
    reply: &mut ReplyBuf,
    queued: &mut Queued,
) -> Step {
    loop {
        if queued.len() >= MAX_QUEUED {
            drain(queued, reply).await;
        }
        if reply.len() >= REPLY_FLUSH_BYTES {
            return Step::Flush;
        }
        let limits = {
            let c = shared.config.read();
            Limits {
                max_bulk_bytes: c.proto_max_bulk_len,
                authenticated: conn.authenticated || c.requirepass.is_none(),
            }
        };
        match parser.next(buf, limits) {
            Ok(Some(argv)) => match exec::route(shared, conn, &argv) {
                Route::Shard {
                    shard,
                    write,
                    reads,
                } => {
                    let guard = if write {
                        let store = &shared.store;
                        let keys = exec::command_keys(
                            crate::cmd::lookup_argv(&argv).map_or((0, 0, 0), |s| s.keys),
                            &argv,
                        );
                        match store.try_lock_owned(conn.db, &keys) {
                            Some(g) => Some(g),
                            None => {
                                // A command in flight holds a stripe; it may be our own.
                                drain(queued, reply).await;
                                Some(tokio::task::block_in_place(|| {
                                    store.lock_owned_blocking(conn.db, &keys)
                                }))
                            }
                        }
                    } else {
                        None
                    };
                    let proto = reply.proto;
                    queued.push_back(exec::submit(shared, conn, proto, argv, shard, reads, guard));
                }
                Route::Inline => {
                    drain(queued, reply).await;
                    tokio::task::block_in_place(|| {
                        let mut ctx = Ctx {
                            shared,
                            conn: &mut *conn,
                            reply: &mut *reply,
                        };
                        dispatch(&mut ctx, argv);
                    });
                    if conn.close_after_reply {
                        return Step::Close;
                    }
                }
            },
            Ok(None) => {
                drain(queued, reply).await;
                return Step::NeedInput;
            }
            Err(e) => {
                drain(queued, reply).await;
                reply.error(&format!("ERR {}", e.0));
                return Step::Close;
            }
        }
    }
}
