//! RocketMQ's bloom filter over consumer groups (`filter/util/BloomFilter.java`,
//! `BitsArray.java`, `BloomFilterData.java`).
//!
//! Each SQL92 consumer group owns `k` bit positions in an `m`-bit map, computed from the key
//! `"<group>#<topic>"`. At dispatch, a message's bitmap gets the positions of every group
//! whose expression it matches; the pull path skips a message whose bitmap lacks any of the
//! group's positions (a definite miss) and evaluates the expression only for the rest (a
//! bloom hit can be false: other groups' positions may cover the group's).
//!
//! Layout of a bitmap (as stored in RocketMQ's `ConsumeQueueExt`): `m / 8` bytes, bit `i` in
//! byte `i / 8` under mask `1 << (i % 8)`.
//!
//! Shape from the error rate `f` (percent) and the expected number of groups `n`:
//! `k = ceil(log2(100 / f))`, `m = ceil(n * log2(100 / f) * log2(e))` rounded up to a multiple
//! of 8. RocketMQ's broker defaults (`maxErrorRateOfBloomFilter = 20`,
//! `expectConsumerNumUseFilter = 32`) give `k = 3`, `m = 112` (a 14-byte bitmap).

use crate::error::BloomConfigError;
use crate::murmur3::murmur3_x64_128;

/// The key RocketMQ hashes for a group's positions: `group#topic`.
pub fn bloom_key(group: &str, topic: &str) -> String {
    format!("{group}#{topic}")
}

/// `BloomFilter.calcBitPositions`: `k` positions in `0..m` from the murmur3 hash of `key`.
/// Returns an empty vector when `m` is 0.
pub fn bit_positions(key: &str, m: u32, k: u32) -> Vec<u32> {
    let m = i32::try_from(m).unwrap_or(i32::MAX);
    if m <= 0 {
        return Vec::new();
    }
    let (h1, _) = murmur3_x64_128(key.as_bytes(), 0);
    let hash1 = h1 as i32;
    let hash2 = (h1 >> 32) as i32;
    (1..=k as i32)
        .map(|i| {
            let combined = hash1.wrapping_add(i.wrapping_mul(hash2));
            let combined = if combined < 0 { !combined } else { combined };
            (combined % m) as u32
        })
        .collect()
}

/// Whether bit `pos` is set (false beyond the end).
pub fn get_bit(bitmap: &[u8], pos: u32) -> bool {
    bitmap
        .get((pos / 8) as usize)
        .is_some_and(|b| b & (1 << (pos % 8)) != 0)
}

/// Set bit `pos` (ignored beyond the end).
pub fn set_bit(bitmap: &mut [u8], pos: u32) {
    if let Some(b) = bitmap.get_mut((pos / 8) as usize) {
        *b |= 1 << (pos % 8);
    }
}

/// The shape of a bloom filter: `m` bits, `k` positions per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BloomFilter {
    m: u32,
    k: u32,
}

impl BloomFilter {
    /// RocketMQ's `maxErrorRateOfBloomFilter` default (percent).
    pub const DEFAULT_ERROR_RATE: u32 = 20;
    /// RocketMQ's `expectConsumerNumUseFilter` default.
    pub const DEFAULT_EXPECTED: u32 = 32;

    /// `BloomFilter.createByFn(f, n)`: `error_rate` in percent (1..100), `expected` groups.
    pub fn new(error_rate: u32, expected: u32) -> Result<Self, BloomConfigError> {
        if !(1..100).contains(&error_rate) {
            return Err(BloomConfigError::ErrorRate(error_rate));
        }
        if expected < 1 {
            return Err(BloomConfigError::Expected(expected));
        }
        let rate = f64::from(error_rate) / 100.0;
        let k = (rate.ln() / 0.5f64.ln()).ceil();
        let m = (f64::from(expected) * (1.0 / rate).log2() * std::f64::consts::LOG2_E).ceil();
        let m = 8.0 * (m / 8.0).ceil();
        if m > f64::from(i32::MAX) {
            return Err(BloomConfigError::TooLarge(m as u64));
        }
        Self::with_shape(m as u32, k as u32)
    }

