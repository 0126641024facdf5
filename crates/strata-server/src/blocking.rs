//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP in `cmd/lists.rs`;
//! BZPOPMIN, BZPOPMAX, BZMPOP in `cmd/zblocking.rs`): `docs/design.md` §13.8.
//!
//! **Blocking.** A blocking command runs on its connection's thread (`exec::route`) under its
//! keys' stripes. Finding nothing to pop, it registers a [`Waiter`] for each of its keys, in
//! FIFO order per key, and leaves a [`Wait`] for its connection (`Ctx::blocked`): the
//! connection task awaits the wake-up asynchronously (`conn.rs`), beside its deadline, the
//! socket (a disconnect cancels the wait) and CLIENT KILL. No shard worker and no network
//! thread is held. Registering under the stripes means no push to the keys can fall between
//! the command's check and its registration.
//!
//! **Serving.** Every write through the store notes the keys it wrote that someone waits on
//! (`Tx::note_ready`, next to the modified-key hook, collected by the command's transaction). When the writing command ends, still
//! inside its execution — on a worker, inside the shard transaction, with the stripes of the
//! group's writers held; elsewhere, under the stripes of each key served —
//! [`around_command`] offers each ready key to its waiters in FIFO order: a waiter's
//! [`ServeFn`] pops for it within the same transaction (its writes join the group's one
//! engine write) and returns the reply. The reply is handed to the waiter once the write is
//! applied ([`Wakes::deliver`]: at the group's completion on a worker, at once elsewhere), so
//! `LPUSH k a` with a client in `BLPOP k 0` replies 1 and the list is then empty, for every
//! later command. The serve's own writes (BLMOVE's push) may make further keys ready; they
//! are served in the same loop.
//!
//! **Who may take a waiter.** A waiter's state (`Pending`: the reply channel and its serve
//! function) is behind its own mutex and is taken exactly once: by a serve that produced a
//! reply, by its connection (timeout, disconnect, kill) or by CLIENT UNBLOCK. A connection
//! whose deadline passes while a serve holds its waiter waits for that serve's outcome.
//! Lock order: stripes, then a waiter's state, then the registry map (and the store's
//! waited-key set). A serve off the workers takes the stripes of the keys it serves before
//! the waiter's state; a worker never waits for a stripe (BLMOVE's destination is taken
//! shared with a `try` in `Registry::serve_key`, else the element is handed off to the
//! woken connection, which pushes it under both stripes: [`FollowUp::run`]).
//!
//! Layer: services (above store and types; below commands).

use crate::error::CmdError;
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use crate::store::{OwnedKeyGuard, Store, Tx};
use bytes::BytesMut;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a waiter's serve function made of a ready key.
pub enum Attempt {
    /// It popped for the waiter: the waiter leaves the registry with this reply.
    Served(Served),
    /// The key holds nothing for any waiter (absent, empty, or of a type nobody pops):
    /// stop serving this key.
    Empty,
    /// The key holds something of another kind (a list for a sorted-set waiter): try the
    /// next waiter.
    Skip,
}

/// A served waiter's reply.
pub struct Served {
    pub reply: BytesMut,
    /// Work the woken connection does before replying (a BLMOVE's push to a destination
    /// the serve could not write); it returns the reply instead.
    pub then: Option<FollowUp>,
}

