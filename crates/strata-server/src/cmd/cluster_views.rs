//! The cluster's topology as CLUSTER INFO, NODES, SLOTS, SHARDS and LINKS show it (Redis's
//! `clusterGenNodesDescription`, `clusterReplyMultiBulkSlots`, `clusterReplyShards`), from
//! the state `cluster/` keeps; the commands that change it are in `cluster.rs`.
//!
//! Layer: commands (above services; below execution).

use super::cluster::cluster;
use super::{Args, CmdResult, Ctx};
use crate::cluster::bus::message::type_name;
use crate::cluster::slots::{node_flag, Node, State};
use crate::cluster::MSG_TYPES;
use std::sync::atomic::{AtomicU64, Ordering};

pub const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];

/// `cluster-require-full-coverage` and `cluster-preferred-endpoint-type`.
fn settings(ctx: &Ctx<'_>) -> (bool, String) {
    let c = ctx.shared.config.read();
    (
        c.tuning
            .get("cluster-require-full-coverage")
            .is_none_or(|v| v == "yes"),
        c.tuning
            .get("cluster-preferred-endpoint-type")
            .cloned()
            .unwrap_or_else(|| "ip".into()),
    )
}

/// Redis's per-type message counters (only the types with a nonzero count) and their
/// total, for `dir` "sent" or "received".
fn message_counters(counters: &[AtomicU64; MSG_TYPES], dir: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut total = 0;
    for (t, c) in counters.iter().enumerate() {
        let n = c.load(Ordering::Relaxed);
        if n == 0 {
            continue;
        }
        total += n;
        out.push((
            format!("cluster_stats_messages_{}_{dir}", type_name(t as u16)),
            n.to_string(),
        ));
    }
    out.push((format!("cluster_stats_messages_{dir}"), total.to_string()));
    out
}

/// CLUSTER INFO: every field of Redis 7.0.15's.
pub fn info(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let (full, _) = settings(ctx);
    let c = cluster(ctx)?;
    let text = {
        let st = c.read();
        let (mut ok, mut pfail, mut fail) = (0, 0, 0);
        for o in st.owner.iter().flatten() {
            match st.nodes.get(o) {
                Some(n) if n.has(node_flag::FAIL) => fail += 1,
                Some(n) if n.has(node_flag::PFAIL) => pfail += 1,
                _ => ok += 1,
            }
        }
        let fields = [
            (
                "cluster_state",
                // The state as routing has it (with Redis's delays), not as computed now.
                if c.is_ok(full) { "ok" } else { "fail" }.to_string(),
            ),
            ("cluster_slots_assigned", st.assigned().to_string()),
            ("cluster_slots_ok", ok.to_string()),
            ("cluster_slots_pfail", pfail.to_string()),
            ("cluster_slots_fail", fail.to_string()),
            ("cluster_known_nodes", st.nodes.len().to_string()),
            ("cluster_size", st.size().to_string()),
            ("cluster_current_epoch", st.current_epoch.to_string()),
            ("cluster_my_epoch", my_epoch(&st).to_string()),
        ];
        let fields = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(message_counters(&c.stats.sent, "sent"))
            .chain(message_counters(&c.stats.received, "received"))
            .chain([(
                "total_cluster_links_buffer_limit_exceeded".to_string(),
                "0".to_string(),
            )]);
        fields
            .map(|(k, v)| format!("{k}:{v}\r\n"))
            .collect::<String>()
    };
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

/// A replica shows its master's epoch (Redis's `clusterGetMaster(myself)->configEpoch`).
fn my_epoch(st: &State) -> u64 {
    let me = st.me();
    me.master
        .and_then(|m| st.nodes.get(&m))
        .map_or(me.config_epoch, |m| m.config_epoch)
}

pub fn nodes(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let text = cluster(ctx)?.read().describe_all(0);
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

/// CLUSTER LINKS (Redis's `addReplyClusterLinksDescription`): each bus link whose node is
/// known, the one this node opened (`to`) then the one the node opened (`from`). The send
/// buffer is the bytes queued for the peer (allocated and used alike).
pub fn links(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let mut links = cluster(ctx)?.links.lock().clone();
    links.sort_by_key(|l| (l.node, l.inbound));
    ctx.reply.array(links.len());
    for l in &links {
        let queued = l.queued.load(std::sync::atomic::Ordering::Relaxed) as i64;
        ctx.reply.map(6);
        ctx.reply.bulk(b"direction");
        ctx.reply
            .bulk(if l.inbound { &b"from"[..] } else { &b"to"[..] });
        ctx.reply.bulk(b"node");
        ctx.reply.bulk(&l.node);
        ctx.reply.bulk(b"create-time");
        ctx.reply.int(l.ctime_ms as i64);
        ctx.reply.bulk(b"events");
        ctx.reply
            .bulk(if queued > 0 { &b"rw"[..] } else { &b"r"[..] });
        ctx.reply.bulk(b"send-buffer-allocated");
        ctx.reply.int(queued);
        ctx.reply.bulk(b"send-buffer-used");
        ctx.reply.int(queued);
    }
    Ok(())
}

/// The endpoint clients are sent to (Redis's `getPreferredEndpoint`); `None`: unknown.
fn endpoint<'n>(n: &'n Node, preferred: &str) -> Option<&'n str> {
    match preferred {
        "ip" => Some(&n.ip),
        "hostname" if !n.hostname.is_empty() => Some(&n.hostname),
        "hostname" => Some("?"),
        _ => None,
    }
}

