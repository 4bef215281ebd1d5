//! A hash map keyed by rows' values, for the tables probed once per input
//! row: the input combiner (`runner::combine`), grouping's per-worker
//! pre-aggregation (`ops::aggregate::prepare`) and its per-key states
//! (`ops::aggregate::settle`).
//!
//! With 100k keys such a table is megabytes, more than a core's cache, so
//! a probe is a cache miss (on small pages, a page walk too) that the CPU
//! sits waiting for: it was 44% of a batch `count-by` and 43% of a
//! `group-by` over 10M rows. This map is built to be probed *ahead*:
//! [`RowMap::prefetch`] starts loading the entry a hash most likely names
//! and returns at once, so a caller that knows its next rows asks for each
//! a few rows before it probes it ([`PROBE_AHEAD`]), and several misses are in
//! flight at a time instead of one.
//!
//! Layout: the entries (hash, key, value) sit in one vector in the order
//! they were added; an index of 8-byte slots finds them (linear probing,
//! at most half full, each slot holding an entry's number and 32 bits of
//! its hash). A slot's place follows from the hash alone, so it too can be
//! prefetched ([`RowMap::prefetch_slot`]) before the entry is: a caller
//! asks for the slot [`PROBE_AHEAD`] rows before it asks for the entry, and for
//! the entry [`PROBE_AHEAD`] rows before the probe. (hashbrown's table keeps its
//! slots where only it can find them: with it, the entry prefetch waited
//! on a miss in the index, and a `count-by` gained nothing.)
//!
//! Invariants: keys are unique; a key is found by any sequence of values
//! equal to it, hashed by [`hash_values`]; prefetching is a hint and changes
//! no result.

use std::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::FixedState;

use crate::value::{Key, Value, prefetch};

/// How many rows ahead of its probe a row's entry is prefetched (and its
/// index slot twice as many): enough misses in flight to hide most of the
/// latency, few enough that what was fetched is still in the cache when it
/// is probed.
pub const PROBE_AHEAD: usize = 8;

/// The hash of a key given as its values; every key of a [`RowMap`] is
/// hashed by this (equal values, equal hashes).
pub fn hash_values<'v>(values: impl IntoIterator<Item = &'v Value>) -> u64 {
    let mut hasher = FixedState::default().build_hasher();
    for value in values {
        value.hash(&mut hasher);
    }
    hasher.finish()
}

/// The index: slots of `tag << 32 | entry + 1` (0 is empty), where the
/// tag is the hash's high half and the home slot its low bits. Entries are
/// numbered in the order they are indexed.
struct Index {
    slots: Vec<u64>,
}

impl Index {
    fn new() -> Index {
        Index { slots: vec![0; 16] }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, hash: u64) -> usize {
        hash as usize & self.mask()
    }

    /// The first entry from the hash's home slot on whose tag matches and
    /// that `eq` accepts.
    fn find(&self, hash: u64, eq: impl FnMut(usize) -> bool) -> Option<usize> {
        self.find_slot(hash, eq)
            .map(|at| Self::entry(self.slots[at]))
    }

    /// As [`Index::find`], the slot that names the entry.
    fn find_slot(&self, hash: u64, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        let tag = hash >> 32;
        let mut at = self.home(hash);
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag && eq(Self::entry(slot)) {
                return Some(at);
            }
            at = (at + 1) & self.mask();
        }
    }

    /// The entry number a full slot holds.
    fn entry(slot: u64) -> usize {
        (slot as u32 - 1) as usize
    }

    /// Empties slot `hole`, moving back the slots after it that it would
    /// otherwise cut off from their home (linear probing's deletion, so
    /// that no tombstones pile up); `hashes` gives an entry's hash.
    fn delete(&mut self, mut hole: usize, hashes: impl Fn(usize) -> u64) {
        let mask = self.mask();
        let mut at = (hole + 1) & mask;
        while self.slots[at] != 0 {
            let home = self.home(hashes(Self::entry(self.slots[at])));
            // The slot may fill the hole if its home is not after the hole
            // (cyclically, on the way from its home to where it is).
            if (at.wrapping_sub(home) & mask) >= (at.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[at];
                hole = at;
            }
            at = (at + 1) & mask;
        }
        self.slots[hole] = 0;
    }

    /// Makes the slot of entry `from` (hashed to `hash`) name entry `to`.
    fn renumber(&mut self, hash: u64, from: usize, to: usize) {
        let at = self
            .find_slot(hash, |e| e == from)
            .expect("an indexed entry has a slot");
        self.slots[at] = ((hash >> 32) << 32) | (to as u64 + 1);
    }

    /// Indexes entry number `entry` (the next one: entries `0..entry` are
    /// indexed), with hash `hash`; `hashes` gives an indexed entry's hash by
    /// number, for when the index grows.
    fn insert(&mut self, hash: u64, entry: usize, hashes: impl Fn(usize) -> u64) {
        if 2 * (entry + 1) > self.slots.len() {
            self.slots = vec![0; 2 * self.slots.len()];
            for e in 0..entry {
                self.put(hashes(e), e);
            }
        }
        self.put(hash, entry);
    }

    fn put(&mut self, hash: u64, entry: usize) {
        let number = u32::try_from(entry + 1).expect("fewer than 2^32 keys in one table");
        let slot = ((hash >> 32) << 32) | u64::from(number);
        let mut at = self.home(hash);
        while self.slots[at] != 0 {
            at = (at + 1) & self.mask();
        }
        self.slots[at] = slot;
    }

    fn clear(&mut self) {
        self.slots.fill(0);
    }
}