/// Work a woken connection does before replying, on keys of one database whose stripes
/// it holds meanwhile (taken by [`FollowUp::run`], not by the work).
pub struct FollowUp {
    db: u8,
    keys: Vec<Vec<u8>>,
    work: Box<dyn FnOnce(&Tx<'_>) -> BytesMut + Send>,
}

impl FollowUp {
    pub fn new(
        db: u8,
        keys: Vec<Vec<u8>>,
        work: impl FnOnce(&Tx<'_>) -> BytesMut + Send + 'static,
    ) -> FollowUp {
        FollowUp {
            db,
            keys,
            work: Box::new(work),
        }
    }

    /// Runs the work under its keys' stripes (on the woken connection's thread) and
    /// returns the reply; `tx` is the connection's front transaction.
    pub fn run(self, tx: &Tx<'_>) -> BytesMut {
        let db = self.db;
        let keys = self.keys.iter().map(|k| (db, &k[..]));
        let _g = tx.lock_for_command(keys, false);
        (self.work)(tx)
    }
}

/// "Try to serve me now": called with the writing command's transaction (the serve's
/// reads and writes join it), the database, the ready key, and whether the waiter's other
/// keys (BLMOVE's destination) may be written in this transaction: their stripes are held.
pub type ServeFn = Box<dyn FnMut(&Tx<'_>, u8, &[u8], bool) -> Result<Attempt, CmdError> + Send>;

/// What a blocked connection receives.
pub struct Woken {
    pub reply: BytesMut,
    pub then: Option<FollowUp>,
}

struct Pending {
    tx: oneshot::Sender<Woken>,
    serve: ServeFn,
}

/// One blocked client.
pub struct Waiter {
    client: u64,
    /// The physical database of its keys: SWAPDB moves it ([`Registry::swap_dbs`]), under
    /// the registry's lock.
    db: std::sync::atomic::AtomicU8,
    keys: Vec<Vec<u8>>,
    /// Keys a serve writes besides the ready one (BLMOVE's destination), locked with it.
    extra: Vec<Vec<u8>>,
    proto: Proto,
    state: Mutex<Option<Pending>>,
}

/// A blocked command, awaited by its connection.
pub struct Wait {
    waiter: Arc<Waiter>,
    pub rx: oneshot::Receiver<Woken>,
    /// `None`: forever.
    pub deadline: Option<Instant>,
}

impl Wait {
    pub fn proto(&self) -> Proto {
        self.waiter.proto
    }
}

/// The blocked clients of the server, per key in FIFO order and per client.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    queues: HashMap<(u8, Vec<u8>), VecDeque<Arc<Waiter>>>,
    clients: HashMap<u64, Arc<Waiter>>,
}

/// A served waiter's reply, handed over once the write is applied.
struct Wake {
    tx: oneshot::Sender<Woken>,
    proto: Proto,
    woken: Woken,
    guard: Option<OwnedKeyGuard>,
}

/// Served waiters whose replies wait for their write (a command's, in `Ctx::wakes`).
#[must_use]
#[derive(Default)]
pub struct Wakes(Vec<Wake>);

impl Wakes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s waiters after these.
    pub fn append(&mut self, mut other: Wakes) {
        self.0.append(&mut other.0);
    }

    /// Hands each waiter its reply (or, if the write failed, the failure).
    pub fn deliver(self, shared: &Shared, written: Result<(), &strata::Error>) {
        for w in self.0 {
            let woken = match written {
                Ok(()) => w.woken,
                Err(e) => Woken {
                    reply: crate::error::failed_reply(shared.store.db(), w.proto, e),
                    then: None,
                },
            };
            drop(w.guard);
            let _ = w.tx.send(woken);
        }
    }
}

/// Runs a command (`f`, through `tx`), then serves the clients blocked on the keys it
/// wrote through the same transaction, and, off the workers, hands them their replies. On
/// a worker it returns them, for the caller to hand over after the group's write.
pub fn around_command<R>(shared: &Shared, tx: &Tx<'_>, f: impl FnOnce() -> R) -> (R, Wakes) {
    tx.begin_ready();
    let r = f();
    let mut wakes = Wakes::default();
    loop {
        let ready = tx.take_ready();
        if ready.is_empty() {
            break;
        }
        for (db, key) in ready {
            shared.blocked.serve_key(tx, db, &key, &mut wakes);
        }
    }
    tx.end_ready();
    if !tx.on_worker() {
        std::mem::take(&mut wakes).deliver(shared, Ok(()));
    }
    (r, wakes)
}

impl Registry {
    /// Number of blocked clients (INFO `blocked_clients`).
    pub fn len(&self) -> usize {
        self.inner.lock().clients.len()
    }

