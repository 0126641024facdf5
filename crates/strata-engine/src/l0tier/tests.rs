//! Tests of the L0 table format: round trips against a model, adversarial keys, seeks
//! against a `BTreeMap`, every byte flipped, truncation.

use super::*;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, parse_internal_key, seek_key, SeqNo};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// An entry as handed to the writer.
#[derive(Clone, Debug)]
enum In {
    Delete,
    Bytes(Vec<u8>),
    Logged(Vec<u8>, ValuePointer),
    Pointer(ValuePointer),
}

/// An entry as the table should return it: stored key and value.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Inline(Vec<u8>),
    Pointer(ValuePointer),
}

/// Internal keys ordered as the engine orders them, for `BTreeMap` models.
#[derive(Clone, Debug, PartialEq, Eq)]
struct IKey(Vec<u8>);
impl Ord for IKey {
    fn cmp(&self, o: &Self) -> Ordering {
        compare_internal(&self.0, &o.0)
    }
}
impl PartialOrd for IKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

fn ptr(n: u64) -> ValuePointer {
    ValuePointer {
        file: n % 7 + 1,
        offset: n * 4096 + 17,
        len: 40 + (n % 1000) as u32,
    }
}

/// Writes `entries` (any order: sorted here) and returns the model of what was stored.
fn write(
    path: &Path,
    entries: Vec<(Vec<u8>, SeqNo, In)>,
    opts: L0TableOptions,
) -> (L0TableMeta, BTreeMap<IKey, Out>) {
    let mut items: Vec<(Vec<u8>, In)> = entries
        .into_iter()
        .map(|(uk, seq, v)| {
            let kind = match v {
                In::Delete => ValueKind::Delete,
                In::Bytes(_) | In::Logged(..) => ValueKind::Value,
                In::Pointer(_) => ValueKind::Pointer,
            };
            (make_internal_key(&uk, seq, kind), v)
        })
        .collect();
    items.sort_by(|a, b| compare_internal(&a.0, &b.0));
    let mut w = L0TableWriter::create(path, 42, opts).unwrap();
    let mut model = BTreeMap::new();
    for (ik, v) in &items {
        let p = parse_internal_key(ik).unwrap();
        let (val, kind, out) = match v {
            In::Delete => (L0Value::Inline(b""), p.kind, Out::Inline(vec![])),
            In::Bytes(b) => (L0Value::Inline(b), p.kind, Out::Inline(b.clone())),
            In::Logged(b, at) if b.len() < opts.inline_threshold_bytes => (
                L0Value::Logged { bytes: b, at: *at },
                p.kind,
                Out::Inline(b.clone()),
            ),
            In::Logged(b, at) => (
                L0Value::Logged { bytes: b, at: *at },
                ValueKind::Pointer,
                Out::Pointer(*at),
            ),
            In::Pointer(at) => (L0Value::Pointer(*at), p.kind, Out::Pointer(*at)),
        };
        w.add(ik, val).unwrap();
        model.insert(IKey(make_internal_key(p.user_key, p.seq, kind)), out);
    }
    (w.finish().unwrap(), model)
}

fn out_of(v: L0ValueRef<'_>) -> Out {
    match v {
        L0ValueRef::Inline(b) => Out::Inline(b.to_vec()),
        L0ValueRef::Pointer(p) => Out::Pointer(p),
    }
}

/// The whole table through its iterator, forwards.
fn scan(t: &Arc<L0Table>) -> crate::Result<Vec<(Vec<u8>, Out)>> {
    let mut it = t.iter();
    let mut v = Vec::new();
    it.seek_to_first();
    while it.valid() {
        v.push((it.key().to_vec(), out_of(it.value_ref())));
        it.next();
    }
    it.status().map(|_| v)
}

/// The model's answer to `get(user_key, snap)`.
fn model_get(m: &BTreeMap<IKey, Out>, uk: &[u8], snap: SeqNo) -> Option<(SeqNo, ValueKind, Out)> {
    let (k, v) = m.range(IKey(seek_key(uk, snap))..).next()?;
    let p = parse_internal_key(&k.0).unwrap();
    (p.user_key == uk).then(|| (p.seq, p.kind, v.clone()))
}

