//! Leveled compaction: `picker.rs` decides (pure), `job.rs` merges tables.
pub mod job;
pub mod picker;

pub use job::{JobEnv, JobOutput};
pub use picker::{Busy, CompactionPlan, Shape};
