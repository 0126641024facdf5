//! LATENCY LATEST, HISTORY, RESET and HELP over the latency monitor (`crate::latency`):
//! Redis's replies; HISTOGRAM over the per-command histograms
//! (`crate::latency_histogram`); GRAPH and DOCTOR's texts (`crate::latency_report`).
//!
//! Layer: commands (above services; below execution).

use super::{cmd, reply_help, Args, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[
    cmd("latency|latest", latest),
    cmd("latency|history", history),
    cmd("latency|reset", reset),
    cmd("latency|help", help),
    cmd("latency|histogram", histogram),
    cmd("latency|graph", graph),
    cmd("latency|doctor", doctor),
];

fn graph(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let event = args.next_bytes()?;
    let Some(series) = ctx.shared.latency.history(&event) else {
        let mut msg = b"ERR No samples available for event '".to_vec();
        msg.extend_from_slice(&event);
        msg.push(b'\'');
        return Err(super::CmdError::reply_bytes(msg));
    };
    let name = String::from_utf8_lossy(&event);
    let now_s = crate::store::now_ms() / 1000;
    let text = crate::latency_report::graph(&name, &series, now_s);
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

fn doctor(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let events = ctx.shared.latency.snapshot();
    let input = crate::latency_report::DoctorInput {
        threshold_ms: ctx.shared.latency.threshold_ms(),
        slowlog_log_slower_than: ctx.shared.config.read().slowlog_log_slower_than,
        huge_pages: crate::latency_report::huge_pages_in_use(),
    };
    let now_s = crate::store::now_ms() / 1000;
    let text = crate::latency_report::doctor(&events, now_s, &input);
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

/// LATENCY HISTOGRAM [command ...] (Redis's `latencySpecificCommandsFillCDF` and
/// `latencyAllCommandsFillCDF`): per command with samples, its calls and cumulative
/// distribution; a container names its subcommands; unknown names are skipped.
fn histogram(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let all = ctx.shared.latency.histograms.merged();
    let names: Vec<&'static str> = if args.is_done() {
        all.keys().copied().collect()
    } else {
        let table = super::table();
        let mut v = Vec::new();
        for arg in args.rest() {
            let mut parts = arg.splitn(2, |&b| b == b'|');
            let top = parts.next().and_then(|n| table.get(n));
            let spec = match (top, parts.next()) {
                (Some(t), Some(sub)) => t.subcommand(sub),
                (t, None) => t,
                (None, _) => None,
            };
            let Some(spec) = spec else { continue };
            if all.contains_key(spec.name) {
                v.push(spec.name);
            }
            for (_, s) in &spec.subcommands {
                if all.contains_key(s.name) {
                    v.push(s.name);
                }
            }
        }
        v
    };
    ctx.reply.map(names.len());
    for name in names {
        let Some(h) = all.get(name) else { continue };
        let buckets = crate::latency_histogram::cdf(h);
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.map(2);
        ctx.reply.bulk(b"calls");
        ctx.reply.int(h.len() as i64);
        ctx.reply.bulk(b"histogram_usec");
        ctx.reply.map(buckets.len());
        for (us, count) in buckets {
            ctx.reply.int(us as i64);
            ctx.reply.int(count as i64);
        }
    }
    Ok(())
}

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
