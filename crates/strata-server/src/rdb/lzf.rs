//! LZF, the compression of RDB strings (Redis's `lzf_c.c` / `lzf_d.c` by Marc Lehmann),
//! written from the format: a stream of literal runs and back-references.
//!
//! ```text
//! literal run     000LLLLL  then L + 1 bytes (1..=32)
//! short backref   LLLooooo  oooooooo           length L + 2 (L 1..=6), offset o + 1
//! long backref    111ooooo  LLLLLLLL  oooooooo length L + 9 (up to 264), offset o + 1
//! ```
//!
//! The offset counts back from the end of the output so far (1..=8192); a reference may
//! overlap the bytes it produces (a run). The compressor is a greedy one with a hash of
//! three-byte prefixes; its output differs from liblzf's but any LZF decoder reads it.

/// Longest back-reference (`7 + 255 + 2`).
const MAX_REF: usize = 264;
/// Farthest back-reference.
const MAX_OFF: usize = 1 << 13;
/// Longest literal run.
const MAX_LIT: usize = 32;
/// At most this many output bytes per input byte: a long back-reference turns 3 bytes into
/// 264 (used to refuse an implausible uncompressed length before allocating anything).
pub const MAX_RATIO: usize = MAX_REF / 3;

/// Why a compressed string does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LzfError {
    /// The input ends inside a literal run or a back-reference.
    Truncated,
    /// A back-reference points before the start of the output.
    BadOffset,
    /// The output is longer or shorter than the length the payload announced.
    WrongLength,
}

impl std::fmt::Display for LzfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LzfError::Truncated => "LZF data ends inside a run",
            LzfError::BadOffset => "LZF back-reference before the start of the output",
            LzfError::WrongLength => "LZF output differs from the announced length",
        })
    }
}

/// Decompresses `input` into exactly `out_len` bytes. The output grows as it is produced
/// (its first allocation is bounded by the input), so a lying `out_len` costs nothing.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    if out_len > input.len().saturating_mul(MAX_RATIO) {
        return Err(LzfError::WrongLength);
    }
    let mut out: Vec<u8> = Vec::with_capacity(out_len.min(input.len().saturating_mul(4)));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(ip..ip + n).ok_or(LzfError::Truncated)?;
            if out.len() + n > out_len {
                return Err(LzfError::WrongLength);
            }
            out.extend_from_slice(lit);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip).ok_or(LzfError::Truncated)?);
                ip += 1;
            }
            len += 2;
            let low = usize::from(*input.get(ip).ok_or(LzfError::Truncated)?);
            ip += 1;
            let off = ((ctrl & 0x1f) << 8 | low) + 1;
            if off > out.len() {
                return Err(LzfError::BadOffset);
            }
            if out.len() + len > out_len {
                return Err(LzfError::WrongLength);
            }
            let start = out.len() - off;
            if off >= len {
                out.extend_from_within(start..start + len);
            } else {
                for i in 0..len {
                    out.push(out[start + i]);
                }
            }
        }
    }
    if out.len() != out_len {
        return Err(LzfError::WrongLength);
    }
    Ok(out)
}

/// Compresses `input`; `None` if the result would not be shorter than `max_len` bytes
/// (Redis stores a string compressed only when that saves space).
pub fn compress(input: &[u8], max_len: usize) -> Option<Vec<u8>> {
    // The table has about one entry per input byte, at most 2^14: a zeroed table of
    // 2^14 entries for every short value made a MIGRATE of 128-byte values spend most of
    // its CPU in the page faults of that allocation.
    let hash_bits = (usize::BITS - input.len().leading_zeros()).clamp(4, 14);
    let hash = |p: &[u8]| -> usize {
        let v = u32::from(p[0]) << 16 | u32::from(p[1]) << 8 | u32::from(p[2]);
        (v.wrapping_mul(2_654_435_761) >> (32 - hash_bits)) as usize
    };
    // Position + 1 of the last occurrence of each hashed three-byte prefix (0: none).
    let mut table = vec![0usize; 1 << hash_bits];
    let mut out = Vec::with_capacity(max_len.min(input.len()));
    let mut lit_start = 0;
    let mut ip = 0;
    while ip + 2 < input.len() {
        let h = hash(&input[ip..]);
        let candidate = table[h];
        table[h] = ip + 1;
        if candidate > 0 {
            let r = candidate - 1;
            let off = ip - r;
            if off <= MAX_OFF && input[r..r + 3] == input[ip..ip + 3] {
                let max = (input.len() - ip).min(MAX_REF);
                let mut len = 3;
                while len < max && input[r + len] == input[ip + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[lit_start..ip]);
                let (l, o) = (len - 2, off - 1);
                if l < 7 {
                    out.push((l << 5 | o >> 8) as u8);
                } else {
                    out.push((7 << 5 | o >> 8) as u8);
                    out.push((l - 7) as u8);
                }
                out.push((o & 0xff) as u8);
                // Index the positions inside the match too, for later references.
                for p in ip + 1..(ip + len).min(input.len().saturating_sub(2)) {
                    table[hash(&input[p..])] = p + 1;
                }
                ip += len;
                lit_start = ip;
                if out.len() >= max_len {
                    return None;
                }
                continue;
            }
        }
        ip += 1;
    }
    push_literals(&mut out, &input[lit_start..]);
    (out.len() < max_len).then_some(out)
}

