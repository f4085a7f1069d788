//! The SQL92 filters registered on one topic, each with its bloom positions: the dispatch side
//! of RocketMQ's `CommitLogDispatcherCalcBitMap`.
//!
//! [`FilterSet::compute_bitmap`] reads the message's properties once for all filters (the
//! union of their property names), evaluates each filter, and sets the positions of those
//! that match. The pull side keeps a group's [`BloomPositions`] and asks
//! [`BloomPositions::may_match`] of each stored bitmap before evaluating the expression.
//!
//! What the caller must add, as RocketMQ's broker does: a bitmap only covers the filters
//! registered when the message was dispatched, so a message stored before a group registered
//! (or changed its expression) must not be skipped on a bloom miss (`isMsgInLive`).

use std::sync::Arc;

use crate::bloom::{BloomFilter, BloomPositions};
use crate::properties::fill_slots;
use crate::{Sql92Filter, INLINE_SLOTS};

/// One registered filter.
#[derive(Debug, Clone)]
pub struct FilterEntry {
    /// The bloom key, RocketMQ's `group#topic` (see [`crate::bloom_key`]).
    pub key: String,
    pub filter: Arc<Sql92Filter>,
    pub positions: BloomPositions,
    /// `union_slot[i]`: where the filter's i-th property sits in the set's name table.
    union_slot: Box<[usize]>,
}

/// Filters registered on one topic, sharing one bloom filter shape.
#[derive(Debug, Clone, Default)]
pub struct FilterSet {
    bloom: BloomFilter,
    entries: Vec<FilterEntry>,
    /// The union of the entries' property names.
    names: Vec<String>,
}

impl FilterSet {
    pub fn new(bloom: BloomFilter) -> Self {
        FilterSet {
            bloom,
            entries: Vec::new(),
            names: Vec::new(),
        }
    }

    pub fn bloom(&self) -> &BloomFilter {
        &self.bloom
    }

    /// Bytes of a bitmap from [`Self::compute_bitmap`].
    pub fn bitmap_len(&self) -> usize {
        self.bloom.byte_len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FilterEntry> {
        self.entries.iter()
    }

    pub fn get(&self, key: &str) -> Option<&FilterEntry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// Register (or replace) the filter under `key` and return its bloom positions.
    pub fn insert(&mut self, key: impl Into<String>, filter: Arc<Sql92Filter>) -> BloomPositions {
        let key = key.into();
        self.entries.retain(|e| e.key != key);
        let positions = self.bloom.positions(&key);
        self.entries.push(FilterEntry {
            key,
            filter,
            positions: positions.clone(),
            union_slot: Box::new([]),
        });
        self.rebuild_names();
        positions
    }

    /// Unregister `key`; returns the entry it had.
    pub fn remove(&mut self, key: &str) -> Option<FilterEntry> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        let entry = self.entries.remove(i);
        self.rebuild_names();
        Some(entry)
    }

    fn rebuild_names(&mut self) {
        self.names.clear();
        for e in &mut self.entries {
            let mut map = Vec::with_capacity(e.filter.property_names().len());
            for name in e.filter.property_names() {
                let slot = match self.names.iter().position(|n| n == name) {
                    Some(i) => i,
                    None => {
                        self.names.push(name.clone());
                        self.names.len() - 1
                    }
                };
                map.push(slot);
            }
            e.union_slot = map.into();
        }
    }

    /// The bitmap of a message with stored property string `properties`: the positions of
    /// every filter it matches. Empty when no filter is registered.
    pub fn compute_bitmap(&self, properties: &str) -> Vec<u8> {
        if self.entries.is_empty() {
            return Vec::new();
        }
        let mut out = self.bloom.empty_bitmap();
        self.compute_bitmap_into(properties, &mut out);
        out
    }

    /// [`Self::compute_bitmap`] into `out` (cleared first; it should be
    /// [`Self::bitmap_len`] bytes, positions beyond it are dropped). Returns how many
    /// filters matched.
    pub fn compute_bitmap_into(&self, properties: &str, out: &mut [u8]) -> usize {
        out.fill(0);
        let n = self.names.len();
        let mut inline = [None; 2 * INLINE_SLOTS];
        let mut heap = Vec::new();
        let union: &mut [Option<&str>] = if n <= inline.len() {
            &mut inline[..n]
        } else {
            heap.resize(n, None);
            &mut heap
        };
        fill_slots(properties, &self.names, union);
        let mut matched = 0;
        for e in &self.entries {
            if e.evaluate_from(union) {
                e.positions.set_in(out);
                matched += 1;
            }
        }
        matched
    }

