//! Cluster mode (`cmd/cluster.rs`, `cluster/`) through the in-process harness
//! (`test_server.rs`): replies and error texts are redis-server 7.0.15's, recorded from one
//! started with `cluster-enabled yes`.

use crate::test_server::{Reply, TestServer};
use std::path::Path;
use std::sync::Arc;
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, MemFs};

fn cluster() -> TestServer {
    TestServer::with_config(&["--cluster-enabled", "yes", "--port", "7311"])
}

fn text(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

/// The id of the node a CLUSTER MEET left in handshake, from CLUSTER NODES' text.
fn handshake_peer(nodes: &str) -> String {
    nodes
        .lines()
        .find(|l| l.contains("handshake"))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no node in handshake: {nodes}"))
        .to_string()
}

fn nodes_conf(t: &TestServer) -> String {
    let bytes = t
        .fs()
        .read_all(Path::new("/strata-test/nodes.conf"))
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn disabled_outside_cluster_mode() {
    TestServer::in_memory().check(
        r#"
            CLUSTER INFO => -ERR This instance has cluster support disabled
            CLUSTER KEYSLOT a => -ERR This instance has cluster support disabled
            CLUSTER HELP => -ERR This instance has cluster support disabled
            CLUSTER ADDSLOTS 1 => -ERR This instance has cluster support disabled
            CLUSTER MYID => -ERR This instance has cluster support disabled
            READONLY => -ERR This instance has cluster support disabled
            READWRITE => -ERR This instance has cluster support disabled
            ASKING => -ERR This instance has cluster support disabled
            CLUSTER FOO => -ERR unknown subcommand 'FOO'. Try CLUSTER HELP.
            SELECT 1 => +OK
            CONFIG GET cluster-enabled => ["cluster-enabled", "no"]
        "#,
    );
}

#[test]
fn slot_commands_and_their_errors() {
    let mut t = cluster();
    let me = text(&t.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(me.len(), 40);
    t.check(
        r#"
            CLUSTER KEYSLOT {a}b => :15495
            CLUSTER KEYSLOT a => :15495
            CLUSTER KEYSLOT foo{}{bar} => :8363
            CLUSTER KEYSLOT {user1000}.following => :3443
            CLUSTER ADDSLOTSRANGE 0 5 => +OK
            CLUSTER ADDSLOTS 0 => -ERR Slot 0 is already busy
            CLUSTER ADDSLOTS 6 6 => -ERR Slot 6 specified multiple times
            CLUSTER ADDSLOTS x => -ERR Invalid or out of range slot
            CLUSTER ADDSLOTS 16384 => -ERR Invalid or out of range slot
            CLUSTER DELSLOTS 100 => -ERR Slot 100 is already unassigned
            CLUSTER ADDSLOTSRANGE 10 5 => -ERR start slot number 10 is greater than end slot number 5
            CLUSTER ADDSLOTSRANGE 10 12 11 13 => -ERR Slot 11 specified multiple times
            CLUSTER ADDSLOTSRANGE 10 => -ERR wrong number of arguments for 'cluster|addslotsrange' command
            CLUSTER ADDSLOTSRANGE 10 11 12 => -ERR wrong number of arguments for 'cluster|addslotsrange' command
            CLUSTER DELSLOTSRANGE 100 200 => -ERR Slot 100 is already unassigned
            CLUSTER COUNTKEYSINSLOT x => -ERR value is not an integer or out of range
            CLUSTER COUNTKEYSINSLOT 16384 => -ERR Invalid slot
            CLUSTER GETKEYSINSLOT 1 x => -ERR value is not an integer or out of range
            CLUSTER GETKEYSINSLOT 16384 1 => -ERR Invalid slot or number of keys
            CLUSTER GETKEYSINSLOT 1 -1 => -ERR Invalid slot or number of keys
            CLUSTER SETSLOT 1 MIGRATING abc => -ERR I don't know about node abc
            CLUSTER SETSLOT 100 MIGRATING abc => -ERR I'm not the owner of hash slot 100
            CLUSTER SETSLOT 1 IMPORTING abc => -ERR I'm already the owner of hash slot 1
            CLUSTER SETSLOT 1 NODE abc => -ERR Unknown node abc
            CLUSTER SETSLOT 1 foo => -ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP
            CLUSTER SETSLOT 1 STABLE x => -ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP
            CLUSTER SETSLOT x STABLE => -ERR Invalid or out of range slot
            CLUSTER SETSLOT 1 STABLE => +OK
            CLUSTER FORGET abc => -ERR Unknown node abc
            CLUSTER COUNT-FAILURE-REPORTS abc => -ERR Unknown node abc
            CLUSTER SET-CONFIG-EPOCH -1 => -ERR Invalid config epoch specified: -1
            CLUSTER SET-CONFIG-EPOCH x => -ERR value is not an integer or out of range
            CLUSTER SET-CONFIG-EPOCH 5 => +OK
            CLUSTER SET-CONFIG-EPOCH 7 => -ERR Node config epoch is already non-zero
            CLUSTER BUMPEPOCH => +STILL 5
            CLUSTER SAVECONFIG => +OK
            CLUSTER REPLICATE abc => -ERR Unknown node abc
            CLUSTER REPLICAS abc => -ERR Unknown node abc
            CLUSTER FAILOVER => -ERR You should send CLUSTER FAILOVER to a replica
            CLUSTER FAILOVER TAKEOVER => -ERR You should send CLUSTER FAILOVER to a replica
            CLUSTER FAILOVER foo => -ERR syntax error
            CLUSTER MEET 1.2.3.4 => -ERR wrong number of arguments for 'cluster|meet' command
            CLUSTER MEET x 1 => -ERR Invalid node address specified: x:1
            CLUSTER MEET 127.0.0.1 99999 => -ERR Invalid node address specified: 127.0.0.1:99999
            CLUSTER MEET 127.0.0.1 1 x => -ERR Invalid TCP bus port specified: x
            CLUSTER MEET 127.0.0.1 y => -ERR Invalid TCP base port specified: y
            CLUSTER RESET foo => -ERR syntax error
            CLUSTER LINKS => []
            CLUSTER INFO x => -ERR wrong number of arguments for 'cluster|info' command
            CLUSTER MYID x => -ERR wrong number of arguments for 'cluster|myid' command
            SELECT 1 => -ERR SELECT is not allowed in cluster mode
            SELECT 0 => +OK
            SWAPDB 0 1 => -ERR SWAPDB is not allowed in cluster mode
            REPLICAOF 127.0.0.1 1 => -ERR REPLICAOF not allowed in cluster mode.
            REPLICAOF NO ONE => -ERR REPLICAOF not allowed in cluster mode.
            SLAVEOF NO ONE => -ERR REPLICAOF not allowed in cluster mode.
            REPLICAOF x => -ERR wrong number of arguments for 'replicaof' command
            READONLY => +OK
            READWRITE => +OK
            ASKING => +OK
        "#,
    );
    for (cmd, want) in [
        (
            vec!["CLUSTER", "FORGET", &me],
            "-ERR I tried hard but I can't forget myself...",
        ),
        (
            vec!["CLUSTER", "REPLICATE", &me],
            "-ERR Can't replicate myself",
        ),
        (vec!["CLUSTER", "COUNT-FAILURE-REPORTS", &me], ":0"),
        (vec!["CLUSTER", "SLAVES", &me], "[]"),
        (
            vec!["CLUSTER", "SETSLOT", "1", "IMPORTING", &me],
            "-ERR I'm already the owner of hash slot 1",
        ),
    ] {
        assert_eq!(t.cmd(&cmd).to_string(), want, "{cmd:?}");
    }
    let info = text(&t.cmd(&["CLUSTER", "INFO"]));
    assert!(
        info.starts_with("cluster_state:fail\r\ncluster_slots_assigned:6\r\n"),
        "{info}"
    );
    assert!(
        info.contains("cluster_my_epoch:5\r\n")
            && info.ends_with("total_cluster_links_buffer_limit_exceeded:0\r\n")
    );
    assert_eq!(info.lines().count(), 12);
    assert_eq!(
        text(&t.cmd(&["CLUSTER", "NODES"])),
        format!("{me} :7311@17311 myself,master - 0 0 5 connected 0-5\n")
    );
    t.check(
        r#"
            CLUSTER FLUSHSLOTS => +OK
            CLUSTER ADDSLOTSRANGE 0 16383 => +OK
            SET a 1 => +OK
            CLUSTER FLUSHSLOTS => -ERR DB must be empty to perform CLUSTER FLUSHSLOTS.
            CLUSTER RESET => -ERR CLUSTER RESET can't be called with master nodes containing keys
            MOVE a 1 => -ERR MOVE is not allowed in cluster mode
            COPY a {a}b DB 1 => -ERR Copying to another database is not allowed in cluster mode
            COPY a {a}b => :1
            COPY a b => -CROSSSLOT Keys in request don't hash to the same slot
        "#,
    );
    let slots = t.cmd(&["CLUSTER", "SLOTS"]).to_string();
    assert_eq!(
        slots,
        format!("[[:0, :16383, [\"\", :7311, \"{me}\", []]]]")
    );
    let shards = t.cmd(&["CLUSTER", "SHARDS"]).to_string();
    assert_eq!(
        shards,
        format!(
            "[[\"slots\", [:0, :16383], \"nodes\", [[\"id\", \"{me}\", \"port\", :7311, \"ip\", \"\", \
             \"endpoint\", \"\", \"role\", \"master\", \"replication-offset\", :0, \"health\", \"online\"]]]]"
        )
    );
}

#[test]
fn countkeysinslot_and_getkeysinslot_scan_the_slot() {
    let mut t = cluster();
    assert_eq!(t.q("CLUSTER ADDSLOTSRANGE 0 16383"), "+OK");
    for k in ["{t}1", "{t}2", "{t}3"] {
        assert_eq!(t.cmd(&["SET", k, "v"]).to_string(), "+OK");
    }
    t.check(
        r#"
            HSET {t}h f v => :1
            RPUSH {t}l a b => :2
            SET {u}x 1 => +OK
            SET {t}gone v PX 1 => +OK
        "#,
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    t.check(
        r#"
            CLUSTER KEYSLOT {t} => :15891
            CLUSTER COUNTKEYSINSLOT 15891 => :5
            CLUSTER GETKEYSINSLOT 15891 2 => ["{t}1", "{t}2"]
            CLUSTER GETKEYSINSLOT 15891 0 => []
            CLUSTER GETKEYSINSLOT 15891 100 => ["{t}1", "{t}2", "{t}3", "{t}h", "{t}l"]
            CLUSTER COUNTKEYSINSLOT 0 => :0
            DEL {t}1 => :1
            CLUSTER COUNTKEYSINSLOT 15891 => :4
        "#,
    );
}

/// A migrating slot's scan starts at the first live key the last one found (the keys MIGRATE
/// moved are not stepped over again), and still counts as Redis does when a key appears
/// below that start. No command creates one there while the slot migrates (a missing key is
/// redirected, a script's undeclared one too); a write that passed the routing before
/// SETSLOT MIGRATING and lands after it could, and is written here through the store.
#[test]
fn getkeysinslot_of_a_migrating_slot_resumes_and_counts_exactly() {
    let mut t = cluster();
    assert_eq!(t.q("CLUSTER ADDSLOTSRANGE 0 16383"), "+OK");
    assert_eq!(t.q("CLUSTER MEET 127.0.0.1 7999"), "+OK");
    let other = handshake_peer(&text(&t.cmd(&["CLUSTER", "NODES"])));
    for i in 1..=9 {
        assert_eq!(
            t.cmd(&["SET", &format!("{{t}}{i}"), "v"]).to_string(),
            "+OK"
        );
    }
    let r = t.cmd(&["CLUSTER", "SETSLOT", "15891", "MIGRATING", &other]);
    assert_eq!(r.to_string(), "+OK");
    t.check(
        r#"
            CLUSTER GETKEYSINSLOT 15891 3 => ["{t}1", "{t}2", "{t}3"]
            DEL {t}1 {t}2 {t}3 => :3
            CLUSTER GETKEYSINSLOT 15891 3 => ["{t}4", "{t}5", "{t}6"]
            EVAL "return redis.call('SET', '{t}0', 'v')" 0 => -ERR Script attempted to access a non local key in a cluster node script: 166b0a65470255e8e974c2a7f50df36c4cc0202f, on @user_script:1.
        "#,
    );
    let store = &t.shared().store;
    let meta = crate::store::Meta::string(1, b"v".to_vec(), 0);
    store
        .front()
        .put(store.dbs.physical(0), b"{t}0", &meta)
        .unwrap();
    t.check(
        r#"
            CLUSTER GETKEYSINSLOT 15891 100 => ["{t}0", "{t}4", "{t}5", "{t}6", "{t}7", "{t}8", "{t}9"]
            CLUSTER GETKEYSINSLOT 15891 2 => ["{t}0", "{t}4"]
            DEL {t}0 {t}4 {t}5 {t}6 {t}7 {t}8 {t}9 => :7
            CLUSTER GETKEYSINSLOT 15891 10 => []
            CLUSTER COUNTKEYSINSLOT 15891 => :0
        "#,
    );
}

#[test]
fn moved_ask_tryagain_crossslot_and_clusterdown() {
    let mut t = cluster();
    t.check(
        r#"
            GET a => -CLUSTERDOWN Hash slot not served
            CLUSTER ADDSLOTSRANGE 0 16382 => +OK
            GET a => -CLUSTERDOWN The cluster is down
            CONFIG SET cluster-allow-reads-when-down yes => +OK
            GET a => (nil)
            SET a 1 => -CLUSTERDOWN The cluster is down and only accepts reads
            PING => +PONG
            CONFIG SET cluster-require-full-coverage no => +OK
            SET a 1 => +OK
            CLUSTER ADDSLOTS 16383 => +OK
            MSET a 1 b 2 => -CROSSSLOT Keys in request don't hash to the same slot
            MSET a 1 {a}x 2 => +OK
            CLUSTER MEET 127.0.0.1 7999 => +OK
            CLUSTER MEET 127.0.0.1 7999 => +OK
        "#,
    );
    let nodes = text(&t.cmd(&["CLUSTER", "NODES"]));
    let other = handshake_peer(&nodes);
    assert_eq!(nodes.lines().count(), 2, "{nodes}");
    assert!(nodes.contains(&format!(
        "{other} 127.0.0.1:7999@17999 handshake - 0 0 0 disconnected\n"
    )));
    // Slot 3300 ("b") to the other node: MOVED.
    let run = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "3300", "NODE", &other]),
        "+OK"
    );
    t.check(
        r#"
            GET b => -MOVED 3300 127.0.0.1:7999
            SET {b}x 1 => -MOVED 3300 127.0.0.1:7999
            READONLY => +OK
            GET b => -MOVED 3300 127.0.0.1:7999
            CLUSTER COUNTKEYSINSLOT 3300 => :0
        "#,
    );
    // Slot 15495 ("a", which holds a and {a}x) migrating to it: ASK for missing keys.
    assert_eq!(
        run(
            &mut t,
            &["CLUSTER", "SETSLOT", "15495", "MIGRATING", &other]
        ),
        "+OK"
    );
    t.check(
        r#"
            GET a => "1"
            GET {a}nokey => -ASK 15495 127.0.0.1:7999
            MGET a {a}x => ["1", "2"]
            MGET a {a}nokey => -TRYAGAIN Multiple keys request during rehashing of slot
            MGET {a}n1 {a}n2 => -ASK 15495 127.0.0.1:7999
            CLUSTER SETSLOT 15495 IMPORTING abc => -ERR I'm already the owner of hash slot 15495
        "#,
    );
    let conf = nodes_conf(&t);
    assert!(conf.contains(&format!("[15495->-{other}]")), "{conf}");
    assert!(!conf.contains("handshake"), "{conf}");
    // Importing slot 3300 from it: served only after ASKING, for one command.
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "3300", "IMPORTING", &other]),
        "+OK"
    );
    // RESTORE-ASKING is served in an importing slot without ASKING (MIGRATE's command).
    let Reply::Bulk(payload) = t.cmd(&["DUMP", "a"]) else {
        panic!("DUMP")
    };
    let restore = |t: &mut TestServer, name: &str| {
        t.cmd_bytes(&[name.as_bytes(), b"{b}r", b"0", &payload])
            .to_string()
    };
    assert_eq!(restore(&mut t, "RESTORE"), "-MOVED 3300 127.0.0.1:7999");
    assert_eq!(restore(&mut t, "RESTORE-ASKING"), "+OK");
    t.check(
        r#"
            GET b => -MOVED 3300 127.0.0.1:7999
            ASKING => +OK
            SET b 1 => +OK
            GET b => -MOVED 3300 127.0.0.1:7999
            ASKING => +OK
            MGET b {b}missing => -TRYAGAIN Multiple keys request during rehashing of slot
            ASKING => +OK
            GET b => "1"
            CLUSTER SETSLOT 3300 NODE abc => -ERR Unknown node abc
            CLUSTER SETSLOT 15495 STABLE => +OK
            GET {a}nokey => (nil)
            MULTI => +OK
            GET b => -MOVED 3300 127.0.0.1:7999
            EXEC => -EXECABORT Transaction discarded because of previous errors.
            ASKING => +OK
            MULTI => +OK
            GET b => +QUEUED
            EXEC => ["1"]
            GET b => -MOVED 3300 127.0.0.1:7999
        "#,
    );
    // Taking the imported slot over bumps the epoch; a transaction's keys are routed
    // together, and a redirected command inside MULTI fails the EXEC.
    let me = text(&t.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "3300", "NODE", &me]),
        "+OK"
    );
    assert!(text(&t.cmd(&["CLUSTER", "INFO"])).contains("cluster_my_epoch:1\r\n"));
    t.check(
        r#"
            GET b => "1"
            MULTI => +OK
            GET a => +QUEUED
            GET b => +QUEUED
            EXEC => -CROSSSLOT Keys in request don't hash to the same slot
            EXEC => -ERR EXEC without MULTI
            MULTI => +OK
            GET a => +QUEUED
            GET {a}x => +QUEUED
            EXEC => ["1", "2"]
            EVAL "return redis.call('get', KEYS[1])" 1 a => "1"
            EVAL "return 1" 2 a b => -CROSSSLOT Keys in request don't hash to the same slot
        "#,
    );
    assert_eq!(run(&mut t, &["CLUSTER", "FORGET", &other]), "+OK");
    assert_eq!(
        run(&mut t, &["CLUSTER", "FORGET", &other]),
        format!("-ERR Unknown node {other}")
    );
}