/// An entry, laid out in this order: the probe reads the hash and key
/// first.
#[repr(C)]
struct Entry<V> {
    hash: u64,
    key: Key,
    value: V,
}

/// A hash map from row keys to `V`, probed with hashes from [`hash_values`].
pub struct RowMap<V> {
    index: Index,
    entries: Vec<Entry<V>>,
}

impl<V> Default for RowMap<V> {
    fn default() -> Self {
        RowMap {
            index: Index::new(),
            entries: Vec::new(),
        }
    }
}

impl<V> RowMap<V> {
    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Starts loading the index slot where a key with this hash would be
    /// found. A hint only.
    pub fn prefetch_slot(&self, hash: u64) {
        prefetch(&self.index.slots[self.index.home(hash)]);
    }

    /// The prefetches due before probing row `i` of rows hashed to
    /// `hashes`: the entry of row `i + PROBE_AHEAD` and the index slot of
    /// row `i + 2 * PROBE_AHEAD`. A hint only.
    pub fn prefetch_for(&self, hashes: &[u64], i: usize) {
        if let Some(&hash) = hashes.get(i + 2 * PROBE_AHEAD) {
            self.prefetch_slot(hash);
        }
        if let Some(&hash) = hashes.get(i + PROBE_AHEAD) {
            self.prefetch(hash);
        }
    }

    /// Starts loading the entry of the key with this hash, if there is
    /// likely one, without waiting for it. A hint only.
    pub fn prefetch(&self, hash: u64) {
        if let Some(e) = self.index.find(hash, |_| true) {
            // Every cache line of the entry: a grouping's is 3 or 4.
            let entry: *const u8 = (&self.entries[e] as *const Entry<V>).cast();
            let size = size_of::<Entry<V>>();
            for at in (0..size).step_by(64).chain([size - 1]) {
                prefetch(entry.wrapping_add(at));
            }
        }
    }

    /// The index slot of the key whose values are `key` and hash is `hash`.
    fn slot_of<'v, I>(&self, hash: u64, key: I) -> Option<usize>
    where
        I: IntoIterator<Item = &'v Value>,
        I::IntoIter: Clone,
    {
        let key = key.into_iter();
        self.index.find_slot(hash, |e| {
            let entry = &self.entries[e];
            entry.hash == hash && entry.key.iter().eq(key.clone())
        })
    }

    /// The value of the key whose values are `key` and hash is `hash`.
    pub fn get_mut<'v, I>(&mut self, hash: u64, key: I) -> Option<&mut V>
    where
        I: IntoIterator<Item = &'v Value>,
        I::IntoIter: Clone,
    {
        let e = Index::entry(self.index.slots[self.slot_of(hash, key)?]);
        Some(&mut self.entries[e].value)
    }

    /// Adds a key that is not held (as [`RowMap::get_mut`] just found),
    /// with its hash from [`hash_values`].
    pub fn insert_new(&mut self, hash: u64, key: Key, value: V) {
        debug_assert_eq!(hash, hash_values(&key), "a key's hash is hash_values'");
        let entries = &self.entries;
        self.index.insert(hash, entries.len(), |e| entries[e].hash);
        self.entries.push(Entry { hash, key, value });
    }

