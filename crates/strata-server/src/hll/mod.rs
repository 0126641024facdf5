//! HyperLogLog values, byte for byte in Redis's representation (hyperloglog.c), so that a
//! PF key read with GET here is what redis-server would hold, and a value copied from
//! redis-server works here. The format is drawn in `docs/format/hyperloglog.md`: a 16-byte
//! header (`HYLL`, encoding, three unused bytes, the cached cardinality little-endian with
//! bit 63 meaning "stale"), then 16384 registers, dense (6 bits each) or sparse (the
//! ZERO/XZERO/VAL run-length opcodes of `sparse.rs`).
//!
//! A type module with no protocol in it: the commands (`cmd/hll.rs`) turn [`HllError`]
//! into Redis's error replies.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

mod estimate;
mod sparse;
#[cfg(test)]
mod tests;

pub use estimate::estimate;

/// Index bits of the hash (`P`): 2^14 registers.
pub const P: u32 = 14;
/// Registers per HyperLogLog.
pub const REGISTERS: usize = 1 << P;
/// Hash bits left for the run of zeros (`Q`); a register holds at most `Q + 1`.
pub const Q: usize = 64 - P as usize;
/// Bits per dense register.
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Header bytes.
pub const HDR_SIZE: usize = 16;
/// A dense value's exact length.
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
/// Seed of the element hash (Redis's).
const HASH_SEED: u64 = 0xadc8_3b19;
/// Header byte 4. On-disk (and on the wire): do not renumber.
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;
/// Bit 7 of header byte 15: the cached cardinality is stale.
const CACHE_STALE: u8 = 0x80;

/// What is wrong with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HllError {
    /// Not a HyperLogLog at all (short, no magic, unknown encoding, dense of the wrong
    /// length): Redis's `WRONGTYPE Key is not a valid HyperLogLog string value.`
    NotHll,
    /// A sparse value whose opcodes do not cover the registers exactly: Redis's
    /// `INVALIDOBJ Corrupted HLL object detected`.
    Corrupt,
}

/// The representation a value uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// A HyperLogLog: a string value whose header has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hll {
    bytes: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Self {
        Hll::new()
    }
}

impl Hll {
    /// An empty HyperLogLog, sparse: one XZERO opcode covering every register, the cache
    /// holding 0 and valid (Redis's `createHLLObject`).
    pub fn new() -> Hll {
        let mut bytes = vec![0u8; HDR_SIZE];
        bytes[..4].copy_from_slice(b"HYLL");
        bytes[4] = ENC_SPARSE;
        sparse::push_zeros(&mut bytes, REGISTERS);
        Hll { bytes }
    }

