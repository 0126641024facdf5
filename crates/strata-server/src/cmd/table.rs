//! The command table, the single source of truth about every command: Redis 7.0.15's own
//! metadata (arity, flags, ACL categories, tips, key specs, docs and arguments) joined with
//! Strata's handlers.
//!
//! The metadata is `redis-commands.json`, written by `scripts/gen-command-table.py` from a
//! running redis-server 7.0.15's COMMAND INFO and COMMAND DOCS (Redis is BSD-licensed; the
//! file is its interface description, the way Redis's `commands/*.json` are the source of its
//! own table), plus `strata-commands.json` for the few commands Strata answers that 7.0 lacks
//! (their later Redis versions' metadata). Each family module lists only what Redis's
//! metadata cannot say: the handler of each command it implements, and Strata's execution
//! traits ([`traits`]). COMMAND and its subcommands, the dispatcher's checks, key extraction
//! ([`keys`]), routing to shards and EXEC's lock plan all read the joined [`Spec`]; nothing
//! beside the table names commands.
//!
//! Layer: commands (above services; below execution).

use super::{flag, Handler};
use bytes::Bytes;
use serde::Deserialize;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Strata's execution traits of a command: what Redis decides in `processCommand` by
/// comparing command procedures, and where a command must run here.
pub mod traits {
    /// Runs at once inside MULTI instead of being queued (EXEC, DISCARD, MULTI, WATCH, QUIT,
    /// RESET: Redis's list in `processCommand`).
    pub const RUNS_IN_MULTI: u32 = 1 << 0;
    /// Allowed on a RESP2 connection that holds a subscription.
    pub const WHILE_SUBSCRIBED: u32 = 1 << 1;
    /// Runs on the connection's thread even when its keys live in one shard: it reaches
    /// beyond its keys' shard (COPY and MOVE name another database) or registers state on
    /// the connection (WATCH).
    pub const CONNECTION_THREAD: u32 = 1 << 2;
    /// Runs a script, which may reach keys it did not declare (outside cluster mode).
    pub const SCRIPT: u32 = 1 << 3;
    /// Writes its keys without reading them, whatever its arguments (MSET): the dispatcher
    /// takes their stripes shared (`Tx::lock_for_command`). Redis's `OW` key flag does
    /// not say as much: MSETNX's and SET NX's keys are `OW`, yet they read whether the key
    /// exists, and two of them must exclude each other.
    pub const BLIND_WRITE: u32 = 1 << 4;
    /// Reads its keys at one snapshot and writes nothing, not even a lazy expiry's delete
    /// (MGET): the dispatcher takes no stripes for it.
    pub const SNAPSHOT_READ: u32 = 1 << 5;
    /// Has no keys, yet runs on the connection's task without `block_in_place`: it reads
    /// one slot's records through the engine and waits on no stripe, client, network or
    /// fsync, as the single-shard commands `conn.rs` runs in place. Handing the runtime
    /// worker to another thread and back costs thread switches that are more than the
    /// command itself, on each GETKEYSINSLOT of a reshard's loop.
    pub const IN_TASK: u32 = 1 << 6;
    /// May replicate without being a write (PUBLISH, SPUBLISH, EVAL, EVALSHA, FCALL):
    /// Redis's `CMD_MAY_REPLICATE`, which its COMMAND INFO, and so the table's metadata,
    /// leaves out. A pause of writes holds these, and they take the replication sequencer.
    pub const MAY_REPLICATE: u32 = 1 << 7;
}

/// A family module's entry: a command it implements (`container|sub` for a subcommand) and
/// its handler.
pub struct Entry {
    pub name: &'static str,
    pub handler: Handler,
    pub traits: u32,
}

/// An entry without execution traits.
pub const fn cmd(name: &'static str, handler: Handler) -> Entry {
    Entry {
        name,
        handler,
        traits: 0,
    }
}

