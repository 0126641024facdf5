//! The functions engine's registry (Redis's `functions.c`): libraries loaded with FUNCTION
//! LOAD, their functions, and the payload FUNCTION DUMP and RESTORE carry, which is also how
//! the libraries are stored (`docs/format/functions.md`).
//!
//! **Libraries.** A library is its code (`#!lua name=<lib>` and the Lua that registers its
//! functions, `library.rs`), checked by running it once in a fresh Lua state when it is
//! loaded. Library names are case-sensitive; function names are unique across libraries
//! without regard to case, as Redis's function dictionary compares them (FCALL finds `F1`
//! for `f1`).
//!
//! **Changes are atomic and stored first.** Every change (LOAD, DELETE, FLUSH, RESTORE)
//! builds the new registry beside the current one, gives its payload to the caller's
//! `save` (which writes it to the database, `cmd/functions.rs`) and only then makes it
//! current, under the registry's lock: a change that cannot be stored is not made, and
//! changes are stored in the order they are made.

use super::library::{self, valid_name, ERR_NAME};
use super::ScriptFlags;
use crate::rdb;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The only engine (FUNCTION LIST's `engine`, FUNCTION STATS's `engines`).
pub const ENGINE: &str = "LUA";

/// Redis's `RDB_OPCODE_FUNCTION2`: a library in a payload. On-disk: do not renumber.
pub const OPCODE_FUNCTION: u8 = 245;
/// Redis's `RDB_OPCODE_FUNCTION_PRE_GA` (7.0's release candidates), refused.
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// The RDB version function payloads are written with: 10, Redis 7.0's, the first with
/// functions (Redis 7.0 refuses payloads of a newer version).
pub const PAYLOAD_VERSION: u16 = 10;

/// A function of a library.
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
    /// A run touched a key it did not declare: later runs take every stripe at once
    /// (`cmd/scripting.rs`).
    pub undeclared_keys: AtomicBool,
}

/// A loaded library.
pub struct Library {
    /// Unique in this process: Lua states key the callbacks they made by it.
    pub id: u64,
    pub name: String,
    /// The code as loaded, shebang line included (FUNCTION LIST WITHCODE, DUMP).
    pub code: Bytes,
    /// Its functions, by name.
    pub functions: BTreeMap<String, FunctionInfo>,
}

impl Library {
    /// The code the Lua state runs: from the shebang line's newline on, so that line numbers
    /// in errors are the code's own.
    pub fn body(&self) -> &[u8] {
        let at = self
            .code
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(self.code.len());
        &self.code[at..]
    }
}

/// How FUNCTION RESTORE treats the libraries already loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Drop them all first.
    Flush,
    /// Add the payload's; a library name already loaded fails the restore.
    Append,
    /// Add the payload's, replacing libraries of the same name.
    Replace,
}

/// Libraries and the function index (lower-case name to its library).
#[derive(Clone, Default)]
struct Registry {
    libraries: BTreeMap<String, Arc<Library>>,
    functions: HashMap<String, Arc<Library>>,
}

impl Registry {
    fn link(&mut self, lib: Arc<Library>) {
        for name in lib.functions.keys() {
            self.functions
                .entry(name.to_ascii_lowercase())
                .or_insert_with(|| lib.clone());
        }
        self.libraries.insert(lib.name.clone(), lib);
    }

    fn unlink(&mut self, name: &str) -> Option<Arc<Library>> {
        let lib = self.libraries.remove(name)?;
        self.functions.retain(|_, l| !Arc::ptr_eq(l, &lib));
        Some(lib)
    }

    /// The first function of `lib` whose name another library has (Redis's error).
    fn collision(&self, lib: &Library) -> Result<(), String> {
        match lib
            .functions
            .keys()
            .find(|n| self.functions.contains_key(&n.to_ascii_lowercase()))
        {
            Some(n) => Err(format!("ERR Function {n} already exists")),
            None => Ok(()),
        }
    }

