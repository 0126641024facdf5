//! Writing RDB 9 encodings (`docs/format/rdb.md`): strings as Redis's `rdbSaveRawString`
//! writes them (integer-encoded when short and canonical, LZF when longer than 20 bytes and
//! smaller compressed), lists as quicklists of ziplists, sets, hashes and sorted sets
//! (ZSET_2) in their plain encodings, streams as `stream.rs` writes them. Every Redis from
//! 5.0 to 7.4 loads them.

use super::{lzf, packed, types, Value};

/// A quicklist node is closed once its elements reach this many bytes (Redis's default
/// `list-max-ziplist-size -2`: 8 KiB nodes).
const NODE_BYTES: usize = 8 * 1024;
/// Strings longer than this are offered to LZF (Redis: 20).
const LZF_MIN_LEN: usize = 20;
/// Strings up to this long are tried as integers (Redis: 11, "-2147483648").
const INT_MAX_LEN: usize = 11;

/// A length in the shortest form.
pub fn length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, (n & 0xff) as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `s` as an integer encoding if it is the canonical text of an integer that fits 32 bits.
fn int_encoding(s: &[u8]) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() > INT_MAX_LEN {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    if v.to_string().as_bytes() != s {
        return None;
    }
    Some(if let Ok(b) = i8::try_from(v) {
        vec![0xc0, b as u8]
    } else if let Ok(h) = i16::try_from(v) {
        let mut e = vec![0xc1];
        e.extend_from_slice(&h.to_le_bytes());
        e
    } else {
        let w = i32::try_from(v).ok()?;
        let mut e = vec![0xc2];
        e.extend_from_slice(&w.to_le_bytes());
        e
    })
}

/// A string.
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    if let Some(e) = int_encoding(s) {
        out.extend_from_slice(&e);
        return;
    }
    if s.len() > LZF_MIN_LEN {
        // Redis keeps the compressed form only if it saves more than 4 bytes.
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            length(out, c.len() as u64);
            length(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    length(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `v`: its type byte and its encoding.
pub fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => {
            out.push(types::STRING);
            string(out, s);
        }
        Value::List(items) => {
            out.push(types::LIST_QUICKLIST);
            let mut nodes: Vec<&[Vec<u8>]> = Vec::new();
            let (mut start, mut bytes) = (0, 0);
            for (i, e) in items.iter().enumerate() {
                bytes += e.len() + 11; // an entry's header takes at most 11 bytes
                if bytes >= NODE_BYTES || i + 1 == items.len() {
                    nodes.push(&items[start..=i]);
                    (start, bytes) = (i + 1, 0);
                }
            }
            length(out, nodes.len() as u64);
            for n in nodes {
                string(out, &packed::build_ziplist(n));
            }
        }
        Value::Set(items) => {
            out.push(types::SET);
            length(out, items.len() as u64);
            for m in items {
                string(out, m);
            }
        }
        Value::ZSet(items) => {
            out.push(types::ZSET_2);
            length(out, items.len() as u64);
            for (m, s) in items {
                string(out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        Value::Stream(s) => super::stream::write(out, s),
        Value::Hash(items) => {
            out.push(types::HASH);
            length(out, items.len() as u64);
            for (f, v) in items {
                string(out, f);
                string(out, v);
            }
        }
    }
}
