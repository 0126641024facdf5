//! A Strata master's snapshot stream (`repl/ship.rs`, `docs/format/snapshot-stream.md`):
//! received into a spool file with every frame checked as it arrives, and loaded from that
//! file while it arrives (`spool.rs`) into a new generation of the keyspace as an RDB is
//! (`load.rs`, design §13.25), without decoding a single value.
//!
//! The stream's records are the master's store records with their first byte set to the
//! logical database; each becomes a record of that database's target (the first byte
//! replaced), in the shard this server routes it to, through the same per-shard buffers,
//! table writers and ingestion as an RDB's records. A master's shard sends its records in
//! key order, so with the same shard count and routing each buffer is already sorted and
//! the writer's sort is one pass that finds so. Metadata records tell the expiry index and
//! the access table of their key, as `Tx::take_loaded` does for an RDB's keys.
//!
//! The spool file is read back with every frame's checksum and the frames' order and
//! counts verified again (the pair assertion of what the receiver wrote); a damaged file,
//! a receiver that failed, a database this server lacks or a record that is not a store
//! record stops the load before anything is installed, and the old dataset stays.

use super::load::{clear_targets, ingest_runs, run_bytes, Counts, LoadError, Run, TICK_ITEMS};
use super::spool::SpoolWriter;
use crate::cmd::Ctx;
use crate::keys::KIND_META;
use crate::repl::frames::{self, read_frame_into, tag, Frame, StreamError, Validator};
use crate::store::Meta;
use std::io::{BufReader, Read};

/// Reads a snapshot stream from `r` up to its END frame into `spool`, checking each frame
/// as it arrives and publishing it to the loader; `progress(bytes)` is called after every
/// frame. Nothing is read past END, so the command stream that follows stays in `r`. The
/// caller ends the spool with the result ([`Spool::finish`](super::spool::Spool::finish)).
pub fn receive(
    r: &mut impl Read,
    spool: &mut SpoolWriter<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), StreamError> {
    let io = |e: std::io::Error| StreamError::Io(format!("spooling: {e}"));
    let mut v = Validator::default();
    let mut bytes = 0u64;
    let mut f = Frame {
        tag: 0,
        body: Vec::new(),
    };
    while !v.ended() {
        if !read_frame_into(r, &mut f)? {
            return Err(StreamError::Invalid(
                "the stream ends before its END frame".into(),
            ));
        }
        v.frame(&f)?;
        frames::write_frame(spool.out(), f.tag, &f.body).map_err(io)?;
        let len = (frames::HEAD_BYTES + f.body.len()) as u64;
        spool.publish(len).map_err(io)?;
        bytes += len;
        progress(bytes);
    }
    Ok(())
}

