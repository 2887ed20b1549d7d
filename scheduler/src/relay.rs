//! Who passes a step's bytes to whom when they go to the host copy, which every rank
//! holds (the device → Host row of Table IV.1). Every rank computes the same relay from
//! what all agree on (the owner, the rank count, the step's length), so each pair
//! agrees on the messages between them without asking.
//!
//! Up to [`TREE_MIN_BYTES`] the owner sends to every other rank itself: N−1 small
//! messages cost it little, and every rank has the bytes after one hop. Above it the
//! bytes travel down a binary tree rooted at the owner, piece by piece, so that no rank
//! sends more than two copies, whatever the rank count, and the depth is log2 N.

/// Steps longer than this are relayed down a tree rather than sent by the owner to
/// every rank.
pub const TREE_MIN_BYTES: u64 = 64 * 1024;

/// One rank's part in sharing a step's bytes with every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relay {
    /// The rank this one receives the bytes from (`None` for the owner).
    pub from: Option<u32>,
    /// The ranks this one passes the bytes on to, in the order it sends.
    pub to: Vec<u32>,
}

/// `rank`'s part when `owner` shares `len` bytes with all `size` ranks.
pub fn host_copy_relay(owner: u32, size: u32, rank: u32, len: u64) -> Relay {
    debug_assert!(owner < size && rank < size);
    if len <= TREE_MIN_BYTES {
        return if rank == owner {
            Relay {
                from: None,
                to: (0..size).filter(|&r| r != owner).collect(),
            }
        } else {
            Relay {
                from: Some(owner),
                to: Vec::new(),
            }
        };
    }
    // Positions in the tree count from the owner, so any rank can be the root.
    let position = (rank + size - owner) % size;
    let rank_at = |p: u32| (p + owner) % size;
    Relay {
        from: (position > 0).then(|| rank_at((position - 1) / 2)),
        to: [2 * position + 1, 2 * position + 2]
            .into_iter()
            .filter(|&p| p < size)
            .map(rank_at)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank but the owner receives exactly once, from a rank that lists it; the
    /// sends form one tree reaching everyone; no rank sends more than two copies of a
    /// large step, and the owner sends to all of a small one directly.
    #[test]
    fn relays_reach_every_rank_once() {
        for size in 1..=70u32 {
            for owner in 0..size {
                for len in [16, TREE_MIN_BYTES, TREE_MIN_BYTES + 1, 1 << 30] {
                    let parts: Vec<Relay> = (0..size)
                        .map(|r| host_copy_relay(owner, size, r, len))
                        .collect();
                    assert_eq!(parts[owner as usize].from, None);
                    let mut got = vec![0u32; size as usize];
                    for (r, part) in parts.iter().enumerate() {
                        if len > TREE_MIN_BYTES {
                            assert!(part.to.len() <= 2, "size {size} owner {owner} rank {r}");
                        }
                        for &to in &part.to {
                            got[to as usize] += 1;
                            assert_eq!(parts[to as usize].from, Some(r as u32));
                        }
                        if let Some(from) = part.from {
                            assert!(parts[from as usize].to.contains(&(r as u32)));
                        }
                    }
                    for (r, &n) in got.iter().enumerate() {
                        let expect = u32::from(r as u32 != owner);
                        assert_eq!(n, expect, "size {size} owner {owner} rank {r} len {len}");
                    }
                    // Reaching the owner by following `from` proves there is no cycle.
                    for r in 0..size {
                        let (mut at, mut hops) = (r, 0);
                        while let Some(f) = parts[at as usize].from {
                            at = f;
                            hops += 1;
                            assert!(hops <= size);
                        }
                        assert_eq!(at, owner);
                        if len > TREE_MIN_BYTES {
                            assert!(hops <= 32 - size.leading_zeros());
                        } else {
                            assert!(hops <= 1);
                        }
                    }
                }
            }
        }
    }
}
