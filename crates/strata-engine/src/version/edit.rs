//! [`VersionEdit`]: one change to the set of live tables, the unit of the MANIFEST.
//!
//! Encoding (`docs/format/manifest.md`): a sequence of fields, each a varint tag followed by
//! that tag's payload. Tags are on-disk: never renumber or reuse one. An unknown tag is
//! corruption: it may come from a newer writer whose edit this build would misapply.

use crate::error::{Error, Result};
use crate::key::{MAX_SEQ, TRAILER_LEN};
use crate::varint;
use std::path::Path;

/// Levels are numbered `0..MAX_LEVELS` (the most `Options::num_levels` allows).
pub const MAX_LEVELS: u32 = 16;

// Field tags. On-disk: do not renumber. 0 is never a tag, so zeroed bytes do not decode.
const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE_NUMBER: u64 = 2;
const TAG_LAST_SEQUENCE: u64 = 3;
const TAG_COMPACT_POINTER: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
// Value-log fields (`docs/format/vlog.md`, section "MANIFEST fields").
const TAG_VLOG_HEAD: u64 = 7;
const TAG_VLOG_LIVE: u64 = 8;
const TAG_VLOG_GARBAGE: u64 = 9;
const TAG_VLOG_OBSOLETE: u64 = 10;
const TAG_VLOG_DELETED: u64 = 11;
const TAG_VLOG_TAIL: u64 = 12;
// An L0 table of the L0 tier (`docs/format/l0-tier.md`): the payload of `TAG_NEW_FILE`.
const TAG_NEW_TIER_FILE: u64 = 13;
// An L0 tier table holding pointers into the log whose values compaction copies: the payload
// of `TAG_NEW_FILE`, then those log bytes (`FileMeta::log_bytes`).
const TAG_NEW_TIER_FILE_LOG: u64 = 14;

/// A table file as the MANIFEST records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileMeta {
    /// File number: the table is `NNNNNN.sst`.
    pub number: u64,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key in the table.
    pub smallest: Vec<u8>,
    /// Largest internal key in the table.
    pub largest: Vec<u8>,
    /// Number of entries (puts and tombstones).
    pub num_entries: u64,
    /// An L0 table of the L0 tier (`NNNNNN.l0t` in `Options::l0_tier_dir`, mapped and read
    /// in place) rather than an SSTable. Only in level 0.
    pub tier: bool,
    /// For an L0 tier table: bytes of the log entries its pointers name that compaction will
    /// copy into SSTables (values below `sep_threshold_bytes`). They stay in the log until
    /// the table is compacted away, so they count toward the tier's capacity. 0 otherwise.
    pub log_bytes: u64,
    /// The open reader of this table once a lookup has asked for it, held weakly: the table
    /// cache owns readers and bounds how many are open; while it keeps this one, a lookup
    /// reaches it through the version without the cache's hash and shard lock. Not part of
    /// the MANIFEST; a clone starts empty and every slot compares equal.
    pub reader: ReaderSlot,
}

/// See [`FileMeta::reader`].
#[derive(Default)]
pub struct ReaderSlot(std::sync::OnceLock<std::sync::Weak<crate::sst::Table>>);

impl ReaderSlot {
    /// The reader, if one was recorded and the table cache still holds it.
    #[inline]
    pub fn get(&self) -> Option<std::sync::Arc<crate::sst::Table>> {
        self.0.get().and_then(std::sync::Weak::upgrade)
    }

    /// Records `t` as this table's reader (the first record stays: after the cache drops
    /// it, lookups go through the cache).
    pub fn set(&self, t: &std::sync::Arc<crate::sst::Table>) {
        let _ = self.0.set(std::sync::Arc::downgrade(t));
    }
}

impl Clone for ReaderSlot {
    fn clone(&self) -> Self {
        ReaderSlot::default()
    }
}

impl PartialEq for ReaderSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ReaderSlot {}

impl std::fmt::Debug for ReaderSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() { "open" } else { "-" })
    }
}

impl FileMeta {
    /// The kind of file this table is.
    pub fn kind(&self) -> crate::filename::FileKind {
        if self.tier {
            crate::filename::FileKind::L0Table
        } else {
            crate::filename::FileKind::Table
        }
    }
}

