//! The dataset writer (`dataset.rs`) against Strata's own file reader (`file.rs`, which a
//! replica's full sync loads through): a server filled with every type and encoding size
//! class in several databases, behind a swapped database map, with function libraries and
//! streams with groups, written and read back, each key equal to what DUMP gives for it;
//! the file loaded into a second server equal to the first; corrupt records refused with
//! their key.

use super::dataset::{write_dataset, write_dataset_with, Aux, DatasetError, DatasetOptions};
use super::file::{FileReader, Item};
use super::{parse_payload, Value};
use crate::keys::{meta_key, sub_key};
use crate::store::{Meta, RType};
use crate::test_server::{Reply, TestServer};
use std::cell::Cell;
use std::collections::BTreeMap;

/// An expiry far in the future (2100-01-01), so nothing expires during the test.
const FAR_MS: u64 = 4_102_444_800_000;

type Keys = BTreeMap<(u64, Vec<u8>), (Value, Option<u64>)>;

fn sorted(mut v: Value) -> Value {
    match &mut v {
        Value::Set(s) => s.sort(),
        Value::Hash(h) => h.sort(),
        Value::ZSet(z) => z.sort_by(|a, b| a.0.cmp(&b.0)),
        _ => {}
    }
    v
}

fn run(t: &mut TestServer, args: &[&str]) {
    if let Reply::Error(e) = t.cmd(args) {
        panic!("{args:?}: {e}");
    }
}

fn runb(t: &mut TestServer, args: &[&[u8]]) {
    if let Reply::Error(e) = t.cmd_bytes(args) {
        panic!("{e}");
    }
}

