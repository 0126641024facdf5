//! The slot bitmap of headers (`myslots`) and UPDATE messages: 16384 bits, slot `s` is bit
//! `s % 8` (least significant first) of byte `s / 8`, as Redis's `bitmapTestBit`.

use super::BusError;

/// Hash slots in a cluster.
pub const SLOTS: u16 = 16384;
/// Bytes of a slot bitmap.
pub const SLOT_BYTES: usize = SLOTS as usize / 8;

/// A set of slots. Boxed: messages move, and 2 KiB inline would make every one large.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SlotBitmap(Box<[u8; SLOT_BYTES]>);

impl Default for SlotBitmap {
    fn default() -> Self {
        SlotBitmap::new()
    }
}

impl SlotBitmap {
    /// No slot.
    pub fn new() -> SlotBitmap {
        SlotBitmap(Box::new([0; SLOT_BYTES]))
    }

    /// The bitmap of 2048 wire bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<SlotBitmap, BusError> {
        let arr: [u8; SLOT_BYTES] = bytes.try_into().map_err(|_| BusError::Truncated {
            need: SLOT_BYTES as u64,
            len: bytes.len(),
        })?;
        Ok(SlotBitmap(Box::new(arr)))
    }

    pub fn as_bytes(&self) -> &[u8; SLOT_BYTES] {
        &self.0
    }

    fn check(slot: u16) -> Result<usize, BusError> {
        if slot < SLOTS {
            Ok(slot as usize)
        } else {
            Err(BusError::Slot(slot.into()))
        }
    }

    /// Whether `slot` is in the set (false for a slot out of range).
    pub fn test(&self, slot: u16) -> bool {
        slot < SLOTS && self.0[slot as usize / 8] & (1 << (slot % 8)) != 0
    }

    pub fn set(&mut self, slot: u16) -> Result<(), BusError> {
        let s = Self::check(slot)?;
        self.0[s / 8] |= 1 << (s % 8);
        Ok(())
    }

    pub fn clear(&mut self, slot: u16) -> Result<(), BusError> {
        let s = Self::check(slot)?;
        self.0[s / 8] &= !(1 << (s % 8));
        Ok(())
    }

    /// Sets `first..=last`; refuses a range out of bounds or ending before it starts.
    pub fn set_range(&mut self, first: u16, last: u16) -> Result<(), BusError> {
        Self::check_range(first, last)?;
        for s in first..=last {
            self.0[s as usize / 8] |= 1 << (s % 8);
        }
        Ok(())
    }

    /// Clears `first..=last`.
    pub fn clear_range(&mut self, first: u16, last: u16) -> Result<(), BusError> {
        Self::check_range(first, last)?;
        for s in first..=last {
            self.0[s as usize / 8] &= !(1 << (s % 8));
        }
        Ok(())
    }

    fn check_range(first: u16, last: u16) -> Result<(), BusError> {
        Self::check(first)?;
        Self::check(last)?;
        if last < first {
            return Err(BusError::Slot(last.into()));
        }
        Ok(())
    }

    /// How many slots are set.
    pub fn count(&self) -> u32 {
        self.0.iter().map(|b| b.count_ones()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// The set slots, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS).filter(|&s| self.test(s))
    }

    /// The set slots as maximal ranges `(first, last)`, ascending (as CLUSTER NODES and
    /// CLUSTER SLOTS print them).
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in self.iter() {
            match out.last_mut() {
                Some((_, last)) if *last + 1 == s => *last = s,
                _ => out.push((s, s)),
            }
        }
        out
    }
}

impl std::fmt::Debug for SlotBitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotBitmap{:?}", self.ranges())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_order_is_redis_lsb_first() {
        let mut b = SlotBitmap::new();
        b.set(0).unwrap();
        b.set(9).unwrap();
        b.set(16383).unwrap();
        assert_eq!(b.as_bytes()[0], 0b0000_0001);
        assert_eq!(b.as_bytes()[1], 0b0000_0010);
        assert_eq!(b.as_bytes()[2047], 0b1000_0000);
        assert!(b.test(9) && !b.test(8) && !b.test(16384));
        assert_eq!(b.count(), 3);
        b.clear(9).unwrap();
        assert!(!b.test(9));
        assert_eq!(b.ranges(), vec![(0, 0), (16383, 16383)]);
    }

    #[test]
    fn ranges_and_counts() {
        let mut b = SlotBitmap::new();
        assert!(b.is_empty());
        b.set_range(0, 5460).unwrap();
        b.set_range(10923, 16383).unwrap();
        assert_eq!(b.count(), 5461 + 5461);
        assert_eq!(b.ranges(), vec![(0, 5460), (10923, 16383)]);
        b.clear_range(100, 199).unwrap();
        assert_eq!(b.ranges(), vec![(0, 99), (200, 5460), (10923, 16383)]);
        assert_eq!(b.count(), 5461 + 5461 - 100);
        b.set_range(5461, 10922).unwrap();
        b.set_range(100, 199).unwrap();
        assert_eq!(b.ranges(), vec![(0, 16383)]);
        assert_eq!(b.count(), 16384);
        assert_eq!(b.iter().count(), 16384);
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mut b = SlotBitmap::new();
        assert_eq!(b.set(16384), Err(BusError::Slot(16384)));
        assert_eq!(b.clear(u16::MAX), Err(BusError::Slot(65535)));
        assert_eq!(b.set_range(5, 4), Err(BusError::Slot(4)));
        assert_eq!(b.set_range(0, 16384), Err(BusError::Slot(16384)));
        assert!(b.is_empty());
        assert!(SlotBitmap::from_bytes(&[0; 2047]).is_err());
    }
}
