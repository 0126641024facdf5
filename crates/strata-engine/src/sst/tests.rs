//! Table-level tests: builder and reader together.

use super::testutil::{VecFile, VecReader};
use super::*;
use crate::cache::BlockCache;
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, user_key, ValueKind, MAX_SEQ};
use crate::options::{Compression, Options};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `n` entries over 16-byte user keys, some with several versions, sorted in internal order.
fn entries(n: usize, seed: u64) -> Entries {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let uk: [u8; 16] = rng.gen();
        let versions = if rng.gen_ratio(1, 10) { 3 } else { 1 };
        let mut seq = rng.gen_range(10..1_000_000u64);
        for _ in 0..versions {
            let kind = if rng.gen_ratio(1, 8) {
                ValueKind::Delete
            } else {
                ValueKind::Value
            };
            let len = rng.gen_range(0..200);
            let v: Vec<u8> = if rng.gen() {
                (0..len).map(|i| uk[i % 4]).collect()
            } else {
                (0..len).map(|_| rng.gen()).collect()
            };
            out.push((make_internal_key(&uk, seq, kind), v));
            seq -= rng.gen_range(1..5);
        }
    }
    out.truncate(n);
    out.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
    out
}

fn opts(block_size: usize, compression: Compression) -> TableOptions {
    TableOptions {
        block_size,
        restart_interval: 16,
        compression,
        filter: true,
        block_align: false,
    }
}

fn build(es: &Entries, o: TableOptions) -> (Vec<u8>, TableSummary) {
    let file = VecFile::new("000007.sst");
    let (data, synced) = (file.data.clone(), file.synced.clone());
    let mut b = TableBuilder::new(Box::new(file), o);
    let mut last_size = 0;
    for (k, v) in es {
        b.add(k, v).unwrap();
        // Exact for raw blocks; compression shrinks a block once it is written.
        if o.compression == Compression::None {
            assert!(
                b.file_size() >= last_size,
                "{} < {last_size}",
                b.file_size()
            );
        }
        last_size = b.file_size();
    }
    assert_eq!(b.num_entries(), es.len() as u64);
    let s = b.finish().unwrap();
    assert!(*synced.lock(), "finish must sync");
    let bytes = data.lock().clone();
    assert_eq!(s.file_size, bytes.len() as u64);
    (bytes, s)
}

fn open(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<Table>> {
    Table::open(VecReader::new(bytes, "000007.sst"), 7, cache)
}

fn collect_forward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

fn collect_backward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().map(|()| out)
}

/// A seek key strictly between user key `uk` (all versions) and the next user key.
fn after_user_key(uk: &[u8]) -> Vec<u8> {
    let mut k = uk.to_vec();
    k.push(0);
    make_internal_key(&k, MAX_SEQ, ValueKind::Value)
}

#[test]
fn round_trip_block_sizes_and_compression() {
    let es = entries(10_000, 1);
    for compression in [Compression::None, Compression::Lz4] {
        for block_size in [64, 512, 4096, 32 << 10] {
            let (bytes, s) = build(&es, opts(block_size, compression));
            assert_eq!(s.num_entries, 10_000);
            assert_eq!(s.smallest, es[0].0);
            assert_eq!(s.largest, es.last().unwrap().0);
            let t = open(bytes, None).unwrap();
            assert_eq!(t.num_entries(), 10_000);
            let stats = t.verify().unwrap();
            assert_eq!(stats.entries, 10_000);
            assert_eq!(stats.blocks, t.num_blocks() as u64);
            let mut it = t.iter(ReadParams::default());
            assert_eq!(collect_forward(&mut it).unwrap(), es);
            let mut back = collect_backward(&mut it).unwrap();
            back.reverse();
            assert_eq!(back, es);
            for (i, (k, v)) in es.iter().enumerate() {
                it.seek(k);
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                let got = t
                    .get(k, ReadParams::default(), |gk, gv| {
                        (gk.to_vec(), gv.to_vec())
                    })
                    .unwrap();
                assert_eq!(got.as_ref(), Some(&es[i]));
                let between = after_user_key(user_key(k));
                let next = es[i..].iter().find(|e| user_key(&e.0) != user_key(k));
                it.seek(&between);
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    next.map(|e| e.0.clone())
                );
                let got = t.get(&between, ReadParams::default(), |gk, _| gk.to_vec());
                assert_eq!(got.unwrap(), next.map(|e| e.0.clone()));
                assert!(t.may_contain(user_key(k)));
                // prev from a sought position steps back one entry.
                if i > 0 && i % 97 == 0 {
                    it.seek(k);
                    it.prev();
                    assert_eq!(it.key(), &es[i - 1].0[..]);
                }
            }
            it.status().unwrap();
        }
    }
}

