//! Tests of the record log over in-test Vec-backed files, in format version 1 (records
//! without a watermark: what databases written before version 2 hold, still read). The
//! watermark of version 2 and its recovery rule are tested in `watermark_tests.rs`.

use super::format::{encode_header, file_header, TYPE_FIRST, TYPE_FULL, TYPE_LAST, TYPE_MIDDLE};
use super::*;
use crate::error::{Error, Result};
use crate::io::{RandomAccessFile, WritableFile};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Shared state of an in-test writable file.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) data: Vec<u8>,
    pub(super) appends: usize,
    /// Fail the append with this (0-based) index.
    fail_append: Option<usize>,
}

pub(super) struct VecWriter {
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) path: PathBuf,
}

impl WritableFile for VecWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut s = self.shared.lock().unwrap();
        if s.fail_append == Some(s.appends) {
            s.appends += 1;
            s.data.extend_from_slice(&data[..data.len() / 2]);
            return Err(Error::io(
                "append",
                &self.path,
                std::io::Error::from_raw_os_error(28),
            ));
        }
        s.appends += 1;
        s.data.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.shared.lock().unwrap().data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

pub(super) struct VecReader {
    pub(super) data: Vec<u8>,
    pub(super) path: PathBuf,
}

impl RandomAccessFile for VecReader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= self.data.len() as u64 => {
                buf.copy_from_slice(&self.data[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(Error::io(
                "read",
                &self.path,
                std::io::ErrorKind::UnexpectedEof.into(),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// The format version these tests write.
const V1: u16 = FORMAT_VERSION_NO_WATERMARK;

fn new_writer(name: &str) -> (LogWriter, Arc<Mutex<Shared>>) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let file = VecWriter {
        shared: shared.clone(),
        path: PathBuf::from(name),
    };
    let kind = LogKind::for_path(Path::new(name));
    (
        LogWriter::with_format(Box::new(file), kind, V1).unwrap(),
        shared,
    )
}

/// Writes `records`; returns the file bytes and each record's (start, end) as the reader
/// reports the start (after any block trailer) and the end is the file size after it.
fn write_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<(u64, u64)>) {
    let (mut w, shared) = new_writer("000001.log");
    let mut spans = Vec::new();
    for r in records {
        let mut start = w.size();
        let room = BLOCK_SIZE as u64 - start % BLOCK_SIZE as u64;
        if room < HEADER_SIZE as u64 {
            start += room;
        }
        w.add_record(r).unwrap();
        spans.push((start, w.size()));
    }
    w.sync().unwrap();
    let data = shared.lock().unwrap().data.clone();
    assert_eq!(data.len() as u64, w.size());
    (data, spans)
}

fn reader(data: Vec<u8>) -> LogReader {
    LogReader::new(Arc::new(VecReader {
        data,
        path: PathBuf::from("000001.log"),
    }))
}

type Outcome = (
    Vec<(u64, Vec<u8>)>,
    Result<()>,
    Option<(u64, String)>,
    LogReader,
);

/// Reads until the end or an error. Bounded so that a reader bug cannot loop forever.
fn read_all(data: Vec<u8>) -> Outcome {
    let limit = data.len() + 2;
    let mut r = reader(data);
    let mut recs = Vec::new();
    for _ in 0..limit {
        match r.read_record() {
            Ok(Some(rec)) => recs.push(rec),
            Ok(None) => {
                let tail = r.truncated_tail();
                return (recs, Ok(()), tail, r);
            }
            Err(e) => {
                let tail = r.truncated_tail();
                return (recs, Err(e), tail, r);
            }
        }
    }
    panic!("reader returned more records than the file has bytes");
}

pub(super) fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn assert_round_trip(records: &[Vec<u8>]) -> Vec<u8> {
    let (data, spans) = write_log(records);
    let (got, res, tail, r) = read_all(data.clone());
    res.unwrap();
    assert_eq!(tail, None);
    assert_eq!(r.kind(), Some(LogKind::Wal));
    assert_eq!(got.len(), records.len());
    for (i, (off, rec)) in got.iter().enumerate() {
        assert_eq!(*off, spans[i].0, "offset of record {i}");
        assert_eq!(rec, &records[i], "payload of record {i}");
    }
    data
}

const FILE_HDR_RECORD: usize = HEADER_SIZE + FILE_HEADER_LEN;

#[test]
fn round_trip_edge_sizes() {
    assert_round_trip(&[]);
    assert_round_trip(&[vec![]]);
    assert_round_trip(&[vec![7]]);
    // Exactly fills the first block after the file header: no trailer, file is one block.
    let fill = BLOCK_SIZE - FILE_HDR_RECORD - HEADER_SIZE;
    let data = assert_round_trip(&[payload(fill, 1)]);
    assert_eq!(data.len(), BLOCK_SIZE);
    // Fills a whole fresh block, then a record in the next block.
    assert_round_trip(&[
        payload(fill, 1),
        payload(BLOCK_SIZE - HEADER_SIZE, 2),
        vec![3],
    ]);
    // Leaves 1..=7 bytes in the block: trailers of every length, and a header that just fits.
    for left in 1..=HEADER_SIZE {
        let data = assert_round_trip(&[payload(fill - left, 4), vec![], payload(10, 5)]);
        if left < HEADER_SIZE {
            assert!(data[BLOCK_SIZE - left..BLOCK_SIZE].iter().all(|&b| b == 0));
        }
    }
    // One byte more than the block holds: a FIRST/LAST pair.
    assert_round_trip(&[payload(fill + 1, 6)]);
    // 100 KiB spanning four blocks, surrounded by small records.
    assert_round_trip(&[vec![1, 2, 3], payload(100 << 10, 7), vec![4]]);
    // Several records spanning blocks back to back.
    assert_round_trip(&[
        payload(70_000, 8),
        payload(BLOCK_SIZE * 3, 9),
        payload(5, 10),
    ]);
}

#[test]
fn round_trip_many_small() {
    let mut rng = StdRng::seed_from_u64(42);
    let records: Vec<Vec<u8>> = (0..5000)
        .map(|i| payload(rng.gen_range(0..200), i as u8))
        .collect();
    assert_round_trip(&records);
}

#[test]
fn small_records_cost_one_append_each() {
    let (mut w, shared) = new_writer("000002.log");
    let before = shared.lock().unwrap().appends;
    assert_eq!(before, 1, "file header is one append");
    for i in 0..2000u32 {
        w.add_record(&i.to_le_bytes().repeat(10)).unwrap();
    }
    assert_eq!(shared.lock().unwrap().appends, 2001);
    // A big record costs at most one append per fragment.
    w.add_record(&payload(5 * BLOCK_SIZE, 1)).unwrap();
    assert!(shared.lock().unwrap().appends <= 2001 + 6);
}

#[test]
fn file_header_layout_and_kind() {
    let (w, shared) = new_writer("MANIFEST-000007");
    assert_eq!(w.size(), FILE_HDR_RECORD as u64);
    let data = shared.lock().unwrap().data.clone();
    assert_eq!(&data[HEADER_SIZE..HEADER_SIZE + 8], b"STRATLOG");
    assert_eq!(
        &data[HEADER_SIZE + 8..],
        &[1, 0, LogKind::Manifest as u8, 0]
    );
    assert_eq!(data[6], TYPE_FULL);
    assert_eq!(&data[4..6], &[FILE_HEADER_LEN as u8, 0]);

    let open = |kind| {
        LogReader::with_kind(
            Arc::new(VecReader {
                data: data.clone(),
                path: PathBuf::from("x"),
            }),
            kind,
        )
    };
    let mut r = open(LogKind::Manifest);
    assert_eq!(r.read_record().unwrap(), None);
    assert_eq!(r.kind(), Some(LogKind::Manifest));
    assert_eq!(r.truncated_tail(), None);
    let e = open(LogKind::Wal).read_record().unwrap_err();
    assert!(e.is_corruption(), "{e}");

    assert_eq!(
        LogKind::for_path(Path::new("/d/MANIFEST-000001")),
        LogKind::Manifest
    );
    assert_eq!(LogKind::for_path(Path::new("/d/000001.log")), LogKind::Wal);
}

/// Builds a log by hand: file header, then `frags` of (type, payload) placed back to back.
fn hand_log(frags: &[(u8, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let h = file_header(LogKind::Wal, V1);
    out.extend_from_slice(&encode_header(TYPE_FULL, &h));
    out.extend_from_slice(&h);
    for (t, p) in frags {
        out.extend_from_slice(&encode_header(*t, p));
        out.extend_from_slice(p);
    }
    out
}

#[test]
fn bad_file_headers_are_corruption() {
    // Valid checksum, wrong magic / version / reserved byte / kind / length.
    for case in 0..5 {
        let mut h = file_header(LogKind::Wal, V1).to_vec();
        match case {
            0 => h[0] = b'X',
            1 => h[8] = 3,
            2 => h[11] = 1,
            3 => h[10] = 9,
            _ => h.push(0),
        }
        let mut data = encode_header(TYPE_FULL, &h).to_vec();
        data.extend_from_slice(&h);
        let (recs, res, _, _) = read_all(data);
        assert!(recs.is_empty());
        let e = res.unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }
    // A log without a file header: its first record is taken for one and rejected.
    let mut data = encode_header(TYPE_FULL, b"hello").to_vec();
    data.extend_from_slice(b"hello");
    assert!(read_all(data).1.unwrap_err().is_corruption());
    // A damaged file header followed by valid records is corruption, not a torn tail.
    let (mut data, _) = write_log(&[b"a".to_vec(), b"b".to_vec()]);
    data[HEADER_SIZE + 2] ^= 0x10;
    assert!(read_all(data).1.unwrap_err().is_corruption());
}

#[test]
fn empty_and_zero_filled_files_are_clean_and_empty() {
    for len in [0, 1, 6, 7, 100, BLOCK_SIZE + 5] {
        let (recs, res, tail, _) = read_all(vec![0; len]);
        res.unwrap();
        assert!(recs.is_empty());
        assert_eq!(tail, None, "len {len}");
    }
}

#[test]
fn zero_filled_tail_is_a_clean_end() {
    let records = vec![payload(10, 1), payload(50_000, 2), payload(3, 3)];
    let (mut data, _) = write_log(&records);
    data.resize(data.len() + 100_000, 0);
    let (got, res, tail, _) = read_all(data);
    res.unwrap();
    assert_eq!(tail, None);
    assert_eq!(got.len(), 3);
}

#[test]
fn every_truncation_yields_a_prefix_and_a_torn_tail() {
    for records in [
        vec![payload(10, 1), payload(200, 2), payload(30, 3)],
        vec![payload(100, 4), payload(50_000, 5), payload(20, 6)],
    ] {
        let (data, spans) = write_log(&records);
        for cut in 0..=data.len() {
            let (got, res, tail, _) = read_all(data[..cut].to_vec());
            res.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let complete = spans.iter().filter(|s| s.1 <= cut as u64).count();
            assert_eq!(got.len(), complete, "cut {cut}");
            for (i, (off, rec)) in got.iter().enumerate() {
                assert_eq!((*off, rec), (spans[i].0, &records[i]), "cut {cut}");
            }
            // Clean ends: empty file, or a cut at a record end (or inside the zero trailer
            // that follows it).
            let at_boundary = cut == 0
                || cut == FILE_HDR_RECORD
                || (0..records.len()).any(|i| {
                    let next = spans.get(i + 1).map_or(spans[i].1, |s| s.0);
                    spans[i].1 <= cut as u64 && cut as u64 <= next
                });
            if at_boundary {
                assert_eq!(tail, None, "cut {cut}");
            } else {
                let expect = if cut < FILE_HDR_RECORD {
                    0
                } else {
                    spans[complete].0
                };
                let (off, _) = tail.unwrap_or_else(|| panic!("cut {cut}: no truncated tail"));
                assert_eq!(off, expect, "cut {cut}");
            }
        }
    }
}

#[test]
fn flip_in_first_record_is_corruption() {
    let records = vec![payload(40, 1), payload(40, 2), payload(40, 3)];
    let (data, spans) = write_log(&records);
    for at in spans[0].0..spans[0].1 {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut d = data.clone();
            d[at as usize] ^= mask;
            let (got, res, _, mut r) = read_all(d);
            assert!(got.is_empty(), "flip at {at}");
            match res {
                Err(Error::Corruption { offset, .. }) => assert_eq!(offset, spans[0].0),
                other => panic!("flip at {at}: expected corruption, got {other:?}"),
            }
            // The error sticks.
            assert!(r.read_record().unwrap_err().is_corruption());
        }
    }
}

#[test]
fn flip_in_middle_of_spanning_log_is_corruption() {
    let records = vec![payload(100, 1), payload(80_000, 2), payload(100, 3)];
    let (data, spans) = write_log(&records);
    for at in [spans[1].0 + 3, spans[1].0 + 40_000, spans[1].1 - 1] {
        let mut d = data.clone();
        d[at as usize] ^= 0x04;
        let (got, res, _, _) = read_all(d);
        assert_eq!(got.len(), 1);
        assert!(res.unwrap_err().is_corruption(), "flip at {at}");
    }
}

#[test]
fn flip_in_last_record_is_a_torn_tail() {
    let records = vec![payload(40, 1), payload(40, 2), payload(40, 3)];
    let (data, spans) = write_log(&records);
    for at in spans[2].0..spans[2].1 {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut d = data.clone();
            d[at as usize] ^= mask;
            let (got, res, tail, _) = read_all(d);
            res.unwrap_or_else(|e| panic!("flip at {at}: {e}"));
            assert_eq!(got.len(), 2, "flip at {at}");
            assert_eq!(tail.map(|t| t.0), Some(spans[2].0), "flip at {at}");
        }
    }
}

/// A zeroed record between two intact ones is a hole that out-of-order writeback of unsynced
/// pages leaves: the log ends at the hole (what follows was unsynced too). The same bytes
/// made non-zero garbage are damage followed by a valid record: corruption.
#[test]
fn zeroed_region_mid_log_is_a_hole_at_tail_is_torn() {
    let records = vec![payload(40, 1), payload(40, 2), payload(40, 3)];
    let (data, spans) = write_log(&records);
    let mut d = data.clone();
    d[spans[1].0 as usize..spans[1].1 as usize].fill(0);
    let (got, res, tail, _) = read_all(d);
    res.unwrap();
    assert_eq!(got.len(), 1);
    let (at, reason) = tail.unwrap();
    assert_eq!(at, spans[1].0);
    assert!(reason.contains("hole"), "{reason}");
    let mut d = data.clone();
    d[spans[1].0 as usize..spans[1].1 as usize].fill(0x5a);
    assert!(read_all(d).1.unwrap_err().is_corruption());
    // The last record's payload never reached the disk (size persisted, data did not).
    let mut d = data.clone();
    d[spans[2].0 as usize + HEADER_SIZE..].fill(0);
    let (got, res, tail, _) = read_all(d);
    res.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(tail.unwrap().0, spans[2].0);
}

#[test]
fn fragment_sequence_errors() {
    // FIRST then FULL: the unfinished record is followed by a valid one.
    let d = hand_log(&[(TYPE_FIRST, b"ab"), (TYPE_FULL, b"cd")]);
    assert!(read_all(d).1.unwrap_err().is_corruption());
    // FIRST, MIDDLE, then end of file: torn.
    let d = hand_log(&[(TYPE_FULL, b"x"), (TYPE_FIRST, b"ab"), (TYPE_MIDDLE, b"cd")]);
    let (got, res, tail, _) = read_all(d);
    res.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(tail.unwrap().0, (FILE_HDR_RECORD + HEADER_SIZE + 1) as u64);
    // An orphan LAST at the end: torn. An orphan MIDDLE before a valid record: corruption.
    let d = hand_log(&[(TYPE_FULL, b"x"), (TYPE_LAST, b"ab")]);
    let (got, res, tail, _) = read_all(d);
    res.unwrap();
    assert_eq!(got.len(), 1);
    assert!(tail.is_some());
    let d = hand_log(&[(TYPE_MIDDLE, b"ab"), (TYPE_FULL, b"x")]);
    assert!(read_all(d).1.unwrap_err().is_corruption());
    // Hand-made multi-fragment records need not fill their blocks.
    let d = hand_log(&[(TYPE_FIRST, b"ab"), (TYPE_MIDDLE, b""), (TYPE_LAST, b"cd")]);
    let (got, res, _, _) = read_all(d);
    res.unwrap();
    assert_eq!(got, vec![(FILE_HDR_RECORD as u64, b"abcd".to_vec())]);
}

#[test]
fn torn_big_record_with_surviving_later_fragments_is_a_torn_tail() {
    // Pages of an unsynced multi-block record reached the disk out of order: its FIRST
    // fragment is garbage but its MIDDLE/LAST fragments are intact. They start no record,
    // so this is a torn tail, not corruption.
    let records = vec![payload(10, 1), payload(3 * BLOCK_SIZE, 2)];
    let (mut data, spans) = write_log(&records);
    data[spans[1].0 as usize + 100] ^= 0xff;
    let (got, res, tail, _) = read_all(data);
    res.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(tail.unwrap().0, spans[1].0);
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = StdRng::seed_from_u64(7);
    let (valid, _) = write_log(&[payload(30, 1), payload(40_000, 2), payload(5, 3)]);
    for i in 0..300 {
        let data = match i % 3 {
            // Pure noise.
            0 => {
                let mut d = vec![0u8; rng.gen_range(0..3 * BLOCK_SIZE)];
                rng.fill(&mut d[..]);
                d
            }
            // A valid file header, then noise biased towards plausible headers.
            1 => {
                let mut d = valid[..FILE_HDR_RECORD].to_vec();
                for _ in 0..rng.gen_range(0..20_000) {
                    d.push(if rng.gen_bool(0.3) {
                        rng.gen_range(0..6)
                    } else {
                        rng.gen()
                    });
                }
                d
            }
            // A valid log with random damage and a random length.
            _ => {
                let mut d = valid.clone();
                for _ in 0..rng.gen_range(1..10) {
                    let at = rng.gen_range(0..d.len());
                    d[at] = rng.gen();
                }
                d.truncate(rng.gen_range(0..=d.len()));
                d
            }
        };
        let (_, res, tail, _) = read_all(data);
        if res.is_err() {
            assert!(tail.is_none());
        }
    }
}

#[test]
fn writer_failure_poisons_it() {
    let shared = Arc::new(Mutex::new(Shared {
        fail_append: Some(2),
        ..Shared::default()
    }));
    let file = VecWriter {
        shared: shared.clone(),
        path: PathBuf::from("000003.log"),
    };
    let mut w = LogWriter::new(Box::new(file)).unwrap();
    w.add_record(b"one").unwrap();
    let e = w.add_record(b"two").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(28));
    assert_eq!(w.add_record(b"three").unwrap_err().raw_os_error(), Some(28));
    assert_eq!(w.sync().unwrap_err().raw_os_error(), Some(28));
    assert_eq!(shared.lock().unwrap().appends, 3);
}

#[test]
fn writer_rejects_non_empty_file() {
    let shared = Arc::new(Mutex::new(Shared {
        data: vec![1],
        ..Shared::default()
    }));
    let file = VecWriter {
        shared,
        path: PathBuf::from("000004.log"),
    };
    assert!(matches!(
        LogWriter::new(Box::new(file)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn crc_mask_round_trips() {
    for c in [0u32, 1, 0xdead_beef, u32::MAX] {
        assert_eq!(unmask_crc(mask_crc(c)), c);
        assert_ne!(mask_crc(c), c);
    }
}

#[test]
fn type_constants_are_on_disk_values() {
    assert_eq!(
        [TYPE_FULL, TYPE_FIRST, TYPE_MIDDLE, TYPE_LAST],
        [1, 2, 3, 4]
    );
}
