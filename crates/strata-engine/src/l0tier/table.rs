//! Reads an L0 table written by [`super::L0TableWriter`], in place in a read-only mapping.
//!
//! Open checks the super block, the block offset table, the meta blocks and the index, and
//! keeps the decoded offsets and index in memory (the bitmaps are read from the mapping).
//! A lookup maps the key to a `u64` ([`crate::pgm::key_to_u64`]), lets the index find the
//! last checkpoint at or below it (reading only checkpoint keys, each after checking its
//! block), then decodes at most that group's 16 entries and the first of the next.
//! Specification: `docs/format/l0-tier.md`.

use super::format::{
    block_crc, get_pointer, le_u32, le_u64, pieces, SuperBlock, BLOCK_CRC_LEN, ENTRIES_PER_BLOCK,
    ENTRIES_PER_CHECKPOINT, ENTRIES_PER_META, META_BITMAP_LEN, META_BLOCK_LEN, POINTER_LEN,
    SUPER_LEN,
};
use super::iter::L0TableIter;
use super::L0ValueRef;
use crate::error::{Error, Result};
use crate::key::{
    compare_internal, parse_internal_key, seek_key_inline, user_key, SeqNo, ValueKind,
};
use crate::log::unmask_crc;
use crate::pgm::{key_to_u64, Pgm};
use crate::varint;
use memmap2::Mmap;
use std::cell::Cell;
use std::cmp::Ordering;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The version of a user key [`L0Table::get`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L0Entry<'a> {
    pub seq: SeqNo,
    /// `Delete` for a tombstone, `Pointer` when the value is a [`L0ValueRef::Pointer`].
    pub kind: ValueKind,
    pub value: L0ValueRef<'a>,
}

/// What [`L0Table::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L0VerifyStats {
    pub blocks: u64,
    pub entries: u64,
}

/// An open, mapped L0 table.
pub struct L0Table {
    map: Mmap,
    path: Arc<Path>,
    sb: SuperBlock,
    /// Offset of each entry block (its checksum), then the offset where the blocks end.
    block_bounds: Vec<u64>,
    /// User-key prefix shared by every checkpoint key.
    prefix: Vec<u8>,
    pgm: Pgm,
    /// Entry blocks reads have visited (statistics; shows the index at work).
    blocks_checked: AtomicU64,
    /// One bit per entry block: its checksum matched once. A block is checked the first time
    /// a read decodes it and trusted afterwards, as a block in the block cache is: checking
    /// 8 inline values of 4 KiB on every lookup cost more than the rest of the lookup (the
    /// Gaussian read benchmark ran 4.6x slower than with SSTables before this).
    verified: Box<[AtomicU64]>,
}

/// Where a decoded entry's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ValueLoc {
    /// `len` bytes at offset `off` of the mapping.
    Inline {
        off: usize,
        len: usize,
    },
    Pointer(crate::vlog::ValuePointer),
}

impl L0Table {
    /// Maps and opens the table at `path`, checking everything but the entry blocks (which
    /// every read checks as it decodes them).
    pub fn open(path: &Path) -> Result<Arc<L0Table>> {
        Self::open_with(path, false)
    }

