//! Cluster commands (Redis's `cluster.c`): CLUSTER and its subcommands, ASKING, READONLY,
//! READWRITE, and the routing check the dispatcher runs before every keyed command in
//! cluster mode ([`redirect`], over `cluster/route.rs`). The state is `cluster/`'s; every
//! change goes through `Cluster::update`, which writes nodes.conf before the reply.
//! Outside cluster mode every one of them answers Redis's "cluster support disabled".
//! The topology views (INFO, NODES, SLOTS, SHARDS) are in `cluster_views.rs`.
//!
//! Layer: commands (above services; below execution).

use super::cluster_views;
use super::table::traits::IN_TASK;
use super::{cmd, cmd_with, table, Args, CmdError, CmdResult, Ctx, Entry};
use crate::cluster::route::{self, Request};
use crate::cluster::slots::{node_flag, random_id, Node, NodeId, State};
use crate::cluster::Cluster;
use crate::keys::{hash_slot, SLOTS};
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd("asking", asking),
    cmd("readonly", readonly),
    cmd("readwrite", readwrite),
    cmd("cluster|addslots", addslots),
    cmd("cluster|addslotsrange", addslotsrange),
    cmd("cluster|bumpepoch", bumpepoch),
    cmd("cluster|count-failure-reports", count_failure_reports),
    cmd_with("cluster|countkeysinslot", countkeysinslot, IN_TASK),
    cmd("cluster|delslots", delslots),
    cmd("cluster|delslotsrange", delslotsrange),
    cmd("cluster|failover", failover),
    cmd("cluster|flushslots", flushslots),
    cmd("cluster|forget", forget),
    cmd_with("cluster|getkeysinslot", getkeysinslot, IN_TASK),
    cmd("cluster|help", help),
    cmd("cluster|info", cluster_views::info),
    cmd("cluster|keyslot", keyslot),
    cmd("cluster|links", cluster_views::links),
    cmd("cluster|meet", meet),
    cmd("cluster|myid", myid),
    cmd("cluster|nodes", cluster_views::nodes),
    cmd("cluster|replicas", replicas),
    cmd("cluster|replicate", replicate),
    cmd("cluster|reset", reset),
    cmd("cluster|saveconfig", saveconfig),
    cmd("cluster|set-config-epoch", set_config_epoch),
    cmd("cluster|setslot", setslot),
    cmd("cluster|shards", cluster_views::shards),
    cmd("cluster|slaves", replicas),
    cmd("cluster|slots", cluster_views::slots),
];

pub const ERR_DISABLED: &str = "ERR This instance has cluster support disabled";

/// The cluster state, or Redis's error outside cluster mode.
pub fn cluster<'a>(ctx: &Ctx<'a>) -> Result<&'a Cluster, CmdError> {
    ctx.shared
        .cluster
        .as_ref()
        .ok_or_else(|| CmdError::reply(ERR_DISABLED))
}

/// Runs a change of the state; its error text becomes the reply (`ERR ...`).
fn update<R>(
    ctx: &Ctx<'_>,
    f: impl FnOnce(&mut State) -> Result<R, String>,
) -> Result<R, CmdError> {
    cluster(ctx)?.update(f).map_err(|e| {
        CmdError::reply(if e.starts_with("ERR ") {
            e
        } else {
            format!("ERR {e}")
        })
    })
}

