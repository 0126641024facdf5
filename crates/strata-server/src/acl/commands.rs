//! The command space ACL rules speak of: every command and subcommand of Redis 7.0's
//! metadata (whether Strata implements it or not, as Redis's own table holds them all),
//! numbered, with its ACL categories. Rules set bits in a [`CmdBits`] by these numbers.

use crate::cmd::table::redis_metadata;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The ACL categories in Redis's order (`ACL CAT` lists them so).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (without `@`, any case).
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// Words of [`CmdBits`]: room for 512 commands and subcommands (Redis 7.0 has 366).
const WORDS: usize = 8;

/// One bit per command id.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct CmdBits([u64; WORDS]);

impl CmdBits {
    pub fn get(&self, id: usize) -> bool {
        self.0[id / 64] & (1 << (id % 64)) != 0
    }

    pub fn set(&mut self, id: usize, on: bool) {
        if on {
            self.0[id / 64] |= 1 << (id % 64);
        } else {
            self.0[id / 64] &= !(1 << (id % 64));
        }
    }

    pub fn fill(&mut self, on: bool) {
        self.0 = [if on { u64::MAX } else { 0 }; WORDS];
    }
}

/// One numbered command.
pub struct Command {
    /// Full name in lower case: `get`, `config|get`.
    pub name: &'static str,
    /// Category bits ([`category_bit`]).
    pub categories: u32,
    /// Ids of its subcommands (a container's).
    pub subcommands: Vec<usize>,
    pub top_level: bool,
}

/// Every command, by id and by name.
pub struct Commands {
    pub list: Vec<Command>,
    by_name: HashMap<&'static str, usize>,
}

impl Commands {
    /// The id of `name` (`cmd` or `container|sub`, any case).
    pub fn id(&self, name: &[u8]) -> Option<usize> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }

    /// Top-level commands, each followed by its subcommands: the order rules are described
    /// in.
    pub fn in_order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.list.len()).filter(|&i| self.list[i].top_level)
    }
}

fn categories_of(names: &[String]) -> u32 {
    names
        .iter()
        .filter_map(|c| category_bit(c.trim_start_matches('@').as_bytes()))
        .fold(0, |a, b| a | b)
}

/// The command space, built once from the table's metadata.
pub fn commands() -> &'static Commands {
    static ALL: OnceLock<Commands> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut list = Vec::new();
        for m in redis_metadata() {
            let top = list.len();
            list.push(Command {
                name: m.name.as_str(),
                categories: categories_of(&m.acl_categories),
                subcommands: Vec::new(),
                top_level: true,
            });
            for s in &m.subcommands {
                let id = list.len();
                list.push(Command {
                    name: s.name.as_str(),
                    categories: categories_of(&s.acl_categories),
                    subcommands: Vec::new(),
                    top_level: false,
                });
                list[top].subcommands.push(id);
            }
        }
        // The metadata is compiled in; the unit tests build this, so a table too large for
        // the bitmap is a build error.
        assert!(list.len() <= WORDS * 64, "too many commands for CmdBits");
        let by_name = list.iter().enumerate().map(|(i, c)| (c.name, i)).collect();
        Commands { list, by_name }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_categories() {
        let c = commands();
        let get = c.id(b"GET").unwrap();
        assert_eq!(c.list[get].name, "get");
        assert_ne!(c.list[get].categories & category_bit(b"read").unwrap(), 0);
        let config = c.id(b"config").unwrap();
        let config_get = c.id(b"config|get").unwrap();
        assert!(c.list[config].subcommands.contains(&config_get));
        assert!(c.id(b"nosuch").is_none());
        assert_eq!(category_bit(b"Keyspace"), Some(1));
        let mut b = CmdBits::default();
        b.set(300, true);
        assert!(b.get(300) && !b.get(299));
        b.set(300, false);
        assert_eq!(b, CmdBits::default());
    }
}
