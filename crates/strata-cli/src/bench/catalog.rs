//! The catalog: every benchmark `--benchmarks` names and every store `--engine` names,
//! with what the run needs to know about each.

use super::engine::Engine;
use super::engine::Strata;
use super::fjall_engine::Fjall;

pub(super) const BENCHMARKS_HELP: &str = "Comma-separated benchmarks, run in order:
  fillseq            write num keys in increasing order (fresh database)
  fillrandom         write num random keys per thread (fresh database)
  overwrite          write num random keys per thread into the existing data
  readrandom         look up reads random keys per thread (reports found/total)
  readmissing        look up reads keys that do not exist
  multireadrandom    look up reads random keys per thread, --batch-size per MultiGet
  seekrandom         reads seeks to random keys, each followed by --seek-nexts nexts
  readseq            iterate forward over up to reads entries per thread
  readreverse        iterate backward over up to reads entries per thread
  readwhilewriting   readrandom on --threads threads while one more thread writes
                     random keys until they finish (the result line counts the reads)
  deleterandom       delete num random keys per thread
  compact            compact the whole key range (one operation)
  flush              flush the memtable (one operation)
  waitforcompaction  wait until no flush or compaction is pending
  stats              print the engine's statistics at this point
YCSB (records are YCSB's hashed keys, not db_bench's; run ycsb-load first):
  ycsb-load          insert records 0..num split between threads (fresh database)
  ycsb-a             reads ops per thread: 50% read, 50% update, zipfian
  ycsb-b             95% read, 5% update, zipfian
  ycsb-c             100% read, zipfian
  ycsb-d             95% read, 5% insert, latest
  ycsb-e             95% scan (1-100 records, uniform), 5% insert, zipfian
  ycsb-f             50% read, 50% read-modify-write, zipfian";

/// Every benchmark `--benchmarks` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    ReadMissing,
    MultiReadRandom,
    SeekRandom,
    ReadSeq,
    ReadReverse,
    ReadWhileWriting,
    DeleteRandom,
    Compact,
    Flush,
    WaitForCompaction,
    Stats,
    YcsbLoad,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbD,
    YcsbE,
    YcsbF,
}

pub(super) const ALL: [(&str, Benchmark); 22] = [
    ("fillseq", Benchmark::FillSeq),
    ("fillrandom", Benchmark::FillRandom),
    ("overwrite", Benchmark::Overwrite),
    ("readrandom", Benchmark::ReadRandom),
    ("readmissing", Benchmark::ReadMissing),
    ("multireadrandom", Benchmark::MultiReadRandom),
    ("seekrandom", Benchmark::SeekRandom),
    ("readseq", Benchmark::ReadSeq),
    ("readreverse", Benchmark::ReadReverse),
    ("readwhilewriting", Benchmark::ReadWhileWriting),
    ("deleterandom", Benchmark::DeleteRandom),
    ("compact", Benchmark::Compact),
    ("flush", Benchmark::Flush),
    ("waitforcompaction", Benchmark::WaitForCompaction),
    ("stats", Benchmark::Stats),
    ("ycsb-load", Benchmark::YcsbLoad),
    ("ycsb-a", Benchmark::YcsbA),
    ("ycsb-b", Benchmark::YcsbB),
    ("ycsb-c", Benchmark::YcsbC),
    ("ycsb-d", Benchmark::YcsbD),
    ("ycsb-e", Benchmark::YcsbE),
    ("ycsb-f", Benchmark::YcsbF),
];

