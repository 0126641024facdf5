//! ACL commands (Redis's acl.c `aclCommand`), and the permission checks the dispatcher and
//! `redis.call` make through [`permit`] and [`permit_script`]. Users, rules and the ACL
//! file are `crate::acl`; this module is their protocol.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, find_command, Args, CmdError, CmdResult, Ctx, Entry, Found, Spec};
use crate::acl::log::{Context, Entry as LogEntry, Reason};
use crate::acl::selector::Denied;
use crate::acl::{commands, file, User, UserRef};
use crate::server::Shared;
use bytes::Bytes;
use std::time::Instant;

pub static COMMANDS: &[Entry] = &[
    cmd("acl|cat", cat),
    cmd("acl|deluser", deluser),
    cmd("acl|dryrun", dryrun),
    cmd("acl|genpass", genpass),
    cmd("acl|getuser", getuser),
    cmd("acl|help", help),
    cmd("acl|list", list),
    cmd("acl|load", load),
    cmd("acl|log", log),
    cmd("acl|save", save),
    cmd("acl|setuser", setuser),
    cmd("acl|users", users),
    cmd("acl|whoami", whoami),
];

const ERR_NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. \
     You may want to specify users via the ACL SETUSER command and then issue a CONFIG \
     REWRITE (assuming you have a Redis configuration file set) in order to store users in \
     the Redis configuration.";

/// The dispatcher's check (Redis's `processCommand`): `Err` holds the `-NOPERM` text, the
/// denial already logged. In MULTI the denial is logged with context `multi`; inside EXEC
/// (the rules changed since the command was queued) with Redis's EXEC-time text.
pub fn permit(ctx: &mut Ctx<'_>, spec: &Spec, argv: &[Bytes]) -> Result<(), Vec<u8>> {
    // The replication master's client has no user (Redis's `c->user == NULL`): its
    // commands are the master's, checked there.
    if ctx.conn.master {
        return Ok(());
    }
    let (denied, name) = match check(&ctx.conn.user, spec, argv) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let multi = ctx.conn.in_exec || ctx.conn.multi.is_some();
    let context = if multi {
        Context::Multi
    } else {
        Context::Toplevel
    };
    record(
        ctx.shared,
        &ctx.conn.info,
        denied,
        context,
        spec,
        argv,
        name,
    );
    let msg = if ctx.conn.in_exec {
        let why = match denied {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: {why}"
        )
    } else {
        match denied {
            Denied::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                spec.name
            ),
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys \
                 used as arguments"
                .to_string(),
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the \
                 channels used as arguments"
                .to_string(),
        }
    };
    Err(msg.into_bytes())
}

/// `redis.call`'s check of the script's caller (Redis's `scriptVerifyACL`): the error text
/// the call raises, the denial logged with context `lua`.
pub fn permit_script(
    shared: &Shared,
    conn: &super::ConnState,
    spec: &Spec,
    argv: &[Bytes],
) -> Result<(), String> {
    let (denied, name) = match check(&conn.user, spec, argv) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    record(shared, &conn.info, denied, Context::Lua, spec, argv, name);
    Err(match denied {
        Denied::Command => "ERR The user executing the script can't run this command or subcommand",
        Denied::Key(_) => {
            "ERR The user executing the script can't access at least one of the keys mentioned \
             in the command arguments"
        }
        Denied::Channel(_) => {
            "ERR The user executing the script can't publish to the channel mentioned in the \
             command"
        }
    }
    .to_string())
}

fn check(user: &UserRef, spec: &Spec, argv: &[Bytes]) -> Result<(), (Denied, Bytes)> {
    let u = user.read();
    u.check(spec, argv).map_err(|d| (d, u.name.clone()))
}

/// Adds a denial to the ACL log.
fn record(
    shared: &Shared,
    info: &crate::clients::ClientInfo,
    denied: Denied,
    context: Context,
    spec: &Spec,
    argv: &[Bytes],
    username: Bytes,
) {
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, spec.name.as_bytes().to_vec()),
        Denied::Key(p) => (Reason::Key, argv[p].to_vec()),
        Denied::Channel(p) => (Reason::Channel, argv[p].to_vec()),
    };
    add_log(shared, info, reason, context, object, username.to_vec());
}

fn add_log(
    shared: &Shared,
    info: &crate::clients::ClientInfo,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
) {
    let max_len = shared.config.read().acllog_max_len as usize;
    shared.acl.log.add(
        LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            at: Instant::now(),
            client_info: info.line(),
        },
        max_len,
    );
}

