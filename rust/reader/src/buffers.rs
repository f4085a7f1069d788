//! Arrow buffers being built, one value at a time, without per-value allocation.
//!
//! Layouts are Arrow's (little-endian values, i32 offsets starting at 0, LSB-first bitmaps), as
//! `pyarrow.Array.from_buffers` takes them. The text values of a row (topic, hosts, property
//! names and values, ids) are short, so they are copied inline ([`extend`]) rather than through a
//! call to `memcpy` per value: a row has some twenty of them.
//!
//! Large buffers come from a small process-wide pool ([`alloc`], [`recycle`]): a batch's
//! buffers are handed to Python and dropped when Spark has consumed the batch, and without the
//! pool every batch would take fresh pages from the kernel (the allocator maps and unmaps
//! buffers this large), paying a page fault and a page of zeroing per 4 KiB written. The
//! pool's first buffers still take fresh pages; those of [`HUGE_MIN`] bytes or more are
//! advised to be backed by transparent huge pages, one fault per 2 MiB (a batch's 16 MiB body
//! buffer takes 8 faults instead of 4,096).

use parking_lot::Mutex;

use crate::text::{self, Props};

/// Buffers smaller than this are left to the allocator (its heap reuses them).
const POOL_MIN: usize = 256 << 10;
/// Bytes of capacity the pool keeps at most (about two batches' large buffers).
const POOL_MAX: usize = 96 << 20;
/// New buffers at least this large are advised to use transparent huge pages (x86-64's 2 MiB).
pub const HUGE_MIN: usize = 2 << 20;

/// Idle buffers (cleared) and the sum of their capacities.
struct Pool(Mutex<(Vec<Vec<u8>>, usize)>);

impl Pool {
    const fn new() -> Pool {
        Pool(Mutex::new((Vec::new(), 0)))
    }
    fn alloc(&self, cap: usize) -> Vec<u8> {
        if cap >= POOL_MIN {
            let mut pool = self.0.lock();
            let (bufs, held) = &mut *pool;
            let best = (0..bufs.len())
                .filter(|&i| bufs[i].capacity() >= cap)
                .min_by_key(|&i| bufs[i].capacity());
            if let Some(i) = best {
                let v = bufs.swap_remove(i);
                *held -= v.capacity();
                return v;
            }
        }
        let v = Vec::with_capacity(cap);
        if cap >= HUGE_MIN {
            advise_huge_pages(&v);
        }
        v
    }
    fn recycle(&self, mut v: Vec<u8>) {
        if v.capacity() < POOL_MIN {
            return;
        }
        let mut pool = self.0.lock();
        let (bufs, held) = &mut *pool;
        if *held + v.capacity() <= POOL_MAX {
            v.clear();
            *held += v.capacity();
            bufs.push(v);
        }
    }
}

static POOL: Pool = Pool::new();