    /// A filter of exactly `m` bits (a multiple of 8) and `k` positions per key.
    pub fn with_shape(m: u32, k: u32) -> Result<Self, BloomConfigError> {
        if k < 1 || m < 8 || !m.is_multiple_of(8) || i32::try_from(m).is_err() {
            return Err(BloomConfigError::Shape { k, m });
        }
        Ok(BloomFilter { m, k })
    }

    /// Bits in a bitmap.
    pub fn m(&self) -> u32 {
        self.m
    }

    /// Positions per key.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Bytes in a bitmap (`m / 8`).
    pub fn byte_len(&self) -> usize {
        (self.m / 8) as usize
    }

    /// A zeroed bitmap.
    pub fn empty_bitmap(&self) -> Vec<u8> {
        vec![0; self.byte_len()]
    }

    /// The positions of `key` (`BloomFilter.generate`).
    pub fn positions(&self, key: &str) -> BloomPositions {
        BloomPositions {
            bit_num: self.m,
            positions: bit_positions(key, self.m, self.k).into(),
        }
    }

    /// Whether `positions` were computed by a filter of this shape (`BloomFilter.isValid`).
    pub fn is_valid(&self, positions: &BloomPositions) -> bool {
        positions.bit_num == self.m && positions.positions.len() == self.k as usize
    }
}

impl Default for BloomFilter {
    /// RocketMQ's broker defaults: 20 % error rate, 32 groups (`m = 112`, `k = 3`).
    fn default() -> Self {
        BloomFilter { m: 112, k: 3 }
    }
}

/// One key's bit positions and the bitmap width they belong to (`BloomFilterData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BloomPositions {
    bit_num: u32,
    positions: Box<[u32]>,
}

impl BloomPositions {
    /// Positions received from elsewhere (e.g. persisted), for a bitmap of `bit_num` bits.
    pub fn new(positions: Vec<u32>, bit_num: u32) -> Self {
        BloomPositions {
            bit_num,
            positions: positions.into(),
        }
    }

    pub fn positions(&self) -> &[u32] {
        &self.positions
    }

    /// The bitmap width in bits these positions are for.
    pub fn bit_num(&self) -> u32 {
        self.bit_num
    }

    /// Set the positions in `bitmap` (`BloomFilter.hashTo`).
    pub fn set_in(&self, bitmap: &mut [u8]) {
        for &p in self.positions.iter() {
            set_bit(bitmap, p);
        }
    }

    /// Whether every position is set in `bitmap` (`BloomFilter.isHit`).
    pub fn all_set(&self, bitmap: &[u8]) -> bool {
        self.positions.iter().all(|&p| get_bit(bitmap, p))
    }

    /// The pull-path test (`ExpressionMessageFilter.isMatchedByConsumeQueue`): `false` only
    /// when the message surely does not match. A bitmap of another width, or no positions,
    /// answers `true` (evaluate the expression instead).
    pub fn may_match(&self, bitmap: &[u8]) -> bool {
        if self.positions.is_empty() || bitmap.len() * 8 != self.bit_num as usize {
            return true;
        }
        self.all_set(bitmap)
    }
}

/// RocketMQ's `BitsArray`: an owned bitmap of a fixed number of bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BitsArray {
    bytes: Vec<u8>,
    bit_len: usize,
}

impl BitsArray {
    /// `bit_len` zero bits.
    pub fn new(bit_len: usize) -> Self {
        BitsArray {
            bytes: vec![0; bit_len.div_ceil(8)],
            bit_len,
        }
    }

