//! Unit tests of `MemFs`'s file system operations and its default crash (the other crash
//! modes are tested in `crash.rs`).

use super::*;

fn setup() -> (MemFs, Arc<dyn Fs>, PathBuf) {
    let mem = MemFs::new();
    let fs: Arc<dyn Fs> = Arc::new(mem.clone());
    let dir = PathBuf::from("/db");
    fs.create_dir_all(&dir).unwrap();
    (mem, fs, dir)
}

fn io_kind(e: &Error) -> ErrorKind {
    match e {
        Error::Io { source, .. } => source.kind(),
        other => panic!("not an I/O error: {other:?}"),
    }
}

#[test]
fn round_trip_and_live_metadata() {
    let (mem, fs, dir) = setup();
    let p = dir.join("a");
    let mut w = fs.create(&p).unwrap();
    w.append(b"hello").unwrap();
    w.append(b" world").unwrap();
    assert_eq!(w.size(), 11);
    assert_eq!(fs.file_size(&p).unwrap(), 11);
    assert!(fs.exists(&p).unwrap());
    assert!(fs.exists(&dir).unwrap());
    let r = fs.open(&p).unwrap();
    let mut buf = [0u8; 5];
    r.read_at(6, &mut buf).unwrap();
    assert_eq!(&buf, b"world");
    assert_eq!(fs.list(&dir).unwrap(), vec!["a".to_string()]);
    assert_eq!(fs.list(Path::new("/")).unwrap(), vec!["db".to_string()]);
    assert_eq!(mem.dump(), vec![(p.clone(), 11)]);
    // Same file through a non-normalized path.
    assert_eq!(fs.file_size(Path::new("/db/./a")).unwrap(), 11);
}

#[test]
fn missing_things_are_not_found() {
    let (_mem, fs, dir) = setup();
    assert_eq!(
        io_kind(&fs.open(&dir.join("x")).err().unwrap()),
        ErrorKind::NotFound
    );
    assert_eq!(
        io_kind(&fs.create(Path::new("/nodir/x")).err().unwrap()),
        ErrorKind::NotFound
    );
    assert_eq!(
        io_kind(&fs.remove(&dir.join("x")).unwrap_err()),
        ErrorKind::NotFound
    );
    assert_eq!(
        io_kind(&fs.list(Path::new("/nodir")).unwrap_err()),
        ErrorKind::NotFound
    );
    assert!(!fs.exists(&dir.join("x")).unwrap());
}

#[test]
fn read_past_end_is_unexpected_eof() {
    let (_mem, fs, dir) = setup();
    let p = dir.join("f");
    fs.write_all_synced(&p, b"0123456789").unwrap();
    let r = fs.open(&p).unwrap();
    let mut buf = [0u8; 4];
    let e = r.read_at(8, &mut buf).unwrap_err();
    assert_eq!(io_kind(&e), ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("/db/f"));
    assert_eq!(
        io_kind(&r.read_at(u64::MAX, &mut buf).unwrap_err()),
        ErrorKind::UnexpectedEof
    );
}

#[test]
fn crash_drops_unsynced_bytes_and_keeps_synced() {
    let (mem, fs, dir) = setup();
    let p = dir.join("wal");
    let mut w = fs.create(&p).unwrap();
    fs.sync_dir(&dir).unwrap();
    w.append(b"synced").unwrap();
    w.sync().unwrap();
    w.append(b"lost").unwrap();
    w.flush().unwrap();
    mem.crash(false);
    assert_eq!(fs.read_all(&p).unwrap(), b"synced");
    // The old handle belongs to the dead process.
    assert!(w.append(b"x").is_err());
    assert!(w.sync().is_err());
    assert_eq!(fs.read_all(&p).unwrap(), b"synced");
}

#[test]
fn old_read_handles_fail_after_crash() {
    let (mem, fs, dir) = setup();
    let p = dir.join("t");
    fs.write_all_synced(&p, b"abc").unwrap();
    fs.sync_dir(&dir).unwrap();
    let r = fs.open(&p).unwrap();
    mem.crash(false);
    let mut buf = [0u8; 3];
    assert!(r.read_at(0, &mut buf).is_err());
    fs.open(&p).unwrap().read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"abc");
}

#[test]
fn create_without_sync_dir_vanishes() {
    let (mem, fs, dir) = setup();
    let p = dir.join("new");
    // Even with its data synced.
    fs.write_all_synced(&p, b"data").unwrap();
    mem.crash(false);
    assert!(!fs.exists(&p).unwrap());
    assert!(fs.list(&dir).unwrap().is_empty());
    // The directory itself was created durably.
    assert!(fs.exists(&dir).unwrap());
}

#[test]
fn rename_without_sync_dir_reverts() {
    let (mem, fs, dir) = setup();
    let cur = dir.join("CURRENT");
    let tmp = dir.join("CURRENT.tmp");
    fs.write_all_synced(&cur, b"old").unwrap();
    fs.sync_dir(&dir).unwrap();
    fs.write_all_synced(&tmp, b"new").unwrap();
    fs.rename(&tmp, &cur).unwrap();
    assert_eq!(fs.read_all(&cur).unwrap(), b"new");
    mem.crash(false);
    assert_eq!(fs.read_all(&cur).unwrap(), b"old");
    assert!(!fs.exists(&tmp).unwrap());

    // With the sync the rename sticks.
    fs.write_all_synced(&tmp, b"new").unwrap();
    fs.rename(&tmp, &cur).unwrap();
    fs.sync_dir(&dir).unwrap();
    mem.crash(false);
    assert_eq!(fs.read_all(&cur).unwrap(), b"new");
    assert!(!fs.exists(&tmp).unwrap());
}

