//! The argument syntax of each command, as COMMAND DOCS replies it in its `arguments` field
//! (redis-cli builds its `help` text and its typing hints from it).
//!
//! Each command's arguments are written as one line in a small syntax, parsed once at first
//! use into the tree Redis 7.0 replies. An argument is `name:type`, followed by modifiers:
//!
//! - `=TOKEN`: the word that introduces the argument (`seconds:integer=EX`);
//! - `(...)`: the nested arguments of a `oneof` or `block`;
//! - `?` optional, `*` multiple, `+` multiple_token (each repetition repeats the token);
//! - `@7.0.0` the version that added it, `~2.8.12` the version that deprecated it;
//! - `#1` the key spec index of a `key` argument (a key defaults to 0).
//!
//! An argument that is a bare upper-case word is a `pure-token` named as the lower-case word
//! (`NX` is `nx:pure-token=NX`).

use std::collections::HashMap;
use std::sync::OnceLock;

/// One argument in COMMAND DOCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocArg {
    pub name: String,
    /// string, integer, double, key, pattern, unix-time, pure-token, oneof or block.
    pub kind: &'static str,
    pub key_spec_index: Option<u32>,
    pub token: Option<&'static str>,
    pub since: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    /// A subset of `optional`, `multiple`, `multiple_token`, in that order.
    pub flags: Vec<&'static str>,
    pub args: Vec<DocArg>,
}

/// A deprecated command's `doc_flags`, `deprecated_since` and `replaced_by`.
pub struct Deprecation {
    pub since: &'static str,
    pub replaced_by: &'static str,
}