    /// Checks a string value as Redis's `isHLLObjectOrReply` does; the sparse opcodes are
    /// checked when they are read.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Hll, HllError> {
        if bytes.len() < HDR_SIZE || &bytes[..4] != b"HYLL" || bytes[4] > ENC_SPARSE {
            return Err(HllError::NotHll);
        }
        if bytes[4] == ENC_DENSE && bytes.len() != DENSE_SIZE {
            return Err(HllError::NotHll);
        }
        Ok(Hll { bytes })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn encoding(&self) -> Encoding {
        if self.bytes[4] == ENC_DENSE {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// The cached cardinality, if it is not stale.
    pub fn cached_count(&self) -> Option<u64> {
        if self.bytes[15] & CACHE_STALE != 0 {
            return None;
        }
        let mut card = [0u8; 8];
        card.copy_from_slice(&self.bytes[8..16]);
        Some(u64::from_le_bytes(card))
    }

    /// Stores `n` as the cached cardinality (valid).
    pub fn set_cached_count(&mut self, n: u64) {
        self.bytes[8..16].copy_from_slice(&n.to_le_bytes());
    }

    /// Marks the cached cardinality stale (the rest of it is kept, as Redis keeps it).
    pub fn invalidate_cache(&mut self) {
        self.bytes[15] |= CACHE_STALE;
    }

    /// Adds an element: whether a register changed. A sparse value is made dense when a
    /// register needs a value over 32 or the opcodes would grow past `sparse_max_bytes`
    /// (Redis's `hll-sparse-max-bytes`). The cache is not touched by a dense add; PFADD
    /// marks it stale once for the whole command, as Redis does.
    pub fn add(&mut self, element: &[u8], sparse_max_bytes: usize) -> Result<bool, HllError> {
        let (index, count) = pattern(element);
        self.set_register(index, count, sparse_max_bytes)
    }

    /// Raises register `index` to `count` if it is lower: whether it changed.
    pub fn set_register(
        &mut self,
        index: usize,
        count: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, HllError> {
        match self.encoding() {
            Encoding::Dense => Ok(dense_raise(&mut self.bytes[HDR_SIZE..], index, count)),
            Encoding::Sparse => {
                match sparse::set(&mut self.bytes, index, count, sparse_max_bytes)? {
                    sparse::SetResult::Unchanged => Ok(false),
                    sparse::SetResult::Changed => Ok(true),
                    sparse::SetResult::NeedsDense => {
                        self.make_dense()?;
                        // The register was below `count`, so this changes it.
                        Ok(dense_raise(&mut self.bytes[HDR_SIZE..], index, count))
                    }
                }
            }
        }
    }

    /// Converts a sparse value to dense, header (and cache) kept: whether it converted.
    pub fn make_dense(&mut self) -> Result<bool, HllError> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_SIZE];
        dense[..HDR_SIZE].copy_from_slice(&self.bytes[..HDR_SIZE]);
        dense[4] = ENC_DENSE;
        let mut idx = 0;
        for op in sparse::Ops::new(&self.bytes) {
            if let sparse::Op::Val(v) = op.kind {
                if idx + op.len > REGISTERS {
                    return Err(HllError::Corrupt);
                }
                for i in idx..idx + op.len {
                    dense_write(&mut dense[HDR_SIZE..], i, v);
                }
            }
            idx += op.len;
        }
        if idx != REGISTERS {
            return Err(HllError::Corrupt);
        }
        self.bytes = dense;
        Ok(true)
    }

    /// The estimated cardinality from the registers (the cache is neither read nor
    /// written).
    pub fn count(&self) -> Result<u64, HllError> {
        let mut histo = [0u32; 64];
        match self.encoding() {
            Encoding::Dense => {
                let regs = &self.bytes[HDR_SIZE..];
                for i in 0..REGISTERS {
                    histo[usize::from(dense_get(regs, i))] += 1;
                }
            }
            Encoding::Sparse => {
                let mut idx = 0;
                for op in sparse::Ops::new(&self.bytes) {
                    let v = match op.kind {
                        sparse::Op::Val(v) => usize::from(v),
                        _ => 0,
                    };
                    histo[v] += op.len as u32;
                    idx += op.len;
                }
                if idx != REGISTERS {
                    return Err(HllError::Corrupt);
                }
            }
        }
        Ok(estimate(&histo))
    }

    /// Raises each of `max` (one byte per register) to this value's register (Redis's
    /// `hllMerge`).
    pub fn merge_into(&self, max: &mut [u8; REGISTERS]) -> Result<(), HllError> {
        match self.encoding() {
            Encoding::Dense => {
                let regs = &self.bytes[HDR_SIZE..];
                for (i, m) in max.iter_mut().enumerate() {
                    *m = (*m).max(dense_get(regs, i));
                }
            }
            Encoding::Sparse => {
                let mut idx = 0;
                for op in sparse::Ops::new(&self.bytes) {
                    if let sparse::Op::Val(v) = op.kind {
                        if idx + op.len > REGISTERS {
                            return Err(HllError::Corrupt);
                        }
                        for m in &mut max[idx..idx + op.len] {
                            *m = (*m).max(v);
                        }
                    }
                    idx += op.len;
                }
                if idx != REGISTERS {
                    return Err(HllError::Corrupt);
                }
            }
        }
        Ok(())
    }

    /// Every register of a dense value (`None` for a sparse one).
    pub fn dense_registers(&self) -> Option<Vec<u8>> {
        (self.encoding() == Encoding::Dense).then(|| {
            let regs = &self.bytes[HDR_SIZE..];
            (0..REGISTERS).map(|i| dense_get(regs, i)).collect()
        })
    }

    /// The opcodes of a sparse value as PFDEBUG DECODE prints them (`z:LEN`, `Z:LEN`,
    /// `v:VALUE,LEN`, space-separated); `None` for a dense value.
    pub fn decode(&self) -> Option<String> {
        if self.encoding() != Encoding::Sparse {
            return None;
        }
        let parts: Vec<String> = sparse::Ops::new(&self.bytes)
            .map(|op| match op.kind {
                sparse::Op::Zero => format!("z:{}", op.len),
                sparse::Op::XZero => format!("Z:{}", op.len),
                sparse::Op::Val(v) => format!("v:{},{}", v, op.len),
            })
            .collect();
        Some(parts.join(" "))
    }
}

/// The estimated cardinality of registers held one per byte (PFCOUNT of several keys).
pub fn count_registers(max: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in max.iter() {
        histo[usize::from(r & 63)] += 1;
    }
    estimate(&histo)
}

/// Austin Appleby's MurmurHash64A, with the tail read as Redis reads it (little-endian
/// words on every platform).
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// An element's register and the value it offers it: the low `P` bits of its hash pick
/// the register, the run of zero bits above them plus one is the value (1..=Q+1).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `i` of dense registers: 6 bits from bit `6 i`, least significant bit first,
/// spilling into the next byte (a missing next byte reads as zero).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let lo = u16::from(regs[byte]);
    let hi = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((lo | (hi << 8)) >> shift) as u8) & REGISTER_MAX
}

