//! The list family (`cmd/lists.rs`, `list.rs`, `blocking.rs`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.
//! Blocking pops run on several connections: the blocked client's reply arrives when another
//! connection pushes.

use crate::test_server::TestServer;
use std::time::Duration;

#[test]
fn positions_inserts_moves_pops_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            RPUSH l a b c a b c => :6
            LPOS l b => :1
            LPOS l b RANK 2 => :4
            LPOS l b RANK -1 => :4
            LPOS l b COUNT 0 => [:1, :4]
            LPOS l b COUNT 1 RANK -1 => [:4]
            LPOS l z => (nil)
            LPOS l z COUNT 0 => []
            LPOS l a MAXLEN 3 COUNT 0 => [:0]
            LPOS l b RANK 0 => -ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list
            LPOS l b COUNT -1 => -ERR COUNT can't be negative
            LPOS l b MAXLEN -1 => -ERR MAXLEN can't be negative
            LPOS l b FOO 1 => -ERR syntax error
            LPOS nokey a => (nil)
            LINSERT l BEFORE b X => :7
            LINSERT l AFTER c Y => :8
            LINSERT l AFTER zz Y => :-1
            LINSERT nokey AFTER a Y => :0
            LINSERT l MIDDLE a Y => -ERR syntax error
            LRANGE l 0 -1 => ["a", "X", "b", "c", "Y", "a", "b", "c"]
            LMOVE l m LEFT RIGHT => "a"
            LMOVE l m RIGHT LEFT => "c"
            LRANGE m 0 -1 => ["c", "a"]
            LMOVE l l LEFT RIGHT => "X"
            LRANGE l 0 -1 => ["b", "c", "Y", "a", "b", "X"]
            LMOVE nokey m LEFT LEFT => (nil)
            LMOVE l m UP LEFT => -ERR syntax error
            RPOPLPUSH l m => "X"
            LRANGE m 0 -1 => ["X", "c", "a"]
            SET str v => +OK
            LMOVE l str LEFT LEFT => -WRONGTYPE Operation against a key holding the wrong kind of value
            LMOVE str l LEFT LEFT => -WRONGTYPE Operation against a key holding the wrong kind of value
            LPUSH str a => -WRONGTYPE Operation against a key holding the wrong kind of value
            LLEN str => -WRONGTYPE Operation against a key holding the wrong kind of value
            LINDEX l 0 => "b"
            LINDEX l -1 => "b"
            LINDEX l 99 => (nil)
            LINDEX l x => -ERR value is not an integer or out of range
            LSET l 0 first => +OK
            LSET l 99 x => -ERR index out of range
            LSET nokey 0 x => -ERR no such key
            LTRIM l 1 2 => +OK
            LRANGE l 0 -1 => ["c", "Y"]
            LREM l 0 b => :0
            RPUSH r a b a c a => :5
            LREM r -2 a => :2
            LRANGE r 0 -1 => ["a", "b", "c"]
            LREM r 1 a => :1
            LRANGE r 0 -1 => ["b", "c"]
            LPOP r 0 => []
            LPOP r 5 => ["b", "c"]
            EXISTS r => :0
            LPOP nokey => (nil)
            LPOP nokey 2 => (nil-array)
            RPOP nokey 2 => (nil-array)
            LPOP l -1 => -ERR value is out of range, must be positive
            RPUSHX nokey a => :0
            LPUSHX l z => :3
            LMPOP 2 nokey l LEFT => ["l", ["z"]]
            LMPOP 2 nokey l RIGHT COUNT 10 => ["l", ["Y", "c"]]
            LMPOP 1 nokey LEFT => (nil-array)
            LMPOP 0 l LEFT => -ERR numkeys should be greater than 0
            LMPOP 1 l MIDDLE => -ERR syntax error
            LMPOP 1 l LEFT COUNT 0 => -ERR count should be greater than 0
            LMPOP 2 str l LEFT => -WRONGTYPE Operation against a key holding the wrong kind of value
        "#,
    );
}

#[test]
fn lists_report_quicklist_whatever_the_size_limit() {
    TestServer::in_memory().check(
        r#"
            CONFIG SET list-max-listpack-size 4 => +OK
            RPUSH l a b c d => :4
            OBJECT ENCODING l => "quicklist"
            RPUSH l e => :5
            OBJECT ENCODING l => "quicklist"
            CONFIG SET list-max-listpack-size -2 => +OK
            RPUSH big a => :1
            OBJECT ENCODING big => "quicklist"
        "#,
    );
}