/// A change to the version: applied in order, the edits of a MANIFEST rebuild the current
/// set of live tables and the counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VersionEdit {
    /// WALs numbered below this are fully reflected in tables and can be deleted.
    pub log_number: Option<u64>,
    /// The next file number to allocate.
    pub next_file_number: Option<u64>,
    /// The largest sequence number written to a table or made durable in a WAL that is
    /// obsolete by `log_number`.
    pub last_sequence: Option<u64>,
    /// Per level, the internal key where the next compaction of that level starts.
    pub compact_pointers: Vec<(u32, Vec<u8>)>,
    /// Tables removed: (level, file number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Tables added: (level, file).
    pub new_files: Vec<(u32, FileMeta)>,
    /// The value log's durable head `(file, offset)`: recovery replays the log from there.
    pub vlog_head: Option<(u64, u64)>,
    /// `(file, bytes)`: separated entries that tables now point at (a flush made them live).
    pub vlog_live_added: Vec<(u64, u64)>,
    /// `(file, bytes)`: pointers compaction dropped; their entries are garbage.
    pub vlog_garbage: Vec<(u64, u64)>,
    /// Value-log files GC emptied: nothing needs them, they are removed.
    pub vlog_obsolete: Vec<u64>,
    /// Obsolete value-log files that are gone from the directory: forget them.
    pub vlog_deleted: Vec<u64>,
    /// `(file, offset)`: recovery found the frames of value-log file `file` ending at
    /// `offset`, followed by a torn (or zero) tail that no pointer can lead into.
    pub vlog_tails: Vec<(u64, u64)>,
}

impl VersionEdit {
    /// An empty edit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `file` was added to `level`.
    pub fn add_file(&mut self, level: u32, file: FileMeta) {
        self.new_files.push((level, file));
    }

    /// Records that table `number` was removed from `level`.
    pub fn delete_file(&mut self, level: u32, number: u64) {
        self.deleted_files.push((level, number));
    }

    /// Appends the encoding of the edit to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let scalars = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, v) in scalars {
            if let Some(v) = v {
                varint::put_u64(out, tag);
                varint::put_u64(out, v);
            }
        }
        for (level, key) in &self.compact_pointers {
            varint::put_u64(out, TAG_COMPACT_POINTER);
            varint::put_u64(out, u64::from(*level));
            varint::put_len_prefixed(out, key);
        }
        for (level, number) in &self.deleted_files {
            varint::put_u64(out, TAG_DELETED_FILE);
            varint::put_u64(out, u64::from(*level));
            varint::put_u64(out, *number);
        }
        for (level, f) in &self.new_files {
            varint::put_u64(
                out,
                match (f.tier, f.log_bytes) {
                    (false, _) => TAG_NEW_FILE,
                    (true, 0) => TAG_NEW_TIER_FILE,
                    (true, _) => TAG_NEW_TIER_FILE_LOG,
                },
            );
            varint::put_u64(out, u64::from(*level));
            varint::put_u64(out, f.number);
            varint::put_u64(out, f.size);
            varint::put_u64(out, f.num_entries);
            varint::put_len_prefixed(out, &f.smallest);
            varint::put_len_prefixed(out, &f.largest);
            if f.tier && f.log_bytes > 0 {
                varint::put_u64(out, f.log_bytes);
            }
        }
        if let Some((file, offset)) = self.vlog_head {
            varint::put_u64(out, TAG_VLOG_HEAD);
            varint::put_u64(out, file);
            varint::put_u64(out, offset);
        }
        for (tag, list) in [
            (TAG_VLOG_LIVE, &self.vlog_live_added),
            (TAG_VLOG_GARBAGE, &self.vlog_garbage),
            (TAG_VLOG_TAIL, &self.vlog_tails),
        ] {
            for (file, bytes) in list {
                varint::put_u64(out, tag);
                varint::put_u64(out, *file);
                varint::put_u64(out, *bytes);
            }
        }
        for (tag, list) in [
            (TAG_VLOG_OBSOLETE, &self.vlog_obsolete),
            (TAG_VLOG_DELETED, &self.vlog_deleted),
        ] {
            for file in list {
                varint::put_u64(out, tag);
                varint::put_u64(out, *file);
            }
        }
    }

    /// Decodes an edit read from `file` at `offset` (the MANIFEST record's offset, for error
    /// messages). Any malformed, truncated, out-of-range or unknown field is
    /// [`Error::Corruption`].
    pub fn decode(data: &[u8], file: &Path, offset: u64) -> Result<VersionEdit> {
        let mut d = Decoder { data, rest: data };
        let mut edit = VersionEdit::default();
        d.fields(&mut edit)
            .map_err(|reason| Error::corruption(file, offset, reason))?;
        Ok(edit)
    }
}