fn dense_write(regs: &mut [u8], i: usize, v: u8) {
    let bit = i * BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let mask = u16::from(REGISTER_MAX) << shift;
    let val = u16::from(v & REGISTER_MAX) << shift;
    regs[byte] = (regs[byte] & !(mask as u8)) | val as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next = (*next & !((mask >> 8) as u8)) | (val >> 8) as u8;
    }
}

/// Raises dense register `i` to `v`: whether it changed.
fn dense_raise(regs: &mut [u8], i: usize, v: u8) -> bool {
    if v > dense_get(regs, i) {
        dense_write(regs, i, v);
        true
    } else {
        false
    }
}

/// PFSELFTEST: the register packing and the estimator's error, dense and sparse side by
/// side. `Err` names what failed.
pub fn self_test(sparse_max_bytes: usize) -> Result<(), String> {
    // Registers: random values written to every register read back exactly.
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    let mut expect = vec![0u8; REGISTERS];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..32 {
        for (i, e) in expect.iter_mut().enumerate() {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            *e = (x >> 58) as u8 & REGISTER_MAX;
            dense_write(&mut regs, i, *e);
        }
        if let Some(i) = (0..REGISTERS).find(|&i| dense_get(&regs, i) != expect[i]) {
            return Err(format!("TESTFAILED Register error at {i}"));
        }
    }
    // Error: unique elements into a dense and a sparse value; at each power of ten both
    // agree and lie within six standard errors.
    let mut dense = Hll::new();
    dense
        .make_dense()
        .map_err(|_| "TESTFAILED conversion".to_string())?;
    let mut sparse = Hll::new();
    let rel_err = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    for j in 1..=1_000_000u64 {
        let e = (j ^ x).to_le_bytes();
        let failed = |_| "TESTFAILED add".to_string();
        dense.add(&e, sparse_max_bytes).map_err(failed)?;
        sparse.add(&e, sparse_max_bytes).map_err(failed)?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max_bytes / 2 && sparse.encoding() != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".to_string());
        }
        let (d, s) = (dense.count(), sparse.count());
        if d != s {
            return Err("TESTFAILED dense/sparse disagree".to_string());
        }
        let d = d.map_err(|_| "TESTFAILED count".to_string())?;
        let max_err = if j == 10 {
            1
        } else {
            (rel_err * 6.0 * j as f64).ceil() as u64
        };
        if d.abs_diff(j) > max_err {
            return Err(format!(
                "TESTFAILED Too big error. card:{j} abserr:{}",
                d.abs_diff(j)
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}
