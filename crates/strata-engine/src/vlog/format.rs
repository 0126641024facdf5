//! On-disk layout of value-log files (`docs/format/vlog.md`): file header, frames, entries,
//! and the value pointer stored in the LSM tree.
//!
//! A frame is one commit group: a fixed header (count, body length, first sequence number,
//! checksummed) followed by its entries back to back. Each entry carries its own checksum,
//! so a pointer read verifies one entry without its frame, and recovery accepts a frame only
//! when its header and every entry check out (a torn group is dropped whole).

use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::log::{mask_crc, unmask_crc};
use crate::varint;
use std::path::Path;

/// Magic number opening every value-log file.
pub const FILE_MAGIC: [u8; 8] = *b"STRATVLG";
/// The format version this build writes: frame headers carry the sync watermark. Version 1
/// (24-byte frame headers without it) is still read.
pub const FORMAT_VERSION: u16 = 2;
/// The first format version, without watermarks: read, never written.
pub const FORMAT_VERSION_NO_WATERMARK: u16 = 1;
/// Bytes of the file header: magic, version, reserved, masked crc32c.
pub const FILE_HEADER_LEN: usize = 16;
/// Bytes of a frame header as written (version 2).
pub const FRAME_HEADER_LEN: usize = 32;
/// Bytes of a version-1 frame header (no watermark).
pub const FRAME_HEADER_LEN_V1: usize = 24;

/// Bytes of a frame header in a file of format `version`.
pub fn frame_header_len(version: u16) -> usize {
    if version >= FORMAT_VERSION {
        FRAME_HEADER_LEN
    } else {
        FRAME_HEADER_LEN_V1
    }
}
/// Largest frame body accepted (the length field is 32 bits).
pub const MAX_FRAME_BODY: usize = u32::MAX as usize;

/// Frame types. On-disk: do not renumber. 0 is reserved (zero padding).
pub const FRAME_REPLAY: u8 = 1;
/// A frame written with `disable_wal`: its values are reachable through pointers, but
/// recovery does not replay it.
pub const FRAME_NO_REPLAY: u8 = 2;

/// What an entry is. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// A delete (log record only).
    Delete = 0,
    /// A put whose value lives inline in the LSM tree (log record only).
    Inline = 1,
    /// A put whose value the LSM tree points at: the value's only home.
    Separated = 2,
}

impl EntryKind {
    pub fn from_u8(b: u8) -> Option<EntryKind> {
        match b {
            0 => Some(EntryKind::Delete),
            1 => Some(EntryKind::Inline),
            2 => Some(EntryKind::Separated),
            _ => None,
        }
    }
}

/// Where a separated value lives: the whole entry `len` bytes at `offset` of file `file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValuePointer {
    pub file: u64,
    pub offset: u64,
    pub len: u32,
}

impl ValuePointer {
    /// Appends the pointer as stored in the LSM tree: three varints.
    pub fn encode(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.file);
        varint::put_u64(out, self.offset);
        varint::put_u64(out, u64::from(self.len));
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        self.encode(&mut v);
        v
    }

    /// Decodes a pointer value; `None` if malformed (the caller reports corruption).
    pub fn decode(mut data: &[u8]) -> Option<ValuePointer> {
        let file = varint::get_u64(&mut data)?;
        let offset = varint::get_u64(&mut data)?;
        let len = varint::get_u32(&mut data)?;
        if !data.is_empty() || (len as usize) < MIN_ENTRY_LEN {
            return None;
        }
        Some(ValuePointer { file, offset, len })
    }

    /// Decodes a pointer read from the LSM tree, reporting a malformed one as corruption.
    pub fn decode_or_corrupt(data: &[u8], what: &str) -> Result<ValuePointer> {
        ValuePointer::decode(data).ok_or_else(|| {
            Error::corruption(
                what,
                0,
                format!("malformed value pointer of {} bytes", data.len()),
            )
        })
    }
}

/// Smallest possible entry: crc, kind, two one-byte varints.
pub const MIN_ENTRY_LEN: usize = 7;

