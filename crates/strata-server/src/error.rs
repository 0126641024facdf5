//! Errors: what a command's failure replies (`CmdError`), and the replies of a failed write
//! (Redis's MISCONF once the database refuses writes). No server state: the services
//! (blocking, INFO) and the commands above share them without importing each other.
//!
//! Layer: protocol and errors (the bottom, beside `protocol/`).

use crate::protocol::reply::{Proto, ReplyBuf};
use bytes::{Bytes, BytesMut};

/// Redis's reply to a command on a key of another type.
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Redis's reply to an argument or a stored value that is not a 64-bit integer.
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";

/// Redis's reply to an argument or a stored value that is not a float.
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";

/// Why a command failed; written to the client as an error reply.
#[derive(Debug)]
pub enum CmdError {
    /// A Redis error reply, code included (`ERR syntax error`, `WRONGTYPE ...`); bytes, as
    /// texts that quote arguments hold them as sent.
    Reply(Vec<u8>),
    /// The store failed.
    Store(strata_engine::Error),
    /// The command found, reading, that it needs further keys of its database that its key
    /// specs cannot name (SORT's BY and GET patterns name keys through the data). It wrote
    /// nothing; the dispatcher runs it again holding their stripes too (`cmd::Ctx::extra_keys`).
    NeedKeys(Vec<Bytes>),
}

impl CmdError {
    pub fn reply(msg: impl Into<String>) -> CmdError {
        CmdError::Reply(msg.into().into_bytes())
    }

    /// An error text that quotes arguments (which need not be UTF-8).
    pub fn reply_bytes(msg: Vec<u8>) -> CmdError {
        CmdError::Reply(msg)
    }

    pub fn message(&self) -> String {
        match self {
            CmdError::Reply(m) => String::from_utf8_lossy(m).into_owned(),
            CmdError::Store(e) => format!("ERR {e}"),
            CmdError::NeedKeys(_) => "ERR the command asked for keys twice".to_string(),
        }
    }
}

impl From<strata_engine::Error> for CmdError {
    fn from(e: strata_engine::Error) -> Self {
        CmdError::Store(e)
    }
}

pub type CmdResult = Result<(), CmdError>;

/// Redis's `-MISCONF` error for a database whose log failed (a failed append or sync, in a
/// write or in the background sync of `appendfsync everysec`): writes are refused until
/// restart, reads go on (`strata::Db::health`). `None` while the database is healthy.
pub fn misconf(db: &strata::Db) -> Option<String> {
    let e = db.health().err()?;
    Some(format!(
        "MISCONF Errors writing to the AOF file: {}",
        strerror_of(&e.to_string())
    ))
}

/// The operating system's text for the error at the end of `msg` (`strerror`, as Redis
/// prints it: "Input/output error"), or `msg` itself if it names no OS error.
fn strerror_of(msg: &str) -> String {
    let code = msg
        .rsplit_once("(os error ")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|n| n.parse::<i32>().ok());
    match code {
        Some(n) => {
            let text = std::io::Error::from_raw_os_error(n).to_string();
            match text.rsplit_once(" (os error ") {
                Some((t, _)) => t.to_string(),
                None => text,
            }
        }
        None => msg.to_string(),
    }
}

/// The reply to a command whose write failed (or that could not run): Redis's MISCONF once
/// the database refuses writes ([`misconf`]), else the error.
pub fn failed_reply(db: &strata::Db, proto: Proto, e: &strata::Error) -> BytesMut {
    match misconf(db) {
        Some(m) => {
            let mut r = ReplyBuf::with_capacity(proto, 64);
            r.error(&m);
            r.take()
        }
        None => error_reply(proto, e),
    }
}

/// The reply to a command whose write failed (or that could not run).
pub fn error_reply(proto: Proto, e: &strata::Error) -> BytesMut {
    let mut r = ReplyBuf::with_capacity(proto, 64);
    r.error(&format!("ERR {e}"));
    r.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misconf_cause_is_the_os_text() {
        assert_eq!(
            strerror_of("shard 1 failed: I/O error in sync of /d/000004.log: Input/output error (os error 5)"),
            "Input/output error"
        );
        assert_eq!(
            strerror_of("no space (os error 28)"),
            "No space left on device"
        );
        assert_eq!(strerror_of("log failed"), "log failed");
    }
}
