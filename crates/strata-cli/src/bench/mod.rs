//! `strata bench`: db_bench-style and YCSB benchmarks, on Strata and its peers.
//!
//! Semantics follow RocksDB's db_bench so numbers can be set side by side:
//! * `--num` is the key space `[0, num)`. Writing benchmarks do `num` operations per thread
//!   (fillseq splits `[0, num)` between threads, in order within each thread; fillrandom,
//!   overwrite and deleterandom pick uniformly from the whole key space in every thread).
//! * Reading benchmarks do `--reads` operations per thread (default `num`); `--writes`
//!   changes the writes per thread of fillrandom, overwrite and deleterandom.
//! * `--duration SECS` bounds the random benchmarks by time instead of operations.
//! * fillseq, fillrandom and ycsb-load start from an empty database (the directory is wiped
//!   and the database reopened when an earlier benchmark of the run wrote to it); they are
//!   skipped with `--use-existing-db`.
//! * micros/op is the threads' busy time divided by the operations; ops/sec and MB/s use the
//!   wall time from the first thread's start to the last thread's end.
//!
//! `--engine strata,rocksdb,fjall --rounds N` runs the whole benchmark list on each engine
//! in turn (A B C A B C ...), each in its own fresh directory, then prints medians.
//!
//! Keys and values: see [`keys`]; YCSB: see [`ycsb`] and [`dist`].
//!
//! Files: the catalog of benchmarks and engines ([`catalog`]) and the flags ([`args`]); the
//! run ([`run`]) drives each engine through [`runner`], whose threads ([`worker`]) run the
//! per-thread loops of [`workload`]; measurements become [`record::Record`]s, summarized in
//! [`summary`]; output is text ([`header`], [`print`]), JSON ([`json`]) and PNG plots
//! ([`plot`], [`latency_plot`]).

mod args;
mod catalog;
mod dist;
mod engine;
mod env;
mod fjall_engine;
mod header;
mod json;
mod keys;
mod latency_plot;
mod live;
mod plot;
mod print;
mod record;
#[cfg(feature = "rocksdb")]
mod rocks_engine;
mod run;
mod runner;
mod sharded_engine;
#[cfg(test)]
mod smoke_tests;
mod summary;
mod sysstat;
mod timeline;
mod worker;
mod workload;
mod ycsb;

pub use args::BenchArgs;
pub use run::run;