    /// [`L0Table::open`]; with `populate`, every page of the mapping is faulted in at once
    /// (`MAP_POPULATE`) instead of at a read's first touch.
    pub fn open_with(path: &Path, populate: bool) -> Result<Arc<L0Table>> {
        let path: Arc<Path> = Arc::from(path);
        let file = File::open(&*path).map_err(|e| Error::io("open", &*path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", &*path, e))?
            .len();
        if len < SUPER_LEN as u64 {
            return Err(Error::corruption(
                &*path,
                0,
                format!("file of {len} bytes is shorter than a super block"),
            ));
        }
        let map = map_file(&file, &path, populate)?;
        let sb = SuperBlock::decode(&map, &path)?;
        let (block_bounds, prefix, pgm) = check_sections(&map, &sb, &path)?;
        Ok(Arc::new(L0Table {
            map,
            path,
            sb,
            block_bounds,
            prefix,
            pgm,
            blocks_checked: AtomicU64::new(0),
            verified: (0..pieces(sb.entries, ENTRIES_PER_BLOCK).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file number recorded by the writer.
    pub fn file_number(&self) -> u64 {
        self.sb.file_number
    }

    pub fn entries(&self) -> u64 {
        self.sb.entries
    }

    pub fn file_size(&self) -> u64 {
        self.sb.file_len
    }

    /// The inline threshold the writer used.
    pub fn inline_threshold(&self) -> usize {
        self.sb.inline_threshold as usize
    }

    /// Bytes of the index in memory.
    pub fn index_size_bytes(&self) -> usize {
        self.pgm.size_bytes() + self.block_bounds.len() * 8
    }

    /// Entry blocks reads have visited since open (a lookup visits those of the checkpoints
    /// its index search compares and those of the group it scans; each block's checksum is
    /// checked at its first visit).
    pub fn blocks_checked(&self) -> u64 {
        self.blocks_checked.load(AtomicOrdering::Relaxed)
    }

    /// The newest version of `user_key` with sequence `<= snapshot_seq` (a tombstone is
    /// returned as one, kind `Delete`); `None` if the table has none.
    pub fn get(&self, user_key: &[u8], snapshot_seq: SeqNo) -> Result<Option<L0Entry<'_>>> {
        let target = seek_key_inline(user_key, snapshot_seq);
        let Some((key, loc)) = self.first_at_or_after(&target)? else {
            return Ok(None);
        };
        let Some(p) = parse_internal_key(&key) else {
            return Err(self.corrupt(0, "unparsable internal key"));
        };
        if p.user_key != user_key {
            return Ok(None);
        }
        Ok(Some(L0Entry {
            seq: p.seq,
            kind: p.kind,
            value: self.value_ref(loc),
        }))
    }

    /// The first entry whose internal key is `>= target` (internal order): its key and where
    /// its value is.
    pub(super) fn first_at_or_after(&self, target: &[u8]) -> Result<Option<(Vec<u8>, ValueLoc)>> {
        let mut g = self.find_group(target)?;
        while g < self.groups() {
            let mut c = GroupCursor::new(self, g)?;
            while let Some(loc) = c.next()? {
                if compare_internal(&c.key, target) != Ordering::Less {
                    return Ok(Some((std::mem::take(&mut c.key), loc)));
                }
            }
            g += 1;
        }
        Ok(None)
    }

    /// The value at `loc` (from a decoded entry of this table).
    pub(super) fn value_ref(&self, loc: ValueLoc) -> L0ValueRef<'_> {
        match loc {
            ValueLoc::Inline { off, len } => L0ValueRef::Inline(&self.map[off..off + len]),
            ValueLoc::Pointer(p) => L0ValueRef::Pointer(p),
        }
    }

    /// A positioned-nowhere iterator over the table.
    pub fn iter(self: &Arc<Self>) -> L0TableIter {
        L0TableIter::new(Arc::clone(self))
    }

    /// Checks the checksum of every entry block not checked yet, so that reads find them all
    /// verified (no checksum, and with a populated mapping no page fault, on a read's path).
    pub fn check_blocks(&self) -> Result<()> {
        for b in 0..self.blocks() {
            self.checked_block(b)?;
        }
        Ok(())
    }

    /// Reads every entry block and checks each entry (kinds, checkpoint keys whole, keys
    /// strictly increasing, the index finding every checkpoint).
    pub fn verify(&self) -> Result<L0VerifyStats> {
        // Every block again, even those reads already checked.
        for w in self.verified.iter() {
            w.store(0, AtomicOrdering::Relaxed);
        }
        let mut prev: Vec<u8> = Vec::new();
        let mut stats = L0VerifyStats::default();
        for g in 0..self.groups() {
            let mut c = GroupCursor::new(self, g)?;
            let mut first = true;
            while c.next()?.is_some() {
                if stats.entries > 0 && compare_internal(&prev, &c.key) != Ordering::Less {
                    return Err(self.corrupt(c.pos as u64, "keys out of order"));
                }
                // A checkpoint's own key sorts first in its group: the lookup starts one
                // group earlier (or at 0) and moves on to it.
                if first && self.find_group(&c.key)? != g.saturating_sub(1) {
                    return Err(self.corrupt(c.pos as u64, "index misses a checkpoint"));
                }
                first = false;
                prev.clone_from(&c.key);
                stats.entries += 1;
            }
        }
        stats.blocks = self.blocks();
        if stats.entries != self.sb.entries {
            return Err(self.corrupt(24, "entry count differs from the super block's"));
        }
        Ok(stats)
    }

    pub(super) fn groups(&self) -> u64 {
        pieces(self.sb.entries, ENTRIES_PER_CHECKPOINT)
    }

    fn blocks(&self) -> u64 {
        pieces(self.sb.entries, ENTRIES_PER_BLOCK)
    }

    pub(super) fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(&*self.path, offset, reason)
    }

    /// The group whose entries may hold the first entry `>= target`: the last checkpoint
    /// whose key is below `target`, or 0. (If that group holds none, the answer is the first
    /// entry of the next group.)
    pub(super) fn find_group(&self, target: &[u8]) -> Result<u64> {
        if self.sb.entries == 0 {
            return Ok(0);
        }
        let uk = user_key(target);
        let x = if uk.starts_with(&self.prefix) {
            key_to_u64(uk, self.prefix.len())
        } else if uk < self.prefix.as_slice() {
            0
        } else {
            u64::MAX
        };
        let err = Cell::new(None);
        let first_ge = self
            .pgm
            .lower_bound_by(x, |c| match self.checkpoint_key(c as u64) {
                Ok(k) => compare_internal(k, target) == Ordering::Less,
                Err(e) => {
                    err.set(Some(e));
                    false
                }
            });
        if let Some(e) = err.take() {
            return Err(e);
        }
        Ok((first_ge as u64).saturating_sub(1))
    }

    /// The whole key of checkpoint `c`, borrowed from the mapping, after checking its block.
    fn checkpoint_key(&self, c: u64) -> Result<&[u8]> {
        let block = c * (ENTRIES_PER_CHECKPOINT / ENTRIES_PER_BLOCK);
        let (start, end) = self.checked_block(block)?;
        let mut b = &self.map[start..end];
        let shared = varint::get_u64(&mut b);
        match (shared, varint::get_len_prefixed(&mut b)) {
            (Some(0), Some(k)) => Ok(k),
            _ => Err(self.corrupt(start as u64, "checkpoint entry does not hold a whole key")),
        }
    }

    /// The entry bytes of block `i` (after its checksum), once the checksum matches.
    fn checked_block(&self, i: u64) -> Result<(usize, usize)> {
        self.blocks_checked.fetch_add(1, AtomicOrdering::Relaxed);
        let i = i as usize;
        let (start, end) = (
            self.block_bounds[i] as usize,
            self.block_bounds[i + 1] as usize,
        );
        let (word, bit) = (&self.verified[i / 64], 1u64 << (i % 64));
        if word.load(AtomicOrdering::Relaxed) & bit == 0 {
            let stored = le_u32(&self.map[start..start + BLOCK_CRC_LEN]);
            let body = &self.map[start + BLOCK_CRC_LEN..end];
            if stored != block_crc(body) {
                return Err(
                    self.corrupt(start as u64, format!("entry block {i} checksum mismatch"))
                );
            }
            word.fetch_or(bit, AtomicOrdering::Relaxed);
        }
        Ok((start + BLOCK_CRC_LEN, end))
    }

    /// Whether entry `i`'s value is inline (from the meta blocks checked at open).
    fn is_inline(&self, i: u64) -> bool {
        let m = (i / ENTRIES_PER_META) as usize;
        let j = (i % ENTRIES_PER_META) as usize;
        let off = self.sb.meta_offset as usize + m * META_BLOCK_LEN + j / 8;
        self.map[off] & (1 << (j % 8)) != 0
    }
}

/// Decodes the entries of one checkpoint group in order, checking each block's checksum as
/// it enters it. The current key is `key`.
pub(super) struct GroupCursor<'a> {
    t: &'a L0Table,
    /// Next entry to decode, and one past the group's last.
    next: u64,
    end: u64,
    pos: usize,
    block_end: usize,
    pub(super) key: Vec<u8>,
}

impl<'a> GroupCursor<'a> {
    pub(super) fn new(t: &'a L0Table, group: u64) -> Result<Self> {
        let first = group * ENTRIES_PER_CHECKPOINT;
        Ok(GroupCursor {
            t,
            next: first,
            end: (first + ENTRIES_PER_CHECKPOINT).min(t.sb.entries),
            pos: 0,
            block_end: 0,
            key: Vec::new(),
        })
    }

    /// Decodes the next entry of the group into `key`; `None` after the last.
    pub(super) fn next(&mut self) -> Result<Option<ValueLoc>> {
        let t = self.t;
        if self.next >= self.end {
            return Ok(None);
        }
        let i = self.next;
        if i.is_multiple_of(ENTRIES_PER_BLOCK) {
            (self.pos, self.block_end) = t.checked_block(i / ENTRIES_PER_BLOCK)?;
        }
        let bad = |pos: usize, why: &str| t.corrupt(pos as u64, format!("entry {i}: {why}"));
        let mut b = &t.map[self.pos..self.block_end];
        let before = b.len();
        let shared = varint::get_u64(&mut b).ok_or_else(|| bad(self.pos, "bad shared length"))?;
        let rest = varint::get_len_prefixed(&mut b).ok_or_else(|| bad(self.pos, "bad key"))?;
        if (shared > 0 && i.is_multiple_of(ENTRIES_PER_CHECKPOINT))
            || shared as usize > self.key.len()
        {
            return Err(bad(self.pos, "impossible shared key length"));
        }
        self.key.truncate(shared as usize);
        self.key.extend_from_slice(rest);
        let Some(parsed) = parse_internal_key(&self.key) else {
            return Err(bad(self.pos, "not an internal key"));
        };
        let inline = t.is_inline(i);
        if inline == (parsed.kind == ValueKind::Pointer) {
            return Err(bad(self.pos, "value kind and inline bit disagree"));
        }
        let loc = if inline {
            let v = varint::get_len_prefixed(&mut b).ok_or_else(|| bad(self.pos, "bad value"))?;
            if parsed.kind == ValueKind::Delete && !v.is_empty() {
                return Err(bad(self.pos, "tombstone with a value"));
            }
            let off = self.block_end - b.len() - v.len();
            ValueLoc::Inline { off, len: v.len() }
        } else {
            let (p, rest) = b
                .split_at_checked(POINTER_LEN)
                .ok_or_else(|| bad(self.pos, "truncated value pointer"))?;
            b = rest;
            ValueLoc::Pointer(get_pointer(p))
        };
        self.pos += before - b.len();
        self.next += 1;
        let block_done = self.next.is_multiple_of(ENTRIES_PER_BLOCK) || self.next == t.sb.entries;
        if block_done != (self.pos == self.block_end) {
            return Err(bad(
                self.pos,
                "entry block length disagrees with its entries",
            ));
        }
        Ok(Some(loc))
    }
}

/// Maps `file` read-only.
#[allow(unsafe_code)]
fn map_file(file: &File, path: &Path, populate: bool) -> Result<Mmap> {
    // SAFETY: a mapping is undefined behaviour if the file changes under it. L0 tables are
    // immutable once finished: the engine never writes, truncates or renames over a table
    // file after `finish`, and removes one only by unlinking, which leaves existing
    // mappings intact. Another process truncating the file would still fault (SIGBUS); that
    // is outside what the engine can guard, as for any mapped database file. The mapping is
    // private (copy-on-write) and this function holds it exclusively until `privatize` has
    // copied every page, so no other reference to its bytes exists while they are written.
    let mut o = memmap2::MmapOptions::new();
    if populate {
        o.populate();
    }
    let mut map = unsafe { o.map_copy(file) }.map_err(|e| Error::io("mmap", path, e))?;
    privatize(&mut map);
    map.make_read_only()
        .map_err(|e| Error::io("mprotect", path, e))
}

/// Gives every page of a private mapping its own copy (a write to a page of a private file
/// mapping copies it out of the page cache), before anything of the table is checked.
///
/// Why: a block is verified once and trusted afterwards (`L0Table::verified`), so the
/// bytes it was verified in must be the bytes later reads see. In a shared mapping they
/// are the page cache's: the kernel may drop a clean page and read it from the device
/// again, and a device that now returns other bytes (media corruption appearing after the
/// first read), or a write to the file, would be read unchecked. Private copies cannot
/// change: what was verified is what is returned, as with a block cache's copy. The
/// price: the table's pages are anonymous memory for the mapping's lifetime (bounded by
/// `l0_tier_bytes`; a table of pointers is small) and a copy per page at open.
fn privatize(map: &mut memmap2::MmapMut) {
    const PAGE: usize = 4096;
    for i in (0..map.len()).step_by(PAGE) {
        // `black_box` keeps the store: the compiler cannot see that it writes the same byte.
        map[i] = std::hint::black_box(map[i]);
    }
}

/// Checks the sections after the super block and decodes the block offsets and the index.
fn check_sections(map: &[u8], sb: &SuperBlock, path: &Path) -> Result<(Vec<u64>, Vec<u8>, Pgm)> {
    let corrupt = |offset: u64, reason: String| Error::corruption(path, offset, reason);
    let len = map.len() as u64;
    if sb.file_len != len {
        return Err(corrupt(
            56,
            format!("super block says {} bytes, the file has {len}", sb.file_len),
        ));
    }
    let nblocks = pieces(sb.entries, ENTRIES_PER_BLOCK);
    let nmeta = pieces(sb.entries, ENTRIES_PER_META);
    let meta_len = nmeta.checked_mul(META_BLOCK_LEN as u64);
    let table_len = nblocks.checked_mul(8).and_then(|n| n.checked_add(4));
    let in_order = SUPER_LEN as u64 <= sb.meta_offset
        && Some(sb.block_table_offset) == meta_len.and_then(|m| sb.meta_offset.checked_add(m))
        && Some(sb.index_offset) == table_len.and_then(|t| sb.block_table_offset.checked_add(t))
        && sb.index_offset < len;
    if !in_order {
        return Err(corrupt(
            24,
            format!(
                "sections do not fit {} entries in {len} bytes: {sb:?}",
                sb.entries
            ),
        ));
    }
    let check_crc = |body: &[u8], stored_at: usize, what: &str| {
        let stored = unmask_crc(le_u32(&map[stored_at..stored_at + 4]));
        let actual = crc32c::crc32c(body);
        if stored == actual {
            Ok(())
        } else {
            Err(corrupt(
                stored_at as u64,
                format!("{what} checksum mismatch: stored {stored:#x}, computed {actual:#x}"),
            ))
        }
    };
    // Block offset table: increasing, inside the entry-block region, room for a checksum.
    let (t0, t1) = (sb.block_table_offset as usize, sb.index_offset as usize);
    check_crc(&map[t0..t1 - 4], t1 - 4, "block offset table")?;
    let mut bounds: Vec<u64> = map[t0..t1 - 4].chunks_exact(8).map(le_u64).collect();
    bounds.push(sb.meta_offset);
    // The first block (or, with none, the meta blocks) starts right after the super block.
    let starts_right = bounds[0] == SUPER_LEN as u64;
    let min_block = BLOCK_CRC_LEN as u64 + 1;
    if !starts_right
        || bounds
            .windows(2)
            .any(|w| w[1] < w[0].saturating_add(min_block))
    {
        return Err(corrupt(
            t0 as u64,
            "entry block offsets out of order".into(),
        ));
    }
    // Meta blocks: checksums, and no inline bit past the last entry.
    for m in 0..nmeta as usize {
        let at = sb.meta_offset as usize + m * META_BLOCK_LEN;
        check_crc(
            &map[at..at + META_BITMAP_LEN],
            at + META_BITMAP_LEN,
            "meta block",
        )?;
    }
    let used_bits = sb.entries % ENTRIES_PER_META;
    if used_bits != 0 {
        let last = sb.meta_offset as usize + (nmeta as usize - 1) * META_BLOCK_LEN;
        let bits = &map[last..last + META_BITMAP_LEN];
        let (full, rem) = ((used_bits / 8) as usize, used_bits % 8);
        let stray = (rem != 0 && bits[full] >> rem != 0)
            || bits[full + usize::from(rem != 0)..].iter().any(|&b| b != 0);
        if stray {
            return Err(corrupt(
                last as u64,
                "inline bits set past the last entry".into(),
            ));
        }
    }
    // Index: prefix and PGM, checksummed.
    let (i0, i1) = (sb.index_offset as usize, map.len());
    if i1 - i0 < 4 {
        return Err(corrupt(i0 as u64, "index section too short".into()));
    }
    check_crc(&map[i0..i1 - 4], i1 - 4, "index")?;
    let mut b = &map[i0..i1 - 4];
    let prefix = varint::get_len_prefixed(&mut b)
        .ok_or_else(|| corrupt(i0 as u64, "bad index prefix".into()))?
        .to_vec();
    let pgm = Pgm::decode(b).ok_or_else(|| corrupt(i0 as u64, "malformed learned index".into()))?;
    if pgm.len() as u64 != pieces(sb.entries, ENTRIES_PER_CHECKPOINT) {
        return Err(corrupt(
            i0 as u64,
            format!(
                "index over {} checkpoints, table has {}",
                pgm.len(),
                sb.entries
            ),
        ));
    }
    Ok((bounds, prefix, pgm))
}
