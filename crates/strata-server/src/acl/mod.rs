//! ACL users (Redis 7.0's `acl.c`, without the protocol): users and their rules
//! ([`user`], [`selector`]), the command space rules speak of ([`commands`]), the ACL log
//! ([`log`]) and the ACL file ([`file`]).
//!
//! **Where checks happen.** The dispatcher (`cmd::run`) checks every command against the
//! connection's user after the arity, authentication and MULTI checks and before anything
//! else, so plain commands, pipelines and commands routed to shard workers are all checked
//! there; a command queued in MULTI is checked when it is queued (a denial flags the
//! transaction, as Redis 7.0) and again inside EXEC; `redis.call` checks the script's
//! caller before dispatching (`cmd/scripting.rs`).
//!
//! **Concurrency.** The registry's map is behind one `RwLock`, taken to look a user up,
//! to change the set of users, or to list them. Each user is an `Arc<RwLock<User>>`
//! shared by the registry and the connections authenticated as it: ACL SETUSER changes it
//! in place (building the new value on a copy first, so a failed SETUSER changes nothing)
//! and every connection's next command sees the change. Deleting a user (DELUSER, ACL
//! LOAD) takes it out of the map and kills its connections through the client registry.
//!
//! Layer: services (above store and types; below commands).

pub mod commands;
pub mod file;
pub mod log;
pub mod selector;
pub mod user;

use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;
pub use user::User;

/// A user as connections hold it.
pub type UserRef = Arc<RwLock<User>>;

/// Why a rule was refused; `Display` gives Redis's texts (`ACLSetUserStringError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    NoSuchPassword,
    BadHash,
    AllKeys,
    AllChannels,
    FirstArgOfSubcommand,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::AllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of \
                 patterns"
            }
            RuleError::AllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
        })
    }
}

/// The users.
pub struct Acl {
    users: RwLock<BTreeMap<Bytes, UserRef>>,
    default: UserRef,
    pub log: log::Log,
}

impl Acl {
    /// A registry holding only the `default` user; `all_channels`: `acl-pubsub-default`.
    pub fn new(all_channels: bool) -> Acl {
        let default = Arc::new(RwLock::new(User::default_user(all_channels)));
        let mut users = BTreeMap::new();
        users.insert(Bytes::from_static(b"default"), default.clone());
        Acl {
            users: RwLock::new(users),
            default,
            log: log::Log::default(),
        }
    }

    /// The `default` user (new connections start as it).
    pub fn default_user(&self) -> UserRef {
        self.default.clone()
    }

    /// Redis's `authRequired`: new connections must authenticate while the default user
    /// needs a password or is disabled.
    pub fn auth_required(&self) -> bool {
        let d = self.default.read();
        !d.nopass || !d.enabled
    }

