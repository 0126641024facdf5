//! The ACL log (Redis 7.0's `ACLLogEntry` list): recent denials, newest first, similar
//! entries within a minute merged into one with a count, bounded by `acllog-max-len`.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Instant;

/// Entries that differ only in time merge within this window (Redis's
/// `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const MERGE_WINDOW_MS: u128 = 60_000;

/// What was denied (ACL LOG `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where it was denied (ACL LOG `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command, key or channel denied (the command's name for `auth`).
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub at: Instant,
    /// The client's CLIENT LIST line.
    pub client_info: String,
}

impl Entry {
    fn similar(&self, o: &Entry) -> bool {
        self.reason == o.reason
            && self.context == o.context
            && self.object == o.object
            && self.username == o.username
            && o.at.saturating_duration_since(self.at).as_millis() < MERGE_WINDOW_MS
    }
}

#[derive(Default)]
pub struct Log {
    entries: Mutex<VecDeque<Entry>>,
}

impl Log {
    /// Records `e`, merged into a similar recent entry if there is one; keeps at most
    /// `max_len` entries.
    pub fn add(&self, e: Entry, max_len: usize) {
        let mut entries = self.entries.lock();
        if let Some(i) = entries.iter().position(|old| old.similar(&e)) {
            if let Some(mut old) = entries.remove(i) {
                old.count += 1;
                old.at = e.at;
                old.client_info = e.client_info;
                entries.push_front(old);
                return;
            }
        }
        entries.push_front(e);
        entries.truncate(max_len);
    }

    /// The newest `n` entries.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(n).cloned().collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// Applies a new `acllog-max-len`.
    pub fn trim(&self, max_len: usize) {
        self.entries.lock().truncate(max_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Key,
            context: Context::Toplevel,
            object: object.as_bytes().to_vec(),
            username: b"u".to_vec(),
            at: Instant::now(),
            client_info: String::new(),
        }
    }

    #[test]
    fn merges_and_bounds() {
        let log = Log::default();
        log.add(entry("a"), 2);
        log.add(entry("b"), 2);
        log.add(entry("a"), 2);
        let e = log.newest(10);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].object.as_slice(), e[0].count), (&b"a"[..], 2));
        log.add(entry("c"), 2);
        assert_eq!(log.newest(10).len(), 2);
        assert_eq!(log.newest(1)[0].object, b"c");
        log.reset();
        assert!(log.newest(10).is_empty());
    }
}