/// Every command and subcommand (`container|sub`) with its argument syntax. A command
/// without arguments has an empty line (Redis replies no `arguments` field for it).
pub static SYNTAX: &[(&str, &str)] = &[
    // connection
    ("ping", "message:string?"),
    ("echo", "message:string"),
    ("quit", ""),
    (
        "hello",
        "arguments:block(protover:integer username_password:block=AUTH(username:string \
         password:string)? clientname:string=SETNAME?)?",
    ),
    ("auth", "username:string?@6.0.0 password:string"),
    ("select", "index:integer"),
    ("reset", ""),
    // scripting
    (
        "eval",
        "script:string numkeys:integer key:key?* arg:string?*",
    ),
    (
        "evalsha",
        "sha1:string numkeys:integer key:key?* arg:string?*",
    ),
    (
        "eval_ro",
        "script:string numkeys:integer key:key?* arg:string?*",
    ),
    (
        "evalsha_ro",
        "sha1:string numkeys:integer key:key?* arg:string?*",
    ),
    ("script", ""),
    ("script|load", "script:string"),
    ("script|exists", "sha1:string*"),
    ("script|flush", "flush-type:oneof(ASYNC SYNC)?@6.2.0"),
    ("script|kill", ""),
    ("script|debug", "mode:oneof(YES SYNC NO)"),
    ("script|help", ""),
    // transactions
    ("multi", ""),
    ("exec", ""),
    ("discard", ""),
    ("watch", "key:key*"),
    ("unwatch", ""),
    ("client", ""),
    ("client|id", ""),
    ("client|setname", "connection-name:string"),
    ("client|getname", ""),
    (
        "client|list",
        "normal_master_replica_pubsub:oneof=TYPE(NORMAL MASTER REPLICA PUBSUB)?@5.0.0 \
         id:block=ID(client-id:integer*)?@6.2.0",
    ),
    ("client|info", ""),
    (
        "client|kill",
        "filter:oneof(ip:port:string~2.8.12 new-format:oneof(client-id:integer=ID?@2.8.12 \
         normal_master_slave_pubsub:oneof=TYPE(NORMAL MASTER@3.2.0 SLAVE REPLICA@5.0.0 \
         PUBSUB)?@2.8.12 username:string=USER? ip:port:string=ADDR? \
         ip:port:string=LADDR?@6.2.0 yes/no:string=SKIPME?)*)",
    ),
    // Redis 7.2's syntax (7.0 lacks the command).
    (
        "client|setinfo",
        "attr:oneof(libname:string=LIB-NAME libver:string=LIB-VER)",
    ),
    ("client|no-evict", "enabled:oneof(ON OFF)"),
    // Redis 7.2's syntax (7.0 lacks the command).
    ("client|no-touch", "enabled:oneof(ON OFF)"),
    ("client|reply", "on_off_skip:oneof(ON OFF SKIP)"),
    (
        "client|unblock",
        "client-id:integer timeout_error:oneof(TIMEOUT ERROR)?",
    ),
    ("client|help", ""),
    // server
    ("dbsize", ""),
    ("flushdb", "async:oneof(ASYNC@4.0.0 SYNC@6.2.0)?"),
    ("flushall", "async:oneof(ASYNC@4.0.0 SYNC@6.2.0)?"),
    ("time", ""),
    ("info", "section:string?*"),
    ("config", ""),
    ("config|get", "parameter:block(parameter:string)*"),
    (
        "config|set",
        "parameter_value:block(parameter:string value:string)*",
    ),
    ("config|resetstat", ""),
    ("config|rewrite", ""),
    ("config|help", ""),
    ("command", ""),
    ("command|count", ""),
    ("command|info", "command-name:string?*"),
    ("command|docs", "command-name:string?*"),
    (
        "command|list",
        "filterby:oneof=FILTERBY(module-name:string=MODULE category:string=ACLCAT \
         pattern:pattern=PATTERN)?",
    ),
    ("command|help", ""),
    (
        "shutdown",
        "nosave_save:oneof(NOSAVE SAVE)? NOW?@7.0.0 FORCE?@7.0.0 ABORT?@7.0.0",
    ),
    ("save", ""),
    ("bgsave", "SCHEDULE?@3.2.2"),
    ("lastsave", ""),
    ("slowlog", ""),
    ("slowlog|get", "count:integer?"),
    ("slowlog|len", ""),
    ("slowlog|reset", ""),
    ("slowlog|help", ""),
    ("memory", ""),
    ("memory|usage", "key:key count:integer=SAMPLES?"),
    ("memory|help", ""),
    ("object", ""),
    ("object|encoding", "key:key"),
    ("object|freq", "key:key"),
    ("object|idletime", "key:key"),
    ("object|refcount", "key:key"),
    ("object|help", ""),
    // pubsub
    ("subscribe", "channel:string*"),
    ("unsubscribe", "channel:string?*"),
    ("psubscribe", "pattern:block(pattern:pattern)*"),
    ("punsubscribe", "pattern:pattern?*"),
    ("publish", "channel:string message:string"),
    ("pubsub", ""),
    ("pubsub|channels", "pattern:pattern?"),
    ("pubsub|numpat", ""),
    ("pubsub|numsub", "channel:string?*"),
    ("pubsub|shardchannels", "pattern:pattern?"),
    ("pubsub|shardnumsub", "shardchannel:string?*"),
    ("pubsub|help", ""),
    // string
    ("get", "key:key"),
    (
        "set",
        "key:key value:string condition:oneof(NX XX)?@2.6.12 GET?@6.2.0 \
         expiration:oneof(seconds:integer=EX@2.6.12 milliseconds:integer=PX@2.6.12 \
         unix-time-seconds:unix-time=EXAT@6.2.0 unix-time-milliseconds:unix-time=PXAT@6.2.0 \
         KEEPTTL@6.0.0)?",
    ),
    ("setnx", "key:key value:string"),
    ("setex", "key:key seconds:integer value:string"),
    ("psetex", "key:key milliseconds:integer value:string"),
    ("getset", "key:key value:string"),
    ("getdel", "key:key"),
    (
        "getex",
        "key:key expiration:oneof(seconds:integer=EX milliseconds:integer=PX \
         unix-time-seconds:unix-time=EXAT unix-time-milliseconds:unix-time=PXAT PERSIST)?",
    ),
    ("mget", "key:key*"),
    ("mset", "key_value:block(key:key value:string)*"),
    ("msetnx", "key_value:block(key:key value:string)*"),
    ("append", "key:key value:string"),
    ("strlen", "key:key"),
    ("incr", "key:key"),
    ("decr", "key:key"),
    ("incrby", "key:key increment:integer"),
    ("decrby", "key:key decrement:integer"),
    ("incrbyfloat", "key:key increment:double"),
    ("getrange", "key:key start:integer end:integer"),
    ("substr", "key:key start:integer end:integer"),
    ("setrange", "key:key offset:integer value:string"),
    (
        "lcs",
        "key1:key key2:key LEN? IDX? len:integer=MINMATCHLEN? WITHMATCHLEN?",
    ),
    // hash
    ("hset", "key:key data:block(field:string value:string)*"),
    ("hsetnx", "key:key field:string value:string"),
    ("hmset", "key:key data:block(field:string value:string)*"),
    ("hget", "key:key field:string"),
    ("hmget", "key:key field:string*"),
    ("hgetall", "key:key"),
    ("hdel", "key:key field:string*"),
    ("hlen", "key:key"),
    ("hexists", "key:key field:string"),
    ("hkeys", "key:key"),
    ("hvals", "key:key"),
    ("hincrby", "key:key field:string increment:integer"),
    ("hincrbyfloat", "key:key field:string increment:double"),
    ("hstrlen", "key:key field:string"),
    (
        "hrandfield",
        "key:key options:block(count:integer WITHVALUES?)?",
    ),
    (
        "hscan",
        "key:key cursor:integer pattern:pattern=MATCH? count:integer=COUNT?",
    ),
    // set
    ("sadd", "key:key member:string*"),
    ("srem", "key:key member:string*"),
    ("smembers", "key:key"),
    ("sismember", "key:key member:string"),
    ("smismember", "key:key member:string*"),
    ("scard", "key:key"),
    ("spop", "key:key count:integer?@3.2.0"),
    ("srandmember", "key:key count:integer?@2.6.0"),
    ("smove", "source:key destination:key#1 member:string"),
    ("sinter", "key:key*"),
    ("sunion", "key:key*"),
    ("sdiff", "key:key*"),
    ("sinterstore", "destination:key key:key#1*"),
    ("sunionstore", "destination:key key:key#1*"),
    ("sdiffstore", "destination:key key:key#1*"),
    (
        "sintercard",
        "numkeys:integer key:key* limit:integer=LIMIT?",
    ),
    (
        "sscan",
        "key:key cursor:integer pattern:pattern=MATCH? count:integer=COUNT?",
    ),
    // bitmap
    ("setbit", "key:key offset:integer value:integer"),
    ("getbit", "key:key offset:integer"),
    (
        "bitcount",
        "key:key index:block(start:integer end:integer index_unit:oneof(BYTE BIT)?@7.0.0)?",
    ),
    (
        "bitpos",
        "key:key bit:integer index:block(start:integer end_index:block(end:integer \
         index_unit:oneof(BYTE BIT)?@7.0.0)?)?",
    ),
    // generic
    ("del", "key:key*"),
    ("unlink", "key:key*"),
    ("exists", "key:key*"),
    ("type", "key:key"),
    (
        "expire",
        "key:key seconds:integer condition:oneof(NX XX GT LT)?@7.0.0",
    ),
    (
        "pexpire",
        "key:key milliseconds:integer condition:oneof(NX XX GT LT)?@7.0.0",
    ),
    (
        "expireat",
        "key:key unix-time-seconds:unix-time condition:oneof(NX XX GT LT)?@7.0.0",
    ),
    (
        "pexpireat",
        "key:key unix-time-milliseconds:unix-time condition:oneof(NX XX GT LT)?@7.0.0",
    ),
    ("ttl", "key:key"),
    ("pttl", "key:key"),
    ("persist", "key:key"),
    ("keys", "pattern:pattern"),
    ("expiretime", "key:key"),
    ("pexpiretime", "key:key"),
    ("touch", "key:key*"),
    ("randomkey", ""),
    (
        "scan",
        "cursor:integer pattern:pattern=MATCH? count:integer=COUNT? type:string=TYPE?@6.0.0",
    ),
    ("rename", "key:key newkey:key#1"),
    ("renamenx", "key:key newkey:key#1"),
    (
        "copy",
        "source:key destination:key#1 destination-db:integer=DB? REPLACE?",
    ),
    // list
    ("lpush", "key:key element:string*"),
    ("rpush", "key:key element:string*"),
    ("lpushx", "key:key element:string*"),
    ("rpushx", "key:key element:string*"),
    ("lpop", "key:key count:integer?@6.2.0"),
    ("rpop", "key:key count:integer?@6.2.0"),
    ("llen", "key:key"),
    ("lrange", "key:key start:integer stop:integer"),
    ("lindex", "key:key index:integer"),
    ("lset", "key:key index:integer element:string"),
    (
        "linsert",
        "key:key where:oneof(BEFORE AFTER) pivot:string element:string",
    ),
    ("lrem", "key:key count:integer element:string"),
    ("ltrim", "key:key start:integer stop:integer"),
    (
        "lpos",
        "key:key element:string rank:integer=RANK? num-matches:integer=COUNT? \
         len:integer=MAXLEN?",
    ),
    (
        "lmove",
        "source:key destination:key#1 wherefrom:oneof(LEFT RIGHT) whereto:oneof(LEFT RIGHT)",
    ),
    ("rpoplpush", "source:key destination:key#1"),
    (
        "lmpop",
        "numkeys:integer key:key* where:oneof(LEFT RIGHT) count:integer=COUNT?",
    ),
    ("blpop", "key:key* timeout:double"),
    ("brpop", "key:key* timeout:double"),
    (
        "blmove",
        "source:key destination:key#1 wherefrom:oneof(LEFT RIGHT) whereto:oneof(LEFT RIGHT) \
         timeout:double",
    ),
    ("brpoplpush", "source:key destination:key#1 timeout:double"),
    (
        "blmpop",
        "timeout:double numkeys:integer key:key* where:oneof(LEFT RIGHT) count:integer=COUNT?",
    ),
    // sorted set
    (
        "zadd",
        "key:key condition:oneof(NX XX)?@3.0.2 comparison:oneof(GT LT)?@6.2.0 CH?@3.0.2 \
         INCR?@3.0.2 data:block(score:double member:string)*",
    ),
    ("zincrby", "key:key increment:integer member:string"),
    ("zrem", "key:key member:string*"),
    ("zcard", "key:key"),
    ("zcount", "key:key min:double max:double"),
    ("zlexcount", "key:key min:string max:string"),
    ("zscore", "key:key member:string"),
    ("zmscore", "key:key member:string*"),
    ("zrank", "key:key member:string"),
    ("zrevrank", "key:key member:string"),
    (
        "zrange",
        "key:key start:string stop:string sortby:oneof(BYSCORE BYLEX)?@6.2.0 REV?@6.2.0 \
         limit:block=LIMIT(offset:integer count:integer)?@6.2.0 WITHSCORES?",
    ),
    (
        "zrevrange",
        "key:key start:integer stop:integer WITHSCORES?",
    ),
    (
        "zrangebyscore",
        "key:key min:double max:double WITHSCORES?@2.0.0 \
         limit:block=LIMIT(offset:integer count:integer)?",
    ),
    (
        "zrevrangebyscore",
        "key:key max:double min:double WITHSCORES? \
         limit:block=LIMIT(offset:integer count:integer)?",
    ),
    (
        "zrangebylex",
        "key:key min:string max:string limit:block=LIMIT(offset:integer count:integer)?",
    ),
    (
        "zrevrangebylex",
        "key:key max:string min:string limit:block=LIMIT(offset:integer count:integer)?",
    ),
    (
        "zrangestore",
        "dst:key src:key#1 min:string max:string sortby:oneof(BYSCORE BYLEX)? REV? \
         limit:block=LIMIT(offset:integer count:integer)?",
    ),
    ("zpopmin", "key:key count:integer?"),
    ("zpopmax", "key:key count:integer?"),
    (
        "zmpop",
        "numkeys:integer key:key* where:oneof(MIN MAX) count:integer=COUNT?",
    ),
    ("bzpopmin", "key:key* timeout:double"),
    ("bzpopmax", "key:key* timeout:double"),
    (
        "bzmpop",
        "timeout:double numkeys:integer key:key* where:oneof(MIN MAX) count:integer=COUNT?",
    ),
    ("zremrangebyrank", "key:key start:integer stop:integer"),
    ("zremrangebyscore", "key:key min:double max:double"),
    ("zremrangebylex", "key:key min:string max:string"),
    (
        "zscan",
        "key:key cursor:integer pattern:pattern=MATCH? count:integer=COUNT?",
    ),
    (
        "zunion",
        "numkeys:integer key:key* weight:integer=WEIGHTS?* \
         aggregate:oneof=AGGREGATE(SUM MIN MAX)? WITHSCORES?",
    ),
    (
        "zinter",
        "numkeys:integer key:key* weight:integer=WEIGHTS?* \
         aggregate:oneof=AGGREGATE(SUM MIN MAX)? WITHSCORES?",
    ),
    ("zdiff", "numkeys:integer key:key* WITHSCORES?"),
    (
        "zunionstore",
        "destination:key numkeys:integer key:key#1* weight:integer=WEIGHTS?* \
         aggregate:oneof=AGGREGATE(SUM MIN MAX)?",
    ),
    (
        "zinterstore",
        "destination:key numkeys:integer key:key#1* weight:integer=WEIGHTS?* \
         aggregate:oneof=AGGREGATE(SUM MIN MAX)?",
    ),
    ("zdiffstore", "destination:key numkeys:integer key:key#1*"),
    (
        "zintercard",
        "numkeys:integer key:key* limit:integer=LIMIT?",
    ),
    (
        "zrandmember",
        "key:key options:block(count:integer WITHSCORES?)?",
    ),
];

