//! The snapshot stream of a Strata-to-Strata full sync: the framing both sides share.
//! Byte layout: `docs/format/snapshot-stream.md`.
//!
//! A stream is a sequence of frames, each `tag | body length | CRC-32C | body`, the CRC
//! taken over the tag, the length and the body. It opens with a START frame, may carry
//! one FUNCTIONS frame, then RECORDS frames (each one shard's records, keys ascending
//! within the shard), and closes with an END frame that counts what came before it. The
//! reader checks every frame's checksum, the order of the frames and the END frame's
//! counts; a stream that fails any of them is refused whole (the caller installs nothing).
//!
//! The framing is written here rather than taken from a crate: it is a wire format of
//! this project's own (specified beside the others), four fields wide, and its reader must
//! bound every length before it allocates, which a generic codec would have to be taught.

use std::io::{Read, Write};

/// Frame tags. On-wire: do not renumber.
pub mod tag {
    pub const START: u8 = 1;
    pub const FUNCTIONS: u8 = 2;
    pub const RECORDS: u8 = 3;
    pub const END: u8 = 4;
}

/// The stream format's version, in the START frame. On-wire: do not renumber.
pub const VERSION: u8 = 1;
/// The line that announces a snapshot stream after `+FULLRESYNC` (where an RDB transfer
/// has `$<len>` or `$EOF:<mark>`), without its CRLF.
pub const HEADER_LINE: &[u8] = b"$STRATA-SNAPSHOT";
/// The capability a Strata replica announces (`REPLCONF capa strata-snapshot`); a master
/// sends the snapshot stream only to a replica that announced it.
pub const CAPA: &str = "strata-snapshot";
/// Bytes of a frame's head: tag (1), body length (4), CRC-32C (4).
pub const HEAD_BYTES: usize = 9;
/// The largest body a reader takes: a RECORDS frame holds at least one record, and a
/// record is at most a 512 MB string value (Redis's `proto-max-bulk-len` default) and its
/// key. A longer length is damage, refused before anything is allocated.
pub const MAX_BODY_BYTES: u32 = 640 << 20;
/// A writer closes a RECORDS frame once its body holds this much.
pub const RECORDS_FRAME_BYTES: usize = 1 << 20;

/// What a stream's START frame says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    /// The database the master's stream has selected at the cut (RDB's `repl-stream-db`).
    pub stream_db: u8,
    /// The master's shard count (informational: the replica routes every record itself).
    pub shards: u32,
}

/// What a stream's END frame counts: every RECORDS frame and record before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub frames: u64,
    pub records: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
}

/// A frame's CRC-32C: over the tag, the length (little-endian) and the body.
fn checksum(tag: u8, body: &[u8]) -> u32 {
    let mut head = [0u8; 5];
    head[0] = tag;
    head[1..].copy_from_slice(&(body.len() as u32).to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), body)
}

/// Writes a stream (see the module docs). Records go through [`FrameWriter::record`],
/// which closes a RECORDS frame at [`RECORDS_FRAME_BYTES`] or when the shard changes.
pub struct FrameWriter<W: Write> {
    out: W,
    body: Vec<u8>,
    /// The shard of the RECORDS frame being filled, and its record count.
    open: Option<(u32, u32)>,
    totals: Totals,
}

impl<W: Write> FrameWriter<W> {
    /// Starts a stream with its START frame.
    pub fn new(mut out: W, start: &Start) -> std::io::Result<FrameWriter<W>> {
        let mut body = vec![VERSION, start.stream_db];
        body.extend_from_slice(&start.shards.to_le_bytes());
        write_frame(&mut out, tag::START, &body)?;
        Ok(FrameWriter {
            out,
            body: Vec::with_capacity(RECORDS_FRAME_BYTES + (64 << 10)),
            open: None,
            totals: Totals::default(),
        })
    }

    /// The function libraries (FUNCTION DUMP's payload), before any record.
    pub fn functions(&mut self, payload: &[u8]) -> std::io::Result<()> {
        assert!(
            self.open.is_none() && self.totals.frames == 0,
            "functions come first"
        );
        write_frame(&mut self.out, tag::FUNCTIONS, payload)
    }

    /// One record of shard `shard`; a shard's records must come in ascending key order.
    pub fn record(&mut self, shard: u32, key: &[u8], value: &[u8]) -> std::io::Result<()> {
        if self.open.is_some_and(|(s, _)| s != shard) || self.body.len() >= RECORDS_FRAME_BYTES {
            self.close_records()?;
        }
        let (_, n) = self.open.get_or_insert_with(|| {
            self.body.clear();
            self.body.extend_from_slice(&shard.to_le_bytes());
            self.body.extend_from_slice(&0u32.to_le_bytes());
            (shard, 0)
        });
        *n += 1;
        // Lengths are u32: a key or value of 4 GiB is far past Redis's 512 MB limit.
        self.body
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.body
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.body.extend_from_slice(key);
        self.body.extend_from_slice(value);
        self.totals.records += 1;
        self.totals.bytes += (key.len() + value.len()) as u64;
        Ok(())
    }