/// AUTH and HELLO ... AUTH: authenticates the connection as `user`, or logs the failure
/// (reason `auth`, the object the command's name as sent) and answers WRONGPASS.
pub fn authenticate(ctx: &mut Ctx<'_>, command: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    let found = ctx.shared.acl.get(user);
    if let Some(u) = found.filter(|u| u.read().password_ok(pass)) {
        ctx.conn.authenticated = true;
        ctx.conn.info.published.lock().user = Some(u.read().name.clone());
        ctx.conn.user = u;
        return Ok(());
    }
    let context = if ctx.conn.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    add_log(
        ctx.shared,
        &ctx.conn.info,
        Reason::Auth,
        context,
        command.to_vec(),
        user.to_vec(),
    );
    Err(CmdError::reply(
        "WRONGPASS invalid username-password pair or user is disabled.",
    ))
}

/// Closes the connections authenticated as any of `users` (they were deleted).
pub fn kill_clients_of(shared: &Shared, users: &[UserRef]) {
    if users.is_empty() {
        return;
    }
    for c in shared.clients.all() {
        let user = c.published.lock().user.clone();
        if let Some(name) = user {
            if users.iter().any(|u| u.read().name == name) {
                c.request_kill();
            }
        }
    }
}

/// Redis's `ACLKillPubsubClientsIfNeeded`: closes the connections of `user` subscribed to
/// a channel or pattern its rules no longer allow.
fn kill_pubsub_clients_if_needed(shared: &Shared, user: &UserRef) {
    let u = user.read().clone();
    if u.root.all_channels {
        return;
    }
    for c in shared.clients.all() {
        let name = c.published.lock().user.clone();
        let same = match &name {
            Some(n) => *n == u.name,
            None => &u.name[..] == b"default",
        };
        if !same || !c.is_subscriber() {
            continue;
        }
        let denied = shared
            .pubsub
            .subscriptions_of(c.id)
            .iter()
            .any(|(kind, ch)| {
                let pattern = *kind == crate::pubsub::Kind::Pattern;
                !std::iter::once(&u.root)
                    .chain(&u.selectors)
                    .any(|s| s.channel_allowed(ch, pattern))
            });
        if denied {
            c.request_kill();
        }
    }
}