/// The dispatcher's routing check in cluster mode (Redis's `processCommand` calling
/// `getNodeByQuery`): the redirection or error for a request this node does not serve.
/// Not for the replication link's writes, nor for commands a script or an EXEC runs (the
/// script and the EXEC were checked as a whole), nor for commands without keys but EXEC
/// and the sharded pub/sub commands (routed by their channels, `table::routed`).
pub fn redirect(ctx: &Ctx<'_>, spec: &'static table::Spec, argv: &[Bytes]) -> Option<String> {
    let cluster = ctx.shared.cluster.as_ref()?;
    if ctx.conn.master || ctx.conn.in_exec || ctx.conn.in_script {
        return None;
    }
    let is_exec = spec.name == "exec";
    let shard_pubsub = spec.names_channels();
    if !is_exec && !shard_pubsub && !spec.has_keys() {
        return None;
    }
    let mut keys: Vec<Bytes> = Vec::new();
    let mut write = spec.has(super::flag::WRITE);
    let mut migrate = spec.name == "migrate";
    let mut asking_cmd = spec.has(super::flag::ASKING);
    let mut add = |s: &'static table::Spec, argv: &[Bytes]| {
        if let Some(found) = table::routed(s, argv) {
            keys.extend(found.iter().map(|k| argv[k.pos].clone()));
        }
    };
    if is_exec {
        let queued = ctx.conn.multi.as_ref()?;
        for a in &queued.queued {
            if let Some(s) = super::lookup_argv(a) {
                write |= s.has(super::flag::WRITE);
                migrate &= s.name == "migrate";
                asking_cmd |= s.has(super::flag::ASKING);
                add(s, a);
            }
        }
    } else {
        add(spec, argv);
    }
    let down = down_settings(ctx.shared);
    let req = Request {
        write,
        asking: ctx.conn.asking || asking_cmd,
        readonly: ctx.conn.readonly,
        migrate,
        shard_pubsub,
        full_coverage: down.full_coverage,
        reads_when_down: down.reads,
        pubsub_when_down: down.pubsub,
        state_ok: Some(cluster.is_ok(down.full_coverage)),
    };
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let store = ctx.tx;
    let db = ctx.conn.db;
    let exists = |k: &[u8]| store.peek(db, k).ok().flatten().is_some();
    route::route(&cluster.read(), &req, &refs, exists)
        .err()
        .map(|r| r.message())
}

/// What a down cluster still serves: `cluster-require-full-coverage`,
/// `cluster-allow-reads-when-down`, `cluster-allow-pubsubshard-when-down`.
struct DownSettings {
    full_coverage: bool,
    reads: bool,
    pubsub: bool,
}

fn down_settings(shared: &crate::server::Shared) -> DownSettings {
    let c = shared.config.read();
    let yes = |n: &str| c.tuning.get(n).is_some_and(|v| v == "yes");
    DownSettings {
        full_coverage: yes("cluster-require-full-coverage"),
        reads: yes("cluster-allow-reads-when-down"),
        pubsub: yes("cluster-allow-pubsubshard-when-down"),
    }
}

/// A command a script calls, in cluster mode (Redis 7.0's `scriptVerifyClusterState`):
/// refused if this node would not serve it to the script's client (a key of a slot served
/// elsewhere or moving, keys of two slots, the cluster down), and, unless the script has
/// the `allow-cross-slot-keys` flag, if its keys' slot is not the script's: the slot of
/// its declared keys, or else of the first call that named keys. `slot` carries the
/// script's slot from call to call. Not for the replication link's scripts.
pub fn script_access(
    shared: &crate::server::Shared,
    conn: &super::ConnState,
    tx: &crate::store::Tx<'_>,
    spec: &'static table::Spec,
    argv: &[Bytes],
    slot: &mut Option<u16>,
    cross_slot_ok: bool,
) -> Result<(), String> {
    let Some(cluster) = shared.cluster.as_ref() else {
        return Ok(());
    };
    if conn.master {
        return Ok(());
    }
    // SPUBLISH's channel counts as a key here too: Redis checks it with getNodeByQuery.
    let keys: Vec<&[u8]> = match table::routed(spec, argv) {
        Some(found) => found.iter().map(|k| &argv[k.pos][..]).collect(),
        None => Vec::new(),
    };
    let down = down_settings(shared);
    let req = Request {
        write: spec.has(super::flag::WRITE),
        asking: conn.asking,
        readonly: conn.readonly,
        migrate: spec.name == "migrate",
        shard_pubsub: spec.names_channels(),
        full_coverage: down.full_coverage,
        reads_when_down: down.reads,
        pubsub_when_down: down.pubsub,
        state_ok: Some(cluster.is_ok(down.full_coverage)),
    };
    let db = conn.db;
    let exists = |k: &[u8]| tx.peek(db, k).ok().flatten().is_some();
    let here = route::route(&cluster.read(), &req, &keys, exists).map_err(|r| match r {
        route::Redirect::DownReadOnly => "ERR Script attempted to execute a write command \
                                          while the cluster is down and readonly"
            .to_string(),
        route::Redirect::Down => {
            "ERR Script attempted to execute a command while the cluster is down".to_string()
        }
        _ => "ERR Script attempted to access a non local key in a cluster node".to_string(),
    })?;
    match (here, *slot) {
        (Some(s), None) if !cross_slot_ok => *slot = Some(s),
        (Some(s), Some(mine)) if !cross_slot_ok && s != mine => {
            return Err(
                "ERR Script attempted to access keys that do not hash to the same slot".into(),
            );
        }
        _ => {}
    }
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    ctx.conn.asking = true;
    ctx.reply.ok();
    Ok(())
}