    fn close_records(&mut self) -> std::io::Result<()> {
        if let Some((_, n)) = self.open.take() {
            self.body[4..8].copy_from_slice(&n.to_le_bytes());
            write_frame(&mut self.out, tag::RECORDS, &self.body)?;
            self.totals.frames += 1;
        }
        Ok(())
    }

    /// Closes the stream with its END frame; returns the writer and what was written.
    pub fn finish(mut self) -> std::io::Result<(W, Totals)> {
        self.close_records()?;
        let t = self.totals;
        let mut body = Vec::with_capacity(24);
        for v in [t.frames, t.records, t.bytes] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        write_frame(&mut self.out, tag::END, &body)?;
        self.out.flush()?;
        Ok((self.out, t))
    }
}

/// Writes one frame: head (tag, length, CRC-32C) and body.
pub fn write_frame<W: Write>(out: &mut W, tag: u8, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_BODY_BYTES)
        .ok_or_else(|| std::io::Error::other(format!("a frame of {} bytes", body.len())))?;
    let mut head = [0u8; HEAD_BYTES];
    head[0] = tag;
    head[1..5].copy_from_slice(&len.to_le_bytes());
    head[5..9].copy_from_slice(&checksum(tag, body).to_le_bytes());
    out.write_all(&head)?;
    out.write_all(body)
}

/// Why a stream was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamError {
    /// Reading failed (the connection or the spool file).
    Io(String),
    /// The bytes are not a valid stream: damage, a cut, or a format this server lacks.
    Invalid(String),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Io(e) => write!(f, "reading the snapshot stream: {e}"),
            StreamError::Invalid(e) => write!(f, "the snapshot stream is invalid: {e}"),
        }
    }
}

fn invalid(e: impl Into<String>) -> StreamError {
    StreamError::Invalid(e.into())
}

/// One frame, read and checked.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    pub tag: u8,
    pub body: Vec<u8>,
}

/// Reads one frame whose checksum verifies. `Ok(None)`: the input ended before the frame
/// began. A frame cut short, an unknown tag or a length over [`MAX_BODY_BYTES`] is
/// [`StreamError::Invalid`]. (The server's readers reuse one frame: [`read_frame_into`].)
#[cfg(test)]
pub fn read_frame<R: Read>(r: &mut R) -> Result<Option<Frame>, StreamError> {
    let mut f = Frame {
        tag: 0,
        body: Vec::new(),
    };
    Ok(read_frame_into(r, &mut f)?.then_some(f))
}

/// [`read_frame`] into `f`, whose body's buffer is reused (a stream's reader takes a
/// frame of about a megabyte at a time: a new buffer each would cost an allocation and
/// its page faults per frame). `Ok(false)`: the input ended before the frame began.
pub fn read_frame_into<R: Read>(r: &mut R, f: &mut Frame) -> Result<bool, StreamError> {
    let mut head = [0u8; HEAD_BYTES];
    let mut got = 0;
    while got < HEAD_BYTES {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(invalid("a frame's head is cut short")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StreamError::Io(e.to_string())),
        }
    }
    let tag = head[0];
    if !(tag::START..=tag::END).contains(&tag) {
        return Err(invalid(format!("unknown frame tag {tag}")));
    }
    let len = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes"));
    if len > MAX_BODY_BYTES {
        return Err(invalid(format!(
            "a frame of {len} bytes (at most {MAX_BODY_BYTES})"
        )));
    }
    let want = u32::from_le_bytes(head[5..9].try_into().expect("4 bytes"));
    // Grown as bytes arrive, so a damaged length costs no more than the bytes that came.
    let body = &mut f.body;
    body.clear();
    body.reserve((len as usize).min(RECORDS_FRAME_BYTES + (64 << 10)));
    r.take(u64::from(len))
        .read_to_end(body)
        .map_err(|e| StreamError::Io(e.to_string()))?;
    if body.len() != len as usize {
        return Err(invalid("a frame's body is cut short"));
    }
    let got = checksum(tag, body);
    if got != want {
        return Err(invalid(format!(
            "a frame's checksum is {got:#010x}, its head says {want:#010x}"
        )));
    }
    f.tag = tag;
    Ok(true)
}

/// A record of a RECORDS frame: its key and value, borrowed from the frame's body.
pub type Record<'a> = (&'a [u8], &'a [u8]);

