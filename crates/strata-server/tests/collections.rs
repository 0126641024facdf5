//! Collections drained by deletes: a hash, set or sorted set whose deleted members outnumber
//! its live ones is rewritten under a new version (`Store::rewrite_if_sparse`). Every member
//! must survive each rewrite exactly once, whatever pops, deletes and scans run across it.

mod common;

use common::{encode, start, Client, V};
use std::collections::BTreeSet;

fn bulk_set(v: V) -> Vec<Vec<u8>> {
    match v {
        V::Array(a) | V::Set(a) => a
            .into_iter()
            .map(|x| match x {
                V::Bulk(b) => b,
                x => panic!("not a bulk string: {x:?}"),
            })
            .collect(),
        v => panic!("not an array: {v:?}"),
    }
}

/// Sends `cmds` in one write and returns the replies.
fn pipeline(c: &mut Client, cmds: &[Vec<String>]) -> Vec<V> {
    let mut batch = Vec::new();
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        batch.extend(encode(&args));
    }
    c.send(&batch);
    cmds.iter().map(|_| c.read()).collect()
}

#[test]
fn spop_drains_a_set_through_its_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let n = 5000;
    let adds: Vec<Vec<String>> = (0..n)
        .map(|i| vec!["SADD".into(), "s".into(), format!("m{i}")])
        .collect();
    pipeline(&mut c, &adds);
    assert_eq!(c.q(&["SCARD", "s"]), V::Int(n));
    let pops: Vec<Vec<String>> = (0..n).map(|_| vec!["SPOP".into(), "s".into()]).collect();
    let mut seen = BTreeSet::new();
    for (i, v) in pipeline(&mut c, &pops).into_iter().enumerate() {
        let V::Bulk(m) = v else {
            panic!("SPOP {i} replied {v:?}")
        };
        assert!(seen.insert(m), "SPOP {i} returned a member twice");
    }
    assert_eq!(seen.len(), n as usize);
    assert_eq!(c.q(&["EXISTS", "s"]), V::Int(0));
    assert_eq!(c.q(&["SPOP", "s"]), V::NilBulk);
    s.shutdown().unwrap();
}

#[test]
fn zpopmin_and_hdel_keep_every_live_member_across_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let n = 3000;
    let adds: Vec<Vec<String>> = (0..n)
        .flat_map(|i| {
            [
                vec![
                    "ZADD".into(),
                    "z".into(),
                    format!("{i}"),
                    format!("m{i:05}"),
                ],
                vec![
                    "HSET".into(),
                    "h".into(),
                    format!("f{i:05}"),
                    format!("v{i}"),
                ],
            ]
        })
        .collect();
    pipeline(&mut c, &adds);
    // Pop the lowest scores one at a time, and delete every other hash field.
    let mut cmds = Vec::new();
    for i in 0..n - 100 {
        cmds.push(vec!["ZPOPMIN".into(), "z".into()]);
        if i % 2 == 0 {
            cmds.push(vec!["HDEL".into(), "h".into(), format!("f{i:05}")]);
        }
    }
    let mut want_score = 0;
    for v in pipeline(&mut c, &cmds) {
        match v {
            V::Array(a) if a.len() == 2 => {
                assert_eq!(a[0], V::bulk(&format!("m{want_score:05}")));
                want_score += 1;
            }
            V::Int(1) => {}
            v => panic!("unexpected reply {v:?}"),
        }
    }
    assert_eq!(want_score, n - 100);
    let left = bulk_set(c.q(&["ZRANGE", "z", "0", "-1"]));
    let want: Vec<Vec<u8>> = (n - 100..n)
        .map(|i| format!("m{i:05}").into_bytes())
        .collect();
    assert_eq!(left, want);
    assert_eq!(
        c.q(&["ZSCORE", "z", &format!("m{:05}", n - 1)]),
        V::bulk(&format!("{}", n - 1))
    );
    assert_eq!(
        c.q(&["ZRANGEBYSCORE", "z", "-inf", &format!("{}", n - 99)]),
        V::Array(vec![
            V::bulk(&format!("m{:05}", n - 100)),
            V::bulk(&format!("m{:05}", n - 99))
        ])
    );
    let fields = bulk_set(c.q(&["HKEYS", "h"]));
    let want: Vec<Vec<u8>> = (0..n)
        .filter(|i| *i >= n - 100 || i % 2 == 1)
        .map(|i| format!("f{i:05}").into_bytes())
        .collect();
    assert_eq!(fields, want);
    assert_eq!(c.q(&["HGET", "h", "f00001"]), V::bulk("v1"));
    s.shutdown().unwrap();
}

