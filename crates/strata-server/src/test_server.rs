//! The in-process test harness: a whole server over the engine's in-memory file system, with
//! clients that speak RESP to it through in-memory pipes instead of sockets (test builds only).
//!
//! [`TestServer::in_memory`] opens the store as `start` does (`server::open_shared`, with
//! `strata_engine::io::MemFs` as the file system: 2 shards, so commands whose keys hash to
//! different shards take the connection-thread path while the others are queued to their
//! shard's worker). Each [`TestConn`] is one client: a `tokio::io::duplex` pipe whose server
//! end is served by `conn::serve`, the function a TCP connection is handed to after accept.
//! A request therefore takes exactly a TCP request's path (parsing with the protocol limits,
//! lookup, routing to workers, MULTI queueing, blocking, CLIENT REPLY, replies in RESP2 or
//! RESP3 as HELLO chose). Left out: the socket, the accept loop's checks (`maxclients`,
//! protected mode), and the server's background threads (the active expiry cycle and the
//! once-a-second fsync; an expired key is still gone for every command, by lazy expiry).
//!
//! ```ignore
//! let t = TestServer::in_memory();
//! let mut c = t.conn();
//! assert_eq!(c.q("HSET h f v"), ":1");
//! assert_eq!(c.cmd(&["HGET", "h", "f"]).to_string(), "\"v\"");
//! ```
//!
//! Replies are [`Reply`] values, compared through their one-line rendering (`+OK`, `-ERR ..`,
//! `:3`, `"bulk"`, `(nil)` for `$-1`, `(nil-array)` for `*-1`, `[a, b]` for arrays; RESP3:
//! `_`, `,1.5`, `#t`, `{k: v}`, `~[..]`, `>[..]`); [`TestConn::raw`] gives the exact bytes.
//! Blocking cases send a request without waiting ([`TestConn::send`]), wait until the server
//! has the client blocked ([`TestServer::wait_blocked`]), act on another connection, then
//! read the reply ([`TestConn::recv`]) or check that none came ([`TestConn::silent`]).
//!
//! Family tests live beside their family as `cmd/<family>_tests.rs`.
//!
//! Layer: connection and server (a test harness over the whole server).

use crate::config::Config;
use crate::server::Shared;
use bytes::BytesMut;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::io::{Fs, MemFs};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// How long a reply may take before the test fails (generous: the machine may be busy).
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes the in-memory pipe buffers in each direction.
const PIPE_BYTES: usize = 1 << 20;

/// A server over an in-memory file system, its network runtime, and its shared state.
pub struct TestServer {
    runtime: Option<tokio::runtime::Runtime>,
    /// `None` once closed.
    shared: Option<Arc<Shared>>,
    /// The file system the database lives in and the directives it was opened with (kept
    /// to reopen it).
    fs: Arc<dyn Fs>,
    directives: Vec<String>,
    /// A connection for [`TestServer::q`] and [`TestServer::cmd`].
    main: Option<TestConn>,
}

impl TestServer {
    /// A fresh server with the default configuration (2 shards).
    pub fn in_memory() -> TestServer {
        TestServer::with_config(&[])
    }

    /// A fresh server with `directives` as `strata serve` flags (`["--hash-max-listpack-entries",
    /// "4"]`), applied after the harness's own (`dir`, `shards 2`).
    pub fn with_config(directives: &[&str]) -> TestServer {
        TestServer::open(Arc::new(MemFs::new()), directives)
    }

    /// A server over `fs` as it is (files a test put there first: a nodes.conf).
    pub fn with_fs(fs: Arc<dyn Fs>, directives: &[&str]) -> TestServer {
        TestServer::open(fs, directives)
    }

    /// The file system the server's files live in.
    pub fn fs(&self) -> &Arc<dyn Fs> {
        &self.fs
    }

