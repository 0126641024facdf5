//! The cluster's view of itself (Redis's `clusterState`): the node table, who owns each of
//! the 16384 hash slots, the slots this node is migrating or importing, and the epochs.
//! A plain value with no I/O and no locks: `cluster/mod.rs` keeps it behind its lock and
//! saves it (`nodes_conf.rs`) after every change; commands (`cmd/cluster.rs`) and the
//! routing check (`route.rs`) read it; the cluster bus will drive the same fields (a
//! node's address, flags, master, ping/pong times, epoch, link state) when it is built.
//!
//! Layer: cluster (a building block below commands).

use crate::keys::SLOTS;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A node's name: 40 lower-case hex characters (Redis's `CLUSTER_NAMELEN`).
pub type NodeId = [u8; 40];

/// Node flags (Redis's `CLUSTER_NODE_*`): the bus's bits, which CLUSTER NODES and
/// nodes.conf name (`bus/node.rs`).
pub mod node_flag {
    pub use crate::cluster::bus::node::{
        FAIL, HANDSHAKE, MASTER, MEET, MIGRATE_TO, MYSELF, NOADDR, NOFAILOVER, PFAIL, SLAVE,
    };
}

/// One node of the cluster as this node knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    /// The address clients and peers reach it at; empty until known (Redis leaves its own
    /// empty until a peer tells it, or `cluster-announce-ip` names it).
    pub ip: String,
    pub port: u16,
    /// The cluster bus port.
    pub cport: u16,
    /// `cluster-announce-hostname` (its own) or what its pings carry; may be empty.
    pub hostname: String,
    pub flags: u16,
    /// The master of a replica.
    pub master: Option<NodeId>,
    /// Unix milliseconds of the last ping sent without a pong yet (0: none).
    pub ping_sent_ms: u64,
    /// Unix milliseconds of the last pong received (0: none).
    pub pong_received_ms: u64,
    pub config_epoch: u64,
    /// The bus has a connection to it (always true of this node itself).
    pub link_connected: bool,
    /// The bus's bookkeeping of this node, not saved (`cluster/gossip.rs`).
    pub bus: NodeBus,
}

/// What the bus alone keeps about a node (Redis's `clusterNode` fields that nodes.conf
/// does not hold): times in Unix milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeBus {
    /// When the node entered the table (a handshake expires after the node timeout).
    pub ctime_ms: u64,
    /// When anything was last received from it.
    pub data_received_ms: u64,
    /// When it was flagged FAIL.
    pub fail_time_ms: u64,
    /// Masters that reported it failing (in gossip), and when each last did.
    pub fail_reports: Vec<(NodeId, u64)>,
    /// The replication offset its last header carried.
    pub repl_offset: u64,
    /// The TLS port it announced (kept to gossip it on).
    pub pport: u16,
    /// When this node's outbound link to it connected.
    pub link_ctime_ms: u64,
    /// When this node last voted for one of its replicas (it is a master).
    pub voted_time_ms: u64,
    /// Since when it has been an orphaned master, as replica migration last saw it (0:
    /// not orphaned; `replica_migration.rs`).
    pub orphaned_ms: u64,
}

impl Node {
    pub fn new(id: NodeId, flags: u16) -> Node {
        Node {
            id,
            ip: String::new(),
            port: 0,
            cport: 0,
            hostname: String::new(),
            flags,
            master: None,
            ping_sent_ms: 0,
            pong_received_ms: 0,
            config_epoch: 0,
            link_connected: false,
            bus: NodeBus::default(),
        }
    }

    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    pub fn id_str(&self) -> &str {
        id_str(&self.id)
    }

    /// Redis's `representClusterNodeFlags`: the flags by name, comma-separated.
    pub fn flags_text(&self) -> String {
        crate::cluster::bus::node::flags_to_string(self.flags)
    }
}

