//! The cluster configuration file, `nodes.conf` (`docs/format/nodes-conf.md`): Redis's
//! format, so a file written by either server reads in the other. One CLUSTER NODES line
//! per node (nodes in handshake left out), then `vars currentEpoch N lastVoteEpoch N`.
//! Written whole to a temporary file, synced, renamed over the old one and the directory
//! synced, so a crash leaves the old file or the new one.
//!
//! Layer: cluster (a building block below commands).

use super::slots::{node_flag, Node, NodeId, State};
use crate::keys::SLOTS;
use std::path::Path;
use std::sync::Arc;
use strata_engine::io::Fs;

/// The file's text for `state` (Redis's `clusterSaveConfig`).
pub fn render(state: &State) -> String {
    let mut s = state.describe_all(node_flag::HANDSHAKE);
    s += &format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        state.current_epoch, state.last_vote_epoch
    );
    s
}

/// Writes `text` to `path` atomically: `path.tmp`, then a rename over `path`. With `sync`
/// also durably (the file fsynced before the rename, the directory after), as Redis's
/// `clusterSaveConfig(1)` for the changes it fsyncs (epochs, votes); without, as its
/// `clusterSaveConfig(0)` for the others (SETSLOT, ADDSLOTS, MEET...), which a crash may
/// undo but never leaves half written.
pub fn save(fs: &Arc<dyn Fs>, path: &Path, text: &str, sync: bool) -> std::io::Result<()> {
    let io = |e: strata_engine::Error| std::io::Error::other(e.to_string());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    if sync {
        fs.write_all_synced(&tmp, text.as_bytes()).map_err(io)?;
    } else {
        let mut f = fs.create(&tmp).map_err(io)?;
        f.append(text.as_bytes()).map_err(io)?;
        f.flush().map_err(io)?;
    }
    fs.rename(&tmp, path).map_err(io)?;
    if !sync {
        return Ok(());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    fs.sync_dir(dir.unwrap_or(Path::new("."))).map_err(io)
}

/// Why a file could not be read: the 1-based line and what is wrong with it.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub text: String,
    pub reason: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Unrecoverable error: corrupted cluster config file, line {} ({}): \"{}\"",
            self.line, self.reason, self.text
        )
    }
}