#[test]
fn lz4_makes_compressible_tables_smaller() {
    let es: Entries = (0..2000u32)
        .map(|i| {
            let k = make_internal_key(format!("key{i:08}").as_bytes(), 1, ValueKind::Value);
            (k, vec![b'x'; 100])
        })
        .collect();
    let (plain, _) = build(&es, opts(4096, Compression::None));
    let (lz4, _) = build(&es, opts(4096, Compression::Lz4));
    assert!(
        lz4.len() * 3 < plain.len(),
        "{} vs {}",
        lz4.len(),
        plain.len()
    );
}

#[test]
fn get_semantics_with_versions() {
    let k = |uk: &[u8], seq, kind| make_internal_key(uk, seq, kind);
    let es: Entries = vec![
        (k(b"a", 7, ValueKind::Value), b"a7".to_vec()),
        (k(b"k", 5, ValueKind::Value), b"k5".to_vec()),
        (k(b"k", 3, ValueKind::Delete), Vec::new()),
        (k(b"k", 1, ValueKind::Value), b"k1".to_vec()),
        (k(b"m", 2, ValueKind::Value), b"m2".to_vec()),
    ];
    for block_size in [1, 4096] {
        let (bytes, _) = build(&es, opts(block_size, Compression::None));
        let t = open(bytes, None).unwrap();
        let get = |uk: &[u8], seq| {
            t.get(
                &crate::key::seek_key(uk, seq),
                ReadParams::default(),
                |ik, v| (ik.to_vec(), v.to_vec()),
            )
            .unwrap()
        };
        assert_eq!(get(b"k", 10).unwrap().1, b"k5");
        assert_eq!(get(b"k", 5).unwrap().1, b"k5");
        assert_eq!(get(b"k", 4).unwrap().0, es[2].0);
        assert_eq!(get(b"k", 2).unwrap().1, b"k1");
        assert_eq!(get(b"k", 1).unwrap().1, b"k1");
        assert_eq!(get(b"k", 0).unwrap().1, b"m2"); // caller sees another user key
        assert_eq!(get(b"", 0).unwrap().1, b"a7");
        assert_eq!(get(b"z", 9), None);
        assert_eq!(get(b"m", 1), None);
    }
}

#[test]
fn empty_table() {
    let (bytes, s) = build(&Vec::new(), opts(4096, Compression::None));
    assert_eq!(
        (s.num_entries, s.smallest.len(), s.largest.len()),
        (0, 0, 0)
    );
    let t = open(bytes, None).unwrap();
    assert_eq!(t.verify().unwrap(), VerifyStats::default());
    assert!(t.may_contain(b"x"));
    assert_eq!(
        t.get(b"xxxxxxxxxx", ReadParams::default(), |_, _| ())
            .unwrap(),
        None
    );
    let mut it = t.iter(ReadParams::default());
    assert!(collect_forward(&mut it).unwrap().is_empty());
    assert!(collect_backward(&mut it).unwrap().is_empty());
    it.seek(b"anything");
    assert!(!it.valid());
}

#[test]
fn filter_rejects_absent_keys_and_can_be_off() {
    let es = entries(5000, 2);
    let (bytes, _) = build(&es, opts(4096, Compression::None));
    let t = open(bytes, None).unwrap();
    let fp = (0..10_000u32)
        .filter(|i| t.may_contain(format!("absent-{i}").as_bytes()))
        .count();
    assert!(fp < 100, "{fp} false positives in 10000");
    let mut o = opts(4096, Compression::None);
    o.filter = false;
    let (bytes, _) = build(&es, o);
    let t = open(bytes, None).unwrap();
    assert!(t.may_contain(b"absent"));
    t.verify().unwrap();
}

fn small_table(compression: Compression) -> (Vec<u8>, Entries) {
    small_table_aligned(compression, false)
}

/// With `align`, the 300-byte blocks are packed into pages with padding between them.
fn small_table_aligned(compression: Compression, align: bool) -> (Vec<u8>, Entries) {
    let es = entries(60, 3);
    let o = TableOptions {
        block_align: align,
        ..opts(300, compression)
    };
    let (bytes, _) = build(&es, o);
    (bytes, es)
}

