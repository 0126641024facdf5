//! Tests of format version 2: every record carries the offset its file was synced through
//! when it was written, and recovery tells an unsynced tail (truncated) from damage to synced
//! bytes (corruption) by it (`docs/format/wal.md` section 3).

use super::format::{file_header, TYPE_FULL};
use super::tests::{payload, Shared, VecReader, VecWriter};
use super::*;
use crate::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One step of a test log: a record, a sync, or a seal (sync, sync mark, sync).
enum Step {
    Rec(Vec<u8>),
    Sync,
    Seal,
}

struct Written {
    data: Vec<u8>,
    /// Per record: (start, end, watermark it was written with).
    spans: Vec<(u64, u64, u64)>,
}

fn write(steps: &[Step]) -> Written {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let file = VecWriter {
        shared: shared.clone(),
        path: PathBuf::from("000001.log"),
    };
    let mut w = LogWriter::new(Box::new(file)).unwrap();
    let mut spans = Vec::new();
    for s in steps {
        match s {
            Step::Sync => w.sync().unwrap(),
            Step::Seal => w.seal().unwrap(),
            Step::Rec(r) => {
                let mut start = w.size();
                let room = BLOCK_SIZE as u64 - start % BLOCK_SIZE as u64;
                if room < (HEADER_SIZE + WATERMARK_LEN) as u64 {
                    start += room;
                }
                let wm = w.synced_size();
                w.add_record(r).unwrap();
                spans.push((start, w.size(), wm));
            }
        }
    }
    let data = shared.lock().unwrap().data.clone();
    Written { data, spans }
}

type Read = (
    Vec<(u64, Vec<u8>)>,
    crate::error::Result<()>,
    Option<(u64, String)>,
);

fn read(data: Vec<u8>) -> Read {
    let limit = data.len() + 2;
    let mut r = LogReader::new(Arc::new(VecReader {
        data,
        path: PathBuf::from("000001.log"),
    }));
    let mut recs = Vec::new();
    for _ in 0..limit {
        match r.read_record() {
            Ok(Some(rec)) => recs.push(rec),
            Ok(None) => return (recs, Ok(()), r.truncated_tail()),
            Err(e) => return (recs, Err(e), r.truncated_tail()),
        }
    }
    panic!("reader returned more records than the file has bytes");
}

fn recs(n: usize, len: usize) -> Vec<Step> {
    (0..n).map(|i| Step::Rec(payload(len, i as u8))).collect()
}

#[test]
fn records_carry_the_synced_offset_and_round_trip() {
    let mut steps = recs(2, 30);
    steps.push(Step::Sync);
    steps.extend(recs(3, 70_000));
    steps.push(Step::Sync);
    steps.extend(recs(2, 5));
    let w = write(&steps);
    let (got, res, tail) = read(w.data.clone());
    res.unwrap();
    assert_eq!(tail, None);
    let want: Vec<&Vec<u8>> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Rec(r) => Some(r),
            Step::Sync | Step::Seal => None,
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for (i, (off, rec)) in got.iter().enumerate() {
        assert_eq!((*off, rec), (w.spans[i].0, want[i]), "record {i}");
        // The watermark sits right after the first fragment header.
        let at = *off as usize + HEADER_SIZE;
        let wm = u64::from_le_bytes(w.data[at..at + 8].try_into().unwrap());
        assert_eq!(wm, w.spans[i].2, "record {i}");
    }
    assert_eq!(w.spans[0].2, 0);
    assert_eq!(
        w.spans[2].2, w.spans[1].1,
        "synced through the end of record 1"
    );
    assert_eq!(w.spans[5].2, w.spans[4].1);
    // The file header states version 2.
    assert_eq!(
        &w.data[HEADER_SIZE + 8..HEADER_SIZE + 10],
        &FORMAT_VERSION.to_le_bytes()
    );
}

#[test]
fn a_record_starts_only_where_its_watermark_fits() {
    let fill = BLOCK_SIZE - (HEADER_SIZE + FILE_HEADER_LEN) - HEADER_SIZE - WATERMARK_LEN;
    for left in 0..=HEADER_SIZE + WATERMARK_LEN + 1 {
        let steps = vec![
            Step::Rec(payload(fill - left, 1)),
            Step::Rec(vec![7]),
            Step::Rec(payload(10, 2)),
        ];
        let w = write(&steps);
        let (got, res, tail) = read(w.data.clone());
        res.unwrap();
        assert_eq!(tail, None, "left {left}");
        assert_eq!(got.len(), 3, "left {left}");
        for (i, (off, _)) in got.iter().enumerate() {
            assert_eq!(*off, w.spans[i].0, "left {left} record {i}");
        }
        if left < HEADER_SIZE + WATERMARK_LEN {
            assert_eq!(
                w.spans[1].0, BLOCK_SIZE as u64,
                "left {left}: trailer expected"
            );
        }
    }
}