/// Loads the spooled stream `spool` (a [`SpoolReader`](super::spool::SpoolReader) behind
/// the receiver, or a file) into `targets` (one physical database per logical one, as
/// `load::load`): returns what it held and the function libraries' payload. Failed or
/// stopped, nothing was installed.
pub fn load(
    ctx: &mut Ctx<'_>,
    spool: impl Read,
    targets: &[u8],
    tick: &mut dyn FnMut() -> bool,
) -> Result<(Counts, Vec<u8>), LoadError> {
    let store = ctx.tx;
    let db = store.db();
    clear_targets(store, targets)?;
    let mut r = BufReader::with_capacity(1 << 20, spool);
    let run_bytes = run_bytes(db);
    ingest_runs(db, tick, |writers, tick| {
        let mut bufs: Vec<Run> = (0..db.shard_count()).map(|_| writers.spare()).collect();
        let mut v = Validator::default();
        let mut n = Counts::default();
        let mut functions = None;
        let mut key = Vec::new();
        let file = |e: StreamError| LoadError::File(e.to_string());
        let mut f = Frame {
            tag: 0,
            body: Vec::new(),
        };
        while !v.ended() {
            if !read_frame_into(&mut r, &mut f).map_err(file)? {
                return Err(LoadError::File(
                    "the stream ends before its END frame".into(),
                ));
            }
            v.frame(&f).map_err(file)?;
            match f.tag {
                tag::FUNCTIONS => functions = Some(f.body.clone()),
                tag::RECORDS => {
                    let (_, recs) = frames::records(&f.body).map_err(file)?;
                    for (k, val) in recs {
                        n.records += 1;
                        if n.records.is_multiple_of(TICK_ITEMS * 64) && !tick() {
                            return Err(LoadError::Stopped);
                        }
                        let logical = k.first().copied().unwrap_or(u8::MAX);
                        let target =
                            targets.get(usize::from(logical)).copied().ok_or_else(|| {
                                LoadError::File(format!(
                                    "the stream holds database {logical}; this server has {} \
                                 (databases)",
                                    targets.len()
                                ))
                            })?;
                        if k.len() < 4 {
                            return Err(LoadError::File(format!(
                                "a record key {k:?} is too short"
                            )));
                        }
                        key.clear();
                        key.push(target);
                        key.extend_from_slice(&k[1..]);
                        if k[3] == KIND_META {
                            let m = Meta::decode(val).ok_or_else(|| {
                                LoadError::File(format!(
                                    "the metadata of {:?} does not decode",
                                    &k[4..]
                                ))
                            })?;
                            store.note_loaded(target, &k[4..], &m);
                            n.keys += 1;
                        }
                        let shard = db.shard_of(&key);
                        bufs[shard].push(&key, val);
                        if bufs[shard].memory() >= run_bytes {
                            let full = std::mem::replace(&mut bufs[shard], writers.spare());
                            writers.send(shard, full)?;
                        }
                    }
                }
                _ => {}
            }
        }
        for (shard, buf) in bufs.into_iter().enumerate() {
            if !buf.is_empty() {
                writers.send(shard, buf)?;
            }
        }
        n.stream_db = v.start().map(|s| s.stream_db);
        // Compiled here, so that libraries this server refuses stop the load before the
        // switch; none sent: an empty registry, as an RDB without functions gives.
        let registry = crate::scripting::functions::Functions::open(functions.as_deref())
            .map_err(LoadError::File)?;
        n.functions = u64::from(functions.is_some());
        Ok((n, registry.payload()))
    })
}

