//! The set family (`cmd/sets.rs`, `cmd/members.rs`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn algebra_moves_pops_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            SADD a 1 2 3 4 x => :5
            SADD a 1 => :0
            SADD b 3 4 5 y => :4
            SADD c 4 x z => :3
            SET str v => +OK
            (sorted) SINTER a b => ["3", "4"]
            (sorted) SINTER a b c => ["4"]
            SINTER a nokey => []
            (sorted) SUNION a b => ["1", "2", "3", "4", "5", "x", "y"]
            (sorted) SUNION a nokey => ["1", "2", "3", "4", "x"]
            (sorted) SDIFF a b => ["1", "2", "x"]
            (sorted) SDIFF a b c => ["1", "2"]
            SDIFF nokey a => []
            SINTER a str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SUNION str a => -WRONGTYPE Operation against a key holding the wrong kind of value
            SDIFF a str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SINTERSTORE d a b => :2
            (sorted) SMEMBERS d => ["3", "4"]
            SUNIONSTORE d a c => :6
            (sorted) SMEMBERS d => ["1", "2", "3", "4", "x", "z"]
            SDIFFSTORE d a b c => :2
            (sorted) SMEMBERS d => ["1", "2"]
            SINTERSTORE d a nokey => :0
            EXISTS d => :0
            SINTERSTORE str a b => :2
            TYPE str => +set
            SET str v => +OK
            SINTERCARD 2 a b => :2
            SINTERCARD 2 a b LIMIT 1 => :1
            SINTERCARD 0 a => -ERR numkeys should be greater than 0
            SINTERCARD 3 a b => -ERR Number of keys can't be greater than number of args
            SINTERCARD 2 a b LIMIT -1 => -ERR LIMIT can't be negative
            SMOVE a b x => :1
            SISMEMBER a x => :0
            SISMEMBER b x => :1
            SMOVE a b nosuch => :0
            SMOVE nokey b 1 => :0
            SMOVE a str 1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            SMOVE str a 1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            SMOVE a a 1 => :1
            SMISMEMBER a 1 9 2 => [:1, :0, :1]
            SCARD a => :4
            SCARD nokey => :0
            SCARD str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SREM a 1 9 => :1
            SREM nokey 1 => :0
            SADD one only => :1
            SPOP one => "only"
            EXISTS one => :0
            SPOP nokey => (nil)
            SPOP nokey 2 => []
            SADD p a b c d e => :5
            SPOP p 0 => []
            SPOP p -1 => -ERR value is out of range, must be positive
            SCARD p => :5
            SRANDMEMBER nokey => (nil)
            SRANDMEMBER nokey 3 => []
            SRANDMEMBER nokey -3 => []
            SRANDMEMBER p 0 => []
            (sorted) SRANDMEMBER p 10 => ["a", "b", "c", "d", "e"]
            (sorted) SPOP p 10 => ["a", "b", "c", "d", "e"]
            EXISTS p => :0
            SADD r a => :1
            SRANDMEMBER r -3 => ["a", "a", "a"]
            SRANDMEMBER r 1 => ["a"]
            SPOP r 1 => ["a"]
            SADD str x => -WRONGTYPE Operation against a key holding the wrong kind of value
            SMEMBERS str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SISMEMBER str x => -WRONGTYPE Operation against a key holding the wrong kind of value
            SADD ints 1 2 3 => :3
            OBJECT ENCODING ints => "intset"
            SADD ints x => :1
            OBJECT ENCODING ints => "hashtable"
            SREM ints x => :1
            OBJECT ENCODING ints => "hashtable"
            SPOP str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SRANDMEMBER str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SMISMEMBER str a => -WRONGTYPE Operation against a key holding the wrong kind of value
            SINTERCARD 1 str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SINTERSTORE d str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SMOVE nokey str 1 => :0
        "#,
    );
}

#[test]
fn intset_turns_hashtable_past_its_entries_or_on_a_non_integer() {
    TestServer::in_memory().check(
        r#"
            CONFIG SET set-max-intset-entries 3 => +OK
            SADD s 1 2 3 => :3
            OBJECT ENCODING s => "intset"
            SADD s 4 => :1
            OBJECT ENCODING s => "hashtable"
            SADD t -5 9223372036854775807 => :2
            OBJECT ENCODING t => "intset"
            SADD t 9223372036854775808 => :1
            OBJECT ENCODING t => "hashtable"
            SADD u 01 => :1
            OBJECT ENCODING u => "hashtable"
            SINTERSTORE d s s => :4
            OBJECT ENCODING d => "hashtable"
            SADD e 1 2 => :2
            SINTERSTORE d e e => :2
            OBJECT ENCODING d => "intset"
        "#,
    );
}

