//! The keyspace family (`cmd/keyspace.rs`: expiry, RENAME, COPY, MOVE, OBJECT) through the
//! in-process harness (`test_server.rs`): every reply and error text is redis-server
//! 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn expire_options_rename_copy_move_and_types() {
    TestServer::in_memory().check(
        r#"
            SET k v => +OK
            EXPIRE k 100 => :1
            TTL k => :100
            EXPIRE k 50 NX => :0
            EXPIRE k 200 XX => :1
            TTL k => :200
            EXPIRE k 100 GT => :0
            EXPIRE k 300 GT => :1
            EXPIRE k 400 LT => :0
            EXPIRE k 250 LT => :1
            TTL k => :250
            EXPIRE k 10 NX XX => -ERR NX and XX, GT or LT options at the same time are not compatible
            EXPIRE k 10 GT LT => -ERR GT and LT options at the same time are not compatible
            EXPIRE k 10 NX GT => -ERR NX and XX, GT or LT options at the same time are not compatible
            EXPIRE k 10 FOO => -ERR Unsupported option FOO
            EXPIRE k x => -ERR value is not an integer or out of range
            EXPIRE nokey 10 => :0
            PERSIST k => :1
            PERSIST k => :0
            TTL k => :-1
            EXPIRE k 10 XX => :0
            EXPIRE k 10 GT => :0
            EXPIRE k 10 LT => :1
            TTL k => :10
            PERSIST k => :1
            PEXPIRE k 100000 => :1
            TTL k => :100
            EXPIREAT k 1 => :1
            EXISTS k => :0
            TTL nokey => :-2
            PTTL nokey => :-2
            SET k v => +OK
            EXPIRETIME k => :-1
            EXPIRETIME nokey => :-2
            EXPIREAT k 33177117420 => :1
            EXPIRETIME k => :33177117420
            PEXPIRETIME k => :33177117420000
            PEXPIREAT k 33177117420000 GT => :0
            EXPIRE k 0 => :1
            EXISTS k => :0
            SET k v => +OK
            EXPIRE k -1 => :1
            EXISTS k => :0
            SET a 1 => +OK
            EXPIRE a 100 => :1
            RENAME a b => +OK
            GET b => "1"
            TTL b => :100
            EXISTS a => :0
            RENAME nokey x => -ERR no such key
            RENAMENX nokey x => -ERR no such key
            SET c 3 => +OK
            RENAMENX b c => :0
            RENAMENX b d => :1
            RENAME d d => +OK
            GET d => "1"
            RPUSH l x y => :2
            RENAME l d => +OK
            TYPE d => +list
            LRANGE d 0 -1 => ["x", "y"]
            COPY d e => :1
            LRANGE e 0 -1 => ["x", "y"]
            COPY d e => :0
            COPY d e REPLACE => :1
            COPY nokey e => :0
            COPY d d => -ERR source and destination objects are the same
            COPY d e DB 1 => :1
            SELECT 1 => +OK
            LRANGE e 0 -1 => ["x", "y"]
            SELECT 0 => +OK
            COPY d e DB x => -ERR value is not an integer or out of range
            COPY d e FOO => -ERR syntax error
            HSET h f v => :1
            COPY h h2 => :1
            HGETALL h2 => ["f", "v"]
            SADD s m => :1
            COPY s s2 => :1
            SMEMBERS s2 => ["m"]
            ZADD z 1 m => :1
            COPY z z2 => :1
            ZRANGE z2 0 -1 WITHSCORES => ["m", "1"]
            SET ttl v EX 100 => +OK
            COPY ttl ttl2 => :1
            TTL ttl2 => :100
            DEL c e nokey => :2
            UNLINK d h => :2
            EXISTS s s s2 nokey => :3
            TYPE s => +set
            TYPE z => +zset
            TYPE h2 => +hash
            TYPE nokey => +none
            TOUCH s z nokey => :2
            OBJECT ENCODING nokey => (nil)
            OBJECT FOO k => -ERR unknown subcommand 'FOO'. Try OBJECT HELP.
            MOVE s 1 => :1
            MOVE s 1 => :0
            MOVE nokey 1 => :0
            MOVE s2 0 => -ERR source and destination objects are the same
            MOVE s2 x => -ERR value is not an integer or out of range
            SELECT 1 => +OK
            SMEMBERS s => ["m"]
            SELECT 0 => +OK
            DBSIZE => :6
        "#,
    );
}