/// Ask the kernel to back the whole pages of `v`'s capacity with transparent huge pages
/// (`MADV_HUGEPAGE`: only the mapping's flags change, never the bytes). Nothing happens where
/// huge pages are disabled or unsupported.
fn advise_huge_pages(v: &Vec<u8>) {
    const PAGE: usize = 4096;
    let start = v.as_ptr() as usize;
    let (lo, hi) = (
        start.next_multiple_of(PAGE),
        (start + v.capacity()) / PAGE * PAGE,
    );
    if lo < hi {
        // SAFETY: `[lo, hi)` lies inside `v`'s allocation, which stays mapped while `v` is
        // alive; MADV_HUGEPAGE neither moves nor alters the memory. Errors are ignored.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

/// An empty vector with room for at least `cap` bytes: the smallest pooled buffer that fits,
/// else a new one.
pub fn alloc(cap: usize) -> Vec<u8> {
    POOL.alloc(cap)
}

/// Give a buffer back for reuse (kept if large and the pool has room, else freed).
pub fn recycle(v: Vec<u8>) {
    POOL.recycle(v)
}

/// Append `s` to `v`. Values up to 32 bytes are copied with at most two overlapping loads and
/// stores of 4, 8 or 16 bytes, inline; longer ones go through `extend_from_slice`.
#[inline(always)]
pub fn extend(v: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n > 32 {
        v.extend_from_slice(s);
        return;
    }
    v.reserve(32);
    let src = s.as_ptr();
    // SAFETY: 32 bytes are reserved past `len`, so every store (at most `n` <= 32 bytes from
    // `dst`) is in the allocation; every load reads inside `s` (offsets `0..n`, since each copy
    // of width w is done only when n >= w); unaligned loads and stores are used throughout.
    // The bytes `0..n` are all written before `set_len`.
    unsafe {
        let dst = v.as_mut_ptr().add(v.len());
        if n >= 16 {
            let a = src.cast::<[u8; 16]>().read_unaligned();
            let b = src.add(n - 16).cast::<[u8; 16]>().read_unaligned();
            dst.cast::<[u8; 16]>().write_unaligned(a);
            dst.add(n - 16).cast::<[u8; 16]>().write_unaligned(b);
        } else if n >= 8 {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
        v.set_len(v.len() + n);
    }
}

/// A bitmap, LSB first.
#[derive(Debug, Default, Clone)]
pub struct Bits {
    bytes: Vec<u8>,
    len: usize,
}

impl Bits {
    pub fn with_capacity(bits: usize) -> Bits {
        Bits {
            bytes: alloc(bits.div_ceil(8)),
            len: 0,
        }
    }
    pub fn with_ones(n: usize) -> Bits {
        let mut bytes = vec![0xffu8; n / 8];
        if !n.is_multiple_of(8) {
            bytes.push((1u8 << (n % 8)) - 1);
        }
        Bits { bytes, len: n }
    }
    #[inline]
    pub fn push(&mut self, v: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if v {
            *self.bytes.last_mut().unwrap() |= 1 << (self.len % 8);
        }
        self.len += 1;
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// A variable-width (string or binary) column: i32 offsets, data and, once a null is pushed,
/// validity.
#[derive(Debug, Clone)]
pub struct Var {
    offsets: Vec<u8>,
    pub(crate) data: Vec<u8>,
    validity: Option<Bits>,
}

impl Var {
    pub fn new(rows: usize, bytes: usize) -> Var {
        let mut offsets = alloc((rows + 1) * 4);
        offsets.extend_from_slice(&0i32.to_le_bytes());
        Var {
            offsets,
            data: alloc(bytes),
            validity: None,
        }
    }
    fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }
    /// End the current value (its bytes were appended to `data`).
    #[inline]
    pub fn end(&mut self) {
        self.offsets
            .extend_from_slice(&(self.data.len() as i32).to_le_bytes());
        if let Some(v) = &mut self.validity {
            v.push(true);
        }
    }
    /// Append a value; returns its length.
    #[inline]
    pub fn push(&mut self, v: &[u8]) -> usize {
        extend(&mut self.data, v);
        self.end();
        v.len()
    }
    /// Append a value that is more than a few dozen bytes (a body).
    #[inline]
    pub fn push_long(&mut self, v: &[u8]) -> usize {
        self.data.extend_from_slice(v);
        self.end();
        v.len()
    }
    pub fn push_null(&mut self) {
        let len = self.len();
        self.validity
            .get_or_insert_with(|| Bits::with_ones(len))
            .push(false);
        self.offsets
            .extend_from_slice(&(self.data.len() as i32).to_le_bytes());
    }
    /// Append a value or a null; returns the value's length.
    #[inline(always)]
    pub fn push_opt(&mut self, v: Option<&[u8]>) -> usize {
        match v {
            Some(s) => self.push(s),
            None => {
                self.push_null();
                0
            }
        }
    }
    /// `[validity, offsets, data]`.
    pub fn finish(self) -> Vec<Option<Vec<u8>>> {
        vec![
            self.validity.map(Bits::into_bytes),
            Some(self.offsets),
            Some(self.data),
        ]
    }
}

/// A `map<string, string>` column.
#[derive(Debug, Clone)]
pub struct Map {
    offsets: Vec<u8>,
    keys: Var,
    values: Var,
    entries: i32,
}

impl Map {
    pub fn new(rows: usize) -> Map {
        let mut offsets = alloc((rows + 1) * 4);
        offsets.extend_from_slice(&0i32.to_le_bytes());
        Map {
            offsets,
            keys: Var::new(rows * 4, rows * 32),
            values: Var::new(rows * 4, rows * 64),
            entries: 0,
        }
    }
    /// Append one row from the parsed properties of `props` (later duplicates win); returns the
    /// bytes of keys and values appended.
    #[inline]
    pub fn push_props(&mut self, props: &str, parsed: &Props) -> usize {
        let mut bytes = 0;
        for (i, r) in parsed.ranges.iter().enumerate() {
            if parsed.overridden(props, i) {
                continue;
            }
            bytes += self.keys.push(text::name_bytes(props, r));
            bytes += self.values.push(text::value_bytes(props, r));
            self.entries += 1;
        }
        self.offsets.extend_from_slice(&self.entries.to_le_bytes());
        bytes
    }
    /// Append an empty map.
    pub fn push_empty(&mut self) {
        self.offsets.extend_from_slice(&self.entries.to_le_bytes());
    }
    /// `[validity, entry offsets, key offsets, key data, value offsets, value data]`
    /// (keys and values are never null).
    pub fn finish(self) -> Vec<Option<Vec<u8>>> {
        let mut out = vec![None, Some(self.offsets)];
        out.extend(self.keys.finish().into_iter().skip(1));
        out.extend(self.values.finish().into_iter().skip(1));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_copies_of_every_length() {
        let src: Vec<u8> = (0..80u8).collect();
        let mut v = Vec::new();
        let mut want = Vec::new();
        for n in 0..=40 {
            extend(&mut v, &src[n..n * 2]);
            want.extend_from_slice(&src[n..n * 2]);
        }
        assert_eq!(v, want);
    }

    #[test]
    fn pooled_buffers_are_reused_empty_and_bounded() {
        let pool = Pool::new();
        let mut v = pool.alloc(POOL_MIN + 100);
        v.extend_from_slice(b"stale");
        let (ptr, cap) = (v.as_ptr(), v.capacity());
        pool.recycle(v);
        pool.recycle(Vec::with_capacity(POOL_MIN - 1)); // small: not kept
        let big = pool.alloc(cap + 1); // does not fit: a new buffer
        assert_ne!(big.as_ptr(), ptr);
        let huge = pool.alloc(HUGE_MIN); // advised to use huge pages: still an empty vector
        assert!(huge.is_empty() && huge.capacity() >= HUGE_MIN);
        let again = pool.alloc(POOL_MIN);
        assert_eq!(
            (again.as_ptr(), again.len(), again.capacity()),
            (ptr, 0, cap)
        );
        assert_eq!(pool.0.lock().1, 0);
        pool.recycle(Vec::with_capacity(POOL_MAX));
        pool.recycle(again); // no room left
        assert_eq!(pool.0.lock().1, POOL_MAX);
    }

    #[test]
    fn bitmaps() {
        for n in [0, 1, 7, 8, 9, 17] {
            let mut b = Bits::with_ones(n);
            b.push(false);
            b.push(true);
            let mut want = Bits::default();
            (0..n).for_each(|_| want.push(true));
            want.push(false);
            want.push(true);
            assert_eq!(b.into_bytes(), want.into_bytes(), "{n}");
        }
    }
}
