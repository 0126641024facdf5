//! Publish/subscribe: the server's registry of channel and pattern subscriptions, and each
//! subscriber's outbox of messages not yet handed to its connection.
//!
//! Pub/sub has no keys and no storage: it lives in memory, per server, as in Redis.
//!
//! **Protocol.** [`PubSub`] holds one `RwLock` over every subscription: channel →
//! subscribers, pattern → subscribers (both in subscription order), and per client the
//! channels and patterns it holds (in subscription order too: UNSUBSCRIBE without arguments
//! replies them in that order). SUBSCRIBE and UNSUBSCRIBE take it for writing, PUBLISH and
//! PUBSUB for reading. A connection's first subscription creates its [`Subscriber`]: an
//! outbox (a byte buffer under its own mutex) and a `Notify`. PUBLISH, under the read lock,
//! appends the encoded message to each receiving subscriber's outbox and wakes its
//! connection, which (in its read loop, `conn.rs`) takes the whole outbox and writes it to
//! the socket. One publisher's messages therefore reach every subscriber in PUBLISH order.
//! A subscription change holds the write lock, so no publisher appends meanwhile: it first
//! takes the outbox, so that messages published before the change precede its reply, as in
//! Redis (messages published to a channel before UNSUBSCRIBE arrive before its reply, none
//! after).
//!
//! **Limits.** A subscriber's pending output is its outbox plus what its connection holds
//! but the socket has not taken (`ClientInfo::omem`). The publisher checks it against the
//! `pubsub` class of `client-output-buffer-limit` after each append: past the hard limit, or
//! above the soft limit for longer than its seconds, the client is killed (its connection
//! closes at its next await) and its outbox emptied, as Redis's
//! `closeClientOnOutputBufferLimitReached`. A killed subscriber still counts as a receiver
//! in PUBLISH's reply until it has left (Redis counts a client closing asynchronously too).
//!
//! Connections that never subscribe have no `Subscriber` and never touch the lock.
//!
//! **Shard channels and slots.** Shard channels are also indexed by their hash slot (Redis's
//! `slots_to_channels`), so that when this node's shard loses a slot in cluster mode the
//! cluster (`cluster/shard_channels.rs`) can end their subscriptions
//! ([`PubSub::unsubscribe_slots`]) without walking every channel.
//!
//! Layer: services (above store and types; below commands).

use crate::clients::ClientInfo;
use crate::config::OutputLimit;
use crate::glob;
use crate::keys::hash_slot;
use bytes::{BufMut, Bytes, BytesMut};
use indexmap::{IndexMap, IndexSet};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// Channel, pattern or shard channel subscriptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    /// SSUBSCRIBE's shard channels: their own namespace, published to by SPUBLISH only.
    Shard,
}

/// One subscribed connection's mailbox, shared by the registry and the connection.
pub struct Subscriber {
    pub id: u64,
    info: Arc<ClientInfo>,
    /// Messages are pushes (`>`) instead of arrays (`*`): the connection speaks RESP3.
    resp3: AtomicBool,
    outbox: Mutex<Outbox>,
    ready: Notify,
}

#[derive(Default)]
struct Outbox {
    buf: BytesMut,
    /// When the pending output first passed the soft limit (reset when it falls below).
    soft_since: Option<Instant>,
}

impl Subscriber {
    pub fn new(info: Arc<ClientInfo>, resp3: bool) -> Arc<Subscriber> {
        Arc::new(Subscriber {
            id: info.id,
            info,
            resp3: AtomicBool::new(resp3),
            outbox: Mutex::new(Outbox::default()),
            ready: Notify::new(),
        })
    }

    /// The connection switched protocol (HELLO): later messages use its encoding.
    pub fn set_resp3(&self, resp3: bool) {
        self.resp3.store(resp3, Ordering::Relaxed);
    }

    /// Whether messages go out as RESP3 pushes.
    pub fn is_resp3(&self) -> bool {
        self.resp3.load(Ordering::Relaxed)
    }

    /// Appends one message of type `kind` (`>` push, `*` array; `body` without the type
    /// byte) under the output limit: client-side caching's invalidations (`tracking.rs`).
    pub fn deliver_as(&self, kind: u8, body: &[u8], limit: OutputLimit) {
        self.append(kind, body, limit);
    }

    /// The messages published to this subscriber and not yet taken (empty if none).
    pub fn take(&self) -> BytesMut {
        self.outbox.lock().buf.split()
    }

