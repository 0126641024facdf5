//! PSYNC's decision (Redis's `masterTryPartialResynchronization`) and REPLCONF's
//! arguments, as pure functions over the state they need.

/// The replication ids a master answers to.
pub struct Ids<'a> {
    pub replid: &'a str,
    pub replid2: &'a str,
    /// Offset (Redis's, 1-based) up to which `replid2` is valid, plus one; -1: none.
    pub second_offset: i64,
}

/// What PSYNC gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// `+CONTINUE`: feed the log from this 0-based offset.
    Continue { from: u64 },
    /// `+FULLRESYNC`; `partial_err`: the replica asked for a partial resync (counted in
    /// `sync_partial_err`), as opposed to `PSYNC ? -1`.
    Full { partial_err: bool },
}

/// Decides PSYNC `replid offset`: `offset` is Redis's (the first byte the replica lacks,
/// 1-based); `log` is the log's `(first, end)` in 0-based offsets, `None` before it exists.
pub fn decide(ids: &Ids<'_>, replid: &str, offset: i64, log: Option<(u64, u64)>) -> Decision {
    let asked = replid != "?";
    let full = Decision::Full { partial_err: asked };
    let ours = replid.eq_ignore_ascii_case(ids.replid);
    let previous = replid.eq_ignore_ascii_case(ids.replid2)
        && ids.second_offset >= 0
        && offset <= ids.second_offset;
    if !asked || !(ours || previous) {
        return full;
    }
    let Some((first, end)) = log else {
        return full;
    };
    // Redis's offsets count from 1: byte `n` here is byte `n + 1` there.
    if offset < 1 {
        return full;
    }
    let from = (offset - 1) as u64;
    if from < first || from > end {
        return full;
    }
    Decision::Continue { from }
}

/// PSYNC's arguments: the replication id and the offset (`PSYNC ? -1` for a full sync).
pub fn parse_psync(replid: &[u8], offset: &[u8]) -> Option<(String, i64)> {
    let id = std::str::from_utf8(replid).ok()?.to_string();
    let off = std::str::from_utf8(offset).ok()?.parse::<i64>().ok()?;
    Some((id, off))
}

/// What a replica told the master with REPLCONF before PSYNC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplConf {
    pub listening_port: Option<u16>,
    pub ip_address: Option<String>,
    /// `capa eof`: the replica takes a diskless transfer.
    pub capa_eof: bool,
    pub capa_psync2: bool,
    /// `capa strata-snapshot`: a Strata replica that takes the snapshot stream
    /// (`repl/ship.rs`) instead of an RDB; Redis never sends it.
    pub capa_snapshot: bool,
    /// `rdb-only 1`: the replica wants the RDB and no stream (redis-cli --rdb).
    pub rdb_only: bool,
}

/// One REPLCONF option.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplConfOpt {
    ListeningPort(u16),
    IpAddress(String),
    Capa(String),
    Ack(i64),
    GetAck,
    RdbOnly(bool),
    /// Options Redis takes and ignores here (`ack` also carries `fack`).
    Ignored,
}

/// REPLCONF's option/value pairs, in Redis's terms: an unknown option is
/// `ERR Unrecognized REPLCONF option: <name>`; a bad number the integer error.
pub fn parse_replconf(args: &[&[u8]]) -> Result<Vec<ReplConfOpt>, String> {
    if !args.len().is_multiple_of(2) {
        return Err("ERR syntax error".into());
    }
    let int = |v: &[u8]| {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| "ERR value is not an integer or out of range".to_string())
    };
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let (name, val) = (pair[0], pair[1]);
        let opt = match name.to_ascii_lowercase().as_slice() {
            b"listening-port" => {
                let p = int(val)?;
                let p = u16::try_from(p).map_err(|_| "ERR Invalid port".to_string())?;
                ReplConfOpt::ListeningPort(p)
            }
            b"ip-address" => ReplConfOpt::IpAddress(String::from_utf8_lossy(val).into_owned()),
            b"capa" => ReplConfOpt::Capa(String::from_utf8_lossy(val).to_ascii_lowercase()),
            b"ack" => ReplConfOpt::Ack(int(val)?),
            b"getack" => ReplConfOpt::GetAck,
            b"rdb-only" => match int(val)? {
                0 => ReplConfOpt::RdbOnly(false),
                1 => ReplConfOpt::RdbOnly(true),
                _ => return Err("ERR syntax error".into()),
            },
            b"fack" => ReplConfOpt::Ignored,
            _ => {
                return Err(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(name)
                ))
            }
        };
        out.push(opt);
    }
    Ok(out)
}

