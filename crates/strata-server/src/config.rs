//! Configuration: Redis's directive names and value syntax, from a redis.conf-style file,
//! from `--directive value` flags (later ones win), and at run time through CONFIG GET/SET.
//! One table ([`DIRECTIVES`]) serves all three.
//!
//! Layer: configuration (above protocol and errors).

use crate::keys::MAX_DATABASES;
use crate::protocol::parse::split_args;
use std::fmt;
use std::path::{Path, PathBuf};

/// `appendfsync`: when writes reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendFsync {
    /// Every write is synced (the engine's synced writes) before it is acknowledged.
    Always,
    /// A background thread makes every shard's log durable once a second.
    Everysec,
    /// The operating system decides.
    No,
}

impl AppendFsync {
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

/// The server's configuration. Defaults are Redis 7.0's, except `bind` (loopback only) and
/// `dir` (`./strata-data`, a directory of its own rather than the working directory).
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on. Default: `127.0.0.1`.
    pub bind: Vec<String>,
    /// TCP port; 0 picks a free one (tests). Default: 6379.
    pub port: u16,
    /// Database directory (created if missing). Default: `./strata-data`.
    pub dir: PathBuf,
    /// Password of the default user; `None`: no authentication.
    pub requirepass: Option<String>,
    /// The ACL file users are loaded from at start and by ACL LOAD, saved to by ACL SAVE
    /// (`docs/format/acl-file.md`); `None`: users live only in memory (and `user` lines).
    pub aclfile: Option<PathBuf>,
    /// `user <name> <rules...>` lines of the config file, applied at start (Redis refuses
    /// them together with `aclfile`).
    pub users: Vec<Vec<String>>,
    /// `acl-pubsub-default`: new users may use every channel (`allchannels`) or none
    /// (`resetchannels`, Redis 7.0's default).
    pub acl_pubsub_all_channels: bool,
    /// Most entries the ACL log keeps. Default: 128.
    pub acllog_max_len: u64,
    /// Refuse non-loopback clients while no password is set. Default: yes.
    pub protected_mode: bool,
    /// Most simultaneous clients. Default: 10000.
    pub maxclients: usize,
    /// Close clients idle this many seconds; 0: never. Default: 0.
    pub timeout_secs: u64,
    /// Number of logical databases (SELECT 0..n-1), at most 254. Default: 16.
    pub databases: usize,
    /// Largest bulk string a client may send. Default: 512 MB.
    pub proto_max_bulk_len: i64,
    /// Largest unparsed input buffered for one client; beyond it the client is closed.
    /// Default: 1 GB.
    pub client_query_buffer_limit: usize,
    /// Default: everysec.
    pub appendfsync: AppendFsync,
    /// Where SAVE and BGSAVE put the checkpoint, under `dir`: a name, not a path (Redis's
    /// `dbfilename`; here a link to a directory, `save.rs`). Default: `checkpoint`.
    pub dbfilename: String,
    /// Shards of a new database (Strata); `None`: one per core. Persisted by the database.
    pub shards: Option<usize>,
    /// The file the configuration was read from, if any (INFO `config_file`, CONFIG
    /// REWRITE).
    pub config_file: Option<PathBuf>,
    /// Also serve on this Unix socket. Default: none.
    pub unixsocket: Option<PathBuf>,
    /// `replicaof <host> <port>`: follow this master from the start (`replica/`); REPLICAOF
    /// changes it at run time (CONFIG GET and REWRITE show the current master). Default:
    /// none.
    pub replicaof: Option<(String, u16)>,
    /// Permissions of the Unix socket (octal, as Redis); 0: the umask's. Default: 0.
    pub unixsocketperm: u32,
    /// `SO_KEEPALIVE` with this interval on accepted TCP sockets; 0: off. Default: 300.
    pub tcp_keepalive_secs: u64,
    /// Output buffer limits of the normal, replica and pubsub classes (only the normal
    /// class has clients here).
    pub output_limits: [OutputLimit; 3],
    /// Commands slower than this many microseconds are logged; negative: none; 0: all.
    /// Default: 10000.
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps. Default: 128.
    pub slowlog_max_len: u64,
    /// Memory budget of the hot tier (Strata; stored and shown, used by the hot tier).
    /// Default: 256 MB.
    pub hot_memory_bytes: u64,
    /// Options of each shard's engine (`engine-*` directives; fixed at start).
    pub engine: EngineConfig,
    /// `cluster-enabled`: Redis Cluster mode (`cluster/`; fixed at start). Default: no.
    pub cluster_enabled: bool,
    /// `cluster-config-file`: the cluster state's file, relative to `dir` (fixed at start).
    /// Default: `nodes.conf`.
    pub cluster_config_file: String,
    /// `cluster-port`: the cluster bus port; 0: `port` + 10000 (fixed at start). Default: 0.
    pub cluster_port: u16,
    /// Redis tuning directives with no effect here (`tuning.rs`), by canonical name.
    pub tuning: std::collections::BTreeMap<&'static str, String>,
}