    /// Waits until a message may be pending (spurious wake-ups find the outbox empty).
    pub async fn ready(&self) {
        self.ready.notified().await
    }

    /// Appends one message (`body`: its encoding without the leading type byte) and
    /// enforces the output limit.
    fn deliver(&self, body: &[u8], limit: OutputLimit) {
        let kind = if self.resp3.load(Ordering::Relaxed) {
            b'>'
        } else {
            b'*'
        };
        self.append(kind, body, limit);
    }

    /// Appends a status line (`+` and `line`, CRLF included): MONITOR's output
    /// (`monitor.rs`).
    pub fn deliver_line(&self, line: &[u8], limit: OutputLimit) {
        self.append(b'+', line, limit);
    }

    fn append(&self, kind: u8, body: &[u8], limit: OutputLimit) {
        if self.info.is_killed() {
            return;
        }
        let mut o = self.outbox.lock();
        let was_empty = o.buf.is_empty();
        o.buf.put_u8(kind);
        o.buf.put_slice(body);
        let pending = (o.buf.len() + self.info.omem.load(Ordering::Relaxed)) as u64;
        let mut over = limit.hard_bytes > 0 && pending > limit.hard_bytes;
        if limit.soft_bytes > 0 && pending > limit.soft_bytes {
            let since = *o.soft_since.get_or_insert_with(Instant::now);
            // Whole seconds, as Redis compares its clock in seconds.
            over |= since.elapsed().as_secs() > limit.soft_secs;
        } else {
            o.soft_since = None;
        }
        if over {
            o.buf = BytesMut::new();
            drop(o);
            self.info.request_kill();
            return;
        }
        drop(o);
        if was_empty {
            self.ready.notify_one();
        }
    }
}

/// Waits for `sub`'s next message; never resolves for a connection that has not subscribed.
pub async fn ready(sub: Option<&Arc<Subscriber>>) {
    match sub {
        Some(s) => s.ready().await,
        None => std::future::pending().await,
    }
}

/// What a subscription change replies: the messages published before it, then one
/// confirmation per name: the name (`None` when there was nothing to unsubscribe from) and
/// the client's subscription count after it (channels plus patterns; for shard channels,
/// shard channels: Redis's `subscriptionCount` of the kind).
#[derive(Debug, Default)]
pub struct Change {
    pub pending: BytesMut,
    pub replies: Vec<(Option<Bytes>, usize)>,
    /// The client's subscriptions of every kind afterwards (0: it leaves pub/sub mode).
    pub total: usize,
}

/// One client's subscriptions, in subscription order.
struct ClientSubs {
    sub: Arc<Subscriber>,
    channels: IndexSet<Bytes>,
    patterns: IndexSet<Bytes>,
    shard_channels: IndexSet<Bytes>,
}

impl ClientSubs {
    fn new(sub: Arc<Subscriber>) -> ClientSubs {
        ClientSubs {
            sub,
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            shard_channels: IndexSet::new(),
        }
    }

    fn names(&mut self, kind: Kind) -> &mut IndexSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// What a confirmation of `kind` counts.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard_channels.len(),
        }
    }

    fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    fn publish_counts(&self) -> (usize, usize, usize) {
        (
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
        )
    }
}

type Subscribers = IndexMap<u64, Arc<Subscriber>>;

#[derive(Default)]
struct State {
    channels: HashMap<Bytes, Subscribers>,
    /// Patterns in first-subscription order (a message matching several patterns of one
    /// client arrives once per pattern, in this order).
    patterns: IndexMap<Bytes, Subscribers>,
    shard_channels: HashMap<Bytes, Subscribers>,
    /// The shard channels with subscribers, by hash slot, in name order within a slot.
    slot_channels: BTreeMap<u16, BTreeSet<Bytes>>,
    clients: HashMap<u64, ClientSubs>,
}

impl State {
    /// Adds `sub`'s subscription to `name` to the name's subscriber list.
    fn attach(&mut self, kind: Kind, name: &Bytes, sub: &Arc<Subscriber>) {
        self.map(kind).attach(name.clone(), sub.clone());
        if kind == Kind::Shard {
            self.slot_channels
                .entry(hash_slot(name))
                .or_default()
                .insert(name.clone());
        }
    }