    fn open(fs: Arc<dyn Fs>, directives: &[&str]) -> TestServer {
        let directives: Vec<String> = directives.iter().map(|s| s.to_string()).collect();
        let mut args: Vec<String> = ["--dir", "/strata-test", "--shards", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(directives.iter().cloned());
        let config = Config::from_args(&args).expect("test configuration");
        let shared = crate::server::open_shared(config, Some(fs.clone()), Vec::new())
            .expect("open the in-memory store");
        let runtime = crate::server::net_runtime(Some(2)).expect("network runtime");
        let mut t = TestServer {
            runtime: Some(runtime),
            shared: Some(shared),
            fs,
            directives,
            main: None,
        };
        t.main = Some(t.conn());
        t
    }

    /// The state every connection shares (the store, the blocked clients, the config).
    pub fn shared(&self) -> &Arc<Shared> {
        self.shared.as_ref().expect("open until closed")
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime until drop")
    }

    /// A new client, served as an accepted TCP client is.
    pub fn conn(&self) -> TestConn {
        let (client, server) = tokio::io::duplex(PIPE_BYTES);
        let shared = self.shared();
        crate::server::admit(shared);
        let n = shared.stats.connections_received.load(Ordering::Relaxed);
        let addr = format!("127.0.0.1:{}", 40000 + n);
        let info = shared.register_client(addr, "127.0.0.1:6379".to_string(), -1, false);
        self.rt()
            .spawn(crate::conn::serve(shared.clone(), server, info));
        TestConn {
            rt: self.rt().handle().clone(),
            pipe: client,
            buf: BytesMut::new(),
        }
    }

    /// Runs a space-separated command on the server's own connection; its reply rendered.
    pub fn q(&mut self, line: &str) -> String {
        self.main.as_mut().expect("main connection").q(line)
    }

    /// Runs `args` on the server's own connection.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.main.as_mut().expect("main connection").cmd(args)
    }

    /// Runs a command given as byte strings on the server's own connection.
    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        self.main.as_mut().expect("main connection").cmd_bytes(args)
    }

    /// Runs a transcript on the server's own connection ([`TestConn::check`]).
    #[track_caller]
    pub fn check(&mut self, transcript: &str) {
        self.main
            .as_mut()
            .expect("main connection")
            .check(transcript)
    }

    /// Waits until `n` clients are blocked on keys (the server has processed their blocking
    /// requests).
    pub fn wait_blocked(&self, n: usize) {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        let blocked = &self.shared().blocked;
        while blocked.len() != n {
            assert!(
                Instant::now() < deadline,
                "{} clients blocked, waited for {n}",
                blocked.len()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Closes the database (every connection ends) and opens it again from the same
    /// in-memory files, as a restart would.
    pub fn reopen(mut self) -> TestServer {
        let (fs, directives) = (self.fs.clone(), std::mem::take(&mut self.directives));
        self.close();
        let directives: Vec<&str> = directives.iter().map(String::as_str).collect();
        TestServer::open(fs, &directives)
    }

    /// Stops every connection and closes the database, as the server thread does at
    /// shutdown.
    fn close(&mut self) {
        if let Some(r) = self.shut_down() {
            r.expect("close the in-memory database");
        }
    }

    /// Closes the server and returns what closing its database said: for a test whose
    /// database failed on purpose (the close reports the failure).
    pub fn close_reporting(mut self) -> strata::Result<()> {
        self.shut_down().unwrap_or(Ok(()))
    }

    /// [`TestServer::close`], returning the database's close (`None`: closed already).
    fn shut_down(&mut self) -> Option<strata::Result<()>> {
        self.main = None;
        let shared = self.shared.take()?;
        shared.request_shutdown();
        // As the server's shutdown: a replication link (CLUSTER REPLICATE, or a master that
        // gave away its last slot) stops and lets go of the state.
        shared.replication.shutdown();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        // A shard worker may still hold the completion of a command whose reply was
        // already sent (it drops it just after): wait for that last reference.
        let deadline = Instant::now() + REPLY_TIMEOUT;
        let mut shared = shared;
        loop {
            match Arc::try_unwrap(shared) {
                Ok(s) => return Some(s.store.into_db().close()),
                Err(s) if Instant::now() < deadline => {
                    shared = s;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => panic!("the server's state is still referenced after shutdown"),
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A test that failed is already panicking: a second panic would abort the run.
        if std::thread::panicking() {
            self.main = None;
            if let Some(s) = &self.shared {
                s.request_shutdown();
            }
            return;
        }
        self.close();
    }
}

/// What a [`TestServer`]'s commands propagated (`effects.rs`), from when it was made
/// ([`TestServer::record_effects`]): the sink the replication log will be.
pub struct EffectLog(Arc<parking_lot::Mutex<Vec<(u8, crate::effects::Argv)>>>);

impl EffectLog {
    /// The commands propagated since the last call, one line each: the arguments joined by
    /// spaces (bytes that are not UTF-8 shown lossily), `@db ` before those of a database
    /// other than 0.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
            .into_iter()
            .map(|(db, argv)| {
                let words: Vec<String> = argv
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                let line = words.join(" ");
                if db == 0 {
                    line
                } else {
                    format!("@{db} {line}")
                }
            })
            .collect()
    }
}

impl TestServer {
    /// Starts recording what commands propagate (installs the server's propagation sink).
    pub fn record_effects(&self) -> EffectLog {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink = log.clone();
        self.shared()
            .propagation
            .set_sink(Box::new(move |db, argv| sink.lock().push((db, argv))));
        EffectLog(log)
    }
}

/// One client connection to a [`TestServer`].
pub struct TestConn {
    rt: tokio::runtime::Handle,
    pipe: DuplexStream,
    /// Bytes received and not yet taken as replies.
    buf: BytesMut,
}

/// Splits a command line as a shell would for simple cases: whitespace separates arguments,
/// double quotes group (`"a b"`, `""`), and `\"` inside them is a quote.
fn split_args(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return out;
        };
        let mut arg = String::new();
        if first == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => arg.extend(chars.next()),
                    c => arg.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                arg.push(c);
            }
        }
        out.push(arg);
    }
}

