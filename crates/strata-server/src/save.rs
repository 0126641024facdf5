//! SAVE and BGSAVE: a checkpoint of the whole database (`strata::Db::checkpoint`, one cut
//! across every shard) under `dir`, Redis's `dump.rdb` analogue.
//!
//! **Layout.** `dir/<dbfilename>` (default `checkpoint`) is a symbolic link to the newest
//! complete checkpoint, a sibling directory `dir/<dbfilename>.<unix-ms>`. A save writes a new
//! directory (synced), points a new link at it, renames the link over the old one (atomic)
//! and syncs `dir`; then removes the previous directory. A crash at any moment leaves the
//! link naming a complete checkpoint (or no link before the first save); a directory no link
//! names is left-over work, removed by the next save.
//!
//! **Concurrency.** One save at a time (`run_lock`); `in_progress` is set while a BGSAVE
//! runs, so SAVE and BGSAVE refuse to start beside it (Redis's "Background save already in
//! progress"). The figures read by LASTSAVE and INFO persistence are atomics here.
//!
//! Layer: services (above store and types; below commands).

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Save state shared by every connection (the server's `Shared::saves`).
pub struct Saves {
    run_lock: Mutex<()>,
    in_progress: AtomicBool,
    /// When the running BGSAVE started, as milliseconds since the server started.
    bgsave_started_ms: AtomicU64,
    /// Unix seconds of the last successful save; the start time until the first one (as
    /// Redis: "at startup we consider the DB saved"). LASTSAVE replies with it.
    last_save_unix: AtomicU64,
    last_bgsave_ok: AtomicBool,
    /// Seconds the last BGSAVE took; -1 before the first.
    last_bgsave_secs: AtomicI64,
    /// Successful saves (INFO `rdb_saves`).
    saves: AtomicU64,
    started: Instant,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn unix_now() -> SystemTime {
    SystemTime::now()
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

impl Default for Saves {
    fn default() -> Self {
        Saves {
            run_lock: Mutex::new(()),
            in_progress: AtomicBool::new(false),
            bgsave_started_ms: AtomicU64::new(0),
            last_save_unix: AtomicU64::new(unix_secs(unix_now())),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            started: Instant::now(),
            thread: Mutex::new(None),
        }
    }
}

/// Redis's reply when a BGSAVE runs.
pub const ERR_IN_PROGRESS: &str = "ERR Background save already in progress";

impl Saves {
    /// Unix time of the last successful SAVE or BGSAVE (LASTSAVE, INFO
    /// `rdb_last_save_time`).
    pub fn last_save_unix(&self) -> u64 {
        self.last_save_unix.load(Ordering::Relaxed)
    }

    pub fn bgsave_in_progress(&self) -> bool {
        self.in_progress.load(Ordering::Acquire)
    }

    /// INFO persistence's save fields, in Redis's order (`rdb_changes_since_last_save` is
    /// not tracked: 0).
    pub fn info_fields(&self) -> Vec<(&'static str, String)> {
        let current = if self.bgsave_in_progress() {
            let now = self.started.elapsed().as_millis() as u64;
            ((now - self.bgsave_started_ms.load(Ordering::Relaxed).min(now)) / 1000) as i64
        } else {
            -1
        };
        vec![
            ("rdb_changes_since_last_save", "0".to_string()),
            (
                "rdb_bgsave_in_progress",
                u8::from(self.bgsave_in_progress()).to_string(),
            ),
            ("rdb_last_save_time", self.last_save_unix().to_string()),
            (
                "rdb_last_bgsave_status",
                if self.last_bgsave_ok.load(Ordering::Relaxed) {
                    "ok"
                } else {
                    "err"
                }
                .to_string(),
            ),
            (
                "rdb_last_bgsave_time_sec",
                self.last_bgsave_secs.load(Ordering::Relaxed).to_string(),
            ),
            ("rdb_current_bgsave_time_sec", current.to_string()),
            ("rdb_saves", self.saves.load(Ordering::Relaxed).to_string()),
        ]
    }

    /// SAVE: checkpoints now, in the calling thread. `Err` holds the reply text.
    pub fn save(&self, db: &strata::Db, dir: &Path, name: &str) -> Result<(), String> {
        if self.bgsave_in_progress() {
            return Err(ERR_IN_PROGRESS.to_string());
        }
        self.run(db, dir, name).map_err(|e| {
            eprintln!("strata-server: SAVE failed: {e}");
            // Redis answers a failed SAVE with its bare shared error.
            "ERR".to_string()
        })
    }

    /// Marks a BGSAVE started; false if one already runs.
    pub fn begin_background(&self) -> bool {
        if self
            .in_progress
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        self.bgsave_started_ms
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        true
    }

    /// The body of a BGSAVE begun with [`Saves::begin_background`], on its own thread.
    pub fn run_background(&self, db: &strata::Db, dir: &Path, name: &str) {
        let t = Instant::now();
        let r = self.run(db, dir, name);
        if let Err(e) = &r {
            eprintln!("strata-server: background save failed: {e}");
        }
        self.last_bgsave_ok.store(r.is_ok(), Ordering::Relaxed);
        self.last_bgsave_secs
            .store(t.elapsed().as_secs() as i64, Ordering::Relaxed);
        self.in_progress.store(false, Ordering::Release);
    }

    /// Ends a BGSAVE begun with [`Saves::begin_background`] that could not run.
    pub fn run_background_failed(&self) {
        self.last_bgsave_ok.store(false, Ordering::Relaxed);
        self.in_progress.store(false, Ordering::Release);
    }

    /// Keeps the BGSAVE thread, so shutdown can wait for it.
    pub fn set_thread(&self, t: std::thread::JoinHandle<()>) {
        if let Some(old) = self.thread.lock().replace(t) {
            let _ = old.join();
        }
    }

    /// Waits for a running BGSAVE (shutdown).
    pub fn join(&self) {
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    fn run(&self, db: &strata::Db, dir: &Path, name: &str) -> Result<(), String> {
        let _one = self.run_lock.lock();
        let started = unix_now();
        write_checkpoint(db, dir, name)?;
        self.last_save_unix
            .store(unix_secs(started), Ordering::Relaxed);
        self.saves.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Writes a checkpoint of `db` and makes `dir/name` name it (see the module docs).
pub fn write_checkpoint(db: &strata::Db, dir: &Path, name: &str) -> Result<(), String> {
    let link = dir.join(name);
    // Never replace a file of the database itself (`dbfilename TXLOG`, `shard-000`, ...).
    if let Ok(m) = std::fs::symlink_metadata(&link) {
        if !m.file_type().is_symlink() {
            return Err(format!(
                "{} exists and is not a checkpoint link: choose another dbfilename",
                link.display()
            ));
        }
    }
    let previous = std::fs::read_link(&link).ok();
    remove_leftovers(dir, name, previous.as_deref());
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let (mut target, mut n) = (format!("{name}.{ms}"), 0);
    while dir.join(&target).exists() {
        n += 1;
        target = format!("{name}.{ms}-{n}");
    }
    db.checkpoint(dir.join(&target))
        .map_err(|e| format!("checkpoint: {e}"))?;
    let tmp = dir.join(format!("{name}.link-tmp"));
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let _ = std::fs::remove_file(&tmp);
    // Relative: the database directory can be moved or copied with its checkpoint.
    std::os::unix::fs::symlink(&target, &tmp).map_err(|e| io("symlink", e))?;
    std::fs::rename(&tmp, &link).map_err(|e| io("rename", e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("sync dir", e))?;
    if let Some(p) = previous.filter(|p| *p != Path::new(&target)) {
        let _ = std::fs::remove_dir_all(dir.join(p));
    }
    Ok(())
}

/// Removes `name.*` directories that the link does not name: saves a crash interrupted.
fn remove_leftovers(dir: &Path, name: &str, current: Option<&Path>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{name}.");
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(s) = file_name.to_str() else {
            continue;
        };
        let stale = s.starts_with(&prefix)
            && s != format!("{name}.link-tmp")
            && current != Some(Path::new(s))
            && e.file_type().is_ok_and(|t| t.is_dir());
        if stale {
            let _ = std::fs::remove_dir_all(PathBuf::from(dir).join(s));
        }
    }
}