    /// Takes the key whose values are `key` and hash is `hash` out, if it
    /// is held. The last key added takes its place in the order.
    pub fn remove<'v, I>(&mut self, hash: u64, key: I) -> Option<(Key, V)>
    where
        I: IntoIterator<Item = &'v Value>,
        I::IntoIter: Clone,
    {
        let at = self.slot_of(hash, key)?;
        let e = Index::entry(self.index.slots[at]);
        let entries = &self.entries;
        self.index.delete(at, |e| entries[e].hash);
        let last = self.entries.len() - 1;
        if e != last {
            self.index.renumber(self.entries[last].hash, last, e);
        }
        let removed = self.entries.swap_remove(e);
        Some((removed.key, removed.value))
    }

    /// Takes every key and value out, in the order they were added; the
    /// map keeps its memory for the keys to come.
    pub fn drain(&mut self) -> impl Iterator<Item = (Key, V)> + '_ {
        self.index.clear();
        self.entries.drain(..).map(|e| (e.key, e.value))
    }

    /// Every key and value, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &V)> {
        self.entries.iter().map(|e| (&e.key, &e.value))
    }

    /// Every key and value, in the order they were added.
    pub fn into_entries(self) -> impl Iterator<Item = (Key, V)> {
        self.entries.into_iter().map(|e| (e.key, e.value))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// Adds `n` to the key `key` the way the combiner does.
    fn add(map: &mut RowMap<i64>, key: &[Value], n: i64) {
        let hash = hash_values(key);
        map.prefetch(hash);
        match map.get_mut(hash, key) {
            Some(v) => *v += n,
            None => map.insert_new(hash, key.iter().cloned().collect(), n),
        }
    }

    fn value(i: u8) -> Value {
        match i % 4 {
            0 => Value::Int(i64::from(i / 4)),
            1 => Value::str(&format!("k{}", i / 4)),
            2 => Value::Null,
            _ => Value::float(f64::from(i / 4) + 0.5),
        }
    }

    #[test]
    fn equal_values_find_one_key_and_others_do_not() {
        let mut map = RowMap::default();
        add(&mut map, &[Value::Int(1), Value::str("a")], 1);
        add(&mut map, &[Value::Int(1), Value::str("a")], 2);
        add(&mut map, &[Value::Int(1), Value::str("b")], 5);
        add(&mut map, &[Value::float(1.0), Value::str("a")], 7);
        let mut got: Vec<_> = map.drain().map(|(k, v)| (k.into_vec(), v)).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (vec![Value::Int(1), Value::str("a")], 3),
                (vec![Value::Int(1), Value::str("b")], 5),
                (vec![Value::float(1.0), Value::str("a")], 7),
            ]
        );
        assert!(map.is_empty());
        add(&mut map, &[Value::Int(1), Value::str("a")], 1);
        assert_eq!(map.len(), 1, "a drained map starts empty");
    }

    proptest! {
        /// Against a plain `HashMap`, keys added and taken out: the same keys
        /// held, each found, past several index resizes.
        #[test]
        fn removes_as_a_hash_map_does(
            ops in prop::collection::vec((any::<bool>(), prop::collection::vec(0u8..30, 1..3)), 0..3000)
        ) {
            let mut map = RowMap::default();
            let mut reference: HashMap<Vec<Value>, i64> = HashMap::new();
            for (i, (keep, k)) in ops.iter().enumerate() {
                let key: Vec<Value> = k.iter().map(|&b| value(b)).collect();
                let hash = hash_values(&key);
                if *keep {
                    add(&mut map, &key, i as i64);
                    *reference.entry(key).or_default() += i as i64;
                } else {
                    let got = map.remove(hash, &key).map(|(k, v)| (k.into_vec(), v));
                    prop_assert_eq!(got, reference.remove_entry(&key));
                }
                prop_assert_eq!(map.len(), reference.len());
            }
            for (key, v) in &reference {
                prop_assert_eq!(map.get_mut(hash_values(key), key), Some(&mut v.clone()));
            }
        }

        /// Against a plain `HashMap`: the same sums per key, for keys of one
        /// or three values, many repeated, past several index resizes.
        #[test]
        fn sums_as_a_hash_map_does(
            keys in prop::collection::vec(prop::collection::vec(0u8..40, 1..4), 0..3000)
        ) {
            let mut map = RowMap::default();
            let mut reference: HashMap<Vec<Value>, i64> = HashMap::new();
            for (i, k) in keys.iter().enumerate() {
                let key: Vec<Value> = k.iter().map(|&b| value(b)).collect();
                add(&mut map, &key, i as i64);
                *reference.entry(key).or_default() += i as i64;
            }
            prop_assert_eq!(map.len(), reference.len());
            let got: HashMap<Vec<Value>, i64> =
                map.into_entries().map(|(k, v)| (k.into_vec(), v)).collect();
            prop_assert_eq!(got, reference);
        }
    }
}
