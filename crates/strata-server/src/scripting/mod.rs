//! Lua scripting (Redis's `eval.c` and `script_lua.c`): the script cache, the Lua
//! interpreters, and the rules a script runs by. The commands (EVAL, EVALSHA, SCRIPT) are in
//! `cmd/scripting.rs`; how a script runs atomically is in `cmd/scripting.rs` too.
//!
//! - `vm.rs`: one sandboxed Lua 5.1 state (the libraries and globals Redis 7.0 gives a
//!   script, the `redis` table, globals and library tables read-only) and running a
//!   compiled script in it with `redis.call`/`redis.pcall` bound to the caller's command
//!   context.
//! - `resp.rs`: the conversions between RESP replies and Lua values, both ways, in RESP2 and
//!   after `redis.setresp(3)`.
//! - `functions.rs`: the function libraries' registry (FUNCTION, FCALL) and FUNCTION DUMP's
//!   payload; `library.rs`: a library's code in a Lua state (load-time sandbox,
//!   `redis.register_function`, calling a registered function).
//!
//! **Interpreters.** Redis has one Lua state; Strata runs scripts of different clients at
//! the same time when their keys differ, so it keeps a small pool of states ([`Scripts`]):
//! a script takes a state from the pool (or makes one) and gives it back when it ends. A
//! state compiles a script's body the first time it runs it there and keeps the compiled
//! function. SCRIPT FLUSH drops the bodies and bumps a generation; states of an older
//! generation are dropped instead of returned, so no state keeps a flushed script.
//!
//! **The cache.** Bodies are kept by SHA1. Scripts loaded by SCRIPT LOAD stay until SCRIPT
//! FLUSH; scripts that were only sent with EVAL are bounded ([`EVAL_CACHE_MAX`]): the least
//! recently used is evicted beyond it (`evicted_scripts` in INFO), so clients that send a
//! new script text per call cannot exhaust memory.
//!
//! Layer: services (above store and types; below commands).

pub mod auxlib;
pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod functions;
#[cfg(test)]
mod functions_tests;
pub mod library;
pub mod lua_struct;
pub mod resp;
pub mod vm;
#[cfg(test)]
mod vm_tests;

use bytes::Bytes;
use indexmap::IndexMap;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// EVAL-cached scripts kept at most (Redis 7.4's bound; scripts from SCRIPT LOAD do not
/// count).
pub const EVAL_CACHE_MAX: usize = 500;

/// A Lua state larger than this after a script (and a full collection) is dropped, not
/// pooled.
const VM_KEEP_BYTES: usize = 16 << 20;

/// Lua states kept in the pool beyond those in use.
const POOL_MAX: usize = 8;

/// Bytes a Lua state may allocate (a script allocating without bound gets "not enough
/// memory" instead of taking the server's memory).
pub const LUA_MEMORY_LIMIT_BYTES: usize = 256 << 20;

/// A script's shebang flags (`#!lua flags=...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script has a shebang line (Redis's "no flags" compatibility mode otherwise).
    pub shebang: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

/// A cached script: its code and what its shebang says.
pub struct Script {
    pub sha: String,
    /// The body compiled (the shebang line blanked so line numbers stay).
    pub code: Vec<u8>,
    pub flags: ScriptFlags,
    /// A run touched a key it did not declare: later runs take every stripe at once
    /// instead of finding out again (`cmd/scripting.rs`).
    pub undeclared_keys: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Cache {
    /// Loaded with SCRIPT LOAD (or FUNCTION's, later): kept until flushed.
    loaded: std::collections::HashMap<String, Arc<Script>>,
    /// Cached by EVAL only, least recently used first.
    eval: IndexMap<String, Arc<Script>>,
}

/// A script while it runs: what SCRIPT KILL, `-BUSY` and SHUTDOWN look at. The Lua state's
/// instruction hook (`vm.rs`) reads `kill` every [`vm::HOOK_INSTRUCTIONS`] instructions.
pub struct Running {
    pub started: Instant,
    /// `busy-reply-threshold` when the script started: past it, other clients get `-BUSY`.
    pub threshold: Duration,
    /// SCRIPT KILL (or SHUTDOWN) asked the script to stop.
    pub kill: AtomicBool,
    /// SHUTDOWN stopped it: its writes are dropped, not applied.
    pub aborted: AtomicBool,
    /// It ran a write command: SCRIPT KILL answers `-UNKILLABLE`.
    pub wrote: AtomicBool,
    /// The function an FCALL runs (`None` for EVAL): FUNCTION STATS reports it, and the
    /// kill and `-BUSY` texts name FUNCTION KILL instead of SCRIPT KILL.
    pub function: Option<FunctionRun>,
}

/// What FUNCTION STATS says of a running function.
#[derive(Clone, Debug)]
pub struct FunctionRun {
    pub name: String,
    /// The FCALL (or FCALL_RO) command as the client sent it.
    pub argv: Vec<Bytes>,
}

impl Running {
    fn busy(&self) -> bool {
        self.started.elapsed() >= self.threshold
    }
}

/// Unregisters a running script when it ends.
pub struct RunGuard<'a> {
    scripts: &'a Scripts,
    pub running: Arc<Running>,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let mut r = self.scripts.running.lock();
        r.retain(|x| !Arc::ptr_eq(x, &self.running));
        self.scripts.running_count.store(r.len(), Ordering::SeqCst);
    }
}