fn readonly(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    ctx.conn.readonly = true;
    ctx.reply.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    ctx.conn.readonly = false;
    ctx.reply.ok();
    Ok(())
}

/// Redis's `getSlotOrReply`.
fn slot_arg(a: &[u8]) -> Result<u16, CmdError> {
    std::str::from_utf8(a)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| (0..i64::from(SLOTS)).contains(n))
        .map(|n| n as u16)
        .ok_or_else(|| CmdError::reply("ERR Invalid or out of range slot"))
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(args: &Args) -> CmdError {
    let sub = args
        .sent(1)
        .map(|s| super::cstr(s, 128))
        .unwrap_or_default();
    CmdError::reply(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
        String::from_utf8_lossy(sub)
    ))
}

fn unknown_node(name: &[u8]) -> String {
    format!("Unknown node {}", String::from_utf8_lossy(name))
}

/// The slots of ADDSLOTS/DELSLOTS (single slots) or their RANGE forms (pairs), each once.
fn slots_of(args: &mut Args, ranges: bool) -> Result<Vec<u16>, CmdError> {
    let rest = args.rest().to_vec();
    if ranges && !rest.len().is_multiple_of(2) {
        let sub =
            String::from_utf8_lossy(args.sent(1).map_or(&b""[..], |s| &s[..])).to_ascii_lowercase();
        return Err(CmdError::reply(format!(
            "ERR wrong number of arguments for 'cluster|{sub}' command"
        )));
    }
    let mut out = Vec::new();
    if ranges {
        for pair in rest.chunks(2) {
            let (a, b) = (slot_arg(&pair[0])?, slot_arg(&pair[1])?);
            if a > b {
                return Err(CmdError::reply(format!(
                    "ERR start slot number {a} is greater than end slot number {b}"
                )));
            }
            out.extend(a..=b);
        }
    } else {
        for a in &rest {
            out.push(slot_arg(a)?);
        }
    }
    Ok(out)
}

/// ADDSLOTS and DELSLOTS and their RANGE forms (Redis's `clusterUpdateSlots` checks: every
/// slot valid, free (or assigned), and named once, before any changes).
fn change_slots(ctx: &mut Ctx<'_>, args: &mut Args, ranges: bool, add: bool) -> CmdResult {
    cluster(ctx)?;
    let slots = slots_of(args, ranges)?;
    update(ctx, |st| {
        let mut seen = vec![false; usize::from(SLOTS)];
        for &s in &slots {
            let owned = st.owner[usize::from(s)].is_some();
            if add && owned {
                return Err(format!("Slot {s} is already busy"));
            }
            if !add && !owned {
                return Err(format!("Slot {s} is already unassigned"));
            }
            if std::mem::replace(&mut seen[usize::from(s)], true) {
                return Err(format!("Slot {s} specified multiple times"));
            }
        }
        let me = st.myself;
        for &s in &slots {
            if add {
                st.importing.remove(&s);
                st.owner[usize::from(s)] = Some(me);
            } else {
                st.owner[usize::from(s)] = None;
            }
        }
        Ok(())
    })?;
    ctx.reply.ok();
    Ok(())
}