/// Decoding state; errors are reasons that name the byte position within the edit.
struct Decoder<'a> {
    data: &'a [u8],
    rest: &'a [u8],
}

type DecodeResult<T> = std::result::Result<T, String>;

impl<'a> Decoder<'a> {
    fn pos(&self) -> usize {
        self.data.len() - self.rest.len()
    }

    fn err(&self, at: usize, what: &str) -> String {
        format!("version edit: {what} at byte {at}")
    }

    fn u64(&mut self, what: &str) -> DecodeResult<u64> {
        let at = self.pos();
        varint::get_u64(&mut self.rest)
            .ok_or_else(|| self.err(at, &format!("bad or truncated {what}")))
    }

    fn level(&mut self) -> DecodeResult<u32> {
        let at = self.pos();
        let level = self.u64("level")?;
        if level >= u64::from(MAX_LEVELS) {
            return Err(self.err(
                at,
                &format!("level {level} out of range (max {})", MAX_LEVELS - 1),
            ));
        }
        Ok(level as u32)
    }

    fn key(&mut self, what: &str) -> DecodeResult<Vec<u8>> {
        let at = self.pos();
        let key = varint::get_len_prefixed(&mut self.rest)
            .ok_or_else(|| self.err(at, &format!("bad or truncated {what}")))?;
        if key.len() < TRAILER_LEN {
            return Err(self.err(
                at,
                &format!(
                    "{what} of {} bytes is shorter than an internal-key trailer",
                    key.len()
                ),
            ));
        }
        Ok(key.to_vec())
    }

    fn scalar(&mut self, slot: &mut Option<u64>, what: &str, tag_at: usize) -> DecodeResult<()> {
        if slot.is_some() {
            return Err(self.err(tag_at, &format!("{what} given twice")));
        }
        *slot = Some(self.u64(what)?);
        Ok(())
    }