/// An entry with execution traits ([`traits`]).
pub const fn cmd_with(name: &'static str, handler: Handler, traits: u32) -> Entry {
    Entry {
        name,
        handler,
        traits,
    }
}

/// One command of the table, with its subcommands.
pub struct Spec {
    /// Redis's full name in lower case: `get`, `config|get`.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    /// [`flag`] bits, from the metadata's flags.
    pub flags: u32,
    pub key_specs: &'static [KeySpec],
    /// Everything COMMAND INFO and COMMAND DOCS reply.
    pub meta: &'static Meta,
    /// `None` for a container (CONFIG, CLIENT): the dispatcher runs a subcommand.
    pub handler: Option<Handler>,
    pub traits: u32,
    /// The subcommands Strata implements, by name without the container's.
    pub subcommands: Vec<(&'static str, &'static Spec)>,
}

impl Spec {
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    pub fn has_trait(&self, t: u32) -> bool {
        self.traits & t != 0
    }

    /// The subcommand named `sub` (any case).
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static Spec> {
        self.subcommands
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(sub))
            .map(|(_, s)| *s)
    }

    /// Whether `argc` arguments (the name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let (argc, arity) = (argc as i64, i64::from(self.arity));
        (arity > 0 && argc == arity) || (arity < 0 && argc >= -arity)
    }

    /// Whether [`keys`] finds every key the command may touch: not when its key specs are
    /// incomplete or unknown (SORT's BY and GET patterns), it reaches another database
    /// (COPY ... DB, MOVE) or it runs a script.
    pub fn names_all_keys(&self) -> bool {
        let partial = self.key_specs.iter().any(|k| {
            k.bits & key_flag::INCOMPLETE != 0
                || matches!(k.begin_search, BeginSearch::Unknown {})
                || matches!(k.find_keys, FindKeys::Unknown {})
        });
        !partial && !self.has_trait(traits::CONNECTION_THREAD | traits::SCRIPT)
    }

    /// Whether the command names shard channels (SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE): its
    /// key specs are all `not_key`, which Redis 7.0 keeps for channels so that cluster
    /// routing sends the command to the node serving the channel's slot.
    pub fn names_channels(&self) -> bool {
        !self.key_specs.is_empty()
            && self
                .key_specs
                .iter()
                .all(|k| k.bits & key_flag::NOT_KEY != 0)
    }

    /// Redis's `doesCommandHaveKeys`: a key spec that names keys, or a key-finding procedure.
    pub fn has_keys(&self) -> bool {
        native_keys(self.name).is_some()
            || self
                .key_specs
                .iter()
                .any(|k| k.bits & key_flag::NOT_KEY == 0)
    }
}

/// Redis's metadata of one command, as COMMAND INFO and COMMAND DOCS report it.
#[derive(Debug, Deserialize)]
pub struct Meta {
    pub name: String,
    pub arity: i32,
    /// COMMAND INFO's flags, in Redis's order.
    pub flags: Vec<String>,
    pub legacy_range: [i32; 3],
    /// ACL categories with their `@`, in Redis's order.
    pub acl_categories: Vec<String>,
    #[serde(default)]
    pub tips: Vec<String>,
    #[serde(default)]
    pub key_specs: Vec<KeySpec>,
    pub docs: Docs,
    #[serde(default)]
    pub subcommands: Vec<Meta>,
}

