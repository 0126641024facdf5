//! The Redis types' check (`strata_server::check`) over a database written by every kind of
//! collection command, in several logical databases: no problem, the keys and members
//! counted as the server reports them, and the records of deleted and rewritten
//! collections counted as garbage.

mod common;

use common::{start, Client, V};

/// Runs `cmd`; any error reply fails the test.
fn run(c: &mut Client, cmd: &[&str]) {
    if let V::Err(e) = c.q(cmd) {
        panic!("{cmd:?}: {e}");
    }
}

#[test]
fn every_collection_command_leaves_consistent_records() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    let script: &[&[&str]] = &[
        // Lists: both ends, the middle, trims and removals, moves between lists.
        &["RPUSH", "l", "a", "b", "c", "d", "e", "f"],
        &["LPUSH", "l", "z", "y"],
        &["LINSERT", "l", "BEFORE", "c", "X"],
        &["LINSERT", "l", "AFTER", "e", "Y"],
        &["LREM", "l", "1", "b"],
        &["LSET", "l", "2", "S"],
        &["LPOP", "l"],
        &["RPOP", "l", "2"],
        &["LTRIM", "l", "1", "-2"],
        &["RPUSH", "l2", "1", "2", "3"],
        &["LMOVE", "l2", "l3", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "l2", "l3"],
        &["RPUSH", "gone", "x"],
        &["LPOP", "gone"],
        &["RPUSH", "trimmed", "a", "b", "c"],
        &["LTRIM", "trimmed", "5", "10"],
        // Hashes.
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HDEL", "h", "b"],
        &["HINCRBY", "h", "n", "5"],
        &["HINCRBYFLOAT", "h", "f", "1.5"],
        &["HSETNX", "h", "a", "9"],
        &["HSET", "h2", "x", "1"],
        &["HDEL", "h2", "x"],
        // Sets.
        &["SADD", "s1", "a", "b", "c", "d", "1", "2"],
        &["SADD", "s2", "c", "d", "e"],
        &["SREM", "s1", "a"],
        &["SMOVE", "s1", "s2", "b"],
        &["SINTERSTORE", "si", "s1", "s2"],
        &["SUNIONSTORE", "su", "s1", "s2"],
        &["SDIFFSTORE", "sd", "s1", "s2"],
        &["SPOP", "su", "2"],
        &["SADD", "ints", "1", "2", "3", "4", "5", "6"],
        &["SPOP", "ints", "5"],
        // Sorted sets.
        &["ZADD", "z", "1", "a", "2", "b", "3", "c", "-0", "d"],
        &["ZINCRBY", "z", "5", "a"],
        &["ZADD", "z", "XX", "GT", "10", "b"],
        &["ZREM", "z", "c"],
        &["ZADD", "z2", "1", "b", "7", "q"],
        &["ZUNIONSTORE", "zu", "2", "z", "z2"],
        &["ZINTERSTORE", "zi", "2", "z", "z2", "WEIGHTS", "2", "3"],
        &["ZDIFFSTORE", "zd", "2", "z", "z2"],
        &["ZRANGESTORE", "zr", "z", "0", "1"],
        &["ZPOPMIN", "zu"],
        &["ZPOPMAX", "zu"],
        &["ZREMRANGEBYSCORE", "z2", "5", "10"],
        &[
            "ZADD",
            "big",
            "1",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ],
        &["ZADD", "big", "-0", "n"],
        &["ZREMRANGEBYRANK", "zr", "0", "0"],
        // Keyspace commands over collections.
        &["RENAME", "h", "h-renamed"],
        &["COPY", "z", "z-copy"],
        &["COPY", "l", "l-copy", "DB", "2"],
        &["COPY", "s2", "s2-copy", "DB", "3"],
        &["SET", "l3", "now a string"],
        &["DEL", "si"],
        &["SADD", "si", "again"],
        &["EXPIRE", "zd", "1000"],
        &["SELECT", "5"],
        &["RPUSH", "l", "in", "db", "5"],
        &["HSET", "h", "k", "v"],
        &["FLUSHDB"],
        &["ZADD", "z", "1", "one"],
    ];
    for cmd in script {
        run(&mut c, cmd);
    }
    // Collections mostly deleted: counted in their metadata, then rewritten by the next
    // write (the sorted set and the hash stop short of the rewrite, the set passes it).
    run(&mut c, &["SELECT", "0"]);
    for i in 0..100 {
        let m = format!("m{i}");
        run(&mut c, &["SADD", "sparse", &m]);
        run(&mut c, &["ZADD", "zsparse", &i.to_string(), &m]);
        run(&mut c, &["HSET", "hsparse", &m, "v"]);
    }
    for i in 0..90 {
        let m = format!("m{i}");
        run(&mut c, &["SREM", "sparse", &m]);
        run(&mut c, &["ZREM", "zsparse", &m]);
        run(&mut c, &["HDEL", "hsparse", &m]);
    }
    run(&mut c, &["SADD", "sparse", "after"]);
    // What the server says it holds, per logical database.
    let mut want_keys = 0;
    for db in 0..16 {
        run(&mut c, &["SELECT", &db.to_string()]);
        let V::Int(n) = c.q(&["DBSIZE"]) else {
            panic!("DBSIZE")
        };
        want_keys += n as u64;
    }
    drop(c);
    server.shutdown().unwrap();
    let db = strata::Db::open(dir.path(), strata::DbOptions::default()).unwrap();
    assert!(strata_server::check::is_server_db(&db).unwrap());
    let r = strata_server::check::check_types(&db).unwrap();
    db.close().unwrap();
    assert!(r.is_ok(), "{:#?}", r.problems);
    assert_eq!(r.keys.iter().sum::<u64>(), want_keys, "{r:?}");
    assert!(
        r.garbage > 0,
        "deleted and rewritten collections leave garbage: {r:?}"
    );
    assert!(r.score_records > 0 && r.members > r.score_records, "{r:?}");
}