/// Damage at or after the last sync, followed by records written before any later sync: an
/// unsynced tail, whatever the damage looks like (flipped bits, zeros, stale garbage).
#[test]
fn damage_past_every_later_watermark_is_an_unsynced_tail() {
    let mut steps = recs(2, 40);
    steps.push(Step::Sync);
    steps.extend(recs(5, 40));
    let w = write(&steps);
    let d_at = w.spans[3].0 as usize;
    let d_end = w.spans[3].1 as usize;
    let damaged: Vec<Vec<u8>> = vec![
        {
            let mut d = w.data.clone();
            d[d_at + 20] ^= 0x10;
            d
        },
        {
            let mut d = w.data.clone();
            d[d_at..d_end].fill(0);
            d
        },
        {
            let mut d = w.data.clone();
            d[d_at..d_end].fill(0x5a);
            d
        },
        {
            // Zeros from inside the record (its header survived) to before the next header.
            let mut d = w.data.clone();
            d[d_at + HEADER_SIZE + 3..d_end - 2].fill(0);
            d
        },
    ];
    for (i, d) in damaged.into_iter().enumerate() {
        let (got, res, tail) = read(d);
        res.unwrap_or_else(|e| panic!("case {i}: {e}"));
        assert_eq!(got.len(), 3, "case {i}");
        assert_eq!(tail.map(|t| t.0), Some(d_at as u64), "case {i}");
    }
}

/// Damage below a later record's watermark: those bytes had been synced; open must refuse,
/// naming the file and the damaged record's offset.
#[test]
fn damage_below_a_later_watermark_is_corruption() {
    let mut steps = recs(3, 40);
    steps.push(Step::Sync);
    steps.extend(recs(2, 40));
    let w = write(&steps);
    for rec in 0..3 {
        let (s, e, _) = w.spans[rec];
        for at in [s, s + 5, s + HEADER_SIZE as u64 + 3, e - 1] {
            for fill in [None, Some(0u8), Some(0x77)] {
                let mut d = w.data.clone();
                match fill {
                    None => d[at as usize] ^= 0x08,
                    Some(b) => d[at as usize..e as usize].fill(b),
                }
                let (got, res, _) = read(d);
                assert_eq!(got.len(), rec, "record {rec} at {at} fill {fill:?}");
                match res {
                    Err(Error::Corruption {
                        file,
                        offset,
                        reason,
                    }) => {
                        assert_eq!(offset, s, "record {rec} at {at}");
                        assert!(file.ends_with("000001.log"), "{}", file.display());
                        assert!(reason.contains("synced"), "{reason}");
                    }
                    other => panic!("record {rec} at {at} fill {fill:?}: {other:?}"),
                }
            }
        }
    }
}

/// A multi-block unsynced record whose FIRST fragment is lost, with later records intact:
/// a tail. The same damage once a later sync covered it: corruption.
#[test]
fn torn_big_record_depends_on_the_watermark_after_it() {
    let mut steps = recs(1, 10);
    steps.push(Step::Sync);
    steps.push(Step::Rec(payload(3 * BLOCK_SIZE, 9)));
    steps.extend(recs(2, 10));
    let w = write(&steps);
    let mut d = w.data.clone();
    d[w.spans[1].0 as usize + 100] ^= 0xff;
    let (got, res, tail) = read(d);
    res.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(tail.unwrap().0, w.spans[1].0);

    steps.insert(3, Step::Sync);
    let w = write(&steps);
    let mut d = w.data.clone();
    d[w.spans[1].0 as usize + 100] ^= 0xff;
    let (_, res, _) = read(d);
    assert!(res.unwrap_err().is_corruption());
}