    fn payload(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for lib in self.libraries.values() {
            out.push(OPCODE_FUNCTION);
            rdb::write::string(&mut out, &lib.code);
        }
        out.extend_from_slice(&PAYLOAD_VERSION.to_le_bytes());
        let crc = rdb::crc64::crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// The library code's shebang: the engine and the library name (Redis's
/// `functionExtractLibMetaData`), checked as Redis checks them.
pub fn parse_metadata(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".to_string());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".to_string());
    };
    // Split as Redis's `sdssplitargs` (quotes and escapes; unbalanced quotes are invalid).
    let parts: Vec<String> = crate::protocol::parse::split_args(&code[..end])
        .ok_or_else(|| "ERR Invalid library metadata".to_string())?
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let Some(first) = parts.first() else {
        return Err("ERR Invalid library metadata".to_string());
    };
    let engine = first.get(2..).unwrap_or("");
    let mut name = None;
    for part in &parts[1..] {
        // Bytes, not `str` slicing: a multi-byte character may straddle byte 5.
        let is_name = part.len() >= 5 && part.as_bytes()[..5].eq_ignore_ascii_case(b"name=");
        if !is_name {
            return Err(format!("ERR Invalid metadata value given: {part}"));
        }
        if name.is_some() {
            return Err(
                "ERR Invalid metadata value, name argument was given multiple times".to_string(),
            );
        }
        name = Some(part[5..].to_string());
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".to_string());
    };
    if !valid_name(name.as_bytes()) {
        return Err(ERR_NAME.to_string());
    }
    if !engine.eq_ignore_ascii_case(ENGINE) {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    Ok(name)
}

/// The function libraries.
#[derive(Default)]
pub struct Functions {
    state: Mutex<Registry>,
    next_id: AtomicU64,
    /// Bumped by every change: a Lua state forgets the callbacks of libraries that are gone
    /// only when it changed.
    generation: AtomicU64,
}

/// Stores a registry's payload before it becomes current (`Err`: the change is not made).
pub type Save<'a> = &'a dyn Fn(&[u8]) -> Result<(), String>;

impl Functions {
    /// The libraries stored in `payload` (from [`Functions::payload`]), or an empty registry.
    pub fn open(payload: Option<&[u8]>) -> Result<Functions, String> {
        let f = Functions::default();
        if let Some(p) = payload {
            let libs = f.decode(p)?;
            let mut r = Registry::default();
            for lib in libs {
                r.link(lib);
            }
            *f.state.lock() = r;
        }
        Ok(f)
    }

    /// Checks `code` (metadata, then its load-time code in a fresh Lua state) and returns the
    /// library it defines, not yet registered.
    pub fn compile(&self, code: Bytes) -> Result<Library, String> {
        let name = parse_metadata(&code)?;
        let mut lib = Library {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            name,
            code,
            functions: BTreeMap::new(),
        };
        let vm = super::vm::Vm::new(u64::MAX, super::LUA_MEMORY_LIMIT_BYTES)
            .map_err(|e| format!("ERR Lua state: {e}"))?;
        let registered = library::load(&vm, lib.body())?;
        if registered.is_empty() {
            return Err("ERR No functions registered".to_string());
        }
        for r in registered {
            lib.functions.insert(
                r.name.clone(),
                FunctionInfo {
                    name: r.name,
                    description: r.description,
                    flags: r.flags,
                    undeclared_keys: AtomicBool::new(false),
                },
            );
        }
        Ok(lib)
    }

    /// FUNCTION LOAD: the library's name once it is registered.
    pub fn load(&self, code: Bytes, replace: bool, save: Save<'_>) -> Result<String, String> {
        // A quick answer before the Lua state is made, as Redis checks the name first.
        let name = parse_metadata(&code)?;
        if !replace && self.state.lock().libraries.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let lib = self.compile(code)?;
        let mut st = self.state.lock();
        let mut next = st.clone();
        if next.unlink(&lib.name).is_some() && !replace {
            return Err(format!("ERR Library '{}' already exists", lib.name));
        }
        next.collision(&lib)?;
        next.link(Arc::new(lib));
        save(&next.payload())?;
        *st = next;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(name)
    }

