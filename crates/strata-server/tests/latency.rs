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
