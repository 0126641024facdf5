//! A selector: one set of command, key and channel permissions (Redis 7's `aclSelector`).
//! A user has a root selector and any number of `(...)` selectors; a command is allowed if
//! any of them allows it.

use super::commands::{category_bit, commands, CmdBits, CATEGORIES};
use super::RuleError;
use crate::cmd::table::{self, key_flag};
use crate::cmd::{flag, Spec};
use bytes::Bytes;

/// Read permission of a key pattern (`%R~`).
pub const READ: u8 = 1;
/// Write permission of a key pattern (`%W~`).
pub const WRITE: u8 = 2;

/// A key pattern and what it permits ([`READ`], [`WRITE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Bytes,
    pub perms: u8,
}

#[derive(Clone, Debug, Default)]
pub struct Selector {
    /// Commands allowed, by id ([`commands`]).
    pub allowed: CmdBits,
    /// Set by `+@all`, cleared by `-@all`: commands added later would be allowed (how the
    /// rules are described: `+@all ...` or `-@all ...`).
    pub future: bool,
    pub patterns: Vec<KeyPattern>,
    pub all_keys: bool,
    pub channels: Vec<Bytes>,
    pub all_channels: bool,
    /// First-argument rules (`+select|0`, deprecated in Redis 7.0): for a command not
    /// allowed as a whole, the first arguments it is allowed with (compared ignoring case,
    /// kept as written). Any later rule that sets the command drops them.
    pub first_args: std::collections::BTreeMap<usize, Vec<String>>,
}

/// Why a selector refuses a command; ordered as Redis ranks them (the highest of all
/// selectors is reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    /// The key at this argument position.
    Key(usize),
    /// The channel at this argument position.
    Channel(usize),
}

impl Denied {
    fn rank(&self) -> u8 {
        match self {
            Denied::Command => 1,
            Denied::Key(_) => 2,
            Denied::Channel(_) => 4,
        }
    }

