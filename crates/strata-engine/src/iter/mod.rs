//! Iterators over internal keys, and the user-facing [`DbIterator`].
//!
//! Every source (memtable, table, level, merged view) implements [`InternalIterator`]. Errors
//! are LevelDB-style: an iterator that hits an error becomes invalid and reports it from
//! [`InternalIterator::status`]; callers check `status()` whenever `valid()` turns false.

pub trait InternalIterator: Send {
    /// Whether the iterator is positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is `>= target` (internal order).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> crate::Result<()>;
}

pub mod db_iter;
pub mod level;
pub mod merging;
mod prefetch;

pub use db_iter::DbIterator;
pub use level::LevelIterator;
pub use merging::MergingIterator;

/// One iterator per L0 table and one per deeper non-empty level of `version`, newest first:
/// the tables' part of a merged view.
pub(crate) fn table_iters(
    tables: &std::sync::Arc<crate::table_cache::TableCache>,
    version: &crate::version::Version,
    params: crate::sst::ReadParams,
) -> crate::Result<Vec<Box<dyn InternalIterator>>> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for f in &version.levels[0] {
        children.push(tables.iter(f, params)?);
    }
    for files in version.levels.iter().skip(1) {
        if !files.is_empty() {
            children.push(Box::new(LevelIterator::new(
                files.clone(),
                tables.clone(),
                params,
            )));
        }
    }
    Ok(children)
}