#[test]
fn an_sscan_across_a_rewrite_misses_no_member() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // 600 members that stay, 2000 that go (enough deletes to force rewrites mid-scan).
    let adds: Vec<Vec<String>> = (0..2600)
        .map(|i| vec!["SADD".into(), "s".into(), format!("m{i}")])
        .collect();
    pipeline(&mut c, &adds);
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    let mut next_delete = 600;
    loop {
        let V::Array(r) = c.q(&["SSCAN", "s", &cursor, "COUNT", "50"]) else {
            panic!("SSCAN reply");
        };
        let V::Bulk(cur) = &r[0] else {
            panic!("cursor")
        };
        cursor = String::from_utf8(cur.clone()).unwrap();
        seen.extend(bulk_set(r[1].clone()));
        if next_delete < 2600 {
            let dels: Vec<Vec<String>> = (next_delete..(next_delete + 250).min(2600))
                .map(|i| vec!["SREM".into(), "s".into(), format!("m{i}")])
                .collect();
            next_delete += dels.len();
            pipeline(&mut c, &dels);
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..600 {
        assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
    }
    assert_eq!(c.q(&["SCARD", "s"]), V::Int(600));
    s.shutdown().unwrap();
}

#[test]
fn random_members_of_a_large_set_spread_over_it() {
    // Members sharing a long prefix (as redis-benchmark's `element:000000123456`): draws
    // must land among them, not all on the first one.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let n = 10_000;
    let adds: Vec<Vec<String>> = (0..n)
        .map(|i| vec!["SADD".into(), "s".into(), format!("element:{:012}", i * 7)])
        .collect();
    pipeline(&mut c, &adds);
    let drawn = bulk_set(c.q(&["SRANDMEMBER", "s", "-2000"]));
    assert_eq!(drawn.len(), 2000);
    let distinct: BTreeSet<_> = drawn.into_iter().collect();
    // Uniform draws would give about 1,813 distinct members.
    assert!(distinct.len() > 1000, "{} distinct of 2000", distinct.len());
    let halves = distinct
        .iter()
        .filter(|m| m[..] < format!("element:{:012}", n / 2 * 7).into_bytes()[..])
        .count();
    assert!(
        halves > 300 && halves < distinct.len() - 300,
        "{halves} in the lower half"
    );
    // SPOP draws the same way: after popping a tenth, the rest is still spread.
    let pops: Vec<Vec<String>> = (0..n / 10)
        .map(|_| vec!["SPOP".into(), "s".into()])
        .collect();
    let popped: BTreeSet<Vec<u8>> = pipeline(&mut c, &pops)
        .into_iter()
        .map(|v| match v {
            V::Bulk(b) => b,
            v => panic!("SPOP replied {v:?}"),
        })
        .collect();
    assert_eq!(popped.len(), (n / 10) as usize);
    let first_tenth: Vec<Vec<u8>> = (0..n / 10)
        .map(|i| format!("element:{:012}", i * 7).into_bytes())
        .collect();
    let from_first = first_tenth.iter().filter(|m| popped.contains(*m)).count();
    assert!(
        from_first < (n / 20) as usize,
        "{from_first} pops took the first members"
    );
    s.shutdown().unwrap();
}