    /// Blocks client `client` on `keys` of database `db` (called by the command, under its
    /// keys' stripes) and returns the [`Wait`] the command leaves for its connection
    /// (`Ctx::blocked`). `extra`: keys `serve` writes besides the ready key.
    #[allow(clippy::too_many_arguments)]
    pub fn block<K: AsRef<[u8]>>(
        &self,
        store: &Store,
        client: u64,
        proto: Proto,
        db: u8,
        keys: &[K],
        extra: &[K],
        timeout: Option<Duration>,
        serve: ServeFn,
    ) -> Wait {
        let (tx, rx) = oneshot::channel();
        let mut ks: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        for k in keys {
            if !ks.iter().any(|x| x[..] == *k.as_ref()) {
                ks.push(k.as_ref().to_vec());
            }
        }
        let waiter = Arc::new(Waiter {
            client,
            db: std::sync::atomic::AtomicU8::new(db),
            keys: ks,
            extra: extra.iter().map(|k| k.as_ref().to_vec()).collect(),
            proto,
            state: Mutex::new(Some(Pending { tx, serve })),
        });
        {
            let mut inner = self.inner.lock();
            for k in &waiter.keys {
                inner
                    .queues
                    .entry((db, k.clone()))
                    .or_default()
                    .push_back(waiter.clone());
                store.waited.add(db, k);
            }
            inner.clients.insert(client, waiter.clone());
        }
        let deadline = timeout.and_then(|d| Instant::now().checked_add(d));
        Wait {
            waiter,
            rx,
            deadline,
        }
    }

    /// Takes `w` out of the map (its state is already taken).
    fn remove(&self, store: &Store, w: &Arc<Waiter>) {
        let mut inner = self.inner.lock();
        let db = w.db.load(std::sync::atomic::Ordering::Relaxed);
        for k in &w.keys {
            let qk = (db, k.clone());
            if let Some(q) = inner.queues.get_mut(&qk) {
                let before = q.len();
                q.retain(|x| !Arc::ptr_eq(x, w));
                if q.len() != before {
                    store.waited.remove(db, k);
                }
                if q.is_empty() {
                    inner.queues.remove(&qk);
                }
            }
        }
        if inner
            .clients
            .get(&w.client)
            .is_some_and(|x| Arc::ptr_eq(x, w))
        {
            inner.clients.remove(&w.client);
        }
    }

    /// SWAPDB swapped the logical databases of physical databases `p` and `q` (under every
    /// stripe): each blocked client's keys now name the other physical database (its
    /// logical one did not change), and they are marked ready, so that a client blocked on
    /// a key that now exists is served when SWAPDB ends (Redis's `scanDatabaseForReadyKeys`
    /// of both databases).
    pub fn swap_dbs(&self, store: &Tx<'_>, p: u8, q: u8) {
        use std::sync::atomic::Ordering::Relaxed;
        let other = |db: u8| if db == p { q } else { p };
        let mut inner = self.inner.lock();
        let moved: Vec<(u8, Vec<u8>)> = inner
            .queues
            .keys()
            .filter(|(db, _)| *db == p || *db == q)
            .cloned()
            .collect();
        let mut queues = Vec::with_capacity(moved.len());
        for qk in moved {
            if let Some(queue) = inner.queues.remove(&qk) {
                for _ in &queue {
                    store.waited.remove(qk.0, &qk.1);
                }
                queues.push(((other(qk.0), qk.1), queue));
            }
        }
        for ((db, key), queue) in queues {
            for _ in &queue {
                store.waited.add(db, &key);
            }
            inner.queues.insert((db, key.clone()), queue);
            store.mark_ready(db, &key);
        }
        for w in inner.clients.values() {
            let db = w.db.load(Relaxed);
            if db == p || db == q {
                w.db.store(other(db), Relaxed);
            }
        }
    }

