//! SWAPDB (Redis's `swapdbCommand`): two logical databases trade their physical ones in the
//! database map (`dbmap.rs`, design §13.19); no record is rewritten.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::parse::parse_i64;

pub static COMMANDS: &[Entry] = &[cmd("swapdb", swapdb)];

/// A database index as Redis's `getIntFromObjectOrReply` reads it (a 32-bit integer), with
/// SWAPDB's own message when it is not one.
fn index(args: &mut Args, which: &str) -> Result<i64, CmdError> {
    let raw = args.next_bytes()?;
    parse_i64(&raw)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| CmdError::reply(format!("ERR invalid {which} DB index")))
}

fn swapdb(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if ctx.shared.cluster.is_some() {
        return Err(CmdError::reply("ERR SWAPDB is not allowed in cluster mode"));
    }
    let a = index(args, "first")?;
    let b = index(args, "second")?;
    args.finish()?;
    let databases = ctx.shared.config.read().databases as i64;
    if !(0..databases).contains(&a) || !(0..databases).contains(&b) {
        return Err(CmdError::reply("ERR DB index is out of range"));
    }
    if a != b {
        let (shared, tx) = (ctx.shared, ctx.tx);
        crate::dbmap::swap_databases(tx, a as u8, b as u8, |p, q| {
            shared.blocked.swap_dbs(tx, p, q)
        })
        .map_err(|e| CmdError::reply(format!("ERR {e}")))?;
        // This client's own database may have moved (the rest of an EXEC or script runs in
        // the one it selected).
        ctx.conn.db = shared.store.dbs.physical(ctx.conn.selected);
    }
    // Propagated as called, even for a database swapped with itself (Redis 7.0).
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::test_server::TestServer;

    #[test]
    fn errors_as_redis() {
        // Replies read from redis-server 7.0.15.
        let mut t = TestServer::in_memory();
        assert_eq!(t.q("SWAPDB a 1"), "-ERR invalid first DB index");
        assert_eq!(t.q("SWAPDB 1 a"), "-ERR invalid second DB index");
        assert_eq!(t.q("SWAPDB 99999999999 1"), "-ERR invalid first DB index");
        assert_eq!(t.q("SWAPDB 0 2147483648"), "-ERR invalid second DB index");
        assert_eq!(t.q("SWAPDB 1.5 0"), "-ERR invalid first DB index");
        assert_eq!(t.q("SWAPDB 1 16"), "-ERR DB index is out of range");
        assert_eq!(t.q("SWAPDB -1 0"), "-ERR DB index is out of range");
        assert_eq!(t.q("SWAPDB 0 0"), "+OK");
        assert!(t.shared().store.dbs.moved().is_empty());
    }

    #[test]
    fn the_swap_survives_a_reopen() {
        let mut t = TestServer::in_memory();
        assert_eq!(t.q("SET k zero"), "+OK");
        assert_eq!(t.q("SELECT 1"), "+OK");
        assert_eq!(t.q("RPUSH l a b"), ":2");
        assert_eq!(t.q("SWAPDB 0 1"), "+OK");
        assert_eq!(t.q("GET k"), "\"zero\"");
        assert_eq!(t.q("EXISTS l"), ":0");
        let mut t = t.reopen();
        assert_eq!(t.shared().store.dbs.moved(), vec![(0, 1), (1, 0)]);
        assert_eq!(t.q("LRANGE l 0 -1"), "[\"a\", \"b\"]");
        assert_eq!(t.q("EXISTS k"), ":0");
        assert_eq!(t.q("SELECT 1"), "+OK");
        assert_eq!(t.q("GET k"), "\"zero\"");
        // Swapping back restores the identity, durably too.
        assert_eq!(t.q("SWAPDB 1 0"), "+OK");
        let mut t = t.reopen();
        assert!(t.shared().store.dbs.moved().is_empty());
        assert_eq!(t.q("GET k"), "\"zero\"");
    }

    #[test]
    fn inside_exec_and_with_move() {
        let mut t = TestServer::in_memory();
        assert_eq!(t.q("SET a 1"), "+OK");
        assert_eq!(t.q("MULTI"), "+OK");
        assert_eq!(t.q("SWAPDB 0 2"), "+QUEUED");
        assert_eq!(t.q("SET b 2"), "+QUEUED");
        assert_eq!(t.q("EXEC"), "[+OK, +OK]");
        assert_eq!(t.q("EXISTS a"), ":0");
        // MOVE's database is a logical one: 2 holds `a` now.
        assert_eq!(t.q("MOVE b 2"), ":1");
        assert_eq!(t.q("SELECT 2"), "+OK");
        assert_eq!(t.q("MGET a b"), "[\"1\", \"2\"]");
        assert_eq!(t.q("COPY a c DB 0"), ":1");
        assert_eq!(t.q("SELECT 0"), "+OK");
        assert_eq!(t.q("GET c"), "\"1\"");
        assert!(t.q("INFO keyspace").contains("db0:keys=1,"));
        assert!(t.q("INFO keyspace").contains("db2:keys=2,"));
    }

    #[test]
    fn from_a_script_and_in_the_monitor_and_client_list() {
        let mut t = TestServer::in_memory();
        let mut mon = t.conn();
        assert_eq!(mon.q("MONITOR"), "+OK");
        assert_eq!(t.q("SET {k}a 1"), "+OK");
        // A script that declared a key reaches SWAPDB: it runs again under every stripe.
        assert_eq!(
            t.cmd(&["EVAL", "return redis.call('SWAPDB','0','5')", "1", "{k}a"])
                .to_string(),
            "+OK"
        );
        assert_eq!(t.q("EXISTS {k}a"), ":0");
        assert_eq!(t.q("SELECT 5"), "+OK");
        assert_eq!(t.q("GET {k}a"), "\"1\"");
        assert!(t.q("CLIENT INFO").contains(" db=5 "));
        // MONITOR names the logical database (the last line: the GET in db 5).
        let mut last = String::new();
        while !last.contains("\"GET\"") {
            last = mon.recv().to_string();
        }
        assert!(last.contains("[5 "), "{last}");
    }
}
