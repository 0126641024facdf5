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
