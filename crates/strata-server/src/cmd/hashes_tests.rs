//! The hash family (`cmd/hashes.rs`, `cmd/members.rs`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn fields_counters_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            HSET h f1 v1 f2 v2 => :2
            HSET h f1 new => :0
            HSET h odd => -ERR wrong number of arguments for 'hset' command
            HGET h f1 => "new"
            HGET h nope => (nil)
            HGET nokey f => (nil)
            HMGET h f1 nope f2 => ["new", (nil), "v2"]
            HMGET nokey a => [(nil)]
            HSETNX h f1 x => :0
            HSETNX h f3 v3 => :1
            HLEN h => :3
            HSTRLEN h f1 => :3
            HSTRLEN h nope => :0
            HEXISTS h f3 => :1
            HDEL h f3 nope => :1
            HGETALL h => ["f1", "new", "f2", "v2"]
            HKEYS h => ["f1", "f2"]
            HVALS h => ["new", "v2"]
            HGETALL nokey => []
            HINCRBY h n 5 => :5
            HINCRBY h n -7 => :-2
            HINCRBY h f1 1 => -ERR hash value is not an integer
            HINCRBY h n x => -ERR value is not an integer or out of range
            HSET h big 9223372036854775807 => :1
            HINCRBY h big 1 => -ERR increment or decrement would overflow
            HINCRBYFLOAT h fl 1.5 => "1.5"
            HINCRBYFLOAT h fl 1e2 => "101.5"
            HINCRBYFLOAT h f1 1 => -ERR hash value is not a float
            HINCRBYFLOAT h fl abc => -ERR value is not a valid float
            HMSET h a 1 b 2 => +OK
            HMSET h a => -ERR wrong number of arguments for 'hmset' command
            HRANDFIELD nokey => (nil)
            HRANDFIELD nokey 2 => []
            HRANDFIELD h 0 => []
            HDEL h f1 f2 n big fl a b => :7
            EXISTS h => :0
            SET str v => +OK
            HSET str f v => -WRONGTYPE Operation against a key holding the wrong kind of value
            HGET str f => -WRONGTYPE Operation against a key holding the wrong kind of value
            HGETALL str => -WRONGTYPE Operation against a key holding the wrong kind of value
            HLEN str => -WRONGTYPE Operation against a key holding the wrong kind of value
            HDEL str f => -WRONGTYPE Operation against a key holding the wrong kind of value
            HINCRBY str f 1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            HSET one f v => :1
            HRANDFIELD one => "f"
            HRANDFIELD one -2 WITHVALUES => ["f", "v", "f", "v"]
            HRANDFIELD one 1 WITHVALUES => ["f", "v"]
        "#,
    );
}

#[test]
fn listpack_turns_hashtable_past_the_configured_limits() {
    TestServer::in_memory().check(
        r#"
            CONFIG SET hash-max-listpack-entries 2 => +OK
            CONFIG SET hash-max-listpack-value 5 => +OK
            HSET a f1 v f2 v => :2
            OBJECT ENCODING a => "listpack"
            HSET a f3 v => :1
            OBJECT ENCODING a => "hashtable"
            HDEL a f3 f2 => :2
            OBJECT ENCODING a => "hashtable"
            HSET b f 123456 => :1
            OBJECT ENCODING b => "hashtable"
            HSET c f 12345 => :1
            OBJECT ENCODING c => "listpack"
            HSET c longfield v => :1
            OBJECT ENCODING c => "hashtable"
            CONFIG SET hash-max-ziplist-entries 0 => +OK
            CONFIG GET hash-max-listpack-entries => ["hash-max-listpack-entries", "0"]
            HSET d f v => :1
            OBJECT ENCODING d => "hashtable"
        "#,
    );
}

#[test]
fn resp3_replies_hashes_as_maps() {
    let mut t = TestServer::in_memory();
    let mut c = t.conn();
    assert_eq!(t.q("HSET h f v"), ":1");
    assert!(c.q("HELLO 3").starts_with('{'));
    assert_eq!(c.raw(&["HGETALL", "h"]), b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    assert_eq!(c.raw(&["HGETALL", "nokey"]), b"%0\r\n");
    assert_eq!(c.q("HRANDFIELD h 1 WITHVALUES"), "[[\"f\", \"v\"]]");
    assert_eq!(c.q("HINCRBYFLOAT h g 1.5"), "\"1.5\"");
}

#[test]
fn random_fields_come_from_the_hash() {
    let mut t = TestServer::in_memory();
    assert_eq!(t.q("HSET h a 1 b 2 c 3"), ":3");
    for _ in 0..10 {
        let r = t.cmd(&["HRANDFIELD", "h", "2", "WITHVALUES"]);
        let items: Vec<String> = r.items().iter().map(|x| x.to_string()).collect();
        assert_eq!(items.len(), 4, "{r}");
        assert_ne!(
            items[0], items[2],
            "a positive count gives distinct fields: {r}"
        );
        for pair in items.chunks(2) {
            let want = match pair[0].as_str() {
                "\"a\"" => "\"1\"",
                "\"b\"" => "\"2\"",
                "\"c\"" => "\"3\"",
                other => panic!("not a field: {other}"),
            };
            assert_eq!(pair[1], want);
        }
        assert_eq!(t.cmd(&["HRANDFIELD", "h", "-5"]).items().len(), 5);
    }
}

/// HINCRBYFLOAT in long double precision (1e400 prints as Redis prints it), HSCAN, HRANDFIELD arguments, empty values.
#[test]
fn long_double_increments_scans_and_argument_errors() {
    TestServer::in_memory().check(
        r#"
            HSET h a 1 b 2 => :2
            HGETDEL h a => -ERR unknown command 'HGETDEL', with args beginning with: 'h' 'a' 
            HDEL h => -ERR wrong number of arguments for 'hdel' command
            HDEL h a a b => :2
            EXISTS h => :0
            HSET h n 10 => :1
            HINCRBYFLOAT h n 0.5 => "10.5"
            HINCRBYFLOAT h n -10.5 => "0"
            HINCRBYFLOAT h n 1e400 => "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"
            HINCRBYFLOAT h n nan => -ERR value is not a valid float
            HINCRBY h n 9223372036854775807 => -ERR hash value is not an integer
            HINCRBY h n 1 => -ERR hash value is not an integer
            HSET h s " 1" => :1
            HINCRBY h s 1 => -ERR hash value is not an integer
            HSETNX h => -ERR wrong number of arguments for 'hsetnx' command
            HSTRLEN h n => :401
            HMGET h => -ERR wrong number of arguments for 'hmget' command
            (sorted) HSCAN h 0 => ["0", [" 1", "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880", "n", "s"]]
            HSCAN h 0 MATCH n* => ["0", ["n", "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"]]
            HSCAN nokey 0 => ["0", []]
            HRANDFIELD h x => -ERR value is not an integer or out of range
            HRANDFIELD h 1 FOO => -ERR syntax error
            HRANDFIELD h -9223372036854775808 => -ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807
            HSET e f "" => :1
            HSTRLEN e f => :0
            HGET e f => ""
            HEXISTS e g => :0
        "#,
    );
}
