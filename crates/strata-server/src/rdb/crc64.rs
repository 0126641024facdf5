//! CRC-64 as Redis computes it over DUMP payloads and RDB files (Redis's `crc64.c`): the
//! Jones polynomial 0xad93d23594c935a9, reflected input and output, initial value 0, no
//! final xor. The check value (the CRC of "123456789") is 0xe9c6d914c4b8d9ca.
//!
//! Computed by the `crc` crate's CRC-64/REDIS with 16 tables (16 bytes a step): the
//! byte-wise table this module had was 28% of a replica's CPU during a full sync, since
//! the RDB reader checks every byte it reads.

use crc::{Crc, Table, CRC_64_REDIS};

const REDIS: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// Continues CRC `crc` (0 to start) over `data`.
pub fn update(crc: u64, data: &[u8]) -> u64 {
    // The crate reflects a custom initial value (the algorithm's input is reflected); a
    // finished CRC of this variant (reflected output, no final xor) is the register
    // already reflected, so it goes in reflected back.
    let mut d = REDIS.digest_with_initial(crc.reverse_bits());
    d.update(data);
    d.finalize()
}

/// The CRC-64 of `data`.
pub fn crc64(data: &[u8]) -> u64 {
    update(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, a byte-wise table: what the crate's result must equal.
    fn reference(mut crc: u64, data: &[u8]) -> u64 {
        const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut table = [0u64; 256];
        for (i, t) in table.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ POLY_REFLECTED
                } else {
                    c >> 1
                };
            }
            *t = c;
        }
        for &b in data {
            crc = table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
        }
        crc
    }

    #[test]
    fn equals_the_byte_wise_definition_at_every_length_and_split() {
        let data = crate::rdb::tests::noise(0x9e37_79b9_7f4a_7c15, 300);
        for len in 0..data.len() {
            let d = &data[..len];
            assert_eq!(crc64(d), reference(0, d), "length {len}");
            let (a, b) = d.split_at(len / 3);
            assert_eq!(
                update(update(0, a), b),
                reference(0, d),
                "split at {}",
                len / 3
            );
        }
        assert_eq!(update(12345, &data), reference(12345, &data));
    }

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
