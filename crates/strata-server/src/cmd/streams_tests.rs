//! The stream family (`cmd/streams.rs`, `cmd/stream_read.rs`, `cmd/stream_groups.rs`,
//! `stream/`) through the in-process harness (`test_server.rs`): every reply and error text
//! is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn add_range_read_trim_groups_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            XADD s 1-1 f v => "1-1"
            XADD s 1-1 f v => -ERR The ID specified in XADD is equal or smaller than the target stream top item
            XADD s 0-0 f v => -ERR The ID specified in XADD must be greater than 0-0
            XADD s 2-* a 1 b 2 => "2-0"
            XADD s 3 f => -ERR wrong number of arguments for 'xadd' command
            XADD s NOMKSTREAM 4-0 f v => "4-0"
            XADD nokey NOMKSTREAM * f v => (nil)
            EXISTS nokey => :0
            XLEN s => :3
            XRANGE s - + => [["1-1", ["f", "v"]], ["2-0", ["a", "1", "b", "2"]], ["4-0", ["f", "v"]]]
            XRANGE s - + COUNT 1 => [["1-1", ["f", "v"]]]
            XRANGE s (1-1 + => [["2-0", ["a", "1", "b", "2"]], ["4-0", ["f", "v"]]]
            XREVRANGE s + - COUNT 1 => [["4-0", ["f", "v"]]]
            XRANGE s x + => -ERR Invalid stream ID specified as stream command argument
            XREAD COUNT 1 STREAMS s 0 => [["s", [["1-1", ["f", "v"]]]]]
            XREAD STREAMS s 4-0 => (nil-array)
            XREAD STREAMS s => -ERR wrong number of arguments for 'xread' command
            XDEL s 1-1 9-9 => :1
            XLEN s => :2
            XTRIM s MAXLEN 1 => :1
            XRANGE s - + => [["4-0", ["f", "v"]]]
            XGROUP CREATE s g 0 => +OK
            XGROUP CREATE s g 0 => -BUSYGROUP Consumer Group name already exists
            XGROUP CREATE nokey g 0 => -ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.
            XGROUP CREATE nokey g $ MKSTREAM => +OK
            XADD s 5-0 k v => "5-0"
            XREADGROUP GROUP g c COUNT 10 STREAMS s > => [["s", [["4-0", ["f", "v"]], ["5-0", ["k", "v"]]]]]
            XPENDING s g => [:2, "4-0", "5-0", [["c", "2"]]]
            XACK s g 4-0 5-0 9-0 => :2
            XPENDING s g => [:0, (nil), (nil), (nil-array)]
            XREADGROUP GROUP nog c STREAMS s > => -NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option
            SET str v => +OK
            XADD str * f v => -WRONGTYPE Operation against a key holding the wrong kind of value
            XRANGE str - + => -WRONGTYPE Operation against a key holding the wrong kind of value
            XLEN str => -WRONGTYPE Operation against a key holding the wrong kind of value
        "#,
    );
}

#[test]
fn a_blocked_xread_is_served_by_a_later_add() {
    let mut t = TestServer::in_memory();
    assert_eq!(t.q("XADD s 1-0 a 1"), "\"1-0\"");
    let mut b = t.conn();
    b.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    t.wait_blocked(1);
    assert_eq!(t.q("XADD s 2-0 b 2"), "\"2-0\"");
    assert_eq!(b.recv().to_string(), r#"[["s", [["2-0", ["b", "2"]]]]]"#);
    assert_eq!(t.q("XREAD BLOCK 50 STREAMS s $"), "(nil-array)");
}

#[test]
fn blocked_stream_readers_see_the_stream_they_wait_on_change() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    assert_eq!(t.q("XADD s1 1-0 a 1"), "\"1-0\"");
    b.send(&[
        "XREAD", "BLOCK", "0", "COUNT", "5", "STREAMS", "s1", "s2", "$", "$",
    ]);
    t.wait_blocked(1);
    assert_eq!(t.q("XADD s2 5-0 b 2"), "\"5-0\"");
    assert_eq!(b.recv().to_string(), r#"[["s2", [["5-0", ["b", "2"]]]]]"#);
    // A group that does not exist yet is an error at once, not a wait.
    assert_eq!(
        b.q("XREADGROUP GROUP g c1 BLOCK 0 STREAMS s3 >"),
        "-NOGROUP No such key 's3' or consumer group 'g' in XREADGROUP with GROUP option"
    );
    // The stream deleted under a blocked group reader.
    assert_eq!(t.q("XGROUP CREATE s4 g $ MKSTREAM"), "+OK");
    b.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "s4",
        ">",
    ]);
    t.wait_blocked(1);
    assert_eq!(t.q("DEL s4"), ":1");
    assert_eq!(
        b.recv().to_string(),
        "-UNBLOCKED the stream key no longer exists"
    );
}