fn table_get(
    t: &L0Table,
    uk: &[u8],
    snap: SeqNo,
) -> crate::Result<Option<(SeqNo, ValueKind, Out)>> {
    Ok(t.get(uk, snap)?.map(|e| (e.seq, e.kind, out_of(e.value))))
}

/// Checks a table against its model: a full scan, both directions, and gets of every user
/// key at several snapshots and of absent keys.
fn check_all(t: &Arc<L0Table>, m: &BTreeMap<IKey, Out>) {
    let want: Vec<(Vec<u8>, Out)> = m.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect();
    assert_eq!(scan(t).unwrap(), want);
    let mut it = t.iter();
    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push(it.key().to_vec());
        it.prev();
    }
    it.status().unwrap();
    assert!(back.iter().rev().eq(want.iter().map(|(k, _)| k)));
    for (k, _) in m.iter() {
        let p = parse_internal_key(&k.0).unwrap();
        for snap in [
            p.seq,
            p.seq.saturating_sub(1),
            p.seq + 1,
            crate::key::MAX_SEQ,
        ] {
            assert_eq!(
                table_get(t, p.user_key, snap).unwrap(),
                model_get(m, p.user_key, snap),
                "key {:?} snap {snap}",
                p.user_key
            );
        }
        let mut absent = p.user_key.to_vec();
        absent.push(0);
        assert_eq!(
            table_get(t, &absent, crate::key::MAX_SEQ).unwrap(),
            model_get(m, &absent, crate::key::MAX_SEQ)
        );
    }
    assert_eq!(t.verify().unwrap().entries, m.len() as u64);
}

fn random_entries(
    rng: &mut StdRng,
    n: usize,
    key: impl Fn(&mut StdRng) -> Vec<u8>,
) -> Vec<(Vec<u8>, SeqNo, In)> {
    let mut out = Vec::new();
    let mut seq = 1;
    let mut seen = std::collections::HashSet::new();
    while out.len() < n {
        let uk = key(rng);
        if !seen.insert(uk.clone()) {
            continue;
        }
        for _ in 0..rng.gen_range(1..=3) {
            seq += rng.gen_range(1..5);
            let len = rng.gen_range(0..80);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let v = match rng.gen_range(0..4) {
                0 => In::Delete,
                1 => In::Bytes(bytes),
                2 => In::Logged(bytes, ptr(seq)),
                _ => In::Pointer(ptr(seq)),
            };
            out.push((uk.clone(), seq, v));
        }
    }
    out
}

#[test]
fn round_trip_with_versions_pointers_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for (n, opts) in [
        (0, L0TableOptions::default()),
        (1, L0TableOptions::default()),
        (700, L0TableOptions::default()),
        (
            700,
            L0TableOptions {
                inline_threshold_bytes: 0,
                pgm_epsilon: 1,
            },
        ),
        (
            900,
            L0TableOptions {
                inline_threshold_bytes: 1000,
                pgm_epsilon: 16,
            },
        ),
    ] {
        let path = dir
            .path()
            .join(format!("{n}-{}.l0", opts.inline_threshold_bytes));
        let entries = random_entries(&mut rng, n, |r| {
            let len = r.gen_range(1..24);
            (0..len).map(|_| r.gen_range(b'a'..=b'f')).collect()
        });
        let (meta, model) = write(&path, entries, opts);
        assert_eq!(meta.entries, model.len() as u64);
        assert_eq!(meta.file_number, 42);
        let pointers = model
            .values()
            .filter(|v| matches!(v, Out::Pointer(_)))
            .count();
        assert_eq!(meta.pointer_entries, pointers as u64);
        if let (Some(first), Some(last)) = (model.keys().next(), model.keys().last()) {
            assert_eq!((&meta.smallest, &meta.largest), (&first.0, &last.0));
        }
        let t = L0Table::open(&path).unwrap();
        assert_eq!(
            (t.entries(), t.file_number(), t.file_size()),
            (meta.entries, 42, meta.file_size)
        );
        assert_eq!(t.inline_threshold(), opts.inline_threshold_bytes);
        check_all(&t, &model);
    }
}

