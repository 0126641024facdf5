//! The memtable's entries ([`MemKey`]) and the arena their bytes live in ([`Arena`]): the
//! memtable's only `unsafe` code, in this one module, with a `// SAFETY:` comment on every
//! block.
//!
//! A key made by [`MemKey::write_entry`] points into its arena and must not outlive it. The
//! memtable keeps that: the skiplist's nodes, which hold the keys, live in the same arena,
//! and readers reach keys only through the memtable (nodes borrow the skiplist; iterators
//! hold the memtable's `Arc`). A search key made by
//! [`MemKey::scoped`] points at its caller's buffer and cannot leave the closure it is
//! handed to.
#![allow(unsafe_code)]

use crate::key::{self, compare_internal};
use std::cmp::Ordering;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};

/// Bytes of the user key kept inline in a skiplist node.
const INLINE_PREFIX: usize = 16;

/// An entry of the skiplist: its internal key and value, back to back in the memtable's
/// [`Arena`], ordered by [`compare_internal`] on the key. The bytes live in the arena, not in
/// an allocation of their own: an insert costs no `malloc` beyond the skiplist's node, and a
/// flushed memtable frees its entries' bytes a chunk at a time, not entry by entry (both
/// profiled: allocation 64 ns of a 1-thread put, the flush threads' frees 3.3% of an
/// 8-thread load). The first bytes of the user key are kept inline, in the node itself: most
/// comparisons of a search are decided there, without following the pointer (a second cache
/// miss per level on a large memtable; profiled as the largest cost of a server SET).
pub(super) struct MemKey {
    /// The user key's first [`INLINE_PREFIX`] bytes, zero-padded, as two big-endian words:
    /// comparing the words orders the prefixes as bytes would, in two integer comparisons
    /// instead of a call to `memcmp` (profiled: 9% of a 1-thread fillrandom).
    prefix: [u64; 2],
    /// Bytes at `data` that are the internal key; the value follows.
    key_len: u32,
    /// Bytes at `data`: the internal key, then the value.
    len: u32,
    /// In the arena of the memtable whose skiplist holds this key, or, for a search key, in
    /// the caller's buffer ([`MemKey::scoped`]).
    data: NonNull<u8>,
}

// SAFETY: the bytes a `MemKey` points at are written once, before the key exists, and never
// again, and they outlive every reference to the key (the module comment); sharing or
// sending a key shares immutable bytes.
unsafe impl Send for MemKey {}
unsafe impl Sync for MemKey {}

impl MemKey {
    /// The entry of `user_key` with internal-key trailer `trailer` (sequence and kind) and
    /// `value`, its bytes written into `arena` in one pass (no internal key built first). It
    /// must not outlive `arena` (the module comment).
    #[cfg(test)]
    pub(super) fn in_arena(arena: &Arena, user_key: &[u8], trailer: u64, value: &[u8]) -> MemKey {
        let data = arena.alloc_aligned(MemKey::entry_len(user_key, value));
        // SAFETY: `alloc_aligned` handed the entry's bytes at `data` to this call alone.
        unsafe { MemKey::write_entry(data, user_key, trailer, value) }
    }

    /// Bytes of the entry of `user_key` and `value`: the internal key, then the value.
    pub(super) fn entry_len(user_key: &[u8], value: &[u8]) -> usize {
        user_key.len() + key::TRAILER_LEN + value.len()
    }

    /// Writes the entry `user_key`/`trailer`/`value` at `data` in one pass (no internal key
    /// built first) and returns its key.
    ///
    /// # Safety
    /// `data` must point at [`MemKey::entry_len`] bytes that this call alone writes and that
    /// outlive every reference to the returned key (the module comment).
    pub(super) unsafe fn write_entry(
        data: NonNull<u8>,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> MemKey {
        let trailer = trailer.to_le_bytes();
        let parts = [user_key, &trailer[..], value];
        let len = MemKey::entry_len(user_key, value);
        let mut at = 0;
        for part in parts {
            // SAFETY: the caller gave `len` bytes at `data` to this call alone, and the
            // parts fill them exactly, in order; each source is a distinct live slice.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), data.as_ptr().add(at), part.len())
            };
            at += part.len();
        }
        MemKey {
            prefix: prefix_words(user_key),
            key_len: (user_key.len() + key::TRAILER_LEN) as u32,
            len: len as u32,
            data,
        }
    }

