//! `strata`: look into, change and benchmark Strata databases.

mod bench;
mod commands;
mod dbdir;
mod index_bench;
mod l0_space;
mod opts;
mod store;
mod stress;
mod text;

/// jemalloc, as Redis, Kvrocks and TiKV use: glibc's malloc keeps the memory of freed
/// memtables and hot-tier records spread over its per-thread arenas, and the server's RSS
/// grew past its memory bound (20M keys: 582 MiB with glibc, 511 MiB with jemalloc and
/// 632 MiB with mimalloc, against a bound of 544; `docs/benchmarks.md`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: a background thread returns freed pages to the
/// system within about a second (its default keeps them ten seconds, and lets the
/// application's own threads do the purging). At 20M keys the server's RSS after the reads
/// was 483 MiB with these against 511 MiB with the defaults, and 324 MiB against 425 once
/// the load had settled. `_RJEM_MALLOC_CONF` in the environment still overrides them.
#[cfg(feature = "jemalloc")]
#[export_name = "_rjem_malloc_conf"]
pub static JEMALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Tools and benchmarks for Strata, an SSD-conscious LSM key-value store",
    long_about = "Tools and benchmarks for Strata, an SSD-conscious LSM key-value store.\n\n\
        Every command that works on a database takes its directory as --db DIR and opens \
        what is there: a sharded database (strata::Db, a SHARDS file) or a single engine \
        instance (strata_engine::Db, a CURRENT file). put and delete create a new database \
        in a missing or empty directory: sharded (--shards N shards, default the number of \
        cores) unless --engine-only. A directory holding anything else, a file, or a \
        database that --engine-only or --shards does not fit is refused and left as it is. \
        Keys and values are printed as text when they are valid UTF-8, with control characters \
        escaped as \\xNN and backslashes as \\\\; other values are binary and every byte \
        outside printable ASCII is escaped as \\xNN. --hex reads keys from hex instead.\n\n\
        Exit codes: 0 success, 1 error or key not found, 2 `check` found problems or the \
        command line is invalid."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Store VALUE under KEY, replacing any previous value.
    ///
    /// Creates the database (and the directory) if DIR is missing or empty: a sharded
    /// database (strata::Db) of --shards N shards, or a single engine instance with
    /// --engine-only. Refuses a directory that holds anything else. The write goes to the
    /// write-ahead log before the command returns; add --sync to also fsync it.
    Put(PutArgs),
    /// Print the value stored under KEY.
    ///
    /// Prints the value followed by a newline (escaped like scan output; --raw prints the
    /// exact bytes). When KEY is absent, prints "not found" on stderr and exits with code 1.
    /// Never creates a database.
    Get(GetArgs),
    /// Delete KEY (deleting an absent key is not an error).
    ///
    /// Creates the database if DIR holds none, like put.
    Delete(DeleteArgs),
    /// Print keys and values in key order, one "KEY<TAB>VALUE" line each.
    ///
    /// Covers keys in [--start, --end): --start is inclusive, --end exclusive; without them
    /// the whole database. --reverse prints from the last key down. Never creates a database.
    Scan(ScanArgs),
    /// Print the engine's statistics for the database.
    ///
    /// Per-level file counts and sizes, write amplification, cache hits and misses, as the
    /// engine reports them; for a sharded database each shard's, then the totals. Opens the
    /// database (replaying its log) and closes it again. Never creates a database.
    Stats(DbArgs),
    /// Run value-log garbage collection now and print what it did.
    ///
    /// Collects every sealed value-log file whose garbage is at least the gc_garbage_ratio
    /// option of its size (--ratio overrides it; 0 collects every sealed file): the values
    /// still in use are copied to the head of the log, made durable, and the file is
    /// removed. Prints the GC report and the value-log figures (a sharded database: every
    /// shard is collected, in parallel; each shard's lines, then the totals). Never creates
    /// a database.
    Gc(GcArgs),
    /// Verify every checksum of the database: tables, log and manifest.
    ///
    /// Read-only. Prints what was checked and every problem found; exits with code 2 if
    /// there is any problem, 0 if the database is intact. A sharded database: the SHARDS
    /// file, each shard (reported one by one), the cross-shard transaction log (TXLOG:
    /// header, every commit record's checksum and order), then the totals. A database of
    /// the Redis server (`strata serve --dir DIR`, stopped) that passed: then the Redis keys
    /// of every logical database (the database is opened, replaying its logs; no record is
    /// written): each
    /// collection's size equals its member records, a list's element indexes are exactly
    /// [head, tail), a sorted set's score records match its members, no key has member
    /// records its type does not have. Prints the keys per type, the member records and the
    /// garbage records (of deleted or overwritten collections, which compactions drop; not a
    /// problem), and every problem.
    Check(DbArgs),
    /// Run db_bench and YCSB benchmarks on Strata, fjall or RocksDB and print their results.
    ///
    /// Without flags: fillrandom then readrandom over 200000 keys of 16 bytes with values of
    /// 128 bytes, on Strata, in a temporary directory removed at the end. Prints an
    /// environment header, then per benchmark db_bench's result line, a latency line
    /// (p50/p99/p99.9/max) and a line of what it cost the machine (device bytes written and
    /// read, write and space amplification, CPU seconds per million operations, peak RSS,
    /// stall time), then the engine's statistics. With --engine A,B,C and --rounds N the
    /// whole list runs on each engine in turn, N times, and a table gives each engine's
    /// medians and its ratio to the first; --json and --plot save every figure and the
    /// throughput over time.
    ///
    /// Keys: the index i in [0, num) as an 8-byte big-endian integer, padded with '0' bytes
    /// up to --key-size (db_bench's layout; with --key-size below 8, the low bytes of i), so
    /// fillseq writes increasing keys. Values: random bytes (incompressible, unlike
    /// db_bench's default half-compressible values).
    Bench(Box<bench::BenchArgs>),
    /// Write with sync until killed, printing one "ack KEY VERSION HASH" line per
    /// acknowledged write (for kill -9 tests).
    ///
    /// Each of --threads threads overwrites its own --keys keys "tT-kI" with synced puts and
    /// prints a flushed line for each once it is acknowledged; about one write in five is an
    /// unsynced put of a fresh key "uSEED-tT-N", which a kill may lose and which is not
    /// printed. A value is "KEY#VERSION:" plus filler up to --value-size bytes plus the 16 hex
    /// digits of the FNV-1a hash of what precedes them (HASH); VERSION is "SEED.N" in fixed
    /// widths, so give each run on the same database a larger --seed. Unless --opt says
    /// otherwise, separation is on (sep_threshold_bytes=16) with 64 KiB value-log files and
    /// background GC every 20 ms at gc_garbage_ratio=0.2. Runs until killed, or --ops writes
    /// per thread. Creates the database if DIR holds none.
    Stress(stress::StressArgs),
    /// Run the Redis-compatible server on a database directory.
    ///
    /// Without arguments: serves ./strata-data on 127.0.0.1:6379. Takes an optional config
    /// file in redis.conf syntax, then directives as flags, later ones winning:
    /// `strata serve strata.conf --port 6380 --dir /data --requirepass s3cret`.
    /// `strata serve --help` lists every directive with its default. Stops on SHUTDOWN,
    /// SIGINT or SIGTERM.
    // The server parses its own arguments (redis.conf directives), help included.
    #[command(disable_help_flag = true)]
    Serve(ServeArgs),
    /// Write the Redis dataset of a stopped server's database as an RDB file.
    ///
    /// Opens the database of `strata serve --dir DIR` (the server must be stopped; its logs
    /// are replayed, no key is changed) and writes every key of every database, with its
    /// expiry, and the function libraries, as an RDB file of version 9 that redis-server
    /// 5.0 and later loads (7.0 and later when there are function libraries): start
    /// redis-server with `--dir` and `--dbfilename` naming it to move the dataset back to
    /// Redis. The file is written to OUT.tmp and renamed to OUT when complete. Progress goes
    /// to stderr every second on large datasets, then a summary.
    ExportRdb(ExportRdbArgs),
    /// Measure the PGM learned index against binary search inside one sorted run of keys
    /// (ns per lookup for 10^3 ... --max-keys keys; the L0 tier's index); with --sst, the
    /// block lookup of real SSTables with and without their learned index.
    IndexBench(index_bench::IndexBenchArgs),
    /// Measure an L0 table's bytes against SSTables of the same entries (the L0 tier's space).
    ///
    /// Generates --keys random keys of --key-size bytes with --value-size values, sorts them
    /// and writes them once into an L0 table (the engine's default options) and into SSTables
    /// (the engine's default table options: no compression, lz4, and no compression without
    /// filter); prints bytes, bytes per key and the ratios to the L0 table.
    L0Space(l0_space::L0SpaceArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// [CONFIG-FILE] [--DIRECTIVE VALUE ...]
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

/// Where the database is and how to open it.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Database directory.
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    #[arg(long = "opt", value_name = "NAME=VALUE", value_parser = opts::parse_opt, help = opts::OPT_HELP)]
    pub opts: Vec<(String, String)>,
    /// A new database is a single engine instance (strata_engine::Db) instead of the
    /// sharded strata::Db; an existing one must be a single engine instance.
    #[arg(long)]
    pub engine_only: bool,
    /// Shard count of a new sharded database [default: the number of cores]; an existing
    /// database must be sharded with this count.
    #[arg(long, value_name = "N", conflicts_with = "engine_only")]
    pub shards: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ExportRdbArgs {
    /// The server's database directory (its `dir` directive).
    #[arg(long, visible_alias = "dir", value_name = "DIR")]
    pub db: PathBuf,
    /// The RDB file to write (replaced if it exists).
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Collect files whose garbage is at least this fraction of their size (0..=1).
    #[arg(long, value_name = "RATIO")]
    pub ratio: Option<f64>,
}

#[derive(Args, Debug)]
pub struct PutArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// KEY and VALUE are hex strings (e.g. 00ff or 0x00ff) instead of text.
    #[arg(long)]
    pub hex: bool,
    /// fsync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
    pub key: String,
    pub value: String,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// KEY is a hex string (e.g. 00ff or 0x00ff) instead of text.
    #[arg(long)]
    pub hex: bool,
    /// Write the value's exact bytes, without escaping or a trailing newline.
    #[arg(long)]
    pub raw: bool,
    pub key: String,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// KEY is a hex string (e.g. 00ff or 0x00ff) instead of text.
    #[arg(long)]
    pub hex: bool,
    /// fsync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
    pub key: String,
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// First key to print (inclusive).
    #[arg(long, value_name = "KEY")]
    pub start: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub end: Option<String>,
    /// Print at most N entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Print from the last key down to the first.
    #[arg(long)]
    pub reverse: bool,
    /// --start and --end are hex strings (e.g. 00ff or 0x00ff) instead of text.
    #[arg(long)]
    pub hex: bool,
}

