//! The string family (`cmd/strings.rs`) through the in-process harness (`test_server.rs`):
//! every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn set_options_ranges_counters_lcs_encodings_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            SET k v => +OK
            GET k => "v"
            SET k v2 NX => (nil)
            SET k v2 XX GET => "v"
            SET nokey v XX => (nil)
            SET k v NX XX => -ERR syntax error
            SET k v EX 0 => -ERR invalid expire time in 'set' command
            SET k v EX -1 => -ERR invalid expire time in 'set' command
            SET k v EX x => -ERR value is not an integer or out of range
            SET k v PX 10 EX 10 => -ERR syntax error
            SET k v KEEPTTL EX 5 => -ERR syntax error
            GETSET k v3 => "v2"
            GETDEL k => "v3"
            GETDEL k => (nil)
            APPEND a hello => :5
            APPEND a " world" => :11
            GET a => "hello world"
            STRLEN a => :11
            STRLEN nokey => :0
            GETRANGE a 0 4 => "hello"
            GETRANGE a -5 -1 => "world"
            GETRANGE a 5 1 => ""
            GETRANGE nokey 0 1 => ""
            SETRANGE a 6 WORLD => :11
            GET a => "hello WORLD"
            SETRANGE b 3 x => :4
            GET b => "\0\0\0x"
            SETRANGE a -1 x => -ERR offset is out of range
            SETRANGE a 536870912 x => -ERR string exceeds maximum allowed size (proto-max-bulk-len)
            SETRANGE c 0 "" => :0
            EXISTS c => :0
            INCR n => :1
            INCRBY n 10 => :11
            DECR n => :10
            DECRBY n 5 => :5
            INCRBY n x => -ERR value is not an integer or out of range
            SET n 9223372036854775807 => +OK
            INCR n => -ERR increment or decrement would overflow
            SET n " 1" => +OK
            INCR n => -ERR value is not an integer or out of range
            INCR a => -ERR value is not an integer or out of range
            INCRBYFLOAT f 1.5 => "1.5"
            INCRBYFLOAT f -0.5 => "1"
            GET f => "1"
            INCRBYFLOAT f 3e2 => "301"
            INCRBYFLOAT f inf => -ERR increment would produce NaN or Infinity
            INCRBYFLOAT a 1 => -ERR value is not a valid float
            DECRBY n -9223372036854775808 => -ERR decrement would overflow
            MSET x 1 y 2 => +OK
            MSET x => -ERR wrong number of arguments for 'mset' command
            MGET x y nokey => ["1", "2", (nil)]
            MSETNX x 1 z 3 => :0
            MSETNX z 3 w 4 => :1
            SETNX x 9 => :0
            SETEX e 0 v => -ERR invalid expire time in 'setex' command
            SETEX e 100 v => +OK
            TTL e => :100
            PSETEX e 100000 v => +OK
            GETEX e PERSIST => "v"
            TTL e => :-1
            GETEX e EX 50 => "v"
            TTL e => :50
            GETEX e EX 0 => -ERR invalid expire time in 'getex' command
            GETEX nokey => (nil)
            RPUSH l a => :1
            GET l => -WRONGTYPE Operation against a key holding the wrong kind of value
            APPEND l x => -WRONGTYPE Operation against a key holding the wrong kind of value
            INCR l => -WRONGTYPE Operation against a key holding the wrong kind of value
            GETRANGE l 0 1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            SET i 12345 => +OK
            OBJECT ENCODING i => "int"
            SET s abc => +OK
            OBJECT ENCODING s => "embstr"
            SET r aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa => +OK
            OBJECT ENCODING r => "raw"
            APPEND s d => :4
            SET i2 012 => +OK
            OBJECT ENCODING i2 => "embstr"
            LCS x y => ""
            SET l1 ohmytext => +OK
            SET l2 mynewtext => +OK
            LCS l1 l2 => "mytext"
            LCS l1 l2 LEN => :6
            LCS l1 l2 IDX MINMATCHLEN 4 WITHMATCHLEN => ["matches", [[[:4, :7], [:5, :8], :4]], "len", :6]
        "#,
    );
}