fn addslots(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    change_slots(ctx, args, false, true)
}

fn addslotsrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    change_slots(ctx, args, true, true)
}

fn delslots(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    change_slots(ctx, args, false, false)
}

fn delslotsrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    change_slots(ctx, args, true, false)
}

/// Whether the (one) database holds any key, expired or not (Redis's `dictSize != 0`).
fn db_has_keys(ctx: &Ctx<'_>) -> Result<bool, CmdError> {
    let mut any = false;
    ctx.tx.scan_from(ctx.conn.db, 0, b"", |_, _, _| {
        any = true;
        false
    })?;
    Ok(any)
}

fn flushslots(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    if db_has_keys(ctx)? {
        return Err(CmdError::reply(
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
        ));
    }
    update(ctx, |st| {
        let me = st.myself;
        for o in st.owner.iter_mut() {
            if *o == Some(me) {
                *o = None;
            }
        }
        Ok(())
    })?;
    ctx.reply.ok();
    Ok(())
}

/// The live keys of `slot`, up to `max`, by a range scan of the slot's metadata records
/// (a slot is a contiguous key range of one shard: `docs/format/redis-keys.md`). A slot
/// this node is migrating is scanned from its hint (`cluster/scan_hint.rs`): the keys
/// MIGRATE already moved are not stepped over again; if that finds fewer than `max` keys,
/// the keys below the hint are scanned too, so the count is always Redis's.
fn keys_in_slot(ctx: &Ctx<'_>, slot: u16, max: usize) -> Result<Vec<Vec<u8>>, CmdError> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let db = ctx.conn.db;
    let Some(c) = ctx.shared.cluster.as_ref() else {
        return scan_slot(ctx, slot, b"", None, max);
    };
    let migrating = c.read().migrating.contains_key(&slot);
    if !migrating {
        c.scan_hints.forget(db, slot);
        return scan_slot(ctx, slot, b"", None, max);
    }
    let hint = c.scan_hints.start(db, slot);
    let mut out = scan_slot(ctx, slot, &hint, None, max)?;
    if out.len() < max && !hint.is_empty() {
        let mut below = scan_slot(ctx, slot, b"", Some(&hint), max - out.len())?;
        below.append(&mut out);
        out = below;
    }
    c.scan_hints
        .record(db, slot, out.first().map(|k| k.as_slice()));
    Ok(out)
}

/// Up to `max` live keys of `slot` from `from` on, below `below` if given, in key order.
fn scan_slot(
    ctx: &Ctx<'_>,
    slot: u16,
    from: &[u8],
    below: Option<&[u8]>,
    max: usize,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut out = Vec::new();
    ctx.tx.scan_from(ctx.conn.db, slot, from, |s, k, m| {
        if s != slot || below.is_some_and(|b| k >= b) {
            return false;
        }
        if m.is_some() {
            out.push(k.to_vec());
        }
        out.len() < max
    })?;
    Ok(out)
}

/// Live keys of `slot` (counted by the same scan, without keeping them).
pub fn count_keys_in_slot(ctx: &Ctx<'_>, slot: u16) -> Result<usize, CmdError> {
    let mut n = 0;
    ctx.tx.scan_from(ctx.conn.db, slot, b"", |s, _, m| {
        if s != slot {
            return false;
        }
        n += usize::from(m.is_some());
        true
    })?;
    Ok(n)
}

fn countkeysinslot(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let slot = args.next_i64()?;
    if !(0..i64::from(SLOTS)).contains(&slot) {
        return Err(CmdError::reply("ERR Invalid slot"));
    }
    let n = count_keys_in_slot(ctx, slot as u16)?;
    ctx.reply.int(n as i64);
    Ok(())
}

fn getkeysinslot(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let slot_arg = args.next_bytes()?;
    let max = args.next_i64()?;
    let slot = crate::protocol::parse::parse_i64(&slot_arg)
        .ok_or_else(|| CmdError::reply(super::args::ERR_NOT_INT))?;
    if max < 0 || !(0..i64::from(SLOTS)).contains(&slot) {
        return Err(CmdError::reply("ERR Invalid slot or number of keys"));
    }
    let keys = keys_in_slot(ctx, slot as u16, usize::try_from(max).unwrap_or(usize::MAX))?;
    ctx.reply.array(keys.len());
    for k in &keys {
        ctx.reply.bulk(k);
    }
    Ok(())
}

