//! Which locations hold the newest bytes of each byte range of a buffer.

use crate::Location;
use smallvec::{smallvec, SmallVec};
use std::ops::Range;

/// The set of locations holding the newest bytes of a range (the thesis' "latest device
/// list"). Empty means the bytes were never defined: any location may serve them as-is.
/// Inline up to two locations (a device and the host copy): sets are made and cloned on
/// every command's path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidSet(SmallVec<[Location; 2]>);

impl ValidSet {
    pub fn only(loc: Location) -> Self {
        ValidSet(smallvec![loc])
    }

    pub fn contains(&self, loc: Location) -> bool {
        self.0.contains(&loc)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `loc` may use these bytes as they are: it holds the newest, or nobody
    /// ever defined them.
    pub fn serves(&self, loc: Location) -> bool {
        self.is_empty() || self.contains(loc)
    }

    pub fn locations(&self) -> &[Location] {
        &self.0
    }

    fn insert(&mut self, loc: Location) {
        if let Err(pos) = self.0.binary_search(&loc) {
            self.0.insert(pos, loc);
        }
    }
}

impl FromIterator<Location> for ValidSet {
    fn from_iter<I: IntoIterator<Item = Location>>(iter: I) -> Self {
        let mut set = ValidSet::default();
        for loc in iter {
            set.insert(loc);
        }
        set
    }
}

/// A buffer's valid sets as sorted, non-overlapping segments covering `0..size`.
/// Adjacent segments with equal sets are merged, so a buffer only ever used whole stays
/// one segment and lookups stay O(1) in the common case.
/// Segments of a range with their sets: few, inline.
pub type Segments = SmallVec<[(Range<u64>, ValidSet); 2]>;

#[derive(Clone, Debug)]
pub struct ValidityMap {
    segments: Vec<(Range<u64>, ValidSet)>,
}

impl ValidityMap {
    pub fn new(size: u64, initial: ValidSet) -> Self {
        ValidityMap {
            segments: vec![(0..size, initial)],
        }
    }

    pub fn size(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.0.end)
    }

    /// The segments overlapping `range`, clipped to it; none for an empty range.
    pub fn segments_in(&self, range: Range<u64>) -> Segments {
        let mut out = Segments::new();
        if range.is_empty() {
            return out;
        }
        let first = self.segments.partition_point(|(r, _)| r.end <= range.start);
        for (r, set) in &self.segments[first..] {
            if r.start >= range.end {
                break;
            }
            out.push((r.start.max(range.start)..r.end.min(range.end), set.clone()));
        }
        out
    }

    /// Whether nothing of `range` must come to `loc`: every byte's newest copy is there,
    /// or nowhere. Mostly one segment: a device using what it wrote.
    pub fn nothing_to_bring(&self, range: &Range<u64>, loc: Location) -> bool {
        let first = self.segments.partition_point(|(r, _)| r.end <= range.start);
        (self.segments[first..].iter())
            .take_while(|(r, _)| r.start < range.end)
            .all(|(_, set)| set.serves(loc))
    }

    /// The set of the one segment holding all of `range`, if one does.
    fn segment_holding(&self, range: &Range<u64>) -> Option<&ValidSet> {
        let i = self.segments.partition_point(|(r, _)| r.end <= range.start);
        let (r, set) = self.segments.get(i)?;
        (r.start <= range.start && range.end <= r.end).then_some(set)
    }

    /// Splits segments so that `at` is a segment boundary.
    fn split_at(&mut self, at: u64) {
        let idx = self.segments.partition_point(|(r, _)| r.end <= at);
        if idx < self.segments.len() {
            let (r, set) = self.segments[idx].clone();
            if r.start < at && at < r.end {
                self.segments[idx].0 = r.start..at;
                self.segments.insert(idx + 1, (at..r.end, set));
            }
        }
    }

