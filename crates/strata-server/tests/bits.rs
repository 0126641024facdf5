//! The bitmap commands over TCP: SETBIT, GETBIT, BITCOUNT, BITPOS with Redis 7.0's replies,
//! special cases and error texts (checked by hand against redis-server 7.0.15).

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

const OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";
const NOT_INT: &str = "ERR value is not an integer or out of range";

#[test]
fn setbit_and_getbit() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // Bit 0 is the most significant bit of the first byte; the string grows with zeros.
    assert_eq!(c.q(&["SETBIT", "b", "1", "1"]), int(0));
    assert_eq!(c.q(&["SETBIT", "b", "7", "1"]), int(0));
    assert_eq!(c.q(&["GET", "b"]), V::bulk("A"));
    assert_eq!(c.q(&["SETBIT", "b", "7", "0"]), int(1));
    assert_eq!(c.q(&["GET", "b"]), V::bulk("@"));
    assert_eq!(c.q(&["SETBIT", "b", "23", "1"]), int(0));
    assert_eq!(c.qb(&[b"GET", b"b"]), V::Bulk(b"@\x00\x01".to_vec()));
    assert_eq!(c.q(&["GETBIT", "b", "1"]), int(1));
    assert_eq!(c.q(&["GETBIT", "b", "2"]), int(0));
    assert_eq!(c.q(&["GETBIT", "b", "23"]), int(1));
    // Past the end and on a missing key: 0, and nothing grows.
    assert_eq!(c.q(&["GETBIT", "b", "4294967295"]), int(0));
    assert_eq!(c.q(&["STRLEN", "b"]), int(3));
    assert_eq!(c.q(&["GETBIT", "nokey", "0"]), int(0));
    assert_eq!(c.q(&["EXISTS", "nokey"]), int(0));
    // Writing a 0 to a missing key creates it, as long as the offset needs.
    assert_eq!(c.q(&["SETBIT", "z", "17", "0"]), int(0));
    assert_eq!(c.qb(&[b"GET", b"z"]), V::Bulk(vec![0, 0, 0]));
    // A bit of a number's decimal text ("1" is 0x31).
    assert_eq!(c.q(&["SET", "n", "1"]), V::ok());
    assert_eq!(c.q(&["GETBIT", "n", "2"]), int(1));
    assert_eq!(c.q(&["SETBIT", "n", "6", "1"]), int(0));
    assert_eq!(c.q(&["GET", "n"]), V::bulk("3"));
    assert_eq!(c.q(&["INCR", "n"]), int(4));
    // An expiry is kept.
    assert_eq!(c.q(&["EXPIRE", "n", "100"]), int(1));
    assert_eq!(c.q(&["SETBIT", "n", "0", "1"]), int(0));
    assert_eq!(c.q(&["TTL", "n"]), int(100));
    // Errors: the offset is checked before the bit, both before the key.
    for bad in ["-1", "abc", "", "4294967296", "1.5", " 1", "01"] {
        assert_eq!(
            c.q(&["SETBIT", "b", bad, "1"]),
            V::err(OFFSET_ERR),
            "{bad:?}"
        );
        assert_eq!(c.q(&["GETBIT", "b", bad]), V::err(OFFSET_ERR), "{bad:?}");
    }
    let bit_err = V::err("ERR bit is not an integer or out of range");
    for bad in ["2", "-1", "abc", "", "01"] {
        assert_eq!(c.q(&["SETBIT", "b", "0", bad]), bit_err, "{bad:?}");
    }
    assert_eq!(c.q(&["SETBIT", "b", "x", "2"]), V::err(OFFSET_ERR));
    assert_eq!(
        c.q(&["SETBIT", "b", "1"]),
        V::err("ERR wrong number of arguments for 'setbit' command")
    );
    assert_eq!(
        c.q(&["GETBIT", "b"]),
        V::err("ERR wrong number of arguments for 'getbit' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn bit_offsets_obey_proto_max_bulk_len() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(
        c.q(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        V::ok()
    );
    // The last bit of a 1 MB string is the highest offset; one more is refused.
    assert_eq!(c.q(&["SETBIT", "big", "8388608", "1"]), V::err(OFFSET_ERR));
    assert_eq!(c.q(&["GETBIT", "big", "8388608"]), V::err(OFFSET_ERR));
    assert_eq!(c.q(&["SETBIT", "big", "8388607", "1"]), int(0));
    assert_eq!(c.q(&["STRLEN", "big"]), int(1 << 20));
    assert_eq!(c.q(&["BITCOUNT", "big"]), int(1));
    assert_eq!(c.q(&["BITPOS", "big", "1"]), int(8388607));
    // SETRANGE's growth has the same bound.
    assert_eq!(
        c.q(&["SETRANGE", "big", "1048576", "x"]),
        V::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    s.shutdown().unwrap();
}

#[test]
fn bitcount_ranges_and_units() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "k", "foobar"]), V::ok());
    assert_eq!(c.q(&["BITCOUNT", "k"]), int(26));
    assert_eq!(c.q(&["BITCOUNT", "k", "0", "0"]), int(4));
    assert_eq!(c.q(&["BITCOUNT", "k", "1", "1"]), int(6));
    assert_eq!(c.q(&["BITCOUNT", "k", "1", "1", "BYTE"]), int(6));
    assert_eq!(c.q(&["BITCOUNT", "k", "5", "30", "BIT"]), int(17));
    assert_eq!(c.q(&["BITCOUNT", "k", "5", "30", "bit"]), int(17));
    assert_eq!(c.q(&["BITCOUNT", "k", "0", "-1", "BIT"]), int(26));
    assert_eq!(c.q(&["BITCOUNT", "k", "-100", "100"]), int(26));
    assert_eq!(c.q(&["BITCOUNT", "k", "3", "2"]), int(0));
    assert_eq!(c.q(&["BITCOUNT", "k", "-1", "-2"]), int(0));
    // A negative empty range is answered before the unit is read.
    assert_eq!(c.q(&["BITCOUNT", "k", "-1", "-2", "bits"]), int(0));
    // Missing keys count 0 whatever the arguments (Redis 7.0 looks at the key first).
    assert_eq!(c.q(&["BITCOUNT", "nokey"]), int(0));
    assert_eq!(c.q(&["BITCOUNT", "nokey", "1"]), int(0));
    assert_eq!(c.q(&["BITCOUNT", "nokey", "a", "b", "c", "d"]), int(0));
    assert_eq!(c.q(&["SET", "e", ""]), V::ok());
    assert_eq!(c.q(&["BITCOUNT", "e"]), int(0));
    assert_eq!(c.q(&["BITCOUNT", "e", "0", "-1", "BIT"]), int(0));
    let syntax = V::err("ERR syntax error");
    assert_eq!(c.q(&["BITCOUNT", "k", "1"]), syntax);
    assert_eq!(c.q(&["BITCOUNT", "k", "0", "1", "FOO"]), syntax);
    assert_eq!(c.q(&["BITCOUNT", "k", "0", "1", "BIT", "x"]), syntax);
    // Start and end are read before the unit.
    assert_eq!(c.q(&["BITCOUNT", "k", "abc", "1", "FOO"]), V::err(NOT_INT));
    assert_eq!(c.q(&["BITCOUNT", "k", "0", "abc", "BIT"]), V::err(NOT_INT));
    assert_eq!(
        c.q(&["BITCOUNT"]),
        V::err("ERR wrong number of arguments for 'bitcount' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn bitpos_special_cases() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.qb(&[b"SET", b"k", b"\xff\xf0\x00"]), V::ok());
    assert_eq!(c.q(&["BITPOS", "k", "0"]), int(12));
    assert_eq!(c.q(&["BITPOS", "k", "1", "2"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "k", "1", "1"]), int(8));
    assert_eq!(c.q(&["BITPOS", "k", "0", "2", "-1"]), int(16));
    assert_eq!(c.q(&["BITPOS", "k", "1", "7", "15", "BIT"]), int(7));
    assert_eq!(c.q(&["BITPOS", "k", "0", "7", "15", "bit"]), int(12));
    assert_eq!(c.q(&["BITPOS", "k", "0", "0", "11", "BIT"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "k", "1", "12", "-1", "BIT"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "k", "1", "-100", "100", "BYTE"]), int(0));
    assert_eq!(c.q(&["BITPOS", "k", "1", "2", "1"]), int(-1));
    // All ones: looking for a 0 without an end finds the first bit past the string; with
    // an end given, there is none in the range.
    assert_eq!(c.qb(&[b"SET", b"ones", b"\xff\xff"]), V::ok());
    assert_eq!(c.q(&["BITPOS", "ones", "0"]), int(16));
    assert_eq!(c.q(&["BITPOS", "ones", "0", "0"]), int(16));
    assert_eq!(c.q(&["BITPOS", "ones", "0", "1"]), int(16));
    assert_eq!(c.q(&["BITPOS", "ones", "0", "0", "-1"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "ones", "0", "0", "-1", "BIT"]), int(-1));
    // A missing key is all zeros; an empty string holds no bit at all.
    assert_eq!(c.q(&["BITPOS", "nokey", "0"]), int(0));
    assert_eq!(c.q(&["BITPOS", "nokey", "1"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "nokey", "0", "x", "y", "z", "w"]), int(0));
    assert_eq!(c.q(&["SET", "e", ""]), V::ok());
    assert_eq!(c.q(&["BITPOS", "e", "0"]), int(-1));
    assert_eq!(c.q(&["BITPOS", "e", "1"]), int(-1));
    // Errors, in Redis's order: the bit, the key, start, unit, end.
    let must = V::err("ERR The bit argument must be 1 or 0.");
    assert_eq!(c.q(&["BITPOS", "k", "2"]), must);
    assert_eq!(c.q(&["BITPOS", "nokey", "-1"]), must);
    assert_eq!(c.q(&["BITPOS", "k", "x"]), V::err(NOT_INT));
    assert_eq!(c.q(&["BITPOS", "k", "1", "abc"]), V::err(NOT_INT));
    assert_eq!(c.q(&["BITPOS", "k", "1", "0", "bit"]), V::err(NOT_INT));
    let syntax = V::err("ERR syntax error");
    assert_eq!(c.q(&["BITPOS", "k", "1", "0", "abc", "FOO"]), syntax);
    assert_eq!(c.q(&["BITPOS", "k", "1", "0", "1", "BIT", "5"]), syntax);
    assert_eq!(
        c.q(&["BITPOS", "k"]),
        V::err("ERR wrong number of arguments for 'bitpos' command")
    );
    s.shutdown().unwrap();
}

#[test]
fn concurrent_setbits_lose_no_bit() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    std::thread::scope(|sc| {
        for t in 0..4 {
            sc.spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..100 {
                    let off = (i * 4 + t).to_string();
                    assert_eq!(c.q(&["SETBIT", "bm", &off, "1"]), V::Int(0));
                }
            });
        }
    });
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["BITCOUNT", "bm"]), int(400));
    assert_eq!(c.q(&["STRLEN", "bm"]), int(50));
    s.shutdown().unwrap();
}