fn push_literals(out: &mut Vec<u8>, lit: &[u8]) {
    for chunk in lit.chunks(MAX_LIT) {
        out.push((chunk.len() - 1) as u8);
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) {
        let c = compress(data, usize::MAX).expect("no limit");
        assert_eq!(decompress(&c, data.len()).as_deref(), Ok(data));
    }

    #[test]
    fn round_trips() {
        round_trip(b"");
        round_trip(b"a");
        round_trip(b"abcabcabcabcabcabcabcabc");
        round_trip(&[7u8; 10_000]);
        round_trip(&b"abcdefghij".repeat(100));
        // Pseudo-random bytes (no matches) and text with distant repeats.
        let noise = crate::rdb::tests::noise(0x2545_f491_4f6c_dd1d, 5000);
        round_trip(&noise);
        let mut text = noise[..3000].to_vec();
        text.extend_from_slice(&noise[..3000]);
        text.extend_from_slice(&noise[100..9000.min(noise.len())]);
        round_trip(&text);
    }

    #[test]
    fn compresses_repeats_and_refuses_what_does_not_shrink() {
        let data = b"abcdefghij".repeat(10);
        let c = compress(&data, data.len() - 4).expect("repetitive text shrinks");
        assert!(c.len() < 20, "{}", c.len());
        assert_eq!(compress(b"abcdefghijklmnopqrstuvwxyz", 22), None);
    }

    #[test]
    fn reads_redis_s_output() {
        // SET k ('abcdefghij' * 10) DUMPed by redis-server 7.0.15: clen 18, ulen 100.
        let c = [
            0x0a, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x61, 0xe0, 0x4e,
            0x09, 0x01, 0x69, 0x6a,
        ];
        assert_eq!(decompress(&c, 100), Ok(b"abcdefghij".repeat(10)));
    }

    #[test]
    fn corrupt_input_is_an_error() {
        // A literal run longer than the input.
        assert_eq!(decompress(&[0x05, b'a'], 6), Err(LzfError::Truncated));
        // A back-reference before any output.
        assert_eq!(decompress(&[0x20, 0x00], 3), Err(LzfError::BadOffset));
        // A long back-reference cut after its control byte.
        assert_eq!(
            decompress(&[0x00, b'a', 0xe0], 10),
            Err(LzfError::Truncated)
        );
        // Shorter and longer than announced.
        assert_eq!(
            decompress(&[0x01, b'a', b'b'], 3),
            Err(LzfError::WrongLength)
        );
        assert_eq!(
            decompress(&[0x01, b'a', b'b'], 1),
            Err(LzfError::WrongLength)
        );
        // An announced length no input of this size can produce: refused before any work.
        assert_eq!(
            decompress(&[0x00, b'a'], 1 << 40),
            Err(LzfError::WrongLength)
        );
        // Every truncation and every single-bit flip of a valid stream: an error or some
        // output, never a panic.
        let data = b"hello hello hello hello world world world".repeat(3);
        let c = compress(&data, usize::MAX).expect("no limit");
        for n in 0..c.len() {
            let _ = decompress(&c[..n], data.len());
        }
        for i in 0..c.len() * 8 {
            let mut bad = c.clone();
            bad[i / 8] ^= 1 << (i % 8);
            let _ = decompress(&bad, data.len());
        }
    }
}
