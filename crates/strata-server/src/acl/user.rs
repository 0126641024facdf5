//! A user: on/off, SHA-256 password hashes, and its selectors (Redis 7's `user`).

use super::selector::{Denied, Selector};
use super::RuleError;
use crate::cmd::Spec;
use bytes::Bytes;
use sha2::{Digest, Sha256};

#[derive(Clone, Debug)]
pub struct User {
    pub name: Bytes,
    pub enabled: bool,
    pub nopass: bool,
    /// `Some(true)`: `sanitize-payload`, `Some(false)`: `skip-sanitize-payload`.
    pub sanitize_payload: Option<bool>,
    /// SHA-256 hashes as 64 lowercase hex digits, in the order they were added.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
    /// `acl-pubsub-default` when the user was made: what `reset` and new selectors start
    /// with.
    all_channels_default: bool,
}

/// SHA-256 of `pass` as 64 lowercase hex digits (how Redis stores passwords).
pub fn hash_password(pass: &[u8]) -> String {
    hex(&Sha256::digest(pass))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

impl User {
    /// A new user as ACL SETUSER makes it: off, no passwords, no commands, no keys, and
    /// channels per `acl-pubsub-default` (`all_channels`).
    pub fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: Bytes::copy_from_slice(name),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            root: Selector::new(all_channels),
            selectors: Vec::new(),
            all_channels_default: all_channels,
        }
    }

    /// The `default` user of a fresh server: `on nopass ~* &* +@all`.
    pub fn default_user(all_channels: bool) -> User {
        let mut u = User::new(b"default", all_channels);
        for r in ["on", "nopass", "~*", "&*", "+@all"] {
            // Fixed rules that always apply.
            let _ = u.apply(r.as_bytes());
        }
        u
    }

    /// Applies rules in order (`(...)` arguments already merged, see [`merge_selectors`]);
    /// on an error returns the rule and its error, the user partly changed (callers apply
    /// to a copy).
    pub fn apply_all(&mut self, rules: &[Bytes]) -> Result<(), (Bytes, RuleError)> {
        for r in rules {
            self.apply(r).map_err(|e| (r.clone(), e))?;
        }
        Ok(())
    }

    /// Applies one rule.
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        if rule.len() >= 2 && rule[0] == b'(' && rule[rule.len() - 1] == b')' {
            let mut s = Selector::new(self.all_channels_default);
            for r in rule[1..rule.len() - 1]
                .split(|&c| c == b' ')
                .filter(|r| !r.is_empty())
            {
                s.apply(r)?;
            }
            self.selectors.push(s);
            return Ok(());
        }
        let lower = rule.to_ascii_lowercase();
        match lower.as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"skip-sanitize-payload" => self.sanitize_payload = Some(false),
            b"sanitize-payload" => self.sanitize_payload = Some(true),
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels"] {
                    self.apply(r.as_bytes())?;
                }
                if self.all_channels_default {
                    self.apply(b"allchannels")?;
                }
                for r in ["off", "clearselectors", "sanitize-payload", "-@all"] {
                    self.apply(r.as_bytes())?;
                }
            }
            _ => match rule.first() {
                Some(b'>') => self.add_hash(hash_password(&rule[1..])),
                Some(b'#') => {
                    if !valid_hash(&rule[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    self.add_hash(String::from_utf8_lossy(&rule[1..]).into_owned());
                }
                Some(b'<') => self.remove_hash(&hash_password(&rule[1..]))?,
                Some(b'!') => {
                    if !valid_hash(&rule[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    self.remove_hash(&String::from_utf8_lossy(&rule[1..]))?;
                }
                _ => self.root.apply(rule)?,
            },
        }
        Ok(())
    }

    fn add_hash(&mut self, h: String) {
        if !self.passwords.contains(&h) {
            self.passwords.push(h);
        }
        self.nopass = false;
    }

    fn remove_hash(&mut self, h: &str) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != h);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    /// Whether `pass` authenticates this user (an enabled one).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        // Compares every stored hash without an early exit (Redis's
        // `time_independent_strcmp`).
        self.passwords.iter().fold(false, |ok, p| {
            constant_time_eq(p.as_bytes(), h.as_bytes()) | ok
        })
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: allowed if the root selector or any other
    /// allows; otherwise the most relevant denial.
    pub fn check(&self, spec: &Spec, argv: &[Bytes]) -> Result<(), Denied> {
        if self.root.allows_all() {
            return Ok(());
        }
        let mut worst: Option<Denied> = None;
        for s in std::iter::once(&self.root).chain(&self.selectors) {
            match s.check(spec, argv) {
                Ok(()) => return Ok(()),
                Err(d) => worst = Some(worst.map_or(d, |w| w.max(d))),
            }
        }
        Err(worst.unwrap_or(Denied::Command))
    }

    /// Flags as ACL GETUSER lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize_payload {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as an ACL file line and ACL LIST print it (Redis's `ACLDescribeUser`).
    pub fn describe(&self) -> String {
        let mut out = format!("user {}", String::from_utf8_lossy(&self.name));
        for f in self.flags() {
            out.push(' ');
            out.push_str(f);
        }
        for p in &self.passwords {
            out.push_str(" #");
            out.push_str(p);
        }
        out.push(' ');
        out.push_str(&self.root.describe());
        for s in &self.selectors {
            out.push_str(" (");
            out.push_str(&s.describe());
            out.push(')');
        }
        out
    }
}

