//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB.
//!
//! They touch no keys and run on the connection's thread; the registry is `pubsub.rs`.
//! Confirmations are pushes (`>` in RESP3, arrays in RESP2), one per channel or pattern,
//! each with the client's channel plus pattern count after it, as Redis's
//! `addReplyPubsubSubscribed`. Shard channels (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH, PUBSUB
//! SHARDCHANNELS/SHARDNUMSUB) are a namespace of their own; outside cluster mode every
//! shard channel lives on this node.
//!
//! Layer: commands (above services; below execution).

use super::table::traits::*;
use super::{cmd, cmd_with, reply_help, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::reply::Proto;
use crate::pubsub::{Change, Kind, Subscriber};
use bytes::{Bytes, BytesMut};

pub static COMMANDS: &[Entry] = &[
    cmd_with("subscribe", subscribe, WHILE_SUBSCRIBED),
    cmd_with("unsubscribe", unsubscribe, WHILE_SUBSCRIBED),
    cmd_with("psubscribe", psubscribe, WHILE_SUBSCRIBED),
    cmd_with("punsubscribe", punsubscribe, WHILE_SUBSCRIBED),
    cmd_with("ssubscribe", ssubscribe, WHILE_SUBSCRIBED),
    cmd_with("sunsubscribe", sunsubscribe, WHILE_SUBSCRIBED),
    cmd_with("publish", publish, MAY_REPLICATE),
    cmd_with("spublish", spublish, MAY_REPLICATE),
    cmd("pubsub|channels", channels),
    cmd("pubsub|numpat", numpat),
    cmd("pubsub|numsub", numsub),
    cmd("pubsub|shardchannels", shardchannels),
    cmd("pubsub|shardnumsub", shardnumsub),
    cmd("pubsub|help", help),
];

/// Writes the messages published before the change, then its confirmations.
fn reply_change(ctx: &mut Ctx<'_>, word: &str, c: Change) {
    ctx.reply.raw(&c.pending);
    for (name, count) in c.replies {
        ctx.reply.push(3);
        ctx.reply.bulk(word.as_bytes());
        ctx.reply.opt_bulk(name.as_deref());
        ctx.reply.int(count as i64);
    }
    if c.total == 0 {
        ctx.conn.sub = None;
    }
}

fn subscribe_to(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind, word: &str) -> CmdResult {
    let names: Vec<Bytes> = args.rest().to_vec();
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let sub = ctx
        .conn
        .sub
        .get_or_insert_with(|| Subscriber::new(ctx.conn.info.clone(), resp3))
        .clone();
    let c = ctx.shared.pubsub.subscribe(&sub, kind, &names);
    reply_change(ctx, word, c);
    Ok(())
}

fn unsubscribe_from(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind, word: &str) -> CmdResult {
    let names: Vec<Bytes> = args.rest().to_vec();
    let names = (!names.is_empty()).then_some(&names[..]);
    let c = ctx
        .shared
        .pubsub
        .unsubscribe(ctx.conn.id, &ctx.conn.info, kind, names);
    reply_change(ctx, word, c);
    Ok(())
}

fn subscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    subscribe_to(ctx, args, Kind::Channel, "subscribe")
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    subscribe_to(ctx, args, Kind::Pattern, "psubscribe")
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Channel, "unsubscribe")
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Pattern, "punsubscribe")
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    subscribe_to(ctx, args, Kind::Shard, "ssubscribe")
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Shard, "sunsubscribe")
}

fn publish(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    publish_to(ctx, args, Kind::Channel)
}

fn spublish(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    publish_to(ctx, args, Kind::Shard)
}

fn publish_to(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind) -> CmdResult {
    let channel = args.next_bytes()?;
    let message = args.next_bytes()?;
    let limit = ctx.shared.config.read().output_limits[2];
    let mut own = BytesMut::new();
    let n = ctx.shared.pubsub.publish(
        kind,
        &channel,
        &message,
        limit,
        ctx.conn.id,
        &mut own,
        ctx.reply.proto == Proto::Resp3,
    );
    ctx.reply.raw(&own);
    ctx.reply.int(n as i64);
    // Cluster mode: every other node's subscribers get it too, over the bus (the reply
    // counts this node's receivers only, as Redis's).
    if let Some(c) = &ctx.shared.cluster {
        c.publish(crate::cluster::Published {
            shard: kind == Kind::Shard,
            channel,
            message,
        });
    }
    Ok(())
}

/// The cluster's way to this server's shard channel subscriptions
/// (`cluster/shard_channels.rs`): a slot that leaves this node's shard ends them, each
/// subscriber told under the `pubsub` output limit of the moment.
pub struct SlotSubscriptions(pub std::sync::Weak<crate::server::Shared>);

impl crate::cluster::shard_channels::SlotSubscriptions for SlotSubscriptions {
    fn slots(&self) -> Vec<u16> {
        self.0
            .upgrade()
            .map_or_else(Vec::new, |s| s.pubsub.shard_slots())
    }

    fn lost(&self, slots: &[u16]) {
        if let Some(s) = self.0.upgrade() {
            let limit = s.config.read().output_limits[2];
            s.pubsub.unsubscribe_slots(slots, limit);
        }
    }
}

/// Redis's `addReplySubcommandSyntaxError`: CHANNELS and SHARDCHANNELS take one optional
/// pattern, checked by the command rather than by its arity.
fn at_most_one_pattern(args: &Args) -> Result<(), CmdError> {
    if args.remaining() <= 1 {
        return Ok(());
    }
    let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    msg.extend_from_slice(super::cstr(args.sent(1).map_or(&b""[..], |s| s), 128));
    msg.extend_from_slice(b"'. Try PUBSUB HELP.");
    Err(CmdError::reply_bytes(msg))
}

fn channels(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    list_channels(ctx, args, Kind::Channel)
}

fn list_channels(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind) -> CmdResult {
    at_most_one_pattern(args)?;
    let pattern = if args.is_done() {
        None
    } else {
        Some(args.next_bytes()?)
    };
    let list = ctx.shared.pubsub.channels(kind, pattern.as_deref());
    ctx.reply.array(list.len());
    for c in list {
        ctx.reply.bulk(&c);
    }
    Ok(())
}

fn numpat(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let (_, patterns, _) = ctx.shared.pubsub.counts();
    ctx.reply.int(patterns as i64);
    Ok(())
}

fn numsub(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_subscribers(ctx, args, Kind::Channel)
}

fn count_subscribers(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind) -> CmdResult {
    let names = args.rest().to_vec();
    ctx.reply.array(names.len() * 2);
    for n in names {
        ctx.reply.bulk(&n);
        ctx.reply.int(ctx.shared.pubsub.numsub(kind, &n) as i64);
    }
    Ok(())
}

fn shardchannels(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    list_channels(ctx, args, Kind::Shard)
}

fn shardnumsub(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_subscribers(ctx, args, Kind::Shard)
}

fn help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> \
             (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
