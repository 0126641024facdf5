//! MONITOR (Redis's `replicationFeedMonitors`, replication.c): a client in monitor mode
//! receives a line for every command any client runs, as redis-server 7.0 prints it:
//!
//! ```text
//! +1700000000.123456 [0 127.0.0.1:50000] "SET" "k" "v"
//! ```
//!
//! the time the command ended (seconds and microseconds), the database after it ran, the
//! client's address (`lua` for a script's commands, `unix:<path>` on the Unix socket), and
//! the arguments as sent, quoted as Redis's `sdscatrepr`. Commands flagged `admin` or
//! `skip_monitor` are not shown; AUTH's and HELLO's passwords (and user names) read
//! `(redacted)`, as 7.0's `redactClientCommandArgument`. The commands of an EXEC are shown
//! as they run, then EXEC; a script's commands, then EVAL. Rejected commands (unknown,
//! arity, queued in MULTI) are not shown.
//!
//! **Protocol.** The monitors are pub/sub mailboxes (`pubsub::Subscriber`: an outbox the
//! connection writes out, with the `normal` output limit) in a list behind a `RwLock`, with
//! an atomic count so that a command with no monitor pays one relaxed load.
//!
//! Layer: services (above store and types; below commands).

use crate::config::OutputLimit;
use crate::pubsub::Subscriber;
use bytes::Bytes;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The clients in monitor mode.
#[derive(Default)]
pub struct Monitors {
    count: AtomicUsize,
    list: RwLock<Vec<Arc<Subscriber>>>,
}

impl Monitors {
    /// Whether any client monitors (cheap: one atomic load).
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Whether client `id` monitors.
    pub fn contains(&self, id: u64) -> bool {
        self.any() && self.list.read().iter().any(|s| s.id == id)
    }

    /// `sub` enters monitor mode (again: no effect).
    pub fn add(&self, sub: Arc<Subscriber>) {
        let mut l = self.list.write();
        if !l.iter().any(|s| s.id == sub.id) {
            l.push(sub);
            self.count.store(l.len(), Ordering::Relaxed);
        }
    }

    /// Client `id` leaves (disconnected).
    pub fn remove(&self, id: u64) {
        if !self.any() {
            return;
        }
        let mut l = self.list.write();
        l.retain(|s| s.id != id);
        self.count.store(l.len(), Ordering::Relaxed);
    }

    /// Sends the line of a command (see the module comment) to every monitor.
    pub fn feed(&self, db: u8, origin: &str, argv: &[Bytes], limit: OutputLimit) {
        let line = line(now_micros(), db, origin, argv);
        for m in self.list.read().iter() {
            m.deliver_line(&line, limit);
        }
    }
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// A monitor line without its leading `+` (the mailbox adds it), CRLF included.
pub fn line(micros: u128, db: u8, origin: &str, argv: &[Bytes]) -> Vec<u8> {
    let mut out = format!(
        "{}.{:06} [{db} {origin}] ",
        micros / 1_000_000,
        micros % 1_000_000
    )
    .into_bytes();
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        repr(&mut out, a);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Redis's `sdscatrepr`: a quoted string with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`
/// escaped, other bytes that are not printable ASCII as `\xHH`.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// `argv` with the secrets of AUTH (every argument) and HELLO (AUTH's user name and
/// password) replaced by `(redacted)`.
pub fn redacted(name: &str, argv: &[Bytes]) -> Vec<Bytes> {
    let hidden = Bytes::from_static(b"(redacted)");
    let mut v = argv.to_vec();
    match name {
        "auth" => v.iter_mut().skip(1).for_each(|a| *a = hidden.clone()),
        "hello" => {
            let mut j = 2;
            while j < v.len() {
                if v[j].eq_ignore_ascii_case(b"auth") && j + 2 < v.len() {
                    v[j + 1] = hidden.clone();
                    v[j + 2] = hidden.clone();
                    j += 3;
                } else if v[j].eq_ignore_ascii_case(b"setname") {
                    j += 2;
                } else {
                    j += 1;
                }
            }
        }
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn lines_as_redis_prints_them() {
        let argv = vec![
            Bytes::from_static(b"SET"),
            Bytes::from_static(b"k\"\\"),
            Bytes::from_static(b"a\r\n\t\x07\x08\x00\xff z"),
        ];
        assert_eq!(
            line(1_700_000_000_012_345, 3, "127.0.0.1:5000", &argv),
            b"1700000000.012345 [3 127.0.0.1:5000] \"SET\" \"k\\\"\\\\\" \
              \"a\\r\\n\\t\\a\\b\\x00\\xff z\"\r\n"
                .to_vec()
        );
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(
            redacted("auth", &b(&["AUTH", "user", "pw"])),
            b(&["AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            redacted(
                "hello",
                &b(&["HELLO", "3", "SETNAME", "auth", "AUTH", "u", "p"])
            ),
            b(&[
                "HELLO",
                "3",
                "SETNAME",
                "auth",
                "AUTH",
                "(redacted)",
                "(redacted)"
            ])
        );
        assert_eq!(redacted("get", &b(&["GET", "k"])), b(&["GET", "k"]));
    }
}
