//! Builds one block: prefix-compressed entries followed by the restart array.
//!
//! Each entry is `shared: varint | non_shared: varint | value_len: varint | key[shared..] |
//! value`, where `shared` is the length of the prefix it has in common with the previous key.
//! Every `restart_interval` entries the key is stored whole (`shared = 0`) and its offset is
//! recorded; the block ends with those offsets (u32 LE each) and their count (u32 LE).
//! Specification: `docs/format/sstable.md`; the reader is [`super::block::Block`].

use crate::varint;

/// Accumulates sorted entries into one block. Reused across blocks via [`BlockBuilder::reset`].
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    entries: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// A builder storing a whole key every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            entries: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. Keys must come in increasing order (checked by the table builder);
    /// the block, restart array included, must stay below 4 GiB.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "add after finish");
        let shared = if self.since_restart < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        };
        let non_shared = key.len() - shared;
        varint::put_u64(&mut self.buf, shared as u64);
        varint::put_u64(&mut self.buf, non_shared as u64);
        varint::put_u64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// The size [`BlockBuilder::finish`] would return now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends the restart array and returns the whole block. Call [`BlockBuilder::reset`]
    /// before adding again.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for r in &self.restarts {
                self.buf.extend_from_slice(&r.to_le_bytes());
            }
            self.buf
                .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
            self.finished = true;
        }
        &self.buf
    }

    /// Empties the builder, keeping its buffers.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.entries = 0;
        self.last_key.clear();
        self.finished = false;
    }

    /// Whether no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Entries added since the last reset.
    pub fn num_entries(&self) -> usize {
        self.entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_a_small_block() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apply", b"22");
        b.add(b"banana", b"");
        let est = b.estimated_size();
        let out = b.finish().to_vec();
        assert_eq!(out.len(), est);
        let mut expect = vec![0, 5, 1];
        expect.extend_from_slice(b"apple1");
        expect.extend_from_slice(&[4, 1, 2]);
        expect.extend_from_slice(b"y22");
        let second = expect.len() as u32;
        expect.extend_from_slice(&[0, 6, 0]);
        expect.extend_from_slice(b"banana");
        expect.extend_from_slice(&0u32.to_le_bytes());
        expect.extend_from_slice(&second.to_le_bytes());
        expect.extend_from_slice(&2u32.to_le_bytes());
        assert_eq!(out, expect);
        b.reset();
        assert!(b.is_empty());
        assert_eq!(b.finish(), &[0, 0, 0, 0, 1, 0, 0, 0]);
    }
}
