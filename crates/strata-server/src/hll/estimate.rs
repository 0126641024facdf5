//! The cardinality estimate Redis 7 computes from the histogram of register values: Otmar
//! Ertl's improved estimator ("New cardinality estimation algorithms for HyperLogLog
//! sketches", 2017), which needs neither linear counting nor bias tables. The arithmetic
//! follows Redis's order of operations in `f64`, so counts are identical.

use super::{Q, REGISTERS};

/// 1 / (2 ln 2): the estimator's constant for an unbounded number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Ertl's sigma: `x + sum(x^(2^k) 2^(k-1))`, to convergence; infinite at 1.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's tau: `(1 - x - sum((1 - x^(2^-k))^2 2^-k)) / 3`, to convergence; 0 at 0 and 1.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        // `powf` is C's `pow`, which Redis calls: the same rounding.
        z -= (1.0 - x).powf(2.0) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// The estimate from `histo[v]`, the number of registers holding `v`.
pub fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    // `round` rounds halves away from zero, as C's `llroundl`; out of its range (registers
    // all at the top, only from a crafted value) `llroundl` gives i64::MIN, which Redis
    // casts to 2^63.
    let e = (ALPHA_INF * m * m / z).round();
    if e.is_nan() || e >= 2f64.powi(63) {
        return 1 << 63;
    }
    e as u64
}