    /// The pull-path test for `key` against a stored bitmap: `false` only when the message
    /// surely does not match; an unknown key answers `true`.
    pub fn may_match(&self, key: &str, bitmap: &[u8]) -> bool {
        self.get(key).is_none_or(|e| e.positions.may_match(bitmap))
    }
}

impl FilterEntry {
    /// Evaluate with property values from the set's union slot table.
    fn evaluate_from(&self, union: &[Option<&str>]) -> bool {
        let n = self.union_slot.len();
        let mut inline = [None; INLINE_SLOTS];
        let mut heap = Vec::new();
        let slots: &mut [Option<&str>] = if n <= INLINE_SLOTS {
            &mut inline[..n]
        } else {
            heap.resize(n, None);
            &mut heap
        };
        for (slot, &u) in slots.iter_mut().zip(self.union_slot.iter()) {
            *slot = union.get(u).copied().flatten();
        }
        self.filter.eval_slots(slots) == Ok(Some(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bloom_key, compile, encode_properties};

    fn set_of(exprs: &[(&str, &str)]) -> FilterSet {
        let mut set = FilterSet::new(BloomFilter::default());
        for (group, e) in exprs {
            set.insert(bloom_key(group, "T"), Arc::new(compile(e).unwrap()));
        }
        set
    }

    #[test]
    fn bitmap_has_exactly_the_matching_groups() {
        let set = set_of(&[
            ("ga", "a > 5"),
            ("gb", "b = 'x'"),
            ("gab", "a > 5 AND b = 'x'"),
        ]);
        assert_eq!(set.len(), 3);
        let cases = [
            (vec![("a", "6"), ("b", "x")], [true, true, true]),
            (vec![("a", "6")], [true, false, false]),
            (vec![("b", "x")], [false, true, false]),
            (vec![("a", "1"), ("b", "y")], [false, false, false]),
        ];
        for (props, expect) in cases {
            let props = encode_properties(props);
            let bm = set.compute_bitmap(&props);
            assert_eq!(bm.len(), 14);
            for (e, want) in set.iter().zip(expect) {
                assert_eq!(e.filter.matches_properties(&props), want);
                if want {
                    assert!(set.may_match(&e.key, &bm), "{} on {props:?}", e.key);
                }
            }
            if expect == [false; 3] {
                assert!(bm.iter().all(|&b| b == 0));
            }
        }
        // An unknown group cannot be skipped.
        assert!(set.may_match("nobody#T", &[0; 14]));
    }

    #[test]
    fn insert_replaces_and_remove_rebuilds_the_name_table() {
        let mut set = set_of(&[("g1", "a = '1'"), ("g2", "b = '2'")]);
        assert_eq!(set.names, ["a", "b"]);
        let p = set.insert(bloom_key("g1", "T"), Arc::new(compile("c = '3'").unwrap()));
        assert_eq!(set.len(), 2);
        assert_eq!(set.names, ["b", "c"]);
        let bm = set.compute_bitmap(&encode_properties([("c", "3")]));
        assert!(p.all_set(&bm));
        assert!(set.remove("g2#T").is_some());
        assert!(set.remove("g2#T").is_none());
        assert_eq!(set.names, ["c"]);
        let mut out = [0xffu8; 14];
        assert_eq!(set.compute_bitmap_into("", &mut out), 0);
        assert_eq!(out, [0; 14]);
        assert!(FilterSet::default().compute_bitmap("a\u{1}1").is_empty());
    }

    #[test]
    fn many_properties_in_one_filter() {
        let names: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
        let expr = names
            .iter()
            .map(|n| format!("{n} IS NOT NULL"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let set = set_of(&[("g", &expr)]);
        let all = encode_properties(names.iter().map(|n| (n.as_str(), "v")));
        assert_eq!(set.compute_bitmap_into(&all, &mut [0; 14]), 1);
        assert_eq!(set.compute_bitmap_into("p0\u{1}v", &mut [0; 14]), 0);
    }
}