#[test]
fn nodes_conf_survives_a_restart() {
    let mut t = cluster();
    t.check(
        r#"
            CLUSTER ADDSLOTSRANGE 0 100 200 300 => +OK
            CLUSTER SET-CONFIG-EPOCH 9 => +OK
            CLUSTER BUMPEPOCH => +STILL 9
        "#,
    );
    let me = text(&t.cmd(&["CLUSTER", "MYID"]));
    let conf = nodes_conf(&t);
    assert_eq!(
        conf,
        format!("{me} :7311@17311 myself,master - 0 0 9 connected 0-100 200-300\nvars currentEpoch 9 lastVoteEpoch 0\n")
    );
    let mut t = t.reopen();
    assert_eq!(text(&t.cmd(&["CLUSTER", "MYID"])), me);
    assert_eq!(nodes_conf(&t), conf);
    let info = text(&t.cmd(&["CLUSTER", "INFO"]));
    assert!(
        info.contains("cluster_slots_assigned:202\r\n")
            && info.contains("cluster_current_epoch:9\r\n"),
        "{info}"
    );
    // RESET HARD: a new id, epochs 0, no slots; written at once.
    assert_eq!(t.q("CLUSTER RESET HARD"), "+OK");
    let new = text(&t.cmd(&["CLUSTER", "MYID"]));
    assert_ne!(new, me);
    assert_eq!(
        nodes_conf(&t),
        format!("{new} :7311@17311 myself,master - 0 0 0 connected\nvars currentEpoch 0 lastVoteEpoch 0\n")
    );
}