    /// Withdraws a wait (timeout, disconnect, kill, shutdown): true if it was still waiting;
    /// false if a serve took it (its reply is on the way, or the serve is running).
    pub fn cancel(&self, store: &Store, wait: &Wait) -> bool {
        let taken = wait.waiter.state.lock().take();
        if taken.is_some() {
            self.remove(store, &wait.waiter);
        }
        taken.is_some()
    }

    /// CLIENT UNBLOCK: wakes client `client` if it is blocked, with a timeout's reply or,
    /// with `error`, Redis's UNBLOCKED error. True if it was blocked.
    pub fn unblock(&self, store: &Store, client: u64, error: bool) -> bool {
        let Some(w) = self.inner.lock().clients.get(&client).cloned() else {
            return false;
        };
        let Some(p) = w.state.lock().take() else {
            return false;
        };
        self.remove(store, &w);
        let mut r = ReplyBuf::with_capacity(w.proto, 64);
        if error {
            r.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            r.null_array();
        }
        let _ = p.tx.send(Woken {
            reply: r.take(),
            then: None,
        });
        true
    }

    /// Offers ready key `key` to its waiters, first blocked first served, until one finds
    /// it empty.
    fn serve_key(&self, tx: &Tx<'_>, db: u8, key: &[u8], wakes: &mut Wakes) {
        let queue: Vec<Arc<Waiter>> = match self.inner.lock().queues.get(&(db, key.to_vec())) {
            Some(q) => q.iter().cloned().collect(),
            None => return,
        };
        let store = tx;
        let on_worker = tx.on_worker();
        for w in queue {
            // Off the workers, the stripes of what the serve writes come before the waiter's
            // state (see the lock order above); on a worker the ready key's are held for
            // the group, and the other keys' only if they live in the same shard and can be
            // taken shared without waiting (a worker never waits for a stripe).
            let keys = std::iter::once(key)
                .chain(w.extra.iter().map(|k| &k[..]))
                .map(|k| (db, k));
            let _g = tx.lock_for_command(keys, false);
            let mut owned = None;
            let extra_here = !on_worker || w.extra.is_empty() || {
                let shard = |k: &[u8]| store.db().shard_of(&crate::keys::meta_key(db, k));
                if w.extra.iter().all(|k| shard(k) == shard(key)) {
                    owned = store.try_lock_owned(db, &w.extra);
                }
                owned.is_some()
            };
            let mut st = w.state.lock();
            let Some(p) = st.as_mut() else { continue };
            let (woken, guard) = match (p.serve)(tx, db, key, extra_here) {
                Ok(Attempt::Empty) => break,
                Ok(Attempt::Skip) => continue,
                Ok(Attempt::Served(s)) => (
                    Woken {
                        reply: s.reply,
                        then: s.then,
                    },
                    owned,
                ),
                Err(e) => {
                    let mut r = ReplyBuf::with_capacity(w.proto, 64);
                    match e {
                        CmdError::Reply(m) => r.error_bytes(&m),
                        e => r.error(&e.message()),
                    }
                    (
                        Woken {
                            reply: r.take(),
                            then: None,
                        },
                        None,
                    )
                }
            };
            let Some(p) = st.take() else { continue };
            drop(st);
            self.remove(store, &w);
            wakes.0.push(Wake {
                tx: p.tx,
                proto: w.proto,
                woken,
                guard,
            });
        }
    }
}

/// Redis's `getTimeoutFromObjectOrReply` in seconds: a long double, times 1000, rounded
/// up to milliseconds; `None`: wait forever (0).
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, CmdError> {
    use crate::long_double::{parse, Parsed};
    const NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
    const NEGATIVE: &str = "ERR timeout is negative";
    let secs = match parse(arg).ok_or_else(|| CmdError::reply(NOT_FLOAT))? {
        // Redis converts ±inf to a long long, which gives LLONG_MIN: negative.
        Parsed::Infinite => return Err(CmdError::reply(NEGATIVE)),
        Parsed::Finite(ld) => ld
            .to_human()
            .parse::<f64>()
            .map_err(|_| CmdError::reply(NOT_FLOAT))?,
    };
    let ms = (secs * 1000.0).ceil();
    // As in Redis, a value out of the long long range converts to LLONG_MIN. (f64 rounds
    // values within a second of 2^63 ms to 2^63: accepted, as Redis accepts most of them.)
    if !(0.0..=i64::MAX as f64).contains(&ms) {
        return Err(CmdError::reply(NEGATIVE));
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &std::path::Path) -> Store {
        crate::store::tests::open_store(dir, 2)
    }

    fn never() -> ServeFn {
        Box::new(|_, _, _, _| Ok(Attempt::Empty))
    }

    #[test]
    fn a_waiter_leaves_once_by_unblock_or_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let reg = Registry::default();
        let mut w7 = reg.block(
            &s,
            7,
            Proto::Resp2,
            0,
            &[b"a", b"b", b"a"],
            &[],
            None,
            never(),
        );
        let w8 = reg.block(&s, 8, Proto::Resp3, 0, &[b"a"], &[], None, never());
        assert_eq!(reg.len(), 2);
        assert_eq!(reg.inner.lock().queues[&(0, b"a".to_vec())].len(), 2);
        assert!(s.waited.contains(0, b"a") && s.waited.contains(0, b"b"));
        // CLIENT UNBLOCK ERROR: the reply goes through the channel; the waiter is gone.
        assert!(reg.unblock(&s, 7, true));
        let woken = w7.rx.try_recv().unwrap();
        assert_eq!(
            &woken.reply[..],
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        );
        assert!(!reg.unblock(&s, 7, false), "only once");
        assert!(!reg.cancel(&s, &w7), "already taken");
        assert!(s.waited.contains(0, b"a") && !s.waited.contains(0, b"b"));
        // A timeout withdraws the other one.
        assert!(reg.cancel(&s, &w8));
        assert_eq!(reg.len(), 0);
        assert!(reg.inner.lock().queues.is_empty());
        assert!(!s.waited.contains(0, b"a"));
        assert!(!reg.unblock(&s, 8, false));
        s.into_db().close().unwrap();
    }

