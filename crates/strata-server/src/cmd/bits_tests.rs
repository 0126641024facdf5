//! The bit commands (`cmd/bits.rs`, `cmd/bitfield.rs`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn setbit_counts_positions_bitop_bitfield_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            SETBIT b 7 1 => :0
            SETBIT b 7 0 => :1
            SETBIT b 7 1 => :0
            GETBIT b 7 => :1
            GETBIT b 100 => :0
            GETBIT nokey 0 => :0
            SETBIT b 1 2 => -ERR bit is not an integer or out of range
            SETBIT b -1 1 => -ERR bit offset is not an integer or out of range
            SETBIT b 4294967296 1 => -ERR bit offset is not an integer or out of range
            GET b => "\u{1}"
            SET s foobar => +OK
            BITCOUNT s => :26
            BITCOUNT s 0 0 => :4
            BITCOUNT s 1 1 => :6
            BITCOUNT s 5 30 BIT => :17
            BITCOUNT s 0 => -ERR syntax error
            BITCOUNT nokey => :0
            BITPOS s 1 => :1
            BITPOS s 0 => :0
            BITPOS s 1 2 => :17
            BITPOS s 1 7 15 BIT => :9
            BITPOS nokey 1 => :-1
            BITPOS nokey 0 => :0
            BITPOS s 2 => -ERR The bit argument must be 1 or 0.
            SET x abc => +OK
            SET y ab => +OK
            BITOP AND dest x y => :3
            GET dest => "ab\0"
            BITOP OR dest x y => :3
            GET dest => "abc"
            BITOP XOR dest x y => :3
            GET dest => "\0\0c"
            BITOP NOT dest x => :3
            STRLEN dest => :3
            BITOP NOT dest x y => -ERR BITOP NOT must be called with a single source key.
            BITOP NAND dest x => -ERR syntax error
            BITOP AND dest nokey nokey2 => :0
            EXISTS dest => :0
            RPUSH l a => :1
            BITOP AND dest x l => -WRONGTYPE Operation against a key holding the wrong kind of value
            SETBIT l 0 1 => -WRONGTYPE Operation against a key holding the wrong kind of value
            BITCOUNT l => -WRONGTYPE Operation against a key holding the wrong kind of value
            BITFIELD bf SET u8 0 255 GET u8 0 INCRBY u8 0 10 => [:0, :255, :9]
            BITFIELD bf OVERFLOW SAT INCRBY u8 0 300 => [:255]
            BITFIELD bf OVERFLOW FAIL INCRBY i8 0 -300 => [(nil)]
            BITFIELD bf GET u64 0 => -ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.
            BITFIELD bf GET i8 x => -ERR bit offset is not an integer or out of range
            BITFIELD_RO bf GET u8 0 => [:255]
            BITFIELD_RO bf SET u8 0 1 => -ERR BITFIELD_RO only supports the GET subcommand
        "#,
    );
}
