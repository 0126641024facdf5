//! What the process costs the machine, read from /proc: device bytes, CPU time, peak RSS;
//! and bytes on disk of a directory.
//!
//! All engines run in this process, their background threads included, so the process's
//! counters are the engine's (the benchmark's own threads add only CPU time).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// `/proc/self/io`: bytes this process made the block layer read and write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceIo {
    /// `read_bytes`: reads that reached the device (page-cache misses).
    pub read: u64,
    /// `write_bytes`: bytes this process sent toward the device (counted when it dirties
    /// page-cache pages, or at submission for direct I/O).
    pub written: u64,
    /// `cancelled_write_bytes`: dirty bytes dropped before writeback because their file was
    /// truncated or deleted. Not subtracted from `written`: the cancellation may concern
    /// bytes written long before, in another benchmark.
    pub cancelled: u64,
}

impl DeviceIo {
    pub fn parse(s: &str) -> Option<DeviceIo> {
        let field = |name: &str| -> Option<u64> {
            s.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        Some(DeviceIo {
            read: field("read_bytes")?,
            written: field("write_bytes")?,
            cancelled: field("cancelled_write_bytes").unwrap_or(0),
        })
    }

    pub fn now() -> Option<DeviceIo> {
        Self::parse(&std::fs::read_to_string("/proc/self/io").ok()?)
    }

    pub fn since(self, before: DeviceIo) -> DeviceIo {
        DeviceIo {
            read: self.read.saturating_sub(before.read),
            written: self.written.saturating_sub(before.written),
            cancelled: self.cancelled.saturating_sub(before.cancelled),
        }
    }
}

/// Clock ticks per second of /proc/*/stat times (USER_HZ: 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// User + system CPU time of the whole process (all threads) from a `/proc/self/stat` line.
pub fn parse_cpu_time(stat: &str) -> Option<Duration> {
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) as f64 / USER_HZ))
}

pub fn cpu_time() -> Option<Duration> {
    parse_cpu_time(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// `VmHWM` (peak resident set) of `/proc/self/status`, in bytes.
pub fn parse_peak_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line["VmHWM:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

pub fn peak_rss() -> Option<u64> {
    parse_peak_rss(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// Resets the peak RSS to the current RSS (Linux 4.0+), so that the next [`peak_rss`]
/// measures one benchmark. False when the kernel refuses, in which case the peak is the
/// process's since it started.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes the files under `dir` occupy on the device (allocated blocks, as `du` counts them:
/// preallocated space included, holes of sparse files not); 0 when it does not exist.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for e in entries.flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            total += dir_bytes(&e.path());
        } else {
            total += m.blocks() * 512;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_self_io() {
        let s = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\n\
                 write_bytes: 81920\ncancelled_write_bytes: 8192\n";
        assert_eq!(
            DeviceIo::parse(s),
            Some(DeviceIo {
                read: 4096,
                written: 81920,
                cancelled: 8192,
            })
        );
        assert_eq!(DeviceIo::parse("rchar: 1\n"), None);
        let a = DeviceIo {
            read: 10,
            written: 100,
            cancelled: 7,
        };
        let b = DeviceIo {
            read: 15,
            written: 160,
            cancelled: 9,
        };
        assert_eq!(
            b.since(a),
            DeviceIo {
                read: 5,
                written: 60,
                cancelled: 2,
            }
        );
    }

    #[test]
    fn parses_cpu_time_even_with_spaces_in_the_name() {
        let stat = "1234 (my prog) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0 100 0 0";
        assert_eq!(parse_cpu_time(stat), Some(Duration::from_secs(3)));
        assert_eq!(parse_cpu_time("garbage"), None);
    }

    #[test]
    fn parses_peak_rss() {
        let s = "Name:\tstrata\nVmPeak:\t 100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_peak_rss(s), Some(2 << 20));
        assert_eq!(parse_peak_rss("Name: x\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn live_probes_work_on_linux() {
        assert!(cpu_time().is_some());
        assert!(peak_rss().unwrap() > 0);
        assert!(DeviceIo::now().is_some());
    }

    #[test]
    fn dir_bytes_sums_nested_files() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("a"), [1u8; 10_000]).unwrap();
        std::fs::create_dir(t.path().join("sub")).unwrap();
        std::fs::write(t.path().join("sub/b"), [1u8; 20_000]).unwrap();
        // A sparse file occupies (almost) nothing.
        let f = std::fs::File::create(t.path().join("sparse")).unwrap();
        f.set_len(1 << 30).unwrap();
        let n = dir_bytes(t.path());
        assert!((30_000..30_000 + 3 * 65_536).contains(&n), "{n}");
        assert_eq!(dir_bytes(&t.path().join("missing")), 0);
    }
}
