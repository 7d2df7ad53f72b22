//! A frozen sequence that shares its parent's storage: extending it is O(new), not O(len).
//!
//! A rolling summary's source IDs are every turn it covers (SPEC §15.1), so each version's
//! list is its parent's plus a few new IDs. Copying the parent's list per compaction made the
//! store's cost grow with the ledger (issue 28 item 6). Here, as in the store's source runs,
//! storage is append-only: a sequence is a list of *parts*, each the first `len` slots of a
//! shared segment. Extending the sequence whose last part ends at its segment's fill writes
//! the new items into that segment's free slots (a slot is written once, under the segment's
//! lock, before the fill moves past it), so the parent keeps seeing exactly its own items and
//! the child shares them. Any other extension (a sibling already wrote past this one's end,
//! or the segment is full) starts a new segment, into which the trailing parts no longer than
//! it moves (copied; each item at most log2 [`MAX_SEGMENT`] times), and all of them when there
//! are [`MAX_SMALL_PARTS`], so that a chain of branches does not grow a part per extension. Segments grow with the sequence up to
//! [`MAX_SEGMENT`] slots (a new segment's free slots are initialised: kept small so that a
//! branch, e.g. a retried plan on the same parent, costs microseconds), so a sequence has
//! O(log len + len / `MAX_SEGMENT`) parts and an extension copies only that part list.

use std::sync::{Arc, Mutex, OnceLock};

/// The smallest segment an extension starts.
pub const MIN_SEGMENT: usize = 64;
/// The largest segment an extension starts (an extension with more items gets them all).
pub const MAX_SEGMENT: usize = 1 << 12;
/// How many trailing parts shorter than [`MAX_SEGMENT`] a sequence keeps before a new
/// segment takes them all.
pub const MAX_SMALL_PARTS: usize = 16;

struct Segment<T> {
    slots: Box<[OnceLock<T>]>,
    /// Slots `..fill` are written; only ever grows.
    fill: Mutex<usize>,
}

impl<T> Segment<T> {
    fn new(items: Vec<T>, capacity: usize) -> Self {
        let fill = items.len();
        let mut slots = Vec::with_capacity(capacity.max(fill));
        slots.extend(items.into_iter().map(OnceLock::from));
        slots.resize_with(capacity.max(fill), OnceLock::new);
        Segment {
            slots: slots.into_boxed_slice(),
            fill: Mutex::new(fill),
        }
    }
}

/// The first `len` slots of a segment.
struct Part<T> {
    segment: Arc<Segment<T>>,
    len: usize,
}

impl<T> Clone for Part<T> {
    fn clone(&self) -> Self {
        Part {
            segment: Arc::clone(&self.segment),
            len: self.len,
        }
    }
}

impl<T> Part<T> {
    fn items(&self) -> impl Iterator<Item = &T> {
        // Slots below a part's len were written before the part existed.
        self.segment.slots[..self.len]
            .iter()
            .filter_map(OnceLock::get)
    }
}

/// An immutable sequence; clones and extensions share storage.
pub struct SharedSeq<T> {
    parts: Vec<Part<T>>,
    /// `ends[i]`: the number of items in `parts[..=i]`.
    ends: Vec<usize>,
}

impl<T> Clone for SharedSeq<T> {
    fn clone(&self) -> Self {
        SharedSeq {
            parts: self.parts.clone(),
            ends: self.ends.clone(),
        }
    }
}

impl<T> Default for SharedSeq<T> {
    fn default() -> Self {
        SharedSeq {
            parts: Vec::new(),
            ends: Vec::new(),
        }
    }
}

impl<T> SharedSeq<T> {
    /// The sequence of `items` (one segment, no spare slots).
    pub fn from_vec(items: Vec<T>) -> Self {
        let len = items.len();
        if len == 0 {
            return SharedSeq::default();
        }
        SharedSeq {
            parts: vec![Part {
                segment: Arc::new(Segment::new(items, len)),
                len,
            }],
            ends: vec![len],
        }
    }

    pub fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many parts the sequence is made of (a measure of its layout, for tests).
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// This sequence followed by `items`; `self` is unchanged.
    #[must_use]
    pub fn extended(&self, items: Vec<T>) -> Self
    where
        T: Clone,
    {
        self.extended_with(items, T::clone)
    }

