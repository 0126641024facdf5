//! Sorted string tables: immutable files of internal keys in [`crate::key::compare_internal`]
//! order, with their values.
//!
//! A table is data blocks, a filter block, an index block and a fixed-size footer; the byte
//! layout is specified in `docs/format/sstable.md`. Writing: [`TableBuilder`]. Reading:
//! [`Table`] (point reads, the batched-read building blocks, [`TableIter`], [`Table::verify`]).
//! Uncompressed blocks are shared through [`crate::cache::BlockCache`].

mod block;
mod block_builder;
mod builder;
mod filter;
mod format;
mod index;
pub mod learned;
mod reader;
mod table_iter;

#[cfg(test)]
mod learned_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use block::{Block, BlockIter};
pub use block_builder::BlockBuilder;
pub use builder::{TableBuilder, TableOptions, TableSummary};
pub use format::{BlockHandle, BLOCK_TRAILER_LEN, FOOTER_LEN, FORMAT_VERSION, TABLE_MAGIC};
pub use reader::{ReadParams, Table, VerifyStats};
pub use table_iter::TableIter;
