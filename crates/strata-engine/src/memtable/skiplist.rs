//! The memtable's ordered index: an insert-only concurrent skiplist whose nodes live in the
//! memtable's [`Arena`], each node followed by its entry's bytes (LevelDB's and RocksDB's
//! `InlineSkipList`).
//!
//! Written by hand rather than taken from crossbeam-skiplist, which it replaces: that list
//! supports removal, so every insert pins an epoch, counts references on the nodes it passes
//! and returns, and allocates its node with `malloc`, and a flushed memtable frees its nodes
//! one by one. A memtable never removes an entry and frees everything at once, so none of
//! that is needed (profiled under `redis-benchmark -P 16 -t set`: the crossbeam insert was
//! 22% of the server's CPU and the flush thread's node frees 2.6%). What remains of an
//! insert is the search itself: one node, key prefix included, per step.
//!
//! **Concurrency.** Writers insert concurrently; readers never wait. Nodes are never unlinked
//! or moved, so a pointer once read stays valid until the arena drops. A node is linked
//! bottom-up, one compare-and-swap per level, after its key, bytes and the successors it will
//! link to are written; a failed swap (another writer linked a node into the same gap) finds
//! the gap again from the same predecessor. A reader that reaches a node at level `l` finds
//! it linked at every level below `l` (linked earlier by the same thread, published by the
//! release of the swap the reader acquired), so descending from it is always sound.
//!
//! The module's `unsafe` blocks each carry a `// SAFETY:` comment.
#![allow(unsafe_code)]

use super::entry::{Arena, MemKey};
use std::cell::Cell;
use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Tallest tower: with a quarter of the nodes promoted to each next level, twelve levels
/// index about 4^12 = 16M entries before searches grow longer than logarithmic.
pub(super) const MAX_HEIGHT: usize = 12;

/// One entry: its key, then its tower of `height` successor pointers, then (in the same
/// arena allocation) the entry's bytes, which the key points at.
#[repr(C)]
pub(super) struct Node {
    key: MemKey,
    /// `height` pointers follow; declared as one so the struct has their alignment.
    tower: [AtomicPtr<Node>; 1],
}

impl Node {
    /// Bytes of a node of `height` levels, before the entry's bytes.
    fn size(height: usize) -> usize {
        std::mem::size_of::<Node>() + (height - 1) * std::mem::size_of::<AtomicPtr<Node>>()
    }

    /// The successor at `level`, which must be below this node's height.
    #[inline]
    fn next(&self, level: usize) -> *mut Node {
        // SAFETY: the caller reached this node at `level` or above, so its tower has a slot
        // for `level`; the tower lives in the node's arena allocation (`Node::size`).
        unsafe { (*self.tower.as_ptr().add(level)).load(AtomicOrdering::Acquire) }
    }

    #[inline]
    fn slot(&self, level: usize) -> &AtomicPtr<Node> {
        // SAFETY: as in `next`.
        unsafe { &*self.tower.as_ptr().add(level) }
    }

    pub(super) fn key(&self) -> &MemKey {
        &self.key
    }
}

/// The skiplist. It owns no memory: nodes are in the arena handed to [`SkipList::insert`],
/// which must outlive the list (the memtable declares the list before its arena).
pub(super) struct SkipList {
    /// A node of [`MAX_HEIGHT`] levels whose key is never compared.
    head: NonNull<Node>,
    /// Levels in use: searches start below it. Raised before a taller node is linked.
    height: AtomicUsize,
    len: AtomicUsize,
}

// SAFETY: nodes are written once before they are published and never again except through
// their atomic tower slots; the list's own state is atomics.
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

thread_local! {
    /// Each thread's generator of tower heights (xorshift64*): no shared state between
    /// writers. Seeded from the slot's own address, distinct per thread.
    static HEIGHT_RNG: Cell<u64> = const { Cell::new(0) };
}

fn random_height() -> usize {
    HEIGHT_RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            x = (c as *const Cell<u64> as u64) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        // One level, plus one per pair of low bits that are both zero (probability 1/4).
        let h = 1 + (r.trailing_zeros() / 2) as usize;
        h.min(MAX_HEIGHT)
    })
}