/// Deprecated commands, as COMMAND DOCS marks them.
pub static DEPRECATED: &[(&str, Deprecation)] = &[
    (
        "getset",
        Deprecation {
            since: "6.2.0",
            replaced_by: "`SET` with the `!GET` argument",
        },
    ),
    (
        "substr",
        Deprecation {
            since: "2.0.0",
            replaced_by: "`GETRANGE`",
        },
    ),
    (
        "rpoplpush",
        Deprecation {
            since: "6.2.0",
            replaced_by: "`LMOVE` with the `RIGHT` and `LEFT` arguments",
        },
    ),
    (
        "brpoplpush",
        Deprecation {
            since: "6.2.0",
            replaced_by: "`BLMOVE` with the `RIGHT` and `LEFT` arguments",
        },
    ),
];

const KINDS: &[&str] = &[
    "string",
    "integer",
    "double",
    "key",
    "pattern",
    "unix-time",
    "pure-token",
    "oneof",
    "block",
];

/// The parsed arguments of a command by its full name (`get`, `client|kill`); `None` for a
/// name the table lacks.
pub fn arguments(full_name: &str) -> Option<&'static [DocArg]> {
    static PARSED: OnceLock<HashMap<&'static str, Vec<DocArg>>> = OnceLock::new();
    let map = PARSED.get_or_init(|| {
        SYNTAX
            .iter()
            .map(|(name, syntax)| {
                // The table is static; its unit test parses every line.
                let args = parse(syntax).unwrap_or_else(|e| panic!("docs of {name}: {e}"));
                (*name, args)
            })
            .collect()
    });
    map.get(full_name).map(Vec::as_slice)
}