    /// This sequence followed by `items`, `self` unchanged; `clone` copies an item that
    /// moves to a new segment (see below).
    #[must_use]
    pub fn extended_with(&self, items: Vec<T>, clone: impl Fn(&T) -> T) -> Self {
        let added = items.len();
        if added == 0 {
            return self.clone();
        }
        let mut next = self.clone();
        let total = self.len() + added;
        if let Some(last) = next.parts.last_mut() {
            let mut fill = last
                .segment
                .fill
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *fill == last.len && last.segment.slots.len() - *fill >= added {
                for (slot, item) in last.segment.slots[*fill..].iter().zip(items) {
                    // Free slots (at or past the fill) are never written: `set` succeeds.
                    let _ = slot.set(item);
                }
                *fill += added;
                drop(fill);
                last.len += added;
                if let Some(end) = next.ends.last_mut() {
                    *end = total;
                }
                return next;
            }
        }
        // A new segment. The trailing parts no longer than what it holds so far move into
        // it (copied), smaller than MAX_SEGMENT: each move at least doubles the part an item
        // is in, so an item is copied at most log2(MAX_SEGMENT) times, and a sequence whose
        // every extension is a branch (a sibling took the free slots each time) still has
        // O(log len + len / MAX_SEGMENT) parts, not one per extension. A part that grew in
        // place after its branch escapes that rule, so past MAX_SMALL_PARTS trailing parts
        // under MAX_SEGMENT all of them move (at most MAX_SEGMENT / MAX_SMALL_PARTS copies
        // per extension on average, or each item once into a part that is no longer small).
        let crowded = next
            .parts
            .iter()
            .rev()
            .take_while(|part| part.len < MAX_SEGMENT)
            .count()
            >= MAX_SMALL_PARTS;
        let mut moved = 0;
        while let Some(last) = next.parts.last() {
            if last.len >= MAX_SEGMENT || (!crowded && last.len > moved + added) {
                break;
            }
            moved += last.len;
            next.parts.pop();
            next.ends.pop();
        }
        let mut joined = Vec::with_capacity(moved + added);
        for part in &self.parts[next.parts.len()..] {
            joined.extend(part.items().map(&clone));
        }
        joined.extend(items);
        let len = joined.len();
        // A sequence read whole gets an exact segment; an extension one with room to grow.
        let capacity = if self.is_empty() {
            len
        } else {
            self.len().clamp(MIN_SEGMENT, MAX_SEGMENT).max(len)
        };
        next.parts.push(Part {
            segment: Arc::new(Segment::new(joined, capacity)),
            len,
        });
        next.ends.push(total);
        next
    }

    /// The item at `index`, None past the end.
    pub fn get(&self, index: usize) -> Option<&T> {
        let part = self.ends.partition_point(|&end| end <= index);
        let start = if part == 0 { 0 } else { self.ends[part - 1] };
        self.parts
            .get(part)
            .and_then(|p| p.segment.slots.get(index - start))
            .and_then(OnceLock::get)
    }

