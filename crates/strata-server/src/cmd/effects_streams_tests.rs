//! What stream writes propagate (`effects.rs`): XADD's generated IDs and trims, and the
//! XCLAIM / XGROUP forms consumer-group deliveries propagate as, with the expected argvs
//! from redis-server 7.0.15's AOF (as `effects_tests.rs`).

use super::effects_tests::{run, server};
use crate::test_server::{Reply, TestServer};

#[test]
fn xadd_propagates_the_id_it_generated() {
    let (mut t, log) = server();
    let id = |r: Reply| match r {
        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other}"),
    };
    let a = id(t.cmd(&["XADD", "x", "*", "f", "v"]));
    let b = id(t.cmd(&["XADD", "x", "MAXLEN", "~", "1", "*", "f", "v"]));
    let c = id(t.cmd(&["xadd", "x", "NOMKSTREAM", "MINID", "=", "0", "*", "f", "v"]));
    let len = t.q("XLEN x");
    assert_eq!(len, ":3");
    assert_eq!(
        log.take(),
        [
            format!("XADD x {a} f v"),
            format!("XADD x MAXLEN = 2 {b} f v"),
            format!("xadd x NOMKSTREAM MINID = 0 {c} f v"),
        ]
    );
    t.q("XADD y 9-1 f v");
    let d = id(t.cmd(&["XADD", "y", "9-*", "f", "v"]));
    assert_eq!(d, "9-2");
    assert_eq!(log.take(), ["XADD y 9-1 f v", "XADD y 9-2 f v"]);
}

/// Replaces the delivery time of propagated XCLAIMs (`TIME <ms>`) by `<t>`.
fn without_times(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            let mut words: Vec<String> = l.split(' ').map(str::to_string).collect();
            for i in 1..words.len() {
                if words[i - 1] == "TIME" {
                    words[i] = "<t>".to_string();
                }
            }
            words.join(" ")
        })
        .collect()
}

#[test]
fn consumer_groups_propagate_deliveries_as_xclaim() {
    let (mut t, log) = server();
    let run_t = |t: &mut TestServer, lines: &[&str]| without_times(run(t, &log, lines));
    assert_eq!(
        run_t(
            &mut t,
            &[
                "XADD st 1-1 f v",
                "XADD st 2-1 f v",
                "XGROUP CREATE st g 0",
                "XREADGROUP GROUP g c1 COUNT 1 STREAMS st >",
                "XREADGROUP GROUP g c2 NOACK STREAMS st >",
                "XREADGROUP GROUP g c1 STREAMS st 0",
                "XREADGROUP GROUP g c3 STREAMS st 0",
            ]
        ),
        [
            "XADD st 1-1 f v",
            "XADD st 2-1 f v",
            "XGROUP CREATE st g 0",
            "XCLAIM st g c1 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
            "MULTI",
            "XGROUP CREATECONSUMER st g c2",
            "XGROUP SETID st g 2-1 ENTRIESREAD 2",
            "EXEC",
        ]
    );
    assert_eq!(
        run_t(
            &mut t,
            &[
                "XADD st 3-1 f v",
                "XCLAIM st g c4 0 1-1",
                "XCLAIM st g c4 0 1-1 JUSTID",
                "XAUTOCLAIM st g c5 0 0",
                "XACK st g 1-1",
                "XACK st g 9-9",
            ]
        ),
        [
            "XADD st 3-1 f v",
            "XCLAIM st g c4 0 1-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 2-1",
            "XCLAIM st g c4 0 1-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 2-1",
            "XCLAIM st g c5 0 1-1 TIME <t> RETRYCOUNT 4 FORCE JUSTID LASTID 2-1",
            "XACK st g 1-1",
        ]
    );
    assert_eq!(
        run_t(
            &mut t,
            &[
                "XGROUP CREATE st g2 $ MKSTREAM",
                "XGROUP CREATECONSUMER st g2 cc",
                "XGROUP CREATECONSUMER st g2 cc",
                "XGROUP SETID st g2 0",
                "XGROUP DELCONSUMER st g2 cc",
                "XSETID st 5-5",
                "XREADGROUP GROUP g2 newc STREAMS st >",
            ]
        ),
        [
            "XGROUP CREATE st g2 $ MKSTREAM",
            "XGROUP CREATECONSUMER st g2 cc",
            "XGROUP SETID st g2 0",
            "XGROUP DELCONSUMER st g2 cc",
            "XSETID st 5-5",
            "MULTI",
            "XCLAIM st g2 newc 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
            "XCLAIM st g2 newc 0 2-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1",
            "XCLAIM st g2 newc 0 3-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 3-1",
            "EXEC",
        ]
    );
}

/// A blocked XREADGROUP served by an XADD: the XADD, then the delivery's XCLAIM.
#[test]
fn a_woken_xreadgroup_propagates_its_delivery() {
    let (mut t, log) = server();
    t.q("XGROUP CREATE ws g $ MKSTREAM");
    log.take();
    let mut b = t.conn();
    b.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "ws",
        ">",
    ]);
    t.wait_blocked(1);
    t.q("XADD ws 1-1 f v");
    b.recv();
    assert_eq!(
        without_times(log.take()),
        [
            "XADD ws 1-1 f v",
            "XCLAIM ws g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
        ]
    );
}

/// Claims of deleted entries propagate an XCLAIM as their old owner (a replica drops them
/// from the pending list the same way); LASTID moves the group, propagated with the claims
/// or, when nothing was claimed, as XGROUP SETID.
#[test]
fn claims_of_deleted_entries_and_lastid() {
    let (mut t, log) = server();
    let run_t = |t: &mut TestServer, lines: &[&str]| without_times(run(t, &log, lines));
    run_t(
        &mut t,
        &["XADD d 1-1 f v", "XADD d 2-1 f v", "XGROUP CREATE d g 0"],
    );
    assert_eq!(
        run_t(
            &mut t,
            &[
                "XREADGROUP GROUP g c STREAMS d >",
                "XDEL d 1-1",
                "XAUTOCLAIM d g c2 0 0",
                "XCLAIM d g c3 0 2-1 LASTID 5-5",
                "XCLAIM d g c3 0 9-9 LASTID 6-6",
            ]
        ),
        [
            "MULTI",
            "XCLAIM d g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
            "XCLAIM d g c 0 2-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1",
            "EXEC",
            "XDEL d 1-1",
            "MULTI",
            "XCLAIM d g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1",
            "XCLAIM d g c2 0 2-1 TIME <t> RETRYCOUNT 2 FORCE JUSTID LASTID 2-1",
            "EXEC",
            "XCLAIM d g c3 0 2-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 5-5",
            "XGROUP SETID d g 6-6 ENTRIESREAD 2",
        ]
    );
    assert_eq!(
        run_t(
            &mut t,
            &[
                "XADD e 1-1 f v",
                "XGROUP CREATE e g 0",
                "XREADGROUP GROUP g c STREAMS e >",
                "XDEL e 1-1",
                "XCLAIM e g c2 0 1-1",
            ]
        ),
        [
            "XADD e 1-1 f v",
            "XGROUP CREATE e g 0",
            "XCLAIM e g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
            "XDEL e 1-1",
            "XCLAIM e g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
        ]
    );
}
