//! Redis's partial quicksort (pqsort.c: Bentley & McIlroy's "Engineering a Sort Function"
//! with the recursion skipped for parts outside a range of ranks), which SORT ... BY ...
//! LIMIT and the geo searches cut by COUNT use. Elements that compare equal come out in
//! the order this algorithm leaves them, not in their first order: to reply what
//! redis-server replies, the same steps are taken here (the same pivots, partitions and
//! insertion sorts). Any sort would do for the elements that differ.
//!
//! Layer: building block (imports no server module above the protocol).

use std::cmp::Ordering;

/// Sorts `v` so that ranks `lo..=hi` hold what a full sort puts there (the rest is only
/// partitioned), exactly as Redis's `pqsort(v, n, size, cmp, lo, hi)` leaves it.
pub fn pqsort<T>(v: &mut [T], cmp: &dyn Fn(&T, &T) -> Ordering, lo: usize, hi: usize) {
    let n = v.len();
    part(v, 0, n, cmp, lo as i64, hi as i64);
}

/// Whether the part `[s, s + m)` lies wholly before or after ranks `lo..=hi`.
fn outside(s: usize, m: usize, lo: i64, hi: i64) -> bool {
    let (first, last) = (s as i64, (s + m) as i64 - 1);
    (lo < first && hi < first) || (lo > last && hi > last)
}

fn insertion<T>(v: &mut [T], a: usize, n: usize, cmp: &dyn Fn(&T, &T) -> Ordering) {
    for m in a + 1..a + n {
        let mut l = m;
        while l > a && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
            v.swap(l, l - 1);
            l -= 1;
        }
    }
}

/// The median of three positions, with the comparisons in Redis's order.
fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &dyn Fn(&T, &T) -> Ordering) -> usize {
    let lt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

fn part<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &dyn Fn(&T, &T) -> Ordering,
    lo: i64,
    hi: i64,
) {
    loop {
        if n < 7 {
            insertion(v, a, n, cmp);
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let mut swapped = false;
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    swapped = true;
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    swapped = true;
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            swapped = true;
            pb += 1;
            pc -= 1;
        }
        if !swapped {
            insertion(v, a, n, cmp);
            return;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, r, lo, hi) {
            part(v, a, r, cmp, lo, hi);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, n, lo, hi) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranks asked for are sorted, whatever the input.
    #[test]
    fn the_range_is_sorted() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 5, 7, 8, 30, 41, 200, 1000] {
            for _ in 0..20 {
                let mut v: Vec<u64> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x % 50
                    })
                    .collect();
                let mut want = v.clone();
                want.sort();
                if n == 0 {
                    continue;
                }
                let lo = (x as usize) % n;
                let hi = (lo + (x as usize >> 8) % 10).min(n - 1);
                pqsort(&mut v, &|a, b| a.cmp(b), lo, hi);
                assert_eq!(v[lo..=hi], want[lo..=hi], "n={n} {lo}..={hi}");
            }
        }
    }

    /// Equal keys end where Redis's pqsort leaves them (SORT l BY h_*->f LIMIT 3 10 ALPHA
    /// with no weights: every element ties; redis-server 7.0.15 replied 1.5 14 1 6).
    #[test]
    fn ties_end_where_redis_leaves_them() {
        let mut v = vec!["1.5", "10", "1", "13", "14", "1", "6"];
        pqsort(&mut v, &|_, _| Ordering::Equal, 3, 12);
        assert_eq!(v[3..], ["1.5", "14", "1", "6"]);
    }
}