/// Why SCRIPT KILL did nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum KillError {
    NotBusy,
    Unkillable,
    /// SCRIPT KILL found a busy function, or FUNCTION KILL a busy EVAL: the other command
    /// must stop it (Redis answers with the `-BUSY` text naming that command).
    OtherKind,
}

/// The script cache and the pool of Lua states.
pub struct Scripts {
    /// Scripts running now (several at once when their keys differ).
    running: Mutex<Vec<Arc<Running>>>,
    /// `running.len()`, read without the lock by every command while no script runs.
    running_count: AtomicUsize,
    cache: Mutex<Cache>,
    pool: Mutex<Vec<vm::Vm>>,
    /// Bumped by SCRIPT FLUSH: states of an older generation are not reused.
    generation: AtomicU64,
    /// Bytes used by the Lua states in the pool (updated as states return).
    pool_memory: AtomicU64,
    /// EVAL-cached scripts evicted by the bound.
    pub evicted: AtomicU64,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            running: Mutex::new(Vec::new()),
            running_count: AtomicUsize::new(0),
            cache: Mutex::new(Cache::default()),
            pool: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            pool_memory: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }
}

/// Redis's `sha1hex`: the lower-case hex SHA1 of `body`.
pub fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Parses a script's shebang line (Redis's `evalExtractShebangFlags`): the flags and the
/// code to compile (the shebang line blanked, so errors keep their line numbers).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, Vec<u8>), String> {
    let mut flags = ScriptFlags::default();
    if !body.starts_with(b"#!") {
        return Ok((flags, body.to_vec()));
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    flags.shebang = true;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match f {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok((flags, body[end..].to_vec()))
}

impl Scripts {
    /// Registers a script that starts now, with the busy threshold in force.
    #[cfg(test)]
    pub fn begin(&self, threshold: Duration) -> RunGuard<'_> {
        self.begin_as(threshold, None)
    }

    /// Registers a script that starts now: an EVAL (`function` is `None`) or an FCALL.
    pub fn begin_as(&self, threshold: Duration, function: Option<FunctionRun>) -> RunGuard<'_> {
        let running = Arc::new(Running {
            started: Instant::now(),
            threshold,
            kill: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            function,
        });
        let mut r = self.running.lock();
        r.push(running.clone());
        self.running_count.store(r.len(), Ordering::SeqCst);
        RunGuard {
            scripts: self,
            running,
        }
    }

    /// A script has run past its busy threshold: other clients' commands get `-BUSY`.
    pub fn busy(&self) -> bool {
        self.running_count.load(Ordering::SeqCst) > 0
            && self.running.lock().iter().any(|r| r.busy())
    }

    /// The busy scripts: `None` if none is busy, else whether the first is a function
    /// (which `-BUSY` text other clients get).
    pub fn busy_kind(&self) -> Option<bool> {
        if self.running_count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let r = self.running.lock();
        let first = r.iter().find(|x| x.busy())?;
        Some(first.function.is_some())
    }

    /// The busy function and how long it has run (FUNCTION STATS), if one is busy.
    pub fn busy_function(&self) -> Option<(FunctionRun, Duration)> {
        let r = self.running.lock();
        r.iter()
            .filter(|x| x.busy())
            .find_map(|x| Some((x.function.clone()?, x.started.elapsed())))
    }

    /// SCRIPT KILL (`functions` false) or FUNCTION KILL (true): stops the busy scripts,
    /// unless one of them has written or is of the other kind.
    pub fn kill(&self, functions: bool) -> Result<(), KillError> {
        let r = self.running.lock();
        let busy: Vec<&Arc<Running>> = r.iter().filter(|x| x.busy()).collect();
        if busy.is_empty() {
            return Err(KillError::NotBusy);
        }
        if busy.iter().any(|x| x.wrote.load(Ordering::SeqCst)) {
            return Err(KillError::Unkillable);
        }
        if busy.iter().any(|x| x.function.is_some() != functions) {
            return Err(KillError::OtherKind);
        }
        for x in busy {
            x.kill.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// SHUTDOWN: stops every running script; their writes are dropped.
    pub fn abort_all(&self) {
        for x in self.running.lock().iter() {
            x.aborted.store(true, Ordering::SeqCst);
            x.kill.store(true, Ordering::SeqCst);
        }
    }

    /// The cached script `sha` (lower case), marking an EVAL-cached one recently used.
    pub fn get(&self, sha: &str) -> Option<Arc<Script>> {
        let mut c = self.cache.lock();
        if let Some(s) = c.loaded.get(sha) {
            return Some(s.clone());
        }
        let i = c.eval.get_index_of(sha)?;
        let last = c.eval.len() - 1;
        c.eval.move_index(i, last);
        c.eval.get_index(last).map(|(_, s)| s.clone())
    }

    pub fn exists(&self, sha: &str) -> bool {
        let c = self.cache.lock();
        c.loaded.contains_key(sha) || c.eval.contains_key(sha)
    }

    /// Caches `body` (already checked to compile, see [`vm::check_compiles`]): by SCRIPT LOAD
    /// (`loaded`, kept) or by EVAL (bounded). Returns the cached script.
    pub fn insert(&self, body: Bytes, loaded: bool) -> Result<Arc<Script>, String> {
        let sha = sha1hex(&body);
        if let Some(s) = self.get(&sha) {
            if loaded && !self.cache.lock().loaded.contains_key(&sha) {
                let mut c = self.cache.lock();
                c.eval.shift_remove(&sha);
                c.loaded.insert(sha, s.clone());
            }
            return Ok(s);
        }
        let (flags, code) = parse_shebang(&body)?;
        vm::check_compiles(&code)?;
        let script = Arc::new(Script {
            sha: sha.clone(),
            code,
            flags,
            undeclared_keys: Default::default(),
        });
        let mut c = self.cache.lock();
        if loaded {
            c.loaded.insert(sha, script.clone());
        } else {
            c.eval.insert(sha, script.clone());
            while c.eval.len() > EVAL_CACHE_MAX {
                c.eval.shift_remove_index(0);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(script)
    }

    /// SCRIPT FLUSH: forgets every script and the states that compiled them.
    pub fn flush(&self) {
        let mut c = self.cache.lock();
        c.loaded.clear();
        c.eval.clear();
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.pool.lock().clear();
        self.pool_memory.store(0, Ordering::Relaxed);
    }

    /// Number of cached scripts (INFO's `number_of_cached_scripts`).
    pub fn count(&self) -> usize {
        let c = self.cache.lock();
        c.loaded.len() + c.eval.len()
    }

    /// Bytes used by the idle Lua states (INFO's `used_memory_lua`).
    pub fn lua_memory(&self) -> u64 {
        self.pool_memory.load(Ordering::Relaxed)
    }

    /// A Lua state from the pool, or a new one.
    pub fn take_vm(&self) -> Result<vm::Vm, String> {
        let generation = self.generation.load(Ordering::SeqCst);
        let mut pool = self.pool.lock();
        while let Some(v) = pool.pop() {
            self.pool_memory
                .fetch_sub(v.memory() as u64, Ordering::Relaxed);
            if v.generation == generation {
                return Ok(v);
            }
        }
        drop(pool);
        vm::Vm::new(generation, LUA_MEMORY_LIMIT_BYTES).map_err(|e| format!("ERR Lua state: {e}"))
    }

    /// Gives a state back after a script ran in it.
    pub fn give_vm(&self, v: vm::Vm) {
        if v.generation != self.generation.load(Ordering::SeqCst) || !v.settle(VM_KEEP_BYTES) {
            return;
        }
        let mut pool = self.pool.lock();
        if pool.len() < POOL_MAX {
            self.pool_memory
                .fetch_add(v.memory() as u64, Ordering::Relaxed);
            pool.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_flags_and_errors() {
        let (f, code) = parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.shebang && f.no_writes && f.allow_oom && !f.allow_stale);
        assert_eq!(code, b"\nreturn 1");
        let (f, code) = parse_shebang(b"return 1").unwrap();
        assert!(!f.shebang);
        assert_eq!(code, b"return 1");
        assert_eq!(
            parse_shebang(b"#!lua flags=bogus\nreturn 1").unwrap_err(),
            "ERR Unexpected flag in script shebang: bogus"
        );
        assert_eq!(
            parse_shebang(b"#!lua name=x\n").unwrap_err(),
            "ERR Unknown lua shebang option: name=x"
        );
        assert_eq!(
            parse_shebang(b"#!luax\n").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!luax"
        );
    }

    #[test]
    fn sha1_of_empty_and_text() {
        assert_eq!(sha1hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn eval_cache_is_bounded_and_loaded_scripts_stay() {
        let s = Scripts::default();
        let kept = s.insert(Bytes::from("return 'kept'"), true).unwrap();
        for i in 0..EVAL_CACHE_MAX + 10 {
            s.insert(Bytes::from(format!("return {i}")), false).unwrap();
        }
        assert_eq!(s.count(), EVAL_CACHE_MAX + 1);
        assert_eq!(s.evicted.load(Ordering::Relaxed), 10);
        assert!(s.exists(&kept.sha));
        assert!(!s.exists(&sha1hex(b"return 0")));
        assert!(s.exists(&sha1hex(b"return 10")));
        assert!(s.insert(Bytes::from("return +"), false).is_err());
        s.flush();
        assert_eq!(s.count(), 0);
    }
}
