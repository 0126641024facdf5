//! BITOP, BITFIELD and BITFIELD_RO over TCP, with the replies and error texts redis-server
//! 7.0.15 gives for the same sequence (run there by hand).

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

fn ints(v: &[i64]) -> V {
    V::Array(v.iter().map(|n| V::Int(*n)).collect())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn bitop_pads_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.qb(&[b"SET", b"a", b"\xff\x0f"]), V::ok());
    assert_eq!(c.qb(&[b"SET", b"b", b"\xa0"]), V::ok());
    let get = |c: &mut Client| c.q(&["GET", "d"]);
    assert_eq!(c.q(&["BITOP", "AND", "d", "a", "b"]), int(2));
    assert_eq!(get(&mut c), V::Bulk(b"\xa0\x00".to_vec()));
    assert_eq!(c.q(&["BITOP", "or", "d", "a", "b"]), int(2));
    assert_eq!(get(&mut c), V::Bulk(b"\xff\x0f".to_vec()));
    assert_eq!(c.q(&["BITOP", "XOR", "d", "a", "b", "nokey"]), int(2));
    assert_eq!(get(&mut c), V::Bulk(b"\x5f\x0f".to_vec()));
    assert_eq!(c.q(&["BITOP", "NOT", "d", "b"]), int(1));
    assert_eq!(get(&mut c), V::Bulk(b"\x5f".to_vec()));
    // The result replaces the destination, expiry included; an empty one deletes it.
    assert_eq!(c.q(&["EXPIRE", "d", "100"]), int(1));
    assert_eq!(c.q(&["BITOP", "OR", "d", "b"]), int(1));
    assert_eq!(c.q(&["TTL", "d"]), int(-1));
    assert_eq!(c.q(&["BITOP", "AND", "d", "nokey", "nokey2"]), int(0));
    assert_eq!(c.q(&["EXISTS", "d"]), int(0));
    // A list destination is overwritten; a list source is an error.
    assert_eq!(c.q(&["RPUSH", "l", "x"]), int(1));
    assert_eq!(c.q(&["BITOP", "OR", "d", "a", "l"]), V::err(WRONGTYPE));
    assert_eq!(c.q(&["BITOP", "OR", "l", "a"]), int(2));
    assert_eq!(c.q(&["TYPE", "l"]), V::Simple("string".into()));
    assert_eq!(
        c.q(&["BITOP", "NOT", "d", "a", "b"]),
        V::err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(
        c.q(&["BITOP", "nope", "d", "a"]),
        V::err("ERR syntax error")
    );
    assert_eq!(
        c.q(&["BITOP", "AND", "d"]),
        V::err("ERR wrong number of arguments for 'bitop' command")
    );
}

#[test]
fn bitfield_subcommands_and_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let reply = c.q(&[
        "BITFIELD", "f", "SET", "u8", "0", "255", "GET", "u8", "0", "INCRBY", "u8", "0", "1",
        "OVERFLOW", "SAT", "INCRBY", "u8", "0", "-5", "OVERFLOW", "FAIL", "INCRBY", "u8", "0",
        "300", "GET", "i8", "0",
    ]);
    assert_eq!(
        reply,
        V::Array(vec![int(0), int(255), int(0), int(0), V::NilBulk, int(0)])
    );
    assert_eq!(c.qb(&[b"GET", b"f"]), V::Bulk(vec![0]));
    // `#N` is the N-th field of the type's width; fields may straddle bytes.
    assert_eq!(
        c.q(&["BITFIELD", "f", "SET", "i5", "#2", "-3", "GET", "i5", "#2", "GET", "u15", "0"]),
        ints(&[0, -3, 29])
    );
    assert_eq!(
        c.q(&["BITFIELD", "f", "OVERFLOW", "SAT", "SET", "i8", "0", "200", "SET", "u4", "4", "-1"]),
        ints(&[0, 15])
    );
    assert_eq!(
        c.q(&[
            "BITFIELD",
            "f",
            "INCRBY",
            "i64",
            "0",
            "9223372036854775807",
            "OVERFLOW",
            "WRAP",
            "INCRBY",
            "i64",
            "0",
            "9223372036854775807",
        ]),
        ints(&[-55732045388709889, 9167639991466065918])
    );
    // A write that fails still creates the key, as long as its field needs.
    assert_eq!(
        c.q(&["BITFIELD", "nokey", "OVERFLOW", "FAIL", "INCRBY", "u8", "100", "300"]),
        V::Array(vec![V::NilBulk])
    );
    assert_eq!(c.q(&["STRLEN", "nokey"]), int(14));
    // Reads create nothing.
    assert_eq!(c.q(&["BITFIELD", "nokey2", "GET", "u8", "0"]), ints(&[0]));
    assert_eq!(c.q(&["EXISTS", "nokey2"]), int(0));
    assert_eq!(c.q(&["BITFIELD", "f"]), V::Array(vec![]));
    assert_eq!(
        c.q(&["BITFIELD", "f", "OVERFLOW", "WRAP"]),
        V::Array(vec![])
    );
    assert_eq!(
        c.q(&["BITFIELD_RO", "f", "GET", "u8", "0", "GET", "i4", "4"]),
        ints(&[127, -1])
    );
}

#[test]
fn bitfield_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "f", "x"]), V::ok());
    assert_eq!(c.q(&["RPUSH", "l", "x"]), int(1));
    let type_err = V::err(
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported \
         but i64 is.",
    );
    let offset_err = V::err("ERR bit offset is not an integer or out of range");
    assert_eq!(c.q(&["BITFIELD", "f", "GET", "u64", "0"]), type_err);
    assert_eq!(c.q(&["BITFIELD", "f", "GET", "U8", "0"]), type_err);
    assert_eq!(c.q(&["BITFIELD", "f", "GET", "i65", "0"]), type_err);
    assert_eq!(c.q(&["BITFIELD", "f", "GET", "i8", "-1"]), offset_err);
    assert_eq!(
        c.q(&["BITFIELD", "f", "GET", "u8", "#4294967296"]),
        offset_err
    );
    assert_eq!(
        c.q(&["BITFIELD", "f", "GET", "u8", "4294967296"]),
        offset_err
    );
    assert_eq!(
        c.q(&["BITFIELD", "f", "GET", "i8", "0", "SET", "u8", "0", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q(&["BITFIELD", "f", "foo"]), V::err("ERR syntax error"));
    assert_eq!(
        c.q(&["BITFIELD", "f", "GET", "u8"]),
        V::err("ERR syntax error")
    );
    assert_eq!(
        c.q(&["BITFIELD", "f", "OVERFLOW", "nope"]),
        V::err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(c.q(&["BITFIELD", "l", "GET", "u8", "0"]), V::err(WRONGTYPE));
    assert_eq!(
        c.q(&["BITFIELD", "l", "SET", "u8", "0", "1"]),
        V::err(WRONGTYPE)
    );
    assert_eq!(
        c.q(&["BITFIELD_RO", "f", "SET", "u8", "0", "1"]),
        V::err("ERR BITFIELD_RO only supports the GET subcommand")
    );
    // Nothing was written by the refused requests.
    assert_eq!(c.q(&["GET", "f"]), V::bulk("x"));
}