/// What a command tells `main` beyond success.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `get` of an absent key: exit code 1.
    NotFound,
    /// `check` found problems: exit code 2.
    Problems,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(cli.command) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => {
            eprintln!("not found");
            ExitCode::from(1)
        }
        Ok(Outcome::Problems) => ExitCode::from(2),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// `strata scan | head` closes our stdout early; that is not an error worth reporting.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("strata").chain(args.iter().copied()))
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_has_help() {
        for sub in Cli::command().get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no help text", sub.get_name());
        }
    }

    #[test]
    fn put_takes_db_key_value_and_repeated_opts() {
        let cli = parse(&[
            "put",
            "--db",
            "/tmp/x",
            "k",
            "v",
            "--opt",
            "filter=false",
            "--opt",
            "compression=lz4",
        ])
        .unwrap();
        let Command::Put(p) = cli.command else {
            panic!("not put")
        };
        assert_eq!(p.db.db, PathBuf::from("/tmp/x"));
        assert_eq!((p.key.as_str(), p.value.as_str()), ("k", "v"));
        assert_eq!(
            p.db.opts,
            vec![
                ("filter".to_string(), "false".to_string()),
                ("compression".to_string(), "lz4".to_string())
            ]
        );
        assert!(!p.hex && !p.sync);
    }

    #[test]
    fn export_rdb_takes_db_or_dir_and_the_output() {
        for flag in ["--db", "--dir"] {
            let cli = parse(&["export-rdb", flag, "/data", "out.rdb"]).unwrap();
            let Command::ExportRdb(e) = cli.command else {
                panic!("not export-rdb")
            };
            assert_eq!(e.db, PathBuf::from("/data"));
            assert_eq!(e.out, PathBuf::from("out.rdb"));
        }
        assert!(
            parse(&["export-rdb", "--db", "/data"]).is_err(),
            "no output file"
        );
        assert!(parse(&["export-rdb", "out.rdb"]).is_err(), "no database");
    }

    #[test]
    fn gc_takes_a_ratio() {
        let cli = parse(&["gc", "--db", "d", "--ratio", "0.25"]).unwrap();
        let Command::Gc(g) = cli.command else {
            panic!("not gc")
        };
        assert_eq!(g.ratio, Some(0.25));
        assert!(parse(&["gc", "--db", "d", "--ratio", "x"]).is_err());
    }

    #[test]
    fn engine_only_and_shards_choose_the_kind_and_exclude_each_other() {
        let Command::Put(p) = parse(&["put", "--db", "d", "--shards", "4", "k", "v"])
            .unwrap()
            .command
        else {
            panic!("not put")
        };
        assert_eq!((p.db.shards, p.db.engine_only), (Some(4), false));
        let Command::Stats(a) = parse(&["stats", "--db", "d", "--engine-only"])
            .unwrap()
            .command
        else {
            panic!("not stats")
        };
        assert!(a.engine_only && a.shards.is_none());
        let e = parse(&["get", "--db", "d", "--engine-only", "--shards", "2", "k"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn db_is_required() {
        let e = parse(&["get", "k"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn malformed_opt_is_a_usage_error() {
        let e = parse(&["stats", "--db", "d", "--opt", "nonsense"]).unwrap_err();
        assert!(e.to_string().contains("expected NAME=VALUE"), "{e}");
    }

    #[test]
    fn scan_flags() {
        let cli = parse(&[
            "scan",
            "--db",
            "d",
            "--start",
            "a",
            "--end",
            "m",
            "--limit",
            "10",
            "--reverse",
            "--hex",
        ])
        .unwrap();
        let Command::Scan(s) = cli.command else {
            panic!("not scan")
        };
        assert_eq!(s.start.as_deref(), Some("a"));
        assert_eq!(s.end.as_deref(), Some("m"));
        assert_eq!(s.limit, Some(10));
        assert!(s.reverse && s.hex);
    }
}
