//! A point lookup that hits the memtable or a cached block allocates only the value it
//! returns, and a lookup that finds nothing allocates nothing: the read path's seek keys,
//! super version and table reader cost no heap allocation. Counted by a global allocator
//! that tallies the allocations of the calling thread only, so background flushes and
//! compactions do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use strata_engine::{Db, Options};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Allocations made by `f` on this thread.
fn count(f: impl FnOnce()) -> u64 {
    let before = allocs();
    f();
    allocs() - before
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

#[test]
fn a_cached_hit_allocates_only_the_returned_value() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        gc_interval_ms: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path().join("db"), opts).unwrap();
    // Tables: keys 0..20000 flushed; memtable: keys 20000..21000.
    for i in 0..20_000 {
        db.put(&key(i), &[i as u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    for i in 20_000..21_000 {
        db.put(&key(i), &[i as u8; 100]).unwrap();
    }
    assert!(db.stats().levels.iter().map(|l| l.0).sum::<usize>() > 0);
    let keys: Vec<Vec<u8>> = (0..21_000).step_by(7).map(key).collect();
    let missing: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("nokey{i}").into_bytes())
        .collect();
    // Warm up: the block cache, the table readers, this thread's reused buffers.
    for k in keys.iter().chain(&missing) {
        db.get(k).unwrap();
    }

    let mut found = 0u64;
    let n = count(|| {
        for k in &keys {
            found += u64::from(db.get(k).unwrap().is_some());
        }
    });
    assert_eq!(found, keys.len() as u64);
    assert_eq!(
        n, found,
        "{n} allocations for {found} cached hits: one per returned value expected"
    );

    let n = count(|| {
        for k in &missing {
            assert_eq!(db.get(k).unwrap(), None);
        }
    });
    assert_eq!(n, 0, "{n} allocations for {} misses", missing.len());
}