/// One class of `client-output-buffer-limit`: the client is closed when its pending output
/// passes `hard_bytes`, or stays above `soft_bytes` for `soft_secs` seconds; 0 disables each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_secs: u64,
}

/// Output-limit classes in Redis's order and CONFIG GET names.
pub const OUTPUT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// The `engine-*` directives: options of every shard's engine instance (so the memory
/// budgets are per shard). Defaults are `strata_engine::Options`'s but for the two memory
/// budgets, which the server sets smaller (see [`SERVER_WRITE_BUFFER_BYTES`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// `engine-write-buffer-size`: memtable bytes before a flush.
    pub write_buffer_bytes: u64,
    /// `engine-block-cache-size`: block cache bytes.
    pub block_cache_bytes: u64,
    /// `engine-value-separation-threshold`: values of at least this many bytes go to the
    /// value log; `off` (read back as 0) keeps every value in the tree.
    pub sep_threshold_bytes: Option<u64>,
    /// `engine-target-file-size`.
    pub target_file_size_bytes: u64,
    /// `engine-block-size`.
    pub block_size_bytes: u64,
    /// `engine-max-open-files`.
    pub max_open_files: u64,
    /// `engine-background-threads`.
    pub background_threads: u64,
    /// `engine-compression`: `none` or `lz4`.
    pub lz4: bool,
}

/// The server's memtable budget per shard. The hot tier already keeps recently written
/// values in RAM, so a large memtable buys the server little; memtables waiting for flush
/// are the largest part of its memory after the hot tier (three per shard at the peak of a
/// load, and the allocator keeps that peak). Measured on 3M keys of 128 bytes with the hot
/// tier at 1 MiB: RSS after the load 107 MiB with 16 MiB memtables against 265–284 MiB with
/// the engine's 64 MiB, and the load was faster (`docs/benchmarks.md`, larger than memory).
pub const SERVER_WRITE_BUFFER_BYTES: u64 = 16 << 20;

/// The server's block cache per shard: the hot tier holds the hot values, so the block
/// cache mostly caches the same records twice (same measurement).
pub const SERVER_BLOCK_CACHE_BYTES: u64 = 32 << 20;

impl Default for EngineConfig {
    fn default() -> Self {
        let o = strata_engine::Options::default();
        EngineConfig {
            write_buffer_bytes: SERVER_WRITE_BUFFER_BYTES,
            block_cache_bytes: SERVER_BLOCK_CACHE_BYTES,
            sep_threshold_bytes: (o.sep_threshold_bytes != usize::MAX)
                .then_some(o.sep_threshold_bytes as u64),
            target_file_size_bytes: o.target_file_size_bytes,
            block_size_bytes: o.block_size_bytes as u64,
            max_open_files: o.max_open_files as u64,
            background_threads: o.background_threads as u64,
            lz4: o.compression != strata_engine::Compression::None,
        }
    }
}

