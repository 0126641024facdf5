//! A server on an ephemeral port and a minimal RESP2/RESP3 client for the tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;
use strata_server::{Config, ServerHandle, StartOptions};

/// Starts a server on 127.0.0.1 with an ephemeral port over `dir` (2 shards), with `extra`
/// directives as flags.
pub fn start(dir: &Path, extra: &[&str]) -> ServerHandle {
    start_with(dir, extra, StartOptions::default())
}

/// [`start`] with `opts` (a fault-injecting file system, say).
pub fn start_with(dir: &Path, extra: &[&str], opts: StartOptions) -> ServerHandle {
    let mut args: Vec<String> = [
        "--port",
        "0",
        "--dir",
        dir.to_str().unwrap(),
        "--shards",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let cfg = Config::from_args(&args).expect("config");
    strata_server::start(cfg, opts).expect("start")
}

/// A reply, as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1` (RESP2).
    NilBulk,
    /// `*-1` (RESP2).
    NilArray,
    /// `_` (RESP3).
    Null,
    Array(Vec<V>),
    Map(Vec<(V, V)>),
    Set(Vec<V>),
    Double(String),
    Bool(bool),
    Verbatim(String, Vec<u8>),
    /// `>` (RESP3 push).
    Push(Vec<V>),
}

impl V {
    pub fn bulk(s: &str) -> V {
        V::Bulk(s.as_bytes().to_vec())
    }
    pub fn ok() -> V {
        V::Simple("OK".to_string())
    }
    pub fn err(s: &str) -> V {
        V::Err(s.to_string())
    }
    pub fn arr(v: &[&str]) -> V {
        V::Array(v.iter().map(|s| V::bulk(s)).collect())
    }
}

pub struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let w = TcpStream::connect(addr).expect("connect");
        w.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        Client { w, r }
    }

    /// Sends a command of text arguments and reads its reply.
    pub fn q(&mut self, args: &[&str]) -> V {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.qb(&a)
    }

    /// Sends a command of binary arguments and reads its reply.
    pub fn qb(&mut self, args: &[&[u8]]) -> V {
        self.send(&encode(args));
        self.read()
    }

    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.w.write_all(bytes)
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).expect("write");
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("read line");
        assert!(l.ends_with("\r\n"), "truncated line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    /// One reply line as raw bytes, `\r\n` removed (error texts need not be UTF-8).
    pub fn raw_line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).expect("read line");
        assert!(l.ends_with(b"\r\n"), "truncated line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn n(&mut self, s: &str) -> i64 {
        s.parse().unwrap_or_else(|_| panic!("bad length {s:?}"))
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n + 2];
        self.r.read_exact(&mut b).expect("read bulk");
        b.truncate(n);
        b
    }

    pub fn read(&mut self) -> V {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => V::Simple(rest.to_string()),
            "-" => V::Err(rest.to_string()),
            ":" => V::Int(self.n(rest)),
            "$" if rest == "-1" => V::NilBulk,
            "$" => {
                let n = self.n(rest) as usize;
                V::Bulk(self.bytes(n))
            }
            "*" if rest == "-1" => V::NilArray,
            "*" => {
                let n = self.n(rest);
                V::Array((0..n).map(|_| self.read()).collect())
            }
            "%" => {
                let n = self.n(rest);
                V::Map((0..n).map(|_| (self.read(), self.read())).collect())
            }
            "~" => {
                let n = self.n(rest);
                V::Set((0..n).map(|_| self.read()).collect())
            }
            "_" => V::Null,
            ">" => {
                let n = self.n(rest);
                V::Push((0..n).map(|_| self.read()).collect())
            }
            "," => V::Double(rest.to_string()),
            "#" => V::Bool(rest == "t"),
            "=" => {
                let n = self.n(rest) as usize;
                let b = self.bytes(n);
                V::Verbatim(String::from_utf8_lossy(&b[..3]).into(), b[4..].to_vec())
            }
            _ => panic!("unknown reply type {l:?}"),
        }
    }

    /// True if the server closed the connection: EOF (possibly after pending bytes), or a
    /// reset (a close with our unread bytes in its buffer); false on a read timeout.
    pub fn closed(&mut self) -> bool {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
        let mut rest = Vec::new();
        match self.r.read_to_end(&mut rest) {
            Ok(_) => true,
            Err(e) => matches!(e.kind(), ConnectionReset | ConnectionAborted),
        }
    }
}

/// Starts the `strata-server` program (the same as `strata serve`) over `dir` on an
/// ephemeral port, with `extra` directives as flags; returns the process and the address it
/// printed in its start-up banner.
pub fn spawn_binary(dir: &Path, extra: &[&str]) -> (std::process::Child, SocketAddr) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args(["--port", "0"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn strata-server");
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    out.read_line(&mut line).expect("banner");
    // Keep reading what else the server prints, so its stdout never hits a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in the banner {line:?}"));
    (child, addr)
}

/// Resident memory of process `pid` in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// The integer in the environment variable `name` (a long test's size knob), else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64: the crash tests' seeded choices (keys, commands, kill delays).
pub fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
