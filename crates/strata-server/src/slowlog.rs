//! The slow log (Redis's slowlog.c): commands that ran longer than
//! `slowlog-log-slower-than` microseconds, newest first, at most `slowlog-max-len` of them,
//! with their arguments trimmed as Redis trims them.
//!
//! Layer: services (above store and types; below commands).

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};

/// Arguments kept per entry (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
pub const MAX_ARGC: usize = 32;
/// Bytes kept per argument (Redis's `SLOWLOG_ENTRY_MAX_STRING`).
pub const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time: u64,
    pub micros: u64,
    pub argv: Vec<Bytes>,
    pub addr: String,
    pub name: Bytes,
}

#[derive(Default)]
struct Inner {
    entries: VecDeque<Entry>,
    next_id: u64,
}

pub struct SlowLog {
    inner: Mutex<Inner>,
    /// `slowlog-log-slower-than` (negative: off), kept here so that the dispatcher reads
    /// it on every command without the configuration's lock.
    threshold_us: AtomicI64,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            inner: Mutex::default(),
            threshold_us: AtomicI64::new(crate::config::Config::default().slowlog_log_slower_than),
        }
    }
}

/// The arguments as an entry keeps them: at most 32, the last replaced by
/// "... (N more arguments)"; each at most 128 bytes followed by "... (N more bytes)".
pub fn trim_argv(argv: &[Bytes]) -> Vec<Bytes> {
    let keep = argv.len().min(MAX_ARGC);
    let mut out = Vec::with_capacity(keep);
    for (i, a) in argv.iter().take(keep).enumerate() {
        if keep == MAX_ARGC && i == MAX_ARGC - 1 && argv.len() > MAX_ARGC {
            let more = argv.len() - MAX_ARGC + 1;
            out.push(Bytes::from(format!("... ({more} more arguments)")));
        } else if a.len() > MAX_STRING {
            let mut s = a[..MAX_STRING].to_vec();
            s.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            out.push(Bytes::from(s));
        } else {
            out.push(a.clone());
        }
    }
    out
}

impl SlowLog {
    /// `slowlog-log-slower-than` in microseconds, as configured (set at start and by
    /// CONFIG SET).
    pub fn set_threshold(&self, micros: i64) {
        self.threshold_us.store(micros, Ordering::Relaxed);
    }

    /// Whether a command that ran `micros` microseconds is logged.
    pub fn logs(&self, micros: u64) -> bool {
        let t = self.threshold_us.load(Ordering::Relaxed);
        t >= 0 && micros >= t as u64
    }

    /// Logs a command (arguments untrimmed) and keeps at most `max_len` entries.
    pub fn push(&self, argv: &[Bytes], micros: u64, addr: String, name: Bytes, max_len: u64) {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let argv = trim_argv(argv);
        let mut g = self.inner.lock();
        let id = g.next_id;
        g.next_id += 1;
        g.entries.push_front(Entry {
            id,
            time,
            micros,
            argv,
            addr,
            name,
        });
        while g.entries.len() as u64 > max_len {
            g.entries.pop_back();
        }
    }

    /// The newest `count` entries (all with `None`).
    pub fn get(&self, count: Option<usize>) -> Vec<Entry> {
        let g = self.inner.lock();
        let n = count.unwrap_or(usize::MAX).min(g.entries.len());
        g.entries.iter().take(n).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    pub fn reset(&self) {
        self.inner.lock().entries.clear();
    }

    /// Drops the oldest entries beyond `max_len` (CONFIG SET slowlog-max-len).
    pub fn trim(&self, max_len: u64) {
        let mut g = self.inner.lock();
        while g.entries.len() as u64 > max_len {
            g.entries.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_as_redis() {
        let argv: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        let t = trim_argv(&argv);
        assert_eq!(t.len(), 32);
        assert_eq!(t[30], Bytes::from("30"));
        assert_eq!(t[31], Bytes::from("... (9 more arguments)"));
        let exactly: Vec<Bytes> = argv[..32].to_vec();
        assert_eq!(trim_argv(&exactly)[31], Bytes::from("31"));
        let long = vec![Bytes::from(vec![b'a'; 200])];
        let t = trim_argv(&long);
        assert_eq!(t[0].len(), 128 + "... (72 more bytes)".len());
        assert!(t[0].ends_with(b"a... (72 more bytes)"));
    }

    #[test]
    fn keeps_newest_up_to_max_len() {
        let s = SlowLog::default();
        for i in 0..5 {
            s.push(
                &[Bytes::from(format!("c{i}"))],
                1,
                "a".into(),
                Bytes::new(),
                3,
            );
        }
        let e = s.get(None);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].id, 4);
        assert_eq!(e[2].id, 2);
        assert_eq!(s.get(Some(1)).len(), 1);
        s.trim(1);
        assert_eq!(s.len(), 1);
        s.reset();
        assert_eq!(s.len(), 0);
    }
}