#[test]
fn random_members_come_from_the_set_and_counts_are_exact() {
    let mut t = TestServer::in_memory();
    assert_eq!(t.q("SADD s a b c d e"), ":5");
    for _ in 0..20 {
        let one = t.q("SRANDMEMBER s");
        assert!(
            ["\"a\"", "\"b\"", "\"c\"", "\"d\"", "\"e\""].contains(&one.as_str()),
            "{one}"
        );
        // A positive count: distinct members; a negative one: repeats allowed, exact length.
        let r = t.cmd(&["SRANDMEMBER", "s", "3"]);
        let mut got: Vec<String> = r.items().iter().map(|m| m.to_string()).collect();
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 3, "{r}");
        assert_eq!(t.cmd(&["SRANDMEMBER", "s", "-8"]).items().len(), 8);
    }
    let popped = t.cmd(&["SPOP", "s", "2"]);
    assert_eq!(popped.items().len(), 2);
    assert_eq!(t.q("SCARD s"), ":3");
    for m in popped.items() {
        let m = m.to_string();
        assert_eq!(
            t.q(&format!("SISMEMBER s {}", m.trim_matches('"'))),
            ":0",
            "{m}"
        );
    }
}

#[test]
fn resp3_replies_sets_as_sets() {
    let mut t = TestServer::in_memory();
    let mut c = t.conn();
    assert_eq!(t.q("SADD s x"), ":1");
    assert!(c.q("HELLO 3").starts_with('{'));
    assert_eq!(c.raw(&["SMEMBERS", "s"]), b"~1\r\n$1\r\nx\r\n");
    assert_eq!(c.raw(&["SINTER", "s", "nokey"]), b"~0\r\n");
    assert_eq!(c.raw(&["SPOP", "nokey"]), b"_\r\n");
    assert_eq!(c.raw(&["SMISMEMBER", "s", "x"]), b"*1\r\n:1\r\n");
}

/// STORE forms whose destination is a source, or whose result is empty.
#[test]
fn stores_onto_their_own_sources() {
    TestServer::in_memory().check(
        r#"
            CONFIG SET set-max-intset-entries 512 => +OK
            SADD big 1 2 3 4 5 => :5
            SINTERSTORE big big nokey => :0
            SADD a 1 2 3 => :3
            SADD b 2 3 4 => :3
            SINTERSTORE a a b => :2
            SMEMBERS a => ["2", "3"]
            SUNIONSTORE b a b => :3
            SDIFFSTORE b b nokey => :3
        "#,
    );
}

/// SSCAN, SINTERCARD arguments, SPOP/SRANDMEMBER count errors, emptied sets.
#[test]
fn scans_counts_and_argument_errors() {
    TestServer::in_memory().check(
        r#"
            SADD s a b c => :3
            SSCAN s 0 COUNT 100 MATCH a => ["0", ["a"]]
            SSCAN s x => -ERR invalid cursor
            SMISMEMBER s => -ERR wrong number of arguments for 'smismember' command
            SINTERCARD 1 s LIMIT 0 => :3
            SINTERCARD 1 s LIMIT x => -ERR LIMIT can't be negative
            SINTERCARD x s => -ERR numkeys should be greater than 0
            SINTERCARD 1 s FOO 1 => -ERR syntax error
            SADD i 1 2 3 => :3
            SADD i 3 => :0
            SREM i 1 2 3 => :3
            EXISTS i => :0
            SPOP s 0 => []
            SPOP s x => -ERR value is out of range, must be positive
            SRANDMEMBER s x => -ERR value is not an integer or out of range
            SRANDMEMBER s -9223372036854775808 => -ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807
            SDIFFSTORE s nokey => :0
            EXISTS s => :0
            SADD s2 1 => :1
            SUNIONSTORE s2 nokey nokey2 => :0
            EXISTS s2 => :0
            SMOVE s2 s2 1 => :0
            SADD ds x => :1
            SMOVE ds ds nope => :0
        "#,
    );
}
