//! The client registry: every connected client's published state, for CLIENT LIST / INFO /
//! KILL and the slow log.
//!
//! **Protocol.** A connection owns its [`ConnState`](crate::cmd::ConnState) and publishes
//! what other clients may see into its [`ClientInfo`]: the last command, database and name
//! under a small mutex after each command, buffer sizes and the last-interaction time in
//! atomics. Other connections only read those. CLIENT KILL sets [`ClientInfo::killed`] and
//! wakes the connection's task through [`ClientInfo::kill`] (a `Notify`, which keeps the
//! wake-up if the task is not waiting yet); the task closes the socket at its next await.
//! The registry's map is locked only to add, remove and list clients.
//!
//! Layer: services (above store and types; below commands).

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// Bytes the connection asks of the socket per read; CLIENT LIST's `rbs`/`rbp`.
pub const READ_BYTES: usize = 16 * 1024;

/// What a client shows to the others, changed by its own connection after each command.
#[derive(Default, Clone)]
pub struct Published {
    pub name: Option<Bytes>,
    pub db: u8,
    /// Last command, `container|sub` for subcommands (CLIENT LIST `cmd=`).
    pub cmd: String,
    pub resp: u8,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    /// CLIENT NO-EVICT ON (flag `e`) and NO-TOUCH ON (flag `T`, Redis 7.2).
    pub no_evict: bool,
    pub no_touch: bool,
    /// The ACL user authenticated as (CLIENT LIST `user=`); `None`: `default`.
    pub user: Option<Bytes>,
}

/// One connected client.
pub struct ClientInfo {
    pub id: u64,
    /// `ip:port`, or `path:0` for a Unix socket client (Redis's form).
    pub addr: String,
    /// The server's end: `ip:port` or `path:0`.
    pub laddr: String,
    pub fd: i64,
    pub unix: bool,
    pub created: Instant,
    /// Milliseconds since `created` of the last command.
    last_ms: AtomicU64,
    /// Unparsed input bytes and the query buffer's capacity.
    pub qbuf: AtomicUsize,
    pub qbuf_cap: AtomicUsize,
    /// Replies built but not yet handed to the socket, and replies the socket has not taken.
    pub obl: AtomicUsize,
    pub omem: AtomicUsize,
    /// Argument bytes of the command being run.
    pub argv_mem: AtomicUsize,
    pub published: Mutex<Published>,
    /// Commands queued after MULTI; -1 outside a transaction (CLIENT LIST `multi=`, flag
    /// `x`), and their argument bytes (`multi-mem=`).
    pub multi: AtomicI64,
    pub multi_mem: AtomicUsize,
    /// A watched key was modified (flag `d`; set by the writer, `watch.rs`).
    pub watch_dirty: Arc<AtomicBool>,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST `sub`, `psub`,
    /// `ssub`; flag `P`), set by the pub/sub registry.
    sub: AtomicUsize,
    psub: AtomicUsize,
    ssub: AtomicUsize,
    pub killed: AtomicBool,
    pub kill: Notify,
    /// Blocked in a blocking command (CLIENT LIST flag `b`).
    pub blocked: AtomicBool,
    /// In MONITOR mode (flag `O`).
    pub monitor: AtomicBool,
    /// Client-side caching flags (`tracking.rs`: flags `t`, `B`, `R`) and the client id
    /// invalidations are redirected to (`redir=`), set by the tracking state.
    tracking: AtomicU32,
    tracking_redir: AtomicU64,
    /// The replication master's link (flag `M`, CLIENT LIST and KILL `TYPE master`).
    pub master: AtomicBool,
    /// A replica fed by this server (flag `S`, CLIENT LIST and KILL `TYPE replica`).
    pub replica: AtomicBool,
}

