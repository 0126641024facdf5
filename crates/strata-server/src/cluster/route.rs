//! Which node serves a request (Redis's `getNodeByQuery`): a pure function of the cluster
//! state, the request's keys and whether each exists here, so it is tested without a
//! server. The dispatcher (`cmd/mod.rs`) calls it after the ACL check and before running,
//! for commands with keys and for EXEC (whose queued commands' keys it gathers), and for
//! the sharded pub/sub commands, which Redis 7.0 routes by their channels' slot.
//!
//! Layer: cluster (a building block below commands).

use super::slots::{node_flag, State};
use crate::keys::hash_slot;

/// Why this node does not serve a request: the error text Redis's
/// `clusterRedirectClient` sends.
#[derive(Debug, PartialEq, Eq)]
pub enum Redirect {
    CrossSlot,
    /// Some of a multi-key request's keys are here and some are not while the slot moves.
    Unstable,
    Down,
    DownReadOnly,
    Unbound,
    Moved(u16, String),
    Ask(u16, String),
}

impl Redirect {
    pub fn message(&self) -> String {
        match self {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::Unstable => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::Down => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts reads".into()
            }
            Redirect::Unbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved(slot, addr) => format!("MOVED {slot} {addr}"),
            Redirect::Ask(slot, addr) => format!("ASK {slot} {addr}"),
        }
    }
}

/// What routing needs to know of the request and the client.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request {
    /// The command writes (EXEC: any queued command writes).
    pub write: bool,
    /// The client sent ASKING, or the command carries the `asking` flag (RESTORE-ASKING).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    /// The command is MIGRATE (served here whenever the slot is open).
    pub migrate: bool,
    /// The command is SPUBLISH, SSUBSCRIBE or SUNSUBSCRIBE (Redis's `is_pubsubshard`; not
    /// an EXEC holding one): its "keys" are shard channels, which do not move with a
    /// migrating slot, so they are never looked up; a replica of the slot's owner serves
    /// them without READONLY; `pubsub_when_down` decides whether a down cluster serves
    /// them.
    pub shard_pubsub: bool,
    /// `cluster-allow-pubsubshard-when-down`.
    pub pubsub_when_down: bool,
    /// `cluster-require-full-coverage`.
    pub full_coverage: bool,
    /// `cluster-allow-reads-when-down`.
    pub reads_when_down: bool,
    /// Whether the cluster is up, as [`Cluster::is_ok`](super::Cluster::is_ok) keeps it
    /// after every change; `None`: computed from the state here (tests). Computing it walks
    /// the owners of all 16384 slots, which per command cost more than the command.
    pub state_ok: Option<bool>,
}

/// Routes a request naming `keys` (all its commands' keys, in order): `Ok(slot)` when
/// this node serves it (`None`: no keys), the redirection otherwise. `exists` says whether
/// a key is here; it is asked only while the slot is migrating or importing, and never for
/// a sharded pub/sub command's channels (served by the slot's owner until the slot moves:
/// Redis's comment in `getNodeByQuery`).
pub fn route(
    state: &State,
    req: &Request,
    keys: &[&[u8]],
    exists: impl Fn(&[u8]) -> bool,
) -> Result<Option<u16>, Redirect> {
    let Some(first) = keys.first() else {
        return Ok(None);
    };
    let slot = hash_slot(first);
    let Some(owner) = state.owner[usize::from(slot)] else {
        return Err(Redirect::Unbound);
    };
    let mine = owner == state.myself;
    let migrating = mine && state.migrating.contains_key(&slot);
    let importing = !migrating && state.importing.contains_key(&slot);
    let (mut missing, mut existing) = (0usize, 0usize);
    let mut multiple = false;
    for k in keys {
        if hash_slot(k) != slot {
            return Err(Redirect::CrossSlot);
        }
        // The same key twice is one key (Redis compares the key objects).
        if !multiple && k != first {
            multiple = true;
        }
        if (migrating || importing) && !req.shard_pubsub {
            if exists(k) {
                existing += 1;
            } else {
                missing += 1;
            }
        }
    }
    if !req
        .state_ok
        .unwrap_or_else(|| state.is_ok(req.full_coverage))
    {
        if req.shard_pubsub {
            if !req.pubsub_when_down {
                return Err(Redirect::Down);
            }
        } else if !req.reads_when_down {
            return Err(Redirect::Down);
        } else if req.write {
            return Err(Redirect::DownReadOnly);
        }
    }
    if (migrating || importing) && req.migrate {
        return Ok(Some(slot));
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(Redirect::Unstable);
        }
        let to = state.migrating[&slot];
        return Err(Redirect::Ask(slot, address(state, &to)));
    }
    if importing && req.asking {
        if multiple && missing > 0 {
            return Err(Redirect::Unstable);
        }
        return Ok(Some(slot));
    }
    let me = state.me();
    if (req.readonly || req.shard_pubsub)
        && !req.write
        && me.has(node_flag::SLAVE)
        && me.master == Some(owner)
    {
        return Ok(Some(slot));
    }
    if mine {
        Ok(Some(slot))
    } else {
        Err(Redirect::Moved(slot, address(state, &owner)))
    }
}

