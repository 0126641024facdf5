//! Leveled compaction: `picker.rs` decides (pure), `job.rs` merges tables.
pub mod filter;
pub mod job;
pub mod picker;

pub use filter::{CompactionFilter, Decision, FilterContext, FilterReason, FilterValue};
pub use job::{JobEnv, JobOutput};
pub use picker::{Busy, CompactionPlan, Shape};