#[test]
fn blocking_pops_time_out_with_a_null_and_reject_bad_timeouts() {
    let mut t = TestServer::in_memory();
    t.check(
        r#"
        BLPOP l1 l2 0.05 => (nil-array)
        BRPOP l1 0.05 => (nil-array)
        BLMOVE l1 l2 LEFT RIGHT 0.05 => (nil-array)
        BRPOPLPUSH l1 l2 0.05 => (nil-array)
        BLMPOP 0.05 2 l1 l2 LEFT => (nil-array)
        BLPOP l1 -1 => -ERR timeout is negative
        BLPOP l1 x => -ERR timeout is not a float or out of range
        BLMPOP 0 0 l LEFT => -ERR numkeys should be greater than 0
        SET wt v => +OK
        BLPOP wt 0 => -WRONGTYPE Operation against a key holding the wrong kind of value
        "#,
    );
    assert!(t.q("HELLO 3").starts_with('{'));
    t.check(
        r#"
        BLPOP l1 0.05 => _
        BLMOVE l1 l2 LEFT RIGHT 0.05 => _
        "#,
    );
}

#[test]
fn a_client_blocked_on_several_keys_is_served_by_the_first_push() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BLPOP", "l1", "l2", "0"]);
    t.wait_blocked(1);
    b.silent(Duration::from_millis(50));
    assert_eq!(t.q("RPUSH l2 x y"), ":2");
    assert_eq!(b.recv().to_string(), r#"["l2", "x"]"#);
    t.wait_blocked(0);
    assert_eq!(t.q("LRANGE l2 0 -1"), r#"["y"]"#);
    // The other key no longer wakes it.
    assert_eq!(t.q("RPUSH l1 z"), ":1");
    assert_eq!(t.q("LLEN l1"), ":1");
}

#[test]
fn clients_blocked_on_one_key_are_served_first_come_first_served() {
    let mut t = TestServer::in_memory();
    let (mut b, mut c) = (t.conn(), t.conn());
    b.send(&["BRPOP", "k", "0"]);
    t.wait_blocked(1);
    c.send(&["BRPOP", "k", "0"]);
    t.wait_blocked(2);
    assert_eq!(t.q("RPUSH k 1 2 3"), ":3");
    assert_eq!(b.recv().to_string(), r#"["k", "3"]"#);
    assert_eq!(c.recv().to_string(), r#"["k", "2"]"#);
    assert_eq!(t.q("LRANGE k 0 -1"), r#"["1"]"#);
}

#[test]
fn blmove_and_blmpop_are_served_by_a_later_push() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]);
    t.wait_blocked(1);
    assert_eq!(t.q("LPUSH src a b"), ":2");
    assert_eq!(b.recv().to_string(), r#""a""#);
    assert_eq!(t.q("LRANGE src 0 -1"), r#"["b"]"#);
    assert_eq!(t.q("LRANGE dst 0 -1"), r#"["a"]"#);

    b.send(&["BLMPOP", "0", "2", "m1", "m2", "RIGHT", "COUNT", "5"]);
    t.wait_blocked(1);
    assert_eq!(t.q("RPUSH m2 a b c"), ":3");
    assert_eq!(b.recv().to_string(), r#"["m2", ["c", "b", "a"]]"#);
    assert_eq!(t.q("EXISTS m2"), ":0");
}

#[test]
fn a_blocked_pop_times_out_while_another_client_works() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BLPOP", "k", "0.2"]);
    t.wait_blocked(1);
    assert_eq!(t.q("SET other v"), "+OK");
    assert_eq!(b.recv().to_string(), "(nil-array)");
    t.wait_blocked(0);
    assert_eq!(t.q("RPUSH k a"), ":1");
    assert_eq!(t.q("LLEN k"), ":1");
}

#[test]
fn a_key_of_another_type_keeps_the_client_blocked_until_a_list_appears() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BLPOP", "w", "0"]);
    t.wait_blocked(1);
    assert_eq!(t.q("SET w v"), "+OK");
    b.silent(Duration::from_millis(50));
    assert_eq!(t.q("DEL w"), ":1");
    assert_eq!(t.q("RPUSH w z"), ":1");
    assert_eq!(b.recv().to_string(), r#"["w", "z"]"#);
}

#[test]
fn pushes_in_a_transaction_serve_the_blocked_client_after_exec() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    b.send(&["BLPOP", "t", "0"]);
    t.wait_blocked(1);
    t.check(
        r#"
        MULTI => +OK
        RPUSH t a => +QUEUED
        RPUSH t b => +QUEUED
        EXEC => [:1, :2]
        "#,
    );
    assert_eq!(b.recv().to_string(), r#"["t", "a"]"#);
    assert_eq!(t.q("LRANGE t 0 -1"), r#"["b"]"#);
    // A push popped again inside the same transaction serves no one.
    b.send(&["BLPOP", "u", "0"]);
    t.wait_blocked(1);
    t.check(
        r#"
        MULTI => +OK
        RPUSH u a => +QUEUED
        LPOP u => +QUEUED
        EXEC => [:1, "a"]
        "#,
    );
    b.silent(Duration::from_millis(50));
    assert_eq!(t.q("RPUSH u z"), ":1");
    assert_eq!(b.recv().to_string(), r#"["u", "z"]"#);
    // Inside MULTI a blocking pop does not block.
    t.check(
        r#"
        MULTI => +OK
        BLPOP empty 0 => +QUEUED
        EXEC => [(nil-array)]
        "#,
    );
}

/// Blocks `b` with `request` and waits until the server counts it blocked.
fn block(t: &TestServer, b: &mut crate::test_server::TestConn, request: &[&str]) {
    b.send(request);
    t.wait_blocked(1);
}

#[test]
fn every_command_that_creates_the_list_serves_the_blocked_client() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    block(&t, &mut b, &["BLPOP", "dst", "0"]);
    assert_eq!(t.q("RPUSH src x"), ":1");
    assert_eq!(t.q("RENAME src dst"), "+OK");
    assert_eq!(b.recv().to_string(), r#"["dst", "x"]"#);
    assert_eq!(t.q("EXISTS dst"), ":0");

    block(&t, &mut b, &["BLPOP", "dst", "0"]);
    assert_eq!(t.q("RPUSH src2 y"), ":1");
    assert_eq!(t.q("LMOVE src2 dst LEFT LEFT"), r#""y""#);
    assert_eq!(b.recv().to_string(), r#"["dst", "y"]"#);

    block(&t, &mut b, &["BRPOP", "cp", "0"]);
    assert_eq!(t.q("RPUSH orig 1 2"), ":2");
    assert_eq!(t.q("COPY orig cp"), ":1");
    assert_eq!(b.recv().to_string(), r#"["cp", "2"]"#);
    assert_eq!(t.q("LRANGE cp 0 -1"), r#"["1"]"#);

    block(&t, &mut b, &["BLPOP", "mv", "0"]);
    t.check(
        r#"
        SELECT 1 => +OK
        RPUSH mv m => :1
        MOVE mv 0 => :1
        SELECT 0 => +OK
        "#,
    );
    assert_eq!(b.recv().to_string(), r#"["mv", "m"]"#);

    block(&t, &mut b, &["BLPOP", "sorted", "0"]);
    assert_eq!(t.q("RPUSH unsorted 3 1 2"), ":3");
    assert_eq!(t.q("SORT unsorted STORE sorted"), ":3");
    assert_eq!(b.recv().to_string(), r#"["sorted", "1"]"#);

    // A key that expired meanwhile is replaced by a list.
    block(&t, &mut b, &["BRPOP", "ex", "0"]);
    assert_eq!(t.q("SET ex v PX 1"), "+OK");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(t.q("RPUSH ex z"), ":1");
    assert_eq!(b.recv().to_string(), r#"["ex", "z"]"#);
}

#[test]
fn a_served_move_can_serve_the_next_client_and_fail_on_the_destination_type() {
    let mut t = TestServer::in_memory();
    let (mut b, mut c) = (t.conn(), t.conn());
    // One push, two waiters: the first is served, the second times out.
    b.send(&["BLPOP", "one", "0"]);
    t.wait_blocked(1);
    c.send(&["BLPOP", "one", "0.2"]);
    t.wait_blocked(2);
    assert_eq!(t.q("RPUSH one x"), ":1");
    assert_eq!(b.recv().to_string(), r#"["one", "x"]"#);
    assert_eq!(c.recv().to_string(), "(nil-array)");

    block(
        &t,
        &mut b,
        &["BLMOVE", "same", "same", "RIGHT", "LEFT", "0"],
    );
    assert_eq!(t.q("RPUSH same 1 2"), ":2");
    assert_eq!(b.recv().to_string(), r#""2""#);
    assert_eq!(t.q("LRANGE same 0 -1"), r#"["2", "1"]"#);

    // The element BRPOPLPUSH moves serves the client blocked on its destination.
    b.send(&["BRPOPLPUSH", "r1", "r2", "0"]);
    t.wait_blocked(1);
    c.send(&["BLPOP", "r2", "0"]);
    t.wait_blocked(2);
    assert_eq!(t.q("RPUSH r1 v"), ":1");
    assert_eq!(b.recv().to_string(), r#""v""#);
    assert_eq!(c.recv().to_string(), r#"["r2", "v"]"#);
    assert_eq!(t.q("EXISTS r1 r2"), ":0");

    // A destination of another type: the client gets the error, the element stays.
    assert_eq!(t.q("SET wt v"), "+OK");
    block(&t, &mut b, &["BLMOVE", "ls", "wt", "LEFT", "LEFT", "0"]);
    assert_eq!(t.q("RPUSH ls q"), ":1");
    assert_eq!(
        b.recv().to_string(),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(t.q("LRANGE ls 0 -1"), r#"["q"]"#);

    // BLMPOP on three keys takes what the one pushed has, up to COUNT.
    block(
        &t,
        &mut b,
        &["BLMPOP", "0", "3", "k1", "k2", "k3", "LEFT", "COUNT", "2"],
    );
    assert_eq!(t.q("RPUSH k3 a"), ":1");
    assert_eq!(b.recv().to_string(), r#"["k3", ["a"]]"#);

    // LPUSH of several elements: the client gets the last one pushed, as in Redis.
    block(&t, &mut b, &["BLPOP", "lp", "0"]);
    assert_eq!(t.q("LPUSH lp 1 2 3"), ":3");
    assert_eq!(b.recv().to_string(), r#"["lp", "3"]"#);
    assert_eq!(t.q("LRANGE lp 0 -1"), r#"["2", "1"]"#);
}

#[test]
fn client_unblock_ends_a_wait_with_a_timeout_or_an_error() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    let id = b.q("CLIENT ID");
    let id = id.trim_start_matches(':');
    block(&t, &mut b, &["BLPOP", "nothing", "0"]);
    assert_eq!(t.q(&format!("CLIENT UNBLOCK {id}")), ":1");
    assert_eq!(b.recv().to_string(), "(nil-array)");
    block(&t, &mut b, &["BLPOP", "nothing", "0"]);
    assert_eq!(t.q(&format!("CLIENT UNBLOCK {id} ERROR")), ":1");
    assert_eq!(
        b.recv().to_string(),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK"
    );
    assert_eq!(t.q(&format!("CLIENT UNBLOCK {id}")), ":0");
}

#[test]
fn one_exec_serves_clients_blocked_on_different_keys() {
    let mut t = TestServer::in_memory();
    let (mut b, mut c) = (t.conn(), t.conn());
    b.send(&["BLPOP", "q1", "0"]);
    t.wait_blocked(1);
    c.send(&["BLPOP", "q2", "0"]);
    t.wait_blocked(2);
    t.check(
        r#"
        MULTI => +OK
        RPUSH q2 two => +QUEUED
        RPUSH q1 one => +QUEUED
        EXEC => [:1, :1]
        "#,
    );
    assert_eq!(b.recv().to_string(), r#"["q1", "one"]"#);
    assert_eq!(c.recv().to_string(), r#"["q2", "two"]"#);
}

/// Out-of-range indexes, LPOS with RANK/COUNT/MAXLEN together, LMPOP argument errors.
#[test]
fn range_bounds_and_argument_errors() {
    TestServer::in_memory().check(
        r#"
            RPUSH l a b c d e => :5
            LRANGE l -100 100 => ["a", "b", "c", "d", "e"]
            LRANGE l 3 1 => []
            LRANGE l x 1 => -ERR value is not an integer or out of range
            LTRIM l 5 10 => +OK
            EXISTS l => :0
            RPUSH l a b c => :3
            LINSERT l BEFORE a a => :4
            LINSERT l before A x => :-1
            LPOS l a RANK -2 COUNT 0 MAXLEN 2 => []
            LPOS l a RANK -9223372036854775808 => :1
            LPOS l a COUNT 0 MAXLEN 0 => [:0, :1]
            LSET l -1 z => +OK
            LSET l -5 z => -ERR index out of range
            LRANGE l 0 -1 => ["a", "a", "b", "z"]
            LREM l -1 nope => :0
            LMOVE l l RIGHT LEFT => "z"
            LRANGE l 0 -1 => ["z", "a", "a", "b"]
            RPOPLPUSH nokey l => (nil)
            LPUSH l => -ERR wrong number of arguments for 'lpush' command
            RPOP l 0 => []
            LPOP l 1 => ["z"]
            LMPOP 1 l LEFT COUNT -1 => -ERR count should be greater than 0
            LMPOP 1 l LEFT COUNT x => -ERR count should be greater than 0
            LMPOP 1 l LEFT COUNT 1 COUNT 2 => -ERR syntax error
            LMPOP 2 l => -ERR wrong number of arguments for 'lmpop' command
            LINDEX l -100 => (nil)
        "#,
    );
}