/// Runs every read path on `bytes`; panics on a wrong answer, returns whether some path
/// reported corruption. Any error other than corruption fails the test.
fn check_reads(bytes: Vec<u8>, es: &Entries, verify_checksums: bool) -> bool {
    let corrupt = |e: Error| {
        assert!(e.is_corruption(), "expected corruption, got {e}");
        assert!(e.to_string().contains("000007.sst"), "{e}");
        true
    };
    let t = match open(bytes, None) {
        Ok(t) => t,
        Err(e) => return corrupt(e),
    };
    let p = ReadParams {
        verify_checksums,
        ..ReadParams::default()
    };
    let mut detected = false;
    let mut it = t.iter(p);
    match collect_forward(&mut it) {
        Ok(got) => assert!(
            !verify_checksums || got == *es,
            "wrong data from forward iteration"
        ),
        Err(e) => detected |= corrupt(e),
    }
    let mut it = t.iter(p);
    match collect_backward(&mut it) {
        Ok(mut got) => {
            got.reverse();
            assert!(
                !verify_checksums || got == *es,
                "wrong data from backward iteration"
            );
        }
        Err(e) => detected |= corrupt(e),
    }
    for (k, v) in es {
        match t.get(k, p, |gk, gv| (gk.to_vec(), gv.to_vec())) {
            Ok(got) => assert!(
                !verify_checksums || got == Some((k.clone(), v.clone())),
                "wrong data from get"
            ),
            Err(e) => detected |= corrupt(e),
        }
    }
    match t.verify() {
        Ok(s) => assert_eq!(s.entries, es.len() as u64),
        Err(e) => detected |= corrupt(e),
    }
    detected
}

#[test]
fn every_byte_flip_is_detected() {
    for (compression, align) in [
        (Compression::None, false),
        (Compression::Lz4, false),
        (Compression::None, true),
    ] {
        let (bytes, es) = small_table_aligned(compression, align);
        if align {
            let t = open(bytes.clone(), None).unwrap();
            let padded = (1..t.num_blocks()).any(|i| {
                let before = t.index().handle(i - 1).end_with_trailer().unwrap();
                t.index().handle(i).offset > before
            });
            assert!(padded, "the aligned table must hold padding");
        }
        assert!(!check_reads(bytes.clone(), &es, true));
        for i in 0..bytes.len() {
            for x in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= x;
                assert!(
                    check_reads(bad.clone(), &es, true),
                    "flip {x:#x} at {i} of {} went unnoticed",
                    bytes.len()
                );
                // Without checksums a flip may go unnoticed, but nothing may panic.
                check_reads(bad, &es, false);
            }
        }
    }
}

#[test]
fn truncated_files_are_corruption() {
    let (bytes, _) = small_table(Compression::None);
    for len in 0..bytes.len() {
        let e = open(bytes[..len].to_vec(), None).unwrap_err();
        assert!(e.is_corruption(), "length {len}: {e}");
    }
}

#[test]
fn block_cache_hits_and_batched_read_path() {
    let es = entries(3000, 4);
    let (bytes, _) = build(&es, opts(1024, Compression::Lz4));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = open(bytes, Some(cache.clone())).unwrap();
    let k = &es[1234].0;
    let no_fill = ReadParams {
        fill_cache: false,
        ..ReadParams::default()
    };
    t.get(k, no_fill, |_, _| ()).unwrap().unwrap();
    t.get(k, no_fill, |_, _| ()).unwrap().unwrap();
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
    t.get(k, ReadParams::default(), |_, _| ()).unwrap().unwrap();
    assert_eq!((cache.hits(), cache.misses()), (0, 3));
    let v = t.get(k, ReadParams::default(), |_, v| v.to_vec()).unwrap();
    assert_eq!(v.as_deref(), Some(&es[1234].1[..]));
    assert_eq!((cache.hits(), cache.misses()), (1, 3));
    assert!(cache.usage_bytes() > 0);

    // The batched path: index lookup, cache probe, caller-issued read, decode, block get.
    let k = &es[2999].0;
    let h = t.find_block(k).unwrap();
    assert!(t.cached_block(h).is_none());
    let (off, len) = t.block_read_range(h);
    let mut raw = vec![0u8; len];
    t.file().read_at(off, &mut raw).unwrap();
    let block = t.decode_block(h, raw, ReadParams::default()).unwrap();
    let v = block.get(k, |_, v| v.to_vec()).unwrap();
    assert_eq!(v.as_deref(), Some(&es[2999].1[..]));
    assert!(t.cached_block(h).is_some());
    assert!(t.find_block(&after_user_key(&[0xff; 17])).is_none());

    // A full scan through the cache, then a second one served from it.
    let before = cache.misses();
    let mut it = t.iter(ReadParams::default());
    assert_eq!(collect_forward(&mut it).unwrap(), es);
    let hits = cache.hits();
    assert_eq!(collect_forward(&mut it).unwrap(), es);
    assert_eq!(cache.misses() - before, t.num_blocks() as u64 - 2);
    assert_eq!(cache.hits() - hits, t.num_blocks() as u64);
}

