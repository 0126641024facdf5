//! Commands over TCP, in-process on an ephemeral port: each command's Redis 7 replies and
//! error texts (compared by hand against redis-server 7.0.15), binary data, expiry,
//! persistence across a restart and atomic read-modify-writes.

mod common;

use common::{start, Client, V};
use std::time::Duration;

fn int(n: i64) -> V {
    V::Int(n)
}

#[test]
fn connection_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(c.q(&["ping", "hi"]), V::bulk("hi"));
    assert_eq!(
        c.q(&["PING", "a", "b"]),
        V::err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(c.q(&["ECHO", "x y"]), V::bulk("x y"));
    assert_eq!(c.q(&["SELECT", "1"]), V::ok());
    assert_eq!(
        c.q(&["SELECT", "16"]),
        V::err("ERR DB index is out of range")
    );
    assert_eq!(
        c.q(&["SELECT", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    // Databases are separate key spaces.
    assert_eq!(c.q(&["SET", "k", "one"]), V::ok());
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    assert_eq!(c.q(&["GET", "k"]), V::NilBulk);
    assert_eq!(
        c.q(&["HELLO", "4"]),
        V::err("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        c.q(&["HELLO", "abc"]),
        V::err("ERR Protocol version is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["HELLO", "3", "foo"]),
        V::err("ERR Syntax error in HELLO option 'foo'")
    );
    assert_eq!(
        c.q(&["AUTH", "x"]),
        V::err(
            "ERR AUTH <password> called without any password configured for the default \
             user. Are you sure your configuration is correct?"
        )
    );
    assert_eq!(
        c.q(&["AUTH", "a", "b"]),
        V::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.q(&["AUTH", "default", "anything"]), V::ok());
    // HELLO 3 switches to RESP3: a map reply, `_` nulls, `=` verbatim text.
    let V::Map(m) = c.q(&["HELLO", "3", "SETNAME", "tester"]) else {
        panic!("HELLO 3 must reply with a map")
    };
    assert_eq!(m[0], (V::bulk("server"), V::bulk("redis")));
    assert_eq!(m[2], (V::bulk("proto"), int(3)));
    assert_eq!(m[6], (V::bulk("modules"), V::Array(vec![])));
    assert_eq!(c.q(&["GET", "nokey"]), V::Null);
    assert_eq!(c.q(&["MGET", "nokey"]), V::Array(vec![V::Null]));
    let V::Map(cfg) = c.q(&["CONFIG", "GET", "port"]) else {
        panic!("CONFIG GET in RESP3 is a map")
    };
    assert_eq!(cfg[0].0, V::bulk("port"));
    assert!(matches!(c.q(&["INFO", "server"]), V::Verbatim(f, _) if f == "txt"));
    let V::Array(info) = c.q(&["COMMAND", "INFO", "get"]) else {
        panic!()
    };
    let V::Array(get) = &info[0] else { panic!() };
    assert_eq!(
        get[2],
        V::Set(vec![V::Simple("readonly".into()), V::Simple("fast".into())])
    );
    assert_eq!(
        c.q(&["HELLO", "2", "SETNAME", "a b"]),
        V::err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    let V::Array(m) = c.q(&["HELLO", "2"]) else {
        panic!("HELLO 2 replies with a flat array")
    };
    assert_eq!(m.len(), 14);
    assert_eq!(c.q(&["GET", "nokey"]), V::NilBulk);
    assert_eq!(c.q(&["QUIT"]), V::ok());
    assert!(c.closed());
    s.shutdown().unwrap();
}

#[test]
fn set_and_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    assert_eq!(c.q(&["GET", "nokey"]), V::NilBulk);
    assert_eq!(c.q(&["SET", "k", "v", "NX"]), V::NilBulk);
    assert_eq!(c.q(&["SET", "k", "v", "XX"]), V::ok());
    assert_eq!(c.q(&["SET", "k2", "v", "XX"]), V::NilBulk);
    assert_eq!(c.q(&["SET", "k", "v1", "GET"]), V::bulk("v"));
    assert_eq!(c.q(&["SET", "k", "v2", "NX", "GET"]), V::bulk("v1"));
    assert_eq!(c.q(&["SET", "new", "v", "GET"]), V::NilBulk);
    let invalid = V::err("ERR invalid expire time in 'set' command");
    assert_eq!(c.q(&["SET", "k", "v", "EX", "0"]), invalid);
    assert_eq!(c.q(&["SET", "k", "v", "PX", "-5"]), invalid);
    assert_eq!(
        c.q(&["SET", "k", "v", "PX", "9223372036854775807"]),
        invalid
    );
    assert_eq!(c.q(&["SET", "k", "v", "EX", "9223372036854775"]), invalid);
    assert_eq!(
        c.q(&["SET", "k", "v", "EX", "abc"]),
        V::err("ERR value is not an integer or out of range")
    );
    let syntax = V::err("ERR syntax error");
    assert_eq!(c.q(&["SET", "k", "v", "NX", "XX"]), syntax);
    assert_eq!(c.q(&["SET", "k", "v", "KEEPTTL", "EX", "1"]), syntax);
    assert_eq!(c.q(&["SET", "k", "v", "EX", "1", "PX", "1"]), syntax);
    assert_eq!(c.q(&["SET", "k", "v", "EX"]), syntax);
    assert_eq!(c.q(&["SET", "k", "v", "FOO"]), syntax);
    assert_eq!(c.q(&["SET", "k", "v", "EX", "100"]), V::ok());
    assert_eq!(c.q(&["TTL", "k"]), int(100));
    assert_eq!(c.q(&["SET", "k", "v", "KEEPTTL"]), V::ok());
    assert_eq!(c.q(&["TTL", "k"]), int(100));
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    assert_eq!(c.q(&["TTL", "k"]), int(-1));
    assert_eq!(c.q(&["SET", "k", "v", "PXAT", "1"]), V::ok());
    assert_eq!(c.q(&["EXISTS", "k"]), int(0), "PXAT in the past deletes");
    let far = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1000)
        .to_string();
    assert_eq!(c.q(&["SET", "k", "v", "EXAT", &far]), V::ok());
    let V::Int(t) = c.q(&["TTL", "k"]) else {
        panic!()
    };
    assert!((999..=1000).contains(&t), "{t}");
    // The variants.
    assert_eq!(c.q(&["SETNX", "k", "x"]), int(0));
    assert_eq!(c.q(&["SETNX", "k3", "x"]), int(1));
    assert_eq!(
        c.q(&["SETEX", "k", "0", "v"]),
        V::err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.q(&["PSETEX", "k", "0", "v"]),
        V::err("ERR invalid expire time in 'psetex' command")
    );
    assert_eq!(c.q(&["SETEX", "k", "100", "v"]), V::ok());
    assert_eq!(c.q(&["TTL", "k"]), int(100));
    assert_eq!(c.q(&["PSETEX", "k", "100000", "v"]), V::ok());
    assert_eq!(c.q(&["TTL", "k"]), int(100));
    assert_eq!(c.q(&["GETSET", "k", "new"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(-1));
    assert_eq!(c.q(&["GETSET", "nokey2", "x"]), V::NilBulk);
    assert_eq!(c.q(&["GETDEL", "k"]), V::bulk("new"));
    assert_eq!(c.q(&["GETDEL", "k"]), V::NilBulk);
    assert_eq!(
        c.q(&["GET"]),
        V::err("ERR wrong number of arguments for 'get' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn multi_key_and_numeric_strings() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["MSET", "a", "1", "b", "2", "c", "3"]), V::ok());
    assert_eq!(
        c.q(&["MSET", "a", "1", "b"]),
        V::err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(
        c.q(&["MGET", "a", "b", "nokey", "c"]),
        V::Array(vec![V::bulk("1"), V::bulk("2"), V::NilBulk, V::bulk("3")])
    );
    assert_eq!(c.q(&["MSET", "d", "x", "d", "y"]), V::ok());
    assert_eq!(c.q(&["GET", "d"]), V::bulk("y"), "the last value wins");
    assert_eq!(c.q(&["APPEND", "a", "xyz"]), int(4));
    assert_eq!(c.q(&["APPEND", "newa", "xyz"]), int(3));
    assert_eq!(c.q(&["STRLEN", "a"]), int(4));
    assert_eq!(c.q(&["STRLEN", "nokey"]), int(0));
    let not_int = V::err("ERR value is not an integer or out of range");
    assert_eq!(c.q(&["INCR", "b"]), int(3));
    assert_eq!(c.q(&["INCR", "a"]), not_int);
    assert_eq!(c.q(&["DECR", "b"]), int(2));
    assert_eq!(c.q(&["INCRBY", "b", "10"]), int(12));
    assert_eq!(c.q(&["DECRBY", "b", "5"]), int(7));
    assert_eq!(c.q(&["INCR", "fresh"]), int(1));
    assert_eq!(c.q(&["INCRBY", "b", "abc"]), not_int);
    assert_eq!(
        c.q(&["DECRBY", "b", "-9223372036854775808"]),
        V::err("ERR decrement would overflow")
    );
    assert_eq!(c.q(&["SET", "i", "9223372036854775807"]), V::ok());
    assert_eq!(
        c.q(&["INCR", "i"]),
        V::err("ERR increment or decrement would overflow")
    );
    assert_eq!(c.q(&["SET", "sp", " 1"]), V::ok());
    assert_eq!(c.q(&["INCR", "sp"]), not_int);
    // INCR keeps the TTL.
    assert_eq!(c.q(&["SET", "t", "1", "EX", "100"]), V::ok());
    assert_eq!(c.q(&["INCR", "t"]), int(2));
    assert_eq!(c.q(&["TTL", "t"]), int(100));
    assert_eq!(c.q(&["SET", "f", "10.5"]), V::ok());
    assert_eq!(c.q(&["INCRBYFLOAT", "f", "0.1"]), V::bulk("10.6"));
    assert_eq!(
        c.q(&["INCRBYFLOAT", "f", "abc"]),
        V::err("ERR value is not a valid float")
    );
    assert_eq!(c.q(&["SET", "f", "3.0"]), V::ok());
    assert_eq!(c.q(&["INCRBYFLOAT", "f", "2"]), V::bulk("5"));
    assert_eq!(c.q(&["INCRBYFLOAT", "newf", "5.0e3"]), V::bulk("5000"));
    assert_eq!(c.q(&["SET", "s", "Hello World"]), V::ok());
    assert_eq!(c.q(&["GETRANGE", "s", "0", "4"]), V::bulk("Hello"));
    assert_eq!(c.q(&["GETRANGE", "s", "-5", "-1"]), V::bulk("World"));
    assert_eq!(c.q(&["GETRANGE", "s", "5", "2"]), V::bulk(""));
    assert_eq!(c.q(&["GETRANGE", "s", "-1", "-5"]), V::bulk(""));
    assert_eq!(c.q(&["GETRANGE", "s", "0", "100"]), V::bulk("Hello World"));
    assert_eq!(c.q(&["GETRANGE", "nokey", "0", "1"]), V::bulk(""));
    assert_eq!(c.q(&["GETRANGE", "s", "a", "b"]), not_int);
    assert_eq!(c.q(&["SETRANGE", "s", "6", "Redis"]), int(11));
    assert_eq!(c.q(&["GET", "s"]), V::bulk("Hello Redis"));
    assert_eq!(
        c.q(&["SETRANGE", "s", "-1", "x"]),
        V::err("ERR offset is out of range")
    );
    assert_eq!(c.q(&["SETRANGE", "s2", "5", "x"]), int(6));
    assert_eq!(
        c.q(&["GET", "s2"]),
        V::Bulk(b"\0\0\0\0\0x".to_vec()),
        "padded with zero bytes"
    );
    assert_eq!(c.q(&["SETRANGE", "s2", "0", ""]), int(6));
    assert_eq!(c.q(&["SETRANGE", "nokey3", "0", ""]), int(0));
    assert_eq!(c.q(&["EXISTS", "nokey3"]), int(0));
    assert_eq!(
        c.q(&["SETRANGE", "s", "536870912", "x"]),
        V::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    s.shutdown().unwrap();
}

#[test]
fn keyspace_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["MSET", "a", "1", "b", "2", "c", "3"]), V::ok());
    assert_eq!(c.q(&["EXISTS", "a", "b", "nokey", "a"]), int(3));
    assert_eq!(c.q(&["DEL", "a", "b", "nokey", "a"]), int(2));
    assert_eq!(c.q(&["UNLINK", "a", "c"]), int(1));
    assert_eq!(c.q(&["TYPE", "c"]), V::Simple("none".into()));
    assert_eq!(c.q(&["SET", "c", "v"]), V::ok());
    assert_eq!(c.q(&["TYPE", "c"]), V::Simple("string".into()));
    // EXPIRE and its options.
    assert_eq!(c.q(&["TTL", "c"]), int(-1));
    assert_eq!(c.q(&["TTL", "nokey"]), int(-2));
    assert_eq!(c.q(&["PTTL", "nokey"]), int(-2));
    assert_eq!(c.q(&["EXPIRE", "c", "100", "XX"]), int(0));
    assert_eq!(
        c.q(&["EXPIRE", "c", "100", "GT"]),
        int(0),
        "no TTL is infinite"
    );
    assert_eq!(c.q(&["EXPIRE", "c", "100"]), int(1));
    assert_eq!(c.q(&["TTL", "c"]), int(100));
    assert_eq!(c.q(&["EXPIRE", "c", "100", "NX"]), int(0));
    assert_eq!(c.q(&["EXPIRE", "c", "200", "XX"]), int(1));
    assert_eq!(c.q(&["EXPIRE", "c", "50", "GT"]), int(0));
    assert_eq!(c.q(&["EXPIRE", "c", "500", "gt"]), int(1));
    assert_eq!(c.q(&["EXPIRE", "c", "50", "LT"]), int(1));
    assert_eq!(c.q(&["TTL", "c"]), int(50));
    assert_eq!(
        c.q(&["EXPIRE", "c", "10", "NX", "XX"]),
        V::err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        c.q(&["EXPIRE", "c", "10", "GT", "LT"]),
        V::err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        c.q(&["EXPIRE", "c", "10", "foo"]),
        V::err("ERR Unsupported option foo")
    );
    assert_eq!(
        c.q(&["EXPIRE", "c", "abc"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["EXPIRE", "nokey", "9223372036854775"]),
        V::err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(c.q(&["EXPIRE", "nokey", "10"]), int(0));
    assert_eq!(c.q(&["PERSIST", "c"]), int(1));
    assert_eq!(c.q(&["PERSIST", "c"]), int(0));
    assert_eq!(c.q(&["PEXPIRE", "c", "100000"]), int(1));
    let V::Int(pt) = c.q(&["PTTL", "c"]) else {
        panic!()
    };
    assert!((99_000..=100_000).contains(&pt), "{pt}");
    assert_eq!(c.q(&["EXPIREAT", "c", "99999999999"]), int(1));
    assert_eq!(c.q(&["PEXPIREAT", "c", "1"]), int(1));
    assert_eq!(
        c.q(&["EXISTS", "c"]),
        int(0),
        "an expiry in the past deletes"
    );
    assert_eq!(c.q(&["SET", "e", "v"]), V::ok());
    assert_eq!(c.q(&["EXPIRE", "e", "-1"]), int(1));
    assert_eq!(c.q(&["GET", "e"]), V::NilBulk);
    // KEYS with Redis's glob.
    assert_eq!(
        c.q(&["MSET", "user:1", "a", "user:2", "b", "other", "c", "h*llo", "d"]),
        V::ok()
    );
    let sorted = |v: V| {
        let V::Array(mut a) = v else { panic!("{v:?}") };
        a.sort_by_key(|x| format!("{x:?}"));
        a
    };
    assert_eq!(
        sorted(c.q(&["KEYS", "user:*"])),
        sorted(V::arr(&["user:1", "user:2"]))
    );
    assert_eq!(
        sorted(c.q(&["KEYS", "u?er:[^1]"])),
        sorted(V::arr(&["user:2"]))
    );
    assert_eq!(c.q(&["KEYS", "h\\*llo"]), V::arr(&["h*llo"]));
    assert_eq!(c.q(&["KEYS", "nomatch*"]), V::Array(vec![]));
    assert_eq!(sorted(c.q(&["KEYS", "*"])).len(), 4);
    s.shutdown().unwrap();
}

#[test]
fn server_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["DBSIZE"]), int(0));
    assert_eq!(c.q(&["MSET", "a", "1", "b", "2"]), V::ok());
    assert_eq!(c.q(&["SET", "t", "1", "EX", "100"]), V::ok());
    assert_eq!(c.q(&["DBSIZE"]), int(3));
    let V::Bulk(info) = c.q(&["INFO"]) else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    for field in [
        "# Server\r\nredis_version:",
        "redis_mode:standalone",
        "tcp_port:",
        "uptime_in_seconds:",
        "# Clients\r\nconnected_clients:1\r\n",
        "maxclients:10000",
        "# Memory\r\nused_memory:",
        "# Persistence\r\nloading:0",
        "# Stats\r\ntotal_connections_received:1\r\n",
        "total_commands_processed:",
        "keyspace_hits:",
        "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
        "master_repl_offset:0",
        "# CPU\r\nused_cpu_sys:",
        "used_cpu_user_children:",
        "# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=",
        "# Strata\r\nstrata_version:",
        "strata_shards:2",
    ] {
        assert!(info.contains(field), "{field:?} missing from\n{info}");
    }
    let V::Bulk(ks) = c.q(&["INFO", "keyspace"]) else {
        panic!()
    };
    assert!(String::from_utf8(ks)
        .unwrap()
        .starts_with("# Keyspace\r\ndb0:keys=3"));
    assert_eq!(c.q(&["SELECT", "1"]), V::ok());
    assert_eq!(c.q(&["SET", "x", "1"]), V::ok());
    assert_eq!(c.q(&["FLUSHDB"]), V::ok());
    assert_eq!(c.q(&["DBSIZE"]), int(0));
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    assert_eq!(
        c.q(&["DBSIZE"]),
        int(3),
        "FLUSHDB empties only its database"
    );
    assert_eq!(c.q(&["FLUSHDB", "x"]), V::err("ERR syntax error"));
    assert_eq!(c.q(&["FLUSHALL", "SYNC"]), V::ok());
    assert_eq!(c.q(&["DBSIZE"]), int(0));
    let V::Array(t) = c.q(&["TIME"]) else {
        panic!()
    };
    assert_eq!(t.len(), 2);
    // CONFIG.
    assert_eq!(
        c.q(&["CONFIG", "GET", "maxclients"]),
        V::arr(&["maxclients", "10000"])
    );
    assert_eq!(c.q(&["CONFIG", "SET", "timeout", "30"]), V::ok());
    assert_eq!(
        c.q(&["CONFIG", "GET", "timeout"]),
        V::arr(&["timeout", "30"])
    );
    assert_eq!(
        c.q(&["CONFIG", "SET", "maxclients", "abc"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument \
             couldn't be parsed into an integer"
        )
    );
    assert_eq!(
        c.q(&["CONFIG", "SET", "nosuch", "1"]),
        V::err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    );
    assert_eq!(
        c.q(&["CONFIG", "GET"]),
        V::err("ERR wrong number of arguments for 'config|get' command")
    );
    assert_eq!(
        c.q(&["CONFIG"]),
        V::err("ERR wrong number of arguments for 'config' command")
    );
    assert_eq!(
        c.q(&["CONFIG", "foo"]),
        V::err("ERR unknown subcommand 'foo'. Try CONFIG HELP.")
    );
    // COMMAND.
    let V::Int(n) = c.q(&["COMMAND", "COUNT"]) else {
        panic!()
    };
    assert!(n >= 40, "{n}");
    let V::Array(all) = c.q(&["COMMAND"]) else {
        panic!()
    };
    assert_eq!(all.len() as i64, n);
    let V::Array(info) = c.q(&["COMMAND", "INFO", "get", "nosuch", "config|get"]) else {
        panic!()
    };
    // redis-server 7.0.15 answers an unknown name with a null bulk (`addReplyNull`).
    assert_eq!(info[1], V::NilBulk);
    let V::Array(get) = &info[0] else { panic!() };
    assert_eq!(get[0], V::bulk("get"));
    assert_eq!(get[1], int(2));
    assert_eq!(&get[3..6], &[int(1), int(1), int(1)]);
    assert_eq!(
        get[6],
        V::Array(vec![
            V::Simple("@read".into()),
            V::Simple("@string".into()),
            V::Simple("@fast".into())
        ])
    );
    let V::Array(bz) = &c.q(&["COMMAND", "INFO", "bzpopmin"]) else {
        panic!()
    };
    let V::Array(bz) = &bz[0] else { panic!() };
    assert_eq!(&bz[1..2], &[int(-3)]);
    assert_eq!(&bz[3..6], &[int(1), int(-2), int(1)]);
    let cats = ["@write", "@sortedset", "@fast", "@blocking"];
    assert_eq!(
        bz[6],
        V::Array(cats.iter().map(|c| V::Simple(c.to_string())).collect())
    );
    let V::Array(cg) = &info[2] else { panic!() };
    assert_eq!(cg[0], V::bulk("config|get"));
    let V::Array(mset) = &c.q(&["COMMAND", "INFO", "mset"]) else {
        panic!()
    };
    let V::Array(mset) = &mset[0] else { panic!() };
    assert_eq!(&mset[3..6], &[int(1), int(-1), int(2)]);
    let V::Array(docs) = c.q(&["COMMAND", "DOCS", "get"]) else {
        panic!()
    };
    assert_eq!(docs[0], V::bulk("get"));
    let V::Array(list) = c.q(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config*"]) else {
        panic!()
    };
    assert!(list.contains(&V::bulk("config|get")), "{list:?}");
    // Unknown commands and arity.
    assert_eq!(
        c.q(&["foo", "a", "b"]),
        V::err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        c.q(&["MSET"]),
        V::err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(
        c.q(&["TIME", "x"]),
        V::err("ERR wrong number of arguments for 'time' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn binary_keys_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let key: &[u8] = b"\x00\xff\r\n{tag}\x01";
    let val: Vec<u8> = (0..=255u8).chain(b"\r\n$-1\r\n".iter().copied()).collect();
    assert_eq!(c.qb(&[b"SET", key, &val]), V::ok());
    assert_eq!(c.qb(&[b"GET", key]), V::Bulk(val.clone()));
    assert_eq!(c.qb(&[b"STRLEN", key]), int(val.len() as i64));
    assert_eq!(c.qb(&[b"APPEND", key, b"\x00"]), int(val.len() as i64 + 1));
    assert_eq!(
        c.qb(&[b"KEYS", b"*"]),
        V::Array(vec![V::Bulk(key.to_vec())])
    );
    assert_eq!(c.qb(&[b"SET", b"", b""]), V::ok(), "the empty key is a key");
    assert_eq!(c.qb(&[b"GET", b""]), V::bulk(""));
    assert_eq!(c.qb(&[b"EXISTS", b""]), int(1));
    let big = vec![7u8; 3 * 1024 * 1024];
    assert_eq!(c.qb(&[b"SET", b"big", &big]), V::ok());
    assert_eq!(c.qb(&[b"GET", b"big"]), V::Bulk(big));
    s.shutdown().unwrap();
}

#[test]
fn short_ttls_expire_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "a", "v", "PX", "100"]), V::ok());
    assert_eq!(c.q(&["PSETEX", "b", "100", "v"]), V::ok());
    assert_eq!(c.q(&["SET", "c", "v"]), V::ok());
    assert_eq!(c.q(&["PEXPIRE", "c", "100"]), int(1));
    assert_eq!(c.q(&["SET", "keep", "v"]), V::ok());
    assert_eq!(c.q(&["GET", "a"]), V::bulk("v"));
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(c.q(&["GET", "a"]), V::NilBulk);
    assert_eq!(c.q(&["TTL", "b"]), int(-2));
    assert_eq!(
        c.q(&["MGET", "c", "keep"]),
        V::Array(vec![V::NilBulk, V::bulk("v")])
    );
    assert_eq!(c.q(&["EXISTS", "c"]), int(0));
    assert_eq!(
        c.q(&["SET", "a", "new", "NX"]),
        V::ok(),
        "an expired key is absent"
    );
    assert_eq!(c.q(&["DBSIZE"]), int(2));
    assert_eq!(c.q(&["INCR", "gone"]), int(1));
    let V::Bulk(info) = c.q(&["INFO", "stats"]) else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    assert!(info.contains("expired_keys:3\r\n"), "{info}");
    s.shutdown().unwrap();
}

#[test]
fn data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    for fsync in ["always", "everysec", "no"] {
        let s = start(dir.path(), &["--appendfsync", fsync]);
        let mut c = Client::connect(s.local_addr());
        assert_eq!(c.q(&["SET", fsync, "v", "EX", "1000"]), V::ok());
        assert_eq!(c.q(&["SELECT", "3"]), V::ok());
        assert_eq!(c.q(&["MSET", "x", "1", "y", "2"]), V::ok());
        assert_eq!(c.q(&["INCR", "x"]), int(2));
        s.shutdown().unwrap();
        let s = start(dir.path(), &[]);
        let mut c = Client::connect(s.local_addr());
        assert_eq!(c.q(&["GET", fsync]), V::bulk("v"));
        let V::Int(t) = c.q(&["TTL", fsync]) else {
            panic!()
        };
        assert!((998..=1000).contains(&t), "{t}");
        assert_eq!(c.q(&["SELECT", "3"]), V::ok());
        assert_eq!(c.q(&["MGET", "x", "y"]), V::arr(&["2", "2"]));
        s.shutdown().unwrap();
    }
}

#[test]
fn read_modify_write_commands_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(move || {
                let mut c = Client::connect(addr);
                for _ in 0..100 {
                    assert!(matches!(c.q(&["INCR", "n"]), V::Int(_)));
                    assert!(matches!(c.q(&["APPEND", "s", "x"]), V::Int(_)));
                }
            });
        }
    });
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["GET", "n"]), V::bulk("400"));
    assert_eq!(c.q(&["STRLEN", "s"]), int(400));
    s.shutdown().unwrap();
}