    /// Every item in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.parts.iter().flat_map(Part::items)
    }

    /// The items from position `start` (none when `start` is past the end).
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> {
        let part = self.ends.partition_point(|&end| end <= start);
        let offset = if part == 0 { 0 } else { self.ends[part - 1] };
        self.parts
            .iter()
            .skip(part)
            .flat_map(Part::items)
            .skip(start.saturating_sub(offset))
    }

    /// How many leading items the two sequences are known to share by storage (the same
    /// slots of the same segments), without comparing any item.
    fn shared_prefix(&self, other: &Self) -> usize {
        let mut shared = 0;
        for (a, b) in self.parts.iter().zip(&other.parts) {
            if !Arc::ptr_eq(&a.segment, &b.segment) {
                break;
            }
            shared += a.len.min(b.len);
            if a.len != b.len {
                break;
            }
        }
        shared
    }

    /// True when this sequence begins with `prefix`. Items in shared storage are equal
    /// without calling `eq`; the rest are compared with it.
    pub fn starts_with(&self, prefix: &Self, mut eq: impl FnMut(&T, &T) -> bool) -> bool {
        if prefix.len() > self.len() {
            return false;
        }
        let shared = self.shared_prefix(prefix);
        self.iter_from(shared)
            .zip(prefix.iter_from(shared))
            .all(|(a, b)| eq(a, b))
    }

    /// True when both hold equal items in the same order.
    pub fn equals(&self, other: &Self, eq: impl FnMut(&T, &T) -> bool) -> bool {
        self.len() == other.len() && self.starts_with(other, eq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn items(seq: &SharedSeq<u32>) -> Vec<u32> {
        seq.iter().copied().collect()
    }

    #[test]
    fn an_extension_shares_its_parents_segment_and_leaves_the_parent_as_it_was() {
        let parent = SharedSeq::from_vec((0..100).collect());
        let child = parent.extended(vec![100, 101]);
        let grandchild = child.extended(vec![102]);
        assert_eq!(items(&parent), (0..100).collect::<Vec<_>>());
        assert_eq!(items(&grandchild), (0..103).collect::<Vec<_>>());
        // The first extension starts a segment with room; the next one writes into it.
        assert_eq!((child.parts(), grandchild.parts()), (2, 2));
        assert_eq!(grandchild.shared_prefix(&child), 102);
    }

    #[test]
    fn a_sibling_extension_does_not_see_or_overwrite_the_first_ones_items() {
        let parent = SharedSeq::from_vec(vec![1, 2]).extended(vec![3]);
        let first = parent.extended(vec![4]);
        let second = parent.extended(vec![5, 6]);
        assert_eq!(items(&first), vec![1, 2, 3, 4]);
        assert_eq!(items(&second), vec![1, 2, 3, 5, 6]);
        assert_eq!(items(&parent), vec![1, 2, 3]);
        assert!(!second.starts_with(&first, |a, b| a == b));
        assert!(first.starts_with(&parent, |_, _| unreachable!("shared storage")));
        // The sibling copied the parent's small parts into its own segment.
        assert!(second.starts_with(&parent, |a, b| a == b));
    }

    #[test]
    fn many_small_extensions_keep_few_parts() {
        let mut seq = SharedSeq::from_vec((0..1000).collect::<Vec<u32>>());
        for n in 0..10_000u32 {
            seq = seq.extended(vec![n; 8]);
        }
        assert_eq!(seq.len(), 81_000);
        // Segments double from 1,000 slots up to MAX_SEGMENT: one part per segment, not one
        // per extension (10,000 of them).
        assert!(
            seq.parts() <= 4 + 80_000 / MAX_SEGMENT,
            "{} parts",
            seq.parts()
        );
    }

    #[test]
    fn a_chain_whose_every_extension_is_a_branch_keeps_few_parts_and_small_segments() {
        // Each step, a sibling (a discarded plan, a chunk's envelope next to its plan's
        // IDs) takes the free slots first, so the kept extension cannot write in place.
        let mut seq = SharedSeq::from_vec((0..1000).collect::<Vec<u32>>());
        let mut expected: Vec<u32> = (0..1000).collect();
        for n in 0..20_000u32 {
            let sibling = seq.extended(vec![u32::MAX]);
            seq = seq.extended(vec![n]);
            expected.push(n);
            assert_eq!(sibling.get(sibling.len() - 1), Some(&u32::MAX));
        }
        assert_eq!(items(&seq), expected);
        // One part per extension before: each cloned every part (quadratic time) and kept
        // a segment of up to MAX_SEGMENT slots alive per item.
        let bound = 2 * (MAX_SEGMENT.ilog2() as usize) + 21_000 / MAX_SEGMENT + 2;
        assert!(seq.parts() <= bound, "{} parts", seq.parts());
        let slots: usize = seq.parts.iter().map(|part| part.segment.slots.len()).sum();
        assert!(slots <= 4 * 21_000, "{slots} slots");
    }

    #[test]
    fn branches_between_growth_in_place_keep_few_parts() {
        // A retried compaction: the failed plan took the free slots, the retry branches,
        // its lineage then grows in place (a longer run each time) until the next retry.
        let mut seq = SharedSeq::from_vec((0..100_000).collect::<Vec<u32>>());
        let mut expected: Vec<u32> = (0..100_000).collect();
        for round in 0..300u32 {
            let _failed = seq.extended(vec![u32::MAX]);
            for n in 0..=round {
                seq = seq.extended(vec![n]);
                expected.push(n);
            }
        }
        assert_eq!(items(&seq), expected);
        // One part per retry before (each a segment of MAX_SEGMENT slots, kept alive).
        let bound = 2 * (MAX_SEGMENT.ilog2() as usize) + 145_000 / MAX_SEGMENT + 2;
        assert!(seq.parts() <= bound, "{} parts", seq.parts());
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Extend version `from % versions` with these items.
        Extend(usize, Vec<u32>),
    }

    fn ops() -> impl Strategy<Value = (Vec<u32>, Vec<Op>)> {
        (
            proptest::collection::vec(0u32..5, 0..80),
            proptest::collection::vec(
                (0usize..64, proptest::collection::vec(0u32..5, 0..70))
                    .prop_map(|(from, items)| Op::Extend(from, items)),
                0..40,
            ),
        )
    }

    proptest! {
        #[test]
        fn behaves_as_a_vec_under_any_branching_extensions((start, ops) in ops()) {
            let mut versions = vec![(SharedSeq::from_vec(start.clone()), start)];
            for Op::Extend(from, added) in ops {
                let (seq, model) = &versions[from % versions.len()];
                let mut expected = model.clone();
                expected.extend(&added);
                let next = seq.extended(added);
                versions.push((next, expected));
            }
            for (seq, model) in &versions {
                prop_assert_eq!(seq.len(), model.len());
                prop_assert_eq!(items(seq), model.clone());
                for index in 0..=model.len() {
                    prop_assert_eq!(seq.get(index), model.get(index));
                    prop_assert_eq!(
                        seq.iter_from(index).copied().collect::<Vec<_>>(),
                        model[index..].to_vec()
                    );
                }
            }
            for (a, model_a) in &versions {
                for (b, model_b) in &versions {
                    prop_assert_eq!(a.starts_with(b, |x, y| x == y), model_a.starts_with(model_b));
                    prop_assert_eq!(a.equals(b, |x, y| x == y), model_a == model_b);
                }
            }
        }
    }
}
