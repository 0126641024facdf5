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