    fn map(&mut self, kind: Kind) -> &mut dyn SubMap {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// Removes client `id`'s subscription to `name` from the name's subscriber list.
    fn detach(&mut self, kind: Kind, name: &Bytes, id: u64) {
        self.map(kind).detach(name, id);
        if kind == Kind::Shard && !self.shard_channels.contains_key(name) {
            let slot = hash_slot(name);
            if let Some(names) = self.slot_channels.get_mut(&slot) {
                names.remove(name);
                if names.is_empty() {
                    self.slot_channels.remove(&slot);
                }
            }
        }
    }
}

/// The name → subscribers maps of every kind.
trait SubMap {
    fn attach(&mut self, name: Bytes, sub: Arc<Subscriber>);
    fn detach(&mut self, name: &Bytes, id: u64);
}

impl SubMap for HashMap<Bytes, Subscribers> {
    fn attach(&mut self, name: Bytes, sub: Arc<Subscriber>) {
        self.entry(name).or_default().insert(sub.id, sub);
    }
    fn detach(&mut self, name: &Bytes, id: u64) {
        if let Some(s) = self.get_mut(name) {
            s.shift_remove(&id);
            if s.is_empty() {
                self.remove(name);
            }
        }
    }
}

impl SubMap for IndexMap<Bytes, Subscribers> {
    fn attach(&mut self, name: Bytes, sub: Arc<Subscriber>) {
        self.entry(name).or_default().insert(sub.id, sub);
    }
    fn detach(&mut self, name: &Bytes, id: u64) {
        if let Some(s) = self.get_mut(name) {
            s.shift_remove(&id);
            if s.is_empty() {
                self.shift_remove(name);
            }
        }
    }
}

/// Every subscription of the server.
#[derive(Default)]
pub struct PubSub {
    state: RwLock<State>,
}

impl PubSub {
    /// Subscribes `sub` to each of `names` (a name already held is confirmed again).
    pub fn subscribe(&self, sub: &Arc<Subscriber>, kind: Kind, names: &[Bytes]) -> Change {
        let mut st = self.state.write();
        let pending = sub.take();
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            let c = st
                .clients
                .entry(sub.id)
                .or_insert_with(|| ClientSubs::new(sub.clone()));
            let added = c.names(kind).insert(name.clone());
            let count = c.count(kind);
            if added {
                st.attach(kind, name, sub);
            }
            replies.push((Some(name.clone()), count));
        }
        let total = st.clients.get(&sub.id).map_or(0, ClientSubs::total);
        let (ch, pat, shard) = st
            .clients
            .get(&sub.id)
            .map_or((0, 0, 0), ClientSubs::publish_counts);
        sub.info.set_subscriptions(ch, pat, shard);
        Change {
            pending,
            replies,
            total,
        }
    }

    /// Unsubscribes client `id` from `names`, or from every name of `kind` it holds
    /// (`None`), in subscription order. Replies one confirmation per name, or one with no
    /// name if there was nothing to unsubscribe from.
    pub fn unsubscribe(
        &self,
        id: u64,
        info: &ClientInfo,
        kind: Kind,
        names: Option<&[Bytes]>,
    ) -> Change {
        let mut st = self.state.write();
        let Some(c) = st.clients.get_mut(&id) else {
            return Change {
                pending: BytesMut::new(),
                replies: match names {
                    Some(n) => n.iter().map(|n| (Some(n.clone()), 0)).collect(),
                    None => vec![(None, 0)],
                },
                total: 0,
            };
        };
        let pending = c.sub.take();
        let names: Vec<Bytes> = match names {
            Some(n) => n.to_vec(),
            None => c.names(kind).iter().cloned().collect(),
        };
        let mut replies = Vec::with_capacity(names.len().max(1));
        for name in names {
            let Some(c) = st.clients.get_mut(&id) else {
                break;
            };
            let removed = c.names(kind).shift_remove(&name);
            let count = c.count(kind);
            if removed {
                st.detach(kind, &name, id);
            }
            replies.push((Some(name), count));
        }
        let (channels, patterns, shard) = st
            .clients
            .get(&id)
            .map_or((0, 0, 0), ClientSubs::publish_counts);
        let total = channels + patterns + shard;
        if replies.is_empty() {
            let count = st.clients.get(&id).map_or(0, |c| c.count(kind));
            replies.push((None, count));
        }
        if total == 0 {
            st.clients.remove(&id);
        }
        info.set_subscriptions(channels, patterns, shard);
        Change {
            pending,
            replies,
            total,
        }
    }