#[test]
fn readahead_reads_big_chunks() {
    let es = entries(3000, 5);
    let (bytes, _) = build(&es, opts(512, Compression::None));
    let file = VecReader::new(bytes, "000007.sst");
    let t = Table::open(file.clone(), 7, None).unwrap();
    let p = ReadParams {
        readahead: 16 << 10,
        ..ReadParams::default()
    };
    let reads_before = *file.reads.lock();
    let mut it = t.iter(p);
    assert_eq!(collect_forward(&mut it).unwrap(), es);
    let ra_reads = *file.reads.lock() - reads_before;
    // One read per 16 KiB instead of one per 512-byte block.
    assert!(
        ra_reads <= t.size() / (16 << 10) + 2 && (ra_reads as usize) < t.num_blocks() / 8,
        "{ra_reads} reads for {} blocks",
        t.num_blocks()
    );
    let hints = file.readaheads.lock().clone();
    assert!(!hints.is_empty());
    assert!(hints.windows(2).all(|w| w[1].0 >= w[0].0 + w[0].1 - 1024));
    let expected = t.size() / (16 << 10);
    assert!(
        (hints.len() as u64) <= expected + 2,
        "{} hints",
        hints.len()
    );
    let reads_before = *file.reads.lock();
    let mut it = t.iter(ReadParams::default());
    collect_forward(&mut it).unwrap();
    assert_eq!(file.readaheads.lock().len(), hints.len());
    assert_eq!(*file.reads.lock() - reads_before, t.num_blocks() as u64);
}

#[test]
fn table_options_follow_db_options() {
    let o = Options {
        block_size_bytes: 8192,
        block_restart_interval: 4,
        compression: Compression::Lz4,
        filter: false,
        ..Options::default()
    };
    assert_eq!(
        TableOptions::from_options(&o),
        TableOptions {
            block_size: 8192,
            restart_interval: 4,
            compression: Compression::Lz4,
            filter: false,
            block_align: false,
        }
    );
}

#[test]
fn iterator_reuses_loaded_block_on_seek() {
    let es = entries(500, 6);
    let (bytes, _) = build(&es, opts(4096, Compression::None));
    let file = VecReader::new(bytes, "000007.sst");
    let t = Table::open(file.clone(), 7, None).unwrap();
    let mut it = t.iter(ReadParams::default());
    it.seek(&es[10].0);
    let reads = *file.reads.lock();
    for e in &es[11..15] {
        it.seek(&e.0);
        assert_eq!(it.key(), &e.0[..]);
    }
    assert_eq!(*file.reads.lock(), reads);
}

#[test]
fn aligned_start_moves_a_block_only_when_that_saves_a_page() {
    use super::builder::aligned_start;
    // Fits in the rest of its page: stays.
    assert_eq!(aligned_start(100, 3996), 100);
    // One byte too many: the next page holds it whole.
    assert_eq!(aligned_start(100, 3997), 4096);
    // Already at a boundary.
    assert_eq!(aligned_start(8192, 4096), 8192);
    // Larger than a page: moved only if that saves a page (3 pages at 5000, 2 at 8192).
    assert_eq!(aligned_start(5000, 8000), 8192);
    assert_eq!(aligned_start(100, 5000), 100);
}

#[test]
fn aligned_blocks_touch_one_page_each_and_read_back() {
    // 1 KiB values: without alignment a 4 KiB block holds four of them and straddles two
    // pages; aligned, a block holds three and sits inside one page.
    let mut rng = StdRng::seed_from_u64(9);
    let mut es: Entries = (0..2_000u32)
        .map(|i| {
            let v: Vec<u8> = (0..1024).map(|_| rng.gen()).collect();
            (
                make_internal_key(format!("key{i:013}").as_bytes(), 5, ValueKind::Value),
                v,
            )
        })
        .collect();
    es.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
    for (align, compression) in [
        (false, Compression::None),
        (true, Compression::None),
        (true, Compression::Lz4),
    ] {
        let o = TableOptions {
            block_align: align,
            ..opts(4096, compression)
        };
        let (bytes, _) = build(&es, o);
        let t = open(bytes, None).unwrap();
        let handles: Vec<_> = (0..t.num_blocks()).map(|i| t.index().handle(i)).collect();
        let straddling = handles
            .iter()
            .filter(|h| {
                let (off, len) = t.block_read_range(**h);
                off / 4096 != (off + len as u64 - 1) / 4096
            })
            .count();
        if align {
            assert_eq!(straddling, 0, "aligned blocks must not straddle pages");
        } else {
            assert!(
                straddling > handles.len() / 2,
                "{straddling} of {}",
                handles.len()
            );
        }
        assert_eq!(t.verify().unwrap().entries, es.len() as u64);
        let mut it = t.iter(ReadParams::default());
        assert_eq!(collect_forward(&mut it).unwrap(), es);
        for (k, v) in es.iter().step_by(7) {
            it.seek(k);
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        }
    }
}