/// A node id as text (node ids are ASCII hex by construction and by validation).
pub fn id_str(id: &NodeId) -> &str {
    std::str::from_utf8(id).unwrap_or("")
}

/// `s` as a node id, if it is 40 bytes long (Redis looks nodes up by their 40-byte name;
/// any other length names no node).
pub fn parse_id(s: &[u8]) -> Option<NodeId> {
    s.try_into().ok()
}

/// A fresh random node id (Redis's `getRandomHexChars`): the server's generator mixed with
/// the clock and the process id, so two nodes started together on one machine differ.
pub fn random_id() -> NodeId {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut id = [b'0'; 40];
    let mut text = String::with_capacity(48);
    for i in 0..3u64 {
        let seed = [
            crate::random::next_u64().to_le_bytes(),
            (nanos as u64 ^ i).to_le_bytes(),
            u64::from(std::process::id()).to_le_bytes(),
        ]
        .concat();
        let h = xxhash_rust::xxh3::xxh3_128(&seed);
        let _ = write!(text, "{h:032x}");
    }
    id.copy_from_slice(&text.as_bytes()[..40]);
    id
}

/// The cluster state (Redis's `clusterState`, less the bus's and failover's fields).
#[derive(Clone, Debug)]
pub struct State {
    pub myself: NodeId,
    pub nodes: BTreeMap<NodeId, Node>,
    /// The owner of each slot.
    pub owner: Vec<Option<NodeId>>,
    /// Slots this node is giving to another (SETSLOT MIGRATING).
    pub migrating: BTreeMap<u16, NodeId>,
    /// Slots this node is taking from another (SETSLOT IMPORTING).
    pub importing: BTreeMap<u16, NodeId>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// A replica's election in progress (not saved; `failover.rs`).
    pub election: Election,
    /// A manual failover in progress (not saved; `failover.rs`).
    pub manual: ManualFailover,
    /// Nodes CLUSTER FORGET removed, and until when (Unix ms) gossip may not add them
    /// back (Redis's `nodes_black_list`; not saved).
    pub forgotten: BTreeMap<NodeId, u64>,
}

/// How long a forgotten node is not learned back from gossip (Redis's
/// `CLUSTER_BLACKLIST_TTL`).
pub const FORGET_TTL_MS: u64 = 60_000;

/// A manual failover (CLUSTER FAILOVER without an option; Redis's `mf_*` fields), on the
/// replica that asked and on its master; times in Unix ms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManualFailover {
    /// When it is abandoned (0: none in progress).
    pub end_ms: u64,
    /// Replica: MFSTART is still to be sent to the master (by the next cron step).
    pub start_pending: bool,
    /// Replica: the master's replication offset once it paused its writers.
    pub master_offset: Option<u64>,
    /// Replica: caught up with that offset; the election runs.
    pub can_start: bool,
    /// Master: the replica it paused its writers for.
    pub replica: Option<NodeId>,
}

/// A replica's failover election (Redis's `failover_auth_*` fields); times in Unix ms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Election {
    /// When the vote is to be asked for (0: no election scheduled).
    pub auth_time_ms: u64,
    /// Votes received for `epoch`.
    pub count: usize,
    /// The vote request was broadcast.
    pub sent: bool,
    /// This replica's rank among its master's replicas (0: the most up to date).
    pub rank: usize,
    /// The epoch the election runs in.
    pub epoch: u64,
    /// CLUSTER FAILOVER FORCE: until this time (Unix ms), an election runs without the
    /// master failing and asks the masters to vote anyway (0: none).
    pub forced_until_ms: u64,
}

