//! The packed encodings RDB strings carry (`docs/format/rdb.md` "Packed encodings"):
//! ziplist (Redis 3.2-6.2), listpack (Redis 7), intset and zipmap (Redis 2.x), read into
//! their elements, and the ziplist written (RDB 9 lists are quicklists of ziplists).
//!
//! Every reader checks the header against the bytes it has, every entry against the bytes
//! left, and the entry count against the header's; integers come out as their decimal
//! text, as Redis returns them.

use super::{Pair, RdbError, PREALLOC_MAX};

fn corrupt(what: &'static str, reason: impl Into<String>) -> RdbError {
    RdbError::Corrupt {
        what,
        reason: reason.into(),
    }
}

/// A bounds-checked cursor over one packed blob.
struct Cursor<'a> {
    what: &'static str,
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                corrupt(
                    self.what,
                    format!("entry at {} overruns the blob", self.pos),
                )
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64, RdbError> {
        let b = self.take(n)?;
        Ok(b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x)))
    }

    fn be(&mut self, n: usize) -> Result<u64, RdbError> {
        let b = self.take(n)?;
        Ok(b.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x)))
    }
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

fn int_text(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// What to reserve for `count` elements: no more than the bytes left (every element takes
/// one or more) nor than [`PREALLOC_MAX`].
fn capped(count: usize, bytes_left: usize) -> usize {
    count.min(bytes_left).min(PREALLOC_MAX)
}

/// The entries of a ziplist.
///
/// ```text
/// zlbytes (4, LE) | zltail (4, LE) | zllen (2, LE; 65535: count them) | entry* | 0xff
/// entry: prevlen (1; or 0xfe + 4 LE) | encoding | data
/// ```
pub fn ziplist(zl: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    const W: &str = "ziplist";
    let mut c = Cursor {
        what: W,
        buf: zl,
        pos: 0,
    };
    let total = c.le(4)? as usize;
    let tail = c.le(4)? as usize;
    let count = c.le(2)? as usize;
    if total != zl.len() || zl.last() != Some(&0xff) || tail >= zl.len() {
        return Err(corrupt(W, "header does not match its bytes"));
    }
    let mut out = Vec::with_capacity(capped(count, zl.len()));
    let mut prev_len = 0usize;
    let mut last_start = 10;
    while c.pos < zl.len() - 1 {
        let start = c.pos;
        let prevlen = match c.u8()? {
            0xfe => c.le(4)? as usize,
            b => usize::from(b),
        };
        if prevlen != prev_len {
            return Err(corrupt(
                W,
                format!("entry at {start}: wrong previous length"),
            ));
        }
        let enc = c.u8()?;
        let value = match enc >> 6 {
            0 => c.take(usize::from(enc & 0x3f))?.to_vec(),
            1 => {
                let n = usize::from(enc & 0x3f) << 8 | usize::from(c.u8()?);
                c.take(n)?.to_vec()
            }
            2 if enc == 0x80 => {
                let n = c.be(4)? as usize;
                c.take(n)?.to_vec()
            }
            _ => int_text(match enc {
                0xc0 => signed(c.le(2)?, 16),
                0xd0 => signed(c.le(4)?, 32),
                0xe0 => c.le(8)? as i64,
                0xf0 => signed(c.le(3)?, 24),
                0xfe => signed(c.le(1)?, 8),
                0xf1..=0xfd => i64::from(enc & 0x0f) - 1,
                _ => {
                    return Err(corrupt(
                        W,
                        format!("entry at {start}: bad encoding {enc:#x}"),
                    ))
                }
            }),
        };
        prev_len = c.pos - start;
        last_start = start;
        out.push(value);
    }
    if (count != 0xffff && count != out.len()) || (!out.is_empty() && tail != last_start) {
        return Err(corrupt(
            W,
            "entry count or tail offset does not match the entries",
        ));
    }
    Ok(out)
}

/// A ziplist of `entries`, each stored as a string (RDB 9 quicklist nodes; every Redis
/// since 3.2 reads them).
pub fn build_ziplist<E: AsRef<[u8]>>(entries: &[E]) -> Vec<u8> {
    let mut zl = vec![0u8; 10];
    let mut prev_len = 0usize;
    let mut tail = 10;
    for e in entries {
        let e = e.as_ref();
        let start = zl.len();
        tail = start;
        if prev_len < 254 {
            zl.push(prev_len as u8);
        } else {
            zl.push(0xfe);
            zl.extend_from_slice(&(prev_len as u32).to_le_bytes());
        }
        match e.len() {
            n if n <= 0x3f => zl.push(n as u8),
            n if n <= 0x3fff => zl.extend_from_slice(&[0x40 | (n >> 8) as u8, (n & 0xff) as u8]),
            n => {
                zl.push(0x80);
                zl.extend_from_slice(&(n as u32).to_be_bytes());
            }
        }
        zl.extend_from_slice(e);
        prev_len = zl.len() - start;
    }
    zl.push(0xff);
    let total = zl.len() as u32;
    zl[0..4].copy_from_slice(&total.to_le_bytes());
    zl[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
    let count = entries.len().min(0xffff) as u16;
    zl[8..10].copy_from_slice(&count.to_le_bytes());
    zl
}

/// Bytes a listpack entry's back-length takes for an entry of `len` bytes.
fn backlen_bytes(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The entries of a listpack.
///
/// ```text
/// total bytes (4, LE) | count (2, LE; 65535: count them) | entry* | 0xff
/// entry: encoding | data | back-length (1..=5 bytes)
/// ```
pub fn listpack(lp: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    const W: &str = "listpack";
    let mut c = Cursor {
        what: W,
        buf: lp,
        pos: 0,
    };
    let total = c.le(4)? as usize;
    let count = c.le(2)? as usize;
    if total != lp.len() || lp.last() != Some(&0xff) {
        return Err(corrupt(W, "header does not match its bytes"));
    }
    let mut out = Vec::with_capacity(capped(count, lp.len()));
    while c.pos < lp.len() - 1 {
        let start = c.pos;
        let enc = c.u8()?;
        let value = if enc & 0x80 == 0 {
            int_text(i64::from(enc))
        } else if enc & 0xc0 == 0x80 {
            c.take(usize::from(enc & 0x3f))?.to_vec()
        } else if enc & 0xe0 == 0xc0 {
            int_text(signed(u64::from(enc & 0x1f) << 8 | c.le(1)?, 13))
        } else if enc & 0xf0 == 0xe0 {
            let n = usize::from(enc & 0x0f) << 8 | usize::from(c.u8()?);
            c.take(n)?.to_vec()
        } else {
            match enc {
                0xf0 => {
                    let n = c.le(4)? as usize;
                    c.take(n)?.to_vec()
                }
                0xf1 => int_text(signed(c.le(2)?, 16)),
                0xf2 => int_text(signed(c.le(3)?, 24)),
                0xf3 => int_text(signed(c.le(4)?, 32)),
                0xf4 => int_text(c.le(8)? as i64),
                _ => {
                    return Err(corrupt(
                        W,
                        format!("entry at {start}: bad encoding {enc:#x}"),
                    ))
                }
            }
        };
        let len = c.pos - start;
        c.take(backlen_bytes(len))?;
        out.push(value);
    }
    if count != 0xffff && count != out.len() {
        return Err(corrupt(W, "entry count does not match the entries"));
    }
    Ok(out)
}

/// The members of an intset (`encoding (4, LE): 2, 4 or 8 | length (4, LE) | integers`),
/// as decimal text.
pub fn intset(is: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    const W: &str = "intset";
    let mut c = Cursor {
        what: W,
        buf: is,
        pos: 0,
    };
    let width = c.le(4)? as usize;
    let len = c.le(4)? as usize;
    if !matches!(width, 2 | 4 | 8) || len.checked_mul(width) != Some(is.len() - 8) {
        return Err(corrupt(W, "header does not match its bytes"));
    }
    let mut out = Vec::with_capacity(capped(len, is.len()));
    for _ in 0..len {
        out.push(int_text(signed(c.le(width)?, width as u32 * 8)));
    }
    Ok(out)
}

/// The field-value pairs of a zipmap (Redis 2.x small hashes).
///
/// ```text
/// zmlen (1) | (len field  len free value free-bytes)* | 0xff
/// len: 1 byte below 254, or 254 then 4 bytes (LE)
/// ```
pub fn zipmap(zm: &[u8]) -> Result<Vec<Pair>, RdbError> {
    const W: &str = "zipmap";
    let mut c = Cursor {
        what: W,
        buf: zm,
        pos: 0,
    };
    c.u8()?; // zmlen: a count up to 253, recounted below anyway.
    let mut out = Vec::new();
    loop {
        let field_len = match c.u8()? {
            0xff => break,
            0xfe => c.le(4)? as usize,
            b => usize::from(b),
        };
        let field = c.take(field_len)?.to_vec();
        let value_len = match c.u8()? {
            0xff => return Err(corrupt(W, "ends after a field")),
            0xfe => c.le(4)? as usize,
            b => usize::from(b),
        };
        let free = usize::from(c.u8()?);
        let value = c.take(value_len)?.to_vec();
        c.take(free)?;
        out.push((field, value));
    }
    if c.pos != zm.len() {
        return Err(corrupt(W, "bytes after the end marker"));
    }
    Ok(out)
}

/// One element of a listpack being built: an integer, or bytes (written as an integer when
/// they are one's canonical text, as Redis's `lpAppend` does).
#[derive(Clone, Copy, Debug)]
pub enum LpItem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// `s` as an integer if it is the canonical text of one (Redis's `lpStringToInt64`: at
/// most 20 characters, no sign but `-`, no leading zero, no "-0").
fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

/// The back-length of an entry of `len` bytes (encoding and data): 7 bits per byte, the
/// most significant group first, every byte but the first with its top bit set.
fn push_backlen(lp: &mut Vec<u8>, len: usize) {
    let n = backlen_bytes(len);
    for i in (0..n).rev() {
        let group = ((len >> (7 * i)) & 0x7f) as u8;
        lp.push(if i + 1 == n { group } else { group | 0x80 });
    }
}

/// Appends `v` in the smallest integer encoding.
fn push_lp_int(lp: &mut Vec<u8>, v: i64) {
    let u = v as u64;
    match v {
        0..=127 => lp.push(v as u8),
        -4096..=4095 => lp.extend_from_slice(&[0xc0 | ((u >> 8) & 0x1f) as u8, u as u8]),
        -32768..=32767 => {
            lp.push(0xf1);
            lp.extend_from_slice(&(v as i16).to_le_bytes());
        }
        -8_388_608..=8_388_607 => {
            lp.push(0xf2);
            lp.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        _ if i32::try_from(v).is_ok() => {
            lp.push(0xf3);
            lp.extend_from_slice(&(v as i32).to_le_bytes());
        }
        _ => {
            lp.push(0xf4);
            lp.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// A listpack of `items`, byte for byte as Redis builds it by appending them.
pub fn build_listpack(items: &[LpItem<'_>]) -> Vec<u8> {
    let mut lp = vec![0u8; 6];
    for item in items {
        let start = lp.len();
        let int = match *item {
            LpItem::Int(v) => Ok(v),
            LpItem::Str(s) => canonical_int(s).ok_or(s),
        };
        match int {
            Ok(v) => push_lp_int(&mut lp, v),
            Err(s) => {
                match s.len() {
                    n if n < 64 => lp.push(0x80 | n as u8),
                    n if n < 4096 => lp.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]),
                    n => {
                        lp.push(0xf0);
                        lp.extend_from_slice(&(n as u32).to_le_bytes());
                    }
                }
                lp.extend_from_slice(s);
            }
        }
        let len = lp.len() - start;
        push_backlen(&mut lp, len);
    }
    lp.push(0xff);
    let total = lp.len() as u32;
    lp[0..4].copy_from_slice(&total.to_le_bytes());
    let count = items.len().min(0xffff) as u16;
    lp[4..6].copy_from_slice(&count.to_le_bytes());
    lp
}