/// The RESP encoding of a request.
fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl TestConn {
    /// Runs a space-separated command; its reply rendered (see the module header).
    pub fn q(&mut self, line: &str) -> String {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args).to_string()
    }

    /// Runs a transcript: one `COMMAND ARGS => REPLY` per line, the reply rendered as
    /// [`Reply`]'s `Display` does; `(sorted) ` before the command compares every array of
    /// its reply sorted (replies in hash order). Trailing spaces are not compared (an
    /// editor may strip them from the transcript). Arguments are split as a shell would
    /// (`"a b"` and `""` are one argument). Blank lines and `#` comments are skipped. Every
    /// line runs; the test fails listing each line whose reply differs.
    #[track_caller]
    pub fn check(&mut self, transcript: &str) {
        let mut wrong = Vec::new();
        for (n, line) in transcript.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((command, want)) = line.split_once(" => ") else {
                panic!("line {}: no ` => ` in {line:?}", n + 1);
            };
            let (sort, command) = match command.strip_prefix("(sorted) ") {
                Some(c) => (true, c),
                None => (false, command),
            };
            let args = split_args(command);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let reply = self.cmd(&args);
            let got = if sort {
                reply.sorted()
            } else {
                reply.to_string()
            };
            if got.trim_end() != want.trim() {
                wrong.push(format!(
                    "  {command}\n    want {}\n    got  {got}",
                    want.trim()
                ));
            }
        }
        assert!(wrong.is_empty(), "replies differ:\n{}", wrong.join("\n"));
    }

    /// Runs `args` and returns the reply.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.recv()
    }

    /// Runs a command given as byte strings.
    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        self.send_raw(&encode(args));
        self.recv()
    }

    /// Runs `args` and returns the reply's exact bytes.
    pub fn raw(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.recv_raw()
    }

    /// Sends `args` without waiting for the reply.
    pub fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send_raw(&encode(&args));
    }

    /// Sends bytes as they are (pipelines, inline commands).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let pipe = &mut self.pipe;
        self.rt
            .block_on(async { pipe.write_all(bytes).await })
            .expect("the server end of the pipe is open");
    }

    /// The next reply.
    pub fn recv(&mut self) -> Reply {
        let raw = self.recv_raw();
        parse(&raw).expect("a whole reply").0
    }

    /// The next reply's bytes.
    pub fn recv_raw(&mut self) -> Vec<u8> {
        match self.recv_within(REPLY_TIMEOUT) {
            Some(r) => r,
            None => panic!("no reply within {REPLY_TIMEOUT:?}"),
        }
    }

    /// Asserts that no reply arrives within `wait` (a client that stays blocked).
    pub fn silent(&mut self, wait: Duration) {
        if let Some(r) = self.recv_within(wait) {
            panic!("unexpected reply {}", String::from_utf8_lossy(&r));
        }
    }

    fn recv_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some((_, n)) = parse(&self.buf) {
                return Some(self.buf.split_to(n).to_vec());
            }
            let (pipe, buf) = (&mut self.pipe, &mut self.buf);
            let read = self
                .rt
                .block_on(async { tokio::time::timeout_at(deadline, pipe.read_buf(buf)).await });
            match read {
                Err(_) => return None,
                Ok(Ok(0)) => panic!(
                    "the server closed the connection ({} bytes pending)",
                    self.buf.len()
                ),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("read: {e}"),
            }
        }
    }

    /// Whether the server has closed this connection (within a short wait).
    pub fn closed(&mut self) -> bool {
        let (pipe, buf) = (&mut self.pipe, &mut self.buf);
        let read = self.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), pipe.read_buf(buf)).await
        });
        matches!(read, Ok(Ok(0)))
    }
}