/// The encoded file header of a file in format `version`.
pub fn file_header(version: u16) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8..10].copy_from_slice(&version.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&h[..12]));
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a file header and returns its format version; errors name `path`.
pub fn check_file_header(h: &[u8], path: &Path) -> Result<u16> {
    let bad = |r: &str| Err(Error::corruption(path, 0, format!("value-log header: {r}")));
    if h.len() < FILE_HEADER_LEN {
        return bad("file shorter than its header");
    }
    if unmask_crc(u32_at(h, 12)) != crc32c::crc32c(&h[..12]) {
        return bad("checksum mismatch");
    }
    if h[..8] != FILE_MAGIC {
        return bad("bad magic number");
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != FORMAT_VERSION && version != FORMAT_VERSION_NO_WATERMARK {
        return bad(&format!("unsupported version {version}"));
    }
    if h[10] != 0 || h[11] != 0 {
        return bad("non-zero reserved bytes");
    }
    Ok(version)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u8,
    pub count: u32,
    pub body_len: u32,
    pub first_seq: SeqNo,
    /// The sync watermark: the file offset through which the file was known synced when the
    /// frame was written (version 2; 0 in version-1 files).
    pub watermark: u64,
}

impl FrameHeader {
    /// A **sync mark** (`docs/format/vlog.md` section 2): a frame of no entries written right
    /// after a sync that made the file durable through `watermark`, its own offset. It seals
    /// the file at a clean close and at rotation.
    pub fn sync_mark(watermark: u64) -> FrameHeader {
        FrameHeader {
            kind: FRAME_REPLAY,
            count: 0,
            body_len: 0,
            first_seq: 0,
            watermark,
        }
    }

    /// Whether this is a sync mark (a replayable frame with no entries).
    pub fn is_sync_mark(&self) -> bool {
        self.kind == FRAME_REPLAY && self.count == 0 && self.body_len == 0 && self.first_seq == 0
    }

    /// The header as written (version 2, with the watermark).
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut h = [0u8; FRAME_HEADER_LEN];
        h[4] = self.kind;
        h[8..12].copy_from_slice(&self.count.to_le_bytes());
        h[12..16].copy_from_slice(&self.body_len.to_le_bytes());
        h[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        h[24..32].copy_from_slice(&self.watermark.to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&h[4..]));
        h[..4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// The header in version 1 (no watermark), as builds before version 2 wrote it.
    pub fn encode_v1(&self) -> [u8; FRAME_HEADER_LEN_V1] {
        let mut h = [0u8; FRAME_HEADER_LEN_V1];
        h.copy_from_slice(&self.encode()[..FRAME_HEADER_LEN_V1]);
        let crc = mask_crc(crc32c::crc32c(&h[4..]));
        h[..4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes a frame header of `len` bytes ([`frame_header_len`] of the file's version);
    /// `Err(reason)` if it is not a valid one.
    pub fn decode(h: &[u8], len: usize) -> std::result::Result<FrameHeader, &'static str> {
        if h.len() < len {
            return Err("frame header cut off");
        }
        if unmask_crc(u32_at(h, 0)) != crc32c::crc32c(&h[4..len]) {
            return Err("frame header checksum mismatch");
        }
        let kind = h[4];
        if kind != FRAME_REPLAY && kind != FRAME_NO_REPLAY {
            return Err("unknown frame type");
        }
        if h[5..8] != [0, 0, 0] {
            return Err("non-zero reserved bytes in frame header");
        }
        let count = u32_at(h, 8);
        let body_len = u32_at(h, 12);
        // Every entry takes at least MIN_ENTRY_LEN - 1 bytes (a delete has no value length).
        if (body_len as u64) < u64::from(count) * (MIN_ENTRY_LEN as u64 - 1) {
            return Err("frame body too short for its entry count");
        }
        Ok(FrameHeader {
            kind,
            count,
            body_len,
            first_seq: u64_at(h, 16),
            watermark: if len >= FRAME_HEADER_LEN {
                u64_at(h, 24)
            } else {
                0
            },
        })
    }
}

/// Appends one entry to `out`; returns its length.
pub fn encode_entry(out: &mut Vec<u8>, kind: EntryKind, key: &[u8], value: &[u8]) -> usize {
    let start = out.len();
    let len = encode_entry_head(out, kind, key, value);
    out.extend_from_slice(key);
    if kind != EntryKind::Delete {
        out.extend_from_slice(value);
    }
    debug_assert_eq!(out.len() - start, len);
    len
}

/// Appends the head of one entry (checksum, kind, lengths: everything before the key) to
/// `out`, its checksum covering the `key` and `value` that must follow it; returns the whole
/// entry's length. Lets a writer hand the key and value to the file from where they are
/// rather than copy them behind the head first.
pub fn encode_entry_head(out: &mut Vec<u8>, kind: EntryKind, key: &[u8], value: &[u8]) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.push(kind as u8);
    varint::put_u64(out, key.len() as u64);
    let value = if kind == EntryKind::Delete {
        &[][..]
    } else {
        varint::put_u64(out, value.len() as u64);
        value
    };
    let crc = crc32c::crc32c(&out[start + 4..]);
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, key), value);
    out[start..start + 4].copy_from_slice(&mask_crc(crc).to_le_bytes());
    out.len() - start + key.len() + value.len()
}

/// The value length of a separated entry of `entry_len` bytes whose key has `key_len` bytes,
/// from the layout above (crc, kind, two varints, key, value); `None` if no value length
/// fits. Lets compaction judge a pointer's value size without reading it.
pub fn separated_value_len(entry_len: u32, key_len: usize) -> Option<usize> {
    let varint_len = |v: u64| (64 - (v | 1).leading_zeros()).div_ceil(7) as usize;
    let fixed = 4 + 1 + varint_len(key_len as u64) + key_len;
    let rest = (entry_len as usize).checked_sub(fixed)?;
    // `rest` = varint_len(value_len) + value_len, with at most 5 varint bytes for a u32.
    (1..=5)
        .filter_map(|n| rest.checked_sub(n))
        .find(|v| varint_len(*v as u64) == rest - v)
}

/// One decoded entry, borrowing its key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub kind: EntryKind,
    pub key: &'a [u8],
    /// Empty for deletes.
    pub value: &'a [u8],
    /// Bytes the entry takes.
    pub len: usize,
}