    /// Client `id` leaves every channel and pattern (disconnection, RESET); returns the
    /// messages published to it before.
    pub fn leave(&self, id: u64, info: &ClientInfo) -> BytesMut {
        let mut st = self.state.write();
        let mut pending = BytesMut::new();
        if let Some(c) = st.clients.remove(&id) {
            pending = c.sub.take();
            for ch in &c.channels {
                st.detach(Kind::Channel, ch, id);
            }
            for p in &c.patterns {
                st.detach(Kind::Pattern, p, id);
            }
            for ch in &c.shard_channels {
                st.detach(Kind::Shard, ch, id);
            }
        }
        info.set_subscriptions(0, 0, 0);
        pending
    }

    /// Sends `message` to the subscribers of `channel` and of the patterns matching it;
    /// returns how many received it (a client once per matching subscription). The
    /// publisher's own copies (`me` subscribed) go to `own` instead of its outbox, so they
    /// precede PUBLISH's reply, as in Redis.
    /// SPUBLISH goes to `Kind::Shard` subscribers only (`smessage`); PUBLISH (any other
    /// kind) to channel and pattern subscribers.
    #[allow(clippy::too_many_arguments)]
    pub fn publish(
        &self,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
        limit: OutputLimit,
        me: u64,
        own: &mut BytesMut,
        own_resp3: bool,
    ) -> usize {
        let st = self.state.read();
        let mut receivers = 0;
        let mut send = |subs: &Subscribers, body: &[u8]| {
            for (&id, s) in subs {
                receivers += 1;
                if id == me {
                    own.put_u8(if own_resp3 { b'>' } else { b'*' });
                    own.put_slice(body);
                } else {
                    s.deliver(body, limit);
                }
            }
        };
        if kind == Kind::Shard {
            if let Some(subs) = st.shard_channels.get(channel) {
                send(subs, &encode(&[b"smessage", channel, message]));
            }
            return receivers;
        }
        if let Some(subs) = st.channels.get(channel) {
            send(subs, &encode(&[b"message", channel, message]));
        }
        for (pattern, subs) in &st.patterns {
            if glob::matches(pattern, channel, false) {
                send(subs, &encode(&[b"pmessage", pattern, channel, message]));
            }
        }
        receivers
    }

    /// Channels (or shard channels) with at least one subscriber, matching `pattern` if
    /// given.
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let st = self.state.read();
        let map = if kind == Kind::Shard {
            &st.shard_channels
        } else {
            &st.channels
        };
        map.keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    /// Client `id`'s mailbox while it holds a subscription.
    pub fn subscriber(&self, id: u64) -> Option<Arc<Subscriber>> {
        self.state.read().clients.get(&id).map(|c| c.sub.clone())
    }

    /// Client `id`'s subscriptions (ACL checks them when its user's channel rules change).
    pub fn subscriptions_of(&self, id: u64) -> Vec<(Kind, Bytes)> {
        let st = self.state.read();
        let Some(c) = st.clients.get(&id) else {
            return Vec::new();
        };
        let kinds = [
            (Kind::Channel, &c.channels),
            (Kind::Pattern, &c.patterns),
            (Kind::Shard, &c.shard_channels),
        ];
        kinds
            .into_iter()
            .flat_map(|(k, set)| set.iter().map(move |n| (k, n.clone())))
            .collect()
    }