/// A reply as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`.
    NilBulk,
    /// `*-1`.
    NilArray,
    /// RESP3 `_`.
    Null,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Push(Vec<Reply>),
    /// RESP3 `,` as sent.
    Double(String),
    Bool(bool),
    BigNumber(String),
    Verbatim(String, Vec<u8>),
}

impl Reply {
    /// Rendered with the elements of every array and set sorted by their rendering (for
    /// replies in hash order: SMEMBERS, SINTER).
    pub fn sorted(&self) -> String {
        let sorted = |open: &str, v: &[Reply]| {
            let mut s: Vec<String> = v.iter().map(Reply::sorted).collect();
            s.sort();
            format!("{open}{}]", s.join(", "))
        };
        match self {
            Reply::Array(v) => sorted("[", v),
            Reply::Set(v) => sorted("~[", v),
            other => other.to_string(),
        }
    }

    /// The elements of an array, set or push reply.
    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v,
            _ => &[],
        }
    }
}

fn list(f: &mut fmt::Formatter<'_>, open: &str, v: &[Reply]) -> fmt::Result {
    write!(f, "{open}")?;
    for (i, r) in v.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{r}")?;
    }
    write!(f, "]")
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "+{s}"),
            Reply::Error(s) => write!(f, "-{s}"),
            Reply::Int(n) => write!(f, ":{n}"),
            Reply::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Reply::NilBulk => write!(f, "(nil)"),
            Reply::NilArray => write!(f, "(nil-array)"),
            Reply::Null => write!(f, "_"),
            Reply::Array(v) => list(f, "[", v),
            Reply::Set(v) => list(f, "~[", v),
            Reply::Push(v) => list(f, ">[", v),
            Reply::Map(kv) => {
                write!(f, "{{")?;
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                write!(f, "}}")
            }
            Reply::Double(d) => write!(f, ",{d}"),
            Reply::Bool(b) => write!(f, "#{}", if *b { 't' } else { 'f' }),
            Reply::BigNumber(n) => write!(f, "({n})"),
            Reply::Verbatim(fmt_, b) => write!(f, "={fmt_}:{:?}", String::from_utf8_lossy(b)),
        }
    }
}