#[test]
fn adversarial_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let long_prefix = vec![b'p'; 300];
    type KeyGen = Box<dyn Fn(&mut StdRng) -> Vec<u8>>;
    let shapes: Vec<(&str, KeyGen)> = vec![
        (
            "shared prefix",
            Box::new(move |r: &mut StdRng| {
                let mut k = long_prefix.clone();
                k.extend((0..r.gen_range(0..8)).map(|_| r.gen_range(0..3u8)));
                k
            }),
        ),
        (
            "dense numeric",
            Box::new(|r: &mut StdRng| r.gen_range(0..3000u64).to_be_bytes().to_vec()),
        ),
        (
            "sparse",
            Box::new(|r: &mut StdRng| {
                (r.gen::<u64>() >> r.gen_range(0..64))
                    .to_be_bytes()
                    .to_vec()
            }),
        ),
        (
            "tiny with empty",
            Box::new(|r: &mut StdRng| (0..r.gen_range(0..2)).map(|_| r.gen()).collect()),
        ),
        (
            "very long",
            Box::new(|r: &mut StdRng| {
                let mut k = vec![0xAB; 5000 + r.gen_range(0..3)];
                k.push(r.gen());
                k
            }),
        ),
    ];
    for (name, key) in shapes {
        let n = if name == "tiny with empty" { 200 } else { 600 };
        let mut entries = random_entries(&mut rng, n, key);
        if name == "tiny with empty" {
            // Every one-byte key and the empty key, each present.
            entries.retain(|(k, _, _)| !k.is_empty());
            entries.push((vec![], 1 << 40, In::Bytes(b"empty".to_vec())));
            entries.push((vec![], 1 << 41, In::Delete));
        }
        let path = dir.path().join(format!("{}.l0", name.replace(' ', "-")));
        let (_, model) = write(&path, entries, L0TableOptions::default());
        let t = L0Table::open(&path).unwrap();
        check_all(&t, &model);
        if name == "tiny with empty" {
            assert_eq!(
                table_get(&t, b"", 1 << 40).unwrap().map(|e| e.2),
                Some(Out::Inline(b"empty".to_vec()))
            );
            assert_eq!(
                table_get(&t, b"", 1 << 42).unwrap().map(|e| e.1),
                Some(ValueKind::Delete)
            );
            assert_eq!(table_get(&t, b"", 1).unwrap(), None);
        }
    }
}

#[test]
fn lookups_check_few_blocks() {
    // 20,000 entries (2,500 blocks): with epsilon 4 a lookup compares at most ~5 checkpoint
    // keys and scans one group (plus the next group's first entry).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.l0");
    let entries: Vec<(Vec<u8>, SeqNo, In)> = (0..20_000u64)
        .map(|i| {
            (
                format!("key{:08}", i * 37 % 1_000_003).into_bytes(),
                i + 1,
                In::Bytes(vec![1; 8]),
            )
        })
        .collect();
    let (_, model) = write(&path, entries, L0TableOptions::default());
    let t = L0Table::open(&path).unwrap();
    for (k, _) in model.iter().step_by(97) {
        let p = parse_internal_key(&k.0).unwrap();
        let before = t.blocks_checked();
        assert_eq!(
            table_get(&t, p.user_key, p.seq).unwrap(),
            model_get(&model, p.user_key, p.seq)
        );
        let used = t.blocks_checked() - before;
        assert!(used <= 10, "{used} blocks for one lookup");
    }
}

