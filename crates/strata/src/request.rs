//! What user threads put on a shard's queue.

use crate::batch::Op;
use crate::coord::Part;
use crate::engine::{Engine, EngineBatch};
use crate::exec::Exec;
use crate::reply::Reply;
use strata_engine::{Error, Result};

/// Values of a batched read, one per key.
pub(crate) type Values = Vec<Result<Option<Vec<u8>>>>;

/// A job run on the worker with its engine (or with the error that stopped the database).
pub(crate) type Job<E> = Box<dyn FnOnce(Result<&E>) + Send>;

/// The writes of one write request.
pub(crate) enum WriteOps {
    /// Key and value in one buffer (one allocation per put): `kv[..klen]` is the key.
    Put {
        kv: Vec<u8>,
        klen: usize,
    },
    Delete(Vec<u8>),
    /// A batch whose keys all live in this shard.
    Batch(Vec<Op>),
}

impl WriteOps {
    pub(crate) fn put(key: &[u8], value: &[u8]) -> WriteOps {
        let mut kv = Vec::with_capacity(key.len() + value.len());
        kv.extend_from_slice(key);
        kv.extend_from_slice(value);
        WriteOps::Put {
            kv,
            klen: key.len(),
        }
    }

    pub(crate) fn add_to<B: EngineBatch>(&self, b: &mut B) {
        match self {
            WriteOps::Put { kv, klen } => b.put(&kv[..*klen], &kv[*klen..]),
            WriteOps::Delete(k) => b.delete(k),
            WriteOps::Batch(ops) => {
                for op in ops {
                    match op {
                        Op::Put(k, v) => b.put(k, v),
                        Op::Delete(k) => b.delete(k),
                    }
                }
            }
        }
    }
}

pub(crate) enum Request<E: Engine> {
    /// Write-type: merged with the following queued write requests into one engine write.
    Write {
        ops: WriteOps,
        sync: bool,
        reply: Reply<()>,
    },
    /// Read-type: merged with the following queued reads into one `multi_get`.
    Get {
        key: Vec<u8>,
        reply: Reply<Option<Vec<u8>>>,
    },
    /// Read-type: this shard's keys of a `multi_get`.
    MultiGet {
        keys: Vec<Vec<u8>>,
        reply: Reply<Values>,
    },
    /// Exec-type: a closure run on the worker, merged with the following queued executions
    /// into one group with one engine write (`exec.rs`).
    Exec(Exec<E>),
    /// A part of a cross-shard batch: never merged.
    Part(Part),
    /// Anything else (range and scan jobs, flush, compaction): run alone.
    Job(Job<E>),
}

/// Which requests OBM may merge.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Write,
    Read,
    Exec,
    Alone,
}

impl<E: Engine> Request<E> {
    pub(crate) fn class(&self) -> Class {
        match self {
            Request::Write { .. } => Class::Write,
            Request::Get { .. } | Request::MultiGet { .. } => Class::Read,
            Request::Exec(_) => Class::Exec,
            Request::Part(_) | Request::Job(_) => Class::Alone,
        }
    }

    /// Whether the request changes the shard (counted in the shard's pending writes).
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Write { .. } | Request::Part(_) | Request::Exec(_)
        )
    }

    /// Whether the request is refused once writes fail (`Health`): plain writes and
    /// cross-shard parts. An execution may only read; `exec_group` refuses its writes.
    pub(crate) fn needs_writes(&self) -> bool {
        matches!(self, Request::Write { .. } | Request::Part(_))
    }

    /// Answers the request with `e` without running it.
    pub(crate) fn fail(self, e: Error) {
        match self {
            Request::Write { reply, .. } => reply.send(Err(e)),
            Request::Get { reply, .. } => reply.send(Err(e)),
            Request::MultiGet { reply, .. } => reply.send(Err(e)),
            Request::Part(mut p) => {
                // An error never leaves a batch to commit.
                let _ = p.finish(Err(e));
            }
            Request::Job(f) => f(Err(e)),
            Request::Exec(x) => {
                if let Some(done) = (x.f)(Err(e.clone())) {
                    done(Err(e))
                }
            }
        }
    }
}