/// Where a key goes at each level: the last node before it and that node's successor.
/// Levels above those searched keep the head and no successor.
#[derive(Clone)]
struct Gap {
    prev: [*mut Node; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
}

impl Gap {
    fn new(head: *mut Node) -> Gap {
        Gap {
            prev: [head; MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
        }
    }
}

/// Asks the CPU to start loading `node`'s first cache line (its key's inline prefix and its
/// lowest successors); a hint only, a no-op where there is no instruction for it.
#[inline]
fn prefetch(node: *mut Node) {
    #[cfg(target_arch = "x86_64")]
    if !node.is_null() {
        // SAFETY: a prefetch reads nothing architecturally and cannot fault, whatever the
        // address; the pointer is a linked node's anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                node.cast::<i8>().cast_const(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

impl SkipList {
    pub(super) fn new(arena: &Arena) -> SkipList {
        let p = arena.alloc_aligned(Node::size(MAX_HEIGHT)).cast::<Node>();
        // SAFETY: `alloc_aligned` gave this call `Node::size(MAX_HEIGHT)` bytes, aligned for a
        // node; the head's key is an empty search key never compared, and its tower starts
        // empty.
        unsafe {
            ptr::addr_of_mut!((*p.as_ptr()).key).write(MemKey::empty());
            let tower = ptr::addr_of_mut!((*p.as_ptr()).tower).cast::<AtomicPtr<Node>>();
            for l in 0..MAX_HEIGHT {
                tower.add(l).write(AtomicPtr::new(ptr::null_mut()));
            }
        }
        SkipList {
            head: p,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    fn head(&self) -> &Node {
        // SAFETY: the head lives in the arena, which outlives the list.
        unsafe { self.head.as_ref() }
    }

    /// Inserts the entry `user_key`/`trailer`/`value` (its node and bytes written into
    /// `arena`, which must be the arena the list was made with). Keys are unique (sequence
    /// numbers are), so an insert never meets an equal key.
    pub(super) fn insert(&self, arena: &Arena, user_key: &[u8], trailer: u64, value: &[u8]) {
        self.insert_nodes(&[Self::new_node(arena, user_key, trailer, value)]);
    }

    /// Links nodes made by [`SkipList::new_node`] (none linked yet), as [`SkipList::insert`]
    /// does each. Several nodes' searches run side by
    /// side, one step of each in turn, and each step's next node is prefetched a turn before
    /// its key is compared: the cache misses of one search overlap those of the others
    /// instead of following each other (a search on a large memtable is a chain of about a
    /// dozen dependent misses). Then the entries are linked in order; an entry linked into a
    /// later one's gap makes the later one's swap fail and find its gap again.
    pub(super) fn insert_nodes(&self, nodes: &[(&Node, usize)]) {
        if let [(node, height)] = nodes {
            let top = self.raise_height(*height);
            let mut gap = Gap::new(self.head.as_ptr());
            let mut x = self.head();
            for level in (0..top).rev() {
                let (p, n) = Self::gap_at(x, &node.key, level);
                gap.prev[level] = p;
                gap.next[level] = n;
                // SAFETY: `p` is the head or a linked node, valid while the arena lives.
                x = unsafe { &*p };
            }
            self.link(node, *height, &mut gap);
            return;
        }
        let tallest = nodes.iter().map(|&(_, h)| h).max().unwrap_or(1);
        let top = self.raise_height(tallest);
        let head = self.head.as_ptr();
        let mut gaps = vec![Gap::new(head); nodes.len()];
        // Per search: the node it stands on, its level (`usize::MAX` once done), and the
        // successor read in the previous turn (prefetched since).
        let mut at: Vec<(*mut Node, usize)> = vec![(head, top - 1); nodes.len()];
        let mut ahead: Vec<*mut Node> = vec![ptr::null_mut(); nodes.len()];
        let mut active = nodes.len();
        for (i, a) in ahead.iter_mut().enumerate() {
            // SAFETY: the head is valid while the arena lives, and `top - 1` is below its
            // height.
            *a = unsafe { (*at[i].0).next(at[i].1) };
            prefetch(*a);
        }
        while active > 0 {
            for i in 0..nodes.len() {
                let (x, level) = at[i];
                if level == usize::MAX {
                    continue;
                }
                let n = ahead[i];
                // SAFETY: a non-null successor is a linked node, valid while the arena lives.
                let step = unsafe { n.as_ref() }
                    .is_some_and(|nn| nn.key.cmp(&nodes[i].0.key) == Ordering::Less);
                let (x, level) = if step {
                    (n, level)
                } else {
                    gaps[i].prev[level] = x;
                    gaps[i].next[level] = n;
                    if level == 0 {
                        at[i].1 = usize::MAX;
                        active -= 1;
                        continue;
                    }
                    (x, level - 1)
                };
                at[i] = (x, level);
                // SAFETY: `x` is the head or a linked node reached at `level` or above.
                ahead[i] = unsafe { (*x).next(level) };
                prefetch(ahead[i]);
            }
        }
        for (i, &(node, height)) in nodes.iter().enumerate() {
            self.link(node, height, &mut gaps[i]);
        }
    }

    /// A node of random height for the entry, written into `arena` (the list's), not linked
    /// yet: [`SkipList::insert_nodes`] links it.
    pub(super) fn new_node<'a>(
        arena: &'a Arena,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> (&'a Node, usize) {
        let height = random_height();
        let node_bytes = Node::size(height);
        let entry_len = MemKey::entry_len(user_key, value);
        let p = arena
            .alloc_aligned(node_bytes + entry_len)
            .cast::<Node>()
            .as_ptr();
        // SAFETY: `alloc_aligned` gave this call `node_bytes + entry_len` bytes aligned for a
        // node: the node in the first `node_bytes`, the entry's bytes after it. Nothing else
        // can reach the node until it is linked.
        let node = unsafe {
            let data = NonNull::new_unchecked(p.cast::<u8>().add(node_bytes));
            let key = MemKey::write_entry(data, user_key, trailer, value);
            ptr::addr_of_mut!((*p).key).write(key);
            let tower = ptr::addr_of_mut!((*p).tower).cast::<AtomicPtr<Node>>();
            for l in 0..height {
                tower.add(l).write(AtomicPtr::new(ptr::null_mut()));
            }
            &*p
        };
        (node, height)
    }

    /// Raises the levels in use to at least `height`; the levels in use after.
    fn raise_height(&self, height: usize) -> usize {
        let mut top = self.height.load(AtomicOrdering::Relaxed);
        while height > top {
            match self.height.compare_exchange_weak(
                top,
                height,
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => top = height,
                Err(now) => top = now,
            }
        }
        top
    }

    /// Links `node` into `gap` at levels `0..height`, bottom-up; a lost race finds the gap
    /// again from the same predecessor, which still precedes the key (nodes never move).
    fn link(&self, node: &Node, height: usize, gap: &mut Gap) {
        for level in 0..height {
            loop {
                node.slot(level)
                    .store(gap.next[level], AtomicOrdering::Relaxed);
                // SAFETY: `gap.prev[level]` is the head or a linked node at least
                // `level + 1` high (it was reached at `level`).
                let slot = unsafe { (*gap.prev[level]).slot(level) };
                match slot.compare_exchange(
                    gap.next[level],
                    node as *const Node as *mut Node,
                    AtomicOrdering::Release,
                    AtomicOrdering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(_) => {
                        // SAFETY: as above.
                        let from = unsafe { &*gap.prev[level] };
                        let (p, n) = Self::gap_at(from, &node.key, level);
                        gap.prev[level] = p;
                        gap.next[level] = n;
                    }
                }
            }
        }
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// From `x` (which precedes `key`), the last node before `key` at `level` and its
    /// successor there (null: none).
    #[inline]
    fn gap_at(mut x: &Node, key: &MemKey, level: usize) -> (*mut Node, *mut Node) {
        loop {
            let n = x.next(level);
            // SAFETY: a non-null successor is a linked node, valid while the arena lives.
            match unsafe { n.as_ref() } {
                Some(nn) if nn.key.cmp(key) == Ordering::Less => x = nn,
                _ => return (x as *const Node as *mut Node, n),
            }
        }
    }

    /// The first node whose key is at least `key` (`inclusive`) or above it.
    pub(super) fn seek(&self, key: &MemKey, inclusive: bool) -> Option<&Node> {
        let mut x = self.head();
        let mut level = self.height.load(AtomicOrdering::Relaxed);
        loop {
            level -= 1;
            let stop = loop {
                let n = x.next(level);
                // SAFETY: as in `gap_at`.
                match unsafe { n.as_ref() } {
                    Some(nn) => match nn.key.cmp(key) {
                        Ordering::Less => x = nn,
                        Ordering::Equal if !inclusive => x = nn,
                        _ => break Some(nn),
                    },
                    None => break None,
                }
            };
            if level == 0 {
                // The node compared, not `x`'s successor read again: a node linked after
                // `x` since may sort before `key` (a newer version of the same user key,
                // not visible to the reader).
                return stop;
            }
        }
    }

    /// The last node whose key is below `key` (`None`: below every key, so the last node).
    pub(super) fn seek_before(&self, key: Option<&MemKey>) -> Option<&Node> {
        let mut x = self.head();
        let mut level = self.height.load(AtomicOrdering::Relaxed);
        loop {
            level -= 1;
            loop {
                let n = x.next(level);
                // SAFETY: as in `gap_at`.
                match unsafe { n.as_ref() } {
                    Some(nn) if key.is_none_or(|k| nn.key.cmp(k) == Ordering::Less) => x = nn,
                    _ => break,
                }
            }
            if level == 0 {
                return (!ptr::eq(x, self.head())).then_some(x);
            }
        }
    }

    /// The node after `node` in key order.
    pub(super) fn next_of<'a>(&'a self, node: &'a Node) -> Option<&'a Node> {
        // SAFETY: as in `gap_at`.
        unsafe { node.next(0).as_ref() }
    }

    /// The first node.
    pub(super) fn first(&self) -> Option<&Node> {
        self.next_of(self.head())
    }
}

/// What owns a list and the arena its nodes live in (the memtable): while it lives, every
/// node of its list is valid.
pub(super) trait ListOwner: Send + Sync {
    fn list(&self) -> &SkipList;
}

/// The last node a forward walk visited, held together with its list's owner, so the node
/// (in the owner's arena) stays valid as long as this handle. The next walk goes on from its
/// successor instead of searching the list again: a scan over the memtable costs one search
/// per seek rather than one per chunk its iterator copies (profiled after a 500k load: the
/// re-searches were a tenth of a seek + 100 nexts).
pub(super) struct Resume<O: ListOwner> {
    owner: Arc<O>,
    last: NonNull<Node>,
}

// SAFETY: the held node is only read, through its immutable key and its atomic tower, as
// the list's own nodes are by any thread (see `SkipList`'s `Send`/`Sync`).
unsafe impl<O: ListOwner> Send for Resume<O> {}
unsafe impl<O: ListOwner> Sync for Resume<O> {}

/// Where a [`walk`] starts.
pub(super) enum WalkFrom<'k, O: ListOwner> {
    /// The first node.
    First,
    /// The first node at or above the key (`true`), or above it (`false`).
    Seek(&'k MemKey, bool),
    /// The node after where an earlier walk over the same owner's list stopped.
    After(Resume<O>),
}

/// Hands up to `n` nodes of `owner`'s list, from `from` on and in key order, to `visit`, and
/// returns where to go on (`None` when nothing was visited). Going on from a [`Resume`]
/// gives what a search for the first node above its node would give now (both read the
/// same successor pointer), so it sees the same concurrently linked nodes a search would.
pub(super) fn walk<O: ListOwner>(
    owner: &Arc<O>,
    from: WalkFrom<'_, O>,
    n: usize,
    mut visit: impl FnMut(&Node),
) -> Option<Resume<O>> {
    let list = owner.list();
    let mut node = match from {
        WalkFrom::First => list.first(),
        WalkFrom::Seek(k, inclusive) => list.seek(k, inclusive),
        WalkFrom::After(r) => {
            assert!(
                Arc::ptr_eq(&r.owner, owner),
                "a walk resumed over another list"
            );
            // SAFETY: only `walk` makes a `Resume`, from a node of `r.owner`'s list, which is
            // `owner`'s (checked above); `owner` keeps that list's arena, so the node, alive
            // for the borrow of `owner`.
            let last: &Node = unsafe { r.last.as_ref() };
            list.next_of(last)
        }
    };
    let mut last = None;
    for _ in 0..n {
        let Some(e) = node else { break };
        visit(e);
        last = Some(NonNull::from(e));
        node = list.next_of(e);
    }
    last.map(|last| Resume {
        owner: owner.clone(),
        last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{self, ValueKind};

    fn keys_in_order(list: &SkipList) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut n = list.first();
        while let Some(node) = n {
            out.push(node.key().ikey().to_vec());
            n = list.next_of(node);
        }
        out
    }

    #[test]
    fn heights_are_geometric_and_bounded() {
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height()] += 1;
        }
        assert_eq!(counts[0], 0);
        // About three quarters at height 1, three sixteenths at 2.
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!((16_000..22_000).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn concurrent_inserts_end_sorted_and_complete_while_readers_see_order() {
        let arena = Arena::for_buffer(1 << 20);
        let list = SkipList::new(&arena);
        let per_thread = 20_000u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (arena, list) = (&arena, &list);
                s.spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                    for i in 0..per_thread {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let user = format!("k{:06}", x % 50_000);
                        let seq = t * per_thread + i + 1;
                        let trailer = key::pack_trailer(seq, ValueKind::Value);
                        list.insert(arena, user.as_bytes(), trailer, &seq.to_le_bytes());
                    }
                });
            }
            // A reader walking during the inserts sees strictly ascending keys.
            let list = &list;
            s.spawn(move || {
                for _ in 0..20 {
                    let keys = keys_in_order(list);
                    for w in keys.windows(2) {
                        assert_eq!(key::compare_internal(&w[0], &w[1]), Ordering::Less);
                    }
                }
            });
        });
        let keys = keys_in_order(&list);
        assert_eq!(keys.len(), 4 * per_thread as usize);
        assert_eq!(list.len(), keys.len());
        for w in keys.windows(2) {
            assert_eq!(key::compare_internal(&w[0], &w[1]), Ordering::Less);
        }
        // Every entry's value is its own sequence number: the bytes beside each node are its.
        let mut n = list.first();
        while let Some(node) = n {
            let seq = key::parse_internal_key(node.key().ikey()).unwrap().seq;
            assert_eq!(node.key().value(), seq.to_le_bytes());
            n = list.next_of(node);
        }
    }

    #[test]
    fn concurrent_batches_with_shared_gaps_end_sorted_and_complete() {
        // Batches of 1-24 entries from 3 threads over a small key space, each batch holding
        // versions of one key and neighbours of each other: their gaps are shared, so links
        // inside a batch and across threads race for the same predecessors.
        let arena = Arena::for_buffer(1 << 20);
        let list = SkipList::new(&arena);
        let batches = 600u64;
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (arena, list) = (&arena, &list);
                s.spawn(move || {
                    let mut x = 0x2545_f491_4f6c_dd1du64.wrapping_mul(t + 3);
                    let mut seq = t << 40;
                    for b in 0..batches {
                        let n = 1 + (b % 24) as usize;
                        let mut nodes = Vec::new();
                        for _ in 0..n {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            seq += 1;
                            let user = format!("k{:04}", x % 3000);
                            let trailer = key::pack_trailer(seq, ValueKind::Value);
                            nodes.push(SkipList::new_node(arena, user.as_bytes(), trailer, b"v"));
                        }
                        list.insert_nodes(&nodes);
                    }
                });
            }
        });
        let keys = keys_in_order(&list);
        let per_thread: usize = (0..batches).map(|b| 1 + (b % 24) as usize).sum();
        assert_eq!(keys.len(), 3 * per_thread);
        assert_eq!(list.len(), keys.len());
        for w in keys.windows(2) {
            assert_eq!(key::compare_internal(&w[0], &w[1]), Ordering::Less);
        }
        // Every level, not just the lowest, is in order and holds only linked nodes.
        for level in 1..MAX_HEIGHT {
            let mut x = list.head();
            // SAFETY: a test walking linked nodes of a live list.
            while let Some(n) = unsafe { x.next(level).as_ref() } {
                if !std::ptr::eq(x, list.head()) {
                    assert_eq!(x.key.cmp(&n.key), Ordering::Less, "level {level}");
                }
                x = n;
            }
        }
    }

    #[test]
    fn seeks_find_the_neighbours_of_present_and_absent_keys() {
        let arena = Arena::for_buffer(64 << 10);
        let list = SkipList::new(&arena);
        for i in (0..1000u32).step_by(2) {
            let trailer = key::pack_trailer(u64::from(i) + 1, ValueKind::Value);
            list.insert(&arena, &i.to_be_bytes(), trailer, b"v");
        }
        let user = |n: &Node| key::user_key(n.key().ikey()).to_vec();
        for i in 0..1000u32 {
            let probe =
                key::make_internal_key(&i.to_be_bytes(), u64::from(i) + 1, ValueKind::Value);
            MemKey::scoped(&probe, |k| {
                let ge = list.seek(k, true).map(user);
                let gt = list.seek(k, false).map(user);
                let lt = list.seek_before(Some(k)).map(user);
                let even = i & !1;
                let next_even = (i + 1) & !1;
                let expect_ge = (next_even < 1000).then(|| next_even.to_be_bytes().to_vec());
                assert_eq!(
                    ge,
                    if i % 2 == 0 {
                        Some(i.to_be_bytes().to_vec())
                    } else {
                        expect_ge.clone()
                    }
                );
                let after = i / 2 * 2 + 2;
                assert_eq!(gt, (after < 1000).then(|| after.to_be_bytes().to_vec()));
                let before = if i % 2 == 0 {
                    i.checked_sub(2)
                } else {
                    Some(even)
                };
                assert_eq!(lt, before.map(|b| b.to_be_bytes().to_vec()));
            });
        }
        assert_eq!(
            list.seek_before(None).map(user),
            Some(998u32.to_be_bytes().to_vec())
        );
        let empty_arena = Arena::for_buffer(4 << 10);
        let empty = SkipList::new(&empty_arena);
        assert!(empty.first().is_none());
        assert!(empty.seek_before(None).is_none());
    }
}
