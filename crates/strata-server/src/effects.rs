//! Effects: what a write propagates to replicas and the replication log (Redis's
//! `alsoPropagate`, `rewriteClientCommandVector`, `preventCommandPropagation` and the
//! `server.dirty` test in `call()`, as Redis 7.0.15 does them): `docs/design.md` §13,
//! "Effects: what a write propagates".
//!
//! **The rule.** A command propagates what it *did*, not what it was asked: nothing if it
//! changed nothing (a `SET NX` that did not set, a `DEL` of a missing key), its own argv if
//! it changed something, a rewritten argv where replaying the original would not give the
//! same dataset (relative TTLs become absolute: `SET k v EX 10` -> `SET k v PXAT <ms>`;
//! random choices become explicit: `SPOP k` -> `SREM k m`; blocking pops become their
//! non-blocking form), and writes it made besides its own (a script's writes, XREADGROUP's
//! `XCLAIM`s, a lazily expired key's `DEL`).
//!
//! **Who says what.**
//! - The store counts its writes ([`note_write`], from every write path of `Store`) on the
//!   thread the command runs on; the dispatcher compares the count around the handler and
//!   calls [`Effects::dirty`] itself, so no handler can forget to. A handler that changes
//!   state outside the store (FUNCTION LOAD) calls `ctx.effects.dirty()`.
//! - A handler rewrites ([`Effects::rewrite`]), adds ([`Effects::also`]) or suppresses
//!   ([`Effects::prevent`]) through `ctx.effects`.
//! - The store notes keys it deletes because they expired when a command looked them up
//!   ([`note_expired`]); the dispatcher propagates them as `DEL k` (`UNLINK k` under
//!   `lazyfree-lazy-expire`) *before* the command's own effects, as Redis's
//!   `deleteExpiredKeyAndPropagate` does.
//! - Writes outside any command (active expiry) go to [`outside`].
//!
//! **One command's group.** The effects of a top-level command, including those of the
//! commands an EXEC or a script runs (each pushes its own when it ends) and the keys they
//! expire, make one group, handed to the server's [`Propagation`] sink when the command
//! ends: one entry alone, or wrapped in `MULTI` ... `EXEC` when there are more than one (Redis
//! 7.0's `propagatePendingCommands`: `SET` over an expired key propagates `MULTI`, `DEL k`,
//! `SET k v`, `EXEC`). Clients blocked on keys the command wrote are served after the
//! group is handed on; each served pop is a group of its own (`LPOP k`, `LMOVE ...`).
//!
//! **Order within a group.** A command's own argv comes first, then the entries added with
//! [`Effects::also`], in the order they were added. Redis appends `alsoPropagate`'s entries
//! while the command runs and its own argv when `call()` returns, but no Redis 7.0 command
//! does both (those that add entries prevent their own: SPOP with a count, XREADGROUP,
//! XCLAIM), so the order shows only where this server adds a deletion after its own
//! write (a SET whose PXAT is already past: Redis deletes that key at its next lookup).
//!
//! **Databases.** Every database number here is a *logical* one (what SELECT names), the
//! number a replica or the log must see; the dispatcher maps the store's physical numbers
//! back through the database map (SWAPDB, §13.19).
//!
//! Layer: store and types (the store counts its writes here; it reads only the
//! configuration below it).

use bytes::Bytes;
use parking_lot::RwLock;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// One command as it propagates: its name and arguments.
pub type Argv = Vec<Vec<u8>>;

/// A sink for propagated commands: `(logical database, argv)`, in propagation order.
pub type Sink = Box<dyn Fn(u8, Argv) + Send + Sync>;

thread_local! {
    /// Store writes made on this thread (Redis's `server.dirty`): the dispatcher compares
    /// it around a handler.
    static WRITES: Cell<u64> = const { Cell::new(0) };
    /// The deletions of keys the running command's lookups found expired: (logical
    /// database, `DEL k` or `UNLINK k`), in deletion order.
    static EXPIRED: RefCell<Vec<(u8, Argv)>> = const { RefCell::new(Vec::new()) };
    /// Commands running on this thread (nested: EXEC's, a script's): effects are collected
    /// only inside one.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The effects of the running top-level command and of the commands it ran (EXEC,
    /// scripts), in order (Redis's `server.also_propagate`).
    static PENDING: RefCell<Vec<(u8, Argv)>> = const { RefCell::new(Vec::new()) };
}

/// Notes that the store wrote for the command running on this thread (every write path
/// of `Store` calls it; lazy expiry's deletes do not: they are not the command's change).
pub(crate) fn note_write() {
    WRITES.with(|w| w.set(w.get().wrapping_add(1)));
}

