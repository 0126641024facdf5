use super::*;

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Reads `[from, to)` whole, in pieces as a feeder does.
fn read_all(log: &ReplLog, from: u64, to: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let chunk = log.read(at, 7000).expect("readable");
        assert!(!chunk.is_empty(), "no progress at {at}");
        at += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    out
}

#[test]
fn append_and_read_across_segments_and_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = ReplLog::open(dir.path(), 100, u64::MAX, 4096).unwrap();
    let mut all = Vec::new();
    for i in 0..40 {
        let b = bytes(1000 + i, i as u8);
        log.append(&b);
        all.extend_from_slice(&b);
        if i % 3 == 0 {
            log.flush().unwrap();
        }
    }
    assert_eq!(log.bounds(), (100, 100 + all.len() as u64));
    // Part flushed into several segments, part still in memory.
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(files > 3, "{files} segments");
    assert_eq!(read_all(&log, 100, log.end()), all);
    // From the middle of a record.
    assert_eq!(read_all(&log, 1234, log.end()), all[1134..]);
    assert_eq!(log.read(log.end(), 10), Ok(Vec::new()));
    assert_eq!(log.read(log.end() + 1, 10), Err(ReadError::Beyond));
    assert_eq!(log.read(99, 10), Err(ReadError::Gone));
    log.flush().unwrap();
    assert_eq!(read_all(&log, 100, log.end()), all);
}

#[test]
fn pruning_keeps_the_bound_and_the_pins() {
    let dir = tempfile::tempdir().unwrap();
    let log = ReplLog::open(dir.path(), 0, 10_000, 2048).unwrap();
    let pin = log.pin(500);
    for i in 0..60 {
        log.append(&bytes(1000, i));
        log.flush().unwrap();
    }
    // The pin at 500 holds the first segment.
    assert_eq!(log.first(), 0);
    assert_eq!(log.read(500, 10).map(|b| b.len()), Ok(10));
    log.move_pin(pin, 40_000);
    log.append(b"x");
    log.flush().unwrap();
    let first = log.first();
    assert!(first > 0 && first <= 40_000, "first {first}");
    assert_eq!(log.read(first.saturating_sub(1), 10), Err(ReadError::Gone));
    log.unpin(pin);
    log.append(b"y");
    log.flush().unwrap();
    let (first, end) = log.bounds();
    assert!(end - first <= 10_000 + 2048, "{first}..{end}");
    assert!(first > 40_000);
    assert_eq!(log.read(500, 10), Err(ReadError::Gone));
    // The files on disk are the segments the log still holds.
    let files = std::fs::read_dir(dir.path()).unwrap().count() as u64;
    assert!(files <= (10_000 + 2048) / 1000 + 2, "{files} files");
}

#[test]
fn reopen_recovers_and_cuts_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    {
        let log = ReplLog::open(dir.path(), 7, u64::MAX, 3000).unwrap();
        for i in 0..10 {
            let b = bytes(900, i);
            log.append(&b);
            all.extend_from_slice(&b);
            log.flush().unwrap();
        }
    }
    let log = ReplLog::open(dir.path(), 0, u64::MAX, 3000).unwrap();
    assert_eq!(log.bounds(), (7, 7 + all.len() as u64));
    assert_eq!(read_all(&log, 7, log.end()), all);
    drop(log);
    // Tear the last segment in the middle of its last record.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let last = names.last().unwrap().clone();
    let len = std::fs::metadata(&last).unwrap().len();
    let f = OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(len - 100).unwrap();
    drop(f);
    let log = ReplLog::open(dir.path(), 0, u64::MAX, 3000).unwrap();
    let end = log.end();
    assert_eq!(end, 7 + all.len() as u64 - 900, "the torn record is cut");
    assert_eq!(read_all(&log, 7, end), all[..all.len() - 900]);
    // Appending goes on from the cut.
    log.append(b"after");
    log.flush().unwrap();
    assert_eq!(log.read(end, 100), Ok(b"after".to_vec()));
}

#[test]
fn a_corrupt_record_ends_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = ReplLog::open(dir.path(), 0, u64::MAX, 2500).unwrap();
        for i in 0..8 {
            log.append(&bytes(1000, i));
            log.flush().unwrap();
        }
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 3);
    // Flip a byte in the first record's payload of the second segment.
    let mut data = std::fs::read(&names[1]).unwrap();
    data[HEADER_BYTES as usize + RECORD_HEADER as usize + 5] ^= 0x40;
    std::fs::write(&names[1], &data).unwrap();
    let log = ReplLog::open(dir.path(), 0, u64::MAX, 2500).unwrap();
    // Only the first segment stays; the ones after the cut are deleted.
    // The first segment ends where the second starts (its name).
    let first_seg_end: u64 = names[1]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(first_seg_end, 3000, "three records before the roll at 2500");
    assert_eq!(log.bounds(), (0, first_seg_end));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    assert_eq!(log.read(first_seg_end, 10), Ok(Vec::new()));
}

#[test]
fn a_flipped_byte_on_disk_is_an_error_not_data() {
    let dir = tempfile::tempdir().unwrap();
    let log = ReplLog::open(dir.path(), 0, u64::MAX, 1 << 20).unwrap();
    log.append(&bytes(5000, 1));
    log.flush().unwrap();
    let path = segment_path(dir.path(), 0);
    let mut data = std::fs::read(&path).unwrap();
    data[100] ^= 1;
    std::fs::write(&path, &data).unwrap();
    assert!(matches!(log.read(10, 10), Err(ReadError::Io(_))));
}

#[test]
fn create_discards_an_old_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = ReplLog::open(dir.path(), 0, u64::MAX, 1000).unwrap();
        log.append(&bytes(3000, 2));
        log.flush().unwrap();
    }
    let log = ReplLog::create(dir.path(), 55, u64::MAX, 1000).unwrap();
    assert_eq!(log.bounds(), (55, 55));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
