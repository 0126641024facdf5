//! Transactions (`cmd/multi.rs`, `txn.rs`, `watch.rs`) through the in-process harness
//! (`test_server.rs`): a second connection changes watched keys. Every reply and error text
//! is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn a_write_to_a_watched_key_aborts_exec() {
    let mut t = TestServer::in_memory();
    let mut other = t.conn();
    t.check(
        r#"
        SET k 1 => +OK
        WATCH k => +OK
        MULTI => +OK
        INCR k => +QUEUED
        GET k => +QUEUED
        "#,
    );
    assert_eq!(other.q("SET k 10"), "+OK");
    t.check(
        r#"
        EXEC => (nil-array)
        GET k => "10"
        WATCH k => +OK
        MULTI => +OK
        INCR k => +QUEUED
        EXEC => [:11]
        WATCH nokey => +OK
        MULTI => +OK
        SET nokey 1 => +QUEUED
        EXEC => [+OK]
        WATCH k2 => +OK
        "#,
    );
    // Created and deleted again: still a change.
    assert_eq!(other.q("SET k2 x"), "+OK");
    assert_eq!(other.q("DEL k2"), ":1");
    t.check(
        r#"
        MULTI => +OK
        SET k2 y => +QUEUED
        EXEC => (nil-array)
        WATCH k3 => +OK
        "#,
    );
    assert_eq!(other.q("SET k3 x"), "+OK");
    t.check(
        r#"
        UNWATCH => +OK
        MULTI => +OK
        SET k3 y => +QUEUED
        EXEC => [+OK]
        GET k3 => "y"
        "#,
    );
}

#[test]
fn expiry_changes_and_flushes_abort_exec_too() {
    let mut t = TestServer::in_memory();
    let mut other = t.conn();
    t.check(
        r#"
        SET e v => +OK
        WATCH e => +OK
        EXPIRE e 100 => :1
        MULTI => +OK
        PING => +QUEUED
        EXEC => (nil-array)
        WATCH e => +OK
        "#,
    );
    assert_eq!(other.q("EXPIRE e 200"), ":1");
    t.check(
        r#"
        MULTI => +OK
        PING => +QUEUED
        EXEC => (nil-array)
        SET f v => +OK
        WATCH f => +OK
        "#,
    );
    assert_eq!(other.q("FLUSHALL"), "+OK");
    t.check(
        r#"
        MULTI => +OK
        PING => +QUEUED
        EXEC => (nil-array)
        "#,
    );
}

#[test]
fn queueing_errors_discard_and_runtime_errors() {
    TestServer::in_memory().check(
        r#"
        SET k 11 => +OK
        MULTI => +OK
        WATCH k => -ERR WATCH inside MULTI is not allowed
        MULTI => -ERR MULTI calls can not be nested
        SET k 1 => +QUEUED
        NOSUCH => -ERR unknown command 'NOSUCH', with args beginning with: 
        SET k => -ERR wrong number of arguments for 'set' command
        EXEC => -EXECABORT Transaction discarded because of previous errors.
        GET k => "11"
        MULTI => +OK
        SET k 5 => +QUEUED
        INCR a b => -ERR wrong number of arguments for 'incr' command
        DISCARD => +OK
        GET k => "11"
        DISCARD => -ERR DISCARD without MULTI
        EXEC => -ERR EXEC without MULTI
        MULTI => +OK
        SET s v => +QUEUED
        LPUSH s x => +QUEUED
        INCR s => +QUEUED
        EXEC => [+OK, -WRONGTYPE Operation against a key holding the wrong kind of value, -ERR value is not an integer or out of range]
        GET s => "v"
        "#,
    );
}

#[test]
fn a_transaction_over_keys_of_both_shards_is_seen_whole() {
    let mut t = TestServer::in_memory();
    let mut other = t.conn();
    t.check(
        r#"
        MULTI => +OK
        SET a 1 => +QUEUED
        SET b 2 => +QUEUED
        RPUSH l x => +QUEUED
        EXEC => [+OK, +OK, :1]
        "#,
    );
    assert_eq!(other.q("MGET a b"), r#"["1", "2"]"#);
    assert_eq!(other.q("LRANGE l 0 -1"), r#"["x"]"#);
}