impl Benchmark {
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(_, b)| *b == self)
            .map(|(n, _)| *n)
            .unwrap()
    }

    /// Starts from an empty database, like db_bench's fresh_db benchmarks.
    pub(super) fn fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::YcsbLoad
        )
    }

    /// Changes the data (so a later fresh benchmark must wipe it).
    pub(super) fn writes(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::Overwrite
                | Benchmark::DeleteRandom
                | Benchmark::ReadWhileWriting
                | Benchmark::YcsbLoad
                | Benchmark::YcsbA
                | Benchmark::YcsbB
                | Benchmark::YcsbD
                | Benchmark::YcsbE
                | Benchmark::YcsbF
        )
    }

    /// Reports how many lookups found their key.
    pub(super) fn reports_found(self) -> bool {
        matches!(
            self,
            Benchmark::ReadRandom
                | Benchmark::ReadMissing
                | Benchmark::MultiReadRandom
                | Benchmark::SeekRandom
                | Benchmark::ReadWhileWriting
        )
    }

    /// Bounded by `--duration` when it is set (fills of a fixed key set and scans of the
    /// whole database are not).
    pub(super) fn honours_duration(self) -> bool {
        !matches!(
            self,
            Benchmark::FillSeq | Benchmark::YcsbLoad | Benchmark::ReadSeq | Benchmark::ReadReverse
        )
    }

    /// One operation, timed (compact, flush, waitforcompaction).
    pub(super) fn one_shot(self) -> bool {
        matches!(
            self,
            Benchmark::Compact | Benchmark::Flush | Benchmark::WaitForCompaction
        )
    }

    /// The YCSB workload letter ('a'..='f'); None for the other benchmarks.
    pub(super) fn ycsb(self) -> Option<char> {
        match self {
            Benchmark::YcsbA => Some('a'),
            Benchmark::YcsbB => Some('b'),
            Benchmark::YcsbC => Some('c'),
            Benchmark::YcsbD => Some('d'),
            Benchmark::YcsbE => Some('e'),
            Benchmark::YcsbF => Some('f'),
            _ => None,
        }
    }
}

pub(super) fn parse_benchmark(s: &str) -> Result<Benchmark, String> {
    let s = s.trim();
    ALL.iter()
        .find(|(n, _)| *n == s)
        .map(|(_, b)| *b)
        .ok_or_else(|| {
            let names: Vec<&str> = ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown benchmark {s:?}; known: {}", names.join(", "))
        })
}

/// The stores `strata bench` can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Strata,
    Rocksdb,
    Fjall,
    /// The sharded front (crate `strata`) over Strata's engine.
    Sharded,
    /// The sharded front over RocksDB.
    ShardedRocksdb,
}

impl EngineKind {
    const ALL: [EngineKind; 5] = [
        EngineKind::Strata,
        EngineKind::Rocksdb,
        EngineKind::Fjall,
        EngineKind::Sharded,
        EngineKind::ShardedRocksdb,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Strata => Strata::NAME,
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Fjall => Fjall::NAME,
            EngineKind::Sharded => "sharded",
            EngineKind::ShardedRocksdb => "sharded-rocksdb",
        }
    }

    /// Whether this binary can run it.
    pub(super) fn available(self) -> bool {
        !matches!(self, EngineKind::Rocksdb | EngineKind::ShardedRocksdb)
            || cfg!(feature = "rocksdb")
    }
}

/// Why `--engine rocksdb` cannot run, and how to get a binary that can.
pub const NO_ROCKSDB: &str = "this strata binary was built without RocksDB. Install the \
system library (apt-get install -y librocksdb-dev libclang-dev) and rebuild with the \
feature: ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p strata-cli \
--features rocksdb";

pub(super) fn parse_engine(s: &str) -> Result<EngineKind, String> {
    let s = s.trim();
    EngineKind::ALL
        .into_iter()
        .find(|e| e.name() == s)
        .ok_or_else(|| {
            format!("unknown engine {s:?}; known: strata, rocksdb, fjall, sharded, sharded-rocksdb")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_and_writing_benchmarks() {
        assert!(Benchmark::FillSeq.fresh_db() && Benchmark::FillRandom.fresh_db());
        assert!(!Benchmark::Overwrite.fresh_db());
        assert!(Benchmark::Overwrite.writes() && Benchmark::DeleteRandom.writes());
        assert!(!Benchmark::ReadRandom.writes());
        assert!(Benchmark::ReadMissing.reports_found());
        assert!(!Benchmark::ReadSeq.reports_found());
        assert!(Benchmark::YcsbLoad.fresh_db() && Benchmark::YcsbLoad.writes());
        assert!(!Benchmark::YcsbC.writes() && Benchmark::YcsbE.writes());
        assert!(Benchmark::ReadWhileWriting.writes());
        assert!(!Benchmark::FillSeq.honours_duration() && Benchmark::YcsbA.honours_duration());
        assert_eq!(Benchmark::YcsbD.ycsb(), Some('d'));
        assert_eq!(Benchmark::YcsbLoad.ycsb(), None);
    }
}