/// Every type and encoding size class: strings (integer-encodable, too long for an
/// integer, LZF-compressible, incompressible, empty, binary), lists, hashes, sets and
/// sorted sets small and large (with deleted members and overwritten incarnations),
/// streams with groups and without entries, expiries; databases 0, 2, 3 and 5 (1 empty),
/// 2 and 3 swapped; two function libraries.
fn fill(t: &mut TestServer) {
    for (k, v) in [
        ("s:small", "v"),
        ("i:8", "100"),
        ("i:16", "-1000"),
        ("i:32", "1234567"),
        ("i:64", "12345678901"),
        ("i:noncanonical", "007"),
        ("s:empty", ""),
        ("123", "an integer key"),
    ] {
        run(t, &["SET", k, v]);
    }
    run(t, &["SET", "s:lzf", &"abcdefgh".repeat(20_000)]);
    let noise: String = (0..5000u32)
        .map(|i| char::from(b'!' + (i.wrapping_mul(2_654_435_761) >> 7) as u8 % 90))
        .collect();
    run(t, &["SET", "s:noise", &noise]);
    runb(t, &[b"SET", b"bin\x00\xffkey", b"\x00\x01\xfe\xff"]);
    run(
        t,
        &["SET", "s:ttl", "expiring", "PXAT", &FAR_MS.to_string()],
    );

    run(t, &["RPUSH", "l:small", "a", "1", "b"]);
    run(t, &["LPUSH", "l:small", "head"]);
    run(t, &["LPOP", "l:small"]);
    let many: Vec<String> = (0..3000)
        .map(|i| format!("element-{i}-{}", "x".repeat(i % 50)))
        .collect();
    let mut args = vec!["RPUSH", "l:big"];
    args.extend(many.iter().map(String::as_str));
    run(t, &args);
    run(t, &["LTRIM", "l:big", "5", "-3"]);
    run(t, &["PEXPIREAT", "l:big", &(FAR_MS + 1).to_string()]);
    // An overwritten incarnation: the old members are garbage.
    run(t, &["RPUSH", "l:again", "old1", "old2"]);
    run(t, &["DEL", "l:again"]);
    run(t, &["RPUSH", "l:again", "new"]);

    run(t, &["HSET", "h:small", "f1", "v1", "f2", "2", "f3", ""]);
    let mut args = vec!["HSET".to_string(), "h:big".to_string()];
    for i in 0..1200 {
        args.push(format!("field{i}"));
        args.push("v".repeat(i % 100));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(t, &args);
    run(t, &["HDEL", "h:big", "field3", "field700"]);

    run(
        t,
        &["SADD", "set:int", "1", "-5", "300", "70000", "5000000000"],
    );
    run(t, &["SADD", "set:str", "a", "b", "c"]);
    let members: Vec<String> = (0..1500).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "set:big"];
    args.extend(members.iter().map(String::as_str));
    run(t, &args);
    run(t, &["SREM", "set:big", "m7"]);
    let ints: Vec<String> = (0..800).map(|i| (i * 3).to_string()).collect();
    let mut args = vec!["SADD", "set:bigint"];
    args.extend(ints.iter().map(String::as_str));
    run(t, &args);

    run(t, &["ZADD", "z:small", "1.5", "a", "-2", "b", "0", "c"]);
    run(
        t,
        &[
            "ZADD",
            "z:special",
            "inf",
            "top",
            "-inf",
            "bottom",
            "-0",
            "negzero",
        ],
    );
    run(t, &["ZADD", "z:special", "3.141592653589793", "pi"]);
    let mut args = vec!["ZADD".to_string(), "z:big".to_string()];
    for i in 0..700 {
        args.push(format!("{}", f64::from(i) / 7.0 - 30.0));
        args.push(format!("member-{i}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(t, &args);
    run(t, &["ZREM", "z:big", "member-5"]);

    for i in 0..250 {
        let pad = "p".repeat(i % 40);
        if i % 3 == 0 {
            run(
                t,
                &["XADD", "x:groups", "*", "n", &i.to_string(), "pad", &pad],
            );
        } else {
            run(t, &["XADD", "x:groups", "*", "other", &i.to_string()]);
        }
    }
    run(t, &["XGROUP", "CREATE", "x:groups", "g1", "0"]);
    run(t, &["XGROUP", "CREATE", "x:groups", "g2", "$"]);
    run(
        t,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "10",
            "STREAMS",
            "x:groups",
            ">",
        ],
    );
    run(
        t,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "5",
            "STREAMS",
            "x:groups",
            ">",
        ],
    );
    run(t, &["XGROUP", "CREATECONSUMER", "x:groups", "g2", "idle"]);
    run(t, &["XTRIM", "x:groups", "MAXLEN", "200"]);
    run(t, &["XADD", "x:small", "1-1", "f", "v"]);
    run(t, &["XADD", "x:small", "1-2", "f", "w"]);
    run(t, &["XDEL", "x:small", "1-1"]);
    run(t, &["XGROUP", "CREATE", "x:empty", "g", "$", "MKSTREAM"]);
    run(t, &["XADD", "x:bare", "5-5", "f", "v"]);
    run(t, &["XDEL", "x:bare", "5-5"]);

    run(t, &["SELECT", "2"]);
    run(t, &["SET", "in-2", "two"]);
    run(t, &["HSET", "h:2", "a", "b"]);
    run(t, &["SELECT", "3"]);
    run(t, &["SET", "in-3", "three"]);
    run(t, &["RPUSH", "l:3", "x", "y"]);
    run(t, &["SELECT", "5"]);
    run(t, &["SET", "in-5", "five", "PXAT", &FAR_MS.to_string()]);
    run(t, &["SELECT", "0"]);
    run(t, &["SWAPDB", "2", "3"]);

    for lib in [
        "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return 1 end)",
        "#!lua name=lib2\nredis.register_function{function_name='f2', \
         callback=function(keys, args) return args[1] end, flags={'no-writes'}}",
    ] {
        run(t, &["FUNCTION", "LOAD", lib]);
    }
}

/// Every key of every logical database as DUMP and PEXPIRETIME give it.
fn oracle(t: &mut TestServer) -> Keys {
    let mut out = Keys::new();
    for db in 0..16u64 {
        run(t, &["SELECT", &db.to_string()]);
        let Reply::Array(keys) = t.cmd(&["KEYS", "*"]) else {
            panic!("KEYS")
        };
        for k in keys {
            let Reply::Bulk(k) = k else { panic!("key") };
            let Reply::Bulk(p) = t.cmd_bytes(&[b"DUMP", &k]) else {
                panic!("DUMP")
            };
            let v = parse_payload(&p).unwrap_or_else(|e| panic!("{e}"));
            let Reply::Int(at) = t.cmd_bytes(&[b"PEXPIRETIME", &k]) else {
                panic!("PEXPIRETIME")
            };
            out.insert((db, k), (sorted(v), (at > 0).then_some(at as u64)));
        }
    }
    run(t, &["SELECT", "0"]);
    out
}

/// The file's items, its keys, and the databases its SELECTDBs name in order.
fn read(data: &[u8]) -> (Vec<Item>, Keys, Vec<u64>) {
    let mut r = FileReader::open(data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.version(), 9);
    let (mut items, mut keys, mut dbs) = (Vec::new(), Keys::new(), Vec::new());
    while let Some(i) = r.next_item().unwrap_or_else(|e| panic!("{e}")) {
        match &i {
            Item::Key(e) => {
                let old = keys.insert(
                    (e.db, e.key.clone()),
                    (sorted(e.value.clone()), e.expire_ms),
                );
                assert!(old.is_none(), "key written twice");
            }
            Item::SelectDb(n) => dbs.push(*n),
            _ => {}
        }
        items.push(i);
    }
    (items, keys, dbs)
}

fn dataset(t: &TestServer, opts: &DatasetOptions<'_>) -> Result<Vec<u8>, DatasetError> {
    let shared = t.shared();
    let snap = shared.store.db().snapshot().expect("snapshot");
    let mut out = Vec::new();
    write_dataset_with(&snap, shared, opts, &mut out)?;
    Ok(out)
}

#[test]
fn every_type_round_trips_through_the_reader() {
    let mut t = TestServer::in_memory();
    fill(&mut t);
    let want = oracle(&mut t);
    let shared = t.shared();
    let snap = shared.store.db().snapshot().expect("snapshot");
    let mut data = Vec::new();
    let stats = write_dataset(&snap, shared, &mut data).expect("write");
    drop(snap);
    let (items, got, dbs) = read(&data);

    assert_eq!(got.len(), want.len());
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "{k:?}");
    }
    // Logical databases, ascending, the empty one left out: db 2 holds what was written
    // in 3 before the SWAPDB.
    assert_eq!(dbs, vec![0, 2, 3, 5]);
    assert!(got.contains_key(&(2, b"in-3".to_vec())));
    assert!(got.contains_key(&(3, b"in-2".to_vec())));
    // The stream without entries (and the one whose entries were all deleted) is there.
    assert!(matches!(&got[&(0, b"x:empty".to_vec())].0, Value::Stream(s) if s.groups.len() == 1));
    assert!(matches!(&got[&(0, b"x:bare".to_vec())].0, Value::Stream(s) if s.is_empty()));

    let aux: Vec<&[u8]> = items
        .iter()
        .filter_map(|i| match i {
            Item::Aux(k, _) => Some(&k[..]),
            _ => None,
        })
        .collect();
    let names: [&[u8]; 5] = [
        b"redis-ver",
        b"redis-bits",
        b"ctime",
        b"used-mem",
        b"aof-base",
    ];
    assert_eq!(aux, names);
    let libs: Vec<&Item> = items
        .iter()
        .filter(|i| matches!(i, Item::Function(_)))
        .collect();
    assert_eq!(libs.len(), 2);
    assert!(matches!(libs[0], Item::Function(c) if c.starts_with(b"#!lua name=lib1\n")));

    assert_eq!(stats.keys, want.len() as u64);
    assert_eq!(stats.bytes, data.len() as u64);
    assert_eq!(stats.functions, 2);
    assert_eq!(
        stats.expires,
        want.values().filter(|v| v.1.is_some()).count() as u64
    );
    let per_db: Vec<(u8, u64)> = stats.per_db.iter().map(|d| (d.db, d.keys)).collect();
    let count = |db: u64| want.keys().filter(|k| k.0 == db).count() as u64;
    assert_eq!(
        per_db,
        vec![(0, count(0)), (2, count(2)), (3, count(3)), (5, count(5))]
    );
    assert!(stats.garbage_records >= 2, "{}", stats.garbage_records);
}