#[test]
fn remove_without_sync_dir_reverts() {
    let (mem, fs, dir) = setup();
    let p = dir.join("000001.sst");
    fs.write_all_synced(&p, b"table").unwrap();
    fs.sync_dir(&dir).unwrap();
    fs.remove(&p).unwrap();
    assert!(!fs.exists(&p).unwrap());
    mem.crash(false);
    assert_eq!(fs.read_all(&p).unwrap(), b"table");
    fs.remove(&p).unwrap();
    fs.sync_dir(&dir).unwrap();
    mem.crash(false);
    assert!(!fs.exists(&p).unwrap());
}

#[test]
fn tear_keeps_a_strict_prefix_of_the_last_append() {
    let mut lens = HashSet::new();
    for seed in 0..50u64 {
        let mem = MemFs::with_seed(seed);
        let fs: Arc<dyn Fs> = Arc::new(mem.clone());
        let p = Path::new("/wal");
        let mut w = fs.create(p).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        w.append(b"AAAA").unwrap();
        w.sync().unwrap();
        w.append(b"BBBB").unwrap();
        let last: Vec<u8> = (0..100u8).collect();
        w.append(&last).unwrap();
        mem.crash(true);
        let got = fs.read_all(p).unwrap();
        assert!(got.len() > 8 && got.len() < 108, "len {}", got.len());
        assert_eq!(&got[..8], b"AAAABBBB");
        assert_eq!(&got[8..], &last[..got.len() - 8]);
        lens.insert(got.len());
    }
    assert!(lens.len() > 10, "the seed should vary the tear: {lens:?}");
    // Deterministic: same seed and operations, same result.
    let run = || {
        let mem = MemFs::with_seed(7);
        let mut w = mem.create(Path::new("/f")).unwrap();
        mem.sync_dir(Path::new("/")).unwrap();
        w.append(&[1u8; 1000]).unwrap();
        mem.crash(true);
        mem.file_size(Path::new("/f")).unwrap()
    };
    assert_eq!(run(), run());
    // Nothing unsynced: nothing to tear.
    let mem = MemFs::new();
    let mut w = mem.create(Path::new("/g")).unwrap();
    mem.sync_dir(Path::new("/")).unwrap();
    w.append(b"xyz").unwrap();
    w.sync().unwrap();
    mem.crash(true);
    assert_eq!(mem.read_all(Path::new("/g")).unwrap(), b"xyz");
}

#[test]
fn create_over_existing_truncates_durably() {
    let (mem, fs, dir) = setup();
    let p = dir.join("CURRENT");
    fs.write_all_synced(&p, b"old contents").unwrap();
    fs.sync_dir(&dir).unwrap();
    let mut w = fs.create(&p).unwrap();
    w.append(b"new").unwrap();
    mem.crash(false);
    assert_eq!(fs.read_all(&p).unwrap(), b"");
}

#[test]
fn lock_conflicts_and_releases() {
    let (mem, fs, dir) = setup();
    let p = dir.join("LOCK");
    let l1 = fs.lock(&p).unwrap();
    assert!(fs.exists(&p).unwrap());
    assert!(matches!(fs.lock(&p).err().unwrap(), Error::Locked(q) if q == p));
    drop(l1);
    let l2 = fs.lock(&p).unwrap();
    // A crash kills the holder; its late drop must not free the new holder's lock.
    mem.crash(false);
    let _l3 = fs.lock(&p).unwrap();
    drop(l2);
    assert!(matches!(fs.lock(&p).err().unwrap(), Error::Locked(_)));
}

#[test]
fn corruption_helpers() {
    let (mem, fs, dir) = setup();
    let p = dir.join("t");
    fs.write_all_synced(&p, b"abcdef").unwrap();
    fs.sync_dir(&dir).unwrap();
    mem.corrupt_byte(&p, 1, 0x20).unwrap();
    assert_eq!(fs.read_all(&p).unwrap(), b"aBcdef");
    assert!(mem.corrupt_byte(&p, 6, 1).is_err());
    mem.truncate(&p, 4).unwrap();
    assert!(mem.truncate(&p, 5).is_err());
    mem.crash(false);
    assert_eq!(fs.read_all(&p).unwrap(), b"aBcd");
}

#[test]
fn concurrent_writers_and_readers() {
    let (_mem, fs, dir) = setup();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let fs = fs.clone();
            let p = dir.join(format!("f{t}"));
            std::thread::spawn(move || {
                let mut w = fs.create(&p).unwrap();
                for i in 0..200u32 {
                    w.append(&i.to_le_bytes()).unwrap();
                }
                w.sync().unwrap();
                let r = fs.open(&p).unwrap();
                let mut b = [0u8; 4];
                r.read_at(4 * 199, &mut b).unwrap();
                assert_eq!(u32::from_le_bytes(b), 199);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(fs.list(&dir).unwrap().len(), 4);
}
