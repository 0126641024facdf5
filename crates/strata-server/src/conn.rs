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
use crate::protocol::parse::{Limits, Parser};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use bytes::BytesMut;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes asked of the socket per read (Redis's `PROTO_IOBUF_LEN`).
const READ_BYTES: usize = 16 * 1024;
/// Replies are written out once this many bytes are pending.
const REPLY_FLUSH_BYTES: usize = 1024 * 1024;

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
            let step = tokio::task::block_in_place(|| {
                run_buffered(&shared, &mut conn, &mut parser, &mut buf, &mut reply)
            });
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

/// Runs every complete request in `buf` (blocking: commands call the database).
fn run_buffered(
    shared: &Shared,
    conn: &mut ConnState,
    parser: &mut Parser,
    buf: &mut BytesMut,
    reply: &mut ReplyBuf,
) -> Step {
    loop {
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
            Ok(Some(argv)) => {
                let mut ctx = Ctx {
                    shared,
                    conn: &mut *conn,
                    reply: &mut *reply,
                };
                dispatch(&mut ctx, argv);
                if conn.close_after_reply {
                    return Step::Close;
                }
            }
            Ok(None) => return Step::NeedInput,
            Err(e) => {
                reply.error(&format!("ERR {}", e.0));
                return Step::Close;
            }
        }
    }
}
