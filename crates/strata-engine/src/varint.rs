//! LEB128 varints, as LevelDB encodes lengths. Hand-written: a dozen lines on the hot path,
//! and decoding must never panic on bytes from disk.

/// Appends `v` as a varint.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint from the front of `input`, advancing it. `None` if truncated or overlong.
#[inline]
pub fn get_u64(input: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &b) in input.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            *input = &input[i + 1..];
            return Some(v);
        }
    }
    None
}

/// Reads a varint that must fit in 32 bits.
#[inline]
pub fn get_u32(input: &mut &[u8]) -> Option<u32> {
    get_u64(input).and_then(|v| u32::try_from(v).ok())
}

/// Appends `data` prefixed by its length.
#[inline]
pub fn put_len_prefixed(out: &mut Vec<u8>, data: &[u8]) {
    put_u64(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// Reads a length-prefixed slice. `None` if truncated.
#[inline]
pub fn get_len_prefixed<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let mut rest = *input;
    let n = get_u32(&mut rest)? as usize;
    if rest.len() < n {
        return None;
    }
    let (d, r) = rest.split_at(n);
    *input = r;
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip_and_truncation() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_u64(&mut b, v);
            let mut s = &b[..];
            assert_eq!(get_u64(&mut s), Some(v));
            assert!(s.is_empty());
            let mut t = &b[..b.len() - 1];
            assert_eq!(get_u64(&mut t), None);
        }
        let mut s: &[u8] = &[0xff; 11];
        assert_eq!(get_u64(&mut s), None);
    }
}