/// A checksummed record whose watermark lies beyond itself is not something a writer makes.
#[test]
fn a_watermark_beyond_its_record_is_damage() {
    let mut out = Vec::new();
    let h = file_header(LogKind::Wal, FORMAT_VERSION);
    out.extend_from_slice(&format::encode_header(TYPE_FULL, &h));
    out.extend_from_slice(&h);
    let mut rec = 1_000u64.to_le_bytes().to_vec();
    rec.extend_from_slice(b"abc");
    out.extend_from_slice(&format::encode_header(TYPE_FULL, &rec));
    out.extend_from_slice(&rec);
    let (got, res, tail) = read(out);
    res.unwrap();
    assert!(got.is_empty());
    assert!(tail.unwrap().1.contains("beyond itself"));
}

/// Random damage anywhere after the last sync never fails the read; records before the
/// damage are returned intact.
#[test]
fn random_damage_in_the_unsynced_part_always_opens() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(11);
    let mut steps = recs(20, 300);
    steps.push(Step::Sync);
    steps.extend((0..40).map(|i| Step::Rec(payload(rng.gen_range(0..9000), i))));
    let w = write(&steps);
    let synced = w.spans[20].2;
    for _ in 0..300 {
        let mut d = w.data.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(synced as usize..d.len());
            let end = (at + rng.gen_range(1..5000)).min(d.len());
            let b = if rng.gen_bool(0.5) { 0 } else { rng.gen() };
            d[at..end].fill(b);
        }
        let (got, res, _) = read(d);
        res.unwrap();
        assert!(got.len() >= 20);
        for (i, (off, _)) in got.iter().enumerate() {
            assert_eq!(*off, w.spans[i].0);
        }
    }
}

/// A damaged file header: an unsynced new log (every record at watermark 0) is an empty log;
/// once a sync covered the header, later records carry a non-zero watermark: corruption.
#[test]
fn a_damaged_file_header_depends_on_the_watermarks_after_it() {
    let w = write(&recs(3, 30));
    for at in [0usize, 5, HEADER_SIZE + 2] {
        let mut d = w.data.clone();
        d[at] ^= 0x41;
        let (got, res, tail) = read(d);
        res.unwrap_or_else(|e| panic!("byte {at}: {e}"));
        assert!(got.is_empty());
        assert_eq!(tail.unwrap().0, 0);
    }
    let mut steps = recs(1, 30);
    steps.push(Step::Sync);
    steps.extend(recs(2, 30));
    let w = write(&steps);
    let mut d = w.data.clone();
    d[3] ^= 0x41;
    let (_, res, _) = read(d);
    assert!(res.unwrap_err().is_corruption());
}

/// Records read to the end, and whether they ended with a sync mark.
fn read_sealed(data: Vec<u8>) -> (usize, bool) {
    let mut r = LogReader::new(Arc::new(VecReader {
        data,
        path: PathBuf::from("000001.log"),
    }));
    let mut n = 0;
    while r.read_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(r.truncated_tail(), None);
    (n, r.sealed())
}

/// A sealed log (a switched WAL, a closed one) ends with a sync mark and reads as sealed; cut
/// at a record boundary, or with a record after the mark, it does not (recovery refuses such
/// a WAL when a newer one holds records: `docs/format/wal.md` section 5).
#[test]
fn a_sealed_log_reads_as_sealed_and_a_cut_one_does_not() {
    let mut steps = recs(3, 30);
    steps.push(Step::Seal);
    let w = write(&steps);
    assert_eq!(read_sealed(w.data.clone()), (3, true));
    // Without its mark (a FULL fragment of the 8-byte watermark alone) the records are whole
    // but the file no longer reads as sealed; nor does it cut one record earlier.
    let mark = HEADER_SIZE + WATERMARK_LEN;
    assert_eq!(
        read_sealed(w.data[..w.data.len() - mark].to_vec()),
        (3, false)
    );
    assert_eq!(
        read_sealed(w.data[..w.spans[2].0 as usize].to_vec()),
        (2, false)
    );
    // A second seal with nothing appended adds no mark; a record after the mark unseals.
    steps.push(Step::Seal);
    assert_eq!(write(&steps).data, w.data);
    steps.extend(recs(1, 10));
    assert_eq!(read_sealed(write(&steps).data), (4, false));
    // The mark lands after a block trailer when the block has no room for it.
    let first = HEADER_SIZE + 12;
    let fill = BLOCK_SIZE - first - (HEADER_SIZE + WATERMARK_LEN) - 10;
    let w = write(&[Step::Rec(payload(fill, 1)), Step::Seal]);
    assert_eq!(w.data.len(), BLOCK_SIZE + HEADER_SIZE + WATERMARK_LEN);
    assert_eq!(read_sealed(w.data), (1, true));
}