#[test]
fn iterates_as_an_sstable_of_the_same_entries_does() {
    // The stand-in property: an SSTable of the stored entries (pointer values as their
    // encoding) and the L0 table give the same (key, value) sequence, whole and after seeks.
    use crate::io::{Fs, RealFs};
    use crate::sst::{ReadParams, Table, TableBuilder, TableOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let entries = random_entries(&mut rng, 400, |r| {
        (0..r.gen_range(1..12))
            .map(|_| r.gen_range(b'a'..=b'd'))
            .collect()
    });
    let (_, model) = write(&dir.path().join("t.l0"), entries, L0TableOptions::default());
    let fs = RealFs::new();
    let sst_path = dir.path().join("t.sst");
    let mut b = TableBuilder::new(fs.create(&sst_path).unwrap(), TableOptions::default());
    for (k, v) in &model {
        match v {
            Out::Inline(bytes) => b.add(&k.0, bytes).unwrap(),
            Out::Pointer(p) => b.add(&k.0, &p.to_vec()).unwrap(),
        }
    }
    b.finish().unwrap();
    let sst = Table::open(fs.open(&sst_path).unwrap(), 1, None).unwrap();
    let l0 = L0Table::open(&dir.path().join("t.l0")).unwrap();
    let mut a = sst.iter(ReadParams::default());
    let mut c = l0.iter();
    let mut targets: Vec<Vec<u8>> = model.keys().step_by(7).map(|k| k.0.clone()).collect();
    targets.push(seek_key(b"", crate::key::MAX_SEQ));
    targets.push(seek_key(b"zzz", 0));
    targets.push(seek_key(b"bb", 3));
    for t in &targets {
        a.seek(t);
        c.seek(t);
        for _ in 0..20 {
            assert_eq!(a.valid(), c.valid());
            if !a.valid() {
                break;
            }
            assert_eq!((a.key(), a.value()), (c.key(), c.value()));
            a.next();
            c.next();
        }
    }
    a.seek_to_first();
    c.seek_to_first();
    while a.valid() {
        assert!(c.valid());
        assert_eq!((a.key(), a.value()), (c.key(), c.value()));
        a.next();
        c.next();
    }
    assert!(!c.valid());
    a.status().unwrap();
    c.status().unwrap();
}

#[test]
fn iterator_is_send() {
    fn send<T: Send>() {}
    send::<L0TableIter>();
    send::<Arc<L0Table>>();
}

#[test]
fn writer_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut w =
        L0TableWriter::create(&dir.path().join("t.l0"), 1, L0TableOptions::default()).unwrap();
    let k = |uk: &[u8], seq, kind| make_internal_key(uk, seq, kind);
    w.add(&k(b"b", 5, ValueKind::Value), L0Value::Inline(b"x"))
        .unwrap();
    // Out of order, equal, not an internal key.
    assert!(w
        .add(&k(b"a", 9, ValueKind::Value), L0Value::Inline(b"x"))
        .is_err());
    assert!(w
        .add(&k(b"b", 5, ValueKind::Value), L0Value::Inline(b"x"))
        .is_err());
    assert!(w.add(b"short", L0Value::Inline(b"x")).is_err());
    // Kinds and values that do not go together.
    assert!(w
        .add(&k(b"c", 1, ValueKind::Delete), L0Value::Inline(b"x"))
        .is_err());
    assert!(w
        .add(&k(b"c", 1, ValueKind::Value), L0Value::Pointer(ptr(1)))
        .is_err());
    assert!(w
        .add(&k(b"c", 1, ValueKind::Pointer), L0Value::Inline(b"junk"))
        .is_err());
    // An SSTable's pointer entry as it is.
    w.add(
        &k(b"c", 1, ValueKind::Pointer),
        L0Value::Inline(&ptr(3).to_vec()),
    )
    .unwrap();
    w.finish().unwrap();
    let t = L0Table::open(&dir.path().join("t.l0")).unwrap();
    assert_eq!(
        t.get(b"c", 9).unwrap().unwrap().value,
        L0ValueRef::Pointer(ptr(3))
    );
    let mut it = t.iter();
    it.seek(&seek_key(b"c", 9));
    assert_eq!(it.value(), ptr(3).to_vec().as_slice());
    let bad = L0TableOptions {
        pgm_epsilon: 0,
        ..L0TableOptions::default()
    };
    assert!(L0TableWriter::create(&dir.path().join("u.l0"), 1, bad).is_err());
}

