//! Shard channel subscriptions end when their slot leaves this node's shard (Redis 7.0's
//! `clusterDelSlot` calling `removeChannelsInSlot`): a subscriber would otherwise wait for
//! SPUBLISHes that now go to another shard. The subscriptions live in `pubsub.rs`; the
//! cluster reaches them through [`SlotSubscriptions`], so this module's decision is a pure
//! function of two states, tested without a server.
//!
//! Redis drops a slot's channels when the slot is deleted from a node that is this node
//! or this node's master (`clusterGetNodesServingMySlots`), whatever moved it: SETSLOT
//! NODE, DELSLOTS, FLUSHSLOTS, RESET, an UPDATE or a PING claiming it with a newer
//! config. A replica promoted in its master's place keeps them (it is a master when the
//! slots change hands, and the shard goes on). [`lost`] says the same of a state change:
//! a slot whose owner was this node or its master before, and is afterwards neither that
//! node nor this one. Only slots with subscriptions are looked at, so a change costs
//! nothing while no shard channel is subscribed.
//!
//! Layer: cluster (a building block below commands).

use super::slots::{node_flag, NodeId, State};

/// The shard channel subscriptions of this node, by slot.
pub trait SlotSubscriptions: Send + Sync {
    /// The slots with at least one subscribed shard channel.
    fn slots(&self) -> Vec<u16>;
    /// Ends the subscriptions to the shard channels of `slots`, telling the subscribers.
    fn lost(&self, slots: &[u16]);
}

/// What [`lost`] compares: the owners of the watched slots before a change, and whom this
/// node served them for.
pub struct Before {
    myself: NodeId,
    master: Option<NodeId>,
    owners: Vec<(u16, Option<NodeId>)>,
}

/// Records the owners of `watched` slots in `st`, before a change.
pub fn before(st: &State, watched: &[u16]) -> Before {
    let me = st.me();
    Before {
        myself: st.myself,
        master: me.master.filter(|_| me.has(node_flag::SLAVE)),
        owners: watched
            .iter()
            .map(|&s| (s, st.owner[usize::from(s)]))
            .collect(),
    }
}

/// The watched slots this node's shard served before the change and no longer does.
pub fn lost(before: &Before, after: &State) -> Vec<u16> {
    before
        .owners
        .iter()
        .filter(|(slot, old)| {
            let Some(old) = *old else {
                return false;
            };
            let served = old == before.myself || before.master == Some(old);
            let now = after.owner[usize::from(*slot)];
            served && now != Some(old) && now != Some(after.myself)
        })
        .map(|(slot, _)| *slot)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::slots::Node;
    use super::*;

    const ME: NodeId = [b'a'; 40];
    const M: NodeId = [b'm'; 40];
    const T: NodeId = [b't'; 40];

    /// Slots 0-99 owned by `ME`, 100-199 by M, 200-299 by T.
    fn state(me_master: Option<NodeId>) -> State {
        let mut s = State::new(ME);
        for id in [M, T] {
            s.nodes.insert(id, Node::new(id, node_flag::MASTER));
        }
        if let Some(m) = me_master {
            let me = s.me_mut();
            me.flags = node_flag::MYSELF | node_flag::SLAVE;
            me.master = Some(m);
        }
        for slot in 0..300 {
            s.owner[slot] = Some([ME, M, T][slot / 100]);
        }
        s
    }

    #[test]
    fn a_slot_is_lost_when_it_leaves_this_node_or_its_master() {
        let watched = [5, 6, 150, 250];
        // A master: its slot given away (SETSLOT NODE) or deleted (DELSLOTS) is lost;
        // other masters' slots moving between them are not its business.
        let st = state(None);
        let b = before(&st, &watched);
        let mut after = st.clone();
        after.owner[5] = Some(T);
        after.owner[6] = None;
        after.owner[150] = Some(T);
        assert_eq!(lost(&b, &after), [5, 6]);
        assert!(lost(&b, &st).is_empty(), "nothing changed");
        // A replica of M: M's slot taken by T (learned from T's messages) is lost, as is
        // every slot of M when a sibling replica T is promoted in M's place.
        let st = state(Some(M));
        let b = before(&st, &watched);
        let mut after = st.clone();
        after.owner[150] = Some(T);
        assert_eq!(lost(&b, &after), [150]);
        // The replica that is itself promoted in M's place keeps them.
        let mut after = st.clone();
        after.owner[150] = Some(ME);
        assert!(lost(&b, &after).is_empty());
        // Slots not watched (no subscriptions) are never looked at.
        let b = before(&st, &[250]);
        let mut after = st.clone();
        after.owner[150] = Some(T);
        assert!(lost(&b, &after).is_empty());
    }
}