/// A change saved only on the second try: its save failed, and the next command that saves
/// writes the file although it changes nothing itself (nodes.conf is compared with the text
/// last written, not with the state before the command).
#[test]
fn a_change_whose_save_failed_is_written_by_the_next_save() {
    let fs = FaultFs::new(Arc::new(MemFs::new()));
    let mut t = TestServer::with_fs(
        Arc::new(fs.clone()) as Arc<dyn Fs>,
        &["--cluster-enabled", "yes", "--port", "7311"],
    );
    let me = text(&t.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(t.q("CLUSTER ADDSLOTSRANGE 0 100"), "+OK");
    let line = |slots: &str| {
        format!(
            "{me} :7311@17311 myself,master - 0 0 0 connected {slots}
vars currentEpoch 0 lastVoteEpoch 0
"
        )
    };
    assert_eq!(nodes_conf(&t), line("0-100"));
    fs.add_rule(FaultRule::new(FaultOp::Rename, 1, FaultKind::Eio).path_contains("nodes.conf"));
    let failed = t.q("CLUSTER ADDSLOTSRANGE 200 300");
    assert!(
        failed.starts_with("-ERR Error saving the cluster node config"),
        "{failed}"
    );
    assert_eq!(nodes_conf(&t), line("0-100"));
    // Slot 5 is not open: STABLE changes nothing.
    assert_eq!(t.q("CLUSTER SETSLOT 5 STABLE"), "+OK");
    assert_eq!(nodes_conf(&t), line("0-100 200-300"));
}

#[test]
fn a_malformed_nodes_conf_is_refused() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    // A database made before cluster mode was turned on.
    drop(TestServer::with_fs(fs.clone(), &[]));
    let id = "e".repeat(40);
    let text = format!("{id} :7311@17311 myself,master - 0 0 0 connected 0-5\n{id} bad\n");
    fs.write_all_synced(Path::new("/strata-test/nodes.conf"), text.as_bytes())
        .unwrap();
    let args: Vec<String> = ["--dir", "/strata-test", "--cluster-enabled", "yes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let config = crate::config::Config::from_args(&args).unwrap();
    let err = crate::server::open_shared(config, Some(fs.clone()), Vec::new())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("corrupted cluster config file, line 2"),
        "{err}"
    );
    assert!(err.contains(&format!("\"{id} bad\"")), "{err}");
    // A well-formed file written by Redis is taken as it is.
    let text = format!("{id} :7311@17311 myself,master - 0 0 3 connected 0-5\nvars currentEpoch 4 lastVoteEpoch 2\n");
    fs.write_all_synced(Path::new("/strata-test/nodes.conf"), text.as_bytes())
        .unwrap();
    let mut t = TestServer::with_fs(fs, &["--cluster-enabled", "yes", "--port", "7311"]);
    assert_eq!(text_of(&mut t, "CLUSTER MYID"), id);
    assert_eq!(
        text_of(&mut t, "CLUSTER NODES"),
        format!("{id} :7311@17311 myself,master - 0 0 3 connected 0-5\n")
    );
}