    #[test]
    fn timeouts_parse_as_redis_does() {
        let ms = |s: &str| parse_timeout(s.as_bytes()).map(|d| d.map(|d| d.as_millis()));
        assert_eq!(ms("0").unwrap(), None);
        assert_eq!(ms("-0").unwrap(), None);
        assert_eq!(ms("1").unwrap(), Some(1000));
        assert_eq!(ms("0.0001").unwrap(), Some(1), "rounded up");
        assert_eq!(ms("1.5").unwrap(), Some(1500));
        assert_eq!(ms("0x10").unwrap(), Some(16000));
        assert_eq!(ms("1e3").unwrap(), Some(1_000_000));
        assert_eq!(
            ms("9223372036854775").unwrap(),
            Some(9_223_372_036_854_775_808)
        );
        for (bad, msg) in [
            ("x", "ERR timeout is not a float or out of range"),
            (" 1", "ERR timeout is not a float or out of range"),
            ("nan", "ERR timeout is not a float or out of range"),
            ("", "ERR timeout is not a float or out of range"),
            ("-1", "ERR timeout is negative"),
            ("-0.001", "ERR timeout is negative"),
            ("inf", "ERR timeout is negative"),
            ("-inf", "ERR timeout is negative"),
            ("1e100", "ERR timeout is negative"),
            ("9223372036854775807", "ERR timeout is negative"),
        ] {
            assert_eq!(ms(bad).unwrap_err().message(), msg, "{bad:?}");
        }
    }
}