impl ReplConf {
    /// Applies the options that describe the replica.
    pub fn apply(&mut self, opts: &[ReplConfOpt]) {
        for o in opts {
            match o {
                ReplConfOpt::ListeningPort(p) => self.listening_port = Some(*p),
                ReplConfOpt::IpAddress(a) => self.ip_address = Some(a.clone()),
                ReplConfOpt::Capa(c) if c == "eof" => self.capa_eof = true,
                ReplConfOpt::Capa(c) if c == "psync2" => self.capa_psync2 = true,
                ReplConfOpt::Capa(c) if c == super::frames::CAPA => self.capa_snapshot = true,
                ReplConfOpt::RdbOnly(b) => self.rdb_only = *b,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const Z: &str = "0000000000000000000000000000000000000000";

    fn ids(second: i64) -> Ids<'static> {
        Ids {
            replid: A,
            replid2: if second < 0 { Z } else { B },
            second_offset: second,
        }
    }

    #[test]
    fn psync_decisions() {
        let log = Some((100, 500));
        let full_err = Decision::Full { partial_err: true };
        // A first sync.
        assert_eq!(
            decide(&ids(-1), "?", -1, log),
            Decision::Full { partial_err: false }
        );
        // Our id, inside the log (Redis offset = 0-based + 1), at both ends.
        assert_eq!(
            decide(&ids(-1), A, 101, log),
            Decision::Continue { from: 100 }
        );
        assert_eq!(
            decide(&ids(-1), A, 501, log),
            Decision::Continue { from: 500 }
        );
        assert_eq!(
            decide(&ids(-1), A, 300, log),
            Decision::Continue { from: 299 }
        );
        // Pruned, or beyond the end.
        assert_eq!(decide(&ids(-1), A, 100, log), full_err);
        assert_eq!(decide(&ids(-1), A, 502, log), full_err);
        assert_eq!(decide(&ids(-1), A, 0, log), full_err);
        assert_eq!(decide(&ids(-1), A, -5, log), full_err);
        // No log yet.
        assert_eq!(decide(&ids(-1), A, 101, None), full_err);
        // Another id.
        assert_eq!(decide(&ids(-1), B, 101, log), full_err);
        // The previous id, up to the offset it is valid to.
        assert_eq!(
            decide(&ids(301), B, 301, log),
            Decision::Continue { from: 300 }
        );
        assert_eq!(decide(&ids(301), B, 302, log), full_err);
        // The zero id is never a previous one.
        assert_eq!(decide(&ids(-1), Z, 101, log), full_err);
        // Case does not matter, as Redis compares with strcasecmp.
        assert_eq!(
            decide(&ids(-1), &A.to_uppercase(), 101, log),
            Decision::Continue { from: 100 }
        );
    }

    #[test]
    fn replconf_options() {
        let opts = parse_replconf(&[
            b"listening-port",
            b"6380",
            b"CAPA",
            b"eof",
            b"capa",
            b"psync2",
            b"capa",
            b"strata-snapshot",
            b"ip-address",
            b"10.0.0.1",
        ])
        .unwrap();
        let mut c = ReplConf::default();
        c.apply(&opts);
        assert_eq!(
            c,
            ReplConf {
                listening_port: Some(6380),
                ip_address: Some("10.0.0.1".into()),
                capa_eof: true,
                capa_psync2: true,
                capa_snapshot: true,
                rdb_only: false,
            }
        );
        assert_eq!(
            parse_replconf(&[b"ack", b"123", b"fack", b"100"]).unwrap(),
            vec![ReplConfOpt::Ack(123), ReplConfOpt::Ignored]
        );
        assert_eq!(
            parse_replconf(&[b"GETACK", b"*"]).unwrap(),
            vec![ReplConfOpt::GetAck]
        );
        assert_eq!(
            parse_replconf(&[b"rdb-only", b"1"]).unwrap(),
            vec![ReplConfOpt::RdbOnly(true)]
        );
        assert_eq!(
            parse_replconf(&[b"nope", b"1"]).unwrap_err(),
            "ERR Unrecognized REPLCONF option: nope"
        );
        assert_eq!(
            parse_replconf(&[b"listening-port", b"x"]).unwrap_err(),
            "ERR value is not an integer or out of range"
        );
        assert!(parse_replconf(&[b"listening-port", b"70000"]).is_err());
        assert!(parse_replconf(&[b"ack"]).is_err());
        assert_eq!(parse_psync(b"?", b"-1"), Some(("?".into(), -1)));
        assert_eq!(parse_psync(b"?", b"x"), None);
    }
}