/// Writes `spool` as a well-formed stream of `records` (for tests elsewhere).
#[cfg(test)]
pub fn write_spool(path: &std::path::Path, stream_db: u8, records: &[(u32, Vec<u8>, Vec<u8>)]) {
    let start = frames::Start {
        stream_db,
        shards: 1,
    };
    let f = std::fs::File::create(path).unwrap();
    let mut w = frames::FrameWriter::new(f, &start).unwrap();
    for (s, k, v) in records {
        w.record(*s, k, v).unwrap();
    }
    let (mut f, _) = w.finish().unwrap();
    std::io::Write::flush(&mut f).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::reply::{Proto, ReplyBuf};
    use crate::replica::spool::Spool;
    use crate::test_server::{Reply, TestServer};
    use std::path::Path;

    fn run(t: &mut TestServer, args: &[&str]) {
        if let Reply::Error(e) = t.cmd(args) {
            panic!("{args:?}: {e}");
        }
    }

    /// A master's dataset of every type in databases 0 and 2, with an expiry, a function
    /// library, and a SWAPDB so that physical and logical databases differ; its stream.
    fn master_stream() -> (TestServer, Vec<u8>) {
        let mut a = TestServer::in_memory();
        run(&mut a, &["SET", "s", "v"]);
        run(&mut a, &["SET", "ttl", "x", "PXAT", "4102444800000"]);
        run(&mut a, &["RPUSH", "l", "a", "b", "a"]);
        run(&mut a, &["HSET", "h", "f1", "v1", "f2", "v2"]);
        run(&mut a, &["SADD", "set", "x", "y", "1"]);
        run(&mut a, &["ZADD", "z", "1", "a", "2.5", "b"]);
        run(&mut a, &["XADD", "st", "1-1", "f", "v"]);
        run(&mut a, &["SELECT", "2"]);
        run(&mut a, &["SET", "s", "in two"]);
        run(&mut a, &["SWAPDB", "2", "5"]);
        run(
            &mut a,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
            ],
        );
        let shared = a.shared();
        let snap = shared.store.db().snapshot().unwrap();
        let mut out = Vec::new();
        crate::repl::ship::write_stream(&snap, 16, 5, &mut out).unwrap();
        drop(snap);
        (a, out)
    }

    /// Receives `r` into a spool file at `path`, as the link does without a loader.
    fn receive_file(
        r: &mut impl Read,
        path: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), StreamError> {
        let (spool, file) = Spool::create(path).unwrap();
        let mut w = SpoolWriter::new(&spool, file);
        receive(r, &mut w, progress)
    }

    fn load_into(t: &TestServer, path: &Path, targets: &[u8]) -> Result<Counts, LoadError> {
        load_from(t, std::fs::File::open(path).unwrap(), targets)
    }

    fn load_from(t: &TestServer, spool: impl Read, targets: &[u8]) -> Result<Counts, LoadError> {
        let shared = t.shared();
        let info = shared.register_client(String::new(), String::new(), -1, false);
        let mut conn = shared.new_conn(info);
        let tx = shared.store.front();
        let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 64);
        let mut ctx = Ctx::new(shared, &tx, &mut conn, &mut reply);
        load(&mut ctx, spool, targets, &mut || true).map(|(c, _)| c)
    }

    /// Every record of logical database `l` on `t`: `(key without its database byte,
    /// value)`, in order.
    fn records_of(t: &TestServer, physical: u8) -> Vec<(Vec<u8>, Vec<u8>)> {
        let tx = t.shared().store.front();
        let (lo, hi) = crate::keys::db_range(physical);
        let mut out = Vec::new();
        tx.scan_range(&lo, &hi, false, |k, v| {
            out.push((k[1..].to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        out
    }

    /// Record for record, each of `a`'s logical databases equals `b`'s database it was
    /// loaded into (`targets[l]` for logical database `l`).
    fn assert_loaded_as_master(a: &TestServer, b: &TestServer, targets: &[u8]) {
        let map = &a.shared().store.dbs;
        for l in 0..16u8 {
            let want = records_of(a, map.physical(l));
            assert_eq!(records_of(b, targets[usize::from(l)]), want, "database {l}");
        }
    }

    #[test]
    fn a_stream_received_and_loaded_is_the_masters_data() {
        let (a, stream) = master_stream();
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut progress = 0;
        // The command stream that follows stays unread.
        let mut wire = stream.clone();
        wire.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let mut r = &wire[..];
        receive_file(&mut r, &spool, &mut |b| progress = b).unwrap();
        assert_eq!(r, b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(progress, stream.len() as u64);
        let mut b = TestServer::in_memory();
        run(&mut b, &["SET", "mine", "kept"]);
        let targets: Vec<u8> = (16..32).collect();
        let n = load_into(&b, &spool, &targets).unwrap();
        assert_eq!((n.keys, n.functions, n.stream_db), (8, 1, Some(5)));
        // Record for record, each logical database's records equal the master's.
        assert_loaded_as_master(&a, &b, &targets);
        assert!(!records_of(&b, 16).is_empty() && !records_of(&b, 21).is_empty());
        // The served database is as it was; the expiry index knows the loaded key.
        assert_eq!(b.cmd(&["DBSIZE"]), Reply::Int(1));
        let tx = b.shared().store.front();
        assert_eq!(
            tx.get(16, b"ttl").unwrap().unwrap().expire_ms,
            4102444800000
        );
    }

    #[test]
    fn a_cut_or_damaged_stream_installs_nothing() {
        let (_a, stream) = master_stream();
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        // Cut at a frame boundary and inside one; a flipped byte: refused on receipt.
        for cut in [stream.len() - 33, stream.len() / 2, 20] {
            let mut r = &stream[..cut];
            let e = receive_file(&mut r, &spool, &mut |_| {}).unwrap_err();
            assert!(matches!(e, StreamError::Invalid(_)), "{e}");
        }
        let mut flipped = stream.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x40;
        let mut r = &flipped[..];
        assert!(receive_file(&mut r, &spool, &mut |_| {}).is_err());
        // A spool damaged after receipt (or written by a bug) is refused by the load, and
        // the targets stay empty.
        let b = TestServer::in_memory();
        let targets: Vec<u8> = (16..32).collect();
        for bad in [&stream[..stream.len() - 1], &flipped[..]] {
            std::fs::write(&spool, bad).unwrap();
            let e = load_into(&b, &spool, &targets).unwrap_err();
            assert!(matches!(e, LoadError::File(_)), "{e}");
            for &t in &targets {
                assert!(
                    records_of(&b, t).is_empty(),
                    "database {t} after a failed load"
                );
            }
        }
        // A database this server lacks: fewer targets than the stream's databases.
        std::fs::write(&spool, &stream).unwrap();
        let e = load_into(&b, &spool, &targets[..3]).unwrap_err();
        assert!(e.to_string().contains("database 5"), "{e}");
        for &t in &targets {
            assert!(records_of(&b, t).is_empty());
        }
        // A record that is not a store record.
        write_spool(&spool, 0, &[(0, b"\x00ab".to_vec(), b"v".to_vec())]);
        assert!(load_into(&b, &spool, &targets).is_err());
    }

    /// A socket that gives its bytes a few at a time and pauses now and then, so that the
    /// loader catches up with the receiver and waits for it.
    struct Trickle<'a> {
        bytes: &'a [u8],
        reads: u32,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads.is_multiple_of(16) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let n = buf.len().min(self.bytes.len()).min(97);
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// The link's arrangement: the receiver on a thread, the load reading the spool behind
    /// it. Returns the receiver's and the load's results.
    fn receive_while_loading(
        t: &TestServer,
        wire: &[u8],
        path: &Path,
        targets: &[u8],
    ) -> (Result<(), StreamError>, Result<Counts, LoadError>) {
        let (spool, file) = Spool::create(path).unwrap();
        std::thread::scope(|s| {
            let spool = &spool;
            let receiver = s.spawn(move || {
                let mut r = Trickle {
                    bytes: wire,
                    reads: 0,
                };
                let mut w = SpoolWriter::new(spool, file);
                let got = receive(&mut r, &mut w, &mut |_| {});
                spool.finish(got.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                got
            });
            let loaded = load_from(t, spool.reader().unwrap(), targets);
            if loaded.is_err() {
                spool.abandon();
            }
            (receiver.join().unwrap(), loaded)
        })
    }

    #[test]
    fn a_stream_loads_while_it_arrives_and_a_cut_or_damaged_one_installs_nothing() {
        let (a, stream) = master_stream();
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let targets: Vec<u8> = (16..32).collect();
        let b = TestServer::in_memory();
        let (got, loaded) = receive_while_loading(&b, &stream, &spool, &targets);
        got.unwrap();
        assert_eq!(loaded.unwrap().keys, 8);
        assert_loaded_as_master(&a, &b, &targets);
        // Cut inside a frame and at the last frame's start, and a flipped byte: the
        // receiver refuses it, the load fails with it, and no target holds a record.
        let mut flipped = stream.clone();
        flipped[stream.len() / 2] ^= 0x40;
        for wire in [
            &stream[..stream.len() / 2],
            &stream[..stream.len() - 33],
            &flipped[..],
        ] {
            let c = TestServer::in_memory();
            let (got, loaded) = receive_while_loading(&c, wire, &spool, &targets);
            assert!(got.is_err());
            let e = loaded.unwrap_err();
            assert!(matches!(e, LoadError::File(_)), "{e}");
            for &t in &targets {
                assert!(
                    records_of(&c, t).is_empty(),
                    "database {t} after a failed load"
                );
            }
        }
    }
}