/// `ip:port` of a node as redirections name it (Redis's preferred endpoint, the ip).
fn address(state: &State, id: &super::slots::NodeId) -> String {
    state
        .nodes
        .get(id)
        .map_or_else(|| ":0".to_string(), |n| format!("{}:{}", n.ip, n.port))
}

#[cfg(test)]
mod tests {
    use super::super::slots::{Node, NodeId};
    use super::*;

    const ME: NodeId = [b'a'; 40];
    const OTHER: NodeId = [b'b'; 40];
    const THIRD: NodeId = [b'c'; 40];

    fn state() -> State {
        let mut s = State::new(ME);
        let mut o = Node::new(OTHER, node_flag::MASTER);
        o.ip = "10.0.0.2".into();
        o.port = 7001;
        s.nodes.insert(OTHER, o);
        for slot in 0..16384 {
            s.owner[slot] = Some(if slot < 8192 { ME } else { OTHER });
        }
        s
    }

    fn req() -> Request {
        Request {
            full_coverage: true,
            ..Request::default()
        }
    }

    #[test]
    fn redirections() {
        let mut s = state();
        let none = |_: &[u8]| false;
        // "a" is slot 15495, "b" 3300, "{b}x" too.
        assert_eq!(route(&s, &req(), &[], none), Ok(None));
        assert_eq!(route(&s, &req(), &[b"b"], none), Ok(Some(3300)));
        assert_eq!(
            route(&s, &req(), &[b"a"], none),
            Err(Redirect::Moved(15495, "10.0.0.2:7001".into()))
        );
        assert_eq!(
            route(&s, &req(), &[b"b", b"a"], none),
            Err(Redirect::CrossSlot)
        );
        s.migrating.insert(3300, OTHER);
        let only_b = |k: &[u8]| k == b"b";
        assert_eq!(route(&s, &req(), &[b"b"], only_b), Ok(Some(3300)));
        assert_eq!(
            route(&s, &req(), &[b"{b}x"], only_b),
            Err(Redirect::Ask(3300, "10.0.0.2:7001".into()))
        );
        assert_eq!(
            route(&s, &req(), &[b"b", b"{b}x"], only_b),
            Err(Redirect::Unstable)
        );
        s.importing.insert(15495, OTHER);
        s.migrating.clear();
        s.owner[15495] = Some(OTHER);
        let asking = Request {
            asking: true,
            ..req()
        };
        assert!(matches!(
            route(&s, &req(), &[b"a"], none),
            Err(Redirect::Moved(..))
        ));
        assert_eq!(route(&s, &asking, &[b"a"], none), Ok(Some(15495)));
        assert_eq!(
            route(&s, &asking, &[b"a", b"{a}x"], |k| k == b"a"),
            Err(Redirect::Unstable)
        );
        assert_eq!(route(&s, &asking, &[b"a", b"a"], none), Ok(Some(15495)));
        s.owner[0] = None;
        assert_eq!(route(&s, &req(), &[b"b"], none), Err(Redirect::Down));
        let reads = Request {
            reads_when_down: true,
            ..req()
        };
        assert_eq!(route(&s, &reads, &[b"b"], none), Ok(Some(3300)));
        let write = Request {
            write: true,
            ..reads
        };
        assert_eq!(
            route(&s, &write, &[b"b"], none),
            Err(Redirect::DownReadOnly)
        );
        let partial = Request {
            full_coverage: false,
            ..req()
        };
        assert_eq!(route(&s, &partial, &[b"b"], none), Ok(Some(3300)));
        // An unassigned slot: "{a}" hashes where "a" does; slot 0 is the empty key's.
        assert_eq!(route(&s, &partial, &[b""], none), Err(Redirect::Unbound));
    }

