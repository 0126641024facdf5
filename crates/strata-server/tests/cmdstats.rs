//! INFO commandstats and errorstats: calls, rejected and failed calls, error codes, as
//! redis-server 7.0.15 counts them for the same sequence (run there by hand), and CONFIG
//! RESETSTAT.

mod common;

use common::{start, Client, V};

/// The `name:value` lines of an INFO section, microseconds left out.
fn lines(c: &mut Client, section: &str) -> Vec<String> {
    let V::Bulk(text) = c.q(&["INFO", section]) else {
        panic!("INFO reply");
    };
    String::from_utf8(text)
        .unwrap()
        .lines()
        .filter(|l| l.contains(':'))
        .map(|l| {
            let mut parts: Vec<&str> = l.split(',').collect();
            parts.retain(|p| !p.starts_with("usec"));
            parts.join(",")
        })
        .collect()
}

#[test]
fn calls_rejections_failures_and_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["CONFIG", "RESETSTAT"]), V::ok());
    for cmd in [
        &["GET"][..],
        &["SET", "k", "v"],
        &["LPUSH", "k", "x"],
        &["INCR", "k"],
        &["NOSUCH"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["GET"],
        &["EXEC"],
        &["MULTI"],
        &["INCR", "k"],
        &["EXEC"],
    ] {
        c.q(cmd);
    }
    let mut stats = lines(&mut c, "commandstats");
    stats.sort();
    assert_eq!(
        stats,
        [
            "cmdstat_config|resetstat:calls=1,rejected_calls=0,failed_calls=0",
            "cmdstat_exec:calls=2,rejected_calls=0,failed_calls=1",
            "cmdstat_get:calls=0,rejected_calls=2,failed_calls=0",
            "cmdstat_incr:calls=2,rejected_calls=0,failed_calls=2",
            "cmdstat_lpush:calls=1,rejected_calls=0,failed_calls=1",
            "cmdstat_multi:calls=2,rejected_calls=0,failed_calls=0",
            "cmdstat_set:calls=1,rejected_calls=0,failed_calls=0",
        ]
    );
    assert_eq!(
        lines(&mut c, "errorstats"),
        [
            "errorstat_ERR:count=5",
            "errorstat_EXECABORT:count=1",
            "errorstat_WRONGTYPE:count=1",
        ]
    );
    let stats = lines(&mut c, "stats");
    assert!(
        stats.iter().any(|l| l == "total_error_replies:7"),
        "{stats:?}"
    );
    // Errorstats is in the default INFO, commandstats only in `all`.
    let V::Bulk(default) = c.q(&["INFO"]) else {
        panic!("INFO reply");
    };
    let default = String::from_utf8(default).unwrap();
    assert!(default.contains("# Errorstats") && !default.contains("# Commandstats"));
    assert_eq!(c.q(&["CONFIG", "RESETSTAT"]), V::ok());
    assert!(lines(&mut c, "errorstats").is_empty());
    // RESETSTAT is counted after it ran, as in Redis.
    let mut stats = lines(&mut c, "commandstats");
    stats.sort();
    assert_eq!(
        stats,
        [
            "cmdstat_config|resetstat:calls=1,rejected_calls=0,failed_calls=0",
            "cmdstat_info:calls=1,rejected_calls=0,failed_calls=0",
        ]
    );
}