    fn fields(&mut self, edit: &mut VersionEdit) -> DecodeResult<()> {
        while !self.rest.is_empty() {
            let tag_at = self.pos();
            let tag = self.u64("field tag")?;
            match tag {
                TAG_LOG_NUMBER => self.scalar(&mut edit.log_number, "log number", tag_at)?,
                TAG_NEXT_FILE_NUMBER => {
                    self.scalar(&mut edit.next_file_number, "next file number", tag_at)?
                }
                TAG_LAST_SEQUENCE => {
                    self.scalar(&mut edit.last_sequence, "last sequence", tag_at)?;
                    if edit.last_sequence > Some(MAX_SEQ) {
                        return Err(self.err(tag_at, "last sequence exceeds 56 bits"));
                    }
                }
                TAG_COMPACT_POINTER => {
                    let level = self.level()?;
                    let key = self.key("compact pointer key")?;
                    edit.compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = self.level()?;
                    let number = self.u64("deleted file number")?;
                    edit.deleted_files.push((level, number));
                }
                TAG_NEW_FILE | TAG_NEW_TIER_FILE | TAG_NEW_TIER_FILE_LOG => {
                    let tier = tag != TAG_NEW_FILE;
                    let level = self.level()?;
                    if tier && level != 0 {
                        return Err(self.err(tag_at, "an L0 tier table outside level 0"));
                    }
                    let number = self.u64("new file number")?;
                    let size = self.u64("new file size")?;
                    let num_entries = self.u64("new file entry count")?;
                    let smallest = self.key("smallest key")?;
                    let largest = self.key("largest key")?;
                    let log_bytes = if tag == TAG_NEW_TIER_FILE_LOG {
                        self.u64("new tier file log bytes")?
                    } else {
                        0
                    };
                    edit.new_files.push((
                        level,
                        FileMeta {
                            number,
                            size,
                            smallest,
                            largest,
                            num_entries,
                            tier,
                            log_bytes,
                            reader: Default::default(),
                        },
                    ));
                }
                TAG_VLOG_HEAD => {
                    if edit.vlog_head.is_some() {
                        return Err(self.err(tag_at, "value-log head given twice"));
                    }
                    let file = self.u64("value-log head file")?;
                    let offset = self.u64("value-log head offset")?;
                    edit.vlog_head = Some((file, offset));
                }
                TAG_VLOG_LIVE => {
                    let file = self.u64("value-log file")?;
                    let bytes = self.u64("value-log live bytes")?;
                    edit.vlog_live_added.push((file, bytes));
                }
                TAG_VLOG_GARBAGE => {
                    let file = self.u64("value-log file")?;
                    let bytes = self.u64("value-log garbage bytes")?;
                    edit.vlog_garbage.push((file, bytes));
                }
                TAG_VLOG_TAIL => {
                    let file = self.u64("value-log file")?;
                    let offset = self.u64("value-log tail offset")?;
                    edit.vlog_tails.push((file, offset));
                }
                TAG_VLOG_OBSOLETE => {
                    let file = self.u64("obsolete value-log file")?;
                    edit.vlog_obsolete.push(file);
                }
                TAG_VLOG_DELETED => {
                    let file = self.u64("deleted value-log file")?;
                    edit.vlog_deleted.push(file);
                }
                _ => {
                    return Err(self.err(
                        tag_at,
                        &format!("unknown field tag {tag} (written by a newer version?)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn meta(n: u64) -> FileMeta {
        FileMeta {
            number: n,
            size: n * 1000 + 7,
            smallest: make_internal_key(format!("a{n}").as_bytes(), n, ValueKind::Value),
            largest: make_internal_key(format!("z{n}").as_bytes(), 1 << 40, ValueKind::Delete),
            num_entries: n * 3,
            ..Default::default()
        }
    }

    fn full_edit() -> VersionEdit {
        VersionEdit {
            log_number: Some(12),
            next_file_number: Some(300),
            last_sequence: Some(MAX_SEQ),
            compact_pointers: vec![(1, make_internal_key(b"cp", 5, ValueKind::Value))],
            deleted_files: vec![(0, 4), (15, u64::MAX)],
            new_files: vec![(0, meta(1)), (6, meta(2)), (15, meta(u32::MAX as u64))],
            ..VersionEdit::default()
        }
    }

    fn vlog_edit() -> VersionEdit {
        VersionEdit {
            vlog_head: Some((9, 1 << 33)),
            vlog_live_added: vec![(9, 1000), (10, 0)],
            vlog_garbage: vec![(3, u64::MAX)],
            vlog_obsolete: vec![2, 3],
            vlog_deleted: vec![1],
            vlog_tails: vec![(4, 19)],
            ..full_edit()
        }
    }

    #[test]
    fn vlog_fields_round_trip_and_are_stable() {
        let e = vlog_edit();
        let mut buf = Vec::new();
        e.encode(&mut buf);
        assert_eq!(decode(&buf).unwrap(), e);
        for cut in 0..buf.len() {
            let _ = decode(&buf[..cut]);
        }
        let small = VersionEdit {
            vlog_head: Some((5, 6)),
            vlog_live_added: vec![(7, 8)],
            vlog_garbage: vec![(9, 10)],
            vlog_obsolete: vec![11],
            vlog_deleted: vec![12],
            vlog_tails: vec![(13, 14)],
            ..VersionEdit::default()
        };
        let mut b = Vec::new();
        small.encode(&mut b);
        assert_eq!(
            b,
            vec![7, 5, 6, 8, 7, 8, 9, 9, 10, 12, 13, 14, 10, 11, 11, 12]
        );
        assert!(decode(&[7, 1, 2, 7, 3, 4]).unwrap_err().is_corruption());
        assert!(decode(&[8, 1]).unwrap_err().is_corruption());
    }

    fn decode(data: &[u8]) -> Result<VersionEdit> {
        VersionEdit::decode(data, Path::new("MANIFEST-000001"), 99)
    }

    #[test]
    fn round_trip() {
        for e in [
            VersionEdit::default(),
            full_edit(),
            VersionEdit {
                log_number: Some(0),
                ..VersionEdit::default()
            },
        ] {
            let mut buf = vec![0xAA]; // encode appends
            e.encode(&mut buf);
            assert_eq!(decode(&buf[1..]).unwrap(), e);
        }
    }

    #[test]
    fn tier_tables_round_trip_and_stay_in_level_0() {
        let mut e = VersionEdit::new();
        e.add_file(
            0,
            FileMeta {
                tier: true,
                ..meta(3)
            },
        );
        e.add_file(1, meta(4));
        let mut buf = Vec::new();
        e.encode(&mut buf);
        assert_eq!(buf[0], 13, "an L0 tier table has its own tag");
        assert_eq!(decode(&buf).unwrap(), e);
        // One that points into the log carries its log bytes under tag 14.
        let mut e14 = VersionEdit::new();
        e14.add_file(
            0,
            FileMeta {
                tier: true,
                log_bytes: 300,
                ..meta(5)
            },
        );
        let mut buf14 = Vec::new();
        e14.encode(&mut buf14);
        assert_eq!(buf14[0], 14);
        assert_eq!(&buf14[buf14.len() - 2..], &[0xac, 0x02], "log bytes last");
        assert_eq!(decode(&buf14).unwrap(), e14);
        // The same payload under the tier tag in level 1 is refused.
        let mut bad = buf.clone();
        bad[1] = 1;
        let err = decode(&bad).unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("outside level 0"),
            "{err}"
        );
    }

    #[test]
    fn encoding_is_stable() {
        // Pins the on-disk layout of each tag.
        let mut e = VersionEdit::new();
        e.log_number = Some(1);
        e.next_file_number = Some(2);
        e.last_sequence = Some(300);
        e.compact_pointers.push((3, vec![9; 8]));
        e.delete_file(4, 5);
        e.add_file(
            6,
            FileMeta {
                number: 7,
                size: 8,
                smallest: vec![1; 8],
                largest: vec![2; 9],
                num_entries: 10,
                tier: false,
                log_bytes: 0,
                reader: Default::default(),
            },
        );
        let mut buf = Vec::new();
        e.encode(&mut buf);
        let mut want = vec![1, 1, 2, 2, 3, 0xac, 0x02, 4, 3, 8];
        want.extend([9; 8]);
        want.extend([5, 4, 5, 6, 6, 7, 8, 10, 8]);
        want.extend([1; 8]);
        want.push(9);
        want.extend([2; 9]);
        assert_eq!(buf, want);
    }

    #[test]
    fn every_truncation_is_corruption() {
        let mut buf = Vec::new();
        full_edit().encode(&mut buf);
        // Cuts that fall exactly between fields decode to a smaller edit; every other cut is
        // corruption reported at the record's offset.
        let mut boundaries = vec![0];
        let mut e = VersionEdit::default();
        let mut add = |e: &VersionEdit| {
            let mut b = Vec::new();
            e.encode(&mut b);
            boundaries.push(b.len());
        };
        let full = full_edit();
        e.log_number = full.log_number;
        add(&e);
        e.next_file_number = full.next_file_number;
        add(&e);
        e.last_sequence = full.last_sequence;
        add(&e);
        for c in &full.compact_pointers {
            e.compact_pointers.push(c.clone());
            add(&e);
        }
        for d in &full.deleted_files {
            e.deleted_files.push(*d);
            add(&e);
        }
        for f in &full.new_files {
            e.new_files.push(f.clone());
            add(&e);
        }
        assert_eq!(*boundaries.last().unwrap(), buf.len());
        for cut in 0..buf.len() {
            let r = decode(&buf[..cut]);
            if boundaries.contains(&cut) {
                r.unwrap();
            } else {
                match r {
                    Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 99),
                    other => panic!("cut {cut}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn unknown_and_invalid_fields_are_corruption() {
        let cases: Vec<Vec<u8>> = vec![
            vec![99, 1],                                                   // unknown tag
            vec![0],                                                       // tag 0 (zeroed bytes)
            vec![0x80, 0x01, 1],                                           // tag 128 as a varint
            vec![1, 1, 1, 2],                                              // log number twice
            vec![5, 16, 1],                     // deleted file at level 16
            vec![4, 0, 7, 1, 2, 3, 4, 5, 6, 7], // compact pointer key of 7 bytes
            vec![3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // seq > 56 bits
            vec![
                1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // overlong
        ];
        for c in cases {
            let e = decode(&c).unwrap_err();
            assert!(e.is_corruption(), "{c:?}: {e}");
        }
        // A new file whose largest key is too short.
        let mut f = meta(1);
        f.largest = vec![1, 2, 3];
        let mut buf = Vec::new();
        VersionEdit {
            new_files: vec![(0, f)],
            ..VersionEdit::default()
        }
        .encode(&mut buf);
        assert!(decode(&buf).unwrap_err().is_corruption());
    }

    #[test]
    fn garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut valid = Vec::new();
        full_edit().encode(&mut valid);
        for _ in 0..2000 {
            let mut d = valid.clone();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..d.len());
                d[at] = rng.gen();
            }
            let _ = decode(&d);
            let noise: Vec<u8> = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
            let _ = decode(&noise);
        }
    }
}
