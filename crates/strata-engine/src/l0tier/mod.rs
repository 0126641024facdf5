//! The byte-addressable L0 tier's table format (the NVM seed, `003`): a flush writes a
//! compact table that readers map into memory and read in place, with no block cache, no
//! block copy and no deserialisation beyond undoing prefix compression; a PGM learned index
//! (`crate::pgm`) per table finds a key's checkpoint.
//!
//! A table is a super block, entry blocks of 8 entries (keys prefix-compressed, a whole key
//! every 16 entries: a checkpoint), meta blocks of per-entry inline bits, a table of entry
//! block offsets and the index over the checkpoint keys. Byte layout:
//! `docs/format/l0-tier.md`. Writing: [`L0TableWriter`]. Reading: [`L0Table`] (point reads,
//! [`L0Table::verify`]) and [`L0TableIter`], an [`crate::iter::InternalIterator`] in the
//! engine's internal-key order, so a table can stand in for an SSTable in L0.
//!
//! **Values.** An entry's value is stored inline or as a [`ValuePointer`] to where it
//! already sits in a log; the reader says which ([`L0ValueRef`]). A pointer entry's internal
//! key has kind [`ValueKind::Pointer`], as in an SSTable, so iterators that see only
//! `(key, value)` read the pointer's encoding ([`ValuePointer::encode`]) as its value, as
//! they do for SSTables. Keys are always inline: the table compares them on every lookup.
//!
//! **Checks.** Open verifies the super block, the block offset table, every meta block and
//! the index (all small); the first read that decodes an entry block (8 entries) verifies its
//! checksum (later reads trust the verified block, as the block cache does), so a flipped
//! byte anywhere is reported as [`crate::Error::Corruption`], never returned. [`L0Table::verify`] reads every block and checks order and kinds too.
//!
//! The engine uses the tier when `Options::l0_tier_dir` is set: [`TierDir`] holds the locked
//! directory and the mapped tables, flushes write here, the table cache and every read path
//! take either format (`docs/design.md` §2.9).

mod dir;
mod format;
mod iter;
mod table;
mod writer;

#[cfg(test)]
mod tests;

pub use dir::{list_tables, TierDir};
pub use format::{ENTRIES_PER_CHECKPOINT, FORMAT_VERSION, MAGIC, SUPER_LEN};
pub use iter::L0TableIter;
pub use table::{L0Entry, L0Table, L0VerifyStats};
pub use writer::{L0TableMeta, L0TableOptions, L0TableWriter};

use crate::key::ValueKind;
use crate::vlog::ValuePointer;

/// A value handed to [`L0TableWriter::add`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L0Value<'a> {
    /// The value's bytes, stored inline whatever their length (there is nowhere else to put
    /// them). For a [`ValueKind::Pointer`] key these are an encoded [`ValuePointer`] (an
    /// SSTable entry as it is), stored as the pointer; for a delete they must be empty.
    Inline(&'a [u8]),
    /// Only a pointer is known (the key's kind must be [`ValueKind::Pointer`]).
    Pointer(ValuePointer),
    /// The value's bytes and where they already sit in a log (a [`ValueKind::Value`] key):
    /// stored inline when shorter than [`L0TableOptions::inline_threshold_bytes`], otherwise
    /// as the pointer, and then the stored key's kind becomes [`ValueKind::Pointer`].
    Logged { bytes: &'a [u8], at: ValuePointer },
}

/// A value as the table stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L0ValueRef<'a> {
    /// Inline bytes, borrowed from the mapped file (empty for a delete).
    Inline(&'a [u8]),
    /// Where the value sits in a log.
    Pointer(ValuePointer),
}

/// The kind an entry is stored with, given its key's kind and its value (see [`L0Value`]),
/// and the stored value; `Err` names what is wrong with the combination.
fn stored_form(
    kind: ValueKind,
    value: L0Value<'_>,
    threshold: usize,
) -> Result<(ValueKind, L0ValueRef<'_>), &'static str> {
    match (kind, value) {
        (ValueKind::Delete, L0Value::Inline(b)) if b.is_empty() => {
            Ok((kind, L0ValueRef::Inline(b)))
        }
        (ValueKind::Delete, _) => Err("a delete has no value"),
        (ValueKind::Value, L0Value::Inline(b)) => Ok((kind, L0ValueRef::Inline(b))),
        (ValueKind::Value, L0Value::Logged { bytes, at }) => Ok(if bytes.len() < threshold {
            (kind, L0ValueRef::Inline(bytes))
        } else {
            (ValueKind::Pointer, L0ValueRef::Pointer(at))
        }),
        (ValueKind::Value, L0Value::Pointer(_)) => {
            Err("a pointer without bytes needs a pointer-kind key")
        }
        (ValueKind::Pointer, L0Value::Pointer(p)) => Ok((kind, L0ValueRef::Pointer(p))),
        (ValueKind::Pointer, L0Value::Inline(b)) => ValuePointer::decode(b)
            .map(|p| (kind, L0ValueRef::Pointer(p)))
            .ok_or("a pointer-kind key's value is not an encoded value pointer"),
        (ValueKind::Pointer, L0Value::Logged { .. }) => {
            Err("a pointer-kind key's value is already a pointer")
        }
    }
}
