//! Keyspace notifications (Redis's notify.c): with `notify-keyspace-events` set, a command
//! that changes a key publishes the change through pub/sub, on `__keyspace@<db>__:<key>`
//! (the message is the event's name) and `__keyevent@<db>__:<event>` (the message is the
//! key), for the event classes the directive names.
//!
//! **API for commands.** After a command has written a key (its store write done, still
//! holding the key's stripe), it calls
//! `notify::keyspace_event(ctx, Class::List, "lpush", db, &key)` with the event name Redis
//! 7.0 uses at the same place (t_list.c, t_string.c, ...). The store itself emits `expired`
//! (lazy and active expiry) and `new` (a key created).
//!
//! **Cost when off.** [`Notifier::event`] first loads one atomic (the parsed flags) and
//! returns when the event's class is not enabled: with the directive empty (the default) a
//! write pays one relaxed load.
//!
//! **Order.** Events are published as the command runs, on the thread that runs it (a
//! shard worker, the connection's thread, an EXEC's or a script's thread), straight into
//! the subscribers' outboxes (`pubsub.rs`); the commands of an EXEC or a script run one
//! after the other, so their events reach a subscriber in the order they happened. A
//! subscriber gets the events of its own commands through its outbox too (Redis puts them
//! before the command's reply; here they may follow it).
//!
//! Layer: services (above store and types; below commands).

use crate::config::OutputLimit;
use crate::pubsub::{Kind, PubSub};
use bytes::BytesMut;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;

/// An event class (Redis's `NOTIFY_*`), the flag a command's event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Class {
    /// `g`: DEL, EXPIRE, RENAME, COPY, RESTORE, ... (type-independent commands).
    Generic = 1 << 2,
    /// `$`: string commands.
    String = 1 << 3,
    /// `l`: list commands.
    List = 1 << 4,
    /// `s`: set commands.
    Set = 1 << 5,
    /// `h`: hash commands.
    Hash = 1 << 6,
    /// `z`: sorted set commands.
    ZSet = 1 << 7,
    /// `x`: a key deleted by expiry.
    Expired = 1 << 8,
    /// `e`: a key evicted for `maxmemory` (Strata does not evict: never sent).
    Evicted = 1 << 9,
    /// `t`: stream commands.
    Stream = 1 << 10,
    /// `m`: a read found no key (off under `A`, as in Redis).
    KeyMiss = 1 << 11,
    /// `d`: module key types (Strata has no modules: never sent).
    Module = 1 << 13,
    /// `n`: a key created (off under `A`, as in Redis).
    New = 1 << 14,
}

/// `A`: every class but key-miss and new (Redis's `NOTIFY_ALL`).
pub const ALL: u32 = Class::Generic as u32
    | Class::String as u32
    | Class::List as u32
    | Class::Set as u32
    | Class::Hash as u32
    | Class::ZSet as u32
    | Class::Expired as u32
    | Class::Evicted as u32
    | Class::Stream as u32
    | Class::Module as u32;

/// Redis's text for a value with another character.
pub const ERR_BAD_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses a `notify-keyspace-events` value (Redis's `keyspaceEventsStringToFlags`);
/// `None` if a character names no class.
pub fn parse_flags(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => ALL,
            b'g' => Class::Generic as u32,
            b'$' => Class::String as u32,
            b'l' => Class::List as u32,
            b's' => Class::Set as u32,
            b'h' => Class::Hash as u32,
            b'z' => Class::ZSet as u32,
            b'x' => Class::Expired as u32,
            b'e' => Class::Evicted as u32,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => Class::Stream as u32,
            b'm' => Class::KeyMiss as u32,
            b'd' => Class::Module as u32,
            b'n' => Class::New as u32,
            _ => return None,
        };
    }
    Some(flags)
}

/// The value CONFIG GET shows for `flags` (Redis's `keyspaceEventsFlagsToString`): `A`
/// for all of [`ALL`] (a set `n` is then not shown, as in Redis), else the class letters in
/// Redis's order; then `K`, `E`, `m`.
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (c, ch) in [
            (Class::Generic, 'g'),
            (Class::String, '$'),
            (Class::List, 'l'),
            (Class::Set, 's'),
            (Class::Hash, 'h'),
            (Class::ZSet, 'z'),
            (Class::Expired, 'x'),
            (Class::Evicted, 'e'),
            (Class::Stream, 't'),
            (Class::Module, 'd'),
            (Class::New, 'n'),
        ] {
            if flags & c as u32 != 0 {
                s.push(ch);
            }
        }
    }
    for (f, ch) in [
        (KEYSPACE, 'K'),
        (KEYEVENT, 'E'),
        (Class::KeyMiss as u32, 'm'),
    ] {
        if flags & f != 0 {
            s.push(ch);
        }
    }
    s
}

/// Normalizes a `notify-keyspace-events` value as CONFIG SET stores it: Redis's form,
/// with `n` after `A` when both are set (Redis keeps the flag though it does not show it:
/// [`shown`]).
pub fn normalize(value: &str) -> Result<String, String> {
    let flags = parse_flags(value.as_bytes()).ok_or_else(|| ERR_BAD_CLASS.to_string())?;
    let mut s = flags_to_string(flags);
    if flags & ALL == ALL && flags & Class::New as u32 != 0 {
        s.insert(1, 'n');
    }
    Ok(s)
}

