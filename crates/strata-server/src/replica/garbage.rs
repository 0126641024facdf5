//! The old generations of the keyspace: physical databases that no logical database below
//! `databases` maps to but that hold records (the dataset a full sync replaced, or a load
//! cut by a crash or a failure), deleted in the background, a batch at a time, with their
//! progress in the log (design §13.25). Nothing reads them: SELECT, SWAPDB and the
//! replication stream name logical databases only.
//!
//! A physical database is *busy* while a load writes it or the cleaner deletes it
//! ([`super::Replication::claim`]): the cleaner skips the one, a load chooses other spare
//! databases than the other.

use crate::keys::MAX_DATABASES;
use crate::server::Shared;
use std::sync::Arc;
use std::time::Instant;

/// Records deleted per batch.
const BATCH: usize = 1000;

/// Starts a thread that deletes the records of every unmapped physical database.
pub fn clean_unmapped(shared: &Arc<Shared>) {
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("strata-dbclean".to_string())
        .spawn(move || clean(&shared));
    if let Err(e) = spawned {
        eprintln!("strata-server: replication: starting the cleaner of old datasets: {e}");
    }
}

fn clean(shared: &Shared) {
    let store = &shared.store.front();
    let stop = shared.shutdown_receiver();
    let databases = shared.config.read().databases;
    for p in 0..MAX_DATABASES as u8 {
        if usize::from(store.dbs.logical(p)) < databases || *stop.borrow() {
            continue;
        }
        let Some(_claim) = shared.replication.claim(p) else {
            continue;
        };
        let started = Instant::now();
        let mut deleted = 0u64;
        loop {
            if *stop.borrow() {
                return;
            }
            match store.delete_some(p, BATCH) {
                Ok(0) => break,
                Ok(n) => {
                    if deleted == 0 {
                        eprintln!(
                            "strata-server: replication: deleting an old dataset's records \
                             in physical database {p}"
                        );
                    }
                    deleted += n as u64;
                    if deleted.is_multiple_of(100 * BATCH as u64) {
                        eprintln!(
                            "strata-server: replication: physical database {p}: {deleted} \
                             records deleted"
                        );
                    }
                }
                Err(e) => {
                    eprintln!(
                        "strata-server: replication: deleting physical database {p} failed \
                         ({e}); it is tried again at the next start"
                    );
                    break;
                }
            }
        }
        if deleted > 0 {
            eprintln!(
                "strata-server: replication: physical database {p}: {deleted} records \
                 deleted in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
}