fn text_of(t: &mut TestServer, line: &str) -> String {
    let args: Vec<&str> = line.split(' ').collect();
    text(&t.cmd(&args))
}

#[test]
fn two_servers_cannot_share_nodes_conf() {
    let t = cluster();
    let args: Vec<String> = ["--dir", "/strata-test", "--cluster-enabled", "yes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let config = crate::config::Config::from_args(&args).unwrap();
    // The database's own lock answers first for the same directory; a second node with
    // another database directory but the same nodes.conf is refused by the cluster lock.
    let mut other = config.clone();
    other.dir = "/strata-test2".into();
    other.cluster_config_file = "/strata-test/nodes.conf".into();
    let err = crate::server::open_shared(other, Some(t.fs().clone()), Vec::new())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("already used by a different"), "{err}");
}

#[test]
fn a_master_that_gives_away_its_last_slot_becomes_a_replica_of_the_taker() {
    let mut t = cluster();
    t.check(
        r#"
            CLUSTER ADDSLOTS 5 => +OK
            CLUSTER MEET 127.0.0.1 7999 => +OK
            CONFIG SET cluster-allow-replica-migration no => +OK
        "#,
    );
    let nodes = text(&t.cmd(&["CLUSTER", "NODES"]));
    let other = handshake_peer(&nodes);
    let me = text(&t.cmd(&["CLUSTER", "MYID"]));
    let run = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    // Without replica migration it stays a master without slots.
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "5", "NODE", &other]),
        "+OK"
    );
    assert!(text(&t.cmd(&["CLUSTER", "NODES"])).contains("myself,master - "));
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "5", "NODE", &me]),
        "+OK"
    );
    // With it (the default), it follows the node that took its last slot.
    t.check("CONFIG SET cluster-allow-replica-migration yes => +OK");
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "5", "NODE", &other]),
        "+OK"
    );
    let nodes = text(&t.cmd(&["CLUSTER", "NODES"]));
    assert!(nodes.contains(&format!("myself,slave {other} ")), "{nodes}");
    assert!(nodes_conf(&t).contains(&format!("myself,slave {other} ")));
    t.check("CLUSTER SETSLOT 5 NODE abc => -ERR Please use SETSLOT only with masters.");
}

