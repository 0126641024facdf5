//! The fixed pieces of the table format shared by the builder and the reader: block handles,
//! the 5-byte block trailer (compression type + masked CRC32C), block compression, and the
//! footer.
//!
//! Specification: `docs/format/sstable.md`. Every constant here is on-disk: do not change one
//! without bumping [`FORMAT_VERSION`].

use crate::error::{Error, Result};
use crate::options::Compression;
use crate::varint;
use std::path::Path;

/// Bytes after every block: compression type (1) + masked CRC32C (4).
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Bytes of the footer at the end of every table.
pub const FOOTER_LEN: usize = 56;

/// The last 8 bytes of every table: the ASCII text `STRATSST` read as a little-endian u64.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"STRATSST");

/// The table format version of tables whose data blocks follow each other with no gap; this
/// build writes it unless blocks are aligned.
pub const FORMAT_VERSION: u32 = 1;

/// The table format version of tables with page-aligned data blocks (`Options::block_align`):
/// version 1, except that zero padding may precede a data block to move it to a 4 KiB page
/// boundary. A version-1 reader refuses such a table as not supported rather than as corrupt.
pub const FORMAT_VERSION_ALIGNED: u32 = 2;

/// Compression type byte of a block stored as is.
pub const BLOCK_RAW: u8 = Compression::None as u8;
/// Compression type byte of an LZ4 block (u32 LE uncompressed length, then the LZ4 block).
pub const BLOCK_LZ4: u8 = Compression::Lz4 as u8;

/// LZ4 cannot expand data by more than this factor (a 15-bit run per 1-byte token, rounded
/// up); a length prefix beyond it is corrupt and must not be allocated.
const LZ4_MAX_RATIO: usize = 255;

const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC so that a CRC stored inside checksummed data does not checksum to itself
/// (LevelDB's rotation + constant).
#[inline]
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

/// Inverse of [`mask_crc`].
#[cfg(test)]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

/// The masked CRC32C stored in a block trailer: over the stored block bytes, then the type
/// byte.
#[inline]
pub fn block_crc(contents: &[u8], block_type: u8) -> u32 {
    mask_crc(crc32c::crc32c_append(
        crc32c::crc32c(contents),
        &[block_type],
    ))
}

/// Where a block lives in its file: `size` bytes at `offset`, not counting the trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (offset, size).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.offset);
        varint::put_u64(out, self.size);
    }

    /// Reads a handle from the front of `input`, advancing it.
    pub fn decode_from(input: &mut &[u8]) -> Option<BlockHandle> {
        let offset = varint::get_u64(input)?;
        let size = varint::get_u64(input)?;
        Some(BlockHandle { offset, size })
    }

    /// Offset just past the block's trailer, `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Compresses `raw` as `compression` asks. Returns the type byte and the bytes to store, which
/// are either `raw` itself or a prefix of `scratch`. LZ4 output is kept only when it saves at
/// least 1/8 of the block; otherwise the block is stored raw.
pub fn compress_block<'a>(
    raw: &'a [u8],
    compression: Compression,
    scratch: &'a mut Vec<u8>,
) -> (u8, &'a [u8]) {
    match compression {
        Compression::None => (BLOCK_RAW, raw),
        Compression::Lz4 => {
            let Ok(len32) = u32::try_from(raw.len()) else {
                return (BLOCK_RAW, raw);
            };
            scratch.clear();
            scratch.resize(4 + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
            scratch[..4].copy_from_slice(&len32.to_le_bytes());
            match lz4_flex::block::compress_into(raw, &mut scratch[4..]) {
                Ok(n) if 4 + n < raw.len() - raw.len() / 8 => (BLOCK_LZ4, &scratch[..4 + n]),
                _ => (BLOCK_RAW, raw),
            }
        }
    }
}

/// Checks the trailer of `raw` (a block as read from disk, trailer included, read from `h`)
/// and returns the uncompressed block bytes and whether it was compressed. The CRC is checked
/// only if `verify`; the structure is always checked, so corrupt bytes give
/// [`Error::Corruption`], never a panic or an unbounded allocation.
pub fn decode_block_contents(
    mut raw: Vec<u8>,
    h: BlockHandle,
    path: &Path,
    verify: bool,
) -> Result<(Vec<u8>, bool)> {
    let corrupt = |offset: u64, reason: String| Error::corruption(path, offset, reason);
    let size = usize::try_from(h.size)
        .ok()
        .filter(|s| s.checked_add(BLOCK_TRAILER_LEN) == Some(raw.len()))
        .ok_or_else(|| {
            corrupt(
                h.offset,
                format!(
                    "block of {} bytes read as {} bytes with trailer",
                    h.size,
                    raw.len()
                ),
            )
        })?;
    let block_type = raw[size];
    if verify {
        let mut stored = [0u8; 4];
        stored.copy_from_slice(&raw[size + 1..]);
        let stored = u32::from_le_bytes(stored);
        let actual = block_crc(&raw[..size], block_type);
        if stored != actual {
            return Err(corrupt(
                h.offset,
                format!("block checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"),
            ));
        }
    }
    match block_type {
        BLOCK_RAW => {
            raw.truncate(size);
            Ok((raw, false))
        }
        BLOCK_LZ4 => {
            if size < 4 {
                return Err(corrupt(
                    h.offset,
                    "lz4 block shorter than its length".into(),
                ));
            }
            let mut len = [0u8; 4];
            len.copy_from_slice(&raw[..4]);
            let ulen = u32::from_le_bytes(len) as usize;
            let body = &raw[4..size];
            if ulen > body.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(16) {
                return Err(corrupt(
                    h.offset,
                    format!(
                        "lz4 block claims {ulen} bytes from {} compressed bytes",
                        body.len()
                    ),
                ));
            }
            let mut out = vec![0u8; ulen];
            match lz4_flex::block::decompress_into(body, &mut out) {
                Ok(n) if n == ulen => Ok((out, true)),
                Ok(n) => Err(corrupt(
                    h.offset,
                    format!("lz4 block decompressed to {n} bytes, expected {ulen}"),
                )),
                Err(e) => Err(corrupt(h.offset, format!("lz4 block does not decode: {e}"))),
            }
        }
        t => Err(corrupt(
            h.offset + size as u64,
            format!("unknown block compression type {t}"),
        )),
    }
}

/// The footer: where the filter and index blocks are, and how many entries the table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    pub filter: BlockHandle,
    pub index: BlockHandle,
    pub num_entries: u64,
    /// Written as [`FORMAT_VERSION_ALIGNED`]: padding may precede data blocks.
    pub aligned: bool,
}