fn setuser(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    if name.iter().any(|&c| c == b' ' || c == 0) {
        return Err(CmdError::reply(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let rules = crate::acl::user::merge_selectors(args.rest()).map_err(|first| {
        let mut m = b"ERR Unmatched parenthesis in acl selector starting at '".to_vec();
        m.extend_from_slice(&first);
        m.extend_from_slice(b"'.");
        CmdError::reply_bytes(m)
    })?;
    let all_channels = ctx.shared.config.read().acl_pubsub_all_channels;
    ctx.shared
        .acl
        .set_user(&name, &rules, all_channels)
        .map_err(|(op, e)| {
            let mut m = b"ERR Error in ACL SETUSER modifier '".to_vec();
            m.extend_from_slice(&op);
            m.extend_from_slice(format!("': {e}").as_bytes());
            CmdError::reply_bytes(m)
        })?;
    if let Some(u) = ctx.shared.acl.get(&name) {
        kill_pubsub_clients_if_needed(ctx.shared, &u);
    }
    ctx.reply.ok();
    Ok(())
}

fn getuser(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    let Some(u) = ctx.shared.acl.get(&name) else {
        ctx.reply.null();
        return Ok(());
    };
    let u = u.read().clone();
    let r = &mut *ctx.reply;
    r.map(6);
    r.bulk(b"flags");
    let flags = u.flags();
    r.set(flags.len());
    for f in flags {
        r.bulk(f.as_bytes());
    }
    r.bulk(b"passwords");
    r.array(u.passwords.len());
    for p in &u.passwords {
        r.bulk(p.as_bytes());
    }
    r.bulk(b"commands");
    r.bulk(u.root.describe_commands().as_bytes());
    r.bulk(b"keys");
    r.bulk(u.root.describe_keys().as_bytes());
    r.bulk(b"channels");
    r.bulk(u.root.describe_channels().as_bytes());
    r.bulk(b"selectors");
    r.array(u.selectors.len());
    for s in &u.selectors {
        r.map(3);
        r.bulk(b"commands");
        r.bulk(s.describe_commands().as_bytes());
        r.bulk(b"keys");
        r.bulk(s.describe_keys().as_bytes());
        r.bulk(b"channels");
        r.bulk(s.describe_channels().as_bytes());
    }
    Ok(())
}

fn deluser(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    if names.iter().any(|n| &n[..] == b"default") {
        return Err(CmdError::reply("ERR The 'default' user cannot be removed"));
    }
    let removed = ctx.shared.acl.delete(&names);
    kill_clients_of(ctx.shared, &removed);
    ctx.reply.int(removed.len() as i64);
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let users = ctx.shared.acl.users();
    ctx.reply.array(users.len());
    for u in users {
        let line = u.read().describe();
        ctx.reply.bulk(line.as_bytes());
    }
    Ok(())
}

fn users(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let users = ctx.shared.acl.users();
    ctx.reply.array(users.len());
    for u in users {
        let name = u.read().name.clone();
        ctx.reply.bulk(&name);
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let name = ctx.conn.user.read().name.clone();
    ctx.reply.bulk(&name);
    Ok(())
}

fn cat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let cats = commands::CATEGORIES;
    if args.is_done() {
        ctx.reply.array(cats.len());
        for c in cats {
            ctx.reply.bulk(c.as_bytes());
        }
        return Ok(());
    }
    let name = args.next_bytes()?;
    let Some(bit) = commands::category_bit(&name) else {
        let mut m = b"ERR Unknown category '".to_vec();
        m.extend_from_slice(&name);
        m.push(b'\'');
        return Err(CmdError::reply_bytes(m));
    };
    let names: Vec<&str> = commands::commands()
        .list
        .iter()
        .filter(|c| c.categories & bit != 0)
        .map(|c| c.name)
        .collect();
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

fn genpass(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let bits = if args.is_done() {
        256
    } else {
        args.next_i64()?
    };
    if bits <= 0 || bits > 4096 {
        return Err(CmdError::reply(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to 4096",
        ));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut raw = vec![0u8; chars.div_ceil(2)];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut raw);
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    ctx.reply.bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

fn log(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut count = 10;
    if !args.is_done() {
        let a = args.next_bytes()?;
        if a.eq_ignore_ascii_case(b"reset") {
            ctx.shared.acl.log.reset();
            ctx.reply.ok();
            return Ok(());
        }
        count = crate::protocol::parse::parse_i64(&a)
            .ok_or_else(|| CmdError::reply("ERR value is not an integer or out of range"))?;
    }
    let entries = ctx.shared.acl.log.newest(count.max(0) as usize);
    let now = Instant::now();
    let r = &mut *ctx.reply;
    r.array(entries.len());
    for e in entries {
        r.map(7);
        r.bulk(b"count");
        r.int(e.count as i64);
        r.bulk(b"reason");
        r.bulk(e.reason.name().as_bytes());
        r.bulk(b"context");
        r.bulk(e.context.name().as_bytes());
        r.bulk(b"object");
        r.bulk(&e.object);
        r.bulk(b"username");
        r.bulk(&e.username);
        r.bulk(b"age-seconds");
        let ms = now.saturating_duration_since(e.at).as_millis() as f64;
        r.double(ms / 1000.0);
        r.bulk(b"client-info");
        r.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    let argv = args.rest().to_vec();
    let Some(user) = ctx.shared.acl.get(&name) else {
        let mut m = b"ERR User '".to_vec();
        m.extend_from_slice(&name);
        m.extend_from_slice(b"' not found");
        return Err(CmdError::reply_bytes(m));
    };
    let spec = match find_command(&argv) {
        Found::Command(spec, _) => spec,
        _ => {
            let mut m = b"ERR Command '".to_vec();
            m.extend_from_slice(&argv[0]);
            m.extend_from_slice(b"' not found");
            return Err(CmdError::reply_bytes(m));
        }
    };
    if !spec.arity_ok(argv.len()) {
        return Err(CmdError::reply(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        )));
    }
    let denied = user.read().check(spec, &argv);
    let msg = match denied {
        Ok(()) => {
            ctx.reply.ok();
            return Ok(());
        }
        Err(Denied::Command) => format!(
            "This user has no permissions to run the '{}' command",
            spec.name
        )
        .into_bytes(),
        Err(Denied::Key(p)) => [
            &b"This user has no permissions to access the '"[..],
            &argv[p],
            b"' key",
        ]
        .concat(),
        Err(Denied::Channel(p)) => [
            &b"This user has no permissions to access the '"[..],
            &argv[p],
            b"' channel",
        ]
        .concat(),
    };
    ctx.reply.bulk(&msg);
    Ok(())
}

fn load(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let (path, all_channels) = {
        let c = ctx.shared.config.read();
        (c.aclfile.clone(), c.acl_pubsub_all_channels)
    };
    let path = path.ok_or_else(|| CmdError::reply(ERR_NO_ACLFILE))?;
    let users = file::load(&path, all_channels).map_err(|e| CmdError::reply(format!("ERR {e}")))?;
    let old = ctx.shared.acl.replace_all(users, all_channels);
    kill_clients_of(ctx.shared, &old);
    kill_pubsub_clients_if_needed(ctx.shared, &ctx.shared.acl.default_user());
    ctx.reply.ok();
    Ok(())
}

fn save(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let path = ctx.shared.config.read().aclfile.clone();
    let path = path.ok_or_else(|| CmdError::reply(ERR_NO_ACLFILE))?;
    let users: Vec<User> = ctx
        .shared
        .acl
        .users()
        .iter()
        .map(|u| u.read().clone())
        .collect();
    file::save(&path, &users).map_err(|_| {
        CmdError::reply(
            "ERR There was an error trying to save the ACLs. Please check the server logs for \
             more information",
        )
    })?;
    ctx.reply.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    super::reply_help(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}
