//! Tests of the io_uring backend: batches, streams, short reads, direct reads.

use super::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

fn file_with(data: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, data).unwrap();
    (dir, p)
}

/// io_uring must work here unless `STRATA_ALLOW_NO_URING=1` says this machine lacks it
/// (then the pool backend's tests are what covers batched reads).
fn require_uring() -> bool {
    match available() {
        Ok(()) => true,
        Err(e) if std::env::var_os("STRATA_ALLOW_NO_URING").is_some() => {
            eprintln!("io_uring unavailable ({e}); skipped as STRATA_ALLOW_NO_URING asks");
            false
        }
        Err(e) => panic!("io_uring unavailable: {e} (set STRATA_ALLOW_NO_URING=1 to skip)"),
    }
}

/// This thread's ring used its registered buffers (root or a memlock limit of at least
/// 1 MiB lets the kernel pin them) and gave every one back.
fn assert_every_registered_buffer_free() {
    RING.with(|c| match &*c.borrow() {
        RingState::Ready(r) => {
            let f = r.fixed.as_ref().expect("registered buffers");
            assert_eq!(
                f.free.len(),
                FIXED_BUFFERS,
                "a registered buffer was not freed"
            );
        }
        _ => panic!("no ring on this thread"),
    });
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn reads_many_ranges_and_short_reads_complete() {
    if !require_uring() {
        return;
    }
    let data = pattern(300_000);
    let (_d, p) = file_with(&data);
    let f = std::fs::File::open(&p).unwrap();
    let reqs: Vec<UringRead> = (0..200)
        .map(|i| UringRead {
            fd: f.as_raw_fd(),
            offset: (i * 1487) as u64,
            len: 100 + i * 13,
            direct: false,
        })
        .collect();
    // 200 reads > 64 ring entries (registered buffers are reused); chunks of 97 bytes
    // force many short-read resubmits.
    for (chunk, fixed) in [(MAX_READ_BYTES, true), (MAX_READ_BYTES, false), (97, true)] {
        let out = read_batch_with(&reqs, chunk, fixed).unwrap();
        for (r, got) in reqs.iter().zip(out) {
            let o = r.offset as usize;
            assert_eq!(got.unwrap(), &data[o..o + r.len]);
        }
    }
    // The registered-buffer path was the one exercised (root or a memlock limit of at
    // least 1 MiB lets the kernel pin them).
    assert_every_registered_buffer_free();
}

/// Chains of reads: each completed read makes its chain's next read ready, and chains
/// are started only when no read is ready (a pipelined multi_get's shape).
struct Chains {
    fd: RawFd,
    data: Vec<u8>,
    chains: usize,
    steps: usize,
    started: usize,
    ready: VecDeque<(usize, usize)>,
    out: usize,
    most_out: usize,
    done: usize,
    ring_busy_seen: bool,
}

impl Chains {
    fn read(&self, chain: usize, step: usize) -> UringRead {
        UringRead {
            fd: self.fd,
            offset: ((chain * 7919 + step * 131) % (self.data.len() - 500)) as u64,
            len: 100 + chain % 300,
            direct: false,
        }
    }
}

impl ReadSource for Chains {
    fn next_read(&mut self) -> Option<(usize, UringRead)> {
        if self.ready.is_empty() && self.started < self.chains {
            self.ready.push_back((self.started, 0));
            self.started += 1;
        }
        let (c, s) = self.ready.pop_front()?;
        self.out += 1;
        self.most_out = self.most_out.max(self.out);
        Some((c * 1000 + s, self.read(c, s)))
    }

    fn read_done(&mut self, tag: usize, result: io::Result<Vec<u8>>) {
        let (c, s) = (tag / 1000, tag % 1000);
        let r = self.read(c, s);
        let o = r.offset as usize;
        assert_eq!(
            result.unwrap(),
            &self.data[o..o + r.len],
            "chain {c} step {s}"
        );
        self.out -= 1;
        self.done += 1;
        if !self.ring_busy_seen {
            // A callback that reads in turn gets no ring (the caller then uses the
            // pool), never a second loop reaping this one's completions.
            assert!(read_batch(&[r, r]).is_none());
            self.ring_busy_seen = true;
        }
        if s + 1 < self.steps {
            self.ready.push_back((c, s + 1));
        }
    }
}

#[test]
fn a_stream_keeps_its_cap_and_feeds_reads_in_as_others_complete() {
    if !require_uring() {
        return;
    }
    let data = pattern(400_000);
    let (_d, p) = file_with(&data);
    let f = std::fs::File::open(&p).unwrap();
    for cap in [1, 5, 32, 1000] {
        let mut src = Chains {
            fd: f.as_raw_fd(),
            data: data.clone(),
            chains: 150,
            steps: 4,
            started: 0,
            ready: VecDeque::new(),
            out: 0,
            most_out: 0,
            done: 0,
            ring_busy_seen: false,
        };
        read_stream(&mut src, cap).unwrap().unwrap();
        assert_eq!(src.done, 600, "cap {cap}");
        assert_eq!(src.out, 0);
        assert!(src.ring_busy_seen);
        assert!(
            src.most_out <= cap.min(RING_ENTRIES as usize),
            "cap {cap}: {}",
            src.most_out
        );
        // With room, the ring filled up rather than waiting chain by chain.
        assert_eq!(src.most_out, cap.min(RING_ENTRIES as usize), "cap {cap}");
    }
    assert_every_registered_buffer_free();
}

#[test]
fn past_eof_fails_only_that_read() {
    if !require_uring() {
        return;
    }
    let data = pattern(10_000);
    let (_d, p) = file_with(&data);
    let f = std::fs::File::open(&p).unwrap();
    let fd = f.as_raw_fd();
    let reqs = [
        UringRead {
            fd,
            offset: 0,
            len: 10,
            direct: false,
        },
        UringRead {
            fd,
            offset: 9_990,
            len: 20,
            direct: false,
        },
        UringRead {
            fd,
            offset: 20_000,
            len: 5,
            direct: false,
        },
        UringRead {
            fd,
            offset: 5,
            len: 0,
            direct: false,
        },
        UringRead {
            fd: -1,
            offset: 0,
            len: 5,
            direct: false,
        },
    ];
    let out = read_batch(&reqs).unwrap();
    assert_eq!(out[0].as_ref().unwrap(), &data[..10]);
    assert_eq!(
        out[1].as_ref().unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
    assert_eq!(
        out[2].as_ref().unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
    assert!(out[3].as_ref().unwrap().is_empty());
    assert_eq!(
        out[4].as_ref().unwrap_err().raw_os_error(),
        Some(libc::EBADF)
    );
}

#[test]
fn direct_reads_are_aligned_and_sliced() {
    if !require_uring() {
        return;
    }
    let data = pattern(50_000);
    let (_d, p) = file_with(&data);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .expect("O_DIRECT open in the temp dir");
    let fd = f.as_raw_fd();
    let reqs: Vec<UringRead> = [
        (0, 4096),
        (5, 100),
        (4000, 5000),
        (49_000, 1000),
        (46_000, 3999),
    ]
    .iter()
    .map(|&(offset, len)| UringRead {
        fd,
        offset,
        len,
        direct: true,
    })
    .collect();
    for (chunk, fixed) in [(MAX_READ_BYTES, true), (MAX_READ_BYTES, false), (1, true)] {
        let out = read_batch_with(&reqs, chunk, fixed).unwrap();
        for (r, got) in reqs.iter().zip(out) {
            let o = r.offset as usize;
            assert_eq!(got.unwrap(), &data[o..o + r.len], "{r:?} chunk {chunk}");
        }
    }
    let past = [UringRead {
        fd,
        offset: 49_900,
        len: 200,
        direct: true,
    }];
    let out = read_batch(&past).unwrap();
    assert_eq!(
        out[0].as_ref().unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
}