/// A key specification (Redis 7's `keySpec`): where the keys begin, how many follow, and
/// what the command does with them.
#[derive(Debug, Deserialize)]
pub struct KeySpec {
    #[serde(default)]
    pub notes: Option<String>,
    /// `RW`, `access`, ... in Redis's order.
    pub flags: Vec<String>,
    pub begin_search: BeginSearch,
    pub find_keys: FindKeys,
    /// `flags` as [`key_flag`] bits (filled when the table is built).
    #[serde(skip)]
    pub bits: u32,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum BeginSearch {
    /// The first key is at this argument.
    Index {
        index: i32,
    },
    /// The first key follows this keyword, searched from `startfrom` (negative: from the
    /// end, backwards).
    Keyword {
        keyword: String,
        startfrom: i32,
    },
    Unknown {},
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FindKeys {
    /// Keys up to `lastkey` past the first (negative: from the end; with `limit`, a
    /// `1/limit` share of the rest), every `keystep`.
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// The number of keys is the argument `keynumidx` past the begin; keys start `firstkey`
    /// past it.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
    Unknown {},
}

/// COMMAND DOCS of one command; absent fields are left out of the reply, as Redis does.
#[derive(Debug, Deserialize)]
pub struct Docs {
    pub summary: Option<String>,
    pub since: Option<String>,
    pub group: Option<String>,
    pub complexity: Option<String>,
    #[serde(default)]
    pub doc_flags: Vec<String>,
    pub deprecated_since: Option<String>,
    pub replaced_by: Option<String>,
    #[serde(default)]
    pub history: Vec<(String, String)>,
    #[serde(default)]
    pub arguments: Vec<DocArg>,
}

/// One argument in COMMAND DOCS.
#[derive(Debug, Deserialize)]
pub struct DocArg {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub key_spec_index: Option<i64>,
    pub token: Option<String>,
    pub summary: Option<String>,
    pub since: Option<String>,
    pub deprecated_since: Option<String>,
    #[serde(default)]
    pub flags: Vec<String>,
    #[serde(default)]
    pub arguments: Vec<DocArg>,
}

/// Key spec flags (Redis's `CMD_KEY_*`), as COMMAND INFO and COMMAND GETKEYSANDFLAGS name
/// them.
pub mod key_flag {
    pub const RO: u32 = 1 << 0;
    pub const RW: u32 = 1 << 1;
    pub const OW: u32 = 1 << 2;
    pub const RM: u32 = 1 << 3;
    pub const ACCESS: u32 = 1 << 4;
    pub const UPDATE: u32 = 1 << 5;
    pub const INSERT: u32 = 1 << 6;
    pub const DELETE: u32 = 1 << 7;
    pub const NOT_KEY: u32 = 1 << 8;
    pub const INCOMPLETE: u32 = 1 << 9;
    pub const VARIABLE_FLAGS: u32 = 1 << 10;

    /// Names in Redis's order.
    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];

    /// The names of `bits`, in Redis's order.
    pub fn names(bits: u32) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .filter(move |(b, _)| bits & b != 0)
            .map(|(_, n)| *n)
    }
}

/// Redis's metadata of every command of redis-server 7.0.15.
const REDIS_COMMANDS: &str = include_str!("redis-commands.json");
/// Metadata of the commands Strata answers that Redis 7.0 lacks, from the Redis version that
/// added them.
const STRATA_COMMANDS: &str = include_str!("strata-commands.json");

#[derive(Deserialize)]
struct MetaFile {
    commands: Vec<Meta>,
}

/// Every command of Redis 7.0.15 (and the later ones Strata answers), whether Strata
/// implements it or not: what the compatibility page lists.
pub fn redis_metadata() -> &'static [Meta] {
    static ALL: OnceLock<Vec<Meta>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = load(REDIS_COMMANDS, "redis-commands.json");
        for extra in load(STRATA_COMMANDS, "strata-commands.json") {
            match all.iter_mut().find(|m| m.name == extra.name) {
                // A later subcommand of a container 7.0 has.
                Some(container) => container.subcommands.extend(extra.subcommands),
                None => all.push(extra),
            }
        }
        for m in &mut all {
            fill_key_bits(m);
        }
        all
    })
}

fn load(json: &str, file: &str) -> Vec<Meta> {
    match serde_json::from_str::<MetaFile>(json) {
        Ok(f) => f.commands,
        // Both files are compiled in; the table test parses them, so this is a build error.
        Err(e) => panic!("{file} does not parse: {e}"),
    }
}