#[test]
fn getex_changes_or_removes_the_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    assert_eq!(c.q(&["GETEX", "k"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(-1));
    assert_eq!(c.q(&["GETEX", "k", "EX", "100"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(100));
    assert_eq!(c.q(&["GETEX", "k"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(100), "no option keeps the expiry");
    assert_eq!(c.q(&["GETEX", "k", "persist"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(-1));
    assert_eq!(c.q(&["GETEX", "k", "PX", "200000"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(200));
    // The same option twice: the last value counts.
    assert_eq!(c.q(&["GETEX", "k", "EX", "10", "EX", "300"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "k"]), int(300));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let at = (now.as_secs() + 1000).to_string();
    assert_eq!(c.q(&["GETEX", "k", "EXAT", &at]), V::bulk("v"));
    let V::Int(t) = c.q(&["TTL", "k"]) else {
        panic!()
    };
    assert!((999..=1000).contains(&t), "{t}");
    let at_ms = (now.as_millis() as u64 + 500_000).to_string();
    assert_eq!(c.q(&["GETEX", "k", "PXAT", &at_ms]), V::bulk("v"));
    let V::Int(t) = c.q(&["TTL", "k"]) else {
        panic!()
    };
    assert!((499..=500).contains(&t), "{t}");
    // A time in the past: the value is returned, then the key is gone.
    assert_eq!(c.q(&["GETEX", "k", "PXAT", "1"]), V::bulk("v"));
    assert_eq!(c.q(&["EXISTS", "k"]), int(0));
    assert_eq!(c.q(&["GETEX", "nokey", "EX", "10"]), V::NilBulk);
    // Errors: the syntax first, then the key (a missing one answers null), then the time.
    let syntax = V::err("ERR syntax error");
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    for bad in [
        &["EX", "10", "PX", "10"][..],
        &["PERSIST", "EX", "10"],
        &["EX", "10", "PERSIST"],
        &["EX"],
        &["NX"],
        &["KEEPTTL"],
        &["GET"],
        &["EXAT", "10", "PXAT", "10"],
    ] {
        let mut cmd = vec!["GETEX", "k"];
        cmd.extend_from_slice(bad);
        assert_eq!(c.q(&cmd), syntax, "{bad:?}");
        cmd[1] = "nokey";
        assert_eq!(c.q(&cmd), syntax, "{bad:?}");
    }
    assert_eq!(c.q(&["GETEX", "k", "PERSIST", "PERSIST"]), V::bulk("v"));
    let invalid = V::err("ERR invalid expire time in 'getex' command");
    for (opt, n) in [
        ("EX", "0"),
        ("EX", "-1"),
        ("PX", "0"),
        ("EXAT", "-5"),
        ("PXAT", "0"),
        ("EX", "9223372036854775"),
        ("PX", "9223372036854775807"),
    ] {
        assert_eq!(c.q(&["GETEX", "k", opt, n]), invalid, "{opt} {n}");
    }
    assert_eq!(c.q(&["GETEX", "nokey", "EX", "0"]), V::NilBulk);
    assert_eq!(c.q(&["GETEX", "k", "EX", "abc"]), V::err(NOT_INT));
    assert_eq!(c.q(&["TTL", "k"]), int(-1), "failed GETEX changes nothing");
    assert_eq!(
        c.q(&["GETEX"]),
        V::err("ERR wrong number of arguments for 'getex' command")
    );
    s.shutdown().unwrap();
}

const NOT_INT: &str = "ERR value is not an integer or out of range";

#[test]
fn msetnx_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["MSETNX", "a", "1", "b", "2"]), int(1));
    assert_eq!(c.q(&["MSETNX", "c", "3", "b", "x"]), int(0));
    assert_eq!(
        c.q(&["EXISTS", "c"]),
        int(0),
        "nothing is set when one key exists"
    );
    assert_eq!(c.q(&["MGET", "a", "b"]), V::arr(&["1", "2"]));
    // A key given twice: the last value wins.
    assert_eq!(c.q(&["MSETNX", "d", "1", "d", "2"]), int(1));
    assert_eq!(c.q(&["GET", "d"]), V::bulk("2"));
    // An expired key does not count as existing.
    assert_eq!(c.q(&["SET", "e", "v", "PX", "1"]), V::ok());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.q(&["MSETNX", "e", "new"]), int(1));
    assert_eq!(c.q(&["GET", "e"]), V::bulk("new"));
    assert_eq!(c.q(&["TTL", "e"]), int(-1));
    let arity = V::err("ERR wrong number of arguments for 'msetnx' command");
    assert_eq!(c.q(&["MSETNX", "a"]), arity);
    assert_eq!(c.q(&["MSETNX", "x", "1", "y"]), arity);
    assert_eq!(c.q(&["EXISTS", "x"]), int(0));
    s.shutdown().unwrap();
}

#[test]
fn concurrent_msetnx_on_shared_keys_has_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    for round in 0..20 {
        let keys: Vec<String> = (0..3).map(|i| format!("r{round}k{i}")).collect();
        let wins: i64 = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let keys = &keys;
                    sc.spawn(move || {
                        let mut c = Client::connect(addr);
                        let v = t.to_string();
                        let mut cmd = vec!["MSETNX"];
                        // Each client names the keys in another order.
                        for i in 0..3 {
                            cmd.push(&keys[(i + t) % 3]);
                            cmd.push(&v);
                        }
                        match c.q(&cmd) {
                            V::Int(n) => n,
                            other => panic!("{other:?}"),
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1);
        let mut c = Client::connect(addr);
        let V::Array(vals) = c.q(&["MGET", &keys[0], &keys[1], &keys[2]]) else {
            panic!()
        };
        assert!(vals.iter().all(|v| *v == vals[0]), "one writer's values");
    }
    s.shutdown().unwrap();
}

#[test]
fn substr_is_getrange() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "k", "This is a string"]), V::ok());
    for (a, b) in [
        ("0", "3"),
        ("-3", "-1"),
        ("0", "-1"),
        ("10", "100"),
        ("5", "2"),
    ] {
        assert_eq!(
            c.q(&["SUBSTR", "k", a, b]),
            c.q(&["GETRANGE", "k", a, b]),
            "{a} {b}"
        );
    }
    assert_eq!(c.q(&["SUBSTR", "k", "0", "3"]), V::bulk("This"));
    assert_eq!(c.q(&["SUBSTR", "nokey", "0", "3"]), V::bulk(""));
    assert_eq!(c.q(&["SUBSTR", "k", "x", "3"]), V::err(NOT_INT));
    assert_eq!(
        c.q(&["SUBSTR", "k", "0"]),
        V::err("ERR wrong number of arguments for 'substr' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn lcs_replies_in_both_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["MSET", "a", "ohmytext", "b", "mynewtext"]), V::ok());
    assert_eq!(c.q(&["LCS", "a", "b"]), V::bulk("mytext"));
    assert_eq!(c.q(&["LCS", "a", "b", "LEN"]), int(6));
    assert_eq!(c.q(&["LCS", "a", "nokey"]), V::bulk(""));
    assert_eq!(c.q(&["LCS", "nokey", "a", "len"]), int(0));
    let range = |x: i64, y: i64| V::Array(vec![int(x), int(y)]);
    let m1 = || vec![range(4, 7), range(5, 8)];
    let m2 = || vec![range(2, 3), range(0, 1)];
    assert_eq!(
        c.q(&["LCS", "a", "b", "IDX"]),
        V::Array(vec![
            V::bulk("matches"),
            V::Array(vec![V::Array(m1()), V::Array(m2())]),
            V::bulk("len"),
            int(6),
        ])
    );
    let with_len = |mut m: Vec<V>, n| {
        m.push(int(n));
        V::Array(m)
    };
    assert_eq!(
        c.q(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]),
        V::Array(vec![
            V::bulk("matches"),
            V::Array(vec![with_len(m1(), 4)]),
            V::bulk("len"),
            int(6),
        ])
    );
    // A negative MINMATCHLEN is 0.
    assert_eq!(
        c.q(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "-3"]),
        c.q(&["LCS", "a", "b", "IDX"])
    );
    assert_eq!(
        c.q(&["LCS", "a", "b", "LEN", "IDX"]),
        V::err("ERR If you want both the length and indexes, please just use IDX.")
    );
    let syntax = V::err("ERR syntax error");
    assert_eq!(c.q(&["LCS", "a", "b", "FOO"]), syntax);
    assert_eq!(c.q(&["LCS", "a", "b", "MINMATCHLEN"]), syntax);
    assert_eq!(c.q(&["LCS", "a", "b", "MINMATCHLEN", "x"]), V::err(NOT_INT));
    assert_eq!(
        c.q(&["LCS", "a"]),
        V::err("ERR wrong number of arguments for 'lcs' command")
    );
    // RESP3: IDX replies with a map.
    let V::Map(_) = c.q(&["HELLO", "3"]) else {
        panic!()
    };
    assert_eq!(
        c.q(&["LCS", "a", "b", "IDX", "WITHMATCHLEN"]),
        V::Map(vec![
            (
                V::bulk("matches"),
                V::Array(vec![with_len(m1(), 4), with_len(m2(), 2)])
            ),
            (V::bulk("len"), int(6)),
        ])
    );
    assert_eq!(c.q(&["LCS", "a", "b"]), V::bulk("mytext"));
    // The table's size is bounded by proto-max-bulk-len, as Redis bounds it.
    assert_eq!(
        c.q(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        V::ok()
    );
    let long_a = "a".repeat(1000);
    let long_b = "b".repeat(1000);
    assert_eq!(c.q(&["MSET", "x", &long_a, "y", &long_b]), V::ok());
    assert_eq!(
        c.q(&["LCS", "x", "y", "LEN"]),
        V::err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    );
    assert_eq!(c.q(&["LCS", "x", "b", "LEN"]), int(0));
    s.shutdown().unwrap();
}