#[test]
fn reset_of_a_replica_stops_replicating_and_empties_its_data() {
    let mut t = cluster();
    t.check(
        r#"
            CLUSTER ADDSLOTS 5 => +OK
            CLUSTER MEET 127.0.0.1 7999 => +OK
        "#,
    );
    let nodes = text(&t.cmd(&["CLUSTER", "NODES"]));
    let other = handshake_peer(&nodes);
    // Giving its last slot away makes it a replica of the taker, replicating from it.
    assert_eq!(
        t.cmd(&["CLUSTER", "SETSLOT", "5", "NODE", &other])
            .to_string(),
        "+OK"
    );
    assert!(t.shared().replication.is_replica());
    // A key as its master's stream would have written it.
    let store = &t.shared().store;
    let meta = crate::store::Meta {
        rtype: crate::store::RType::String,
        expire_ms: 0,
        version: 1,
        size: 1,
        value: b"v".to_vec(),
    };
    store
        .front()
        .put(store.dbs.physical(0), b"replicated", &meta)
        .unwrap();
    t.check("DBSIZE => :1");
    // A replica may be reset holding keys: it stops replicating, is a master of nothing,
    // and its data is gone.
    t.check("CLUSTER RESET => +OK");
    assert!(!t.shared().replication.is_replica());
    t.check("DBSIZE => :0");
    let role = t.q("ROLE");
    assert!(role.starts_with("[\"master\""), "{role}");
    let nodes = text(&t.cmd(&["CLUSTER", "NODES"]));
    assert_eq!(nodes.lines().count(), 1, "{nodes}");
    assert!(nodes.contains("myself,master - "), "{nodes}");
    assert!(nodes_conf(&t).contains("myself,master - "));
}