/// A small table with every kind of entry (one meta block: flipping every byte of a bigger one is too slow).
fn corruption_subject(dir: &Path) -> (Vec<u8>, BTreeMap<IKey, Out>) {
    let mut rng = StdRng::seed_from_u64(3);
    let entries = random_entries(&mut rng, 60, |r| {
        format!("user:{:05}", r.gen_range(0..100_000)).into_bytes()
    });
    let path = dir.join("subject.l0");
    let (_, model) = write(&path, entries, L0TableOptions::default());
    (std::fs::read(&path).unwrap(), model)
}

#[test]
fn every_flipped_byte_is_reported_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let (good, model) = corruption_subject(dir.path());
    let want: Vec<(Vec<u8>, Out)> = model
        .iter()
        .map(|(k, v)| (k.0.clone(), v.clone()))
        .collect();
    let sb = format::SuperBlock::decode(&good, Path::new("x")).unwrap();
    let class = |off: usize| match off as u64 {
        o if o < SUPER_LEN as u64 => 0,
        o if o < sb.meta_offset => 1,
        o if o < sb.block_table_offset => 2,
        o if o < sb.index_offset => 3,
        _ => 4,
    };
    let mut seen = [0usize; 5];
    let path = dir.path().join("flipped.l0");
    for off in 0..good.len() {
        let mut bad = good.clone();
        bad[off] ^= 1 << (off % 8);
        std::fs::write(&path, &bad).unwrap();
        seen[class(off)] += 1;
        let t = match L0Table::open(&path) {
            Err(e) => {
                assert!(e.is_corruption(), "offset {off}: {e}");
                continue;
            }
            Ok(t) => t,
        };
        assert!(
            class(off) == 1,
            "offset {off} (class {}) opened",
            class(off)
        );
        // Reads that touch the damaged block fail; others are right.
        for (k, _) in model.iter().step_by(5) {
            let p = parse_internal_key(&k.0).unwrap();
            match table_get(&t, p.user_key, p.seq) {
                Ok(got) => assert_eq!(got, model_get(&model, p.user_key, p.seq), "offset {off}"),
                Err(e) => assert!(e.is_corruption(), "offset {off}: {e}"),
            }
        }
        let mut it = t.iter();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            assert_eq!(
                (it.key(), out_of(it.value_ref())),
                (want[n].0.as_slice(), want[n].1.clone()),
                "offset {off}"
            );
            n += 1;
            it.next();
        }
        let e = it
            .status()
            .expect_err(&format!("offset {off}: flip not detected by a full scan"));
        assert!(e.is_corruption());
        assert!(t.verify().unwrap_err().is_corruption());
    }
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

/// A block is verified once and trusted afterwards, so the bytes it was verified in must
/// not change under the table: bytes damaged on disk after the table was mapped (written
/// in place, as a device returning other bytes on a later read would show them) are never
/// returned by that table, which keeps answering from its private, verified copy; the
/// next open sees the damage and reports it.
#[test]
fn bytes_damaged_on_disk_after_a_read_are_never_returned() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (good, model) = corruption_subject(dir.path());
    let sb = format::SuperBlock::decode(&good, Path::new("x")).unwrap();
    let path = dir.path().join("damaged.l0");
    std::fs::write(&path, &good).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for populate in [false, true] {
        let t = L0Table::open_with(&path, populate).unwrap();
        check_all(&t, &model); // every block read (and verified) once
        for off in (SUPER_LEN as u64..sb.meta_offset).step_by(7) {
            let b = good[off as usize] ^ (1 << (off % 8));
            file.write_at(&[b], off).unwrap();
            check_all(&t, &model);
            file.write_at(&good[off as usize..off as usize + 1], off)
                .unwrap();
        }
        // Damage a value's block on disk: the open table still answers right; a new open
        // reads the damaged bytes and reports them at their first check.
        let off = sb.meta_offset - 3;
        file.write_at(&[good[off as usize] ^ 0x10], off).unwrap();
        check_all(&t, &model);
        assert!(t.verify().is_ok());
        let fresh = L0Table::open_with(&path, populate).unwrap();
        assert!(fresh.verify().unwrap_err().is_corruption());
        file.write_at(&good[off as usize..off as usize + 1], off)
            .unwrap();
    }
}

