//! Client-side caching (Redis 7.0's tracking.c): which clients may cache which keys, and
//! telling them when a key changes.
//!
//! **Modes.** A client in default mode (CLIENT TRACKING ON) is remembered for every key a
//! read-only command of its reads (the command's keys from its key specs); the first write
//! of such a key by anyone invalidates it for those clients, once, and forgets it (the
//! client reads it again to be remembered again). With OPTIN, only reads right after CLIENT
//! CACHING YES are remembered; with OPTOUT, all but those after CLIENT CACHING NO. A client
//! in BCAST mode is remembered for prefixes instead (none: the empty prefix) and told of
//! every written key starting with one of them. NOLOOP: a client is not told of its own
//! writes. FLUSHDB and FLUSHALL tell every tracking client with a null and empty the table.
//!
//! **Messages.** An invalidation goes to the client, or to the client it redirects to: as a
//! RESP3 push `invalidate [key]` if that client speaks RESP3, else as a pub/sub message on
//! `__redis__:invalidate` if it is subscribed to anything (Redis's `sendTrackingMessage`);
//! a RESP2 client without redirection gets nothing. A redirect to a client that has gone is
//! a broken redirect: the tracking client gets a `tracking-redir-broken` push (RESP3) and
//! shows the `broken_redirect` flag. Messages are appended to the receiving connection's
//! pub/sub mailbox (`pubsub.rs`): its subscriber, or the tracking client's own mailbox made
//! by CLIENT TRACKING; the connection writes them after the replies of the commands before.
//!
//! **Protocol.** One mutex guards the table (key → client ids), the prefix table (prefix →
//! BCAST clients) and each tracking client's state; a client's flags and redirect id are also
//! published in its `ClientInfo` (atomics), so that the dispatcher asks "does this client
//! track" without the lock. Writes reach [`Tracking::touch`] through the store's modified-key
//! hook (`Store::note_touched`, WATCH's), while the writer holds the key's stripe; it returns
//! at once, one atomic load, while no client tracks. The dispatcher remembers a read's keys
//! before the command runs, so a write racing with the read still invalidates it. The client
//! whose command runs on a thread is a thread-local set by the dispatcher ([`Current`]), as
//! Redis compares with `server.current_client` for NOLOOP: background expiry has none.
//!
//! **Bound.** The table holds at most `tracking-table-max-keys` keys (0: no bound); past it,
//! arbitrary keys are evicted, each invalidated for its clients, as Redis's
//! `trackingLimitUsedSlots` (which runs in its event loop; here after the read that grew the
//! table, and when the directive is lowered).

use crate::clients::ClientInfo;
use crate::config::OutputLimit;
use crate::pubsub::{PubSub, Subscriber};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Tracking is on (CLIENT LIST flag `t`).
pub const ON: u32 = 1 << 0;
/// BCAST mode (flag `B`).
pub const BCAST: u32 = 1 << 1;
pub const OPTIN: u32 = 1 << 2;
pub const OPTOUT: u32 = 1 << 3;
/// CLIENT CACHING was given for the next command (YES under OPTIN, NO under OPTOUT).
pub const CACHING: u32 = 1 << 4;
pub const NOLOOP: u32 = 1 << 5;
/// The redirect client went away (flag `R`).
pub const BROKEN_REDIR: u32 = 1 << 6;

/// The pub/sub channel RESP2 redirect targets receive invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

thread_local! {
    /// The client whose command runs on this thread (0: none), for NOLOOP.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// Per-key invalidations are off (a FLUSH, which tells every client with a null).
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// Keys written by the command running on this thread, each with its writer, for the
    /// BCAST clients ([`Current`]); `None`: send at once.
    static BATCH: RefCell<Option<Written>> = const { RefCell::new(None) };
}

/// Keys written, each with the client that wrote it (0: none).
type Written = Vec<(Vec<u8>, u64)>;

