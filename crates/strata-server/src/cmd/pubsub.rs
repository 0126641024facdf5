//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB.
//!
//! They touch no keys and run on the connection's thread; the registry is `pubsub.rs`.
//! Confirmations are pushes (`>` in RESP3, arrays in RESP2), one per channel or pattern,
//! each with the client's channel plus pattern count after it, as Redis's
//! `addReplyPubsubSubscribed`. Shard channels (SSUBSCRIBE, SPUBLISH) are not built: PUBSUB
//! SHARDCHANNELS and SHARDNUMSUB answer as Redis does when no shard channel exists.

use super::flag::*;
use super::{reply_help, Args, CmdError, CmdResult, Ctx, Spec};
use crate::protocol::reply::Proto;
use crate::pubsub::{Change, Kind, Subscriber};
use bytes::{Bytes, BytesMut};

const SUB_FLAGS: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;
const INTROSPECT: u32 = PUBSUB | LOADING | STALE;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    since: &'static str,
    summary: &'static str,
    handler: super::Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys: (0, 0, 0),
        group: "pubsub",
        since,
        summary,
        handler,
        subcommands: &[],
    }
}

pub static COMMANDS: &[Spec] = &[
    spec(
        "subscribe",
        -2,
        SUB_FLAGS,
        "2.0.0",
        "Listen for messages published to the given channels",
        subscribe,
    ),
    spec(
        "unsubscribe",
        -1,
        SUB_FLAGS,
        "2.0.0",
        "Stop listening for messages posted to the given channels",
        unsubscribe,
    ),
    spec(
        "psubscribe",
        -2,
        SUB_FLAGS,
        "2.0.0",
        "Listen for messages published to channels matching the given patterns",
        psubscribe,
    ),
    spec(
        "punsubscribe",
        -1,
        SUB_FLAGS,
        "2.0.0",
        "Stop listening for messages posted to channels matching the given patterns",
        punsubscribe,
    ),
    spec(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST,
        "2.0.0",
        "Post a message to a channel",
        publish,
    ),
    Spec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        keys: (0, 0, 0),
        group: "pubsub",
        since: "2.8.0",
        summary: "A container for Pub/Sub commands",
        handler: pubsub_container,
        subcommands: &[
            spec(
                "channels",
                -2,
                INTROSPECT,
                "2.8.0",
                "List active channels",
                channels,
            ),
            spec(
                "numpat",
                2,
                INTROSPECT,
                "2.8.0",
                "Get the count of unique patterns pattern subscriptions",
                numpat,
            ),
            spec(
                "numsub",
                -2,
                INTROSPECT,
                "2.8.0",
                "Get the count of subscribers for channels",
                numsub,
            ),
            spec(
                "shardchannels",
                -2,
                INTROSPECT,
                "7.0.0",
                "List active shard channels",
                shardchannels,
            ),
            spec(
                "shardnumsub",
                -2,
                INTROSPECT,
                "7.0.0",
                "Get the count of subscribers for shard channels",
                shardnumsub,
            ),
            spec(
                "help",
                2,
                LOADING | STALE,
                "6.2.0",
                "Show helpful text about the different subcommands",
                help,
            ),
        ],
    },
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

fn publish(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let channel = args.next_bytes()?;
    let message = args.next_bytes()?;
    let limit = ctx.shared.config.read().output_limits[2];
    let mut own = BytesMut::new();
    let n = ctx.shared.pubsub.publish(
        &channel,
        &message,
        limit,
        ctx.conn.id,
        &mut own,
        ctx.reply.proto == Proto::Resp3,
    );
    ctx.reply.raw(&own);
    ctx.reply.int(n as i64);
    Ok(())
}

fn pubsub_container(_ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    // Reached only without a subcommand, which the arity check refuses first.
    Err(CmdError::reply(
        "ERR wrong number of arguments for 'pubsub' command",
    ))
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
    at_most_one_pattern(args)?;
    let pattern = if args.is_done() {
        None
    } else {
        Some(args.next_bytes()?)
    };
    let list = ctx.shared.pubsub.channels(pattern.as_deref());
    ctx.reply.array(list.len());
    for c in list {
        ctx.reply.bulk(&c);
    }
    Ok(())
}

fn numpat(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let (_, patterns) = ctx.shared.pubsub.counts();
    ctx.reply.int(patterns as i64);
    Ok(())
}

fn numsub(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    ctx.reply.array(names.len() * 2);
    for n in names {
        ctx.reply.bulk(&n);
        ctx.reply.int(ctx.shared.pubsub.numsub(&n) as i64);
    }
    Ok(())
}

fn shardchannels(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    at_most_one_pattern(args)?;
    ctx.reply.array(0);
    Ok(())
}

fn shardnumsub(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    ctx.reply.array(names.len() * 2);
    for n in names {
        ctx.reply.bulk(&n);
        ctx.reply.int(0);
    }
    Ok(())
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