    /// A key with no bytes, for the skiplist's head, which is never compared.
    pub(super) fn empty() -> MemKey {
        MemKey {
            prefix: [0; 2],
            key_len: 0,
            len: 0,
            data: NonNull::dangling(),
        }
    }

    /// Runs `f` with a search key for `ikey` (no value) that points at `ikey` itself: no copy
    /// and no allocation. `f` gets the key by reference, `MemKey` is not `Clone`, and `R`
    /// cannot borrow from the key, so it cannot outlive `ikey`.
    pub(super) fn scoped<R>(ikey: &[u8], f: impl FnOnce(&MemKey) -> R) -> R {
        let k = MemKey {
            prefix: prefix_words(key::user_key(ikey)),
            key_len: ikey.len() as u32,
            len: ikey.len() as u32,
            data: NonNull::from(ikey).cast(),
        };
        f(&k)
    }

    /// The internal key, then the value.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `data` holds `len` initialized bytes that outlive every reference to `self`
        // (`in_arena`, `scoped`).
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len as usize) }
    }

    pub(super) fn ikey(&self) -> &[u8] {
        &self.bytes()[..self.key_len as usize]
    }

    pub(super) fn value(&self) -> &[u8] {
        &self.bytes()[self.key_len as usize..]
    }
}

/// The first [`INLINE_PREFIX`] bytes of `user`, zero-padded, as two big-endian words.
#[inline]
fn prefix_words(user: &[u8]) -> [u64; 2] {
    let n = user.len().min(INLINE_PREFIX);
    let mut bytes = [0u8; INLINE_PREFIX];
    bytes[..n].copy_from_slice(&user[..n]);
    let word = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    [word(0), word(8)]
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.ikey() == other.ikey()
    }
}

impl Eq for MemKey {}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // User keys order internal keys first. Where the zero-padded prefixes first differ,
        // either both keys have a byte there, which orders them, or one key has ended (its
        // padding is 0, the other's byte is not) and, being a prefix of the other, is the
        // smaller: the prefixes' order is the user keys' whenever they differ.
        match self.prefix.cmp(&other.prefix) {
            Ordering::Equal => compare_internal(self.ikey(), other.ikey()),
            o => o,
        }
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The memory a memtable's entries live in: chunks handed out by bumping an offset, freed
/// together when the memtable drops (RocksDB's and LevelDB's memtable arena). Writers
/// allocate concurrently: an atomic add on the current chunk's offset reserves a range for
/// one caller; a caller whose range does not fit installs a new chunk under the lock and
/// retries (the rest of the old chunk stays unused). Written by hand: the bump allocators on
/// crates.io (`bumpalo` and its kind) are single-threaded, and the memtable is the subject
/// of the project.
pub(super) struct Arena {
    /// Always a chunk in `chunks`.
    current: AtomicPtr<Chunk>,
    /// Every chunk, owned here until the arena drops; boxed so that a chunk stays put when
    /// the list grows (`current` points at it).
    #[allow(clippy::vec_box)]
    chunks: parking_lot::Mutex<Vec<Box<Chunk>>>,
    chunk_bytes: usize,
}

struct Chunk {
    base: NonNull<u8>,
    cap: usize,
    used: AtomicUsize,
}

impl Chunk {
    fn layout(cap: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(cap.max(1), 8).expect("chunk layout")
    }

