//! STUB: to be written (FaultFs).
use super::*;

/// Which operations a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    Read,
    Write,
    Sync,
    Rename,
    Any,
}
/// What a matching operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Eio,
    Enospc,
    ShortWrite,
}
/// An injection rule.
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub op: FaultOp,
    pub nth: u64,
    pub kind: FaultKind,
}
/// Wraps an `Fs` and injects faults.
pub struct FaultFs {}