/// What CONFIG GET shows for a stored value (Redis's `keyspaceEventsFlagsToString`).
pub fn shown(stored: &str) -> String {
    flags_to_string(parse_flags(stored.as_bytes()).unwrap_or(0))
}

/// The server's notification switch and the pub/sub it publishes to. Owned by the store
/// (which emits `expired` and `new` itself); the server attaches the pub/sub registry at
/// start and sets the flags from the configuration.
#[derive(Default)]
pub struct Notifier {
    /// Parsed `notify-keyspace-events` (0: off).
    flags: AtomicU32,
    pubsub: OnceLock<Arc<PubSub>>,
    /// The `pubsub` class of `client-output-buffer-limit`, as PUBLISH applies it.
    limit: Mutex<OutputLimit>,
    /// Events come with physical databases; channels name logical ones (SWAPDB).
    dbs: OnceLock<Arc<crate::dbmap::DbMap>>,
}

impl Notifier {
    /// Publishes through `pubsub` from now on.
    pub fn attach(&self, pubsub: Arc<PubSub>) {
        let _ = self.pubsub.set(pubsub);
    }

    /// Names databases through `dbs` from now on (set by the store at open).
    pub fn translate_with(&self, dbs: Arc<crate::dbmap::DbMap>) {
        let _ = self.dbs.set(dbs);
    }

    /// Takes the directive's value (already validated) and the subscribers' output limit.
    pub fn configure(&self, value: &str, limit: OutputLimit) {
        *self.limit.lock() = limit;
        self.flags.store(
            parse_flags(value.as_bytes()).unwrap_or(0),
            Ordering::Relaxed,
        );
    }

    /// Whether events of `class` are published (cheap: one atomic load).
    pub fn wants(&self, class: Class) -> bool {
        let f = self.flags.load(Ordering::Relaxed);
        f & class as u32 != 0 && f & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes `event` of `class` for `key` of database `db` (Redis's
    /// `notifyKeyspaceEvent`), if the configuration enables it.
    pub fn event(&self, class: Class, event: &str, db: u8, key: &[u8]) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & class as u32 == 0 {
            return;
        }
        let Some(pubsub) = self.pubsub.get() else {
            return;
        };
        let db = self.dbs.get().map_or(db, |m| m.logical(db));
        let limit = *self.limit.lock();
        // Nobody is the publisher: every copy goes to its subscriber's outbox.
        let mut own = BytesMut::new();
        if flags & KEYSPACE != 0 {
            let chan = keyspace_channel(db, key);
            pubsub.publish(
                Kind::Channel,
                &chan,
                event.as_bytes(),
                limit,
                u64::MAX,
                &mut own,
                false,
            );
        }
        if flags & KEYEVENT != 0 {
            let chan = format!("__keyevent@{db}__:{event}");
            pubsub.publish(
                Kind::Channel,
                chan.as_bytes(),
                key,
                limit,
                u64::MAX,
                &mut own,
                false,
            );
        }
    }
}

/// `__keyspace@<db>__:<key>`.
fn keyspace_channel(db: u8, key: &[u8]) -> Vec<u8> {
    let mut c = format!("__keyspace@{db}__:").into_bytes();
    c.extend_from_slice(key);
    c
}

/// A command's notification: `event` of `class` for `key` of database `db`, after the
/// command has written it (see the module comment).
pub fn keyspace_event(ctx: &crate::cmd::Ctx<'_>, class: Class, event: &str, db: u8, key: &[u8]) {
    ctx.shared.store.notify.event(class, event, db, key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_print_as_redis() {
        // Pairs read back from redis-server 7.0.15's CONFIG SET / CONFIG GET.
        assert_eq!(normalize("AKEn").unwrap(), "AnKE");
        assert_eq!(shown("AnKE"), "AKE");
        assert_ne!(parse_flags(b"AnKE").unwrap() & Class::New as u32, 0);
        for (set, get) in [
            ("KEA", "AKE"),
            ("Ex", "xE"),
            ("A", "A"),
            ("AKEmn", "AKEm"),
            ("g$lshzxetd", "A"),
            ("KEg$lshzxetdmn", "AKEm"),
            ("", ""),
            ("Kn", "nK"),
            ("El$", "$lE"),
            ("Kghm", "ghKm"),
        ] {
            assert_eq!(shown(&normalize(set).unwrap()), get, "{set}");
        }
        assert_eq!(normalize("KEq").unwrap_err(), ERR_BAD_CLASS);
        assert_eq!(parse_flags(b"a"), None);
        assert_eq!(parse_flags(b"A").unwrap() & Class::New as u32, 0);
        assert_eq!(parse_flags(b"A").unwrap() & Class::KeyMiss as u32, 0);
        assert_eq!(parse_flags(b"KE").unwrap(), KEYSPACE | KEYEVENT);
    }

    #[test]
    fn off_without_channel_kind_or_class() {
        let n = Notifier::default();
        n.configure("", OutputLimit::default());
        assert!(!n.wants(Class::Generic));
        n.configure("g", OutputLimit::default());
        assert!(!n.wants(Class::Generic), "no K nor E: nothing is published");
        n.configure("Kg", OutputLimit::default());
        assert!(n.wants(Class::Generic) && !n.wants(Class::List));
        // Without a pub/sub attached an event is dropped, not a panic.
        n.event(Class::Generic, "del", 0, b"k");
        assert_eq!(keyspace_channel(3, b"a:b"), b"__keyspace@3__:a:b");
    }
}
