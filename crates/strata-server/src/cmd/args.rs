//! The typed argument cursor: commands read their arguments through it and get Redis's
//! error texts for free (`next_i64` → "value is not an integer or out of range", `finish` →
//! "syntax error").
//!
//! Layer: commands (above services; below execution).

use super::CmdError;
use crate::protocol::parse::parse_i64;
use bytes::Bytes;

pub use crate::error::{ERR_NOT_FLOAT, ERR_NOT_INT};
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_I32: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";

/// A request's arguments after the command name (and subcommand).
pub struct Args {
    argv: Vec<Bytes>,
    pos: usize,
}

impl Args {
    /// `argv` is the whole request; the cursor starts after its first `skip` elements.
    pub fn new(argv: Vec<Bytes>, skip: usize) -> Args {
        Args { argv, pos: skip }
    }

    /// The whole request.
    pub fn argv(&self) -> &[Bytes] {
        &self.argv
    }

    /// Puts the cursor back after the first `skip` elements (a command run again).
    pub fn restart(&mut self, skip: usize) {
        self.pos = skip;
    }

    /// Arguments not read yet.
    pub fn remaining(&self) -> usize {
        self.argv.len().saturating_sub(self.pos)
    }

    pub fn is_done(&self) -> bool {
        self.remaining() == 0
    }

    /// Element `i` of the whole request as sent (0: the command name, 1: a subcommand's
    /// name), for error texts that quote it.
    pub fn sent(&self, i: usize) -> Option<&Bytes> {
        self.argv.get(i)
    }

    /// The rest of the arguments, consumed.
    pub fn rest(&mut self) -> &[Bytes] {
        let p = self.pos.min(self.argv.len());
        self.pos = self.argv.len();
        &self.argv[p..]
    }

    /// The next argument; a syntax error if there is none.
    pub fn next_bytes(&mut self) -> Result<Bytes, CmdError> {
        let a = self
            .argv
            .get(self.pos)
            .cloned()
            .ok_or_else(|| CmdError::reply(ERR_SYNTAX))?;
        self.pos += 1;
        Ok(a)
    }

    /// The next argument as an integer (Redis's `getLongLongFromObject`).
    pub fn next_i64(&mut self) -> Result<i64, CmdError> {
        parse_i64(&self.next_bytes()?).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
    }

    /// The next argument as a C `int` (Redis's `getIntFromObjectOrReply`: an integer out of
    /// the `int` range has an error of its own).
    pub fn next_i32(&mut self) -> Result<i32, CmdError> {
        let n = self.next_i64()?;
        i32::try_from(n).map_err(|_| CmdError::reply(ERR_NOT_I32))
    }

    /// Consumes the next argument if it is `kw` (case-insensitive).
    pub fn eat(&mut self, kw: &str) -> bool {
        match self.argv.get(self.pos) {
            Some(a) if a.eq_ignore_ascii_case(kw.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// The next argument upper-cased, for option matching; `None` at the end.
    pub fn next_keyword(&mut self) -> Option<String> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(String::from_utf8_lossy(a).to_ascii_uppercase())
    }

    /// A syntax error if arguments are left.
    pub fn finish(&self) -> Result<(), CmdError> {
        if self.is_done() {
            Ok(())
        } else {
            Err(CmdError::reply(ERR_SYNTAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::new(v.iter().map(|s| Bytes::from(s.to_string())).collect(), 1)
    }

    #[test]
    fn cursor_reads_typed_values() {
        let mut a = args(&["set", "12", "ex", "x"]);
        assert_eq!(a.next_i64().unwrap(), 12);
        assert!(!a.eat("px"));
        assert!(a.eat("EX"));
        assert_eq!(a.finish().unwrap_err().message(), ERR_SYNTAX);
        assert_eq!(a.next_i64().unwrap_err().message(), ERR_NOT_INT);
        assert_eq!(a.next_bytes().unwrap_err().message(), ERR_SYNTAX);
        let mut a = args(&["x", "-2147483648", "2147483648", "9223372036854775808"]);
        assert_eq!(a.next_i32().unwrap(), i32::MIN);
        assert_eq!(a.next_i32().unwrap_err().message(), ERR_NOT_I32);
        assert_eq!(a.next_i32().unwrap_err().message(), ERR_NOT_INT);
    }
}
