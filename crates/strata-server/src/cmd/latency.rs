//! LATENCY LATEST, HISTORY, RESET and HELP over the latency monitor (`crate::latency`):
//! Redis's replies. DOCTOR, GRAPH and HISTOGRAM are not built.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, reply_help, Args, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[
    cmd("latency|latest", latest),
    cmd("latency|history", history),
    cmd("latency|reset", reset),
    cmd("latency|help", help),
];

fn latest(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let events = ctx.shared.latency.snapshot();
    ctx.reply.array(events.len());
    for (name, s) in events {
        let (t, ms) = s.samples.back().copied().unwrap_or((0, 0));
        ctx.reply.array(4);
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.int(t as i64);
        ctx.reply.int(ms as i64);
        ctx.reply.int(s.max as i64);
    }
    Ok(())
}

fn history(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let event = args.next_bytes()?;
    let samples = ctx
        .shared
        .latency
        .history(&event)
        .map(|s| s.samples)
        .unwrap_or_default();
    ctx.reply.array(samples.len());
    for (t, ms) in samples {
        ctx.reply.array(2);
        ctx.reply.int(t as i64);
        ctx.reply.int(ms as i64);
    }
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    let n = if names.is_empty() {
        ctx.shared.latency.reset(None)
    } else {
        let refs: Vec<&[u8]> = names.iter().map(|n| &n[..]).collect();
        ctx.shared.latency.reset(Some(&refs))
    };
    ctx.reply.int(n as i64);
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}
