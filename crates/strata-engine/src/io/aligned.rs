//! Buffers and ranges for direct I/O (`O_DIRECT`), in safe code.
//!
//! A direct read must start at a file offset, use a memory address and have a length that
//! are all multiples of the device's logical block size. [`DIRECT_IO_ALIGN`] (4 KiB) is a
//! multiple of every logical block size Linux file systems use (512 B or 4 KiB), so it is
//! always enough. A caller that wants bytes `[offset, offset + len)` reads the enclosing
//! aligned range ([`AlignedRange`]) into an [`AlignedBuf`] and slices the wanted bytes out.
//!
//! [`AlignedBuf`] gets its alignment without `unsafe`: it over-allocates a `Vec<u8>` by one
//! alignment unit and starts at the first aligned address inside it.

/// Alignment of direct reads: file offset, memory address and length.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A zeroed byte buffer whose first byte sits at an address that is a multiple of `align`.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zeroed bytes aligned to `align` (a power of two; 1 = no alignment, no extra
    /// allocation).
    pub fn new(len: usize, align: usize) -> Self {
        debug_assert!(align.is_power_of_two());
        let extra = if align > 1 { align } else { 0 };
        let raw = vec![0u8; len + extra];
        // `align_offset` on a byte pointer always succeeds (it never returns usize::MAX for
        // u8); the extra `align` bytes leave room for any offset it returns.
        let start = if align > 1 {
            raw.as_ptr().align_offset(align).min(extra)
        } else {
            0
        };
        AlignedBuf { raw, start, len }
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }

    /// Bytes `[from, from + len)` of the buffer as an owned `Vec`. Without a copy when they
    /// start the underlying allocation (unaligned buffers read at the wanted offset).
    pub fn into_vec(mut self, from: usize, len: usize) -> Vec<u8> {
        assert!(from + len <= self.len, "slice outside the aligned buffer");
        if self.start == 0 && from == 0 {
            self.raw.truncate(len);
            self.raw
        } else {
            let s = self.start + from;
            self.raw[s..s + len].to_vec()
        }
    }
}

/// The aligned range that encloses a wanted byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlignedRange {
    /// File offset of the first byte read (a multiple of the alignment).
    pub base: u64,
    /// Bytes to read from `base` (a multiple of the alignment).
    pub len: usize,
    /// Where the wanted bytes start inside the read.
    pub skip: usize,
    /// Bytes from `base` that must be read for the wanted range to be complete
    /// (`skip + wanted length`; the rest is padding that may lie past the end of the file).
    pub need: usize,
}

impl AlignedRange {
    /// The range to read for bytes `[offset, offset + len)` with alignment `align` (1 = read
    /// exactly those bytes).
    pub fn new(offset: u64, len: usize, align: usize) -> Self {
        let a = align as u64;
        let base = offset - offset % a;
        let skip = (offset - base) as usize;
        let need = skip + len;
        let padded = need.div_ceil(align) * align;
        AlignedRange {
            base,
            len: padded,
            skip,
            need,
        }
    }

    /// Where the next read of a partly filled range starts, relative to `base`, when `done`
    /// bytes have arrived: direct reads restart at the last aligned boundary (re-reading a
    /// few bytes), buffered reads right after the last byte.
    pub fn resume_at(done: usize, align: usize) -> usize {
        done - done % align
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_sized() {
        for len in [0, 1, 4095, 4096, 4097, 70_000] {
            let mut b = AlignedBuf::new(len, DIRECT_IO_ALIGN);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_IO_ALIGN, 0);
            b.as_mut_slice()
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = i as u8);
            if len > 10 {
                assert_eq!(b.into_vec(3, 5), vec![3, 4, 5, 6, 7]);
            }
        }
        let mut b = AlignedBuf::new(10, 1);
        b.as_mut_slice().copy_from_slice(b"0123456789");
        assert_eq!(b.into_vec(0, 4), b"0123");
    }

    #[test]
    fn ranges_enclose_the_wanted_bytes() {
        let r = AlignedRange::new(5000, 100, 4096);
        assert_eq!(
            r,
            AlignedRange {
                base: 4096,
                len: 4096,
                skip: 904,
                need: 1004
            }
        );
        let r = AlignedRange::new(4000, 200, 4096);
        assert_eq!((r.base, r.len, r.skip, r.need), (0, 8192, 4000, 4200));
        let r = AlignedRange::new(8192, 4096, 4096);
        assert_eq!((r.base, r.len, r.skip, r.need), (8192, 4096, 0, 4096));
        let r = AlignedRange::new(77, 10, 1);
        assert_eq!((r.base, r.len, r.skip, r.need), (77, 10, 0, 10));
        assert_eq!(AlignedRange::resume_at(7, 1), 7);
        assert_eq!(AlignedRange::resume_at(5000, 4096), 4096);
    }
}