/// One node of a CLUSTER SLOTS range: endpoint, port, id, and a map of the other known
/// addresses.
fn slot_node(ctx: &mut Ctx<'_>, n: &Node, preferred: &str) {
    ctx.reply.array(4);
    match endpoint(n, preferred) {
        Some(e) => ctx.reply.bulk(e.as_bytes()),
        None => ctx.reply.null(),
    }
    ctx.reply.int(i64::from(n.port));
    ctx.reply.bulk(&n.id);
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if preferred != "ip" {
        extra.push(("ip", &n.ip));
    }
    if preferred != "hostname" && !n.hostname.is_empty() {
        extra.push(("hostname", &n.hostname));
    }
    ctx.reply.map(extra.len());
    for (k, v) in extra {
        ctx.reply.bulk(k.as_bytes());
        ctx.reply.bulk(v.as_bytes());
    }
}

/// CLUSTER SLOTS: each run of slots with one owner, with the owner and its live replicas.
pub fn slots(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let (_, preferred) = settings(ctx);
    let st = cluster(ctx)?.read().clone();
    let mut runs: Vec<(u16, u16, [u8; 40])> = Vec::new();
    for (s, o) in st.owner.iter().enumerate() {
        let Some(o) = o else { continue };
        let s = s as u16;
        match runs.last_mut() {
            Some((_, end, id)) if *end + 1 == s && id == o => *end = s,
            _ => runs.push((s, s, *o)),
        }
    }
    ctx.reply.array(runs.len());
    for (a, b, id) in runs {
        let master = st
            .nodes
            .get(&id)
            .cloned()
            .unwrap_or_else(|| Node::new(id, 0));
        let replicas: Vec<&Node> = st
            .replicas_of(&id)
            .into_iter()
            .filter(|r| !r.has(node_flag::FAIL))
            .collect();
        ctx.reply.array(3 + replicas.len());
        ctx.reply.int(i64::from(a));
        ctx.reply.int(i64::from(b));
        slot_node(ctx, &master, &preferred);
        for r in replicas {
            slot_node(ctx, r, &preferred);
        }
    }
    Ok(())
}

/// One node of a CLUSTER SHARDS shard (Redis's `addNodeDetailsToShardReply`).
fn shard_node(ctx: &mut Ctx<'_>, n: &Node, preferred: &str) {
    let replica = n.has(node_flag::SLAVE);
    let offset: i64 = 0;
    ctx.reply.map(7 + usize::from(!n.hostname.is_empty()));
    ctx.reply.bulk(b"id");
    ctx.reply.bulk(&n.id);
    ctx.reply.bulk(b"port");
    ctx.reply.int(i64::from(n.port));
    ctx.reply.bulk(b"ip");
    ctx.reply.bulk(n.ip.as_bytes());
    ctx.reply.bulk(b"endpoint");
    ctx.reply
        .bulk(endpoint(n, preferred).unwrap_or("?").as_bytes());
    if !n.hostname.is_empty() {
        ctx.reply.bulk(b"hostname");
        ctx.reply.bulk(n.hostname.as_bytes());
    }
    ctx.reply.bulk(b"role");
    ctx.reply.bulk(if replica {
        &b"replica"[..]
    } else {
        &b"master"[..]
    });
    ctx.reply.bulk(b"replication-offset");
    ctx.reply.int(offset);
    ctx.reply.bulk(b"health");
    let health = if n.has(node_flag::FAIL) {
        "fail"
    } else if replica && offset == 0 {
        "loading"
    } else {
        "online"
    };
    ctx.reply.bulk(health.as_bytes());
}

/// CLUSTER SHARDS: one shard per master, with its slot ranges and its nodes.
pub fn shards(ctx: &mut Ctx<'_>, _: &mut Args) -> CmdResult {
    let (_, preferred) = settings(ctx);
    let st = cluster(ctx)?.read().clone();
    let masters: Vec<&Node> = st
        .nodes
        .values()
        .filter(|n| n.has(node_flag::MASTER))
        .collect();
    ctx.reply.array(masters.len());
    for m in masters {
        ctx.reply.map(2);
        ctx.reply.bulk(b"slots");
        let ranges = st.ranges_of(&m.id);
        ctx.reply.array(ranges.len() * 2);
        for (a, b) in ranges {
            ctx.reply.int(i64::from(a));
            ctx.reply.int(i64::from(b));
        }
        ctx.reply.bulk(b"nodes");
        let replicas = st.replicas_of(&m.id);
        ctx.reply.array(1 + replicas.len());
        shard_node(ctx, m, &preferred);
        for r in replicas {
            shard_node(ctx, r, &preferred);
        }
    }
    Ok(())
}
