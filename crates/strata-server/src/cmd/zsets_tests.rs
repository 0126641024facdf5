//! The sorted-set family (`cmd/zsets.rs`, `cmd/zsetops.rs`, `cmd/zblocking.rs`, `zset.rs`)
//! through the in-process harness (`test_server.rs`): every reply and error text is
//! redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;
use std::time::Duration;

#[test]
fn adds_ranges_by_rank_score_and_lex_pops_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            ZADD z 1 a 2 b 3 c 4 d 5 e => :5
            ZADD z NX 10 a 6 f => :1
            ZADD z XX CH 10 a 7 g => :1
            ZADD z GT 5 a => :0
            ZADD z LT CH 5 a => :1
            ZADD z INCR 1 a => "6"
            ZADD z INCR 1 a 2 b => -ERR INCR option supports a single increment-element pair
            ZADD z NX XX 1 a => -ERR XX and NX options at the same time are not compatible
            ZADD z GT LT 1 a => -ERR GT, LT, and/or NX options at the same time are not compatible
            ZADD z GT NX 1 a => -ERR GT, LT, and/or NX options at the same time are not compatible
            ZADD z 1 => -ERR wrong number of arguments for 'zadd' command
            ZADD z x a => -ERR value is not a valid float
            ZADD z nan a => -ERR value is not a valid float
            ZSCORE z a => "6"
            ZMSCORE z a nope b => ["6", (nil), "2"]
            ZINCRBY z 0.5 b => "2.5"
            ZINCRBY z 1 new => "1"
            ZREM z new => :1
            ZCARD z => :6
            ZRANGE z 0 -1 WITHSCORES => ["b", "2.5", "c", "3", "d", "4", "e", "5", "a", "6", "f", "6"]
            ZRANGE z 0 1 REV => ["f", "a"]
            ZRANGE z (1 3 BYSCORE => ["b", "c"]
            ZRANGE z -inf +inf BYSCORE LIMIT 1 2 => ["c", "d"]
            ZRANGE z +inf -inf BYSCORE REV LIMIT 0 2 WITHSCORES => ["f", "6", "a", "6"]
            ZRANGE z 0 -1 LIMIT 0 1 => -ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
            ZRANGE z x 1 BYSCORE => -ERR min or max is not a float
            ZRANGEBYSCORE z 2 (6 => ["b", "c", "d", "e"]
            ZREVRANGEBYSCORE z 6 2 WITHSCORES LIMIT 1 1 => ["a", "6"]
            ZCOUNT z (2 6 => :6
            ZCOUNT z x 1 => -ERR min or max is not a float
            ZRANK z c => :1
            ZREVRANK z c => :4
            ZRANK z nope => (nil)
            ZADD lex 0 a 0 b 0 c 0 d 0 e => :5
            ZRANGE lex [b (d BYLEX => ["b", "c"]
            ZRANGE lex + - BYLEX REV LIMIT 0 2 => ["e", "d"]
            ZRANGEBYLEX lex - + LIMIT 1 2 => ["b", "c"]
            ZREVRANGEBYLEX lex (d - => ["c", "b", "a"]
            ZLEXCOUNT lex (a [c => :2
            ZRANGEBYLEX lex a c => -ERR min or max not valid string range item
            ZREMRANGEBYLEX lex [a [b => :2
            ZREMRANGEBYSCORE z 1 2.5 => :1
            ZREMRANGEBYRANK z 0 0 => :1
            ZRANGE z 0 -1 WITHSCORES => ["d", "4", "e", "5", "a", "6", "f", "6"]
            ZPOPMIN z => ["d", "4"]
            ZPOPMAX z 2 => ["f", "6", "a", "6"]
            ZPOPMIN nokey => []
            ZPOPMIN z -1 => -ERR value is out of range, must be positive
            ZMPOP 2 nokey z MIN COUNT 5 => ["z", [["e", "5"]]]
            ZMPOP 1 nokey MAX => (nil-array)
            ZMPOP 1 z FOO => -ERR syntax error
            ZADD s1 1 a 2 b 3 c => :3
            ZADD s2 10 b 20 c 30 d => :3
            SADD plain a d => :2
            ZUNION 2 s1 s2 WITHSCORES => ["a", "1", "b", "12", "c", "23", "d", "30"]
            ZUNION 2 s1 s2 WEIGHTS 2 0.5 WITHSCORES => ["a", "2", "b", "9", "d", "15", "c", "16"]
            ZUNION 2 s1 s2 AGGREGATE MAX WITHSCORES => ["a", "1", "b", "10", "c", "20", "d", "30"]
            ZUNION 2 s1 s2 AGGREGATE MIN WITHSCORES => ["a", "1", "b", "2", "c", "3", "d", "30"]
            ZINTER 2 s1 s2 WITHSCORES => ["b", "12", "c", "23"]
            ZINTER 2 s1 s2 WEIGHTS 1 -1 AGGREGATE SUM WITHSCORES => ["c", "-17", "b", "-8"]
            ZINTER 2 s1 plain WITHSCORES => ["a", "2"]
            ZDIFF 2 s1 s2 WITHSCORES => ["a", "1"]
            ZDIFF 2 s2 s1 => ["d"]
            ZINTERCARD 2 s1 s2 => :2
            ZINTERCARD 2 s1 s2 LIMIT 1 => :1
            ZUNIONSTORE dst 2 s1 s2 WEIGHTS 1 2 => :4
            ZRANGE dst 0 -1 WITHSCORES => ["a", "1", "b", "22", "c", "43", "d", "60"]
            ZINTERSTORE dst 2 s1 s2 AGGREGATE MAX => :2
            ZRANGE dst 0 -1 WITHSCORES => ["b", "10", "c", "20"]
            ZDIFFSTORE dst 2 s1 s2 => :1
            ZRANGE dst 0 -1 WITHSCORES => ["a", "1"]
            ZINTERSTORE dst 2 s1 nokey => :0
            EXISTS dst => :0
            ZUNION 0 s1 => -ERR at least 1 input key is needed for 'zunion' command
            ZUNION 3 s1 s2 => -ERR syntax error
            ZUNION 2 s1 s2 WEIGHTS 1 => -ERR syntax error
            ZUNION 2 s1 s2 WEIGHTS 1 x => -ERR weight value is not a float
            ZUNION 2 s1 s2 AGGREGATE AVG => -ERR syntax error
            ZUNIONSTORE dst 0 s1 => -ERR at least 1 input key is needed for 'zunionstore' command
            SET str v => +OK
            ZUNION 2 s1 str => -WRONGTYPE Operation against a key holding the wrong kind of value
            ZADD str 1 a => -WRONGTYPE Operation against a key holding the wrong kind of value
            ZRANGE str 0 -1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            ZRANGESTORE dst s2 (10 +inf BYSCORE => :2
            ZRANGE dst 0 -1 WITHSCORES => ["c", "20", "d", "30"]
            ZADD inf +inf a -inf b => :2
            ZRANGE inf 0 -1 WITHSCORES => ["b", "-inf", "a", "inf"]
            ZINCRBY inf -inf a => -ERR resulting score is not a number (NaN)
            ZRANDMEMBER nokey => (nil)
            ZRANDMEMBER s1 0 => []
            ZADD fl 1.1 a 0.1 b 3.0e0 c => :3
            ZRANGE fl 0 -1 WITHSCORES => ["b", "0.10000000000000001", "a", "1.1000000000000001", "c", "3"]
            ZSCORE fl a => "1.1000000000000001"
        "#,
    );
}

#[test]
fn listpack_turns_skiplist_past_the_configured_limits() {
    TestServer::in_memory().check(
        r#"
            CONFIG SET zset-max-listpack-entries 2 => +OK
            CONFIG SET zset-max-listpack-value 4 => +OK
            ZADD a 1 x 2 y => :2
            OBJECT ENCODING a => "listpack"
            ZADD a 3 z => :1
            OBJECT ENCODING a => "skiplist"
            ZREM a z y => :2
            OBJECT ENCODING a => "skiplist"
            ZADD b 1 abcde => :1
            OBJECT ENCODING b => "skiplist"
            ZADD c 1 abcd => :1
            OBJECT ENCODING c => "listpack"
            ZUNIONSTORE d 1 c => :1
            OBJECT ENCODING d => "listpack"
            ZUNIONSTORE d 1 a => :1
            OBJECT ENCODING d => "listpack"
        "#,
    );
}

#[test]
fn resp3_replies_scores_as_doubles() {
    let mut t = TestServer::in_memory();
    assert!(t.q("HELLO 3").starts_with('{'));
    t.check(
        r#"
        ZADD z 1.5 a => :1
        ZSCORE z a => ,1.5
        ZRANGE z 0 -1 WITHSCORES => [["a", ,1.5]]
        ZPOPMIN z => ["a", ,1.5]
        ZADD z 1.5 a => :1
        ZPOPMIN z 1 => [["a", ,1.5]]
        ZMSCORE z a => [_]
        ZINCRBY z 1 a => ,1
        ZUNION 1 z WITHSCORES => [["a", ,1]]
        ZADD z INCR 1 a => ,2
        ZMPOP 1 z MIN => ["z", [["a", ,2]]]
        BZPOPMIN z 0.05 => _
        "#,
    );
}

#[test]
fn blocking_pops_are_served_by_a_later_add_or_time_out() {
    let mut t = TestServer::in_memory();
    t.check(
        r#"
        BZPOPMIN z 0.05 => (nil-array)
        BZMPOP 0.05 1 z MIN => (nil-array)
        BZPOPMIN z x => -ERR timeout is not a float or out of range
        SET wt v => +OK
        BZPOPMIN wt 0 => -WRONGTYPE Operation against a key holding the wrong kind of value
        "#,
    );
    let mut b = t.conn();
    b.send(&["BZPOPMIN", "z1", "z2", "0"]);
    t.wait_blocked(1);
    b.silent(Duration::from_millis(50));
    assert_eq!(t.q("ZADD z2 2 b 1 a"), ":2");
    assert_eq!(b.recv().to_string(), r#"["z2", "a", "1"]"#);
    b.send(&["BZPOPMAX", "z3", "z4", "0"]);
    t.wait_blocked(1);
    assert_eq!(t.q("ZADD z3 2 b 1 a"), ":2");
    assert_eq!(b.recv().to_string(), r#"["z3", "b", "2"]"#);
    b.send(&["BZMPOP", "0", "1", "z5", "MAX", "COUNT", "2"]);
    t.wait_blocked(1);
    assert_eq!(t.q("ZADD z5 2 b 1 a 3 c"), ":3");
    assert_eq!(b.recv().to_string(), r#"["z5", [["c", "3"], ["b", "2"]]]"#);
    assert_eq!(t.q("ZRANGE z5 0 -1"), r#"["a"]"#);
}

#[test]
fn a_store_or_a_key_of_the_right_type_serves_the_blocked_client() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BZPOPMIN", "zd", "0"]);
    t.wait_blocked(1);
    assert_eq!(t.q("ZADD zs 1 a 2 b"), ":2");
    assert_eq!(t.q("ZUNIONSTORE zd 1 zs"), ":2");
    assert_eq!(b.recv().to_string(), r#"["zd", "a", "1"]"#);
    assert_eq!(t.q("ZRANGE zd 0 -1"), r#"["b"]"#);
    // A key of another type on the first key does not end the wait.
    b.send(&["BZMPOP", "0", "2", "za", "zb", "MIN"]);
    t.wait_blocked(1);
    assert_eq!(t.q("SET za x"), "+OK");
    b.silent(Duration::from_millis(50));
    assert_eq!(t.q("ZADD zb 5 m"), ":1");
    assert_eq!(b.recv().to_string(), r#"["zb", [["m", "5"]]]"#);
}

/// Stores onto a source, WEIGHTS counts, infinite weights, ZADD INCR with NX/XX/GT, ZRANGESTORE, empty and inverted ranges, overflow to inf.
#[test]
fn stores_weights_and_aggregates_at_their_edges() {
    TestServer::in_memory().check(
        r#"
            SCARD b => :0
            OBJECT ENCODING b => (nil)
            ZADD za 1 a 2 b => :2
            ZADD zb 3 b 4 c => :2
            ZUNIONSTORE za 2 za zb => :3
            ZRANGE za 0 -1 WITHSCORES => ["a", "1", "c", "4", "b", "5"]
            ZINTERSTORE zc 2 za zb WEIGHTS 1 => -ERR syntax error
            ZINTERSTORE zc 2 za zb WEIGHTS 1 2 3 => -ERR syntax error
            ZINTERSTORE zc 2 za zb AGGREGATE sum WEIGHTS 2 2 => :2
            ZRANGE zc 0 -1 WITHSCORES => ["b", "16", "c", "16"]
            ZUNION 2 za zb WITHSCORES AGGREGATE MAX WEIGHTS inf -inf => ["a", "inf", "b", "inf", "c", "inf"]
            ZINTER 2 za zb WEIGHTS inf 0 WITHSCORES => ["b", "inf", "c", "inf"]
            ZADD z NX INCR 1 a => "1"
            ZADD z XX INCR 1 nope => (nil)
            ZADD z GT INCR -5 a => (nil)
            ZADD z GT CH 0 a 9 q => :1
            ZRANGESTORE d z 0 -1 REV => :2
            ZRANGE d 0 -1 => ["a", "q"]
            ZRANGESTORE d z [a + BYLEX LIMIT 0 1 => :1
            ZRANGE d 0 -1 => ["a"]
            ZRANGESTORE d nokey 0 -1 => :0
            EXISTS d => :0
            ZRANGE z (a [z BYLEX REV => []
            ZRANGE z [z (a BYLEX REV => ["q"]
            ZREMRANGEBYSCORE z -inf +inf => :2
            EXISTS z => :0
            ZRANGEBYSCORE zc (1 (1 => []
            ZRANGEBYSCORE zc 1 x => -ERR min or max is not a float
            ZRANGEBYSCORE zc -inf +inf LIMIT 0 -1 => ["b", "c"]
            ZRANGEBYSCORE zc -inf +inf LIMIT -1 1 => []
            ZREVRANGE zc 0 0 WITHSCORES => ["c", "16"]
            ZRANGE zc 0 -1 BYSCORE => []
            ZSCORE zc b => "16"
            ZADD e 0 a => :1
            ZINCRBY e 1e308 a => "1e+308"
            ZINCRBY e 1e308 a => "inf"
            ZADD zz 1 "" => :1
            ZRANGE zz 0 -1 => [""]
            ZCOUNT zz -inf +inf => :1
            ZLEXCOUNT zz - + => :1
            ZLEXCOUNT zz + - => :0
            ZLEXCOUNT zz [ ( => :0
        "#,
    );
}

/// ZSCAN, ZRANK arguments, ZPOP counts, stores from missing keys and from sets.
#[test]
fn scans_ranks_and_argument_errors() {
    TestServer::in_memory().check(
        r#"
            ZADD z 1 a 2 b => :2
            ZSCAN z 0 => ["0", ["a", "1", "b", "2"]]
            ZRANK z a WITHSCORE => -ERR wrong number of arguments for 'zrank' command
            ZRANK z a x => -ERR wrong number of arguments for 'zrank' command
            ZREVRANGE z 0 -1 WITHSCORES => ["b", "2", "a", "1"]
            ZRANGEBYLEX z - + LIMIT 0 => -ERR syntax error
            ZREMRANGEBYRANK z x 1 => -ERR value is not an integer or out of range
            ZREMRANGEBYRANK z 5 10 => :0
            ZPOPMAX z 0 => []
            ZPOPMAX nokey 2 => []
            ZMSCORE nokey a => [(nil)]
            ZMSCORE z => -ERR wrong number of arguments for 'zmscore' command
            ZRANDMEMBER z -2 WITHSCORES x => -ERR syntax error
            ZINTERCARD 1 z LIMIT -1 => -ERR LIMIT can't be negative
            ZDIFF 1 z WITHSCORES x => -ERR syntax error
            ZDIFFSTORE d 1 nokey => :0
            EXISTS d => :0
            ZINTERSTORE d 1 z WEIGHTS 2 => :2
            ZRANGE d 0 -1 WITHSCORES => ["a", "2", "b", "4"]
            ZUNIONSTORE d 2 z nokey AGGREGATE MIN => :2
            SADD st x => :1
            ZUNIONSTORE d 2 z st => :3
            ZRANGE d 0 -1 WITHSCORES => ["a", "1", "x", "1", "b", "2"]
            ZINTER 2 z st WITHSCORES AGGREGATE MAX => []
        "#,
    );
}
