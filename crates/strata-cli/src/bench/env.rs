//! What machine and build the numbers come from.

use std::path::Path;
use std::process::Command;

/// The loud notice printed when the binary is a debug build.
pub const DEBUG_WARNING: &str = "\
######################################################################
WARNING: strata was built WITHOUT optimizations (debug build).
WARNING: benchmark results are meaningless; run
WARNING:     cargo run --release -p strata-cli -- bench
######################################################################";

pub fn is_debug_build() -> bool {
    cfg!(debug_assertions)
}

pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// "MemTotal:  16318412 kB" → bytes.
pub fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(n * 1024),
        Some(_) => None,
    }
}

pub fn memory_total() -> Option<u64> {
    parse_meminfo_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The first "model name" of /proc/cpuinfo.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

pub fn cpu_model() -> Option<String> {
    parse_cpu_model(&std::fs::read_to_string("/proc/cpuinfo").ok()?)
}

pub fn kernel() -> Option<String> {
    let s = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The source's git commit, asked of git at run time in the directory the crate was built
/// from; "unknown" when that is not a git checkout any more (or git is missing).
pub fn git_commit() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    match run(&["rev-parse", "--short", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let s = "MemFree:  100 kB\nMemTotal:       16318412 kB\nBuffers: 1 kB\n";
        assert_eq!(parse_meminfo_total(s), Some(16318412 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo_total("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn cpuinfo() {
        let s = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n\
                 processor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(parse_cpu_model(s).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(parse_cpu_model("processor: 0\n"), None);
    }

    #[test]
    fn probes_do_not_fail() {
        assert!(cores() >= 1);
        assert!(!git_commit().is_empty());
        // /proc may be absent off Linux; only check the values are sane when present.
        if let Some(m) = memory_total() {
            assert!(m > 0);
        }
        if let Some(k) = kernel() {
            assert!(!k.contains('\n'));
        }
    }
}