/// Reads a file's text (Redis's `clusterLoadConfig`): `Ok(None)` for an empty file (a new
/// node), the state otherwise. Ping and pong times are not kept (Redis sets them to now
/// when non-zero; here the bus sets them when it connects).
pub fn parse(text: &str) -> Result<Option<State>, ParseError> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut owner: Vec<Option<NodeId>> = vec![None; usize::from(SLOTS)];
    let mut migrating = Vec::new();
    let mut importing = Vec::new();
    let (mut current_epoch, mut last_vote_epoch) = (0u64, 0u64);
    let mut myself: Option<NodeId> = None;
    let mut any = false;
    for (i, line) in text.lines().enumerate() {
        let err = |reason: &str| ParseError {
            line: i + 1,
            text: line.chars().take(200).collect(),
            reason: reason.to_string(),
        };
        let argv: Vec<&str> = line.split_ascii_whitespace().collect();
        if argv.is_empty() {
            continue;
        }
        any = true;
        if argv[0].eq_ignore_ascii_case("vars") {
            for pair in argv[1..].chunks(2) {
                let [name, value] = pair else {
                    return Err(err("a variable without a value"));
                };
                let v: u64 = value.parse().map_err(|_| err("an epoch is not a number"))?;
                if name.eq_ignore_ascii_case("currentEpoch") {
                    current_epoch = v;
                } else if name.eq_ignore_ascii_case("lastVoteEpoch") {
                    last_vote_epoch = v;
                }
                // Other variables are skipped, as Redis skips them (with a warning).
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(err("fewer than eight fields"));
        }
        let id = node_id(argv[0])
            .ok_or_else(|| err("the node id is not 40 characters of a-z and 0-9"))?;
        if nodes.iter().any(|n| n.id == id) {
            return Err(err("a node listed twice"));
        }
        let mut n = Node::new(id, 0);
        parse_address(&mut n, argv[1]).ok_or_else(|| err("bad address ip:port@cport"))?;
        n.flags =
            crate::cluster::bus::node::parse_flags(argv[2]).map_err(|_| err("unknown flag"))?;
        if n.has(node_flag::MYSELF) {
            if myself.is_some() {
                return Err(err("a second node flagged myself"));
            }
            myself = Some(id);
            n.link_connected = true;
        }
        if argv[3] != "-" {
            n.master = Some(node_id(argv[3]).ok_or_else(|| err("bad master id"))?);
        }
        n.config_epoch = argv[6].parse().map_err(|_| err("bad config epoch"))?;
        for item in &argv[8..] {
            if let Some(open) = item.strip_prefix('[') {
                let open = open.strip_suffix(']').ok_or_else(|| err("bad open slot"))?;
                let (slot, dir, other) =
                    parse_open_slot(open).ok_or_else(|| err("bad open slot"))?;
                if dir == '>' {
                    migrating.push((slot, other));
                } else {
                    importing.push((slot, other));
                }
                continue;
            }
            let (a, b) = match item.split_once('-') {
                Some((a, b)) => (slot_num(a), slot_num(b)),
                None => (slot_num(item), slot_num(item)),
            };
            let (Some(a), Some(b)) = (a, b) else {
                return Err(err("bad slot or slot range"));
            };
            for s in a..=b {
                owner[usize::from(s)] = Some(id);
            }
        }
        nodes.push(n);
    }
    if !any {
        return Ok(None);
    }
    let Some(myself) = myself else {
        return Err(ParseError {
            line: text.lines().count(),
            text: String::new(),
            reason: "no node is flagged myself".to_string(),
        });
    };
    let mut state = State::new(myself);
    state.nodes.clear();
    for n in nodes {
        state.nodes.insert(n.id, n);
    }
    // Nodes named only as masters or open-slot peers are known by id (as Redis creates them).
    let named: Vec<NodeId> = state
        .nodes
        .values()
        .filter_map(|n| n.master)
        .chain(migrating.iter().chain(&importing).map(|(_, id)| *id))
        .collect();
    for id in named {
        state.nodes.entry(id).or_insert_with(|| Node::new(id, 0));
    }
    // Each replica line attaches the replica to its master (Redis's `clusterNodeAddSlave`
    // while loading), which marks the master a replica-migration target.
    let masters: Vec<NodeId> = state.nodes.values().filter_map(|n| n.master).collect();
    for m in masters {
        state.add_replica(&m);
    }
    state.owner = owner;
    state.migrating = migrating.into_iter().collect();
    state.importing = importing.into_iter().collect();
    state.current_epoch = current_epoch.max(state.max_epoch());
    state.last_vote_epoch = last_vote_epoch;
    Ok(Some(state))
}

/// A node id as Redis's `verifyClusterNodeId` checks it (40 characters of `a-z0-9`), the
/// rule the bus applies to the names it learns: every name in the table can be read back.
fn node_id(s: &str) -> Option<NodeId> {
    crate::cluster::bus::NodeName::parse(s.as_bytes())
        .ok()
        .map(|n| n.0)
}

fn slot_num(s: &str) -> Option<u16> {
    s.parse::<u16>().ok().filter(|&n| n < SLOTS)
}

/// `ip:port@cport[,hostname]` (an IPv6 address has colons: the port follows the last).
fn parse_address(n: &mut Node, field: &str) -> Option<()> {
    let (addr, hostname) = match field.split_once(',') {
        Some((a, h)) => (a, h),
        None => (field, ""),
    };
    let (ip_port, cport) = match addr.split_once('@') {
        Some((a, c)) => (a, Some(c.parse::<u16>().ok()?)),
        None => (addr, None),
    };
    let (ip, port) = ip_port.rsplit_once(':')?;
    n.ip = ip.to_string();
    n.port = port.parse().ok()?;
    n.cport = cport.unwrap_or_else(|| n.port.wrapping_add(10000));
    n.hostname = hostname.to_string();
    Some(())
}

