//! The benchmarks' per-thread loops: what each thread of fillseq, readrandom, seekrandom,
//! the YCSB workloads and the others does with its [`Worker`].

use super::args::BenchArgs;
use super::catalog::Benchmark;
use super::dist::{scan_length, KeyChooser, ReadDist};
use super::engine::Engine;
use super::keys::thread_range;
use super::worker::{put_one, Worker};
use super::ycsb::{self, Inserts, Spec};
use crate::text::to_hex;
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use strata::EngineIter;

/// What each thread of a benchmark runs.
pub(super) type Work<E> = Box<dyn Fn(&E, &mut Worker<'_>) -> Result<()> + Sync>;

/// The per-thread loop of a benchmark.
pub(super) fn workload<E: Engine>(
    args: &BenchArgs,
    b: Benchmark,
    inserts: Option<Arc<Inserts>>,
    ycsb_records: u64,
) -> Work<E> {
    let num = args.num;
    let writes = args.writes();
    let reads = args.reads();
    let threads = args.threads;
    let seek_nexts = args.seek_nexts;
    let batch = args.batch_size;
    let pipeline = args.pipeline;
    let read_dist = args.read_dist();
    match b {
        Benchmark::FillSeq => Box::new(move |e, w| {
            let mut key = w.keys.buffer();
            for i in thread_range(num, threads, w.thread) {
                if w.stopped() {
                    break;
                }
                w.put_key(e, &mut key, i)?;
            }
            Ok(())
        }),
        Benchmark::FillRandom | Benchmark::Overwrite => Box::new(move |e, w| {
            let mut key = w.keys.buffer();
            let mut budget = w.budget(writes);
            while budget.more() && !w.stopped() {
                let i = w.rng.below(num);
                w.put_key(e, &mut key, i)?;
            }
            Ok(())
        }),
        Benchmark::DeleteRandom => Box::new(move |e, w| {
            let mut key = w.keys.buffer();
            let mut budget = w.budget(writes);
            while budget.more() && !w.stopped() {
                let i = w.rng.below(num);
                w.keys.fill(i, &mut key);
                let t0 = Instant::now();
                e.delete(&key)
                    .with_context(|| format!("delete of key {} failed", to_hex(&key)))?;
                w.stats.written += key.len() as u64;
                w.record(t0, 1, 0);
                if let Some(l) = w.live {
                    l.delete(i);
                }
            }
            Ok(())
        }),
        Benchmark::ReadRandom | Benchmark::ReadMissing => {
            let missing = b == Benchmark::ReadMissing;
            Box::new(move |e, w| read_random(e, w, read_dist, num, reads, missing))
        }
        Benchmark::ReadWhileWriting => {
            let readers_done = Arc::new(AtomicUsize::new(0));
            Box::new(move |e, w| {
                if w.thread == threads {
                    // The writer: random puts until every reader is done.
                    let mut key = w.keys.buffer();
                    while readers_done.load(Ordering::Acquire) < threads && !w.stopped() {
                        let i = w.rng.below(num);
                        w.put_key(e, &mut key, i)?;
                    }
                    return Ok(());
                }
                let r = read_random(e, w, read_dist, num, reads, false);
                readers_done.fetch_add(1, Ordering::Release);
                r
            })
        }
        Benchmark::MultiReadRandom if pipeline > 1 => Box::new(move |e, w| {
            // `pipeline` batches per call: the engine keeps `batch` reads in flight across
            // them, as a caller holding many batches at once would.
            let mut keys: Vec<Vec<u8>> = (0..batch * pipeline).map(|_| w.keys.buffer()).collect();
            let mut left = reads;
            let mut budget = w.budget(u64::MAX);
            while left > 0 && budget.more() && !w.stopped() {
                let n = if w.deadline.is_some() {
                    batch * pipeline
                } else {
                    ((batch * pipeline) as u64).min(left) as usize
                };
                for k in &mut keys[..n] {
                    let i = read_dist.next(&mut w.rng, num);
                    w.keys.fill(i, k);
                }
                let refs: Vec<&[u8]> = keys[..n].iter().map(|k| k.as_slice()).collect();
                let batches: Vec<&[&[u8]]> = refs.chunks(batch).collect();
                let t0 = Instant::now();
                let values = e
                    .multi_get_batches(&batches, batch)
                    .context("multi_get_batches failed")?;
                w.record_lookups(t0, &refs, values.iter().flatten());
                if w.deadline.is_none() {
                    left -= n as u64;
                }
            }
            Ok(())
        }),
        Benchmark::MultiReadRandom => Box::new(move |e, w| {
            let mut keys: Vec<Vec<u8>> = (0..batch).map(|_| w.keys.buffer()).collect();
            let mut left = reads;
            let mut budget = w.budget(u64::MAX);
            while left > 0 && budget.more() && !w.stopped() {
                let n = if w.deadline.is_some() {
                    batch
                } else {
                    (batch as u64).min(left) as usize
                };
                for k in &mut keys[..n] {
                    let i = read_dist.next(&mut w.rng, num);
                    w.keys.fill(i, k);
                }
                let refs: Vec<&[u8]> = keys[..n].iter().map(|k| k.as_slice()).collect();
                let t0 = Instant::now();
                let values = e.multi_get(&refs).context("multi_get failed")?;
                w.record_lookups(t0, &refs, values.iter());
                if w.deadline.is_none() {
                    left -= n as u64;
                }
            }
            Ok(())
        }),
        Benchmark::SeekRandom => Box::new(move |e, w| {
            let mut it = e.iter().context("cannot create an iterator")?;
            let mut key = w.keys.buffer();
            let mut budget = w.budget(reads);
            while budget.more() && !w.stopped() {
                let i = read_dist.next(&mut w.rng, num);
                w.keys.fill(i, &mut key);
                let t0 = Instant::now();
                it.seek(&key);
                let mut bytes = 0;
                if it.valid() {
                    if it.key() == key.as_slice() {
                        w.stats.found += 1;
                    }
                    bytes += (it.key().len() + it.value().len()) as u64;
                    for _ in 0..seek_nexts {
                        it.next();
                        if !it.valid() {
                            break;
                        }
                        bytes += (it.key().len() + it.value().len()) as u64;
                    }
                }
                w.stats.lookups += 1;
                w.record(t0, 1, bytes);
            }
            it.status().context("iterator failed")
        }),
        Benchmark::ReadSeq | Benchmark::ReadReverse => {
            let forward = b == Benchmark::ReadSeq;
            Box::new(move |e, w| {
                let mut it = e.iter().context("cannot create an iterator")?;
                let mut t0 = Instant::now();
                if forward {
                    it.seek_to_first();
                } else {
                    it.seek_to_last();
                }
                let mut n = 0;
                while n < reads && it.valid() && !w.stopped() {
                    let bytes = (it.key().len() + it.value().len()) as u64;
                    w.record(t0, 1, bytes);
                    n += 1;
                    t0 = Instant::now();
                    if forward {
                        it.next();
                    } else {
                        it.prev();
                    }
                }
                it.status().context("iterator failed")
            })
        }
        Benchmark::YcsbLoad => Box::new(move |e, w| {
            let mut key = w.keys.buffer();
            for k in thread_range(num, threads, w.thread) {
                if w.stopped() {
                    break;
                }
                w.keys.fill_ycsb(k, &mut key);
                put_one(e, w, &key)?;
                if let Some(l) = w.live {
                    l.put_ycsb(k);
                }
            }
            Ok(())
        }),
        Benchmark::YcsbA
        | Benchmark::YcsbB
        | Benchmark::YcsbC
        | Benchmark::YcsbD
        | Benchmark::YcsbE
        | Benchmark::YcsbF => {
            let spec = ycsb_spec(args, b);
            let inserts = inserts.expect("YCSB benchmarks have their insert state");
            let initial = ycsb_records;
            let expected =
                initial + (reads as f64 * threads as f64 * spec.insert_share() * 2.0) as u64;
            Box::new(move |e, w| {
                let mut chooser = KeyChooser::new(spec.dist, initial, expected);
                ycsb_loop(e, w, &spec, &mut chooser, &inserts, reads)
            })
        }
        Benchmark::Compact | Benchmark::Flush | Benchmark::WaitForCompaction | Benchmark::Stats => {
            unreachable!("{} is not a threaded benchmark", b.name())
        }
    }
}

/// The YCSB workload of `b`, with `--ycsb-distribution` applied.
pub(super) fn ycsb_spec(args: &BenchArgs, b: Benchmark) -> Spec {
    let mut spec = b
        .ycsb()
        .and_then(Spec::of)
        .expect("a YCSB benchmark has a workload letter");
    if let Some(d) = args.ycsb_distribution {
        spec.dist = d;
    }
    spec
}

/// readrandom / readmissing / readwhilewriting's readers.
fn read_random(
    e: &impl Engine,
    w: &mut Worker<'_>,
    dist: ReadDist,
    num: u64,
    reads: u64,
    missing: bool,
) -> Result<()> {
    let ks = w.keys.key_size();
    let mut key = if missing {
        w.keys.missing_key_buffer()
    } else {
        w.keys.buffer()
    };
    let mut budget = w.budget(reads);
    while budget.more() && !w.stopped() {
        let i = dist.next(&mut w.rng, num);
        w.keys.fill(i, &mut key[..ks]);
        let t0 = w.pace();
        let v = e
            .get(&key)
            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
        let bytes = match v {
            Some(v) => {
                w.stats.found += 1;
                (key.len() + v.len()) as u64
            }
            None => 0,
        };
        w.stats.lookups += 1;
        w.record(t0, 1, bytes);
    }
    Ok(())
}

/// One thread of a YCSB workload.
fn ycsb_loop(
    e: &impl Engine,
    w: &mut Worker<'_>,
    spec: &Spec,
    chooser: &mut KeyChooser,
    inserts: &Inserts,
    ops: u64,
) -> Result<()> {
    let mut key = w.keys.buffer();
    let mut budget = w.budget(ops);
    while budget.more() && !w.stopped() {
        let kind = spec.pick(w.rng.unit());
        let due = w.pace();
        match kind {
            ycsb::INSERT => {
                let k = inserts.begin(w.thread);
                w.keys.fill_ycsb(k, &mut key);
                let value = w.values.next_value();
                let bytes = (key.len() + value.len()) as u64;
                let t0 = due;
                e.put(&key, value)
                    .with_context(|| format!("insert of key {} failed", to_hex(&key)))?;
                inserts.end(w.thread);
                w.stats.written += bytes;
                w.record_kind(t0, kind, bytes);
                if let Some(l) = w.live {
                    l.put_ycsb(k);
                }
            }
            _ => {
                let k = chooser.next(&mut w.rng, inserts.readable());
                w.keys.fill_ycsb(k, &mut key);
                match kind {
                    ycsb::READ => {
                        let t0 = due;
                        let v = e
                            .get(&key)
                            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
                        w.stats.lookups += 1;
                        let bytes = v.map_or(0, |v| {
                            w.stats.found += 1;
                            (key.len() + v.len()) as u64
                        });
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::UPDATE => {
                        let value = w.values.next_value();
                        let bytes = (key.len() + value.len()) as u64;
                        let t0 = due;
                        e.put(&key, value)
                            .with_context(|| format!("update of key {} failed", to_hex(&key)))?;
                        w.stats.written += bytes;
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::SCAN => {
                        let len = scan_length(&mut w.rng, ycsb::MAX_SCAN_LENGTH);
                        let t0 = due;
                        // A new iterator per scan, as YCSB's bindings do.
                        let mut it = e.iter().context("cannot create an iterator")?;
                        it.seek(&key);
                        let mut bytes = 0;
                        let mut n = 0;
                        while it.valid() && n < len {
                            bytes += (it.key().len() + it.value().len()) as u64;
                            n += 1;
                            if n < len {
                                it.next();
                            }
                        }
                        it.status().context("scan failed")?;
                        drop(it);
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::RMW => {
                        // Read-modify-write: read the record, write it back changed.
                        let t0 = due;
                        let v = e
                            .get(&key)
                            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
                        w.stats.lookups += 1;
                        let mut bytes = v.map_or(0, |v| {
                            w.stats.found += 1;
                            (key.len() + v.len()) as u64
                        });
                        let value = w.values.next_value();
                        let put_bytes = (key.len() + value.len()) as u64;
                        e.put(&key, value)
                            .with_context(|| format!("update of key {} failed", to_hex(&key)))?;
                        w.stats.written += put_bytes;
                        bytes += put_bytes;
                        w.record_kind(t0, kind, bytes);
                    }
                    _ => unreachable!("Spec::pick returns a kind of KINDS"),
                }
            }
        }
    }
    Ok(())
}