fn keyslot(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let key = args.next_bytes()?;
    ctx.reply.int(i64::from(hash_slot(&key)));
    Ok(())
}

fn myid(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let id = cluster(ctx)?.read().myself;
    ctx.reply.bulk(&id);
    Ok(())
}

/// A known node by name, or `Unknown node <name>`.
fn known(st: &State, name: &[u8]) -> Result<NodeId, String> {
    st.lookup(name)
        .map(|n| n.id)
        .ok_or_else(|| unknown_node(name))
}

fn forget(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    cluster(ctx)?;
    update(ctx, |st| {
        let id = known(st, &name)?;
        if id == st.myself {
            return Err("I tried hard but I can't forget myself...".into());
        }
        if st.me().has(node_flag::SLAVE) && st.me().master == Some(id) {
            return Err("Can't forget my master!".into());
        }
        // Gossip from nodes that still know it does not add it back for a minute.
        let now = crate::cluster::link::now_ms();
        st.forgotten.retain(|_, until| *until > now);
        st.forgotten
            .insert(id, now + crate::cluster::slots::FORGET_TTL_MS);
        st.forget(&id);
        Ok(())
    })?;
    ctx.reply.ok();
    Ok(())
}

fn count_failure_reports(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    let c = cluster(ctx)?;
    let id = known(&c.read(), &name).map_err(|e| CmdError::reply(format!("ERR {e}")))?;
    let timeout = ctx
        .shared
        .config
        .read()
        .tuning
        .get("cluster-node-timeout")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(15000);
    // Only the reports still valid (younger than twice the node timeout) count.
    let now = crate::cluster::link::now_ms();
    let n = c.read().nodes.get(&id).map_or(0, |n| {
        n.bus
            .fail_reports
            .iter()
            .filter(|(_, t)| now.saturating_sub(*t) <= timeout.saturating_mul(2))
            .count()
    });
    ctx.reply.int(n as i64);
    Ok(())
}

fn set_config_epoch(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let epoch = args.next_i64()?;
    update(ctx, |st| {
        if epoch < 0 {
            return Err(format!("Invalid config epoch specified: {epoch}"));
        }
        if st.nodes.len() > 1 {
            return Err(
                "The user can assign a config epoch only when the node does not know \
                        any other node."
                    .into(),
            );
        }
        if st.me().config_epoch != 0 {
            return Err("Node config epoch is already non-zero".into());
        }
        st.me_mut().config_epoch = epoch as u64;
        st.current_epoch = st.current_epoch.max(epoch as u64);
        Ok(())
    })?;
    ctx.reply.ok();
    Ok(())
}

/// Redis's `clusterBumpConfigEpochWithoutConsensus`: a new epoch unless this node's is
/// already the greatest (and not 0).
fn bump_epoch(st: &mut State) -> bool {
    let max = st.max_epoch();
    let mine = st.me().config_epoch;
    if mine == 0 || mine != max {
        st.current_epoch += 1;
        let e = st.current_epoch;
        st.me_mut().config_epoch = e;
        true
    } else {
        false
    }
}

fn bumpepoch(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let (bumped, epoch) = update(ctx, |st| Ok((bump_epoch(st), st.me().config_epoch)))?;
    ctx.reply.simple(&format!(
        "{} {epoch}",
        if bumped { "BUMPED" } else { "STILL" }
    ));
    Ok(())
}

fn saveconfig(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?.save_now().map_err(|e| CmdError::reply(e.0))?;
    ctx.reply.ok();
    Ok(())
}