/// Store writes made on this thread so far.
pub(crate) fn writes() -> u64 {
    WRITES.with(Cell::get)
}

/// A command running on this thread, for as long as the value lives ([`enter`]).
pub(crate) struct Scope(());

impl Drop for Scope {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Marks a command as running on this thread: the dispatcher's, around a command and the
/// serving of the clients it unblocks.
pub(crate) fn enter() -> Scope {
    DEPTH.with(|d| d.set(d.get() + 1));
    Scope(())
}

fn in_command() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Notes that a lookup deleted an expired key: `deletion` (its `DEL` or `UNLINK`) in
/// logical database `db`. Inside a command it propagates before the command's effects;
/// outside any (a blocked client's follow-up, a background reader) at once, through
/// [`outside`].
pub(crate) fn note_expired(db: u8, deletion: Argv) {
    if in_command() {
        EXPIRED.with(|e| e.borrow_mut().push((db, deletion)));
    } else {
        outside(db, deletion);
    }
}

/// The expired keys' deletions noted since the last call.
pub(crate) fn take_expired() -> Vec<(u8, Argv)> {
    EXPIRED.with(|e| std::mem::take(&mut *e.borrow_mut()))
}

/// Appends entries to the running top-level command's group (nothing outside a command).
pub(crate) fn push_pending(entries: impl IntoIterator<Item = (u8, Argv)>) {
    if in_command() {
        PENDING.with(|p| p.borrow_mut().extend(entries));
    }
}

/// Takes the running top-level command's group (emptying it).
pub(crate) fn take_pending() -> Vec<(u8, Argv)> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// What the running command propagates (one per command run: `Ctx::effects`).
#[derive(Default)]
pub struct Effects {
    dirty: bool,
    prevented: bool,
    rewritten: Option<Argv>,
    also: Vec<(u8, Argv)>,
}

impl Effects {
    /// The command changed the dataset (Redis's `server.dirty++`): without a call, a write
    /// command propagates nothing. The dispatcher calls it for every store write.
    pub fn dirty(&mut self) {
        self.dirty = true;
    }

    /// Propagates `argv` instead of the command as called (`rewriteClientCommandVector`),
    /// if the command is dirty.
    pub fn rewrite(&mut self, argv: Argv) {
        self.rewritten = Some(argv);
    }

    /// Propagates `argv` too, in logical database `db` (`alsoPropagate`), whether or not
    /// the command is dirty, after the command's own argv (see the module comment).
    pub fn also(&mut self, db: u8, argv: Argv) {
        self.also.push((db, argv));
    }

    /// Propagates nothing of the command itself (`preventCommandPropagation`); entries added
    /// with [`Effects::also`] still propagate.
    pub fn prevent(&mut self) {
        self.prevented = true;
    }

    /// What to propagate for a command called with `argv` in logical database `db`, in
    /// order: its own (rewritten) argv if it is dirty and not prevented, then the
    /// [`Effects::also`] entries. Empty when nothing changed. Resets `self`.
    pub fn take(&mut self, db: u8, argv: &[Bytes]) -> Vec<(u8, Argv)> {
        let me = std::mem::take(self);
        let mut out = Vec::with_capacity(me.also.len() + 1);
        if me.dirty && !me.prevented {
            let own = me
                .rewritten
                .unwrap_or_else(|| argv.iter().map(|a| a.to_vec()).collect());
            out.push((db, own));
        }
        out.extend(me.also);
        out
    }
}

/// Builds an argv from byte strings.
pub fn argv<I, A>(parts: I) -> Argv
where
    I: IntoIterator<Item = A>,
    A: AsRef<[u8]>,
{
    parts.into_iter().map(|p| p.as_ref().to_vec()).collect()
}

/// Wraps a command's group in `MULTI` ... `EXEC` when it has more than one entry (Redis
/// 7.0's `propagatePendingCommands`). `MULTI` takes the first entry's database, `EXEC` the
/// last one's, so a consumer switches databases only where the entries do.
pub fn wrap(group: Vec<(u8, Argv)>) -> Vec<(u8, Argv)> {
    if group.len() < 2 {
        return group;
    }
    let first = group[0].0;
    let last = group[group.len() - 1].0;
    let mut out = Vec::with_capacity(group.len() + 2);
    out.push((first, argv(["MULTI"])));
    out.extend(group);
    out.push((last, argv(["EXEC"])));
    out
}

/// Where a server's propagated commands go: a sink the master side installs (the
/// replication log), a recorder in tests; dropped until one is installed.
#[derive(Default)]
pub struct Propagation {
    sink: RwLock<Option<Sink>>,
    /// Whether `sink` is set: one atomic load per command while none is.
    installed: AtomicBool,
}

impl Propagation {
    /// Installs the sink every later command's effects go to.
    pub fn set_sink(&self, f: Sink) {
        *self.sink.write() = Some(f);
        self.installed.store(true, Ordering::Release);
    }