pub fn deprecation(full_name: &str) -> Option<&'static Deprecation> {
    DEPRECATED
        .iter()
        .find(|(n, _)| *n == full_name)
        .map(|(_, d)| d)
}

/// Parses one line of the syntax described in the module comment.
pub fn parse(syntax: &'static str) -> Result<Vec<DocArg>, String> {
    let mut p = Parser { s: syntax, pos: 0 };
    let args = p.list()?;
    if p.pos != syntax.len() {
        return Err(format!("unexpected `{}` at {}", &syntax[p.pos..], p.pos));
    }
    Ok(args)
}

struct Parser {
    s: &'static str,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Arguments up to the end or a closing parenthesis.
    fn list(&mut self) -> Result<Vec<DocArg>, String> {
        let mut args = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None | Some(b')') => return Ok(args),
                _ => args.push(self.arg()?),
            }
        }
    }

    /// Characters up to one of `stops`, a space or a parenthesis.
    fn word(&mut self, stops: &[u8]) -> &'static str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == b' ' || c == b'(' || c == b')' || stops.contains(&c) {
                break;
            }
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    fn arg(&mut self) -> Result<DocArg, String> {
        let head = self.word(b"=?*+@~#");
        let mut arg = match head.rsplit_once(':') {
            Some((name, kind)) => {
                let kind = KINDS
                    .iter()
                    .find(|k| **k == kind)
                    .ok_or_else(|| format!("unknown type `{kind}` of `{name}`"))?;
                DocArg::new(name.to_string(), kind)
            }
            None if !head.is_empty() && !head.bytes().any(|c| c.is_ascii_lowercase()) => {
                let mut a = DocArg::new(head.to_ascii_lowercase(), "pure-token");
                a.token = Some(head);
                a
            }
            None => return Err(format!("`{head}` is neither name:type nor a TOKEN")),
        };
        if arg.kind == "key" {
            arg.key_spec_index = Some(0);
        }
        let mut flags = [false; 3];
        loop {
            match self.peek() {
                Some(b'=') => {
                    self.pos += 1;
                    arg.token = Some(self.word(b"?*+@~#"));
                }
                Some(b'(') => {
                    self.pos += 1;
                    arg.args = self.list()?;
                    if self.peek() != Some(b')') {
                        return Err(format!("unclosed `(` in `{}`", arg.name));
                    }
                    self.pos += 1;
                }
                Some(b'?') => (flags[0], self.pos) = (true, self.pos + 1),
                Some(b'*') => (flags[1], self.pos) = (true, self.pos + 1),
                Some(b'+') => (flags[2], self.pos) = (true, self.pos + 1),
                Some(b'@') => {
                    self.pos += 1;
                    arg.since = Some(self.word(b"?*+@~#"));
                }
                Some(b'~') => {
                    self.pos += 1;
                    arg.deprecated_since = Some(self.word(b"?*+@~#"));
                }
                Some(b'#') => {
                    self.pos += 1;
                    let n = self.word(b"?*+@~#");
                    arg.key_spec_index =
                        Some(n.parse().map_err(|_| format!("bad key spec index `{n}`"))?);
                }
                _ => break,
            }
        }
        arg.flags = ["optional", "multiple", "multiple_token"]
            .into_iter()
            .zip(flags)
            .filter(|(_, on)| *on)
            .map(|(f, _)| f)
            .collect();
        let nested = matches!(arg.kind, "oneof" | "block");
        if nested == arg.args.is_empty() {
            return Err(format!(
                "`{}`: only a oneof or block has (nested arguments), and it must",
                arg.name
            ));
        }
        if arg.kind == "pure-token" && arg.token.is_none() {
            return Err(format!("pure-token `{}` without a token", arg.name));
        }
        Ok(arg)
    }
}

