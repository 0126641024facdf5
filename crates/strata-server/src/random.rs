//! The server's one source of random numbers (not for secrets: ACL passwords use the OS's,
//! `cmd/acl.rs`): splitmix64 over a per-thread state seeded from the clock and the thread,
//! so drawing takes no lock and no atomic. Random choices of members (SPOP, SRANDMEMBER,
//! HRANDFIELD, ZRANDMEMBER), of keys (RANDOMKEY, active expiry's samples) and the access
//! counters' logarithmic increments (`access.rs`) all draw from it.
//!
//! Layer: a building block (no server state); anything above may use it.

use std::cell::Cell;

thread_local! {
    static STATE: Cell<u64> = Cell::new({
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let thread = format!("{:?}", std::thread::current().id());
        t ^ xxhash_rust::xxh3::xxh3_64(thread.as_bytes()).rotate_left(32)
    });
}

/// A uniformly distributed 64-bit number.
pub fn next_u64() -> u64 {
    STATE.with(|s| {
        let x = s.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        s.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// A number in `0..n` (`n > 0`; the modulo bias is below 2^-40 for the sizes drawn here).
pub fn below(n: usize) -> usize {
    (next_u64() % n as u64) as usize
}

/// A uniform draw in `[0, 1)`.
pub fn unit() -> f64 {
    (next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_spread_and_stay_in_range() {
        let mut hits = [0u32; 4];
        for _ in 0..40_000 {
            hits[below(4)] += 1;
            let u = unit();
            assert!((0.0..1.0).contains(&u));
        }
        for h in hits {
            assert!((9_000..11_000).contains(&h), "{hits:?}");
        }
        // Threads do not share a sequence.
        let here: Vec<u64> = (0..4).map(|_| next_u64()).collect();
        let there = std::thread::spawn(|| (0..4).map(|_| next_u64()).collect::<Vec<u64>>())
            .join()
            .unwrap();
        assert_ne!(here, there);
    }
}