    /// Subscribers of `channel` (or of the shard channel; pattern subscriptions not
    /// counted).
    pub fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        let st = self.state.read();
        let map = if kind == Kind::Shard {
            &st.shard_channels
        } else {
            &st.channels
        };
        map.get(channel).map_or(0, |s| s.len())
    }

    /// The hash slots of the shard channels with subscribers, in order.
    pub fn shard_slots(&self) -> Vec<u16> {
        self.state.read().slot_channels.keys().copied().collect()
    }

    /// Ends every subscription to the shard channels of `slots`, which this node's shard no
    /// longer serves (Redis 7.0's `removeChannelsInSlot`): channel by channel in slot and
    /// name order, each subscriber gets a `sunsubscribe` message with its remaining
    /// shard channel count, as if it had sent SUNSUBSCRIBE; one left with no
    /// subscription leaves pub/sub mode. Messages go through the `pubsub` output `limit`.
    pub fn unsubscribe_slots(&self, slots: &[u16], limit: OutputLimit) {
        let mut st = self.state.write();
        let names: Vec<Bytes> = slots
            .iter()
            .filter_map(|s| st.slot_channels.get(s))
            .flat_map(|names| names.iter().cloned())
            .collect();
        for name in names {
            let subs: Vec<u64> = st
                .shard_channels
                .get(&name)
                .map_or_else(Vec::new, |s| s.keys().copied().collect());
            for id in subs {
                st.detach(Kind::Shard, &name, id);
                let Some(c) = st.clients.get_mut(&id) else {
                    continue;
                };
                c.shard_channels.shift_remove(&name);
                let count = c.count(Kind::Shard);
                let sub = c.sub.clone();
                let (channels, patterns, shard) = c.publish_counts();
                if channels + patterns + shard == 0 {
                    st.clients.remove(&id);
                }
                sub.info.set_subscriptions(channels, patterns, shard);
                sub.deliver(&encode_count(b"sunsubscribe", &name, count), limit);
            }
        }
    }

    /// Channels, patterns and shard channels with at least one subscriber (INFO
    /// `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`; PUBSUB NUMPAT).
    pub fn counts(&self) -> (usize, usize, usize) {
        let st = self.state.read();
        (
            st.channels.len(),
            st.patterns.len(),
            st.shard_channels.len(),
        )
    }
}

/// A confirmation's encoding without its type byte: `word`, the name and the count.
fn encode_count(word: &[u8], name: &[u8], count: usize) -> Vec<u8> {
    let mut b = encode(&[word, name]);
    b[0] = b'3';
    b.extend_from_slice(format!(":{count}\r\n").as_bytes());
    b
}