impl EngineConfig {
    /// The engine options these directives describe.
    pub fn options(&self) -> strata_engine::Options {
        let sz = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        strata_engine::Options {
            write_buffer_bytes: sz(self.write_buffer_bytes),
            block_cache_bytes: sz(self.block_cache_bytes),
            sep_threshold_bytes: self.sep_threshold_bytes.map_or(usize::MAX, sz),
            target_file_size_bytes: self.target_file_size_bytes,
            block_size_bytes: sz(self.block_size_bytes),
            max_open_files: sz(self.max_open_files),
            background_threads: sz(self.background_threads),
            compression: if self.lz4 {
                strata_engine::Compression::Lz4
            } else {
                strata_engine::Compression::None
            },
            ..Default::default()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".to_string()],
            port: 6379,
            dir: PathBuf::from("./strata-data"),
            requirepass: None,
            aclfile: None,
            users: Vec::new(),
            acl_pubsub_all_channels: false,
            acllog_max_len: 128,
            protected_mode: true,
            maxclients: 10000,
            timeout_secs: 0,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            appendfsync: AppendFsync::Everysec,
            dbfilename: "checkpoint".to_string(),
            shards: None,
            config_file: None,
            unixsocket: None,
            replicaof: None,
            unixsocketperm: 0,
            tcp_keepalive_secs: 300,
            output_limits: [
                OutputLimit::default(),
                OutputLimit {
                    hard_bytes: 256 << 20,
                    soft_bytes: 64 << 20,
                    soft_secs: 60,
                },
                OutputLimit {
                    hard_bytes: 32 << 20,
                    soft_bytes: 8 << 20,
                    soft_secs: 60,
                },
            ],
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            hot_memory_bytes: 256 << 20,
            engine: EngineConfig::default(),
            cluster_enabled: false,
            cluster_config_file: "nodes.conf".to_string(),
            cluster_port: 0,
            tuning: crate::tuning::TUNING
                .iter()
                .map(|t| (t.name, t.default.to_string()))
                .collect(),
        }
    }
}

/// A configuration error at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &[String]) -> Result<(), String>;

/// One directive: its name, how to read and write it, and whether CONFIG SET may change it.
pub struct Directive {
    pub name: &'static str,
    pub get: Getter,
    pub set: Setter,
    pub mutable: bool,
}

const NOT_INT: &str = "argument couldn't be parsed into an integer";

fn one(v: &[String]) -> Result<&str, String> {
    match v {
        [s] => Ok(s),
        _ => Err("wrong number of arguments".to_string()),
    }
}

fn int_in(v: &[String], lo: i64, hi: i64) -> Result<i64, String> {
    let n: i64 = one(v)?.parse().map_err(|_| NOT_INT.to_string())?;
    if n < lo || n > hi {
        return Err(format!("argument must be between {lo} and {hi} inclusive"));
    }
    Ok(n)
}

/// Redis's `memtoull`: a number with an optional unit (k=1000, kb=1024, m, mb, g, gb).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

fn memory(v: &[String]) -> Result<u64, String> {
    parse_memory(one(v)?).ok_or_else(|| "argument must be a memory value".to_string())
}

fn yes_no(v: &[String]) -> Result<bool, String> {
    match one(v)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".to_string()),
    }
}