/// Decodes the entry at the start of `data` (which may hold more after it), verifying its
/// checksum. `Err(reason)` for anything malformed.
pub fn decode_entry(data: &[u8]) -> std::result::Result<Entry<'_>, &'static str> {
    if data.len() < MIN_ENTRY_LEN - 1 {
        return Err("entry cut off");
    }
    let kind = EntryKind::from_u8(data[4]).ok_or("unknown entry kind")?;
    let mut rest = &data[5..];
    let key_len = varint::get_u32(&mut rest).ok_or("bad key length")? as usize;
    let value_len = if kind == EntryKind::Delete {
        0
    } else {
        varint::get_u32(&mut rest).ok_or("bad value length")? as usize
    };
    let head = data.len() - rest.len();
    let len = head
        .checked_add(key_len)
        .and_then(|n| n.checked_add(value_len))
        .ok_or("entry length overflows")?;
    if len > data.len() {
        return Err("entry cut off");
    }
    if unmask_crc(u32_at(data, 0)) != crc32c::crc32c(&data[4..len]) {
        return Err("entry checksum mismatch");
    }
    Ok(Entry {
        kind,
        key: &data[head..head + key_len],
        value: &data[head + key_len..len],
        len,
    })
}

/// Checks an entry read through `ptr` for `key` and returns the value's range within it.
/// Any mismatch is [`Error::Corruption`] naming `path` and the entry's offset.
pub fn verify_pointed_entry(
    data: &[u8],
    ptr: &ValuePointer,
    key: &[u8],
    path: &Path,
) -> Result<std::ops::Range<usize>> {
    let e = decode_entry(data).map_err(|r| Error::corruption(path, ptr.offset, r))?;
    if e.len != data.len() {
        return Err(Error::corruption(
            path,
            ptr.offset,
            format!(
                "entry of {} bytes but the pointer says {}",
                e.len,
                data.len()
            ),
        ));
    }
    if e.kind != EntryKind::Separated {
        return Err(Error::corruption(
            path,
            ptr.offset,
            format!("pointer leads to a {:?} entry", e.kind),
        ));
    }
    if e.key != key {
        return Err(Error::corruption(
            path,
            ptr.offset,
            "entry belongs to another key",
        ));
    }
    let start = e.len - e.value.len();
    Ok(start..e.len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_then_the_key_and_value_is_the_whole_entry() {
        for (kind, key, value) in [
            (EntryKind::Separated, &b"key"[..], &[7u8; 300][..]),
            (EntryKind::Inline, b"k", b""),
            (EntryKind::Delete, b"gone", b"ignored"),
        ] {
            let mut whole = Vec::new();
            let len = encode_entry(&mut whole, kind, key, value);
            let mut parts = Vec::new();
            assert_eq!(encode_entry_head(&mut parts, kind, key, value), len);
            parts.extend_from_slice(key);
            if kind != EntryKind::Delete {
                parts.extend_from_slice(value);
            }
            assert_eq!(parts, whole);
            assert_eq!(whole.len(), len);
        }
    }

    #[test]
    fn separated_value_len_inverts_the_entry_length() {
        for key_len in [0usize, 1, 16, 127, 128, 300] {
            let key = vec![b'k'; key_len];
            for value_len in [
                0usize,
                1,
                31,
                32,
                126,
                127,
                128,
                129,
                16_383,
                16_384,
                70_000,
                3 << 20,
            ] {
                let mut buf = Vec::new();
                let n = encode_entry(&mut buf, EntryKind::Separated, &key, &vec![7; value_len]);
                assert_eq!(
                    separated_value_len(n as u32, key_len),
                    Some(value_len),
                    "key {key_len}, value {value_len}"
                );
            }
        }
        assert_eq!(separated_value_len(5, 3), None);
    }

    #[test]
    fn entry_round_trip_and_every_flip_detected() {
        let mut buf = Vec::new();
        let n = encode_entry(&mut buf, EntryKind::Separated, b"key", b"the value");
        assert_eq!(n, buf.len());
        let e = decode_entry(&buf).unwrap();
        assert_eq!(
            (e.kind, e.key, e.value, e.len),
            (EntryKind::Separated, &b"key"[..], &b"the value"[..], n)
        );
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut b = buf.clone();
                b[i] ^= 1 << bit;
                if let Ok(e) = decode_entry(&b) {
                    panic!("flip at byte {i} bit {bit} decoded as {e:?}");
                }
            }
        }
        let mut d = Vec::new();
        encode_entry(&mut d, EntryKind::Delete, b"gone", b"ignored");
        let e = decode_entry(&d).unwrap();
        assert_eq!(
            (e.kind, e.key, e.value),
            (EntryKind::Delete, &b"gone"[..], &b""[..])
        );
        for cut in 0..d.len() {
            assert!(decode_entry(&d[..cut]).is_err());
        }
    }

    #[test]
    fn pointer_checks() {
        let mut buf = Vec::new();
        let n = encode_entry(&mut buf, EntryKind::Separated, b"k", b"v");
        let p = ValuePointer {
            file: 7,
            offset: 100,
            len: n as u32,
        };
        let path = Path::new("000007.vlog");
        let r = verify_pointed_entry(&buf, &p, b"k", path).unwrap();
        assert_eq!(&buf[r], b"v");
        assert!(verify_pointed_entry(&buf, &p, b"x", path)
            .unwrap_err()
            .is_corruption());
        let mut inline = Vec::new();
        encode_entry(&mut inline, EntryKind::Inline, b"k", b"v");
        assert!(verify_pointed_entry(&inline, &p, b"k", path)
            .unwrap_err()
            .is_corruption());
        assert_eq!(ValuePointer::decode(&p.to_vec()), Some(p));
        assert_eq!(ValuePointer::decode(&[1, 2]), None);
        let mut long = p.to_vec();
        long.push(0);
        assert_eq!(ValuePointer::decode(&long), None);
    }

    #[test]
    fn headers() {
        let h = file_header(FORMAT_VERSION);
        assert_eq!(check_file_header(&h, Path::new("x")).unwrap(), 2);
        let v1 = file_header(FORMAT_VERSION_NO_WATERMARK);
        assert_eq!(check_file_header(&v1, Path::new("x")).unwrap(), 1);
        assert!(check_file_header(&file_header(3), Path::new("x")).is_err());
        for i in 0..h.len() {
            let mut b = h;
            b[i] ^= 0x10;
            assert!(check_file_header(&b, Path::new("x")).is_err());
        }
        let f = FrameHeader {
            kind: FRAME_REPLAY,
            count: 3,
            body_len: 300,
            first_seq: 42,
            watermark: 4096,
        };
        assert_eq!(FrameHeader::decode(&f.encode(), FRAME_HEADER_LEN), Ok(f));
        let v1 = FrameHeader::decode(&f.encode_v1(), FRAME_HEADER_LEN_V1).unwrap();
        assert_eq!(v1, FrameHeader { watermark: 0, ..f });
        assert!(FrameHeader::decode(&[0u8; FRAME_HEADER_LEN], FRAME_HEADER_LEN).is_err());
        for i in 0..FRAME_HEADER_LEN {
            let mut b = f.encode();
            b[i] ^= 1;
            assert!(
                FrameHeader::decode(&b, FRAME_HEADER_LEN).is_err(),
                "byte {i}"
            );
        }
    }
}