    /// Whether a sink is installed (nothing need be built for propagation otherwise).
    pub fn active(&self) -> bool {
        self.installed.load(Ordering::Acquire)
    }

    /// Hands a group on, in order.
    pub fn emit(&self, group: Vec<(u8, Argv)>) {
        if group.is_empty() {
            return;
        }
        if let Some(f) = self.sink.read().as_ref() {
            for (db, a) in group {
                f(db, a);
            }
        }
    }
}

static OUTSIDE: OnceLock<Sink> = OnceLock::new();

/// Installs the sink for writes that happen outside any command (active expiry): the
/// master side's, once per process; later calls are ignored.
pub fn set_outside_sink(f: Sink) {
    let _ = OUTSIDE.set(f);
}

/// Propagates `argv` in logical database `db`, written outside any command; a no-op until
/// a sink is installed. Called in the order the writes commit (under the key's stripe).
pub fn outside(db: u8, argv: Argv) {
    if let Some(f) = OUTSIDE.get() {
        f(db, argv);
    }
}

/// The command that propagates the deletion of an expired key (Redis's
/// `propagateDeletion`): `UNLINK` under `lazyfree-lazy-expire`, else `DEL`.
pub fn deletion(key: &[u8], unlink: bool) -> Argv {
    let name: &[u8] = if unlink { b"UNLINK" } else { b"DEL" };
    vec![name.to_vec(), key.to_vec()]
}

/// Whether the `lazyfree-lazy-*` directive `name` is on (it decides between `DEL` and
/// `UNLINK` where Redis propagates a deletion).
pub fn lazy(config: &crate::config::Config, name: &str) -> bool {
    config.tuning.get(name).is_some_and(|v| v == "yes")
}

/// Milliseconds as Redis prints a `long long` in a propagated argv.
pub fn ms_arg(ms: i64) -> Vec<u8> {
    ms.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    }

    #[test]
    fn a_clean_command_propagates_only_its_extra_entries() {
        let mut e = Effects::default();
        assert!(e.take(0, &b(&["SET", "k", "v", "NX"])).is_empty());
        e.also(3, argv(["DEL", "x"]));
        assert_eq!(e.take(0, &b(&["GET", "k"])), vec![(3, argv(["DEL", "x"]))]);
    }

    #[test]
    fn dirty_rewrite_prevent_and_reset() {
        let mut e = Effects::default();
        e.dirty();
        assert_eq!(e.take(1, &b(&["DEL", "k"])), vec![(1, argv(["DEL", "k"]))]);
        // Reset by take.
        assert!(e.take(1, &b(&["DEL", "k"])).is_empty());
        e.dirty();
        e.rewrite(argv(["SREM", "s", "m"]));
        assert_eq!(
            e.take(0, &b(&["SPOP", "s"])),
            vec![(0, argv(["SREM", "s", "m"]))]
        );
        e.dirty();
        e.rewrite(argv(["SET", "k", "v", "PXAT", "1000"]));
        e.also(0, argv(["DEL", "k"]));
        assert_eq!(
            e.take(0, &b(&["SET", "k", "v", "EXAT", "1"])),
            vec![
                (0, argv(["SET", "k", "v", "PXAT", "1000"])),
                (0, argv(["DEL", "k"]))
            ]
        );
        e.dirty();
        e.also(0, argv(["SREM", "s", "a"]));
        e.prevent();
        assert_eq!(
            e.take(0, &b(&["SPOP", "s", "1"])),
            vec![(0, argv(["SREM", "s", "a"]))]
        );
    }

    #[test]
    fn groups_of_more_than_one_are_wrapped() {
        let one = vec![(0, argv(["SET", "a", "1"]))];
        assert_eq!(wrap(one.clone()), one);
        let two = vec![(2, argv(["DEL", "a"])), (2, argv(["SET", "a", "2"]))];
        let w = wrap(two);
        assert_eq!(w.len(), 4);
        assert_eq!(w[0], (2, argv(["MULTI"])));
        assert_eq!(w[3], (2, argv(["EXEC"])));
        assert!(wrap(Vec::new()).is_empty());
    }

    #[test]
    fn the_store_write_count_is_per_thread() {
        let before = writes();
        note_write();
        assert_eq!(writes(), before + 1);
        let other = std::thread::spawn(writes).join().unwrap();
        assert_eq!(other, 0);
    }
}