fn fill_key_bits(m: &mut Meta) {
    for ks in &mut m.key_specs {
        ks.bits = ks
            .flags
            .iter()
            .map(|f| key_flag_bit(f))
            .fold(0, |a, b| a | b);
    }
    for s in &mut m.subcommands {
        fill_key_bits(s);
    }
}

fn key_flag_bit(name: &str) -> u32 {
    key_flag::NAMES
        .iter()
        .find(|(_, n)| *n == name)
        .map_or(0, |(b, _)| *b)
}

/// The [`flag`] bits of a metadata's flag names (names Strata does not act on map to none).
fn flag_bits(names: &[String]) -> u32 {
    names
        .iter()
        .filter_map(|n| flag::NAMES.iter().find(|(_, f)| f == n))
        .fold(0, |a, (b, _)| a | b)
}

/// The joined table: the top-level commands Strata implements, by name.
pub struct Table {
    pub commands: Vec<&'static Spec>,
    by_name: HashMap<&'static str, &'static Spec>,
}

impl Table {
    /// The top-level command named `name` (any case).
    pub fn get(&self, name: &[u8]) -> Option<&'static Spec> {
        if name.iter().any(u8::is_ascii_uppercase) {
            // Clients send names in capitals (redis-benchmark, most client libraries):
            // lowered on the stack, every command name being short.
            let mut buf = [0u8; 32];
            if let Some(lower) = buf.get_mut(..name.len()) {
                lower.copy_from_slice(name);
                lower.make_ascii_lowercase();
                return std::str::from_utf8(lower)
                    .ok()
                    .and_then(|n| self.by_name.get(n).copied());
            }
            let lower = name.to_ascii_lowercase();
            return std::str::from_utf8(&lower)
                .ok()
                .and_then(|n| self.by_name.get(n).copied());
        }
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| self.by_name.get(n).copied())
    }
}

/// Joins the metadata with the families' entries. Panics on an entry without metadata or a
/// duplicate entry: a programming error the table test catches.
pub fn build(families: &[&'static [Entry]]) -> Table {
    let meta = redis_metadata();
    let mut entries: HashMap<&'static str, &'static Entry> = HashMap::new();
    for family in families {
        for e in family.iter() {
            assert!(
                entries.insert(e.name, e).is_none(),
                "command {} registered twice",
                e.name
            );
        }
    }
    // Entries are taken out as the metadata claims them; any left over has none.
    let mut commands = Vec::new();
    for m in meta {
        let top = entries.remove(m.name.as_str());
        let mut subcommands: Vec<(&'static str, &'static Spec)> = Vec::new();
        for sm in &m.subcommands {
            if let Some(e) = entries.remove(sm.name.as_str()) {
                let short = sm.name.split_once('|').map_or(sm.name.as_str(), |(_, s)| s);
                subcommands.push((short, leak(sm, Some(e), Vec::new())));
            }
        }
        if top.is_some() || !subcommands.is_empty() {
            commands.push(leak(m, top, subcommands));
        }
    }
    let missing: Vec<&str> = entries.into_keys().collect();
    assert!(
        missing.is_empty(),
        "commands without Redis metadata: {missing:?}"
    );
    let by_name = commands.iter().map(|s| (s.name, *s)).collect();
    Table { commands, by_name }
}

fn leak(
    m: &'static Meta,
    entry: Option<&'static Entry>,
    subcommands: Vec<(&'static str, &'static Spec)>,
) -> &'static Spec {
    Box::leak(Box::new(Spec {
        name: Box::leak(m.name.clone().into_boxed_str()),
        arity: m.arity,
        flags: flag_bits(&m.flags),
        key_specs: &m.key_specs,
        meta: m,
        handler: entry.map(|e| e.handler),
        traits: entry.map_or(0, |e| e.traits),
        subcommands,
    }))
}