    /// A copy of stored bitmap bytes (`bit_len = 8 * bytes.len()`).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        BitsArray {
            bytes: bytes.to_vec(),
            bit_len: bytes.len() * 8,
        }
    }

    pub fn bit_len(&self) -> usize {
        self.bit_len
    }

    pub fn get(&self, pos: u32) -> bool {
        (pos as usize) < self.bit_len && get_bit(&self.bytes, pos)
    }

    /// Set or clear bit `pos` (ignored beyond the end).
    pub fn set(&mut self, pos: u32, on: bool) {
        if (pos as usize) >= self.bit_len {
            return;
        }
        if on {
            set_bit(&mut self.bytes, pos);
        } else {
            self.bytes[(pos / 8) as usize] &= !(1 << (pos % 8));
        }
    }

    /// OR another bitmap into this one (over the shorter length).
    pub fn or(&mut self, other: &[u8]) {
        for (a, b) in self.bytes.iter_mut().zip(other) {
            *a |= b;
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocketmq_shapes() {
        let b = BloomFilter::new(20, 32).unwrap();
        assert_eq!((b.m(), b.k(), b.byte_len()), (112, 3, 14));
        assert_eq!(b, BloomFilter::default());
        // k = ceil(log2(10)) = 4, m = ceil(100 * log2(10) * log2(e)) = 480.
        let b = BloomFilter::new(10, 100).unwrap();
        assert_eq!((b.m(), b.k()), (480, 4));
        // ConsumerFilterManager's test constructor: createByFn(20, 64).
        assert_eq!(BloomFilter::new(20, 64).unwrap().m(), 216);
        assert_eq!(BloomFilter::new(50, 1).unwrap().k(), 1);
        assert!(BloomFilter::new(0, 32).is_err());
        assert!(BloomFilter::new(100, 32).is_err());
        assert!(BloomFilter::new(20, 0).is_err());
        assert!(BloomFilter::new(1, u32::MAX).is_err());
        assert!(BloomFilter::with_shape(12, 3).is_err());
        assert!(BloomFilter::with_shape(16, 0).is_err());
    }

    #[test]
    fn positions_follow_java_int_arithmetic() {
        // Java: hash1 = (int) h, hash2 = (int) (h >>> 32), ~x when negative, then % m.
        let (h1, _) = murmur3_x64_128(b"hello", 0);
        let (hash1, hash2) = (h1 as i32, (h1 >> 32) as i32);
        let expect: Vec<u32> = (1..=3)
            .map(|i: i32| {
                let c = hash1.wrapping_add(i.wrapping_mul(hash2));
                ((if c < 0 { !c } else { c }) % 112) as u32
            })
            .collect();
        assert_eq!(bit_positions("hello", 112, 3), expect);
        let b = BloomFilter::default();
        for key in ["", "g#t", "CID_a#TopicTest", "中文#t"] {
            let p = b.positions(key);
            assert_eq!(p.positions().len(), 3);
            assert!(p.positions().iter().all(|&x| x < 112));
            assert_eq!(p, b.positions(key), "deterministic");
            assert!(b.is_valid(&p));
        }
        assert!(bit_positions("x", 0, 3).is_empty());
    }

    #[test]
    fn bitmap_set_and_hit() {
        let b = BloomFilter::default();
        let p = b.positions(&bloom_key("g1", "t"));
        let mut bm = b.empty_bitmap();
        assert!(!p.may_match(&bm));
        p.set_in(&mut bm);
        assert!(p.all_set(&bm) && p.may_match(&bm));
        assert_eq!(
            bm.iter().map(|b| b.count_ones()).sum::<u32>() as usize,
            p.positions()
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len()
        );
        // A bitmap of another width cannot tell: match.
        assert!(p.may_match(&[0u8; 8]));
        let mut bits = BitsArray::new(12);
        assert_eq!(bits.as_bytes().len(), 2);
        bits.set(9, true);
        assert!(bits.get(9) && !bits.get(8) && !bits.get(99));
        assert_eq!(bits.as_bytes(), &[0, 2]);
        bits.set(9, false);
        bits.set(99, true);
        bits.or(&[1, 0, 7]);
        assert_eq!(bits.into_bytes(), vec![1, 0]);
        assert_eq!(BitsArray::from_bytes(&[0xff]).bit_len(), 8);
    }
}