impl Footer {
    /// The 56 bytes written at the end of the table.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(&self.filter.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.filter.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.index.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.index.size.to_le_bytes());
        b[32..40].copy_from_slice(&self.num_entries.to_le_bytes());
        let version = if self.aligned {
            FORMAT_VERSION_ALIGNED
        } else {
            FORMAT_VERSION
        };
        b[44..48].copy_from_slice(&version.to_le_bytes());
        b[48..56].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        let crc = footer_crc(&b);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses the footer found at `offset` of `path`. Checks, in order: magic, checksum,
    /// version. A footer with a valid checksum and another version is
    /// [`Error::NotSupported`]; anything else wrong is [`Error::Corruption`].
    pub fn decode(b: &[u8; FOOTER_LEN], path: &Path, offset: u64) -> Result<Footer> {
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let u32_at = |i: usize| {
            let mut x = [0u8; 4];
            x.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(x)
        };
        let magic = u64_at(48);
        if magic != TABLE_MAGIC {
            return Err(Error::corruption(
                path,
                offset + 48,
                format!("bad table magic {magic:#018x} (not a Strata table, or truncated)"),
            ));
        }
        let (stored, actual) = (u32_at(40), footer_crc(b));
        if stored != actual {
            return Err(Error::corruption(
                path,
                offset + 40,
                format!(
                    "footer checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
                ),
            ));
        }
        let version = u32_at(44);
        if version != FORMAT_VERSION && version != FORMAT_VERSION_ALIGNED {
            return Err(Error::NotSupported(format!(
                "{}: table format version {version}; this build reads versions \
                 {FORMAT_VERSION} and {FORMAT_VERSION_ALIGNED}",
                path.display()
            )));
        }
        Ok(Footer {
            filter: BlockHandle {
                offset: u64_at(0),
                size: u64_at(8),
            },
            index: BlockHandle {
                offset: u64_at(16),
                size: u64_at(24),
            },
            num_entries: u64_at(32),
            aligned: version == FORMAT_VERSION_ALIGNED,
        })
    }
}

/// Masked CRC32C over every footer byte except the checksum field itself (bytes 40..44).
fn footer_crc(b: &[u8; FOOTER_LEN]) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(&b[..40]), &b[44..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_mask_round_trips_and_moves() {
        for c in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(c)), c);
            assert_ne!(mask_crc(c), c);
        }
    }

    #[test]
    fn footer_round_trip_and_checks() {
        let f = Footer {
            filter: BlockHandle {
                offset: 100,
                size: 20,
            },
            index: BlockHandle {
                offset: 125,
                size: 40,
            },
            num_entries: 7,
            aligned: false,
        };
        let b = f.encode();
        let aligned = Footer { aligned: true, ..f };
        assert_eq!(
            Footer::decode(&aligned.encode(), Path::new("t.sst"), 0).unwrap(),
            aligned
        );
        let p = Path::new("t.sst");
        assert_eq!(Footer::decode(&b, p, 0).unwrap(), f);
        for i in 0..FOOTER_LEN {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(
                Footer::decode(&bad, p, 0).unwrap_err().is_corruption(),
                "byte {i}"
            );
        }
        let mut v3 = b;
        v3[44..48].copy_from_slice(&3u32.to_le_bytes());
        let crc = footer_crc(&v3);
        v3[40..44].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Footer::decode(&v3, p, 0),
            Err(Error::NotSupported(_))
        ));
    }

    #[test]
    fn lz4_round_trip_and_bad_lengths() {
        let raw: Vec<u8> = (0..4000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let mut scratch = Vec::new();
        let (t, stored) = compress_block(&raw, Compression::Lz4, &mut scratch);
        assert_eq!(t, BLOCK_LZ4);
        let mut file = stored.to_vec();
        let h = BlockHandle {
            offset: 0,
            size: file.len() as u64,
        };
        let crc = block_crc(&file, t);
        file.push(t);
        file.extend_from_slice(&crc.to_le_bytes());
        let (out, compressed) =
            decode_block_contents(file.clone(), h, Path::new("x"), true).unwrap();
        assert!(compressed);
        assert_eq!(out, raw);
        // A huge length prefix is refused without allocating it (checksums off).
        let mut huge = file.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = decode_block_contents(huge, h, Path::new("x"), false).unwrap_err();
        assert!(e.is_corruption());
        // Incompressible data is stored raw.
        let noise: Vec<u8> = (0..1000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        assert_eq!(
            compress_block(&noise, Compression::Lz4, &mut scratch).0,
            BLOCK_RAW
        );
    }
}