#[test]
fn an_expired_string_is_gone_for_every_reader() {
    let mut t = TestServer::in_memory();
    assert_eq!(t.q("SET k v PX 30"), "+OK");
    std::thread::sleep(std::time::Duration::from_millis(60));
    t.check(
        r#"
        GET k => (nil)
        STRLEN k => :0
        EXISTS k => :0
        APPEND k x => :1
        TTL k => :-1
        "#,
    );
}

#[test]
#[ignore = "OBJECT ENCODING of a string is derived from its value (docs/design.md §13.5): \
            a string APPEND, SETRANGE or SETBIT changed reports embstr, Redis raw"]
fn a_string_changed_in_place_reports_raw() {
    TestServer::in_memory().check(
        r#"
        SET s abc => +OK
        APPEND s d => :4
        OBJECT ENCODING s => "raw"
        SETRANGE t 0 x => :1
        OBJECT ENCODING t => "raw"
        PFADD h a => :1
        OBJECT ENCODING h => "raw"
        "#,
    );
}

/// INCRBYFLOAT formatting, SET EXAT/PXAT/KEEPTTL/GET, GETEX, SETRANGE on integers, overflows and out-of-range expiry times.
#[test]
fn floats_absolute_expiry_and_overflow() {
    TestServer::in_memory().check(
        r#"
            SET s 10 => +OK
            INCRBYFLOAT s 0.1 => "10.1"
            INCRBYFLOAT s 5.0e3 => "5010.10000000000000009"
            INCRBYFLOAT s -5010.1 => "0"
            SET s 1.0 => +OK
            INCR s => -ERR value is not an integer or out of range
            SET s 10.50 => +OK
            INCRBYFLOAT s 0 => "10.5"
            SET s abc EXAT 0 => -ERR invalid expire time in 'set' command
            SET s abc PXAT 1 => +OK
            EXISTS s => :0
            SET s abc EXAT 33177117420 => +OK
            EXPIRETIME s => :33177117420
            SET s xyz KEEPTTL => +OK
            EXPIRETIME s => :33177117420
            SET s xyz GET => "xyz"
            EXPIRETIME s => :-1
            RPUSH lst a => :1
            SET lst v GET => -WRONGTYPE Operation against a key holding the wrong kind of value
            SET lst v NX GET => -WRONGTYPE Operation against a key holding the wrong kind of value
            GETEX s PXAT 33177117420000 => "xyz"
            EXPIRETIME s => :33177117420
            GETEX s EX 10 PX 10 => -ERR syntax error
            GETEX s FOO => -ERR syntax error
            GETDEL lst => -WRONGTYPE Operation against a key holding the wrong kind of value
            SETRANGE s 1 "" => :3
            SETRANGE s 0 "" => :3
            SET n 5 => +OK
            SETRANGE n 1 0 => :2
            INCR n => :51
            APPEND n 1 => :3
            INCR n => :512
            GETRANGE s 0 -100 => "x"
            GETRANGE s -100 -50 => "x"
            GETRANGE s 1 0 => ""
            GETRANGE s 9223372036854775807 9223372036854775807 => ""
            MSETNX a 1 a 2 => :1
            GET a => "2"
            SUBSTR n 0 1 => "51"
            STRLEN n => :3
            MGET lst n => [(nil), "512"]
            INCRBY n 9223372036854775807 => -ERR increment or decrement would overflow
            DECRBY n 9223372036854775807 => :-9223372036854775295
            DECRBY n -1 => :-9223372036854775294
            SET neg -0 => +OK
            INCR neg => -ERR value is not an integer or out of range
            SET big 99999999999999999999 => +OK
            INCR big => -ERR value is not an integer or out of range
            SETEX s x v => -ERR value is not an integer or out of range
            SETEX s -10 v => -ERR invalid expire time in 'setex' command
            SETEX s 9223372036854775807 v => -ERR invalid expire time in 'setex' command
            SET s v EX 9223372036854775807 => -ERR invalid expire time in 'set' command
            SET s v PX 9223372036854775807 => -ERR invalid expire time in 'set' command
            SET s v EXAT 9223372036854775807 => -ERR invalid expire time in 'set' command
            EXPIRE s 9223372036854775807 => -ERR invalid expire time in 'expire' command
            PEXPIRE s 9223372036854775807 => -ERR invalid expire time in 'pexpire' command
            EXPIRE s -9223372036854775808 => -ERR invalid expire time in 'expire' command
        "#,
    );
}