/// Parses one reply at the start of `b`: the reply and its length, or `None` while it is
/// incomplete. Malformed bytes fail the test (the server must never send them).
pub fn parse(b: &[u8]) -> Option<(Reply, usize)> {
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[1..end]).expect("a UTF-8 header line");
    let mut at = end + 2;
    let int = |s: &str| -> i64 { s.parse().unwrap_or_else(|_| panic!("bad length {s:?}")) };
    let items = |n: i64, at: &mut usize| -> Option<Vec<Reply>> {
        let mut v = Vec::new();
        for _ in 0..n {
            let (r, len) = parse(&b[*at..])?;
            v.push(r);
            *at += len;
        }
        Some(v)
    };
    let reply = match b[0] {
        b'+' => Reply::Simple(line.to_string()),
        b'-' => Reply::Error(line.to_string()),
        b':' => Reply::Int(int(line)),
        b',' => Reply::Double(line.to_string()),
        b'(' => Reply::BigNumber(line.to_string()),
        b'#' => Reply::Bool(line == "t"),
        b'_' => Reply::Null,
        b'$' | b'=' => {
            let n = int(line);
            if n < 0 {
                return Some((Reply::NilBulk, at));
            }
            let n = n as usize;
            if b.len() < at + n + 2 {
                return None;
            }
            let data = b[at..at + n].to_vec();
            at += n + 2;
            if b[0] == b'=' {
                let kind = String::from_utf8_lossy(&data[..3.min(data.len())]).into_owned();
                Reply::Verbatim(kind, data.get(4..).unwrap_or_default().to_vec())
            } else {
                Reply::Bulk(data)
            }
        }
        b'*' | b'~' | b'>' => {
            let n = int(line);
            if n < 0 {
                return Some((Reply::NilArray, at));
            }
            let v = items(n, &mut at)?;
            match b[0] {
                b'*' => Reply::Array(v),
                b'~' => Reply::Set(v),
                _ => Reply::Push(v),
            }
        }
        b'%' => {
            let n = int(line);
            let mut v = items(n * 2, &mut at)?.into_iter();
            let mut kv = Vec::new();
            while let (Some(k), Some(x)) = (v.next(), v.next()) {
                kv.push((k, x));
            }
            Reply::Map(kv)
        }
        other => panic!("unknown reply type {:?}", other as char),
    };
    Some((reply, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_render_and_parse_back_exactly() {
        let (r, n) = parse(b"*3\r\n$1\r\na\r\n:2\r\n*-1\r\nrest").unwrap();
        assert_eq!(n, 20);
        assert_eq!(r.to_string(), "[\"a\", :2, (nil-array)]");
        assert!(parse(b"$5\r\nab").is_none(), "an incomplete bulk waits");
        assert!(
            parse(b"*2\r\n:1\r\n").is_none(),
            "an incomplete array waits"
        );
        let (r, _) = parse(b"%1\r\n+k\r\n,1.5\r\n").unwrap();
        assert_eq!(r.to_string(), "{+k: ,1.5}");
    }

    #[test]
    fn a_request_takes_the_tcp_path_on_either_shard_and_across_them() {
        let mut t = TestServer::in_memory();
        let shard = |k: &[u8]| {
            let mk = crate::keys::meta_key(0, k);
            t.shared().store.db().shard_of(&mk)
        };
        assert_ne!(shard(b"a"), shard(b"b"));
        assert_eq!(t.q("PING"), "+PONG");
        // `a` and `b` hash to different shards of two: MSET runs on the connection's
        // thread, the single-key commands on their shard's worker.
        assert_eq!(t.q("MSET a 1 b 2 {a}x 3"), "+OK");
        assert_eq!(t.q("MGET a b {a}x nope"), "[\"1\", \"2\", \"3\", (nil)]");
        assert_eq!(
            t.q("NOSUCH"),
            "-ERR unknown command 'NOSUCH', with args beginning with: "
        );
        assert!(t.q("HELLO 3").starts_with('{'));
        // Each connection keeps its own protocol.
        let mut c = t.conn();
        assert_eq!(c.raw(&["HGETALL", "none"]), b"*0\r\n");
        assert!(c.q("HELLO 3").starts_with('{'));
        assert_eq!(c.raw(&["HGETALL", "none"]), b"%0\r\n");
        assert_eq!(t.q("DBSIZE"), ":3");
    }

    #[test]
    fn transcripts_split_arguments_as_a_shell_does() {
        assert_eq!(split_args(r#"SET "a b" "" x"#), ["SET", "a b", "", "x"]);
        assert_eq!(
            split_args(r#"  ECHO "say \"hi\""  "#),
            ["ECHO", "say \"hi\""]
        );
        let mut t = TestServer::in_memory();
        t.check(
            r#"
            # a comment
            SADD s c a b => :3
            (sorted) SMEMBERS s => ["a", "b", "c"]
            SET "k k" "" => +OK
            GET "k k" => ""
            "#,
        );
    }

    #[test]
    #[should_panic(expected = "want :2")]
    fn a_transcript_line_that_differs_fails() {
        TestServer::in_memory().check("SADD s a => :2");
    }

    #[test]
    fn binary_arguments_and_quit() {
        let t = TestServer::in_memory();
        let mut c = t.conn();
        assert_eq!(
            c.cmd_bytes(&[b"SET", b"bin", b"\xff\x00\r\n"]).to_string(),
            "+OK"
        );
        assert_eq!(c.raw(&["GET", "bin"]), b"$4\r\n\xff\x00\r\n\r\n");
        assert_eq!(c.q("QUIT"), "+OK");
        assert!(c.closed());
    }

    #[test]
    fn writes_survive_a_reopen_of_the_in_memory_files_with_the_same_directives() {
        let mut t = TestServer::with_config(&["--hash-max-listpack-entries", "1"]);
        assert_eq!(t.q("RPUSH l a b c"), ":3");
        assert_eq!(t.q("HSET h a 1 b 2"), ":2");
        let mut t = t.reopen();
        assert_eq!(t.q("LRANGE l 0 -1"), "[\"a\", \"b\", \"c\"]");
        assert_eq!(
            t.q("CONFIG GET hash-max-listpack-entries"),
            "[\"hash-max-listpack-entries\", \"1\"]"
        );
        assert_eq!(t.q("OBJECT ENCODING h"), "\"hashtable\"");
    }
}