    fn update(&mut self, range: Range<u64>, f: impl Fn(&mut ValidSet)) {
        if range.is_empty() {
            return;
        }
        // Within one segment that the update leaves as it is (a device writing a buffer
        // it alone holds, every launch of a solver): nothing to split or merge.
        if let Some(set) = self.segment_holding(&range) {
            let mut after = set.clone();
            f(&mut after);
            if after == *set {
                return;
            }
        }
        self.split_at(range.start);
        self.split_at(range.end);
        for (r, set) in &mut self.segments {
            if r.start >= range.start && r.end <= range.end {
                f(set);
            }
        }
        self.merge();
    }

    /// Joins neighbouring segments with the same set, in place.
    fn merge(&mut self) {
        self.segments.dedup_by(|(r, set), (last, last_set)| {
            let joins = *last_set == *set && last.end == r.start;
            if joins {
                last.end = r.end;
            }
            joins
        });
    }

    /// `loc` now holds the newest bytes of `range` in addition to the others.
    pub fn add(&mut self, range: Range<u64>, loc: Location) {
        self.update(range, |set| set.insert(loc));
    }

    /// `loc` wrote `range`: it alone holds the newest bytes.
    pub fn set_only(&mut self, range: Range<u64>, loc: Location) {
        // Already so (a device writing what it alone holds): not even a set to build.
        if self
            .segment_holding(&range)
            .is_some_and(|set| set.locations() == [loc])
        {
            return;
        }
        self.update(range, |set| *set = ValidSet::only(loc));
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_in_middle_splits_and_merges_back() {
        let d0 = Location::Device(0);
        let d1 = Location::Device(1);
        let mut m = ValidityMap::new(100, ValidSet::only(Location::Host));
        m.set_only(10..20, d0);
        assert_eq!(m.segment_count(), 3);
        let segs = m.segments_in(0..100);
        assert_eq!(segs[1], (10..20, ValidSet::only(d0)));
        m.add(0..10, d0);
        m.add(20..100, d0);
        m.add(10..20, Location::Host);
        assert_eq!(m.segment_count(), 1);
        m.set_only(0..100, d1);
        assert_eq!(
            m.segments_in(5..7).to_vec(),
            vec![(5..7, ValidSet::only(d1))]
        );
        assert_eq!(m.size(), 100);
    }

    #[test]
    fn an_update_that_changes_nothing_leaves_the_segments_as_they_are() {
        let (d0, d1) = (Location::Device(0), Location::Device(1));
        let mut m = ValidityMap::new(100, ValidSet::only(d0));
        m.set_only(40..60, d1);
        let before = m.segments_in(0..100).to_vec();
        // Inside one segment, to what it already is: nothing to split.
        m.set_only(45..50, d1);
        m.set_only(0..10, d0);
        m.add(70..80, d0);
        assert_eq!(m.segments_in(0..100).to_vec(), before);
        // Across segments it still splits and merges: d0 everywhere again.
        m.set_only(30..70, d0);
        assert_eq!(
            m.segments_in(0..100).to_vec(),
            vec![(0..100, ValidSet::only(d0))]
        );
        // A change inside one segment splits it, and merges back when undone.
        m.add(20..30, d1);
        assert_eq!(m.segment_count(), 3);
        m.set_only(20..30, d0);
        assert_eq!(m.segment_count(), 1);
    }

    #[test]
    fn nothing_to_bring_where_every_byte_is_there_or_nowhere() {
        let (d0, d1) = (Location::Device(0), Location::Device(1));
        let mut m = ValidityMap::new(100, ValidSet::default());
        // Never defined: any location may serve the bytes as they are.
        assert!(m.nothing_to_bring(&(0..100), d1));
        m.set_only(0..50, d0);
        assert!(!m.nothing_to_bring(&(0..100), d1));
        assert!(m.nothing_to_bring(&(50..100), d1));
        assert!(m.nothing_to_bring(&(0..100), d0));
        m.add(10..20, d1);
        assert!(m.nothing_to_bring(&(10..20), d1));
        assert!(!m.nothing_to_bring(&(10..21), d1));
        assert!(!m.nothing_to_bring(&(9..20), d1));
        assert!(m.nothing_to_bring(&(55..60), Location::Host));
    }
}
