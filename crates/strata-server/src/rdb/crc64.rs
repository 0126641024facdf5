//! CRC-64 as Redis computes it over DUMP payloads and RDB files (Redis's `crc64.c`): the
//! Jones polynomial 0xad93d23594c935a9, reflected input and output, initial value 0, no
//! final xor. The check value (the CRC of "123456789") is 0xe9c6d914c4b8d9ca.
//!
//! Written here (a byte-wise table, 256 entries) rather than taken from a crate: no crate
//! in the workspace's lock file implements this variant, and the table is twenty lines.

/// The polynomial with its bits reversed (the table's form for a reflected CRC).
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = table();

const fn table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[i] = crc;
        i += 1;
    }
    t
}

/// Continues CRC `crc` (0 to start) over `data`.
pub fn update(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The CRC-64 of `data`.
pub fn crc64(data: &[u8]) -> u64 {
    update(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value_is_redis_s() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(b""), 0);
        // The CRCs of real payloads are checked in `rdb/tests.rs` (footer_is_checked).
    }

    #[test]
    fn update_continues() {
        let data = b"the quick brown fox jumps over the lazy dog";
        let (a, b) = data.split_at(17);
        assert_eq!(update(update(0, a), b), crc64(data));
    }
}
