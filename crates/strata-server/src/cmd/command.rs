//! COMMAND and its subcommands (COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP): the
//! command table (`table.rs`) as Redis 7.0 replies it. Every field comes from the table's
//! metadata, so what COMMAND says is what the dispatcher, the router and EXEC act on.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::table::{key_flag, keys, BeginSearch, DocArg, FindKeys, KeySpec};
use super::{all_commands, cmd, find_command, flag, reply_help, table, Found};
use super::{Args, CmdError, CmdResult, Ctx, Entry, Spec};
use crate::glob;
use crate::protocol::reply::ReplyBuf;
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd("command", command),
    cmd("command|count", command_count),
    cmd("command|info", command_info),
    cmd("command|docs", command_docs),
    cmd("command|list", command_list),
    cmd("command|getkeys", command_getkeys),
    cmd("command|getkeysandflags", command_getkeysandflags),
    cmd("command|help", command_help),
];

/// Strings as a RESP3 set of simple strings (flags, categories).
fn simple_set(r: &mut ReplyBuf, items: &[String]) {
    r.set(items.len());
    for i in items {
        r.simple(i);
    }
}

/// Redis's `addReplyCommandInfo`: name, arity, flags, first key, last key, step, ACL
/// categories, tips, key specs, subcommands.
fn reply_info(r: &mut ReplyBuf, s: &Spec) {
    let m = s.meta;
    r.array(10);
    r.bulk(s.name.as_bytes());
    r.int(i64::from(m.arity));
    simple_set(r, &m.flags);
    for n in m.legacy_range {
        r.int(i64::from(n));
    }
    simple_set(r, &m.acl_categories);
    r.set(m.tips.len());
    for t in &m.tips {
        r.bulk(t.as_bytes());
    }
    // Redis 7.0 replies the key specs as a set, and "no subcommands" as an empty set.
    r.set(m.key_specs.len());
    for ks in &m.key_specs {
        reply_key_spec(r, ks);
    }
    if s.subcommands.is_empty() {
        r.set(0);
    } else {
        r.array(s.subcommands.len());
        for (_, sub) in &s.subcommands {
            reply_info(r, sub);
        }
    }
}

