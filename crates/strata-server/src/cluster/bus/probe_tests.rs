//! The decoder against redis-server 7.0.15's own verdicts on crafted messages
//! (`fixtures/probes/`, recorded by `scripts/probe-cluster-bus.py`): it accepts what Redis
//! accepts and refuses what Redis refuses, for the same reason, except the messages Redis
//! accepts and then reads out of bounds, which it refuses.

use super::*;
use serde_json::Value;

/// The error variant a refusal's Redis log line corresponds to.
fn matches_log(e: &BusError, log: &str) -> bool {
    let kind_in_log = |kind: &str| log.contains(&format!(" {kind} packet"));
    match e {
        BusError::GossipCount { kind, .. } => log.contains("gossip count") && kind_in_log(kind),
        BusError::ExtensionPadding { kind, .. } => {
            log.contains("without proper padding") && kind_in_log(kind)
        }
        BusError::ExtensionUnterminated { kind, .. } => {
            log.contains("missing null terminator") && kind_in_log(kind)
        }
        BusError::ExtensionOverrun { kind, .. } => {
            log.contains("extension data that exceeds") && kind_in_log(kind)
        }
        BusError::Length { kind, totlen, .. } => {
            log.contains(&format!("packet of length {totlen} but expected")) && kind_in_log(kind)
        }
        _ => false,
    }
}

#[test]
fn decoder_agrees_with_redis_on_crafted_messages() {
    let dir = super::fixture_tests::dir().join("probes");
    let text = std::fs::read_to_string(dir.join("probes.json")).expect("probes.json");
    let probes: Value = serde_json::from_str(&text).expect("JSON");
    assert!(probes["redis"].as_str().unwrap().contains("v=7.0.15"));
    let list = probes["probes"].as_array().expect("probes");
    let (mut accepted, mut refused) = (0, 0);
    for p in list {
        let file = p["file"].as_str().unwrap();
        let bytes = std::fs::read(dir.join(file)).expect("probe file");
        let redis_accepts = p["redis"] == "accepted";
        let got = decode(&bytes);
        if p["over_read"] == true {
            assert!(
                redis_accepts,
                "{file}: marked as an over-read Redis accepts"
            );
            assert!(
                got.is_err(),
                "{file}: Redis reads past it; the decoder must refuse it"
            );
            continue;
        }
        match (&got, redis_accepts) {
            (Ok(msg), true) => {
                assert_eq!(encode(msg), bytes, "{file} re-encodes");
                accepted += 1;
            }
            (Err(e), false) => {
                if let Some(log) = p["log"].as_str() {
                    assert!(
                        matches_log(e, log),
                        "{file}: refused with {e:?}, Redis logged {log:?}"
                    );
                } else {
                    // Redis refuses a foreign version silently.
                    assert!(matches!(e, BusError::Version(_)), "{file}: {e:?}");
                }
                refused += 1;
            }
            (got, _) => panic!("{file}: Redis {}, decoder {got:?}", p["redis"]),
        }
    }
    assert!(
        accepted >= 15 && refused >= 15,
        "{accepted} accepted, {refused} refused"
    );
}