impl State {
    /// A new cluster of one node: this one, a master with no slots, epoch 0.
    pub fn new(myself: NodeId) -> State {
        let mut nodes = BTreeMap::new();
        let mut me = Node::new(myself, node_flag::MYSELF | node_flag::MASTER);
        me.link_connected = true;
        nodes.insert(myself, me);
        State {
            myself,
            nodes,
            owner: vec![None; usize::from(SLOTS)],
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            election: Election::default(),
            manual: ManualFailover::default(),
            forgotten: BTreeMap::new(),
        }
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    pub fn me_mut(&mut self) -> &mut Node {
        self.nodes
            .get_mut(&self.myself)
            .expect("the node table always holds this node")
    }

    /// The node called `name`, if known (any length other than 40 names none).
    pub fn lookup(&self, name: &[u8]) -> Option<&Node> {
        parse_id(name).and_then(|id| self.nodes.get(&id))
    }

    #[cfg(test)]
    pub fn is_mine(&self, slot: u16) -> bool {
        self.owner[usize::from(slot)] == Some(self.myself)
    }

    /// The slots `id` owns, as inclusive ranges in order.
    pub fn ranges_of(&self, id: &NodeId) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (s, o) in self.owner.iter().enumerate() {
            if o.as_ref() == Some(id) {
                let s = s as u16;
                match out.last_mut() {
                    Some((_, end)) if *end + 1 == s => *end = s,
                    _ => out.push((s, s)),
                }
            }
        }
        out
    }

    pub fn slot_count(&self, id: &NodeId) -> usize {
        self.owner.iter().filter(|o| o.as_ref() == Some(id)).count()
    }

    pub fn assigned(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }

    /// Redis's `clusterUpdateState` without the bus: `ok` when every slot is served (or
    /// `cluster-require-full-coverage` is off) and no served slot's owner is failing, and a
    /// majority of the masters serving slots is reachable. Computed on demand, without
    /// Redis's delays (`health.rs` adds them to the state a node reports).
    pub fn is_ok(&self, require_full_coverage: bool) -> bool {
        let (full, partial, _) = self.evaluate();
        if require_full_coverage {
            full
        } else {
            partial
        }
    }

    /// [`State::is_ok`] with and without full coverage, and whether only a minority of the
    /// masters serving slots is reachable (some serving): one walk of the slot table for the
    /// three.
    pub fn evaluate(&self) -> (bool, bool, bool) {
        let (owners, uncovered) = self.slot_owners();
        let failing = |id: &NodeId| self.nodes.get(id).is_none_or(|n| n.has(node_flag::FAIL));
        let covered = !uncovered && !owners.iter().any(failing);
        let serving = self.masters_among(&owners);
        let reachable = serving
            .clone()
            .filter(|n| !n.has(node_flag::FAIL | node_flag::PFAIL))
            .count();
        let size = serving.count();
        let majority = reachable > size / 2;
        // Redis also counts a node among the minority while no master serves a slot (a new
        // cluster), and so holds a new cluster's masters `fail` for the rejoin delay after
        // their first ADDSLOTS. A node that served no slot has no configuration to be stale
        // about: Strata does not count it (`health.rs`).
        (majority && covered, majority, size > 0 && !majority)
    }

    /// The distinct owners of slots, and whether some slot has none. One walk of the
    /// slot table, comparing each slot's owner with the previous one's: slots come in long
    /// runs of one owner, and this runs on every change of the cluster's state (a
    /// resharding's SETSLOTs among them), so it must not sort 16,384 ids.
    fn slot_owners(&self) -> (Vec<NodeId>, bool) {
        let mut owners: Vec<NodeId> = Vec::new();
        let mut uncovered = false;
        let mut last: Option<&NodeId> = None;
        for o in &self.owner {
            match o {
                None => uncovered = true,
                Some(id) if last == Some(id) => {}
                Some(id) => {
                    last = Some(id);
                    if !owners.contains(id) {
                        owners.push(*id);
                    }
                }
            }
        }
        (owners, uncovered)
    }

