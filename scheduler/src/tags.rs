//! Message tags between pairs of ranks, per host-thread slot (threaded host programs).
//!
//! Both ranks of a pair must give each message between them the same tag without asking
//! each other. A rank's host threads interleave their OpenCL calls differently on each
//! rank, so one counter per pair would hand the tags out in a different order on each
//! end. Each thread has a slot that every rank agrees on (its creation order), and within
//! one thread both ranks see the thread's commands in the same order: a counter per
//! (slot, peer), with the slot in the tag's top bits, gives both ends the same tag.
//!
//! The runtime's `Node::tags_with` takes its tags here with the calling thread's slot;
//! the scheduler's property test (`tests/threads.rs`) takes them the same way.

use std::ops::Range;

/// How many host threads can be named at once (slot 0 is the main thread's).
pub const SLOTS: usize = 64;

/// A slot's number sits in the top bits of per-slot counters (tags, buffer ids).
pub const SLOT_SHIFT: u32 = 40;

/// Per slot and peer rank, the tag of the next message with that peer.
#[derive(Clone, Debug)]
pub struct Tags {
    ranks: usize,
    next: Vec<u64>,
}

impl Tags {
    /// The counters of one rank of `ranks`, all at zero.
    pub fn new(ranks: u32) -> Self {
        Tags {
            ranks: ranks as usize,
            next: vec![0; SLOTS * ranks as usize],
        }
    }

    /// The tags of the next `count` messages with `peer`, in either direction, of the
    /// thread in `slot`: what `count` single takes would return, taken at once.
    ///
    /// # Panics
    /// If `slot` is not below [`SLOTS`] or `peer` not below the rank count.
    pub fn take(&mut self, slot: usize, peer: u32, count: u64) -> Range<u64> {
        assert!(
            slot < SLOTS && (peer as usize) < self.ranks,
            "slot or peer out of range"
        );
        let t = &mut self.next[slot * self.ranks + peer as usize];
        let first = *t;
        *t += count;
        let base = (slot as u64) << SLOT_SHIFT;
        base + first..base + *t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_per_slot_and_peer_with_the_slot_in_the_top_bits() {
        let mut t = Tags::new(3);
        assert_eq!(t.take(0, 2, 1), 0..1);
        assert_eq!(t.take(0, 2, 2), 1..3);
        // Another peer, another slot: their own counters.
        assert_eq!(t.take(0, 1, 1), 0..1);
        let s = 5u64 << SLOT_SHIFT;
        assert_eq!(t.take(5, 2, 1), s..s + 1);
        assert_eq!(t.take(0, 2, 1), 3..4);
        assert_eq!(t.take(5, 2, 0), s + 1..s + 1);
        assert_eq!(
            t.take(SLOTS - 1, 0, 1).start >> SLOT_SHIFT,
            SLOTS as u64 - 1
        );
    }
}