/// Marks client `id` as the one running a command on this thread until dropped; the
/// outermost one (a command, an EXEC, a script) also gathers the keys written for BCAST
/// clients and sends them as one message per prefix when dropped (Redis gathers them per
/// event-loop turn, `trackingBroadcastInvalidationMessages`).
pub struct Current<'a> {
    tracking: &'a Tracking,
    before: u64,
    outermost: bool,
}

impl<'a> Current<'a> {
    pub fn enter(tracking: &'a Tracking, id: u64) -> Current<'a> {
        let before = CURRENT.with(|c| c.replace(id));
        let outermost = BATCH.with(|b| {
            let mut b = b.borrow_mut();
            let open = b.is_none();
            if open {
                *b = Some(Vec::new());
            }
            open
        });
        Current {
            tracking,
            before,
            outermost,
        }
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.before));
        if self.outermost {
            let keys = BATCH.with(|b| b.borrow_mut().take()).unwrap_or_default();
            if !keys.is_empty() {
                self.tracking.broadcast(keys);
            }
        }
    }
}

/// Runs `f` (a flush) without per-key invalidations.
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let before = QUIET.with(|q| q.replace(true));
    let r = f();
    QUIET.with(|q| q.set(before));
    r
}

/// What CLIENT TRACKING ON asks for.
pub struct Enable {
    /// Client id to redirect to (0: none).
    pub redirect: u64,
    /// [`BCAST`], [`OPTIN`], [`OPTOUT`], [`NOLOOP`].
    pub options: u32,
    pub prefixes: Vec<Vec<u8>>,
}

/// The server's tracking state; owned by the store, whose modified-key hook feeds it.
#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on (INFO `tracking_clients`); 0: [`Tracking::touch`] returns.
    clients: AtomicUsize,
    /// `tracking-table-max-keys` (0: no bound).
    max_keys: AtomicUsize,
    pubsub: OnceLock<Arc<PubSub>>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Key → ids of the clients that may cache it (ids of clients that stopped tracking
    /// stay until the key is invalidated, as in Redis).
    table: HashMap<Vec<u8>, HashSet<u64>>,
    /// Entries of `table` over all keys (INFO `tracking_total_items`).
    items: usize,
    /// Prefix → BCAST clients (INFO `tracking_total_prefixes`).
    prefixes: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    clients: HashMap<u64, Client>,
    /// Clients some tracking client redirects to, and whether each is still connected.
    targets: HashMap<u64, bool>,
}

/// One tracking client.
struct Client {
    info: Arc<ClientInfo>,
    /// Its own mailbox (RESP3 pushes and broken-redirect notices).
    mailbox: Arc<Subscriber>,
    redirect: u64,
    /// BCAST prefixes, in byte order (TRACKINGINFO lists them so).
    prefixes: BTreeSet<Vec<u8>>,
}

/// What a message carries: keys, or a null (a flush).
#[derive(Clone, Copy)]
enum Payload<'a> {
    Keys(&'a [&'a [u8]]),
    Null,
}

impl Tracking {
    /// Finds redirect targets through `pubsub` (RESP2 targets must be subscribed).
    pub fn attach(&self, pubsub: Arc<PubSub>) {
        let _ = self.pubsub.set(pubsub);
    }

    /// Whether any client tracks (one atomic load).
    pub fn active(&self) -> bool {
        self.clients.load(Ordering::Acquire) > 0
    }