/// Compares without an early exit.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// Joins the arguments of a `(...)` selector written across several arguments (`(~a`,
/// `+get)`) into one; the error names the argument whose parenthesis is not closed.
pub fn merge_selectors(args: &[Bytes]) -> Result<Vec<Bytes>, Bytes> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(Bytes, Vec<u8>)> = None;
    for a in args {
        match &mut open {
            Some((_, acc)) => {
                acc.push(b' ');
                acc.extend_from_slice(a);
                if a.last() == Some(&b')') {
                    if let Some((_, acc)) = open.take() {
                        out.push(Bytes::from(acc));
                    }
                }
            }
            None if a.first() == Some(&b'(') && a.last() != Some(&b')') => {
                open = Some((a.clone(), a.to_vec()));
            }
            None => out.push(a.clone()),
        }
    }
    match open {
        Some((first, _)) => Err(first),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_string())
    }

    #[test]
    fn passwords() {
        let mut u = User::new(b"u", false);
        u.apply_all(&[b("on"), b(">p1"), b(">p2"), b("<p1")])
            .unwrap();
        assert!(u.password_ok(b"p2") && !u.password_ok(b"p1"));
        assert_eq!(u.apply(b"<p1"), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"#abc"), Err(RuleError::BadHash));
        let h = hash_password(b"p3");
        u.apply(format!("#{h}").as_bytes()).unwrap();
        assert!(u.password_ok(b"p3"));
        u.apply(format!("!{h}").as_bytes()).unwrap();
        assert!(!u.password_ok(b"p3"));
        u.apply(b"nopass").unwrap();
        assert!(u.password_ok(b"anything") && u.passwords.is_empty());
        u.apply(b"off").unwrap();
        assert!(!u.password_ok(b"anything"));
        // SHA-256 of "p1", as Redis stores it.
        assert_eq!(
            hash_password(b"pw"),
            "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"
        );
    }

    #[test]
    fn describe_as_acl_list() {
        let mut u = User::new(b"u", false);
        let rules =
            merge_selectors(&[b("on"), b("~a"), b("+get"), b("(~x*"), b("+hget)")]).unwrap();
        u.apply_all(&rules).unwrap();
        assert_eq!(
            u.describe(),
            "user u on ~a resetchannels -@all +get (~x* resetchannels -@all +hget)"
        );
        assert_eq!(
            User::default_user(false).describe(),
            "user default on nopass ~* &* +@all"
        );
        u.apply(b"reset").unwrap();
        assert_eq!(
            u.describe(),
            "user u off sanitize-payload resetchannels -@all"
        );
        assert_eq!(merge_selectors(&[b("(~a"), b("+get")]), Err(b("(~a")));
    }
}