/// Keys a script reaches without declaring them (Redis 7.0's `scriptVerifyClusterState`):
/// a key of a slot served elsewhere is refused; a script with a shebang (and every
/// function) stays in one slot unless it has `allow-cross-slot-keys`; a call while the
/// cluster is down is refused, a write too when reads are allowed.
#[test]
fn scripts_reach_only_keys_this_node_serves_in_one_slot() {
    let mut t = cluster();
    assert_eq!(t.q("CLUSTER ADDSLOTSRANGE 0 16383"), "+OK");
    assert_eq!(t.q("CLUSTER MEET 127.0.0.1 7999"), "+OK");
    let other = handshake_peer(&text(&t.cmd(&["CLUSTER", "NODES"])));
    // "b" is in slot 3300, given to the other node; "a" (15495) and "c" (7365) are here.
    assert_eq!(
        t.cmd(&["CLUSTER", "SETSLOT", "3300", "NODE", &other])
            .to_string(),
        "+OK"
    );
    let err = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    let non_local = "-ERR Script attempted to access a non local key in a cluster node script:";
    let got = err(&mut t, &["EVAL", "return redis.call('get', 'b')", "0"]);
    assert!(got.starts_with(non_local), "{got}");
    let got = err(
        &mut t,
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], 'x') and redis.call('get', 'b')",
            "1",
            "a",
        ],
    );
    assert!(got.starts_with(non_local), "{got}");
    // One call naming keys of two slots is not local either.
    let got = err(
        &mut t,
        &["EVAL", "return redis.call('mset', 'a', 1, 'c', 2)", "0"],
    );
    assert!(got.starts_with(non_local), "{got}");
    let cross = "-ERR Script attempted to access keys that do not hash to the same slot script:";
    let two = "redis.call('set', 'a', '1'); return redis.call('set', 'c', '1')";
    let got = err(&mut t, &["EVAL", &format!("#!lua\n{two}"), "0"]);
    assert!(got.starts_with(cross), "{got}");
    let got = err(
        &mut t,
        &["EVAL", "#!lua\nreturn redis.call('get', 'c')", "1", "a"],
    );
    assert!(
        got.starts_with(cross),
        "the declared key's slot is the script's: {got}"
    );
    assert_eq!(
        err(&mut t, &["EVAL", two, "0"]),
        "+OK",
        "no shebang: allowed"
    );
    assert_eq!(
        err(
            &mut t,
            &[
                "EVAL",
                &format!("#!lua flags=allow-cross-slot-keys\n{two}"),
                "0"
            ]
        ),
        "+OK"
    );
    assert_eq!(
        err(&mut t, &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"]),
        "-ERR Can not run script on cluster, 'no-cluster' flag is set."
    );
    assert_eq!(
        err(
            &mut t,
            &["EVAL", "#!lua\nreturn redis.call('get', '{a}x')", "1", "a"]
        ),
        "(nil)",
        "same slot as the declared key"
    );
    // The cluster down: refused; with reads allowed when down, writes only.
    assert_eq!(t.q("CLUSTER DELSLOTS 0"), "+OK");
    let got = err(&mut t, &["EVAL", "return redis.call('get', 'a')", "0"]);
    assert!(
        got.starts_with(
            "-ERR Script attempted to execute a command while the cluster is down script:"
        ),
        "{got}"
    );
    assert_eq!(
        err(&mut t, &["EVAL", "return redis.call('ping')", "0"]),
        "+PONG",
        "no keys: served"
    );
    assert_eq!(t.q("CONFIG SET cluster-allow-reads-when-down yes"), "+OK");
    assert_eq!(
        err(&mut t, &["EVAL", "return redis.call('get', 'c')", "0"]),
        "\"1\""
    );
    let got = err(&mut t, &["EVAL", "return redis.call('set', 'c', '2')", "0"]);
    assert!(
        got.starts_with(
            "-ERR Script attempted to execute a write command while the cluster is down and \
             readonly script:"
        ),
        "{got}"
    );
}