    pub fn get(&self, name: &[u8]) -> Option<UserRef> {
        self.users.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<UserRef> {
        self.users.read().values().cloned().collect()
    }

    /// ACL SETUSER: applies `rules` to the user named `name`, made if missing (with
    /// `acl-pubsub-default`). All or nothing.
    pub fn set_user(
        &self,
        name: &[u8],
        rules: &[Bytes],
        all_channels: bool,
    ) -> Result<(), (Bytes, RuleError)> {
        let mut users = self.users.write();
        let existing = users.get(name).cloned();
        let mut u = match &existing {
            Some(u) => u.read().clone(),
            None => User::new(name, all_channels),
        };
        u.apply_all(rules)?;
        match existing {
            Some(e) => *e.write() = u,
            None => {
                users.insert(Bytes::copy_from_slice(name), Arc::new(RwLock::new(u)));
            }
        }
        Ok(())
    }

    /// ACL DELUSER: removes the named users (never `default`); returns the removed ones.
    pub fn delete(&self, names: &[Bytes]) -> Vec<UserRef> {
        let mut users = self.users.write();
        names
            .iter()
            .filter(|n| &n[..] != b"default")
            .filter_map(|n| users.remove(n))
            .collect()
    }

    /// Replaces every user but keeps `default`'s identity (its connections stay): ACL LOAD
    /// and the `user` directives. Returns the users replaced.
    pub fn replace_all(&self, new: Vec<User>, all_channels: bool) -> Vec<UserRef> {
        let mut users = self.users.write();
        let mut map = BTreeMap::new();
        let mut default_set = false;
        for u in new {
            if &u.name[..] == b"default" {
                *self.default.write() = u;
                default_set = true;
            } else {
                map.insert(u.name.clone(), Arc::new(RwLock::new(u)));
            }
        }
        if !default_set {
            *self.default.write() = User::default_user(all_channels);
        }
        map.insert(Bytes::from_static(b"default"), self.default.clone());
        let old = std::mem::replace(&mut *users, map);
        old.into_iter()
            .filter(|(n, _)| &n[..] != b"default")
            .map(|(_, u)| u)
            .collect()
    }

    /// `requirepass`: the default user's password (none: `nopass`).
    pub fn set_default_password(&self, pass: Option<&str>) {
        let mut d = self.default.write();
        let _ = d.apply(b"resetpass");
        let _ = match pass {
            Some(p) => d.apply(format!(">{p}").as_bytes()),
            None => d.apply(b"nopass"),
        };
    }
}

/// The users a server starts with: the default user (`requirepass` its password), then the
/// ACL file's users or the config file's `user` lines. An error names the file's line or
/// the `user` line; the server does not start.
pub fn from_config(c: &crate::config::Config) -> Result<Acl, String> {
    let all_channels = c.acl_pubsub_all_channels;
    let acl = Acl::new(all_channels);
    acl.set_default_password(c.requirepass.as_deref());
    if let Some(path) = &c.aclfile {
        if !c.users.is_empty() {
            return Err(
                "Configuring Redis with users defined in redis.conf and at the same \
                 setting an ACL file path is invalid. This setup is very likely to lead to \
                 configuration errors and security holes, please define either an ACL file \
                 or declare users directly in your redis.conf, but not both."
                    .to_string(),
            );
        }
        let users = file::load(path, all_channels)?;
        acl.replace_all(users, all_channels);
        return Ok(acl);
    }
    for line in &c.users {
        let name = line[0].as_bytes();
        let words: Vec<Bytes> = line[1..]
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let declared = |e: String| {
            format!(
                "Error in user declaration '{}': {e}",
                String::from_utf8_lossy(name)
            )
        };
        let rules = user::merge_selectors(&words).map_err(|first| {
            declared(format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&first)
            ))
        })?;
        acl.set_user(name, &rules, all_channels)
            .map_err(|(_, e)| declared(e.to_string()))?;
    }
    Ok(acl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn config(text: &str) -> Config {
        let mut c = Config::default();
        c.apply_file_text(text, std::path::Path::new("strata.conf"))
            .unwrap();
        c
    }

    #[test]
    fn users_from_the_config_file() {
        let c = config(
            "requirepass top\nuser alice on >a ~app:* +@read\nuser bob on nopass (~x +get)\n",
        );
        let acl = from_config(&c).unwrap();
        assert!(acl.auth_required());
        assert!(acl.default_user().read().password_ok(b"top"));
        let alice = acl.get(b"alice").unwrap();
        assert!(alice.read().password_ok(b"a"));
        assert_eq!(
            alice.read().describe(),
            format!(
                "user alice on #{} ~app:* resetchannels -@all +@read",
                user::hash_password(b"a")
            )
        );
        assert_eq!(acl.get(b"bob").unwrap().read().selectors.len(), 1);
        let names: Vec<Bytes> = acl.users().iter().map(|u| u.read().name.clone()).collect();
        assert_eq!(names, ["alice", "bob", "default"]);
    }

    #[test]
    fn bad_user_lines_and_aclfile_with_users_are_refused() {
        let err = from_config(&config("user alice on +nosuch\n"))
            .err()
            .unwrap();
        assert_eq!(
            err,
            "Error in user declaration 'alice': Unknown command or category name in ACL"
        );
        let mut c = config("user alice on\n");
        c.aclfile = Some("users.acl".into());
        assert!(from_config(&c)
            .err()
            .unwrap()
            .starts_with("Configuring Redis with users"));
        // New users' channels follow acl-pubsub-default.
        let all = |text: &str| {
            let acl = from_config(&config(text)).unwrap();
            let carol = acl.get(b"carol").unwrap();
            let all_channels = carol.read().root.all_channels;
            all_channels
        };
        assert!(all("acl-pubsub-default allchannels\nuser carol on\n"));
        assert!(!all("user carol on\n"));
    }

    #[test]
    fn setuser_is_all_or_nothing_and_delete_spares_default() {
        let acl = Acl::new(false);
        let rules =
            |r: &[&str]| -> Vec<Bytes> { r.iter().map(|s| Bytes::from(s.to_string())).collect() };
        acl.set_user(b"u", &rules(&["on", "+get"]), false).unwrap();
        let before = acl.get(b"u").unwrap().read().describe();
        let (op, e) = acl
            .set_user(b"u", &rules(&["off", "+nosuch"]), false)
            .unwrap_err();
        assert_eq!((&op[..], e), (&b"+nosuch"[..], RuleError::UnknownCommand));
        assert_eq!(acl.get(b"u").unwrap().read().describe(), before);
        assert!(acl.set_user(b"v", &rules(&["bogus"]), false).is_err());
        assert!(acl.get(b"v").is_none(), "a failed SETUSER makes no user");
        let removed = acl.delete(&rules(&["default", "u", "nosuch"]));
        assert_eq!(removed.len(), 1);
        assert!(acl.get(b"default").is_some() && acl.get(b"u").is_none());
        acl.set_default_password(Some("p"));
        assert!(acl.auth_required());
        acl.set_default_password(None);
        assert!(!acl.auth_required());
    }
}