    /// The more relevant of two denials (Redis keeps the highest error code).
    pub fn max(self, other: Denied) -> Denied {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

impl Selector {
    /// A selector that allows nothing; `all_channels` per `acl-pubsub-default`.
    pub fn new(all_channels: bool) -> Selector {
        Selector {
            all_channels,
            ..Selector::default()
        }
    }

    /// Whether this selector allows everything (the check is skipped).
    pub fn allows_all(&self) -> bool {
        self.future && self.all_keys && self.all_channels && self.allowed == full_bits()
    }

    /// Applies one rule (`+get`, `~key*`, `resetchannels`, ...).
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let lower = rule.to_ascii_lowercase();
        match lower.as_slice() {
            b"allkeys" => return self.apply(b"~*"),
            b"resetkeys" => {
                self.all_keys = false;
                self.patterns.clear();
                return Ok(());
            }
            b"allchannels" => return self.apply(b"&*"),
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" => return self.apply(b"+@all"),
            b"nocommands" => return self.apply(b"-@all"),
            _ => {}
        }
        match rule.first() {
            Some(b'~') => self.add_key_pattern(&rule[1..], READ | WRITE),
            Some(b'%') => {
                let tilde = rule
                    .iter()
                    .position(|&c| c == b'~')
                    .ok_or(RuleError::Syntax)?;
                let mut perms = 0;
                for &c in &rule[1..tilde] {
                    perms |= match c.to_ascii_uppercase() {
                        b'R' => READ,
                        b'W' => WRITE,
                        _ => return Err(RuleError::Syntax),
                    };
                }
                if perms == 0 {
                    return Err(RuleError::Syntax);
                }
                self.add_key_pattern(&rule[tilde + 1..], perms)
            }
            Some(b'&') => {
                let p = &rule[1..];
                if p == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if self.all_channels {
                    return Err(RuleError::AllChannels);
                } else if !self.channels.iter().any(|c| c[..] == *p) {
                    self.channels.push(Bytes::copy_from_slice(p));
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                self.apply_command_rule(&lower[1..], &rule[1..], sign == b'+')
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, p: &[u8], perms: u8) -> Result<(), RuleError> {
        if p == b"*" && perms == READ | WRITE {
            self.all_keys = true;
            self.patterns.clear();
            return Ok(());
        }
        if self.all_keys {
            return Err(RuleError::AllKeys);
        }
        match self.patterns.iter_mut().find(|k| k.pattern[..] == *p) {
            Some(k) => k.perms |= perms,
            None => self.patterns.push(KeyPattern {
                pattern: Bytes::copy_from_slice(p),
                perms,
            }),
        }
        Ok(())
    }

    /// `+name`, `-name`, `+@cat`, `-@cat`, `+name|firstarg` (`name` lower-cased and
    /// `original` as written, both without the sign).
    fn apply_command_rule(
        &mut self,
        name: &[u8],
        original: &[u8],
        allow: bool,
    ) -> Result<(), RuleError> {
        if let Some(cat) = name.strip_prefix(b"@") {
            if cat == b"all" {
                self.allowed.fill(allow);
                self.future = allow;
                self.first_args.clear();
                return Ok(());
            }
            let bit = category_bit(cat).ok_or(RuleError::UnknownCommand)?;
            for (id, c) in commands().list.iter().enumerate() {
                if c.categories & bit != 0 {
                    self.allowed.set(id, allow);
                    self.first_args.remove(&id);
                }
            }
            return Ok(());
        }
        match commands().id(name) {
            Some(id) => {
                set_command(&mut self.allowed, id, allow);
                self.first_args.remove(&id);
                for sub in &commands().list[id].subcommands {
                    self.first_args.remove(sub);
                }
                Ok(())
            }
            None if allow => self.add_first_arg(name, original),
            None => Err(RuleError::UnknownCommand),
        }
    }

    /// `+command|arg` for a command without subcommands (Redis 7.0's `allowed_firstargs`,
    /// which it accepts with a deprecation warning in its log): `name` lower-cased,
    /// `original` as written (the argument keeps its case).
    fn add_first_arg(&mut self, name: &[u8], original: &[u8]) -> Result<(), RuleError> {
        // Redis splits at the last bar: `client|list|x` names a subcommand's first arg.
        let bar = name
            .iter()
            .rposition(|&c| c == b'|')
            .ok_or(RuleError::UnknownCommand)?;
        let id = commands()
            .id(&name[..bar])
            .ok_or(RuleError::UnknownCommand)?;
        if name[..bar].contains(&b'|') {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if bar + 1 == name.len() {
            return Err(RuleError::Syntax);
        }
        if !commands().list[id].subcommands.is_empty() {
            // An unknown subcommand of a container.
            return Err(RuleError::UnknownCommand);
        }
        let arg = String::from_utf8_lossy(&original[bar + 1..]).into_owned();
        eprintln!(
            "strata-server: Deprecation warning: Allowing a first arg of an otherwise blocked \
             command is a misuse of ACL and may get disabled in the future (offender: +{})",
            String::from_utf8_lossy(original)
        );
        let args = self.first_args.entry(id).or_default();
        if !args.iter().any(|a| a.eq_ignore_ascii_case(&arg)) {
            args.push(arg);
        }
        Ok(())
    }

    /// Redis's key-spec check: every key the command names must match a pattern that
    /// grants what the command does with it; channels likewise for pub/sub commands.
    pub fn check(&self, spec: &Spec, argv: &[Bytes]) -> Result<(), Denied> {
        if !spec.has(flag::NO_AUTH) {
            let id = commands().id(spec.name.as_bytes()).ok_or(Denied::Command)?;
            if !self.allowed.get(id) && !self.first_arg_allowed(id, argv) {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys && spec.has_keys() {
            for k in table::keys(spec, argv).unwrap_or_default() {
                if k.flags & key_flag::NOT_KEY != 0 {
                    continue;
                }
                if !self.key_allowed(&argv[k.pos], k.flags) {
                    return Err(Denied::Key(k.pos));
                }
            }
        }
        if !self.all_channels {
            let (positions, pattern) = channels(spec, argv);
            for pos in positions {
                if !self.channel_allowed(&argv[pos], pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    /// Whether a first-argument rule allows command `id` as called (`argv[1]`; rules name
    /// only commands without subcommands).
    fn first_arg_allowed(&self, id: usize, argv: &[Bytes]) -> bool {
        match (self.first_args.get(&id), argv.get(1)) {
            (Some(args), Some(first)) => args
                .iter()
                .any(|a| a.as_bytes().eq_ignore_ascii_case(first)),
            _ => false,
        }
    }

    fn key_allowed(&self, key: &[u8], keyspec_flags: u32) -> bool {
        let mut need = 0;
        if keyspec_flags & key_flag::ACCESS != 0 {
            need |= READ;
        }
        if keyspec_flags & (key_flag::INSERT | key_flag::DELETE | key_flag::UPDATE) != 0 {
            need |= WRITE;
        }
        self.patterns
            .iter()
            .any(|p| p.perms & need == need && crate::glob::matches(&p.pattern, key, false))
    }

    /// Redis's `ACLCheckChannelAgainstList`: a pattern subscription must name an allowed
    /// pattern exactly; a channel must match one.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p[..] == *channel
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }

    /// The rules that rebuild this selector, as ACL LIST prints them.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.push_str(&keys);
            out.push(' ');
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// Key patterns as GETUSER's `keys` field: `~*`, or `%R~a ~b`.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".to_string();
        }
        let parts: Vec<String> = self
            .patterns
            .iter()
            .map(|p| {
                let prefix = match p.perms {
                    READ => "%R~",
                    WRITE => "%W~",
                    _ => "~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(&p.pattern))
            })
            .collect();
        parts.join(" ")
    }

    /// Channel patterns as GETUSER's `channels` field.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".to_string();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// Redis 7.0's `ACLDescribeSelectorCommandRules`: `+@all` or `-@all`, then categories
    /// chosen greedily (each round, of the categories with more commands like the user's
    /// than unlike, the one with the fewest unlike, then the most alike, counted over the
    /// commands no chosen category has settled yet), then the single commands that still
    /// differ.
    pub fn describe_commands(&self) -> String {
        let all = commands();
        let additive = !self.future;
        let mut rules = vec![if additive { "-@all" } else { "+@all" }.to_string()];
        let mut fake = CmdBits::default();
        fake.fill(!additive);
        // The user's bits with every chosen category's commands flipped to the start's
        // side, so they count for no later category.
        let mut temp = self.allowed;
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best: Option<(usize, usize, usize)> = None; // (category, diff, same)
            for (i, _) in CATEGORIES.iter().enumerate() {
                if applied[i] {
                    continue;
                }
                let bit = 1 << i;
                let (mut on, mut off) = (0, 0);
                for (id, c) in all.list.iter().enumerate() {
                    if c.categories & bit != 0 {
                        if temp.get(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                let better = match best {
                    None => true,
                    Some((_, d, s)) => diff < d || (diff == d && same > s),
                };
                if same > diff && better {
                    best = Some((i, diff, same));
                }
            }
            let Some((i, _, _)) = best else { break };
            applied[i] = true;
            rules.push(format!(
                "{}@{}",
                if additive { '+' } else { '-' },
                CATEGORIES[i]
            ));
            for (id, c) in all.list.iter().enumerate() {
                if c.categories & (1 << i) != 0 {
                    fake.set(id, additive);
                    temp.set(id, !additive);
                }
            }
        }
        for top in all.in_order() {
            for id in std::iter::once(top).chain(all.list[top].subcommands.iter().copied()) {
                let want = self.allowed.get(id);
                if want != fake.get(id) {
                    rules.push(format!(
                        "{}{}",
                        if want { '+' } else { '-' },
                        all.list[id].name
                    ));
                    set_command(&mut fake, id, want);
                }
            }
            // First-argument rules follow their command, as Redis 7.0 describes them.
            if let Some(args) = self.first_args.get(&top).filter(|_| !self.allowed.get(top)) {
                for a in args {
                    rules.push(format!("+{}|{a}", all.list[top].name));
                }
            }
        }
        rules.join(" ")
    }
}

/// Allows or denies command `id`; a container's rule applies to its subcommands too.
fn set_command(bits: &mut CmdBits, id: usize, allow: bool) {
    bits.set(id, allow);
    for &sub in &commands().list[id].subcommands {
        bits.set(sub, allow);
    }
}

/// Every command allowed.
fn full_bits() -> CmdBits {
    let mut b = CmdBits::default();
    b.fill(true);
    b
}

/// Redis's `getChannelsFromCommand` for the commands whose channels ACLs check (publishing
/// and subscribing): the channels' positions, and whether they are patterns.
fn channels(spec: &Spec, argv: &[Bytes]) -> (std::ops::Range<usize>, bool) {
    match spec.name {
        "publish" | "spublish" => (1..2.min(argv.len()), false),
        "subscribe" | "ssubscribe" => (1..argv.len(), false),
        "psubscribe" => (1..argv.len(), true),
        _ => (0..0, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::lookup_argv;

    fn sel(rules: &[&str]) -> Selector {
        let mut s = Selector::new(false);
        for r in rules {
            s.apply(r.as_bytes()).unwrap();
        }
        s
    }

    fn check(s: &Selector, parts: &[&str]) -> Result<(), Denied> {
        let argv: Vec<Bytes> = parts.iter().map(|p| Bytes::from(p.to_string())).collect();
        let spec = lookup_argv(&argv).expect("known command");
        s.check(spec, &argv)
    }

    #[test]
    fn commands_and_categories() {
        let s = sel(&["+@read", "~app:*"]);
        assert_eq!(check(&s, &["get", "app:1"]), Ok(()));
        assert_eq!(check(&s, &["get", "other"]), Err(Denied::Key(1)));
        assert_eq!(check(&s, &["set", "app:1", "v"]), Err(Denied::Command));
        assert_eq!(check(&s, &["config", "get", "x"]), Err(Denied::Command));
        // AUTH and HELLO are always allowed.
        assert_eq!(check(&s, &["auth", "a", "b"]), Ok(()));
        let s = sel(&["+config|get"]);
        assert_eq!(check(&s, &["config", "get", "x"]), Ok(()));
        assert_eq!(
            check(&s, &["config", "set", "x", "y"]),
            Err(Denied::Command)
        );
        let s = sel(&["+config", "-config|set"]);
        assert_eq!(check(&s, &["config", "resetstat"]), Ok(()));
        assert_eq!(
            check(&s, &["config", "set", "x", "y"]),
            Err(Denied::Command)
        );
    }

    /// Redis 7.0.15's first-argument rules, with its descriptions and errors.
    #[test]
    fn first_argument_rules() {
        let s = sel(&["+select|0", "+select|2", "+SELECT|Db9", "+get|X", "~*"]);
        assert_eq!(check(&s, &["select", "0"]), Ok(()));
        assert_eq!(check(&s, &["select", "db9"]), Ok(()));
        assert_eq!(check(&s, &["select", "1"]), Err(Denied::Command));
        assert_eq!(check(&s, &["get", "x"]), Ok(()));
        assert_eq!(check(&s, &["get", "y"]), Err(Denied::Command));
        // Table order (Redis: hash order, where select came first too).
        assert_eq!(
            s.describe_commands(),
            "-@all +get|X +select|0 +select|2 +select|Db9"
        );
        let s = sel(&["+@all", "-select", "+select|0", "+select|0"]);
        assert_eq!(s.describe_commands(), "+@all -select +select|0");
        // Any later rule setting the command drops its first arguments.
        for later in [
            &["+@connection"][..],
            &["-@connection"],
            &["+select"],
            &["-select"],
            &["allcommands"],
        ] {
            let mut s = sel(&["+select|0"]);
            for r in later {
                s.apply(r.as_bytes()).unwrap();
            }
            assert!(!s.describe_commands().contains('|'), "{later:?}");
        }
        let mut s = Selector::new(false);
        for (rule, err) in [
            ("-select|0", RuleError::UnknownCommand),
            ("+select|", RuleError::Syntax),
            ("+config|foo", RuleError::UnknownCommand),
            ("+nosuch|x", RuleError::UnknownCommand),
            ("+client|list|x", RuleError::FirstArgOfSubcommand),
        ] {
            assert_eq!(s.apply(rule.as_bytes()), Err(err), "{rule}");
        }
    }

    #[test]
    fn read_and_write_key_patterns() {
        let s = sel(&["+@all", "%R~r:*", "%W~w:*"]);
        assert_eq!(check(&s, &["get", "r:1"]), Ok(()));
        assert_eq!(check(&s, &["set", "w:1", "v"]), Ok(()));
        assert_eq!(check(&s, &["get", "w:1"]), Err(Denied::Key(1)));
        assert_eq!(check(&s, &["set", "r:1", "v"]), Err(Denied::Key(1)));
        // COPY reads its source and writes its destination.
        assert_eq!(check(&s, &["copy", "r:1", "w:1"]), Ok(()));
        assert_eq!(check(&s, &["copy", "w:1", "r:1"]), Err(Denied::Key(1)));
        // INCR reads and writes.
        assert_eq!(check(&s, &["incr", "w:1"]), Err(Denied::Key(1)));
    }

    #[test]
    fn channels_and_patterns() {
        let s = sel(&["+@all", "allkeys", "&news.*"]);
        assert_eq!(check(&s, &["publish", "news.a", "m"]), Ok(()));
        assert_eq!(
            check(&s, &["publish", "other", "m"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(
            check(&s, &["subscribe", "news.a", "x"]),
            Err(Denied::Channel(2))
        );
        // A pattern subscription must be an allowed pattern itself.
        assert_eq!(check(&s, &["psubscribe", "news.*"]), Ok(()));
        assert_eq!(
            check(&s, &["psubscribe", "news.a*"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(check(&s, &["unsubscribe", "other"]), Ok(()));
    }

    #[test]
    fn rule_errors() {
        let mut s = Selector::new(false);
        assert_eq!(s.apply(b"+nosuch"), Err(RuleError::UnknownCommand));
        assert_eq!(s.apply(b"+@nosuch"), Err(RuleError::UnknownCommand));
        assert_eq!(s.apply(b"bogus"), Err(RuleError::Syntax));
        assert_eq!(s.apply(b"%X~a"), Err(RuleError::Syntax));
        assert_eq!(s.apply(b"%~a"), Err(RuleError::Syntax));
        s.apply(b"allkeys").unwrap();
        assert_eq!(s.apply(b"~a"), Err(RuleError::AllKeys));
        s.apply(b"allchannels").unwrap();
        assert_eq!(s.apply(b"&a"), Err(RuleError::AllChannels));
    }

    #[test]
    fn descriptions_as_redis_prints_them() {
        // Checked against redis-server 7.0.15.
        let s = sel(&["+@read", "-get", "+set", "-@read", "+get"]);
        assert_eq!(s.describe_commands(), "-@all +get +set");
        assert_eq!(sel(&["+@read", "+get"]).describe_commands(), "-@all +@read");
        assert_eq!(
            sel(&["+@all", "-@admin", "-config|get"]).describe_commands(),
            "+@all -@admin"
        );
        assert_eq!(sel(&["+@all"]).describe_commands(), "+@all");
        assert_eq!(sel(&[]).describe_commands(), "-@all");
        let s = sel(&["~app:*", "%R~r:*", "%W~w:*", "%RW~rw:*", "&ch*"]);
        assert_eq!(
            s.describe(),
            "~app:* %R~r:* %W~w:* ~rw:* resetchannels &ch* -@all"
        );
        assert_eq!(
            sel(&["allkeys", "allchannels", "allcommands"]).describe(),
            "~* &* +@all"
        );
        assert_eq!(
            sel(&["-@all", "+config|get"]).describe_commands(),
            "-@all +config|get"
        );
    }
}