fn replicas(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    let c = cluster(ctx)?;
    let lines = {
        let st = c.read();
        let n = st
            .lookup(&name)
            .ok_or_else(|| CmdError::reply(format!("ERR {}", unknown_node(&name))))?;
        if n.has(node_flag::SLAVE) {
            return Err(CmdError::reply("ERR The specified node is not a master"));
        }
        let lines: Vec<String> = st
            .replicas_of(&n.id)
            .iter()
            .map(|r| st.describe(r))
            .collect();
        lines
    };
    ctx.reply.array(lines.len());
    for l in &lines {
        ctx.reply.bulk(l.as_bytes());
    }
    Ok(())
}

/// CLUSTER REPLICATE node (Redis's `clusterSetMaster`): after Redis's checks, this node
/// becomes a replica of `node` (its open slots closed), saves that, and replicates from
/// the master's address through the replication link (`replica/`); the bus announces the
/// new role in its headers.
fn replicate(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    cluster(ctx)?;
    let has_keys = db_has_keys(ctx)?;
    let (host, port) = update(ctx, |st| {
        let id = known(st, &name)?;
        if id == st.myself {
            return Err("Can't replicate myself".into());
        }
        if st.nodes[&id].has(node_flag::SLAVE) {
            return Err("I can only replicate a master, not a replica.".into());
        }
        let me = st.myself;
        if st.me().has(node_flag::MASTER) && (st.slot_count(&me) != 0 || has_keys) {
            return Err(
                "To set a master the node must be empty and without assigned slots.".into(),
            );
        }
        let m = &st.nodes[&id];
        let target = (m.ip.clone(), m.port);
        st.become_replica_of(id);
        Ok(target)
    })?;
    follow(ctx, host, port)?;
    ctx.reply.ok();
    Ok(())
}

