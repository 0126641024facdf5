//! SORT and SORT_RO over TCP, with replies read from redis-server 7.0.15 for the same
//! commands: numeric and ALPHA sorts, BY with `*` and `->field` patterns and BY a constant,
//! GET (`#`, keys, hash fields), LIMIT edge cases, STORE, and Redis's error texts.

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

fn setup(c: &mut Client) {
    assert_eq!(c.q(&["RPUSH", "l", "3", "1", "2", "10"]), int(4));
    c.q(&[
        "MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "5", "o_1", "one", "o_2", "two",
    ]);
    c.q(&["HSET", "h_1", "f", "x1"]);
    c.q(&["HSET", "h_3", "f", "x3"]);
}

#[test]
fn sorts_by_value_weight_and_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    setup(&mut c);
    assert_eq!(c.q(&["SORT", "l"]), V::arr(&["1", "2", "3", "10"]));
    assert_eq!(
        c.q(&["SORT", "l", "DESC", "LIMIT", "1", "2"]),
        V::arr(&["3", "2"])
    );
    assert_eq!(
        c.q(&["SORT", "l", "BY", "w_*"]),
        V::arr(&["10", "1", "2", "3"])
    );
    assert_eq!(
        c.q(&["SORT", "l", "BY", "w_*", "GET", "#", "GET", "o_*", "GET", "h_*->f"]),
        V::Array(vec![
            V::bulk("10"),
            V::NilBulk,
            V::NilBulk,
            V::bulk("1"),
            V::bulk("one"),
            V::bulk("x1"),
            V::bulk("2"),
            V::bulk("two"),
            V::NilBulk,
            V::bulk("3"),
            V::NilBulk,
            V::bulk("x3"),
        ])
    );
    assert_eq!(
        c.q(&["SORT", "l", "BY", "nosort", "DESC"]),
        V::arr(&["10", "2", "1", "3"])
    );
    assert_eq!(c.q(&["SORT", "l", "ALPHA"]), V::arr(&["1", "10", "2", "3"]));
    // Missing weights come first, in the list's order.
    assert_eq!(
        c.q(&["SORT", "l", "BY", "h_*->f", "ALPHA"]),
        V::arr(&["2", "10", "1", "3"])
    );
    assert_eq!(
        c.q(&["SORT", "l", "GET", "nostar"]),
        V::Array(vec![V::NilBulk; 4])
    );
    assert_eq!(
        c.q(&["SORT", "l", "BY", "w_*", "LIMIT", "0", "2", "GET", "#"]),
        V::arr(&["10", "1"])
    );
    c.q(&["ZADD", "z", "1", "c", "2", "b", "3", "a"]);
    assert_eq!(
        c.q(&["SORT", "z", "BY", "nosort"]),
        V::arr(&["c", "b", "a"])
    );
    assert_eq!(
        c.q(&["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "0", "2"]),
        V::arr(&["a", "b"])
    );
    assert_eq!(c.q(&["SORT", "z", "ALPHA"]), V::arr(&["a", "b", "c"]));
    assert_eq!(
        c.q(&["SORT_RO", "z", "ALPHA", "DESC"]),
        V::arr(&["c", "b", "a"])
    );
}

#[test]
fn limits_clamp_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    setup(&mut c);
    assert_eq!(c.q(&["SORT", "l", "LIMIT", "10", "5"]), V::Array(vec![]));
    assert_eq!(c.q(&["SORT", "l", "LIMIT", "-5", "2"]), V::arr(&["1", "2"]));
    assert_eq!(
        c.q(&["SORT", "l", "LIMIT", "1", "-3"]),
        V::arr(&["2", "3", "10"])
    );
    assert_eq!(c.q(&["SORT", "nokey"]), V::Array(vec![]));
}

#[test]
fn store_writes_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    setup(&mut c);
    assert_eq!(
        c.q(&["SORT", "l", "BY", "nosort", "GET", "o_*", "STORE", "dst"]),
        int(4)
    );
    assert_eq!(
        c.q(&["LRANGE", "dst", "0", "-1"]),
        V::arr(&["", "one", "two", ""])
    );
    // A set sorted BY a constant is sorted ALPHA when stored.
    c.q(&["SADD", "s", "5", "3", "9"]);
    assert_eq!(c.q(&["SORT", "s", "BY", "nosort", "STORE", "d3"]), int(3));
    assert_eq!(c.q(&["LRANGE", "d3", "0", "-1"]), V::arr(&["3", "5", "9"]));
    // Overwrites any type; an empty result deletes the destination.
    c.q(&["SET", "str", "a"]);
    assert_eq!(c.q(&["SORT", "l", "STORE", "str"]), int(4));
    assert_eq!(c.q(&["TYPE", "str"]), V::Simple("list".into()));
    assert_eq!(c.q(&["SORT", "nokey", "STORE", "dst"]), int(0));
    assert_eq!(c.q(&["EXISTS", "dst"]), int(0));
}

#[test]
fn errors_are_redis_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    setup(&mut c);
    c.q(&["RPUSH", "la", "b", "a", "c"]);
    c.q(&["SET", "str", "a"]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["SORT", "la"],
            "ERR One or more scores can't be converted into double",
        ),
        (&["SORT_RO", "l", "STORE", "x"], "ERR syntax error"),
        (&["SORT", "l", "LIMIT", "1"], "ERR syntax error"),
        (&["SORT", "l", "foo"], "ERR syntax error"),
        (
            &["SORT", "l", "LIMIT", "a", "1"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["SORT", "str"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ];
    for (args, err) in cases {
        assert_eq!(c.q(args), V::err(err), "{args:?}");
    }
}