/// SPUBLISH, SSUBSCRIBE and SUNSUBSCRIBE go by their channels' slot, as redis-server
/// 7.0.15 routes them (recorded from a cluster of three): MOVED to the owner (also inside
/// MULTI), CROSSSLOT for channels of two slots, served by the source of a migrating slot
/// (where a key of that name is ASKed for) and after ASKING by the importer; an EXEC
/// holding an SPUBLISH is routed as keys. A down cluster serves them unless
/// `cluster-allow-pubsubshard-when-down` is `no`. A subscriber of a slot given away gets
/// one `sunsubscribe` per channel (in name order) and leaves pub/sub mode.
#[test]
fn sharded_pubsub_goes_by_channel_slot_and_ends_with_the_slot() {
    let mut t = cluster();
    assert_eq!(t.q("CLUSTER ADDSLOTSRANGE 0 16383"), "+OK");
    assert_eq!(t.q("CLUSTER MEET 127.0.0.1 7999"), "+OK");
    let other = handshake_peer(&text(&t.cmd(&["CLUSTER", "NODES"])));
    let run = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    // "b" is slot 3300, "a" 15495.
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "3300", "NODE", &other]),
        "+OK"
    );
    t.check(
        r#"
            SPUBLISH b m => -MOVED 3300 127.0.0.1:7999
            SSUBSCRIBE b => -MOVED 3300 127.0.0.1:7999
            SUNSUBSCRIBE {b}x => -MOVED 3300 127.0.0.1:7999
            SSUBSCRIBE a b => -CROSSSLOT Keys in request don't hash to the same slot
            SUNSUBSCRIBE a b => -CROSSSLOT Keys in request don't hash to the same slot
            SPUBLISH a m => :0
            MULTI => +OK
            SPUBLISH b m => -MOVED 3300 127.0.0.1:7999
            EXEC => -EXECABORT Transaction discarded because of previous errors.
        "#,
    );
    let mut s = t.conn();
    assert_eq!(s.q("SUNSUBSCRIBE"), r#"["sunsubscribe", (nil), :0]"#);
    assert_eq!(s.q("SSUBSCRIBE {a}x a"), r#"["ssubscribe", "{a}x", :1]"#);
    assert_eq!(s.recv().to_string(), r#"["ssubscribe", "a", :2]"#);
    assert_eq!(s.q("SUBSCRIBE plain"), r#"["subscribe", "plain", :1]"#);
    let mut s2 = t.conn();
    assert_eq!(s2.q("SSUBSCRIBE a"), r#"["ssubscribe", "a", :1]"#);
    assert_eq!(
        run(
            &mut t,
            &["CLUSTER", "SETSLOT", "15495", "MIGRATING", &other]
        ),
        "+OK"
    );
    t.check(
        r#"
            SPUBLISH a m => :2
            GET a => -ASK 15495 127.0.0.1:7999
            MULTI => +OK
            SPUBLISH a m => +QUEUED
            EXEC => -ASK 15495 127.0.0.1:7999
        "#,
    );
    for c in [&mut s, &mut s2] {
        assert_eq!(c.recv().to_string(), r#"["smessage", "a", "m"]"#);
    }
    // The slot given away: its subscriptions end; the plain channel's stays.
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "15495", "NODE", &other]),
        "+OK"
    );
    assert_eq!(s.recv().to_string(), r#"["sunsubscribe", "a", :1]"#);
    assert_eq!(s.recv().to_string(), r#"["sunsubscribe", "{a}x", :0]"#);
    assert_eq!(s.q("PING"), r#"["pong", ""]"#);
    assert_eq!(s2.recv().to_string(), r#"["sunsubscribe", "a", :0]"#);
    assert_eq!(
        s2.q("PING"),
        "+PONG",
        "no subscription left: out of pub/sub mode"
    );
    t.check(
        r#"
            PUBSUB SHARDCHANNELS => []
            SPUBLISH a m => -MOVED 15495 127.0.0.1:7999
        "#,
    );
    // Importing slot 3300: served after ASKING only.
    assert_eq!(
        run(&mut t, &["CLUSTER", "SETSLOT", "3300", "IMPORTING", &other]),
        "+OK"
    );
    t.check(
        r#"
            SPUBLISH b m => -MOVED 3300 127.0.0.1:7999
            ASKING => +OK
            SPUBLISH b m => :0
            SPUBLISH b m => -MOVED 3300 127.0.0.1:7999
        "#,
    );
    // A down cluster (slot 0 unassigned).
    t.check(
        r#"
            CLUSTER DELSLOTS 0 => +OK
            SPUBLISH c m => :0
            GET c => -CLUSTERDOWN The cluster is down
            CONFIG SET cluster-allow-pubsubshard-when-down no => +OK
            SPUBLISH c m => -CLUSTERDOWN The cluster is down
        "#,
    );
}