/// `slot->-id` (migrating to) or `slot-<-id` (importing from), brackets removed.
fn parse_open_slot(s: &str) -> Option<(u16, char, NodeId)> {
    let (slot, rest) = s.split_once('-')?;
    let dir = rest.chars().next()?;
    if dir != '>' && dir != '<' {
        return None;
    }
    let other = rest.get(2..)?;
    Some((slot_num(slot)?, dir, node_id(other)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_line_makes_its_master_a_migration_target() {
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let text = format!(
            "{a} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             {b} 127.0.0.1:7001@17001 slave {a} 0 0 1 disconnected\n\
             {c} 127.0.0.1:7002@17002 master - 0 0 2 disconnected 101-200\n\
             vars currentEpoch 2 lastVoteEpoch 0\n"
        );
        let st = parse(&text).unwrap().unwrap();
        let flag = |id: &str| st.lookup(id.as_bytes()).unwrap().has(node_flag::MIGRATE_TO);
        assert!(flag(&a), "a master with a replica");
        assert!(
            !flag(&b) && !flag(&c),
            "a replica, a master that never had one"
        );
        // Not a printed flag: the file does not change.
        assert_eq!(render(&st), text);
    }

    #[test]
    fn render_parse_round_trip() {
        let a = [b'a'; 40];
        let b = [b'b'; 40];
        let mut s = State::new(a);
        s.me_mut().port = 7000;
        s.me_mut().cport = 17000;
        s.me_mut().config_epoch = 3;
        s.current_epoch = 5;
        s.last_vote_epoch = 4;
        for slot in 0..100 {
            s.owner[slot] = Some(a);
        }
        let mut other = Node::new(b, node_flag::MASTER);
        other.ip = "127.0.0.1".into();
        other.port = 7001;
        other.cport = 17001;
        s.nodes.insert(b, other);
        s.owner[200] = Some(b);
        s.migrating.insert(5, b);
        s.importing.insert(200, b);
        let text = render(&s);
        let back = parse(&text).unwrap().unwrap();
        assert_eq!(render(&back), text);
        assert_eq!(back.current_epoch, 5);
        assert_eq!(back.last_vote_epoch, 4);
        assert_eq!(back.myself, a);
        assert!(back.is_mine(99) && !back.is_mine(100));
        assert_eq!(back.importing.get(&200), Some(&b));
    }

    #[test]
    fn empty_and_malformed_files() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("\n\n").unwrap().is_none());
        let e = parse("abc :1@2 myself,master - 0 0 0 connected\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(
            e.to_string().contains("not 40 characters of a-z and 0-9"),
            "{e}"
        );
        let id = "c".repeat(40);
        let e = parse(&format!("vars currentEpoch 0\n{id} :1@2 myself,master -\n")).unwrap_err();
        assert_eq!((e.line, e.reason.as_str()), (2, "fewer than eight fields"));
        let e = parse(&format!("{id} :1@2 myself,bogus - 0 0 0 connected\n")).unwrap_err();
        assert_eq!(e.reason, "unknown flag");
        let e = parse(&format!("{id} :1@2 myself - 0 0 0 connected 1-99999\n")).unwrap_err();
        assert_eq!(e.reason, "bad slot or slot range");
        let e = parse(&format!("{id} :1@2 master - 0 0 0 connected\n")).unwrap_err();
        assert_eq!(e.reason, "no node is flagged myself");
        // Redis 7.0.15's own file of a fresh node.
        let fresh = format!(
            "{id} :0@0 myself,master - 0 0 0 connected\nvars currentEpoch 0 lastVoteEpoch 0\n"
        );
        let s = parse(&fresh).unwrap().unwrap();
        assert_eq!(render(&s), fresh);
    }
}
