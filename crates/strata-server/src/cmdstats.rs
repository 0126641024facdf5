//! Per-command and per-error counters: INFO commandstats (`cmdstat_<name>:calls=..,usec=..,
//! usec_per_call=..,rejected_calls=..,failed_calls=..`) and INFO errorstats
//! (`errorstat_<CODE>:count=..`), as Redis 7.0 prints them; CONFIG RESETSTAT clears them.
//!
//! A call is a command that ran; it failed if it replied an error. A rejected call never
//! ran: refused before (arity, authentication, MISCONF, not allowed in MULTI or in a RESP2
//! subscription). Unknown commands count only as errors. Error codes are the first word of
//! the error text; at most [`MAX_ERROR_CODES`] distinct ones are kept (Redis's limit), the
//! errors past it counted only in `total_error_replies`.
//!
//! Layer: services (above store and types; below commands).

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// Distinct error codes kept (Redis's `ERRORSTATS_LIMIT`).
const MAX_ERROR_CODES: usize = 128;

#[derive(Default, Clone, Copy)]
struct Entry {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
}

#[derive(Default)]
pub struct CommandStats {
    commands: Mutex<HashMap<String, Entry>>,
    errors: Mutex<BTreeMap<String, u64>>,
    total_errors: std::sync::atomic::AtomicU64,
}

impl CommandStats {
    /// A command `name` (`container|sub` for subcommands) ran for `usec` microseconds.
    pub fn call(&self, name: &str, usec: u64, failed: bool) {
        let mut m = self.commands.lock();
        // Looked up by `&str` first: only a command's first call allocates its name.
        let e = match m.get_mut(name) {
            Some(e) => e,
            None => m.entry(name.to_string()).or_default(),
        };
        e.calls += 1;
        e.usec += usec;
        e.failed += u64::from(failed);
    }

    /// A command `name` was refused before it ran.
    pub fn rejected(&self, name: &str) {
        self.commands
            .lock()
            .entry(name.to_string())
            .or_default()
            .rejected += 1;
    }

    /// `n` error replies were sent, with these codes (the first of them, if there were
    /// many).
    pub fn errors(&self, n: u32, codes: Vec<String>) {
        if n == 0 {
            return;
        }
        self.total_errors
            .fetch_add(u64::from(n), std::sync::atomic::Ordering::Relaxed);
        let mut m = self.errors.lock();
        for code in codes {
            if let Some(c) = m.get_mut(&code) {
                *c += 1;
            } else if m.len() < MAX_ERROR_CODES {
                m.insert(code, 1);
            }
        }
    }

    /// INFO stats' `total_error_replies`.
    pub fn total_errors(&self) -> u64 {
        self.total_errors.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn reset(&self) {
        self.commands.lock().clear();
        self.errors.lock().clear();
        self.total_errors
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// The commandstats lines (`cmdstat_get`, `calls=..`), by name.
    pub fn command_lines(&self) -> Vec<(String, String)> {
        let m = self.commands.lock();
        let mut names: Vec<&String> = m.keys().collect();
        names.sort();
        names
            .into_iter()
            .map(|name| {
                let e = m[name];
                let per_call = if e.calls == 0 {
                    0.0
                } else {
                    e.usec as f64 / e.calls as f64
                };
                let mut v = String::new();
                let _ = write!(
                    v,
                    "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                    e.calls, e.usec, e.rejected, e.failed
                );
                (format!("cmdstat_{name}"), v)
            })
            .collect()
    }

    /// The errorstats lines (`errorstat_ERR`, `count=..`), by code.
    pub fn error_lines(&self) -> Vec<(String, String)> {
        self.errors
            .lock()
            .iter()
            .map(|(code, n)| (format!("errorstat_{code}"), format!("count={n}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_lines() {
        let s = CommandStats::default();
        s.call("get", 10, false);
        s.call("get", 5, true);
        s.rejected("get");
        s.rejected("config|set");
        s.errors(2, vec!["ERR".into(), "WRONGTYPE".into()]);
        s.errors(1, vec!["ERR".into()]);
        assert_eq!(
            s.command_lines(),
            vec![
                (
                    "cmdstat_config|set".to_string(),
                    "calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0".to_string()
                ),
                (
                    "cmdstat_get".to_string(),
                    "calls=2,usec=15,usec_per_call=7.50,rejected_calls=1,failed_calls=1"
                        .to_string()
                ),
            ]
        );
        assert_eq!(
            s.error_lines(),
            vec![
                ("errorstat_ERR".to_string(), "count=2".to_string()),
                ("errorstat_WRONGTYPE".to_string(), "count=1".to_string()),
            ]
        );
        assert_eq!(s.total_errors(), 3);
        s.reset();
        assert!(s.command_lines().is_empty() && s.error_lines().is_empty());
    }
}
