//! `strata-server`: a Redis-compatible server over Strata's sharded database (`strata serve`).
//!
//! Redis 7.0 is the specification: replies, error texts, config directives and INFO fields
//! are Redis's. Layers, top down:
//!
//! - `server.rs` (listen, accept, `maxclients`, protected mode, shutdown) and `conn.rs`
//!   (one client: read, parse, run, reply);
//! - `protocol/`: the RESP request codec with its limits (`parse.rs`) and the reply builder
//!   hiding RESP2 and RESP3 (`reply.rs`);
//! - `cmd/`: the command table, the dispatch order, the argument cursor, and one module per
//!   command family (`connection`, `client`, `server`, `admin`, `strings`, `keyspace`,
//!   `lists`, `multi`); `blocking.rs`: clients blocked on keys (BLPOP and kin);
//! - `clients.rs` (the registry CLIENT LIST/KILL read), `slowlog.rs`, and the configuration:
//!   `config.rs` (directives), `tuning.rs` (Redis's tuning directives, stored only),
//!   `config_rewrite.rs` (CONFIG REWRITE);
//! - `store.rs`: the keyspace (metadata records over `strata::Db`, lazy expiry, the
//!   stripe locks, the command's transaction), over the key encoding of `keys.rs`
//!   (`docs/format/redis-keys.md`); the types on it, each a typed handle over the
//!   command's transaction: `string.rs`, `list.rs`, `hash.rs`, `set.rs`, `zset.rs`;
//!   `expire.rs`: the index of keys with a TTL and the active expiry cycle; `cursor.rs`:
//!   SCAN cursors as positions in the key order; `txn.rs`: an EXEC's buffered writes;
//!   `watch.rs`: the keys clients WATCH.
//! - `check.rs`: `strata check` on a server's database: the Redis types' records agree.
//!
//! ```no_run
//! let cfg = strata_server::Config::from_args(&["--port".into(), "6380".into()])?;
//! let server = strata_server::start(cfg, strata_server::StartOptions::default())?;
//! println!("listening on {}", server.local_addr());
//! server.shutdown()?;
//! # Ok::<(), strata_server::ServerError>(())
//! ```
//!
//! Layer: connection and server (the top).

#![forbid(unsafe_code)]

mod access;
mod acl;
mod blocking;
pub mod check;
mod clients;
pub mod cluster;
mod cmd;
mod cmdstats;
mod collection;
pub mod compat;
pub mod config;
mod config_rewrite;
mod conn;
mod cursor;
mod dbmap;
mod effects;
mod error;
mod exec;
mod expire;
pub mod filter;
mod geo;
mod glob;
mod hash;
mod hll;
mod info;
pub mod keys;
mod latency;
mod latency_histogram;
mod latency_report;
mod list;
mod lolwut;
mod long_double;
mod monitor;
mod notify;
mod pause;
mod position;
mod pqsort;
pub mod protocol;
mod pubsub;
mod random;
pub mod rdb;
mod repl;
mod replica;
mod save;
mod scripting;
mod server;
mod set;
mod slowlog;
mod store;
mod stream;
mod string;
#[cfg(test)]
mod test_server;
mod tracking;
mod tuning;
mod txn;
mod watch;
mod zset;

pub use config::{AppendFsync, Config, ConfigError};
pub use server::{start, ServerError, ServerHandle, StartOptions, REDIS_VERSION};

const USAGE: &str = "usage: strata serve [CONFIG-FILE] [--DIRECTIVE VALUE ...]

Serves the Redis protocol over a Strata database. The config file uses redis.conf syntax;
flags name the same directives and are applied after it, later ones winning.

Directives (Redis's names and defaults unless noted):
  bind ADDR...                    127.0.0.1
  port N                          6379 (0: any free port)
  dir PATH                        ./strata-data
  requirepass PASSWORD            none
  protected-mode yes|no           yes
  maxclients N                    10000
  timeout SECONDS                 0 (never close idle clients)
  databases N                     16 (at most 254)
  proto-max-bulk-len BYTES        512mb
  client-query-buffer-limit BYTES 1gb
  appendfsync always|everysec|no  everysec
  unixsocket PATH                 none (also serve on this Unix socket)
  unixsocketperm OCTAL            0 (the umask's)
  tcp-keepalive SECONDS           300 (0: off)
  client-output-buffer-limit CLASS HARD SOFT SECONDS...
                                  normal 0 0 0 (only the normal class has clients)
  slowlog-log-slower-than MICROS  10000 (negative: off, 0: every command)
  slowlog-max-len N               128
  dbfilename NAME                 checkpoint (Strata: SAVE/BGSAVE write dir/NAME, a directory)
  shards N                        one per core (Strata; fixed when the database is created)
  hot-memory BYTES                256mb (Strata: the hot tier's budget)
  engine-write-buffer-size BYTES  16mb per shard (Strata engine options, fixed at start;
  engine-block-cache-size BYTES   32mb per shard  see docs/design.md for the others)
  engine-value-separation-threshold BYTES|off   off

Redis tuning directives with no effect here (maxmemory, maxmemory-policy, save, appendonly,
hz, *-max-listpack-*, lazyfree-lazy-*, ...) are accepted and read back with CONFIG GET.";

/// `strata serve [config-file] [--directive value ...]`: starts the server, prints the
/// start-up banner, serves until SHUTDOWN, SIGINT or SIGTERM, and closes the database.
pub fn serve_main(args: &[String]) -> Result<(), ServerError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let cfg = Config::from_args(args)?;
    let (dir, fsync) = (cfg.dir.clone(), cfg.appendfsync);
    let (hot, engine) = (cfg.hot_memory_bytes, cfg.engine.clone());
    let handle = start(
        cfg,
        StartOptions {
            handle_signals: true,
            ..StartOptions::default()
        },
    )?;
    let addrs: Vec<String> = handle.local_addrs().iter().map(|a| a.to_string()).collect();
    let mut banner = format!(
        "Strata {} (Redis {} protocol) listening on {}, data in {}, {} shards, appendfsync {}\n",
        env!("CARGO_PKG_VERSION"),
        REDIS_VERSION,
        addrs.join(", "),
        std::path::absolute(&dir).unwrap_or(dir).display(),
        handle.shards(),
        fsync.name()
    );
    if let Some(p) = handle.unix_path() {
        banner += &format!("Also listening on unix socket {}\n", p.display());
    }
    let mb = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
    let shards = handle.shards() as u64;
    banner += &format!(
        "Memory budgets: hot tier {}, write buffers {} ({} per shard), block cache {} ({} per \
         shard)\n",
        mb(hot),
        mb(engine.write_buffer_bytes * shards),
        mb(engine.write_buffer_bytes),
        mb(engine.block_cache_bytes * shards),
        mb(engine.block_cache_bytes),
    );
    // One write, and a closed stdout is no reason to stop serving (`println!` would panic
    // on it: a supervisor or a test that read the first line and closed the pipe).
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    }
    handle.wait()
}