impl DocArg {
    fn new(name: String, kind: &'static str) -> Self {
        DocArg {
            name,
            kind,
            key_spec_index: None,
            token: None,
            since: None,
            deprecated_since: None,
            flags: Vec::new(),
            args: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_set() {
        let args = parse(SYNTAX.iter().find(|(n, _)| *n == "set").unwrap().1).unwrap();
        assert_eq!(args.len(), 5);
        assert_eq!(args[0].kind, "key");
        assert_eq!(args[0].key_spec_index, Some(0));
        assert_eq!(args[2].name, "condition");
        assert_eq!(args[2].flags, vec!["optional"]);
        assert_eq!(args[2].since, Some("2.6.12"));
        assert_eq!(args[2].args[1].token, Some("XX"));
        assert_eq!(args[2].args[1].name, "xx");
        assert_eq!(args[4].args[3].name, "unix-time-milliseconds");
        assert_eq!(args[4].args[3].kind, "unix-time");
        assert_eq!(args[4].args[3].token, Some("PXAT"));
    }

    #[test]
    fn names_with_colons_and_deprecations() {
        let args = parse("filter:oneof(ip:port:string~2.8.12 x:integer=ID?*+)").unwrap();
        let inner = &args[0].args;
        assert_eq!(inner[0].name, "ip:port");
        assert_eq!(inner[0].deprecated_since, Some("2.8.12"));
        assert_eq!(
            inner[1].flags,
            vec!["optional", "multiple", "multiple_token"]
        );
    }

    #[test]
    fn rejects_bad_lines() {
        for bad in [
            "x:strin",
            "x:oneof",
            "x:string(y:string)",
            "lower",
            "x:oneof(A",
            "A)",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_command_has_docs_that_parse() {
        for s in crate::cmd::all_commands() {
            assert!(arguments(s.name).is_some(), "{} has no docs line", s.name);
            for sub in s.subcommands {
                let full = format!("{}|{}", s.name, sub.name);
                assert!(arguments(&full).is_some(), "{full} has no docs line");
            }
        }
        for (name, syntax) in SYNTAX {
            assert!(parse(syntax).is_ok(), "{name}: {:?}", parse(syntax));
            let spec = match name.split_once('|') {
                None => crate::cmd::lookup(name),
                Some((c, sub)) => {
                    crate::cmd::lookup(c).and_then(|c| c.subcommands.iter().find(|s| s.name == sub))
                }
            };
            assert!(spec.is_some(), "{name} is not a command");
        }
    }
}