fn yn(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// Every supported directive.
pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "bind",
        get: |c| c.bind.join(" "),
        set: |c, v| {
            if v.is_empty() {
                return Err("wrong number of arguments".to_string());
            }
            c.bind = v.to_vec();
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "port",
        get: |c| c.port.to_string(),
        set: |c, v| {
            c.port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "dir",
        get: |c| {
            std::path::absolute(&c.dir)
                .unwrap_or_else(|_| c.dir.clone())
                .display()
                .to_string()
        },
        set: |c, v| {
            c.dir = PathBuf::from(one(v)?);
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "requirepass",
        get: |c| c.requirepass.clone().unwrap_or_default(),
        set: |c, v| {
            let p = one(v)?;
            c.requirepass = (!p.is_empty()).then(|| p.to_string());
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "aclfile",
        get: |c| {
            c.aclfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        },
        set: |c, v| {
            let p = one(v)?;
            c.aclfile = (!p.is_empty()).then(|| PathBuf::from(p));
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "acl-pubsub-default",
        get: |c| {
            if c.acl_pubsub_all_channels {
                "allchannels"
            } else {
                "resetchannels"
            }
            .to_string()
        },
        set: |c, v| {
            c.acl_pubsub_all_channels = match one(v)?.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .to_string(),
                    )
                }
            };
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "acllog-max-len",
        get: |c| c.acllog_max_len.to_string(),
        set: |c, v| {
            c.acllog_max_len = int_in(v, 0, i64::from(i32::MAX))? as u64;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "protected-mode",
        get: |c| yn(c.protected_mode),
        set: |c, v| {
            c.protected_mode = yes_no(v)?;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "maxclients",
        get: |c| c.maxclients.to_string(),
        set: |c, v| {
            c.maxclients = int_in(v, 1, i64::from(u32::MAX))? as usize;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "timeout",
        get: |c| c.timeout_secs.to_string(),
        set: |c, v| {
            c.timeout_secs = int_in(v, 0, i64::from(i32::MAX))? as u64;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "databases",
        get: |c| c.databases.to_string(),
        set: |c, v| {
            c.databases = int_in(v, 1, MAX_DATABASES as i64)? as usize;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "proto-max-bulk-len",
        get: |c| c.proto_max_bulk_len.to_string(),
        set: |c, v| {
            let n = memory(v)?;
            if !(1024 * 1024..=i64::MAX as u64).contains(&n) {
                return Err(format!(
                    "argument must be between 1048576 and {} inclusive",
                    i64::MAX
                ));
            }
            c.proto_max_bulk_len = n as i64;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "client-query-buffer-limit",
        get: |c| c.client_query_buffer_limit.to_string(),
        set: |c, v| {
            let n = memory(v)?;
            if n < 1024 * 1024 {
                return Err("argument must be between 1048576 and 18446744073709551615 \
                            inclusive"
                    .to_string());
            }
            c.client_query_buffer_limit = usize::try_from(n).unwrap_or(usize::MAX);
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "appendfsync",
        get: |c| c.appendfsync.name().to_string(),
        set: |c, v| {
            c.appendfsync = match one(v)?.to_ascii_lowercase().as_str() {
                "always" => AppendFsync::Always,
                "everysec" => AppendFsync::Everysec,
                "no" => AppendFsync::No,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: everysec, always, no"
                            .to_string(),
                    )
                }
            };
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "replicaof",
        get: |c| {
            c.replicaof
                .as_ref()
                .map_or(String::new(), |(h, p)| format!("{h} {p}"))
        },
        set: |c, v| {
            // Redis: `replicaof no one` in a file means none; so does an empty value (what
            // CONFIG REWRITE writes for a server that follows no master).
            match v {
                [] => c.replicaof = None,
                [s] if s.is_empty() => c.replicaof = None,
                [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => {
                    c.replicaof = None
                }
                [h, p] => {
                    let port = p
                        .parse::<u16>()
                        .map_err(|_| "Invalid master port".to_string())?;
                    c.replicaof = Some((h.clone(), port));
                }
                _ => return Err("wrong number of arguments".to_string()),
            }
            Ok(())
        },
        // Redis: immutable; REPLICAOF is the run-time command.
        mutable: false,
    },
    Directive {
        name: "cluster-enabled",
        get: |c| yn(c.cluster_enabled),
        set: |c, v| {
            c.cluster_enabled = yes_no(v)?;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "cluster-config-file",
        get: |c| c.cluster_config_file.clone(),
        set: |c, v| {
            c.cluster_config_file = one(v)?.to_string();
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "cluster-port",
        get: |c| c.cluster_port.to_string(),
        set: |c, v| {
            c.cluster_port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "dbfilename",
        get: |c| c.dbfilename.clone(),
        set: |c, v| {
            let n = one(v)?;
            // Redis's isValidDBfilename (plus the names a save uses for itself).
            if n.is_empty() || n.contains('/') || n == "." || n == ".." {
                return Err("dbfilename can't be a path, just a filename".to_string());
            }
            c.dbfilename = n.to_string();
            Ok(())
        },
        // Redis: a protected config, not settable at run time.
        mutable: false,
    },
    Directive {
        name: "shards",
        get: |c| c.shards.map(|n| n.to_string()).unwrap_or_default(),
        set: |c, v| {
            c.shards = Some(int_in(v, 1, strata::meta::MAX_SHARDS as i64)? as usize);
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "unixsocket",
        get: |c| {
            c.unixsocket
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        },
        set: |c, v| {
            let p = one(v)?;
            c.unixsocket = (!p.is_empty()).then(|| PathBuf::from(p));
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "unixsocketperm",
        get: |c| format!("{:o}", c.unixsocketperm),
        set: |c, v| {
            let n = u32::from_str_radix(one(v)?, 8).map_err(|_| NOT_INT.to_string())?;
            if n > 0o777 {
                return Err("argument must be between 0 and 777 inclusive".to_string());
            }
            c.unixsocketperm = n;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "tcp-keepalive",
        get: |c| c.tcp_keepalive_secs.to_string(),
        set: |c, v| {
            c.tcp_keepalive_secs = int_in(v, 0, i64::from(i32::MAX))? as u64;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "client-output-buffer-limit",
        get: |c| {
            let parts: Vec<String> = OUTPUT_CLASSES
                .iter()
                .zip(c.output_limits.iter())
                .map(|(n, l)| format!("{n} {} {} {}", l.hard_bytes, l.soft_bytes, l.soft_secs))
                .collect();
            parts.join(" ")
        },
        set: |c, v| {
            c.output_limits = parse_output_limits(v, c.output_limits)?;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "slowlog-log-slower-than",
        get: |c| c.slowlog_log_slower_than.to_string(),
        set: |c, v| {
            c.slowlog_log_slower_than = int_in(v, -1, i64::MAX)?;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "slowlog-max-len",
        get: |c| c.slowlog_max_len.to_string(),
        set: |c, v| {
            c.slowlog_max_len = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "hot-memory",
        get: |c| c.hot_memory_bytes.to_string(),
        set: |c, v| {
            c.hot_memory_bytes = memory(v)?;
            Ok(())
        },
        mutable: true,
    },
    Directive {
        name: "engine-write-buffer-size",
        get: |c| c.engine.write_buffer_bytes.to_string(),
        set: |c, v| {
            c.engine.write_buffer_bytes = memory_at_least(v, 64 * 1024)?;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-block-cache-size",
        get: |c| c.engine.block_cache_bytes.to_string(),
        set: |c, v| {
            c.engine.block_cache_bytes = memory(v)?;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-value-separation-threshold",
        get: |c| c.engine.sep_threshold_bytes.unwrap_or(0).to_string(),
        set: |c, v| {
            c.engine.sep_threshold_bytes = match one(v)? {
                s if s.eq_ignore_ascii_case("off") || s == "0" => None,
                _ => Some(memory(v)?),
            };
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-target-file-size",
        get: |c| c.engine.target_file_size_bytes.to_string(),
        set: |c, v| {
            c.engine.target_file_size_bytes = memory_at_least(v, 64 * 1024)?;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-block-size",
        get: |c| c.engine.block_size_bytes.to_string(),
        set: |c, v| {
            c.engine.block_size_bytes = memory_at_least(v, 512)?;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-max-open-files",
        get: |c| c.engine.max_open_files.to_string(),
        set: |c, v| {
            c.engine.max_open_files = int_in(v, 16, i64::from(i32::MAX))? as u64;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-background-threads",
        get: |c| c.engine.background_threads.to_string(),
        set: |c, v| {
            c.engine.background_threads = int_in(v, 1, 256)? as u64;
            Ok(())
        },
        mutable: false,
    },
    Directive {
        name: "engine-compression",
        get: |c| if c.engine.lz4 { "lz4" } else { "none" }.to_string(),
        set: |c, v| {
            c.engine.lz4 = match one(v)?.to_ascii_lowercase().as_str() {
                "lz4" => true,
                "none" => false,
                _ => return Err("argument(s) must be one of the following: none, lz4".to_string()),
            };
            Ok(())
        },
        mutable: false,
    },
];

fn memory_at_least(v: &[String], lo: u64) -> Result<u64, String> {
    let n = memory(v)?;
    if n < lo {
        return Err(format!("argument must be at least {lo} bytes"));
    }
    Ok(n)
}

/// Redis's `client-output-buffer-limit <class> <hard> <soft> <soft-seconds> ...`: any number
/// of classes (one CONFIG SET value holds them all, separated by spaces); classes not named
/// keep their limits. `replica` and `slave` are the same class.
fn parse_output_limits(
    v: &[String],
    mut cur: [OutputLimit; 3],
) -> Result<[OutputLimit; 3], String> {
    let words: Vec<&str> = v.iter().flat_map(|s| s.split_whitespace()).collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".to_string());
    }
    for w in words.chunks(4) {
        let class = match w[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "replica" | "slave" => 1,
            "pubsub" => 2,
            _ => {
                return Err(
                    "Invalid client class specified in buffer limit configuration.".to_string(),
                )
            }
        };
        let hard = parse_memory(w[1]);
        let soft = parse_memory(w[2]);
        let secs = w[3].parse::<u64>().ok();
        let (Some(hard_bytes), Some(soft_bytes), Some(soft_secs)) = (hard, soft, secs) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                    .to_string(),
            );
        };
        cur[class] = OutputLimit {
            hard_bytes,
            soft_bytes,
            soft_secs,
        };
    }
    Ok(cur)
}

/// The directive named `name` (case-insensitive).
pub fn directive(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

/// Every name CONFIG GET knows, with the canonical name it reads: our directives, the
/// tuning directives and their aliases.
pub fn all_names() -> impl Iterator<Item = (&'static str, &'static str)> {
    DIRECTIVES.iter().map(|d| (d.name, d.name)).chain(
        crate::tuning::TUNING
            .iter()
            .flat_map(|t| std::iter::once((t.name, t.name)).chain(t.alias.map(|a| (a, t.name)))),
    )
}

impl Config {
    /// Applies one `name value...` line; `at` names its place for errors.
    fn apply(&mut self, name: &str, values: &[String], at: &str) -> Result<(), ConfigError> {
        let fail = |e: String| ConfigError(format!("{at}: '{name}': {e}"));
        if name.eq_ignore_ascii_case("user") {
            // ACL users (`acl/`): checked when the server starts.
            if values.is_empty() {
                return Err(fail("wrong number of arguments".to_string()));
            }
            self.users.push(values.to_vec());
            return Ok(());
        }
        if let Some(t) = crate::tuning::find(name) {
            let v = values.join(" ");
            self.tuning
                .insert(t.name, crate::tuning::normalize(t, &v).map_err(fail)?);
            return Ok(());
        }
        let d = directive(name)
            .ok_or_else(|| ConfigError(format!("{at}: unknown directive '{name}'")))?;
        (d.set)(self, values).map_err(fail)
    }

    /// The value CONFIG GET shows for `name` (a directive, a tuning directive or an alias).
    pub fn get(&self, name: &str) -> Option<String> {
        if let Some(d) = directive(name) {
            return Some((d.get)(self));
        }
        let t = crate::tuning::find(name)?;
        let v = self.tuning.get(t.name).cloned().unwrap_or_default();
        Some(crate::tuning::shown(t, v))
    }

    /// Applies the lines of a redis.conf-style file (`#` comments, Redis's quoting).
    pub fn apply_file_text(&mut self, text: &str, file: &Path) -> Result<(), ConfigError> {
        for (i, line) in text.lines().enumerate() {
            let at = format!("{}:{}", file.display(), i + 1);
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let args = split_args(trimmed.as_bytes())
                .ok_or_else(|| ConfigError(format!("{at}: unbalanced quotes")))?;
            let args: Vec<String> = args
                .into_iter()
                .map(|a| String::from_utf8_lossy(&a).into_owned())
                .collect();
            if let Some((name, values)) = args.split_first() {
                self.apply(name, values, &at)?;
            }
        }
        Ok(())
    }

    /// Builds a configuration from `strata serve` arguments: an optional config file first,
    /// then `--directive value...` flags, applied in order (later ones win).
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let path = PathBuf::from(first);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError(format!("cannot read config file {}: {e}", path.display()))
                })?;
                c.apply_file_text(&text, &path)?;
                c.config_file = Some(std::path::absolute(&path).unwrap_or(path));
                rest = &args[1..];
            }
        }
        let mut i = 0;
        while i < rest.len() {
            let Some(name) = rest[i].strip_prefix("--") else {
                return Err(ConfigError(format!(
                    "unexpected argument '{}': flags are --directive value",
                    rest[i]
                )));
            };
            let mut j = i + 1;
            while j < rest.len() && !rest[j].starts_with("--") {
                j += 1;
            }
            c.apply(name, &rest[i + 1..j], &format!("--{name}"))?;
            i = j;
        }
        Ok(c)
    }

    /// `CONFIG SET name value`: the Redis error text after `ERR ` on failure.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let fail =
            |e: &str| format!("CONFIG SET failed (possibly related to argument '{name}') - {e}");
        if let Some(t) = crate::tuning::find(name) {
            let v = crate::tuning::normalize(t, value).map_err(|e| fail(&e))?;
            self.tuning.insert(t.name, v);
            return Ok(());
        }
        let d = directive(name).ok_or_else(|| {
            format!("Unknown option or number of arguments for CONFIG SET - '{name}'")
        })?;
        if !d.mutable {
            return Err(fail("can't set immutable config"));
        }
        (d.set)(self, &[value.to_string()]).map_err(|e| fail(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_override_defaults_in_order() {
        let c = Config::from_args(&s(&[
            "--port",
            "6380",
            "--dir",
            "/data",
            "--requirepass",
            "s3cret",
            "--port",
            "6381",
        ]))
        .unwrap();
        assert_eq!(c.port, 6381);
        assert_eq!(c.dir, PathBuf::from("/data"));
        assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
        let c = Config::from_args(&s(&[
            "--bind",
            "127.0.0.1",
            "::1",
            "--appendfsync",
            "always",
        ]))
        .unwrap();
        assert_eq!(c.bind, s(&["127.0.0.1", "::1"]));
        assert_eq!(c.appendfsync, AppendFsync::Always);
    }

    #[test]
    fn file_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("strata.conf");
        std::fs::write(
            &f,
            "# comment\nport 7000\n\nproto-max-bulk-len 2mb\nrequirepass \"a b\"\nshards 3\n",
        )
        .unwrap();
        let c =
            Config::from_args(&[f.display().to_string(), "--port".into(), "7001".into()]).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.proto_max_bulk_len, 2 * 1024 * 1024);
        assert_eq!(c.requirepass.as_deref(), Some("a b"));
        assert_eq!(c.shards, Some(3));
    }

    #[test]
    fn unknown_directive_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bad.conf");
        std::fs::write(&f, "port 7000\nmaxmemory-fancy 1\n").unwrap();
        let e = Config::from_args(&[f.display().to_string()]).unwrap_err();
        assert_eq!(
            e.0,
            format!("{}:2: unknown directive 'maxmemory-fancy'", f.display())
        );
        let e = Config::from_args(&s(&["--nope", "1"])).unwrap_err();
        assert_eq!(e.0, "--nope: unknown directive 'nope'");
        let e = Config::from_args(&s(&["--port", "x"])).unwrap_err();
        assert!(e.0.contains("couldn't be parsed"), "{e}");
    }

    #[test]
    fn config_set_errors_are_redis_texts() {
        let mut c = Config::default();
        assert_eq!(
            c.set("maxclients", "abc").unwrap_err(),
            "CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't \
             be parsed into an integer"
        );
        assert_eq!(
            c.set("nosuch", "1").unwrap_err(),
            "Unknown option or number of arguments for CONFIG SET - 'nosuch'"
        );
        assert_eq!(
            c.set("appendfsync", "foo").unwrap_err(),
            "CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must \
             be one of the following: everysec, always, no"
        );
        c.set("timeout", "5").unwrap();
        assert_eq!(c.timeout_secs, 5);
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1x"), None);
    }
}