    /// The masters among `owners`.
    fn masters_among<'a>(
        &'a self,
        owners: &'a [NodeId],
    ) -> impl Iterator<Item = &'a Node> + Clone + 'a {
        self.nodes
            .values()
            .filter(move |n| n.has(node_flag::MASTER) && owners.contains(&n.id))
    }

    /// `cluster_size`: masters serving at least one slot.
    pub fn size(&self) -> usize {
        let (owners, _) = self.slot_owners();
        self.masters_among(&owners).count()
    }

    /// The greatest config epoch of any node, or the current epoch if greater.
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// The replicas of `id`.
    pub fn replicas_of(&self, id: &NodeId) -> Vec<&Node> {
        self.nodes
            .values()
            .filter(|n| n.master.as_ref() == Some(id))
            .collect()
    }

    /// Redis's `clusterNodeAddSlave` on the flags: `master` has had a replica, which makes
    /// it a target of replica migration should it lose its replicas (MIGRATE_TO).
    pub fn add_replica(&mut self, master: &NodeId) {
        if let Some(m) = self.nodes.get_mut(master) {
            m.flags |= node_flag::MIGRATE_TO;
        }
    }

    /// Redis's `clusterSetMaster` on the state: this node becomes a replica of `master`
    /// (its open slots closed; no longer a migration target itself).
    pub fn become_replica_of(&mut self, master: NodeId) {
        let n = self.me_mut();
        n.flags = (n.flags & !(node_flag::MASTER | node_flag::MIGRATE_TO)) | node_flag::SLAVE;
        n.master = Some(master);
        self.migrating.clear();
        self.importing.clear();
        self.add_replica(&master);
    }

    /// Redis's `clusterDelNode` of a node other than this one: its slots become
    /// unassigned, open slots toward it are closed, its replicas lose their master.
    pub fn forget(&mut self, id: &NodeId) {
        for o in self.owner.iter_mut() {
            if o.as_ref() == Some(id) {
                *o = None;
            }
        }
        self.migrating.retain(|_, n| n != id);
        self.importing.retain(|_, n| n != id);
        for n in self.nodes.values_mut() {
            if n.master.as_ref() == Some(id) {
                n.master = None;
            }
        }
        self.nodes.remove(id);
    }

    /// One CLUSTER NODES line for `n` (Redis's `clusterGenNodeDescription`), without the
    /// newline: open slots are listed on this node's own line.
    pub fn describe(&self, n: &Node) -> String {
        self.describe_with(n, &self.ranges_of(&n.id))
    }

    /// Every node's slot ranges, from one walk over the slots that compares each slot's
    /// owner with the previous one: [`State::ranges_of`] walks all 16384 slots once per
    /// node, comparing 40-byte ids, and nodes.conf is rendered on every SETSLOT of a
    /// reshard (three per slot moved), where that was the target's largest CPU item.
    pub fn all_ranges(&self) -> BTreeMap<NodeId, Vec<(u16, u16)>> {
        let mut out: BTreeMap<NodeId, Vec<(u16, u16)>> = BTreeMap::new();
        let mut start = 0;
        while start < self.owner.len() {
            let owner = &self.owner[start];
            let run = self.owner[start..]
                .iter()
                .take_while(|o| *o == owner)
                .count();
            let end = start + run - 1;
            if let Some(id) = owner {
                out.entry(*id).or_default().push((start as u16, end as u16));
            }
            start = end + 1;
        }
        out
    }

    fn describe_with(&self, n: &Node, ranges: &[(u16, u16)]) -> String {
        let mut s = format!("{} {}:{}@{}", n.id_str(), n.ip, n.port, n.cport);
        if !n.hostname.is_empty() {
            let _ = write!(s, ",{}", n.hostname);
        }
        let master = n.master.as_ref().map_or("-", id_str);
        let _ = write!(
            s,
            " {} {master} {} {} {} {}",
            n.flags_text(),
            n.ping_sent_ms,
            n.pong_received_ms,
            n.config_epoch,
            if n.link_connected || n.has(node_flag::MYSELF) {
                "connected"
            } else {
                "disconnected"
            }
        );
        for &(a, b) in ranges {
            if a == b {
                let _ = write!(s, " {a}");
            } else {
                let _ = write!(s, " {a}-{b}");
            }
        }
        if n.has(node_flag::MYSELF) {
            for (slot, to) in &self.migrating {
                let _ = write!(s, " [{slot}->-{}]", id_str(to));
            }
            for (slot, from) in &self.importing {
                let _ = write!(s, " [{slot}-<-{}]", id_str(from));
            }
        }
        s
    }

    /// Redis's `clusterGenNodesDescription`: one line per node, each ending in a newline,
    /// leaving out the nodes with any of the `skip` flags; this node first (Redis's order
    /// is its hash table's; clients and tools do not depend on it).
    pub fn describe_all(&self, skip: u16) -> String {
        let mut out = String::new();
        let me = self.me();
        let rest = self.nodes.values().filter(|n| n.id != self.myself);
        let ranges = self.all_ranges();
        for n in std::iter::once(me).chain(rest) {
            if n.flags & skip != 0 {
                continue;
            }
            let ranges = ranges.get(&n.id).map_or(&[][..], Vec::as_slice);
            out += &self.describe_with(n, ranges);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: u8) -> NodeId {
        [c; 40]
    }

    #[test]
    fn ranges_state_and_descriptions() {
        let mut s = State::new(id(b'a'));
        assert!(!s.is_ok(true));
        assert!(
            !s.is_ok(false),
            "no master serves a slot: a minority of none"
        );
        for slot in (0..=5).chain(7..=7) {
            s.owner[slot] = Some(id(b'a'));
        }
        assert_eq!(s.ranges_of(&id(b'a')), vec![(0, 5), (7, 7)]);
        assert_eq!(s.assigned(), 7);
        assert!(!s.is_ok(true));
        assert!(s.is_ok(false));
        s.me_mut().port = 7000;
        s.me_mut().cport = 17000;
        s.migrating.insert(3, id(b'b'));
        let mut other = Node::new(id(b'b'), node_flag::MASTER);
        other.ip = "10.0.0.2".into();
        other.hostname = "h2".into();
        s.nodes.insert(other.id, other);
        s.owner[8] = Some(id(b'b'));
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        assert_eq!(
            s.describe_all(0),
            format!(
                "{a} :7000@17000 myself,master - 0 0 0 connected 0-5 7 [3->-{b}]\n\
                 {b} 10.0.0.2:0@0,h2 master - 0 0 0 disconnected 8\n"
            )
        );
        assert_eq!(s.size(), 2);
        s.forget(&id(b'b'));
        assert!(s.migrating.is_empty() && s.owner[8].is_none());
        assert_eq!(s.nodes.len(), 1);
    }

    proptest::proptest! {
        /// The one-walk ranges nodes.conf is rendered from are each node's own
        /// `ranges_of`, for owners in runs and alone, the first and last slots included.
        #[test]
        fn all_ranges_is_ranges_of_every_node(
            runs in proptest::collection::vec((0u8..4, 1usize..3000), 1..40),
        ) {
            let mut s = State::new(id(b'a'));
            let mut slot = 0;
            for (who, len) in runs {
                for _ in 0..len {
                    if slot < usize::from(SLOTS) {
                        s.owner[slot] = (who > 0).then(|| id(b'a' + who));
                        slot += 1;
                    }
                }
            }
            let all = s.all_ranges();
            for who in 1..4u8 {
                let mine = s.ranges_of(&id(b'a' + who));
                proptest::prop_assert_eq!(all.get(&id(b'a' + who)).cloned().unwrap_or_default(), mine);
            }
            proptest::prop_assert!(!all.contains_key(&id(b'a')));
        }
    }

    #[test]
    fn random_ids_are_hex_and_differ() {
        let (x, y) = (random_id(), random_id());
        assert_ne!(x, y);
        assert!(x.iter().all(u8::is_ascii_hexdigit));
        assert!(parse_id(b"abc").is_none());
    }
}