/// A changed limit applies at the next write of a key, as Redis converts then (listpack→hashtable, listpack→skiplist, intset→hashtable).
#[test]
fn encodings_follow_the_limits_in_force_when_the_key_is_written() {
    TestServer::in_memory().check(
        r#"
            HSET h f v => :1
            CONFIG SET hash-max-listpack-entries 0 => +OK
            OBJECT ENCODING h => "listpack"
            HSET h g w => :1
            OBJECT ENCODING h => "hashtable"
            CONFIG SET hash-max-listpack-entries 128 => +OK
            HSET h2 a 1 => :1
            OBJECT ENCODING h2 => "listpack"
            CONFIG SET zset-max-listpack-entries 128 => +OK
            ZADD z 1 a => :1
            CONFIG SET zset-max-listpack-entries 0 => +OK
            OBJECT ENCODING z => "listpack"
            ZADD z 2 b => :1
            OBJECT ENCODING z => "skiplist"
            CONFIG SET zset-max-listpack-entries 128 => +OK
            ZREM z b => :1
            OBJECT ENCODING z => "skiplist"
            SADD s 1 => :1
            CONFIG SET set-max-intset-entries 0 => +OK
            OBJECT ENCODING s => "intset"
            SADD s 2 => :1
            OBJECT ENCODING s => "hashtable"
        "#,
    );
}

/// RENAME over another type, TTLs carried by RENAME and COPY, MOVE and SELECT bounds, SCAN TYPE/MATCH, OBJECT, EXPIREAT with NX/XX/GT/LT.
#[test]
fn renames_moves_scans_and_expiry_option_edges() {
    TestServer::in_memory().check(
        r#"
            RPUSH l a b => :2
            SET s v => +OK
            RENAME s l => +OK
            TYPE l => +string
            GET l => "v"
            HSET h f v => :1
            EXPIRE h 100 => :1
            RENAME h h2 => +OK
            TTL h2 => :100
            COPY h2 h3 => :1
            TTL h3 => :100
            RENAME h2 h3 => +OK
            TTL h3 => :100
            HGETALL h3 => ["f", "v"]
            SET x 1 => +OK
            MOVE x 1 => :1
            MOVE x 16 => -ERR DB index is out of range
            MOVE x -1 => -ERR DB index is out of range
            SELECT 16 => -ERR DB index is out of range
            SELECT -1 => -ERR DB index is out of range
            SELECT x => -ERR value is not an integer or out of range
            COPY h3 x DB 16 => -ERR DB index is out of range
            COPY h3 h3 DB 1 => :1
            EXPIRE h3 100 NX => :0
            PERSIST nokey => :0
            PEXPIRE h3 -1 => :1
            EXISTS h3 => :0
            KEYS * => ["l"]
            KEYS h? => []
            KEYS [lx] => ["l"]
            SADD st a => :1
            ZADD zs 1 a => :1
            XADD xs 1-0 a b => "1-0"
            (sorted) SCAN 0 TYPE string COUNT 100 => ["0", ["l"]]
            (sorted) SCAN 0 TYPE zset COUNT 100 => ["0", ["zs"]]
            (sorted) SCAN 0 MATCH z* COUNT 100 => ["0", ["zs"]]
            SCAN 0 COUNT 0 => -ERR syntax error
            SCAN x => -ERR invalid cursor
            SCAN 0 FOO bar => -ERR syntax error
            TYPE xs => +stream
            OBJECT ENCODING xs => "stream"
            OBJECT ENCODING st => "hashtable"
            OBJECT ENCODING zs => "listpack"
            OBJECT ENCODING l => "embstr"
            OBJECT FREQ l => -ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.
            OBJECT REFCOUNT l => :1
            OBJECT IDLETIME nokey => (nil)
            DEL l l l => :1
            EXISTS l l => :0
            RENAMENX st zs => :0
            RENAME st st => +OK
            RENAMENX st st => :0
            FLUSHDB => +OK
            DBSIZE => :0
            RANDOMKEY => (nil)
            SET a 1 => +OK
            RANDOMKEY => "a"
            EXPIREAT a 33177117420 LT => :1
            EXPIREAT a 33177117420 GT => :0
            EXPIREAT a 33177117421 GT => :1
            EXPIREAT a 33177117420 XX => :1
            EXPIREAT a 33177117410 lt => :1
            EXPIRETIME a => :33177117410
            EXPIRE a 100 xx => :1
            EXPIREAT a 100 nx => :0
            PEXPIREAT a x => -ERR value is not an integer or out of range
            PEXPIRETIME nokey => :-2
            TTL a => :100
        "#,
    );
}