impl ClientInfo {
    pub fn new(id: u64, addr: String, laddr: String, fd: i64, unix: bool) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            unix,
            created: Instant::now(),
            last_ms: AtomicU64::new(0),
            qbuf: AtomicUsize::new(0),
            qbuf_cap: AtomicUsize::new(0),
            obl: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            argv_mem: AtomicUsize::new(0),
            published: Mutex::new(Published {
                resp: 2,
                ..Default::default()
            }),
            multi: AtomicI64::new(-1),
            multi_mem: AtomicUsize::new(0),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            blocked: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            tracking: AtomicU32::new(0),
            tracking_redir: AtomicU64::new(0),
            master: AtomicBool::new(false),
            replica: AtomicBool::new(false),
        }
    }

    /// Publishes the client's subscription counts (the pub/sub registry calls it).
    pub fn set_subscriptions(&self, channels: usize, patterns: usize, shard: usize) {
        self.sub.store(channels, Ordering::Relaxed);
        self.psub.store(patterns, Ordering::Relaxed);
        self.ssub.store(shard, Ordering::Relaxed);
    }

    /// Publishes the client's tracking flags (`tracking.rs`) and redirect id.
    pub fn set_tracking(&self, flags: u32, redirect: u64) {
        self.tracking.store(flags, Ordering::Release);
        self.tracking_redir.store(redirect, Ordering::Relaxed);
    }

    /// Sets tracking flag bits `f` (CLIENT CACHING, a broken redirect).
    pub fn add_tracking_flags(&self, f: u32) {
        self.tracking.fetch_or(f, Ordering::AcqRel);
    }

    /// Clears tracking flag bits `f`.
    pub fn remove_tracking_flags(&self, f: u32) {
        self.tracking.fetch_and(!f, Ordering::AcqRel);
    }

    /// The client's tracking flags (`tracking::ON`, ...; 0: not tracking).
    pub fn tracking_flags(&self) -> u32 {
        self.tracking.load(Ordering::Acquire)
    }

    /// The redirect id while tracking, else -1 (CLIENT GETREDIR, `redir=`).
    pub fn tracking_redirect(&self) -> i64 {
        if self.tracking_flags() & crate::tracking::ON == 0 {
            -1
        } else {
            self.tracking_redir.load(Ordering::Relaxed) as i64
        }
    }

    /// Channels subscribed to.
    pub fn sub(&self) -> usize {
        self.sub.load(Ordering::Relaxed)
    }

    /// Patterns subscribed to.
    pub fn psub(&self) -> usize {
        self.psub.load(Ordering::Relaxed)
    }

    /// Whether the client holds a subscription (Redis's `CLIENT_PUBSUB`: client type
    /// `pubsub`, flag `P`).
    pub fn is_subscriber(&self) -> bool {
        self.sub() + self.psub() + self.ssub.load(Ordering::Relaxed) > 0
    }

    /// Marks a command's start (CLIENT LIST `idle=`).
    pub fn touch(&self) {
        self.last_ms
            .store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Seconds since the last command.
    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Asks the connection to close.
    pub fn request_kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    pub fn is_master(&self) -> bool {
        self.master.load(Ordering::Relaxed)
    }

    /// Redis's CLIENT LIST line (networking.c `catClientInfoString`), without the newline.
    pub fn line(&self) -> String {
        let p = self.published.lock().clone();
        let qbuf = self.qbuf.load(Ordering::Relaxed);
        let qcap = self.qbuf_cap.load(Ordering::Relaxed).max(qbuf);
        let obl = self.obl.load(Ordering::Relaxed);
        let omem = self.omem.load(Ordering::Relaxed);
        let argv_mem = self.argv_mem.load(Ordering::Relaxed);
        let multi = self.multi.load(Ordering::Relaxed);
        let multi_mem = self.multi_mem.load(Ordering::Relaxed);
        let tot = qcap + READ_BYTES + omem + obl + argv_mem + multi_mem;
        let mut s = String::with_capacity(320);
        let name = p
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        // In Redis's order (networking.c `catClientInfoString`).
        let (sub, psub) = (self.sub(), self.psub());
        let ssub = self.ssub.load(Ordering::Relaxed);
        let mut flags = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.is_replica() {
            flags.push('S');
        }
        if self.is_master() {
            flags.push('M');
        }
        if sub + psub + ssub > 0 {
            flags.push('P');
        }
        if multi >= 0 {
            flags.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        let tracking = self.tracking_flags();
        for (f, c) in [
            (crate::tracking::ON, 't'),
            (crate::tracking::BROKEN_REDIR, 'R'),
            (crate::tracking::BCAST, 'B'),
        ] {
            if tracking & f != 0 {
                flags.push(c);
            }
        }
        if self.watch_dirty.load(Ordering::Relaxed) {
            flags.push('d');
        }
        if self.unix {
            flags.push('U');
        }
        if p.no_evict {
            flags.push('e');
        }
        if p.no_touch {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let _ =
            write!(
            s,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} \
             ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} \
             obl={} oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            self.created.elapsed().as_secs(),
            self.idle_secs(),
            flags,
            p.db,
            sub,
            psub,
            ssub,
            multi,
            qbuf,
            qcap - qbuf,
            argv_mem,
            multi_mem,
            READ_BYTES,
            READ_BYTES,
            obl,
            omem,
            tot,
            if p.cmd.is_empty() { "NULL" } else { &p.cmd },
            p.user
                .as_ref()
                .map_or(std::borrow::Cow::Borrowed("default"), |u| String::from_utf8_lossy(u)),
            self.tracking_redirect(),
            p.resp,
        );
        s
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct Registry {
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl Registry {
    pub fn add(&self, c: Arc<ClientInfo>) {
        self.clients.lock().insert(c.id, c);
    }

    pub fn remove(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    /// Whether client `id` is connected.
    pub fn contains(&self, id: u64) -> bool {
        self.clients.lock().contains_key(&id)
    }

    /// The clients in id order (a copy: the caller formats without the lock).
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_line_has_redis_fields_in_order() {
        let c = ClientInfo::new(
            7,
            "127.0.0.1:5000".into(),
            "127.0.0.1:6379".into(),
            9,
            false,
        );
        c.published.lock().cmd = "client|list".into();
        let line = c.line();
        let keys: Vec<&str> = line
            .split(' ')
            .map(|kv| kv.split_once('=').unwrap().0)
            .collect();
        assert_eq!(
            keys.join(","),
            "id,addr,laddr,fd,name,age,idle,flags,db,sub,psub,ssub,multi,qbuf,qbuf-free,\
             argv-mem,multi-mem,rbs,rbp,obl,oll,omem,tot-mem,events,cmd,user,redir,resp"
        );
        assert!(line.starts_with("id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=9 name= "));
        assert!(line.ends_with("cmd=client|list user=default redir=-1 resp=2"));
        assert!(line.contains(" flags=N db=0 sub=0 psub=0 "));
        c.set_subscriptions(2, 1, 0);
        assert!(c.line().contains(" flags=P db=0 sub=2 psub=1 "));
        c.set_subscriptions(0, 0, 0);
        let r = Registry::default();
        r.add(Arc::new(c));
        assert_eq!(r.len(), 1);
        r.remove(7);
        assert_eq!(r.len(), 0);
    }
}