    /// FUNCTION DELETE.
    pub fn delete(&self, name: &[u8], save: Save<'_>) -> Result<(), String> {
        let name = String::from_utf8_lossy(name);
        let mut st = self.state.lock();
        let mut next = st.clone();
        if next.unlink(&name).is_none() {
            return Err("ERR Library not found".to_string());
        }
        save(&next.payload())?;
        *st = next;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self, save: Save<'_>) -> Result<(), String> {
        let mut st = self.state.lock();
        let next = Registry::default();
        save(&next.payload())?;
        *st = next;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// FUNCTION RESTORE.
    pub fn restore(
        &self,
        payload: &[u8],
        policy: RestorePolicy,
        save: Save<'_>,
    ) -> Result<(), String> {
        let libs = self.decode(payload)?;
        let mut st = self.state.lock();
        let mut next = match policy {
            RestorePolicy::Flush => Registry::default(),
            _ => st.clone(),
        };
        for lib in &libs {
            if next.libraries.contains_key(&lib.name) {
                if policy == RestorePolicy::Append {
                    return Err(format!("ERR Library {} already exists", lib.name));
                }
                next.unlink(&lib.name);
            }
        }
        for lib in &libs {
            next.collision(lib)?;
        }
        for lib in libs {
            next.link(lib);
        }
        save(&next.payload())?;
        *st = next;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The libraries of a payload (FUNCTION DUMP's form), each checked as FUNCTION LOAD
    /// checks it; two of the same name, or two functions of the same name, are refused.
    fn decode(&self, payload: &[u8]) -> Result<Vec<Arc<Library>>, String> {
        let (body, _version) = rdb::check_payload(payload)
            .map_err(|_| "ERR DUMP payload version or checksum are wrong".to_string())?;
        let mut r = rdb::Reader::new(body);
        let mut seen = Registry::default();
        let mut libs = Vec::new();
        while r.remaining() > 0 {
            let t = r
                .u8("type")
                .map_err(|_| "ERR can not read data type".to_string())?;
            if t == OPCODE_FUNCTION_PRE_GA {
                return Err("ERR Pre-GA function format not supported".to_string());
            }
            if t != OPCODE_FUNCTION {
                return Err("ERR given type is not a function".to_string());
            }
            let code = r
                .string("library code")
                .map_err(|_| "ERR failed loading the given functions payload".to_string())?;
            let lib = self.compile(Bytes::from(code))?;
            if seen.libraries.contains_key(&lib.name) {
                return Err(format!("ERR Library '{}' already exists", lib.name));
            }
            seen.collision(&lib)?;
            let lib = Arc::new(lib);
            seen.link(lib.clone());
            libs.push(lib);
        }
        Ok(libs)
    }

    /// FUNCTION DUMP: every library, as Redis 7.0 writes them.
    pub fn payload(&self) -> Vec<u8> {
        self.state.lock().payload()
    }

    /// The library and its function `name` (any case), for FCALL.
    pub fn find(&self, name: &[u8]) -> Option<(Arc<Library>, String)> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let st = self.state.lock();
        let lib = st.functions.get(&key)?.clone();
        let exact = lib
            .functions
            .keys()
            .find(|n| n.to_ascii_lowercase() == key)?
            .clone();
        Some((lib, exact))
    }

    /// The registry's generation (changes with every LOAD, DELETE, FLUSH, RESTORE).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether library `id` is still registered (Lua states drop the others' callbacks).
    pub fn is_live(&self, id: u64) -> bool {
        self.state.lock().libraries.values().any(|l| l.id == id)
    }

    /// Every library, by name.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.state.lock().libraries.values().cloned().collect()
    }

    /// Libraries and functions (FUNCTION STATS).
    pub fn counts(&self) -> (usize, usize) {
        let st = self.state.lock();
        let f = st.libraries.values().map(|l| l.functions.len()).sum();
        (st.libraries.len(), f)
    }
}