/// The records of a RECORDS frame: its shard and `(key, value)` pairs; a body whose
/// records do not fill it exactly is [`StreamError::Invalid`].
pub fn records(body: &[u8]) -> Result<(u32, Vec<Record<'_>>), StreamError> {
    let u32_at = |at: usize| -> Result<u32, StreamError> {
        body.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .ok_or_else(|| invalid("a RECORDS frame is cut inside a length"))
    };
    let shard = u32_at(0)?;
    let n = u32_at(4)?;
    let mut out = Vec::with_capacity((n as usize).min(body.len() / 8));
    let mut at = 8;
    for _ in 0..n {
        let (k, v) = (u32_at(at)? as usize, u32_at(at + 4)? as usize);
        at += 8;
        let end = at
            .checked_add(k)
            .and_then(|e| e.checked_add(v))
            .filter(|&e| e <= body.len())
            .ok_or_else(|| invalid("a record runs past its frame"))?;
        out.push((&body[at..at + k], &body[at + k..end]));
        at = end;
    }
    if at != body.len() {
        return Err(invalid(format!(
            "a RECORDS frame holds {} bytes after its {n} records",
            body.len() - at
        )));
    }
    Ok((shard, out))
}

/// Checks a stream's frames in order: START first, FUNCTIONS at most once before any
/// RECORDS, END last with the counts of what came before it, each shard's keys ascending.
/// Fed every frame by the receiver as it arrives, so a bad stream is refused before it is
/// loaded.
#[derive(Default)]
pub struct Validator {
    start: Option<Start>,
    functions: bool,
    seen: Totals,
    /// Each shard's last key.
    last: std::collections::HashMap<u32, Vec<u8>>,
    ended: Option<Totals>,
}

impl Validator {
    /// Takes the next frame; an error refuses the stream.
    pub fn frame(&mut self, f: &Frame) -> Result<(), StreamError> {
        if self.ended.is_some() {
            return Err(invalid("a frame after END"));
        }
        match (f.tag, &self.start) {
            (tag::START, None) => {
                let [version, stream_db, s0, s1, s2, s3] = f.body[..] else {
                    return Err(invalid("a START frame of the wrong size"));
                };
                if version != VERSION {
                    return Err(invalid(format!(
                        "format version {version}; this server reads {VERSION}"
                    )));
                }
                self.start = Some(Start {
                    stream_db,
                    shards: u32::from_le_bytes([s0, s1, s2, s3]),
                });
            }
            (_, None) => return Err(invalid("the stream does not open with START")),
            (tag::START, Some(_)) => return Err(invalid("a second START frame")),
            (tag::FUNCTIONS, Some(_)) => {
                if self.functions || self.seen.frames > 0 {
                    return Err(invalid("FUNCTIONS after RECORDS or twice"));
                }
                self.functions = true;
            }
            (tag::RECORDS, Some(_)) => {
                let (shard, recs) = records(&f.body)?;
                let last = self.last.entry(shard).or_default();
                for (k, v) in recs {
                    if !last.is_empty() && k <= last.as_slice() {
                        return Err(invalid(format!(
                            "shard {shard}'s records are out of order at {k:?}"
                        )));
                    }
                    last.clear();
                    last.extend_from_slice(k);
                    self.seen.records += 1;
                    self.seen.bytes += (k.len() + v.len()) as u64;
                }
                self.seen.frames += 1;
            }
            (tag::END, Some(_)) => {
                let word = |i: usize| {
                    f.body
                        .get(i * 8..i * 8 + 8)
                        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                };
                let (Some(frames), Some(records), Some(bytes), 24) =
                    (word(0), word(1), word(2), f.body.len())
                else {
                    return Err(invalid("an END frame of the wrong size"));
                };
                let said = Totals {
                    frames,
                    records,
                    bytes,
                };
                if said != self.seen {
                    return Err(invalid(format!(
                        "END counts {said:?}; the stream held {:?}",
                        self.seen
                    )));
                }
                self.ended = Some(said);
            }
            (t, _) => return Err(invalid(format!("unknown frame tag {t}"))),
        }
        Ok(())
    }

    /// Whether END has been read (and verified).
    pub fn ended(&self) -> bool {
        self.ended.is_some()
    }

