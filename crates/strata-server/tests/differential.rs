//! Regressions found by the differential test against a real redis-server 7.0
//! (`tests/redis/test_differential.py` at the repository root): each case is the shrunk
//! command sequence it printed, with Redis's replies.

mod common;

use common::{start, Client, V};

#[test]
fn select_out_of_int_range_names_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let range = "ERR value is out of range, value must between -2147483648 and 2147483647";
    assert_eq!(c.q(&["SELECT", "2147483648"]), V::err(range));
    assert_eq!(c.q(&["SELECT", "-2147483649"]), V::err(range));
    assert_eq!(
        c.q(&["SELECT", "9223372036854775808"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["SELECT", "2147483647"]),
        V::err("ERR DB index is out of range")
    );
}

#[test]
fn incrbyfloat_computes_in_long_double_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // MSET 'a b' 9223372036854775806, INCRBYFLOAT 'a b' -0: f64 printed 9223372036854776000.
    assert_eq!(c.q(&["SET", "k", "9223372036854775806"]), V::ok());
    assert_eq!(
        c.q(&["INCRBYFLOAT", "k", "-0"]),
        V::bulk("9223372036854775806")
    );
    assert_eq!(c.q(&["SET", "k", "0.1"]), V::ok());
    assert_eq!(c.q(&["INCRBYFLOAT", "k", "0.2"]), V::bulk("0.3"));
    assert_eq!(c.q(&["INCRBYFLOAT", "k", "0x10"]), V::bulk("16.3"));
    assert_eq!(c.q(&["INCRBYFLOAT", "k", "1e-2"]), V::bulk("16.31"));
    assert_eq!(c.q(&["GET", "k"]), V::bulk("16.31"));
    assert_eq!(
        c.q(&["INCRBYFLOAT", "k", "inf"]),
        V::err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(
        c.q(&["INCRBYFLOAT", "k", "1 "]),
        V::err("ERR value is not a valid float")
    );
}

/// Sends `args` and returns the reply line as bytes.
fn raw(c: &mut Client, args: &[&[u8]]) -> Vec<u8> {
    c.send(&common::encode(args));
    c.raw_line()
}

#[test]
fn error_texts_quote_arguments_as_bytes_like_c_strings() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // Bytes that are not UTF-8 are quoted as sent; a NUL ends an argument, as C's %s does.
    assert_eq!(
        raw(&mut c, &[b"nosuch\xffcmd", b"a\x00b", b"\xfe"]),
        b"-ERR unknown command 'nosuch\xffcmd', with args beginning with: 'a' '\xfe' "
    );
    assert_eq!(
        raw(&mut c, &[b"no\r\nsuch"]),
        b"-ERR unknown command 'no  such', with args beginning with: "
    );
    // Newlines at the end are removed, the others become spaces.
    assert_eq!(
        raw(&mut c, &[b"EXPIRE", b"k", b"10", b"x\xff\r\n"]),
        b"-ERR Unsupported option x\xff"
    );
    assert_eq!(
        raw(&mut c, &[b"EXPIRE", b"k", b"10", b"a\x00b"]),
        b"-ERR Unsupported option a"
    );
    assert_eq!(
        raw(&mut c, &[b"HELLO", b"3", b"\xffopt\n"]),
        b"-ERR Syntax error in HELLO option '\xffopt '"
    );
    assert_eq!(
        raw(&mut c, &[b"CONFIG", b"n\xffo\x00x"]),
        b"-ERR unknown subcommand 'n\xffo'. Try CONFIG HELP."
    );
}

#[test]
fn nul_in_an_inline_request_neither_hangs_nor_is_answered() {
    // 'ECHO a\0b\r\n' made the inline splitter loop forever, holding a worker thread and
    // growing memory, so SHUTDOWN could not finish. Redis's strchr stops at the NUL: no
    // newline yet, no reply, until the request is too big.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.send(b"ECHO a\0b\r\nPING\r\n");
    let mut other = Client::connect(s.local_addr());
    assert_eq!(other.q(&["PING"]), V::Simple("PONG".into()));
    c.send(&vec![b'x'; 70 * 1024]);
    assert_eq!(
        c.raw_line(),
        b"-ERR Protocol error: too big inline request".to_vec()
    );
    // The server still stops (with a worker spinning, it did not).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(s.shutdown().is_ok()));
    assert_eq!(
        rx.recv_timeout(std::time::Duration::from_secs(30)),
        Ok(true)
    );
}

#[test]
fn bitcount_reads_its_unit_after_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // SETNX k3 'a\r\nb', BITCOUNT k3 27 abc bits: the bad end is reported, not the unit.
    assert_eq!(c.q(&["SETNX", "k3", "a\r\nb"]), V::Int(1));
    assert_eq!(
        c.q(&["BITCOUNT", "k3", "27", "abc", "bits"]),
        V::err("ERR value is not an integer or out of range")
    );
    // SET k2 '', BITCOUNT k2 -5 -25 bits: a negative empty range is 0 before the unit.
    assert_eq!(c.q(&["SET", "k2", ""]), V::ok());
    assert_eq!(c.q(&["BITCOUNT", "k2", "-5", "-25", "bits"]), V::Int(0));
    s.shutdown().unwrap();
}
