//! A replica's connection after PSYNC or SYNC (Redis's `syncCommand` onwards): the full
//! sync when one is needed, then the feed from the log.
//!
//! **Full sync.** A thread takes the cut (`Sequencer::cut`: the log's end, a pin there and
//! `strata::Db::snapshot()` in one step, then the stream's next append selects its
//! database) and writes the snapshot as an RDB file (`rdb::dataset::write_dataset`): to
//! `dir/repl-sync.<client id>.rdb`, sent as `$<len>` + the file once complete, or, with
//! `repl-diskless-sync yes` and a replica that announced `capa eof`, straight to the socket
//! framed by `$EOF:<40-byte mark>` ... mark. A Strata replica that announced `capa
//! strata-snapshot` gets the snapshot's own records instead, as a framed stream after
//! `$STRATA-SNAPSHOT` (`repl/ship.rs`; unless `repl-strata-snapshot no`). Newlines keep
//! the link alive meanwhile (and during `repl-diskless-sync-delay`).
//!
//! **Feed.** The replica's position is a pin in the log: the feeder reads from the log
//! (memory tail or segment files) and writes to the socket, so a slow replica only lags and
//! never grows the master's memory. What the replica sends (`REPLCONF ACK <offset>`) is read
//! in the same task; a replica silent for `repl-timeout` is dropped.

use super::log::{ReadError, ReplLog};
use super::psync::ReplConf;
use super::ReplicaLink;
use crate::clients::ClientInfo;
use crate::protocol::parse::{Limits, Parser};
use crate::server::Shared;
use bytes::BytesMut;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Where a replica's feed starts, decided by PSYNC.
pub enum Start {
    /// `+CONTINUE` was replied; feed from this offset, pinned by `pin`.
    Continue { from: u64, pin: u64 },
    /// Full sync; `psync`: answer `+FULLRESYNC` first (not for the old SYNC).
    Full { psync: bool },
}

/// What PSYNC hands the connection.
pub struct Handoff {
    pub start: Start,
    pub conf: ReplConf,
    pub log: Arc<ReplLog>,
}

const READ_CHUNK: usize = 256 << 10;
const KEEPALIVE: Duration = Duration::from_secs(1);

/// Serves the replica until it disconnects, is killed, times out or the server stops.
pub async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    sock: &mut S,
    input: BytesMut,
    info: Arc<ClientInfo>,
    h: Handoff,
) {
    info.replica.store(true, Ordering::Release);
    let ip = h.conf.ip_address.clone().unwrap_or_else(|| {
        info.addr
            .rsplit_once(':')
            .map_or(String::new(), |(a, _)| a.into())
    });
    let link = Arc::new(ReplicaLink {
        client_id: info.id,
        ip,
        port: h.conf.listening_port.unwrap_or(0),
        state: parking_lot::Mutex::new("wait_bgsave"),
        ack: Default::default(),
        last_ack: parking_lot::Mutex::new(Instant::now()),
    });
    shared.master.add_replica(link.clone());
    // A log replaced since PSYNC (a replica's new history) disconnected the replicas it
    // knew of; this one was not among them yet.
    let current = shared.master.log().is_some_and(|l| Arc::ptr_eq(&l, &h.log));
    let r = if current {
        serve(&shared, sock, input, &info, &link, h).await
    } else {
        if let Start::Continue { pin, .. } = h.start {
            h.log.unpin(pin);
        }
        Err("the replication log was replaced".into())
    };
    if let Err(e) = r {
        eprintln!("strata-server: replica {}: {e}", info.addr);
    }
    shared.master.remove_replica(info.id);
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    mut input: BytesMut,
    info: &Arc<ClientInfo>,
    link: &ReplicaLink,
    h: Handoff,
) -> Result<(), String> {
    let log = h.log;
    let mut diskless = false;
    let (from, pin) = match h.start {
        Start::Continue { from, pin } => (from, pin),
        Start::Full { psync } => {
            let (off, pin, marked) =
                full_sync(shared, sock, info, link, &log, &h.conf, psync).await?;
            if h.conf.rdb_only {
                log.unpin(pin);
                return Ok(());
            }
            diskless = marked;
            (off, pin)
        }
    };
    // The ack offset stays what the replica last said (0 until its first ACK), as Redis.
    *link.state.lock() = "online";
    *link.last_ack.lock() = Instant::now();
    // After a diskless transfer the replica finds the payload's end only at the end of a
    // read, so the stream waits for its first ACK (Redis's `repl_put_online_on_ack`).
    let r = feed(
        shared, sock, &mut input, info, link, &log, from, pin, diskless,
    )
    .await;
    log.unpin(pin);
    r
}