/// A key a request names: its argument position and what the command does with it
/// ([`key_flag`] bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef {
    pub pos: usize,
    pub flags: u32,
}

/// The keys of a request (positions in `argv`), usually one or two.
pub type Keys = SmallVec<[KeyRef; 4]>;

/// Redis's `getKeysFromCommandWithSpecs`: the keys of `argv` (a request for `spec`, arity
/// checked) from its key specs; for a command whose specs cannot say (an unknown begin, or
/// flags that depend on the arguments), from its key-finding procedure. `None` when the
/// arguments are malformed for the specs (a `numkeys` that is not a count, a range past
/// the end), as Redis's "Invalid arguments specified for command".
pub fn keys(spec: &Spec, argv: &[Bytes]) -> Option<Keys> {
    let variable = spec
        .key_specs
        .iter()
        .any(|k| k.bits & key_flag::VARIABLE_FLAGS != 0);
    if !variable
        && spec
            .key_specs
            .iter()
            .any(|k| k.bits & key_flag::NOT_KEY == 0)
    {
        if let Some(keys) = keys_by_specs(spec.key_specs, argv) {
            return Some(keys);
        }
    }
    match native_keys(spec.name) {
        Some(f) => f(argv),
        None if spec.key_specs.is_empty() => Some(Keys::new()),
        None => None,
    }
}

/// What cluster routing hashes (Redis 7.0's `getNodeByQuery`): the keys, or for a
/// command naming shard channels ([`Spec::names_channels`]) the channels, from its
/// `not_key` specs. `None` as for [`keys`]; no channels (SUNSUBSCRIBE alone) is empty.
pub fn routed(spec: &Spec, argv: &[Bytes]) -> Option<Keys> {
    if !spec.names_channels() {
        return keys(spec, argv);
    }
    // A range that ends before it begins names nothing (SUNSUBSCRIBE without channels).
    Some(keys_by_specs(spec.key_specs, argv).unwrap_or_default())
}

/// Redis's `getKeysUsingKeySpecs`, without partial results: `None` if any spec is invalid
/// for these arguments.
fn keys_by_specs(specs: &[KeySpec], argv: &[Bytes]) -> Option<Keys> {
    let argc = argv.len() as i64;
    let mut out = Keys::new();
    for ks in specs {
        let first = match &ks.begin_search {
            BeginSearch::Index { index } => i64::from(*index),
            BeginSearch::Keyword { keyword, startfrom } => {
                let start = i64::from(*startfrom);
                let (from, to) = if start > 0 {
                    (start, argc - 1)
                } else {
                    (argc + start, 1)
                };
                let mut found = None;
                let mut i = from;
                loop {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                        found = Some(i + 1);
                        break;
                    }
                    if i == to {
                        break;
                    }
                    i += if from <= to { 1 } else { -1 };
                }
                match found {
                    Some(f) => f,
                    None => continue, // keyword absent: this spec names no key
                }
            }
            BeginSearch::Unknown {} => return None,
        };
        let (mut first, last, step) = match &ks.find_keys {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let lastkey = i64::from(*lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if *limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(*limit) + lastkey)
                };
                (first, last, i64::from(*keystep))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let idx = i64::from(*keynumidx);
                if idx >= argc - first {
                    return None;
                }
                let n = crate::protocol::parse::parse_i64(&argv[(first + idx) as usize])
                    .filter(|n| *n >= 0)?;
                let f = first + i64::from(*firstkey);
                (f, f + n - 1, i64::from(*keystep))
            }
            FindKeys::Unknown {} => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let step = step.max(1);
        while first <= last {
            out.push(KeyRef {
                pos: first as usize,
                flags: ks.bits,
            });
            first += step;
        }
        if ks.bits & key_flag::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(out)
}