/// Redis's `addReplyCommandKeySpecs`: one key spec as a map.
fn reply_key_spec(r: &mut ReplyBuf, ks: &KeySpec) {
    r.map(3 + usize::from(ks.notes.is_some()));
    if let Some(n) = &ks.notes {
        r.bulk(b"notes");
        r.bulk(n.as_bytes());
    }
    r.bulk(b"flags");
    simple_set(r, &ks.flags);
    r.bulk(b"begin_search");
    r.map(2);
    r.bulk(b"type");
    match &ks.begin_search {
        BeginSearch::Index { index } => {
            r.bulk(b"index");
            r.bulk(b"spec");
            r.map(1);
            r.bulk(b"index");
            r.int(i64::from(*index));
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            r.bulk(b"keyword");
            r.bulk(b"spec");
            r.map(2);
            r.bulk(b"keyword");
            r.bulk(keyword.as_bytes());
            r.bulk(b"startfrom");
            r.int(i64::from(*startfrom));
        }
        BeginSearch::Unknown {} => {
            r.bulk(b"unknown");
            r.bulk(b"spec");
            r.map(0);
        }
    }
    r.bulk(b"find_keys");
    r.map(2);
    r.bulk(b"type");
    let fields: &[(&str, i32)] = match &ks.find_keys {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => {
            r.bulk(b"range");
            &[
                ("lastkey", *lastkey),
                ("keystep", *keystep),
                ("limit", *limit),
            ]
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => {
            r.bulk(b"keynum");
            &[
                ("keynumidx", *keynumidx),
                ("firstkey", *firstkey),
                ("keystep", *keystep),
            ]
        }
        FindKeys::Unknown {} => {
            r.bulk(b"unknown");
            &[]
        }
    };
    r.bulk(b"spec");
    r.map(fields.len());
    for (name, v) in fields {
        r.bulk(name.as_bytes());
        r.int(i64::from(*v));
    }
}

fn command(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let all = all_commands();
    ctx.reply.array(all.len());
    for s in all {
        reply_info(ctx.reply, s);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(all_commands().len() as i64);
    Ok(())
}

/// A command or `container|sub` by name, as Redis's `lookupCommandBySds`.
fn by_name(name: &[u8]) -> Option<&'static Spec> {
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = table().get(parts.next()?)?;
    match parts.next() {
        None => Some(top),
        Some(sub) => top.subcommand(sub),
    }
}

fn command_info(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    if names.is_empty() {
        return command(ctx, args);
    }
    ctx.reply.array(names.len());
    for n in names {
        match by_name(&n) {
            Some(s) => reply_info(ctx.reply, s),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

/// Redis's `addReplyCommandDocs`: the fields a command has, in Redis's order.
fn reply_docs(r: &mut ReplyBuf, s: &Spec) {
    let d = &s.meta.docs;
    let strings = [
        ("summary", &d.summary),
        ("since", &d.since),
        ("group", &d.group),
        ("complexity", &d.complexity),
    ];
    let present = strings.iter().filter(|(_, v)| v.is_some()).count();
    let fields = present
        + usize::from(!d.doc_flags.is_empty())
        + usize::from(d.deprecated_since.is_some())
        + usize::from(d.replaced_by.is_some())
        + usize::from(!d.history.is_empty())
        + usize::from(!d.arguments.is_empty())
        + usize::from(!s.subcommands.is_empty());
    r.map(fields);
    for (name, v) in strings {
        if let Some(v) = v {
            r.bulk(name.as_bytes());
            r.bulk(v.as_bytes());
        }
    }
    if !d.doc_flags.is_empty() {
        r.bulk(b"doc_flags");
        simple_set(r, &d.doc_flags);
    }
    for (name, v) in [
        ("deprecated_since", &d.deprecated_since),
        ("replaced_by", &d.replaced_by),
    ] {
        if let Some(v) = v {
            r.bulk(name.as_bytes());
            r.bulk(v.as_bytes());
        }
    }
    if !d.history.is_empty() {
        r.bulk(b"history");
        r.set(d.history.len());
        for (version, change) in &d.history {
            r.array(2);
            r.bulk(version.as_bytes());
            r.bulk(change.as_bytes());
        }
    }
    if !d.arguments.is_empty() {
        r.bulk(b"arguments");
        reply_doc_args(r, &d.arguments);
    }
    if !s.subcommands.is_empty() {
        r.bulk(b"subcommands");
        r.map(s.subcommands.len());
        for (_, sub) in &s.subcommands {
            r.bulk(sub.name.as_bytes());
            reply_docs(r, sub);
        }
    }
}

/// Redis's `addReplyCommandArgList`: each argument a map, absent fields left out.
fn reply_doc_args(r: &mut ReplyBuf, args: &[DocArg]) {
    r.array(args.len());
    for a in args {
        let optional = [
            ("token", &a.token),
            ("summary", &a.summary),
            ("since", &a.since),
            ("deprecated_since", &a.deprecated_since),
        ];
        let fields = 2
            + usize::from(a.key_spec_index.is_some())
            + optional.iter().filter(|(_, v)| v.is_some()).count()
            + usize::from(!a.flags.is_empty())
            + usize::from(!a.arguments.is_empty());
        r.map(fields);
        r.bulk(b"name");
        r.bulk(a.name.as_bytes());
        r.bulk(b"type");
        r.bulk(a.kind.as_bytes());
        if let Some(i) = a.key_spec_index {
            r.bulk(b"key_spec_index");
            r.int(i);
        }
        for (name, v) in optional {
            if let Some(v) = v {
                r.bulk(name.as_bytes());
                r.bulk(v.as_bytes());
            }
        }
        if !a.flags.is_empty() {
            r.bulk(b"flags");
            simple_set(r, &a.flags);
        }
        if !a.arguments.is_empty() {
            r.bulk(b"arguments");
            reply_doc_args(r, &a.arguments);
        }
    }
}

fn command_docs(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    let specs: Vec<&Spec> = if names.is_empty() {
        all_commands().to_vec()
    } else {
        names.iter().filter_map(|n| by_name(n)).collect()
    };
    ctx.reply.map(specs.len());
    for s in specs {
        ctx.reply.bulk(s.name.as_bytes());
        reply_docs(ctx.reply, s);
    }
    Ok(())
}

/// Every command and subcommand Strata implements.
fn every_spec() -> impl Iterator<Item = &'static Spec> {
    all_commands()
        .iter()
        .flat_map(|s| std::iter::once(*s).chain(s.subcommands.iter().map(|(_, sub)| *sub)))
}

fn command_list(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut specs: Vec<&Spec> = every_spec().collect();
    if !args.is_done() {
        if !args.eat("FILTERBY") {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        let kind = args
            .next_keyword()
            .ok_or_else(|| CmdError::reply(ERR_SYNTAX))?;
        let arg = args.next_bytes()?;
        args.finish()?;
        match kind.as_str() {
            "MODULE" => specs.clear(), // no modules
            "ACLCAT" => {
                let cat = format!("@{}", String::from_utf8_lossy(&arg).to_ascii_lowercase());
                specs.retain(|s| s.meta.acl_categories.contains(&cat));
            }
            "PATTERN" => specs.retain(|s| glob::matches(&arg, s.name.as_bytes(), true)),
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    ctx.reply.array(specs.len());
    for s in specs {
        ctx.reply.bulk(s.name.as_bytes());
    }
    Ok(())
}

/// Redis's `getKeysSubcommandImpl`: the keys (and their flags) a command line would touch.
fn getkeys(ctx: &mut Ctx<'_>, args: &mut Args, with_flags: bool) -> CmdResult {
    let argv: Vec<Bytes> = args.rest().to_vec();
    let spec = match find_command(&argv) {
        Found::Command(s, _) if s.handler.is_some() => s,
        _ => return Err(CmdError::reply("ERR Invalid command specified")),
    };
    if !spec.has_keys() {
        return Err(CmdError::reply("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(argv.len()) {
        return Err(CmdError::reply(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let found = keys(spec, &argv).unwrap_or_default();
    if found.is_empty() {
        if spec.has(flag::NO_MANDATORY_KEYS) {
            ctx.reply.array(0);
            return Ok(());
        }
        return Err(CmdError::reply(
            "ERR Invalid arguments specified for command",
        ));
    }
    ctx.reply.array(found.len());
    for k in found {
        if with_flags {
            ctx.reply.array(2);
            ctx.reply.bulk(&argv[k.pos]);
            let names: Vec<&str> = key_flag::names(k.flags).collect();
            ctx.reply.set(names.len());
            for n in names {
                ctx.reply.simple(n);
            }
        } else {
            ctx.reply.bulk(&argv[k.pos]);
        }
    }
    Ok(())
}

fn command_getkeys(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    getkeys(ctx, args, false)
}

fn command_getkeysandflags(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    getkeys(ctx, args, true)
}

fn command_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}
