//! The latency monitor over TCP: with `latency-monitor-threshold` set, a command that runs
//! past it leaves a "command" sample (Redis's event name) that LATENCY LATEST and HISTORY
//! show and LATENCY RESET forgets; with the threshold at 0, nothing is recorded.

mod common;

use common::{start, Client, V};

/// A script that runs for at least 30 ms (EVAL is not a fast command: event "command").
const SLOW: &str = "local t=redis.call('TIME') local s=tonumber(t[1])*1000000+tonumber(t[2]) \
    while true do local u=redis.call('TIME') \
    if tonumber(u[1])*1000000+tonumber(u[2])-s > 30000 then break end end return 1";

fn ints(v: &V) -> Vec<i64> {
    match v {
        V::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                V::Int(n) => Some(*n),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

#[test]
fn slow_commands_are_sampled_past_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["EVAL", SLOW, "0"]), V::Int(1));
    assert_eq!(c.q(&["LATENCY", "LATEST"]), V::Array(vec![]));
    assert_eq!(
        c.q(&["CONFIG", "SET", "latency-monitor-threshold", "10"]),
        V::ok()
    );
    assert_eq!(c.q(&["EVAL", SLOW, "0"]), V::Int(1));
    c.q(&["PING"]);
    let latest = c.q(&["LATENCY", "LATEST"]);
    let V::Array(events) = &latest else {
        panic!("{latest:?}")
    };
    assert_eq!(events.len(), 1, "{latest:?}");
    let V::Array(e) = &events[0] else {
        panic!("{latest:?}")
    };
    assert_eq!(e[0], V::bulk("command"));
    let [t, ms, max] = ints(&events[0])[..] else {
        panic!("{latest:?}")
    };
    assert!(ms >= 30 && max >= ms, "{latest:?}");
    let history = c.q(&["LATENCY", "HISTORY", "command"]);
    let V::Array(samples) = &history else {
        panic!("{history:?}")
    };
    assert_eq!(samples.len(), 1);
    assert_eq!(ints(&samples[0]), vec![t, ms]);
    assert_eq!(c.q(&["LATENCY", "HISTORY", "nosuch"]), V::Array(vec![]));
    assert_eq!(c.q(&["LATENCY", "RESET", "command", "nosuch"]), V::Int(1));
    assert_eq!(c.q(&["LATENCY", "LATEST"]), V::Array(vec![]));
    assert_eq!(c.q(&["LATENCY", "RESET"]), V::Int(0));
    assert_eq!(
        c.q(&["LATENCY", "HISTORY"]),
        V::err("ERR wrong number of arguments for 'latency|history' command")
    );
    match c.q(&["LATENCY", "HELP"]) {
        V::Array(lines) => assert_eq!(lines.len(), 17),
        other => panic!("{other:?}"),
    }
}

/// The bulk text of an INFO reply (RESP2).
fn info_text(c: &mut Client, section: &str) -> String {
    match c.q(&["INFO", section]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("INFO: {other:?}"),
    }
}

#[test]
fn histograms_per_command_and_latencystats() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["CONFIG", "RESETSTAT"]), V::ok());
    for _ in 0..3 {
        c.q(&["SET", "k", "v"]);
    }
    c.q(&["CLIENT", "ID"]);
    // RESP2: a flat array of name, [calls, n, histogram_usec, [usec, cumulative, ...]].
    let reply = c.q(&["LATENCY", "HISTOGRAM", "set", "nosuch", "client"]);
    let V::Array(items) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(items[0], V::bulk("set"));
    assert_eq!(items[2], V::bulk("client|id"));
    let V::Array(set) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(
        set[..3],
        [V::bulk("calls"), V::Int(3), V::bulk("histogram_usec")]
    );
    let buckets = ints(&set[3]);
    assert!(
        !buckets.is_empty() && buckets.len().is_multiple_of(2),
        "{buckets:?}"
    );
    // Cumulative counts grow to the calls; the buckets are Redis's powers of two.
    assert_eq!(buckets[buckets.len() - 1], 3);
    for pair in buckets.chunks(2) {
        assert!(
            [1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16909]
                .contains(&pair[0]),
            "{buckets:?}"
        );
    }
    // INFO latencystats: the default percentiles, not in the default INFO.
    let text = info_text(&mut c, "latencystats");
    let line = text
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap_or_else(|| panic!("{text}"));
    let line = line.trim_end();
    let fields: Vec<&str> = line.split(':').nth(1).unwrap().split(',').collect();
    assert_eq!(fields.len(), 3, "{line}");
    for (f, name) in fields.iter().zip(["p50=", "p99=", "p99.9="]) {
        assert!(f.starts_with(name), "{line}");
        let value = &f[name.len()..];
        let v: f64 = value.parse().unwrap();
        assert!(
            v > 0.0 && value.split('.').nth(1).unwrap().len() == 3,
            "{line}"
        );
    }
    assert!(!info_text(&mut c, "default").contains("latency_percentiles"));
    assert_eq!(
        c.q(&["CONFIG", "SET", "latency-tracking-info-percentiles", "50"]),
        V::ok()
    );
    assert!(info_text(&mut c, "latencystats").contains("latency_percentiles_usec_set:p50="));
    assert!(!info_text(&mut c, "latencystats").contains("p99="));
    // Off: nothing more is recorded; RESETSTAT forgets.
    assert_eq!(c.q(&["CONFIG", "SET", "latency-tracking", "no"]), V::ok());
    c.q(&["GET", "k"]);
    assert_eq!(c.q(&["LATENCY", "HISTOGRAM", "get"]), V::Array(vec![]));
    assert_eq!(c.q(&["CONFIG", "RESETSTAT"]), V::ok());
    assert_eq!(c.q(&["LATENCY", "HISTOGRAM"]), V::Array(vec![]));
}

/// The text of a verbatim (RESP2: bulk) reply, or an error's.
fn text(v: V) -> String {
    match v {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        V::Err(e) => e,
        other => panic!("{other:?}"),
    }
}

#[test]
fn graph_and_doctor_speak_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert!(text(c.q(&["LATENCY", "DOCTOR"])).starts_with("I'm sorry, Dave, I can't do that."));
    assert_eq!(
        text(c.q(&["LATENCY", "GRAPH", "command"])),
        "ERR No samples available for event 'command'"
    );
    c.q(&["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    assert!(text(c.q(&["LATENCY", "DOCTOR"])).starts_with("Dave, no latency spike was observed"));
    c.q(&["EVAL", SLOW, "0"]);
    let g = text(c.q(&["LATENCY", "GRAPH", "command"]));
    let lines: Vec<&str> = g.lines().collect();
    assert!(
        lines[0].starts_with("command - high ") && lines[0].ends_with(" ms)"),
        "{g}"
    );
    assert_eq!(lines[1], "-".repeat(80));
    // One sample: the lowest bar, a blank row, then its age ("0s" or "1s") downwards.
    assert_eq!(&lines[2..7], &[" ", " ", " ", "_", " "], "{g}");
    assert!(lines[8] == "s" && lines.len() == 9, "{g}");
    let d = text(c.q(&["LATENCY", "DOCTOR"]));
    assert!(
        d.starts_with(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind \
             talking about it, do you Dave?\n\n1. command: 1 latency spikes (average "
        ),
        "{d}"
    );
    assert!(d.contains("\n\nI have a few advices for you:\n\n- Check your Slow Log"));
}