    /// SPUBLISH, SSUBSCRIBE and SUNSUBSCRIBE as redis-server 7.0.15 routes them (recorded
    /// from a cluster of three): by their channels' slot like keys, but a channel is never
    /// looked up in a moving slot, a replica of the owner serves them without READONLY,
    /// and `cluster-allow-pubsubshard-when-down` (not reads-when-down) governs a down
    /// cluster.
    #[test]
    fn sharded_pubsub_routes_by_channel() {
        let mut s = state();
        let looked_up = std::cell::Cell::new(0);
        let exists = |_: &[u8]| {
            looked_up.set(looked_up.get() + 1);
            false
        };
        let pubsub = Request {
            shard_pubsub: true,
            pubsub_when_down: true,
            ..req()
        };
        assert_eq!(route(&s, &pubsub, &[b"b"], exists), Ok(Some(3300)));
        assert_eq!(
            route(&s, &pubsub, &[b"a"], exists),
            Err(Redirect::Moved(15495, "10.0.0.2:7001".into()))
        );
        assert_eq!(
            route(&s, &pubsub, &[b"b", b"a"], exists),
            Err(Redirect::CrossSlot)
        );
        // Migrating: served here (a key of that name would be asked for: ASK).
        s.migrating.insert(3300, OTHER);
        assert_eq!(route(&s, &pubsub, &[b"b", b"{b}x"], exists), Ok(Some(3300)));
        assert_eq!(looked_up.get(), 0, "channels are not keys");
        // Not a sharded pub/sub request (a key of that name, or an EXEC holding an
        // SPUBLISH, which Redis routes as keys): looked up, and missing, so ASK.
        assert_eq!(
            route(&s, &req(), &[b"b"], exists),
            Err(Redirect::Ask(3300, "10.0.0.2:7001".into()))
        );
        looked_up.set(0);
        // Importing: MOVED without ASKING; with it, served though nothing is "here".
        s.migrating.clear();
        s.owner[15495] = Some(OTHER);
        s.importing.insert(15495, OTHER);
        assert!(matches!(
            route(&s, &pubsub, &[b"a"], exists),
            Err(Redirect::Moved(..))
        ));
        let asking = Request {
            asking: true,
            ..pubsub
        };
        assert_eq!(
            route(&s, &asking, &[b"a", b"{a}x"], exists),
            Ok(Some(15495))
        );
        assert_eq!(looked_up.get(), 0);
        s.importing.clear();
        // A replica of the owner serves them without READONLY; a keyed read needs it.
        let mut r = s.clone();
        r.nodes.get_mut(&ME).unwrap().flags = node_flag::MYSELF | node_flag::SLAVE;
        r.nodes.get_mut(&ME).unwrap().master = Some(OTHER);
        assert_eq!(route(&r, &pubsub, &[b"a"], none_here), Ok(Some(15495)));
        assert!(matches!(
            route(&r, &req(), &[b"a"], none_here),
            Err(Redirect::Moved(..))
        ));
        // ... but not a slot of another master.
        for slot in 0..8192 {
            r.owner[slot] = Some(THIRD);
        }
        r.nodes.insert(THIRD, Node::new(THIRD, node_flag::MASTER));
        assert!(matches!(
            route(&r, &pubsub, &[b"b"], none_here),
            Err(Redirect::Moved(3300, _))
        ));
        // A down cluster serves them unless cluster-allow-pubsubshard-when-down is no;
        // reads-when-down does not matter. An unassigned slot is never served.
        s.owner[0] = None;
        assert_eq!(route(&s, &pubsub, &[b"b"], none_here), Ok(Some(3300)));
        let strict = Request {
            pubsub_when_down: false,
            reads_when_down: true,
            ..pubsub
        };
        assert_eq!(route(&s, &strict, &[b"b"], none_here), Err(Redirect::Down));
        assert_eq!(
            route(&s, &pubsub, &[b""], none_here),
            Err(Redirect::Unbound)
        );
    }

    fn none_here(_: &[u8]) -> bool {
        false
    }
}