/// A message's encoding without its type byte: the element count and bulk strings.
fn encode(parts: &[&[u8]]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    b.extend_from_slice(parts.len().to_string().as_bytes());
    b.extend_from_slice(b"\r\n");
    for p in parts {
        b.push(b'$');
        b.extend_from_slice(p.len().to_string().as_bytes());
        b.extend_from_slice(b"\r\n");
        b.extend_from_slice(p);
        b.extend_from_slice(b"\r\n");
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn client(id: u64) -> (Arc<ClientInfo>, Arc<Subscriber>) {
        let info = Arc::new(ClientInfo::new(
            id,
            "127.0.0.1:1".into(),
            "127.0.0.1:2".into(),
            1,
            false,
        ));
        let sub = Subscriber::new(info.clone(), false);
        (info, sub)
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn names(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| b(s)).collect()
    }

    fn publish(ps: &PubSub, ch: &str, msg: &str) -> usize {
        let mut own = BytesMut::new();
        ps.publish(
            Kind::Channel,
            ch.as_bytes(),
            msg.as_bytes(),
            OutputLimit::default(),
            0,
            &mut own,
            false,
        )
    }

    #[test]
    fn counts_follow_subscriptions() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        let c = ps.subscribe(&a, Kind::Channel, &names(&["x", "y", "x"]));
        let counts: Vec<usize> = c.replies.iter().map(|r| r.1).collect();
        assert_eq!(counts, [1, 2, 2]);
        let c = ps.subscribe(&a, Kind::Pattern, &names(&["x*"]));
        assert_eq!(c.replies, vec![(Some(b("x*")), 3)]);
        assert_eq!((ia.sub(), ia.psub()), (2, 1));
        assert_eq!(ps.counts(), (2, 1, 0));
        // Unsubscribing from everything replies in subscription order.
        let c = ps.unsubscribe(1, &ia, Kind::Channel, None);
        assert_eq!(c.replies, vec![(Some(b("x")), 2), (Some(b("y")), 1)]);
        // Nothing left of that kind: one reply without a name, with the patterns' count.
        let c = ps.unsubscribe(1, &ia, Kind::Channel, None);
        assert_eq!(c.replies, vec![(None, 1)]);
        let c = ps.unsubscribe(1, &ia, Kind::Pattern, Some(&names(&["nope", "x*"])));
        assert_eq!(c.replies, vec![(Some(b("nope")), 1), (Some(b("x*")), 0)]);
        assert_eq!(ps.counts(), (0, 0, 0));
        assert!(ps.state.read().clients.is_empty());
    }

    /// A slot leaving this node's shard ends its shard channels' subscriptions as Redis's
    /// `removeChannelsInSlot` (recorded from redis-server 7.0.15: `sunsubscribe` per
    /// channel in name order with the shard channels left; other subscriptions stay).
    #[test]
    fn unsubscribing_a_slot_tells_each_subscriber() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        let (ib, b2) = client(2);
        // "news" and "{news}y" are slot 5161, "a" 15495.
        ps.subscribe(&a, Kind::Shard, &names(&["{news}y", "news", "a"]));
        ps.subscribe(&a, Kind::Channel, &names(&["plain"]));
        ps.subscribe(&b2, Kind::Shard, &names(&["news"]));
        assert_eq!(ps.shard_slots(), [5161, 15495]);
        a.take();
        b2.take();
        ps.unsubscribe_slots(&[5161, 7], OutputLimit::default());
        assert_eq!(
            &a.take()[..],
            &b"*3\r\n$12\r\nsunsubscribe\r\n$4\r\nnews\r\n:2\r\n\
               *3\r\n$12\r\nsunsubscribe\r\n$7\r\n{news}y\r\n:1\r\n"[..]
        );
        assert_eq!(
            &b2.take()[..],
            &b"*3\r\n$12\r\nsunsubscribe\r\n$4\r\nnews\r\n:0\r\n"[..]
        );
        assert_eq!(ps.shard_slots(), [15495]);
        assert_eq!(ps.numsub(Kind::Shard, b"news"), 0);
        assert!(ia.is_subscriber() && !ib.is_subscriber());
        assert!(!ps.state.read().clients.contains_key(&2));
        // A later SPUBLISH to the channel reaches nobody; the other slot's still works.
        let mut own = BytesMut::new();
        let limit = OutputLimit::default();
        assert_eq!(
            ps.publish(Kind::Shard, b"news", b"m", limit, 0, &mut own, false),
            0
        );
        assert_eq!(
            ps.publish(Kind::Shard, b"a", b"m", limit, 0, &mut own, false),
            1
        );
        // Unsubscribing by hand keeps the index too.
        ps.unsubscribe(1, &ia, Kind::Shard, None);
        assert!(ps.shard_slots().is_empty());
    }

    #[test]
    fn publish_counts_each_matching_subscription() {
        let ps = PubSub::default();
        let (_, a) = client(1);
        let (_, b2) = client(2);
        ps.subscribe(&a, Kind::Channel, &names(&["news"]));
        ps.subscribe(&a, Kind::Pattern, &names(&["n*", "*"]));
        ps.subscribe(&b2, Kind::Pattern, &names(&["n*"]));
        assert_eq!(publish(&ps, "news", "hi"), 4);
        assert_eq!(publish(&ps, "other", "hi"), 1);
        let got = a.take();
        assert_eq!(
            &got[..],
            &b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
               *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
               *4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
               *4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$5\r\nother\r\n$2\r\nhi\r\n"[..]
        );
        b2.set_resp3(true);
        publish(&ps, "nx", "m");
        assert_eq!(
            &b2.take()[..],
            &b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
               >4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$2\r\nnx\r\n$1\r\nm\r\n"[..]
        );
    }

    #[test]
    fn own_messages_go_to_the_publisher_reply() {
        let ps = PubSub::default();
        let (_, a) = client(1);
        ps.subscribe(&a, Kind::Channel, &names(&["c"]));
        let mut own = BytesMut::new();
        let n = ps.publish(
            Kind::Channel,
            b"c",
            b"m",
            OutputLimit::default(),
            1,
            &mut own,
            true,
        );
        assert_eq!(n, 1);
        assert_eq!(&own[..], b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n");
        assert!(a.take().is_empty());
    }

    #[test]
    fn change_takes_earlier_messages_first() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        ps.subscribe(&a, Kind::Channel, &names(&["c"]));
        publish(&ps, "c", "before");
        let c = ps.unsubscribe(1, &ia, Kind::Channel, None);
        assert!(c.pending.ends_with(b"before\r\n"));
        assert_eq!(publish(&ps, "c", "after"), 0);
        assert!(a.take().is_empty());
    }

    #[test]
    fn leave_removes_everything() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        let (_, b2) = client(2);
        ps.subscribe(&a, Kind::Channel, &names(&["c", "d"]));
        ps.subscribe(&a, Kind::Pattern, &names(&["p*"]));
        ps.subscribe(&b2, Kind::Channel, &names(&["c"]));
        ps.leave(1, &ia);
        assert_eq!(ps.counts(), (1, 0, 0));
        assert_eq!(ps.numsub(Kind::Channel, b"c"), 1);
        assert_eq!(ps.numsub(Kind::Channel, b"d"), 0);
        assert_eq!(ps.channels(Kind::Channel, None), vec![b("c")]);
        assert_eq!((ia.sub(), ia.psub()), (0, 0));
    }

    #[test]
    fn channels_filter_by_pattern() {
        let ps = PubSub::default();
        let (_, a) = client(1);
        ps.subscribe(&a, Kind::Channel, &names(&["news.a", "news.b", "sport"]));
        let mut v = ps.channels(Kind::Channel, Some(b"news.*"));
        v.sort();
        assert_eq!(v, names(&["news.a", "news.b"]));
        assert_eq!(ps.channels(Kind::Channel, Some(b"[")).len(), 0);
    }

    #[test]
    fn hard_limit_kills_the_subscriber() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        ps.subscribe(&a, Kind::Channel, &names(&["c"]));
        let limit = OutputLimit {
            hard_bytes: 100,
            soft_bytes: 0,
            soft_secs: 0,
        };
        let mut own = BytesMut::new();
        // Still counted while it has not left; the outbox is dropped.
        for _ in 0..5 {
            assert_eq!(
                ps.publish(Kind::Channel, b"c", &[b'x'; 30], limit, 0, &mut own, false),
                1
            );
        }
        assert!(ia.is_killed());
        assert!(a.take().is_empty());
    }

    #[test]
    fn soft_limit_kills_after_its_seconds() {
        let ps = PubSub::default();
        let (ia, a) = client(1);
        ps.subscribe(&a, Kind::Channel, &names(&["c"]));
        let limit = OutputLimit {
            hard_bytes: 0,
            soft_bytes: 10,
            soft_secs: 0,
        };
        let mut own = BytesMut::new();
        ps.publish(
            Kind::Channel,
            b"c",
            b"0123456789",
            limit,
            0,
            &mut own,
            false,
        );
        assert!(!ia.is_killed(), "the soft limit starts its clock");
        std::thread::sleep(Duration::from_millis(1100));
        ps.publish(
            Kind::Channel,
            b"c",
            b"0123456789",
            limit,
            0,
            &mut own,
            false,
        );
        assert!(ia.is_killed());
    }

    #[test]
    fn shard_channels_are_their_own_namespace() {
        let ps = PubSub::default();
        let (_, a) = client(1);
        let (_, b2) = client(2);
        let c = ps.subscribe(&a, Kind::Shard, &names(&["s1", "s2"]));
        // A shard confirmation counts shard channels only.
        assert_eq!(c.replies, vec![(Some(b("s1")), 1), (Some(b("s2")), 2)]);
        ps.subscribe(&a, Kind::Channel, &names(&["s1"]));
        let c = ps.subscribe(&b2, Kind::Pattern, &names(&["s*"]));
        assert_eq!(c.replies, vec![(Some(b("s*")), 1)]);
        assert_eq!(ps.counts(), (1, 1, 2));
        let mut own = BytesMut::new();
        let limit = OutputLimit::default();
        // SPUBLISH reaches shard subscribers only; PUBLISH never reaches them.
        assert_eq!(
            ps.publish(Kind::Shard, b"s1", b"m", limit, 9, &mut own, false),
            1
        );
        assert!(a.take().windows(6).any(|w| w == b"smessa"));
        assert_eq!(
            ps.publish(Kind::Channel, b"s1", b"m", limit, 9, &mut own, false),
            2
        );
        assert_eq!(ps.numsub(Kind::Shard, b"s2"), 1);
        assert_eq!(ps.channels(Kind::Shard, Some(b"s?")).len(), 2);
        // SUNSUBSCRIBE of all: the client keeps its channel, so stays subscribed.
        let c = ps.unsubscribe(1, &a.info, Kind::Shard, None);
        assert_eq!(c.replies, vec![(Some(b("s1")), 1), (Some(b("s2")), 0)]);
        assert_eq!(c.total, 1);
        let c = ps.unsubscribe(1, &a.info, Kind::Shard, None);
        assert_eq!(c.replies, vec![(None, 0)]);
        // The pattern subscriber got PUBLISH's message, not SPUBLISH's.
        let pending = ps.leave(2, &b2.info);
        assert!(pending.starts_with(b"*4\r\n$8\r\npmessage"));
        assert_eq!(ps.counts(), (1, 0, 0));
    }
}
