//! [`WriteBatch`]: writes applied atomically, across shards too.

/// One write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl Op {
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, _) | Op::Delete(k) => k,
        }
    }

    /// The value a put writes; `None` for a delete.
    pub(crate) fn value(&self) -> Option<&[u8]> {
        match self {
            Op::Put(_, v) => Some(v),
            Op::Delete(_) => None,
        }
    }
}

/// A group of puts and deletes applied atomically by [`crate::ShardedDb::write`]: after a
/// crash either all of it is visible or none, and a snapshot sees all of it or none, even when
/// its keys live in several shards. Later writes to the same key win.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<Op>,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push(Op::Put(key.to_vec(), value.to_vec()));
        self
    }
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.ops.push(Op::Delete(key.to_vec()));
        self
    }
    /// Number of writes.
    /// The batch's writes in order: `(key, Some(value))` for a put, `(key, None)` for a delete.
    pub fn ops(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.ops.iter().map(|op| match op {
            Op::Put(k, v) => (&k[..], Some(&v[..])),
            Op::Delete(k) => (&k[..], None),
        })
    }

    /// [`WriteBatch::ops`], taking the batch: its keys and values are moved out.
    pub fn into_ops(self) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
        self.ops.into_iter().map(|op| match op {
            Op::Put(k, v) => (k, Some(v)),
            Op::Delete(k) => (k, None),
        })
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    pub fn clear(&mut self) {
        self.ops.clear()
    }
}
