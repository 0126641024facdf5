//! The README's tour of the sharded database (kept compiling by `cargo test`).

use strata::{Db, DbOptions, EngineIter, ScanMode, WriteBatch, WriteOptions};

fn main() -> strata::Result<()> {
    let db = Db::open(
        "/tmp/sharded",
        DbOptions {
            shards: Some(4),
            ..DbOptions::default()
        },
    )?;
    db.put(b"user:1", b"alice")?;
    db.put_opt(&WriteOptions { sync: true }, b"user:2", b"bob")?; // durable on return
    let mut b = WriteBatch::new();
    b.put(b"user:3", b"carol").delete(b"user:1");
    db.write(b)?; // atomic even across shards
    db.put_async(b"user:4", b"dave", |r| r.expect("put")); // callback on the worker
    let pending = db.put_future(&WriteOptions::default(), b"user:5", b"eve");
    pending.wait()?; // or `.await` it: `Pending` is a Future
    let values = db.multi_get(&[&b"user:2"[..], b"user:3"]); // split by shard, in parallel
    let snap = db.snapshot()?; // one consistent cut over every shard
    let first = snap.scan(b"user:", 10, ScanMode::Merged)?; // merged iterator
    let again = snap.scan(b"user:", 10, ScanMode::Parallel)?; // per-shard scans, then cut
    let some = snap.range(b"user:2", Some(b"user:4"))?; // parallel sub-ranges
    let mut it = snap.iter()?; // ordered, both directions
    it.seek_to_first();
    drop((values, first, again, some, it, snap));
    println!("{}", db.batch_stats()); // requests per engine write / read
    db.close()
}