#[test]
fn the_file_loads_into_another_server_equal_to_the_first() {
    let mut a = TestServer::in_memory();
    fill(&mut a);
    let want = oracle(&mut a);
    let data = dataset(&a, &DatasetOptions::default()).expect("write");
    let mut b = TestServer::in_memory();
    let mut r = FileReader::open(&data[..]).expect("open");
    while let Some(item) = r.next_item().expect("item") {
        match item {
            Item::SelectDb(n) => run(&mut b, &["SELECT", &n.to_string()]),
            Item::Key(e) => {
                let payload = super::dump_payload(&e.value);
                let ttl = e.expire_ms.unwrap_or(0).to_string();
                runb(
                    &mut b,
                    &[b"RESTORE", &e.key, ttl.as_bytes(), &payload, b"ABSTTL"],
                );
            }
            Item::Function(code) => runb(&mut b, &[b"FUNCTION", b"LOAD", &code]),
            _ => {}
        }
    }
    assert_eq!(oracle(&mut b), want);
    assert_eq!(
        b.cmd(&["FCALL", "f2", "0", "hello"]).to_string(),
        "\"hello\""
    );
}

#[test]
fn replication_aux_fields_and_progress() {
    let mut t = TestServer::in_memory();
    for i in 0..25 {
        run(&mut t, &["SET", &format!("k{i}"), "v"]);
    }
    let calls = Cell::new(0u64);
    let last = Cell::new(0u64);
    let report = |s: &super::DatasetStats| {
        calls.set(calls.get() + 1);
        assert!(s.keys >= last.get());
        last.set(s.keys);
    };
    let opts = DatasetOptions {
        aux: Some(Aux {
            repl_id: "a".repeat(40),
            repl_offset: 123_456_789_012,
            repl_stream_db: 3,
        }),
        progress: Some(&report),
        progress_every_keys: 10,
    };
    let data = dataset(&t, &opts).expect("write");
    // At 10 and 20 keys, and at the end.
    assert_eq!((calls.get(), last.get()), (3, 25));
    let (items, keys, _) = read(&data);
    assert_eq!(keys.len(), 25);
    let aux: Vec<(String, String)> = items
        .iter()
        .filter_map(|i| match i {
            Item::Aux(k, v) => Some((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = aux.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "redis-ver",
            "redis-bits",
            "ctime",
            "used-mem",
            "repl-stream-db",
            "repl-id",
            "repl-offset",
            "aof-base"
        ]
    );
    assert_eq!(aux[4].1, "3");
    assert_eq!(aux[5].1, "a".repeat(40));
    assert_eq!(aux[6].1, "123456789012");
}

#[test]
fn an_empty_dataset_is_header_aux_and_trailer() {
    let t = TestServer::in_memory();
    let data = dataset(&t, &DatasetOptions::default()).expect("write");
    let (items, keys, dbs) = read(&data);
    assert!(keys.is_empty() && dbs.is_empty());
    assert!(items.iter().all(|i| matches!(i, Item::Aux(..))));
    assert!(data.starts_with(b"REDIS0009"));
    assert_eq!(data[data.len() - 9], 0xff, "EOF before the CRC");
}

/// Writes `records` with the engine directly, then the error the writer gives.
fn corrupt_with(records: &[(Vec<u8>, Vec<u8>)]) -> DatasetError {
    let mut t = TestServer::in_memory();
    run(&mut t, &["SET", "good", "v"]);
    for (k, v) in records {
        t.shared().store.db().put(k, v).expect("put");
    }
    match dataset(&t, &DatasetOptions::default()) {
        Ok(_) => panic!("a corrupt record was written"),
        Err(e) => e,
    }
}

fn corrupt_key(e: &DatasetError) -> (u8, &[u8], &str) {
    match e {
        DatasetError::Corrupt { db, key, reason } => (*db, &key[..], reason),
        e => panic!("not a corrupt-record error: {e}"),
    }
}

#[test]
fn a_metadata_record_that_does_not_decode_names_its_key() {
    let e = corrupt_with(&[(meta_key(0, b"broken"), vec![9; 30])]);
    assert_eq!(
        corrupt_key(&e),
        (0, &b"broken"[..], "metadata record does not decode")
    );
    assert!(e.to_string().contains("\"broken\""), "{e}");
    // Too short to be a metadata record at all.
    let e = corrupt_with(&[(meta_key(0, b"short"), vec![0; 3])]);
    assert_eq!(corrupt_key(&e).1, b"short");
}

#[test]
fn members_that_disagree_with_the_metadata_name_the_key() {
    let hash = |size: u64| Meta {
        rtype: RType::Hash,
        expire_ms: 0,
        version: 77,
        size,
        value: Vec::new(),
    };
    let field = |f: &[u8]| (sub_key(0, b"h", 77, f), b"v".to_vec());
    // Fewer members than the size says.
    let e = corrupt_with(&[(meta_key(0, b"h"), hash(3).encode()), field(b"a")]);
    assert_eq!(corrupt_key(&e).1, b"h");
    assert!(corrupt_key(&e).2.contains("has 1 member records"), "{e}");
    // More.
    let e = corrupt_with(&[
        (meta_key(0, b"h"), hash(1).encode()),
        field(b"a"),
        field(b"b"),
    ]);
    assert!(corrupt_key(&e).2.contains("more member records"), "{e}");
    // None at all.
    let e = corrupt_with(&[(meta_key(0, b"h"), hash(2).encode())]);
    assert!(corrupt_key(&e).2.contains("no member records"), "{e}");
    // A sorted set member without a score.
    let mut z = hash(1);
    z.rtype = RType::ZSet;
    let e = corrupt_with(&[
        (meta_key(0, b"h"), z.encode()),
        (sub_key(0, b"h", 77, b"m"), b"xyz".to_vec()),
    ]);
    assert!(corrupt_key(&e).2.contains("without a score"), "{e}");
}

#[test]
fn a_list_with_a_hole_names_the_key() {
    let mut t = TestServer::in_memory();
    run(&mut t, &["SELECT", "4"]);
    run(&mut t, &["RPUSH", "l", "a", "b", "c"]);
    let shared = t.shared();
    let m = shared
        .store
        .front()
        .get(4, b"l")
        .expect("get")
        .expect("the list");
    let head = crate::list::Bounds::decode(&m.value).expect("bounds").head;
    let middle = sub_key(4, b"l", m.version, &(head + 1).to_be_bytes());
    shared.store.db().delete(&middle).expect("delete");
    let e = match dataset(&t, &DatasetOptions::default()) {
        Ok(_) => panic!("a list with a hole was written"),
        Err(e) => e,
    };
    assert_eq!(corrupt_key(&e).0, 4);
    assert_eq!(corrupt_key(&e).1, b"l");
    assert!(corrupt_key(&e).2.contains("element index"), "{e}");
}

#[test]
fn a_failing_output_is_an_io_error() {
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 < b.len() {
                return Err(std::io::Error::other("device full"));
            }
            self.0 -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut t = TestServer::in_memory();
    run(&mut t, &["SET", "big", &"x".repeat(200_000)]);
    let shared = t.shared();
    let snap = shared.store.db().snapshot().expect("snapshot");
    match write_dataset(&snap, shared, Full(1000)) {
        Err(DatasetError::Io(e)) => assert!(e.to_string().contains("device full")),
        other => panic!("{other:?}"),
    }
}
