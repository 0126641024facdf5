//! MEMORY DOCTOR, MALLOC-STATS, PURGE and HELP over TCP, with redis-server 7.0.15's texts.

mod common;

use common::{start, Client, V};

#[test]
fn memory_reports_answer_with_redis_texts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let doctor = |c: &mut Client| match c.q(&["MEMORY", "DOCTOR"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(doctor(&mut c).starts_with("Hi Sam, this instance is empty"));
    c.q(&["SELECT", "3"]);
    c.q(&["SET", "k", "v"]);
    assert_eq!(
        doctor(&mut c),
        "Hi Sam, I can't find any memory issue in your instance. I can only account for \
         what occurs on this base."
    );
    assert_eq!(c.q(&["MEMORY", "PURGE"]), V::ok());
    assert_eq!(
        c.q(&["MEMORY", "MALLOC-STATS"]),
        V::bulk("Stats not supported for the current allocator")
    );
    match c.q(&["MEMORY", "HELP"]) {
        V::Array(lines) => {
            assert_eq!(lines.len(), 14);
            assert_eq!(lines[1], V::Simple("DOCTOR".into()));
        }
        other => panic!("{other:?}"),
    }
}

/// MEMORY STATS: Redis 7.0.15's field names in its order (read from a redis-server), a
/// `db.N` map per database holding keys, the key count, and ratios that are numbers.
#[test]
fn memory_stats_fields_in_redis_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "a", "1"]);
    c.q(&["SELECT", "3"]);
    c.q(&["SET", "b", "1"]);
    c.q(&["SET", "c", "1"]);
    assert!(matches!(c.q(&["HELLO", "3"]), V::Map(_)));
    let V::Map(fields) = c.q(&["MEMORY", "STATS"]) else {
        panic!("not a map")
    };
    let names: Vec<String> = fields
        .iter()
        .map(|(k, _)| match k {
            V::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names.join(" "),
        "peak.allocated total.allocated startup.allocated replication.backlog clients.slaves \
         clients.normal cluster.links aof.buffer lua.caches functions.caches db.0 db.3 \
         overhead.total keys.count keys.bytes-per-key dataset.bytes dataset.percentage \
         peak.percentage allocator.allocated allocator.active allocator.resident \
         allocator-fragmentation.ratio allocator-fragmentation.bytes allocator-rss.ratio \
         allocator-rss.bytes rss-overhead.ratio rss-overhead.bytes fragmentation \
         fragmentation.bytes"
    );
    let get = |name: &str| {
        fields[names.iter().position(|n| n == name).unwrap()]
            .1
            .clone()
    };
    assert_eq!(get("keys.count"), V::Int(3));
    assert!(matches!(get("total.allocated"), V::Int(n) if n > 0));
    assert!(matches!(get("peak.percentage"), V::Double(_)));
    let V::Map(db) = get("db.3") else {
        panic!("db.3")
    };
    assert_eq!(db[0].0, V::bulk("overhead.hashtable.main"));
    assert_eq!(db.len(), 3);
}