/// Replicates from `host:port` after this node became a replica in the cluster state.
fn follow(ctx: &Ctx<'_>, host: String, port: u16) -> Result<(), CmdError> {
    let Some(shared) = ctx.shared.me.upgrade() else {
        return Err(CmdError::reply("ERR the server is shutting down"));
    };
    // As REPLICAOF: it asks from its own stream's end (`Replication::follow`).
    ctx.shared.replication.follow(&shared, host, port);
    Ok(())
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica, with Redis's checks. TAKEOVER takes the
/// master's slots at once with a new epoch; FORCE runs an election now, votes asked even
/// though the master is not failing; without an option the master first holds its writers
/// until this replica has their every write (MFSTART, `cluster/failover.rs`).
fn failover(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let opt = args.next_keyword();
    match opt.as_deref() {
        None | Some("FORCE") | Some("TAKEOVER") => {}
        Some(_) => return Err(CmdError::reply(super::args::ERR_SYNTAX)),
    }
    args.finish()?;
    let c = cluster(ctx)?;
    {
        let st = c.read();
        let me = st.me();
        if me.has(node_flag::MASTER) {
            return Err(CmdError::reply(
                "ERR You should send CLUSTER FAILOVER to a replica",
            ));
        }
        let Some(m) = me.master.and_then(|m| st.nodes.get(&m)) else {
            return Err(CmdError::reply(
                "ERR I'm a replica but my master is unknown to me",
            ));
        };
        if opt.is_none() && (m.has(node_flag::FAIL) || !m.link_connected) {
            return Err(CmdError::reply(
                "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE",
            ));
        }
    }
    let now = crate::cluster::link::now_ms();
    match opt.as_deref() {
        Some("TAKEOVER") => {
            let env = crate::cluster::outgoing::Env {
                now_ms: now,
                node_timeout_ms: 0,
                announce_ip: String::new(),
                full_coverage: true,
                repl_offset: 0,
                migration_barrier: 1,
                allow_replica_migration: true,
                no_failover: false,
                validity_factor: 10,
                repl_ping_period_ms: 10_000,
                data_age_ms: 0,
            };
            update(ctx, |st| {
                crate::cluster::failover::takeover(st, &env);
                Ok(())
            })?;
            let r = &ctx.shared.replication;
            if r.is_replica() {
                r.promote(ctx.shared);
            }
        }
        Some(_) => update(ctx, |st| {
            st.manual = Default::default();
            crate::cluster::failover::force(st, now);
            Ok(())
        })?,
        None => update(ctx, |st| {
            crate::cluster::failover::manual_start(st, now);
            Ok(())
        })?,
    }
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER MEET ip port [cport]: validated as Redis's `clusterStartHandshake`, then the
/// node is recorded in handshake under a random name; the bus connects to it, sends a
/// MEET and learns its real name from the PONG (or drops it after the node timeout).
fn meet(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    if args.remaining() > 3 {
        return Err(subcommand_syntax(args));
    }
    let ip_arg = args.next_bytes()?;
    let port_arg = args.next_bytes()?;
    let port = crate::protocol::parse::parse_i64(&port_arg).ok_or_else(|| {
        CmdError::reply(format!(
            "ERR Invalid TCP base port specified: {}",
            String::from_utf8_lossy(&port_arg)
        ))
    })?;
    let cport = match args.rest().first() {
        Some(c) => crate::protocol::parse::parse_i64(c).ok_or_else(|| {
            CmdError::reply(format!(
                "ERR Invalid TCP bus port specified: {}",
                String::from_utf8_lossy(c)
            ))
        })?,
        None => port + 10000,
    };
    let ip = std::str::from_utf8(&ip_arg)
        .ok()
        .and_then(|s| s.parse::<std::net::IpAddr>().ok());
    let valid = |p: i64| (1..=65535).contains(&p);
    let (Some(ip), true, true) = (ip, valid(port), valid(cport)) else {
        return Err(CmdError::reply(format!(
            "ERR Invalid node address specified: {}:{}",
            String::from_utf8_lossy(&ip_arg),
            String::from_utf8_lossy(&port_arg)
        )));
    };
    let ip = ip.to_string();
    update(ctx, |st| {
        let pending = st.nodes.values().any(|n| {
            n.has(node_flag::HANDSHAKE)
                && n.ip == ip
                && i64::from(n.port) == port
                && i64::from(n.cport) == cport
        });
        if !pending {
            let mut n = Node::new(random_id(), node_flag::HANDSHAKE | node_flag::MEET);
            n.bus.ctime_ms = crate::cluster::link::now_ms();
            n.ip = ip;
            n.port = port as u16;
            n.cport = cport as u16;
            st.nodes.insert(n.id, n);
        }
        Ok(())
    })?;
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER RESET [HARD|SOFT] (Redis's `clusterReset`): refused on a master holding keys;
/// otherwise this node forgets every other node and its slots and is a master (HARD: under
/// a new id, with epochs 0). A replica also stops replicating and empties its data, as
/// Redis's `replicationUnsetMaster` and `emptyData`: the state is changed (and saved)
/// first, so the bus's cron no longer sees a replica to restart, then the replication
/// link is stopped (waiting for the write it is applying), then the data is deleted.
fn reset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    cluster(ctx)?;
    let hard = match args.next_keyword().as_deref() {
        None | Some("SOFT") => false,
        Some("HARD") => true,
        Some(_) => return Err(CmdError::reply(super::args::ERR_SYNTAX)),
    };
    args.finish()?;
    let has_keys = db_has_keys(ctx)?;
    let (was_replica, was_paused) = update(ctx, |st| {
        if st.me().has(node_flag::MASTER) && has_keys {
            return Err("CLUSTER RESET can't be called with master nodes containing keys".into());
        }
        let was_replica = st.me().has(node_flag::SLAVE);
        // A master holding its writers for a replica's manual failover lets them go.
        let was_paused = st.manual.replica.is_some();
        let me = st.me().clone();
        let mut fresh = State::new(if hard { random_id() } else { me.id });
        let n = fresh.me_mut();
        n.ip = me.ip;
        n.port = me.port;
        n.cport = me.cport;
        n.hostname = me.hostname;
        if !hard {
            n.config_epoch = me.config_epoch;
            fresh.current_epoch = st.current_epoch;
            fresh.last_vote_epoch = st.last_vote_epoch;
        }
        *st = fresh;
        Ok((was_replica, was_paused))
    })?;
    if was_paused {
        ctx.shared.pause.hold_writes(false);
    }
    if was_replica {
        if let Some(shared) = ctx.shared.me.upgrade() {
            super::replication::become_master(&shared);
        }
        // Redis's emptyData: not propagated (this node is a master of nothing yet).
        let dbs = ctx.shared.config.read().databases;
        ctx.tx.tracking.flushed();
        crate::tracking::quietly(|| {
            (0..dbs).try_for_each(|db| ctx.tx.flush_db(ctx.tx.dbs.physical(db as u8)))
        })?;
    }
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER SETSLOT slot IMPORTING|MIGRATING node | STABLE | NODE node, with Redis's checks
/// in its order.
fn setslot(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let c = cluster(ctx)?;
    if c.read().me().has(node_flag::SLAVE) {
        return Err(CmdError::reply("ERR Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(&args.next_bytes()?)?;
    let action = args.next_keyword().unwrap_or_default();
    let target = args.rest().to_vec();
    let invalid = || {
        CmdError::reply(
            "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
        )
    };
    let replica_migration = ctx
        .shared
        .config
        .read()
        .tuning
        .get("cluster-allow-replica-migration")
        .is_none_or(|v| v == "yes");
    let keys_here = match (action.as_str(), target.len()) {
        ("NODE", 1) => count_keys_in_slot(ctx, slot)?,
        ("MIGRATING" | "IMPORTING", 1) | ("STABLE", 0) => 0,
        _ => return Err(invalid()),
    };
    let follow_to = update(ctx, |st| {
        let target_node = |st: &State, unknown: &dyn Fn(&[u8]) -> String| {
            let n = st.lookup(&target[0]).ok_or_else(|| unknown(&target[0]))?;
            if n.has(node_flag::SLAVE) {
                return Err("Target node is not a master".to_string());
            }
            Ok(n.id)
        };
        let dont_know =
            |name: &[u8]| format!("I don't know about node {}", String::from_utf8_lossy(name));
        let owner = st.owner[usize::from(slot)];
        match action.as_str() {
            "MIGRATING" => {
                if owner != Some(st.myself) {
                    return Err(format!("I'm not the owner of hash slot {slot}"));
                }
                let id = target_node(st, &dont_know)?;
                st.migrating.insert(slot, id);
            }
            "IMPORTING" => {
                if owner == Some(st.myself) {
                    return Err(format!("I'm already the owner of hash slot {slot}"));
                }
                let id = target_node(st, &dont_know)?;
                st.importing.insert(slot, id);
            }
            "STABLE" => {
                st.migrating.remove(&slot);
                st.importing.remove(&slot);
            }
            _ => {
                let id = target_node(st, &unknown_node)?;
                if owner == Some(st.myself) && id != st.myself && keys_here != 0 {
                    return Err(format!(
                        "Can't assign hashslot {slot} to a different node while I still hold \
                         keys for this hash slot."
                    ));
                }
                if keys_here == 0 {
                    st.migrating.remove(&slot);
                }
                let me = st.myself;
                st.owner[usize::from(slot)] = Some(id);
                // A master that gave away its last slot becomes a replica of the node that
                // took it (Redis 7.0 with cluster-allow-replica-migration).
                if owner == Some(me) && id != me && st.slot_count(&me) == 0 && replica_migration {
                    st.become_replica_of(id);
                    let m = &st.nodes[&id];
                    eprintln!(
                        "strata-server: cluster: Configuration change detected. Reconfiguring \
                         myself as a replica of {}",
                        m.id_str()
                    );
                    return Ok(Some((m.ip.clone(), m.port)));
                }
                if id == me && st.importing.remove(&slot).is_some() {
                    // Migrated by hand: a new epoch, so the cluster takes this version.
                    bump_epoch(st);
                }
            }
        }
        Ok(None)
    })?;
    if let Some((host, port)) = follow_to {
        follow(ctx, host, port)?;
    }
    ctx.reply.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    cluster(ctx)?;
    super::reply_help(ctx, "CLUSTER", cluster_views::HELP);
    Ok(())
}