#[test]
fn truncated_or_extended_file_is_rejected_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (good, _) = corruption_subject(dir.path());
    let path = dir.path().join("cut.l0");
    for len in [
        0,
        1,
        SUPER_LEN - 1,
        SUPER_LEN,
        SUPER_LEN + 1,
        good.len() / 2,
        good.len() - 4,
        good.len() - 1,
    ] {
        std::fs::write(&path, &good[..len]).unwrap();
        let e = L0Table::open(&path)
            .err()
            .unwrap_or_else(|| panic!("{len} bytes opened"));
        assert!(e.is_corruption(), "{len}: {e}");
    }
    let mut longer = good.clone();
    longer.push(0);
    std::fs::write(&path, &longer).unwrap();
    assert!(L0Table::open(&path).err().unwrap().is_corruption());
    // A table whose writer never finished has a zero super block.
    let mut w = L0TableWriter::create(&path, 9, L0TableOptions::default()).unwrap();
    for i in 0..100u32 {
        w.add(
            &make_internal_key(&i.to_be_bytes(), 1, ValueKind::Value),
            L0Value::Inline(b"v"),
        )
        .unwrap();
    }
    drop(w);
    assert!(L0Table::open(&path).err().unwrap().is_corruption());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn seek_and_step_match_a_btreemap(
        keys in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just(b'k'), Just(b'l'), any::<u8>()], 0..10),
             1u64..50, 0u8..4),
            0..300),
        targets in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just(b'k'), Just(b'l'), any::<u8>()], 0..10),
             0u64..60, 0usize..20, any::<bool>()),
            1..24),
    ) {
        let mut seen = std::collections::HashSet::new();
        let entries: Vec<(Vec<u8>, SeqNo, In)> = keys
            .into_iter()
            .filter(|(k, s, _)| seen.insert((k.clone(), *s)))
            .map(|(k, s, c)| {
                let v = match c {
                    0 => In::Delete,
                    1 => In::Bytes(vec![c; s as usize]),
                    2 => In::Logged(vec![c; s as usize], ptr(s)),
                    _ => In::Pointer(ptr(s)),
                };
                (k, s, v)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.l0");
        let (_, model) = write(&path, entries, L0TableOptions { inline_threshold_bytes: 20, pgm_epsilon: 2 });
        let t = L0Table::open(&path).unwrap();
        let mut it = t.iter();
        for (uk, seq, steps, forward) in targets {
            let target = seek_key(&uk, seq);
            it.seek(&target);
            let mut want: Vec<&IKey> = if forward {
                model.range(IKey(target.clone())..).map(|e| e.0).take(steps + 1).collect()
            } else {
                // Seek, then step back: the entry at the seek and those before it.
                let at = model.range(IKey(target.clone())..).next();
                let mut before: Vec<&IKey> = model.range(..IKey(target.clone())).rev().map(|e| e.0).take(steps).collect();
                if let Some((k, _)) = at { before.insert(0, k); }
                before
            };
            if !forward && model.range(IKey(target.clone())..).next().is_none() {
                want.clear();
            }
            let mut got = Vec::new();
            while it.valid() && got.len() < want.len() {
                got.push(it.key().to_vec());
                if forward { it.next() } else { it.prev() }
            }
            it.status().unwrap();
            let want: Vec<Vec<u8>> = want.into_iter().map(|k| k.0.clone()).collect();
            prop_assert_eq!(got, want);
            let p = parse_internal_key(&target).unwrap();
            prop_assert_eq!(table_get(&t, p.user_key, p.seq).unwrap(), model_get(&model, p.user_key, p.seq));
        }
    }
}