/// A command's own key-finding procedure (Redis's `getkeys_proc`) where its key specs are
/// incomplete or their flags depend on the arguments.
type NativeKeys = fn(&[Bytes]) -> Option<Keys>;

fn native_keys(name: &str) -> Option<NativeKeys> {
    Some(match name {
        "sort" => sort_keys,
        "sort_ro" => sort_ro_keys,
        "set" => set_keys,
        "bitfield" => bitfield_keys,
        "migrate" => migrate_keys,
        _ => return None,
    })
}

/// A key a command reaches in another database than the client's (COPY ... DB n, MOVE):
/// its position in `argv` and the database number as sent (the command checks its range).
/// The key specs name only keys of the client's database; the dispatcher locks this one too.
pub fn other_db_key(spec: &Spec, argv: &[Bytes]) -> Option<(usize, i64)> {
    let number = |a: &Bytes| crate::protocol::parse::parse_i64(a);
    match spec.name {
        "move" if argv.len() == 3 => Some((1, number(&argv[2])?)),
        "copy" if argv.len() >= 3 => {
            let at = argv[3..]
                .iter()
                .rposition(|a| a.eq_ignore_ascii_case(b"db"))
                .map(|i| i + 3)?;
            Some((2, number(argv.get(at + 1)?)?))
        }
        _ => None,
    }
}

fn key(pos: usize, flags: u32) -> KeyRef {
    KeyRef { pos, flags }
}

/// SORT: the sorted key, and the last STORE destination (BY and GET patterns name keys only
/// through the data, which no key list can say).
fn sort_keys(argv: &[Bytes]) -> Option<Keys> {
    use key_flag::*;
    let mut out: Keys = [key(1, RO | ACCESS)].into_iter().collect();
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        let skip = if a.eq_ignore_ascii_case(b"limit") {
            2
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            1
        } else if a.eq_ignore_ascii_case(b"store") {
            if i + 1 < argv.len() {
                store = Some(i + 1);
            }
            1
        } else {
            0
        };
        i += 1 + skip;
    }
    if let Some(p) = store {
        out.push(key(p, OW | UPDATE));
    }
    Some(out)
}

fn sort_ro_keys(_argv: &[Bytes]) -> Option<Keys> {
    Some(
        [key(1, key_flag::RO | key_flag::ACCESS)]
            .into_iter()
            .collect(),
    )
}

/// SET reads its key only with GET; otherwise it overwrites it blindly.
fn set_keys(argv: &[Bytes]) -> Option<Keys> {
    use key_flag::*;
    let get = argv[3..].iter().any(|a| a.eq_ignore_ascii_case(b"get"));
    let flags = if get {
        RW | ACCESS | UPDATE
    } else {
        OW | UPDATE
    };
    Some([key(1, flags)].into_iter().collect())
}

/// MIGRATE: the key, or the keys after KEYS (its key specs mark the second form
/// incomplete), by MIGRATE's own parse, so that the stripes taken are the keys it moves.
fn migrate_keys(argv: &[Bytes]) -> Option<Keys> {
    use key_flag::*;
    let at = super::migrate::key_positions(argv)?;
    Some(at.map(|pos| key(pos, RW | ACCESS | DELETE)).collect())
}

/// BITFIELD only reads its key when every operation is a GET.
fn bitfield_keys(argv: &[Bytes]) -> Option<Keys> {
    use key_flag::*;
    let mut read_only = true;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        let remaining = argv.len() - i - 1;
        if a.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            i += 3;
        } else if (a.eq_ignore_ascii_case(b"set") || a.eq_ignore_ascii_case(b"incrby"))
            && remaining >= 3
        {
            read_only = false;
            break;
        } else if a.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            i += 2;
        } else {
            break; // a syntax error the command reports
        }
    }
    let flags = if read_only {
        RO | ACCESS
    } else {
        RW | ACCESS | UPDATE
    };
    Some([key(1, flags)].into_iter().collect())
}