    fn new(cap: usize) -> Box<Chunk> {
        let layout = Chunk::layout(cap);
        // SAFETY: the layout's size is nonzero.
        let base = unsafe { std::alloc::alloc(layout) };
        let Some(base) = NonNull::new(base) else {
            std::alloc::handle_alloc_error(layout)
        };
        Box::new(Chunk {
            base,
            cap,
            used: AtomicUsize::new(0),
        })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `Chunk::new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), Chunk::layout(self.cap)) }
    }
}

// SAFETY: a chunk's bytes are reached only through ranges `Arena::alloc` hands to one caller
// each (written once, then read-only); the arena's own state is atomics and a mutex.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena for a memtable of about `buffer_bytes`: chunks of a sixteenth of it, between
    /// 4 KiB and 1 MiB.
    pub(super) fn for_buffer(buffer_bytes: usize) -> Arena {
        let chunk_bytes = (buffer_bytes / 16).clamp(4 << 10, 1 << 20);
        let first = Chunk::new(chunk_bytes);
        Arena {
            current: AtomicPtr::new(&*first as *const Chunk as *mut Chunk),
            chunks: parking_lot::Mutex::new(vec![first]),
            chunk_bytes,
        }
    }

    /// `n` bytes for the caller alone, aligned to 8 (every allocation is rounded up to a
    /// multiple of 8, so that a skiplist node can start any of them), valid until the arena
    /// drops.
    pub(super) fn alloc_aligned(&self, n: usize) -> NonNull<u8> {
        let n = n.next_multiple_of(8);
        if n > self.chunk_bytes / 4 {
            // A large entry gets a chunk of its own rather than waste the current one's rest.
            let c = Chunk::new(n);
            let p = c.base;
            self.chunks.lock().push(c);
            return p;
        }
        loop {
            // SAFETY: `current` always points at a boxed chunk in `chunks`, and boxed chunks
            // stay where they are until the arena drops.
            let c = unsafe { &*self.current.load(AtomicOrdering::Acquire) };
            let off = c.used.fetch_add(n, AtomicOrdering::Relaxed);
            if off + n <= c.cap {
                // SAFETY: `off + n <= cap` is in bounds, and the add gave `off..off + n` to
                // this caller alone.
                return unsafe { c.base.add(off) };
            }
            let mut chunks = self.chunks.lock();
            if std::ptr::eq(self.current.load(AtomicOrdering::Acquire), c) {
                let next = Chunk::new(self.chunk_bytes);
                self.current.store(
                    &*next as *const Chunk as *mut Chunk,
                    AtomicOrdering::Release,
                );
                chunks.push(next);
            }
        }
    }

    /// Bytes of the chunks allocated.
    #[cfg(test)]
    pub(super) fn allocated_bytes(&self) -> usize {
        self.chunks.lock().iter().map(|c| c.cap).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_entries_keep_their_bytes_across_chunks() {
        let arena = Arena::for_buffer(64 << 10);
        let keys: Vec<Vec<MemKey>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u8)
                .map(|t| {
                    let arena = &arena;
                    s.spawn(move || {
                        (0..3000u32)
                            .map(|i| {
                                let trailer =
                                    key::pack_trailer(u64::from(i), key::ValueKind::Value);
                                // Some values larger than a quarter chunk: their own chunk.
                                let len = if i % 500 == 0 {
                                    2000
                                } else {
                                    (i % 40) as usize
                                };
                                let uk = format!("{t}-{i}");
                                MemKey::in_arena(arena, uk.as_bytes(), trailer, &vec![t; len])
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (t, ks) in keys.iter().enumerate() {
            for (i, k) in ks.iter().enumerate() {
                let p = key::parse_internal_key(k.ikey()).unwrap();
                assert_eq!(p.user_key, format!("{t}-{i}").as_bytes());
                assert_eq!(p.seq, i as u64);
                let len = if i % 500 == 0 { 2000 } else { i % 40 };
                assert_eq!(k.value(), &vec![t as u8; len][..]);
            }
        }
        assert!(arena.allocated_bytes() > 4 << 10);
    }
}