/// Writes all of `bytes`, or fails.
async fn send<S: AsyncWrite + Unpin>(sock: &mut S, bytes: &[u8]) -> Result<(), String> {
    sock.write_all(bytes).await.map_err(|e| e.to_string())
}

/// The RDB's destination while the dataset is written.
enum Target {
    File(std::path::PathBuf),
    Pipe(tokio::sync::mpsc::Sender<Vec<u8>>),
    /// The snapshot stream (`repl/ship.rs`), through the same channel as `Pipe`.
    Snapshot(tokio::sync::mpsc::Sender<Vec<u8>>),
}

/// An `io::Write` into the diskless transfer's channel, in chunks.
struct PipeWriter {
    tx: tokio::sync::mpsc::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl Write for PipeWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= READ_CHUNK {
            self.flush()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.buf);
        self.tx
            .blocking_send(chunk)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "replica gone"))
    }
}

/// The cut and the dataset, on a thread of their own: sends `(offset, pin)` once the cut is
/// taken, then the dataset's outcome (its size).
fn write_snapshot(
    shared: Arc<Shared>,
    log: Arc<ReplLog>,
    target: Target,
    cut_tx: tokio::sync::oneshot::Sender<Result<(u64, u64, String), String>>,
    done_tx: tokio::sync::oneshot::Sender<Result<u64, String>>,
) {
    let db = shared.store.db();
    // On a replica the data moves only between two requests of its master's stream (the
    // link holds `applying` meanwhile); on a master, between a command's write and its
    // append (the sequencer). The cut excludes both: data, log end, id and the stream's
    // database are taken at one point.
    let r = &shared.replication;
    let cut = r.at_boundary(|| {
        shared.master.seq.cut(|| {
            if !Arc::ptr_eq(&log, &shared.master.log().unwrap_or_else(|| log.clone())) {
                return Err("the replication log was replaced".to_string());
            }
            let off = log.end();
            let pin = log.pin(off);
            let (replid, ..) = r.ids();
            // A master's stream selects its database again after the cut; a replica's is
            // its master's, which goes on in the database it had selected.
            let stream_db = if r.is_replica() { r.stream_db() } else { 0 };
            shared.master.reselect();
            match db.snapshot() {
                Ok(s) => Ok((off, pin, replid, stream_db, s)),
                Err(e) => {
                    log.unpin(pin);
                    Err(format!("taking the snapshot: {e}"))
                }
            }
        })
    });
    let (snap, aux) = match cut {
        Ok((off, pin, replid, stream_db, snap)) => {
            let aux = crate::rdb::dataset::Aux {
                repl_id: replid.clone(),
                repl_offset: off,
                repl_stream_db: u32::from(stream_db),
            };
            let _ = cut_tx.send(Ok((off, pin, replid)));
            (snap, aux)
        }
        Err(e) => {
            let _ = cut_tx.send(Err(e));
            return;
        }
    };
    // The replication fields, as Redis writes them into a full sync's RDB.
    let write = |snap: &_, w: &mut dyn Write| {
        let opts = crate::rdb::dataset::DatasetOptions {
            aux: Some(aux.clone()),
            ..Default::default()
        };
        crate::rdb::dataset::write_dataset_with(snap, &shared, &opts, w)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let r = match target {
        Target::File(path) => (|| {
            let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            write(&snap, &mut w)?;
            let f = w.into_inner().map_err(|e| e.to_string())?;
            f.sync_all().map_err(|e| e.to_string())?;
            f.metadata().map(|m| m.len()).map_err(|e| e.to_string())
        })(),
        Target::Pipe(tx) => {
            let mut w = PipeWriter {
                tx,
                buf: Vec::new(),
            };
            write(&snap, &mut w)
                .and_then(|_| w.flush().map_err(|e| e.to_string()))
                .map(|_| 0)
        }
        Target::Snapshot(tx) => {
            let w = PipeWriter {
                tx,
                buf: Vec::with_capacity(READ_CHUNK),
            };
            let databases = shared.config.read().databases;
            let started = Instant::now();
            super::ship::write_stream(&snap, databases, aux.repl_stream_db as u8, w).map(|t| {
                eprintln!(
                    "strata-server: replication: sent the snapshot stream ({} records, {} \
                     bytes of keys and values) in {:.2} s",
                    t.records,
                    t.bytes,
                    started.elapsed().as_secs_f64()
                );
                t.bytes
            })
        }
    };
    let _ = done_tx.send(r);
}

/// Waits for `rx` sending a newline to the replica every second.
async fn with_keepalive<S: AsyncWrite + Unpin, T>(
    sock: &mut S,
    info: &ClientInfo,
    mut rx: tokio::sync::oneshot::Receiver<T>,
) -> Result<T, String> {
    loop {
        tokio::select! {
            r = &mut rx => return r.map_err(|_| "the sync thread ended".to_string()),
            _ = tokio::time::sleep(KEEPALIVE) => send(sock, b"\n").await?,
            _ = info.kill.notified() => return Err("killed".into()),
        }
    }
}

/// Whether a full sync to this replica is diskless (`repl-diskless-sync yes` and the
/// replica announced `capa eof`).
fn uses_diskless(shared: &Shared, conf: &ReplConf) -> bool {
    conf.capa_eof && shared.config.read().get("repl-diskless-sync").as_deref() == Some("yes")
}

/// Whether a full sync to this replica sends the snapshot stream rather than an RDB: a
/// Strata replica that announced `capa strata-snapshot`, wanting the stream after it (not
/// `rdb-only`), and `repl-strata-snapshot` is not `no`.
fn uses_snapshot(shared: &Shared, conf: &ReplConf) -> bool {
    conf.capa_snapshot
        && !conf.rdb_only
        && shared.config.read().get("repl-strata-snapshot").as_deref() != Some("no")
}

/// Sends `+FULLRESYNC` and the RDB (or the snapshot stream); returns the cut's offset, its
/// pin (which the feed takes over) and whether the payload was an `$EOF:`-marked one (the
/// feed then waits for the replica's first ACK; the snapshot stream's END frame ends it
/// exactly, as `$<len>` does).
async fn full_sync<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    info: &ClientInfo,
    link: &ReplicaLink,
    log: &Arc<ReplLog>,
    conf: &ReplConf,
    psync: bool,
) -> Result<(u64, u64, bool), String> {
    shared.master.sync_full.fetch_add(1, Ordering::Relaxed);
    let snapshot = uses_snapshot(shared, conf);
    let diskless = uses_diskless(shared, conf) && !snapshot;
    let delay = shared
        .config
        .read()
        .get("repl-diskless-sync-delay")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if diskless && delay > 0 {
        let until = Instant::now() + Duration::from_secs(delay);
        while Instant::now() < until {
            tokio::time::sleep(KEEPALIVE.min(until - Instant::now())).await;
            send(sock, b"\n").await?;
        }
    }
    let (cut_tx, cut_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let (pipe_tx, mut pipe_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    let path = shared
        .config
        .read()
        .dir
        .join(format!("repl-sync.{}.rdb", info.id));
    let target = if snapshot {
        Target::Snapshot(pipe_tx)
    } else if diskless {
        Target::Pipe(pipe_tx)
    } else {
        drop(pipe_tx);
        Target::File(path.clone())
    };
    let (sh, lg) = (shared.clone(), log.clone());
    std::thread::Builder::new()
        .name("strata-repl-sync".into())
        .spawn(move || write_snapshot(sh, lg, target, cut_tx, done_tx))
        .map_err(|e| e.to_string())?;
    let (off, pin, replid) = with_keepalive(sock, info, cut_rx).await??;
    if psync {
        send(sock, format!("+FULLRESYNC {replid} {off}\r\n").as_bytes()).await?;
    }
    let r = async {
        if snapshot {
            *link.state.lock() = "send_bulk";
            let mut header = crate::repl::frames::HEADER_LINE.to_vec();
            header.extend_from_slice(b"\r\n");
            send(sock, &header).await?;
            while let Some(chunk) = pipe_rx.recv().await {
                send(sock, &chunk).await?;
            }
            done_rx
                .await
                .map_err(|_| "the sync thread ended".to_string())??;
        } else if diskless {
            *link.state.lock() = "send_bulk";
            let mark: String = super::super::replica::new_replid();
            send(sock, format!("$EOF:{mark}\r\n").as_bytes()).await?;
            while let Some(chunk) = pipe_rx.recv().await {
                send(sock, &chunk).await?;
            }
            done_rx
                .await
                .map_err(|_| "the sync thread ended".to_string())??;
            send(sock, mark.as_bytes()).await?;
        } else {
            let size = with_keepalive(sock, info, done_rx).await??;
            *link.state.lock() = "send_bulk";
            send(sock, format!("${size}\r\n").as_bytes()).await?;
            let mut f = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                let n = tokio::task::block_in_place(|| std::io::Read::read(&mut f, &mut buf))
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                send(sock, &buf[..n]).await?;
            }
        }
        Ok::<(), String>(())
    }
    .await;
    if !diskless && !snapshot {
        let _ = std::fs::remove_file(&path);
    }
    match r {
        Ok(()) => Ok((off, pin, diskless)),
        Err(e) => {
            log.unpin(pin);
            Err(e)
        }
    }
}

/// Feeds the log from `from` and reads the replica's ACKs (both at once: a replica that
/// is always behind still has its ACKs read).
#[allow(clippy::too_many_arguments)]
async fn feed<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    input: &mut BytesMut,
    info: &ClientInfo,
    link: &ReplicaLink,
    log: &ReplLog,
    mut at: u64,
    pin: u64,
    mut wait_ack: bool,
) -> Result<(), String> {
    let mut parser = Parser::new();
    let limits = Limits {
        max_bulk_bytes: 1 << 20,
        authenticated: true,
    };
    let mut stop = shared.shutdown_receiver();
    let (mut rd, mut wr) = tokio::io::split(&mut *sock);
    // Bytes read from the log and not yet written, and how many of them were.
    let mut chunk: Vec<u8> = Vec::new();
    let mut written = 0usize;
    loop {
        while let Some(argv) = parser.next(input, limits).map_err(|e| e.0)? {
            if on_request(link, &argv) {
                wait_ack = false;
            }
        }
        if info.is_killed() || *stop.borrow() {
            return Ok(());
        }
        let timeout = shared
            .config
            .read()
            .get("repl-timeout")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(60);
        if link.last_ack.lock().elapsed() > Duration::from_secs(timeout) {
            return Err("timeout: no ACK from the replica".into());
        }
        let notified = log.appended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if written == chunk.len() && !wait_ack {
            // Page-cache reads of segment files are short; the tail is memory.
            chunk = match log.read(at, READ_CHUNK) {
                Ok(c) => c,
                Err(ReadError::Gone) => return Err("the log no longer holds its offset".into()),
                Err(e) => return Err(format!("reading the log: {e:?}")),
            };
            written = 0;
        }
        input.reserve(4096);
        if written < chunk.len() {
            tokio::select! {
                r = wr.write(&chunk[written..]) => match r {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(n) => {
                        written += n;
                        at += n as u64;
                        log.move_pin(pin, at);
                        shared.stats.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                },
                r = rd.read_buf(input) => if matches!(r, Ok(0) | Err(_)) { return Ok(()) },
                _ = info.kill.notified() => return Ok(()),
            }
            continue;
        }
        tokio::select! {
            () = &mut notified => {}
            r = rd.read_buf(input) => if matches!(r, Ok(0) | Err(_)) { return Ok(()) },
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = info.kill.notified() => return Ok(()),
            _ = crate::server::stopped(&mut stop) => return Ok(()),
        }
    }
}

/// A request from the replica on its link: `REPLCONF ACK <offset>` moves its ack offset;
/// anything else is ignored, as Redis ignores what a replica sends besides REPLCONF.
/// Whether it was an ACK.
fn on_request(link: &ReplicaLink, argv: &[bytes::Bytes]) -> bool {
    let [name, opt, val, ..] = argv else {
        return false;
    };
    if !name.eq_ignore_ascii_case(b"replconf") || !opt.eq_ignore_ascii_case(b"ack") {
        return false;
    }
    let Some(off) = crate::protocol::parse::parse_i64(val).filter(|&o| o >= 0) else {
        return false;
    };
    link.ack.fetch_max(off as u64, Ordering::Relaxed);
    *link.last_ack.lock() = Instant::now();
    true
}