    /// Tracking clients (INFO `tracking_clients`).
    pub fn client_count(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Keys, items and prefixes (INFO `tracking_total_keys`, `_items`, `_prefixes`).
    pub fn totals(&self) -> (usize, usize, usize) {
        let g = self.inner.lock();
        (g.table.len(), g.items, g.prefixes.len())
    }

    /// Sets `tracking-table-max-keys` and evicts down to it.
    pub fn set_max_keys(&self, max: usize) {
        self.max_keys.store(max, Ordering::Relaxed);
        if self.active() {
            let mut g = self.inner.lock();
            self.evict(&mut g);
        }
    }

    /// The prefix-overlap error for `new` prefixes of client `id` (Redis's
    /// `checkPrefixCollisionsOrReply`), if any.
    pub fn prefix_collision(&self, id: u64, new: &[Vec<u8>]) -> Option<String> {
        let g = self.inner.lock();
        let held = g.clients.get(&id).map(|c| &c.prefixes);
        for (i, p) in new.iter().enumerate() {
            if let Some(old) = held.and_then(|h| h.iter().find(|o| overlap(o, p))) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a \
                     single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(old)
                ));
            }
            if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for \
                     a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(q)
                ));
            }
        }
        None
    }

    /// Turns tracking on for the client of `info` (options already validated; Redis's
    /// `enableTracking`); `mailbox` is its connection's.
    pub fn enable(&self, info: &Arc<ClientInfo>, mailbox: Arc<Subscriber>, e: Enable) {
        let id = info.id;
        let mut g = self.inner.lock();
        let was_on = info.tracking_flags() & ON != 0;
        let c = g.clients.entry(id).or_insert_with(|| Client {
            info: info.clone(),
            mailbox,
            redirect: 0,
            prefixes: BTreeSet::new(),
        });
        c.redirect = e.redirect;
        let mut added = Vec::new();
        if e.options & BCAST != 0 {
            let prefixes = if e.prefixes.is_empty() {
                vec![Vec::new()]
            } else {
                e.prefixes
            };
            for p in prefixes {
                if c.prefixes.insert(p.clone()) {
                    added.push(p);
                }
            }
        }
        for p in added {
            g.prefixes.entry(p).or_default().insert(id);
        }
        if e.redirect != 0 {
            g.targets.entry(e.redirect).or_insert(true);
        }
        // CACHING and BROKEN_REDIR are cleared, as Redis's enableTracking.
        let flags = ON | (e.options & (BCAST | OPTIN | OPTOUT | NOLOOP));
        info.set_tracking(flags, e.redirect);
        if !was_on {
            self.clients.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Turns tracking off for client `id` (Redis's `disableTracking`); its keys stay in
    /// the table until written.
    pub fn disable(&self, info: &ClientInfo) {
        if info.tracking_flags() & ON == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if let Some(c) = g.clients.remove(&info.id) {
            for p in &c.prefixes {
                if let Some(set) = g.prefixes.get_mut(p) {
                    set.remove(&info.id);
                    if set.is_empty() {
                        g.prefixes.remove(p);
                    }
                }
            }
        }
        info.set_tracking(0, 0);
        self.clients.fetch_sub(1, Ordering::AcqRel);
    }

    /// Client `info` disconnected: tracking off, and redirects to it broken.
    pub fn left(&self, info: &ClientInfo) {
        self.disable(info);
        if !self.active() {
            return;
        }
        if let Some(alive) = self.inner.lock().targets.get_mut(&info.id) {
            *alive = false;
        }
    }

    /// Client `id`'s BCAST prefixes in byte order (TRACKINGINFO).
    pub fn prefixes_of(&self, id: u64) -> Vec<Vec<u8>> {
        let g = self.inner.lock();
        g.clients
            .get(&id)
            .map(|c| c.prefixes.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Client `id` read `keys` (Redis's `trackingRememberKeys`), then the table is held to
    /// its bound.
    pub fn remember<'a>(&self, id: u64, keys: impl Iterator<Item = &'a [u8]>) {
        let mut g = self.inner.lock();
        let mut added = 0;
        for k in keys {
            let ids = match g.table.get_mut(k) {
                Some(ids) => ids,
                None => g.table.entry(k.to_vec()).or_default(),
            };
            if ids.insert(id) {
                added += 1;
            }
        }
        g.items += added;
        self.evict(&mut g);
    }

    /// Evicts keys past `tracking-table-max-keys`, invalidating each.
    fn evict(&self, g: &mut Inner) {
        let max = self.max_keys.load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        while g.table.len() > max {
            let Some(key) = g.table.keys().next().cloned() else {
                break;
            };
            // Not a command's write: nobody is the writer, NOLOOP does not apply.
            self.invalidate_key(g, &key, 0);
        }
    }

    /// `key` was modified (any database: tracking ignores databases, as Redis's): tells the
    /// clients that may cache it and the BCAST clients of its prefixes.
    pub fn touch(&self, key: &[u8]) {
        if !self.active() || QUIET.with(Cell::get) {
            return;
        }
        let current = CURRENT.with(Cell::get);
        let mut g = self.inner.lock();
        if !g.prefixes.is_empty() {
            let gathered = BATCH.with(|b| match b.borrow_mut().as_mut() {
                Some(v) => {
                    v.push((key.to_vec(), current));
                    true
                }
                None => false,
            });
            if !gathered {
                self.broadcast_locked(&g, &[(key.to_vec(), current)]);
            }
        }
        self.invalidate_key(&mut g, key, current);
    }

    /// Tells the BCAST clients of the keys written (each with its writer): per prefix, the
    /// matching keys in byte order, once each, without those a NOLOOP client wrote itself
    /// (the last writer of a key counts, as in Redis).
    fn broadcast(&self, keys: Written) {
        let g = self.inner.lock();
        self.broadcast_locked(&g, &keys);
    }

    fn broadcast_locked(&self, g: &Inner, keys: &[(Vec<u8>, u64)]) {
        let mut last: BTreeMap<&[u8], u64> = BTreeMap::new();
        for (k, w) in keys {
            last.insert(k, *w);
        }
        for (prefix, ids) in &g.prefixes {
            let matching: Vec<(&[u8], u64)> = last
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, w)| (*k, *w))
                .collect();
            if matching.is_empty() {
                continue;
            }
            for id in ids {
                let Some(c) = g.clients.get(id) else {
                    continue;
                };
                let noloop = c.info.tracking_flags() & NOLOOP != 0;
                let sent: Vec<&[u8]> = matching
                    .iter()
                    .filter(|(_, w)| !noloop || w != id)
                    .map(|(k, _)| *k)
                    .collect();
                if !sent.is_empty() {
                    self.send(g, c, Payload::Keys(&sent));
                }
            }
        }
    }

    /// Redis's `trackingInvalidateKey` for the table: tells `key`'s clients (but a NOLOOP
    /// `current`, and BCAST clients) and forgets the key.
    fn invalidate_key(&self, g: &mut Inner, key: &[u8], current: u64) {
        let Some(ids) = g.table.remove(key) else {
            return;
        };
        g.items -= ids.len();
        for id in ids {
            let Some(c) = g.clients.get(&id) else {
                continue;
            };
            let flags = c.info.tracking_flags();
            if flags & BCAST != 0 || (flags & NOLOOP != 0 && id == current) {
                continue;
            }
            self.send(g, c, Payload::Keys(&[key]));
        }
    }

    /// FLUSHDB / FLUSHALL (Redis's `trackingInvalidateKeysOnFlush`): every tracking client
    /// gets a null; the table is emptied.
    pub fn flushed(&self) {
        if !self.active() {
            return;
        }
        let mut g = self.inner.lock();
        for c in g.clients.values() {
            self.send(&g, c, Payload::Null);
        }
        g.table = HashMap::new();
        g.items = 0;
    }

    /// Redis's `sendTrackingMessage`: to `c`, or to the client it redirects to.
    fn send(&self, g: &Inner, c: &Client, payload: Payload<'_>) {
        let own_resp3 = c.info.published.lock().resp == 3;
        let limit = OutputLimit::default();
        if c.redirect != 0 {
            let alive = g.targets.get(&c.redirect).copied().unwrap_or(false);
            if !alive {
                c.info.add_tracking_flags(BROKEN_REDIR);
                if own_resp3 {
                    let mut body = b"2\r\n$21\r\ntracking-redir-broken\r\n".to_vec();
                    body.extend_from_slice(format!(":{}\r\n", c.redirect).as_bytes());
                    c.mailbox.deliver_as(b'>', &body, limit);
                }
                return;
            }
            // A subscribed target gets it through its subscriber (a RESP2 target must be
            // subscribed, as in Redis); a RESP3 target that tracks, through its mailbox.
            let sub = self.pubsub.get().and_then(|p| p.subscriber(c.redirect));
            match sub {
                Some(s) if s.is_resp3() => {
                    s.deliver_as(b'>', &push_body(payload, own_resp3), limit)
                }
                Some(s) => s.deliver_as(b'*', &message_body(payload, own_resp3), limit),
                None => {
                    if let Some(t) = g.clients.get(&c.redirect) {
                        if t.info.published.lock().resp == 3 {
                            t.mailbox
                                .deliver_as(b'>', &push_body(payload, own_resp3), limit);
                        }
                    }
                }
            }
            return;
        }
        if own_resp3 {
            c.mailbox
                .deliver_as(b'>', &push_body(payload, own_resp3), limit);
        }
    }

    /// Test view: the clients that may cache `key`.
    #[cfg(test)]
    fn ids_of(&self, key: &[u8]) -> Vec<u64> {
        let g = self.inner.lock();
        let mut v: Vec<u64> = g
            .table
            .get(key)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }
}

/// Whether one prefix is a prefix of the other (Redis's `stringCheckPrefix`).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The keys part: `*1 $key`, or the tracking client's null.
fn value(out: &mut Vec<u8>, payload: Payload<'_>, resp3: bool) {
    match payload {
        Payload::Keys(keys) => {
            out.extend_from_slice(format!("*{}\r\n", keys.len()).as_bytes());
            for k in keys {
                out.extend_from_slice(format!("${}\r\n", k.len()).as_bytes());
                out.extend_from_slice(k);
                out.extend_from_slice(b"\r\n");
            }
        }
        Payload::Null if resp3 => out.extend_from_slice(b"_\r\n"),
        Payload::Null => out.extend_from_slice(b"$-1\r\n"),
    }
}

/// `invalidate <keys>` without the push's type byte.
fn push_body(payload: Payload<'_>, resp3: bool) -> Vec<u8> {
    let mut b = b"2\r\n$10\r\ninvalidate\r\n".to_vec();
    value(&mut b, payload, resp3);
    b
}

/// `message __redis__:invalidate <keys>` without the array's type byte.
fn message_body(payload: Payload<'_>, resp3: bool) -> Vec<u8> {
    let mut b = format!("3\r\n$7\r\nmessage\r\n${}\r\n", CHANNEL.len()).into_bytes();
    b.extend_from_slice(CHANNEL);
    b.extend_from_slice(b"\r\n");
    value(&mut b, payload, resp3);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::Kind;
    use bytes::Bytes;

    fn client(id: u64, resp: u8) -> (Arc<ClientInfo>, Arc<Subscriber>) {
        let info = Arc::new(ClientInfo::new(id, "a:1".into(), "a:2".into(), 1, false));
        info.published.lock().resp = resp;
        let sub = Subscriber::new(info.clone(), resp == 3);
        (info, sub)
    }

    fn on(t: &Tracking, c: &(Arc<ClientInfo>, Arc<Subscriber>), options: u32, redirect: u64) {
        t.enable(
            &c.0,
            c.1.clone(),
            Enable {
                redirect,
                options,
                prefixes: Vec::new(),
            },
        );
    }

    const INVALIDATE_K: &[u8] = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";

    #[test]
    fn a_write_invalidates_a_remembered_key_once() {
        let t = Tracking::default();
        t.touch(b"k"); // nobody tracks: nothing
        let a = client(1, 3);
        on(&t, &a, 0, 0);
        assert_eq!(t.client_count(), 1);
        t.remember(1, [&b"k"[..], b"j"].into_iter());
        t.remember(1, [&b"k"[..]].into_iter());
        assert_eq!(t.totals(), (2, 2, 0));
        t.touch(b"k");
        t.touch(b"k");
        assert_eq!(&a.1.take()[..], INVALIDATE_K);
        assert_eq!(t.totals(), (1, 1, 0));
        assert!(t.ids_of(b"k").is_empty());
        // Off: entries stay but nothing is sent; a write then drops them.
        t.disable(&a.0);
        assert!(!t.active());
        assert_eq!(a.0.tracking_flags(), 0);
    }

    #[test]
    fn noloop_skips_the_writer_and_flush_sends_null() {
        let t = Tracking::default();
        let a = client(1, 3);
        let b = client(2, 3);
        on(&t, &a, NOLOOP, 0);
        on(&t, &b, 0, 0);
        t.remember(1, [&b"k"[..]].into_iter());
        t.remember(2, [&b"k"[..]].into_iter());
        {
            let _w = Current::enter(&t, 1);
            t.touch(b"k");
        }
        assert!(a.1.take().is_empty());
        assert_eq!(&b.1.take()[..], INVALIDATE_K);
        t.remember(1, [&b"x"[..]].into_iter());
        quietly(|| t.touch(b"x"));
        t.flushed();
        assert_eq!(&a.1.take()[..], b">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(t.totals().0, 0);
    }

    #[test]
    fn bcast_prefixes_and_overlaps() {
        let t = Tracking::default();
        let a = client(1, 3);
        t.enable(
            &a.0,
            a.1.clone(),
            Enable {
                redirect: 0,
                options: BCAST,
                prefixes: vec![b"a:".to_vec(), b"b:".to_vec()],
            },
        );
        assert_eq!(t.totals().2, 2);
        let err = t.prefix_collision(1, &[b"a".to_vec()]).unwrap();
        assert!(
            err.contains("overlaps with an existing prefix 'a:'"),
            "{err}"
        );
        let err = t
            .prefix_collision(1, &[b"c".to_vec(), b"cd".to_vec()])
            .unwrap();
        assert!(err.contains("'c' overlaps with another provided prefix 'cd'"));
        assert!(t.prefix_collision(1, &[b"c:".to_vec()]).is_none());
        t.touch(b"a:1");
        t.touch(b"c:1");
        assert_eq!(
            &a.1.take()[..],
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\na:1\r\n"
        );
        assert_eq!(t.prefixes_of(1), vec![b"a:".to_vec(), b"b:".to_vec()]);
        t.disable(&a.0);
        assert_eq!(t.totals().2, 0);
    }

    #[test]
    fn redirect_to_a_resp2_subscriber_and_broken_redirect() {
        let ps = Arc::new(PubSub::default());
        let t = Tracking::default();
        t.attach(ps.clone());
        let target = client(2, 2);
        ps.subscribe(&target.1, Kind::Channel, &[Bytes::from_static(CHANNEL)]);
        let a = client(1, 3);
        on(&t, &a, 0, 2);
        t.remember(1, [&b"k"[..]].into_iter());
        t.touch(b"k");
        assert_eq!(
            &target.1.take()[..],
            &b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"[..]
        );
        assert!(a.1.take().is_empty());
        t.left(&target.0);
        t.remember(1, [&b"k"[..]].into_iter());
        t.touch(b"k");
        assert_eq!(
            &a.1.take()[..],
            b">2\r\n$21\r\ntracking-redir-broken\r\n:2\r\n"
        );
        assert_ne!(a.0.tracking_flags() & BROKEN_REDIR, 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let t = Tracking::default();
        let a = client(1, 3);
        on(&t, &a, 0, 0);
        t.set_max_keys(2);
        let keys: Vec<Vec<u8>> = (0..5).map(|i| format!("k{i}").into_bytes()).collect();
        t.remember(1, keys.iter().map(|k| &k[..]));
        assert_eq!(t.totals(), (2, 2, 0));
        let sent = a.1.take();
        assert_eq!(sent.windows(10).filter(|w| w == b"invalidate").count(), 3);
        t.set_max_keys(1);
        assert_eq!(t.totals().0, 1);
    }
}
