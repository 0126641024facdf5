//! Node flag bits (headers' and gossip sections' `flags`; on the wire: do not renumber) and
//! their names as CLUSTER NODES prints them and nodes.conf stores them.

use super::BusError;

pub const MASTER: u16 = 1;
pub const SLAVE: u16 = 2;
/// Failure suspected, not yet agreed ("fail?").
pub const PFAIL: u16 = 4;
pub const FAIL: u16 = 8;
pub const MYSELF: u16 = 16;
/// Met, first PONG not received yet.
pub const HANDSHAKE: u16 = 32;
/// Address unknown.
pub const NOADDR: u16 = 64;
/// A MEET is to be sent (not printed).
pub const MEET: u16 = 128;
/// Master eligible for replica migration (not printed).
pub const MIGRATE_TO: u16 = 256;
/// Replica that will not try to fail over.
pub const NOFAILOVER: u16 = 512;

/// The printed flags, in Redis's order.
const NAMES: [(u16, &str); 8] = [
    (MYSELF, "myself"),
    (MASTER, "master"),
    (SLAVE, "slave"),
    (PFAIL, "fail?"),
    (FAIL, "fail"),
    (HANDSHAKE, "handshake"),
    (NOADDR, "noaddr"),
    (NOFAILOVER, "nofailover"),
];

/// The flags as CLUSTER NODES prints them: the set ones of myself, master, slave, fail?,
/// fail, handshake, noaddr, nofailover, in that order, comma-separated; `noflags` when none
/// of them is set (MEET and MIGRATE_TO are never printed).
pub fn flags_to_string(flags: u16) -> String {
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "noflags".to_string()
    } else {
        names.join(",")
    }
}

/// Reads a comma-separated flag list as nodes.conf loading does: names in any case and
/// order, `noflags` adds nothing, any other word is an error.
pub fn parse_flags(list: &str) -> Result<u16, BusError> {
    let mut flags = 0;
    for word in list.split(',') {
        if word.eq_ignore_ascii_case("noflags") {
            continue;
        }
        let bit = NAMES
            .iter()
            .find(|(_, n)| word.eq_ignore_ascii_case(n))
            .map(|(bit, _)| *bit)
            .ok_or_else(|| BusError::NodeFlag(word.to_string()))?;
        flags |= bit;
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_in_redis_order() {
        assert_eq!(flags_to_string(MYSELF | MASTER), "myself,master");
        assert_eq!(
            flags_to_string(SLAVE | PFAIL | NOFAILOVER),
            "slave,fail?,nofailover"
        );
        assert_eq!(
            flags_to_string(MASTER | FAIL | NOADDR),
            "master,fail,noaddr"
        );
        assert_eq!(flags_to_string(HANDSHAKE | MEET), "handshake");
        assert_eq!(flags_to_string(0), "noflags");
        assert_eq!(flags_to_string(MEET | MIGRATE_TO), "noflags");
    }

    #[test]
    fn flags_parse_back() {
        for flags in 0..1024u16 {
            let printable = flags & !(MEET | MIGRATE_TO);
            assert_eq!(
                parse_flags(&flags_to_string(flags)),
                Ok(printable),
                "{flags}"
            );
        }
        assert_eq!(parse_flags("MASTER,Fail?"), Ok(MASTER | PFAIL));
        assert_eq!(parse_flags("noflags,slave"), Ok(SLAVE));
        assert_eq!(
            parse_flags("master,meet"),
            Err(BusError::NodeFlag("meet".into()))
        );
        assert_eq!(parse_flags(""), Err(BusError::NodeFlag(String::new())));
    }
}