    /// The START frame's contents, once read.
    pub fn start(&self) -> Option<&Start> {
        self.start.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(recs: &[(u32, &[u8], &[u8])], functions: Option<&[u8]>) -> Vec<u8> {
        let start = Start {
            stream_db: 3,
            shards: 2,
        };
        let mut w = FrameWriter::new(Vec::new(), &start).unwrap();
        if let Some(f) = functions {
            w.functions(f).unwrap();
        }
        for (s, k, v) in recs {
            w.record(*s, k, v).unwrap();
        }
        w.finish().unwrap().0
    }

    /// Reads and validates every frame; the frames.
    fn check(bytes: &[u8]) -> Result<(Validator, Vec<Frame>), StreamError> {
        let mut r = bytes;
        let mut v = Validator::default();
        let mut frames = Vec::new();
        while let Some(f) = read_frame(&mut r)? {
            v.frame(&f)?;
            frames.push(f);
        }
        if !v.ended() {
            return Err(invalid("no END"));
        }
        Ok((v, frames))
    }

    const RECS: [(u32, &[u8], &[u8]); 4] = [
        (0, b"\x00a", b"1"),
        (0, b"\x00b", b""),
        (1, b"\x00a", b"other shard"),
        (1, b"\x02z", b"3"),
    ];

    #[test]
    fn a_stream_round_trips() {
        let bytes = stream(&RECS, Some(b"libs"));
        let (v, frames) = check(&bytes).unwrap();
        assert_eq!(
            v.start(),
            Some(&Start {
                stream_db: 3,
                shards: 2
            })
        );
        let tags: Vec<u8> = frames.iter().map(|f| f.tag).collect();
        assert_eq!(
            tags,
            [
                tag::START,
                tag::FUNCTIONS,
                tag::RECORDS,
                tag::RECORDS,
                tag::END
            ]
        );
        assert_eq!(frames[1].body, b"libs");
        let mut got = Vec::new();
        for f in frames.iter().filter(|f| f.tag == tag::RECORDS) {
            let (s, recs) = records(&f.body).unwrap();
            got.extend(recs.into_iter().map(|(k, v)| (s, k.to_vec(), v.to_vec())));
        }
        let want: Vec<_> = RECS
            .iter()
            .map(|(s, k, v)| (*s, k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn large_shards_split_into_frames_of_the_bound() {
        let value = vec![7u8; 100 << 10];
        let keys: Vec<Vec<u8>> = (0..40u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let recs: Vec<(u32, &[u8], &[u8])> = keys.iter().map(|k| (0, &k[..], &value[..])).collect();
        let bytes = stream(&recs, None);
        let (_, frames) = check(&bytes).unwrap();
        let n = frames.iter().filter(|f| f.tag == tag::RECORDS).count();
        assert!(n >= 4, "{n} frames");
        assert!(frames
            .iter()
            .all(|f| f.body.len() <= RECORDS_FRAME_BYTES + (100 << 10) + 16));
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_refused() {
        let bytes = stream(&RECS, Some(b"libs"));
        for cut in 0..bytes.len() {
            assert!(check(&bytes[..cut]).is_err(), "cut at {cut} accepted");
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x01;
            assert!(check(&b).is_err(), "flip at {at} accepted");
        }
    }

    #[test]
    fn a_well_framed_but_wrong_stream_is_refused() {
        let frame = |tag, body: &[u8]| {
            let mut out = Vec::new();
            write_frame(&mut out, tag, body).unwrap();
            out
        };
        let start = frame(tag::START, &[VERSION, 0, 1, 0, 0, 0]);
        let end0 = frame(tag::END, &[0u8; 24]);
        // No START; START twice; an unknown version; END counting what was not sent;
        // records out of order in one shard; a record past its frame; a frame after END.
        let mut recs = vec![0, 0, 0, 0, 2, 0, 0, 0];
        for k in [&b"b"[..], b"a"] {
            recs.extend_from_slice(&1u32.to_le_bytes());
            recs.extend_from_slice(&0u32.to_le_bytes());
            recs.extend_from_slice(k);
        }
        let mut end1 = vec![0u8; 24];
        end1[0] = 1;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("no start", end0.clone()),
            (
                "two starts",
                [start.clone(), start.clone(), end0.clone()].concat(),
            ),
            (
                "version",
                [frame(tag::START, &[9, 0, 1, 0, 0, 0]), end0.clone()].concat(),
            ),
            ("counts", [start.clone(), frame(tag::END, &end1)].concat()),
            (
                "order",
                [start.clone(), frame(tag::RECORDS, &recs), end0.clone()].concat(),
            ),
            (
                "overrun",
                [
                    start.clone(),
                    frame(
                        tag::RECORDS,
                        &[0, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0],
                    ),
                    end0.clone(),
                ]
                .concat(),
            ),
            (
                "after end",
                [start.clone(), end0.clone(), end0.clone()].concat(),
            ),
            ("tag", [start.clone(), frame(9, b""), end0.clone()].concat()),
        ];
        for (what, bytes) in cases {
            assert!(
                matches!(check(&bytes), Err(StreamError::Invalid(_))),
                "{what} accepted"
            );
        }
        // A length over the bound is refused before its body is read.
        let mut huge = start.clone();
        huge.extend_from_slice(&[tag::RECORDS]);
        huge.extend_from_slice(&(MAX_BODY_BYTES + 1).to_le_bytes());
        huge.extend_from_slice(&[0; 4]);
        let mut r = &huge[start.len()..];
        let e = read_frame(&mut r).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }
}
