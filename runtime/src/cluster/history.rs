//! What this rank has planned so far, so that replicas that diverge are caught before
//! they exchange the wrong bytes, always on in a cluster (one process alone keeps none).
//!
//! Every buffer creation and every command this rank submits (left out or not) folds
//! what decides the messages ranks exchange (sizes, buffers, ranges, modes, devices)
//! into a chained digest. A message carries its sender's [`Stamp`] from when the step
//! was planned, and a collective carries every rank's; the receiver compares it with
//! its own from the same point of its call sequence, which identical replicas always
//! share. Data the host feeds (bytes written, scalar kernel arguments) are left out:
//! they change results, not messages, and a rank may legitimately compute an argument
//! of a kernel that runs elsewhere differently. `MIRRORCL_VERIFY` checks those.
//!
//! Each host thread the program names has its own history (`host_threads`).
//!
//! The last [`KEPT`] entries are kept in compact form for the report of the first one
//! that differs.

use crate::cluster::host_threads::SLOTS;
use crate::cluster::verify::hash_bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How far back a divergence report can look.
pub const KEPT: usize = 256;

/// Where a rank stands in its call sequence: how many entries it has folded, and their
/// chained digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub entries: u64,
    pub digest: u64,
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "entry #{} (digest {:016x})", self.entries, self.digest)
    }
}

/// One folded entry, compact (formatted only for a report).
#[derive(Clone, Copy, Debug)]
enum What {
    Call {
        name: &'static str,
    },
    Buffer {
        id: u64,
        size: u64,
    },
    Command {
        name: &'static str,
        device: u32,
        /// The first access: buffer, root range, mode.
        first: Option<(u64, u64, u64, u8)>,
        accesses: u32,
    },
}

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match *self {
            What::Call { name } => f.write_str(name),
            What::Buffer { id, size } => write!(f, "create buffer #{id} of {size} bytes"),
            What::Command {
                name,
                device,
                first,
                accesses,
            } => {
                write!(f, "{name} on device {device}")?;
                if let Some((b, start, end, mode)) = first {
                    let mode = ["read", "write", "read-write"]
                        .get(mode as usize)
                        .copied()
                        .unwrap_or("access");
                    write!(f, ", {mode} of bytes {start}..{end} of buffer #{b}")?;
                }
                if accesses > 1 {
                    write!(f, " and {} more buffers", accesses - 1)?;
                }
                Ok(())
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Kept {
    index: u64,
    hash: u64,
    /// The chained digest after this entry.
    chain: u64,
    what: What,
}

struct History {
    stamp: Stamp,
    kept: VecDeque<Kept>,
}

/// One history per host-thread slot (`host_threads`): a thread's calls are in the same
/// order on every rank, the interleaving of threads is not.
static HISTORY: [Mutex<History>; SLOTS] = [const {
    Mutex::new(History {
        stamp: Stamp {
            entries: 0,
            digest: 0,
        },
        kept: VecDeque::new(),
    })
}; SLOTS];

fn fold(hash: u64, what: What) {
    let mut h = HISTORY[crate::cluster::host_threads::slot()].lock();
    h.stamp.entries += 1;
    h.stamp.digest = hash_bytes(h.stamp.digest, &hash.to_le_bytes());
    if h.kept.len() == KEPT {
        h.kept.pop_front();
    }
    let (index, chain) = (h.stamp.entries, h.stamp.digest);
    h.kept.push_back(Kept {
        index,
        hash,
        chain,
        what,
    });
}

/// Whether this process keeps a history: only ranks compare them, and one process alone
/// would pay about 350 instructions a command for nothing. The callers ask (the unit
/// tests fold entries without a cluster).
pub fn kept() -> bool {
    crate::cluster::node::is_cluster_now()
}

/// A buffer (or image) was created with this id and size.
pub fn note_buffer(id: u64, size: u64) {
    let mut bytes = [0u8; 17];
    bytes[0] = b'B';
    bytes[1..9].copy_from_slice(&id.to_le_bytes());
    bytes[9..].copy_from_slice(&size.to_le_bytes());
    fold(hash_bytes(0, &bytes), What::Buffer { id, size });
}

/// A command was submitted: its type, its device, and its accesses (root buffer, root
/// range, mode as a number).
pub fn note_command(
    name: &'static str,
    command_type: u32,
    device: u32,
    accesses: impl Iterator<Item = (u64, u64, u64, u8)> + Clone,
) {
    let mut h = hash_bytes(0x0043_6d64, &command_type.to_le_bytes());
    h = hash_bytes(h, &device.to_le_bytes());
    let mut n = 0u32;
    for (b, start, end, mode) in accesses.clone() {
        let mut a = [0u8; 25];
        a[..8].copy_from_slice(&b.to_le_bytes());
        a[8..16].copy_from_slice(&start.to_le_bytes());
        a[16..24].copy_from_slice(&end.to_le_bytes());
        a[24] = mode;
        h = hash_bytes(h, &a);
        n += 1;
    }
    let mut accesses = accesses;
    fold(
        h,
        What::Command {
            name,
            device,
            first: accesses.next(),
            accesses: n,
        },
    );
}

/// A call that makes no command but a collective whose answer steers the program (a
/// wait, a polled status), with what identifies it (`parts`): an extra or missing one
/// on a rank shows at the next collective or message instead of pairing with another.
pub fn note_call(name: &'static str, parts: &[u64]) {
    let mut h = hash_bytes(0x43616c6c, name.as_bytes());
    for p in parts {
        h = hash_bytes(h, &p.to_le_bytes());
    }
    fold(h, What::Call { name });
}

/// Where this rank stands now.
pub fn stamp() -> Stamp {
    HISTORY[crate::cluster::host_threads::slot()].lock().stamp
}

/// The kept entries, for a report (a wire message to another rank, or this rank's own).
pub fn recent() -> Vec<crate::cluster::wire::HistoryEntry> {
    let h = HISTORY[crate::cluster::host_threads::slot()].lock();
    h.kept
        .iter()
        .map(|k| crate::cluster::wire::HistoryEntry {
            index: k.index,
            hash: k.hash,
            chain: k.chain,
            what: k.what.to_string(),
        })
        .collect()
}

/// The first entry at which the ranks' histories part, with what each rank did there,
/// from their kept entries (`(rank, entries)`); or why it cannot be named.
pub fn first_difference(lists: &[(u32, Vec<crate::cluster::wire::HistoryEntry>)]) -> String {
    use crate::cluster::wire::HistoryEntry;
    let at = |l: &[HistoryEntry], i: u64| l.iter().find(|e| e.index == i).cloned();
    // Every rank's kept entries cover first..=last (missing ones read as "no entry").
    let first = lists
        .iter()
        .filter_map(|(_, l)| l.first().map(|e| e.index))
        .max()
        .unwrap_or(1);
    let last = lists
        .iter()
        .filter_map(|(_, l)| l.last().map(|e| e.index))
        .max()
        .unwrap_or(0);
    for i in first..=last {
        let entries: Vec<Option<HistoryEntry>> = lists.iter().map(|(_, l)| at(l, i)).collect();
        let chain = |e: &Option<HistoryEntry>| e.as_ref().map(|e| e.chain);
        if entries.iter().all(|e| chain(e) == chain(&entries[0])) {
            continue;
        }
        let prev: Vec<Option<u64>> = lists
            .iter()
            .map(|(_, l)| at(l, i - 1).map(|e| e.chain))
            .collect();
        if i == first && i > 1 && !prev.iter().all(|p| p.is_some() && *p == prev[0]) {
            return format!(
                "the calls that differ are more than {KEPT} entries back (set \
                 MIRRORCL_VERIFY=1 to find them)"
            );
        }
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        for ((rank, _), e) in lists.iter().zip(&entries) {
            let what = match e {
                Some(e) => format!("#{} {}", e.index, e.what),
                None => format!("no entry #{i}"),
            };
            match groups.iter_mut().find(|(w, _)| *w == what) {
                Some((_, ranks)) => ranks.push(*rank),
                None => groups.push((what, vec![*rank])),
            }
        }
        let mut text = String::from("the first call that differs:");
        for (what, ranks) in groups {
            let ranks: Vec<String> = ranks.iter().map(u32::to_string).collect();
            text.push_str(&format!("\n  rank {}: {what}", ranks.join(", ")));
        }
        return text;
    }
    format!(
        "every rank created the same buffers and enqueued the same commands (to entry \
         #{last}): a call that enqueues none differs (a wait, a status query, a build)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::wire::HistoryEntry;

    fn chain_of(hashes: &[u64]) -> Vec<HistoryEntry> {
        let mut digest = 0;
        (hashes.iter().enumerate())
            .map(|(i, &hash)| {
                digest = hash_bytes(digest, &hash.to_le_bytes());
                HistoryEntry {
                    index: i as u64 + 1,
                    hash,
                    chain: digest,
                    what: format!("call {hash}"),
                }
            })
            .collect()
    }

    #[test]
    fn the_first_difference_names_each_ranks_entry() {
        let a = chain_of(&[1, 2, 3, 4]);
        let b = chain_of(&[1, 2, 9, 4]);
        assert_eq!(
            first_difference(&[(0, a.clone()), (1, b), (2, a.clone())]),
            "the first call that differs:\n  rank 0, 2: #3 call 3\n  rank 1: #3 call 9"
        );
        // One rank is ahead: the other has no entry there.
        let short = chain_of(&[1, 2]);
        assert_eq!(
            first_difference(&[(0, a.clone()), (1, short)]),
            "the first call that differs:\n  rank 0: #3 call 3\n  rank 1: no entry #3"
        );
        // Kept windows that start after the difference: it cannot be named.
        let (mut x, mut y) = (chain_of(&[5, 1, 2, 3]), chain_of(&[6, 1, 2, 3]));
        x.remove(0);
        y.remove(0);
        assert!(first_difference(&[(0, x), (1, y)]).contains("more than"));
    }

    #[test]
    fn stamps_follow_every_entry() {
        let before = stamp();
        note_buffer(7, 100);
        note_command(
            "clEnqueueCopyBuffer",
            0x11f5,
            1,
            [(7, 0, 100, 0), (8, 0, 100, 1)].into_iter(),
        );
        let after = stamp();
        assert!(after.entries >= before.entries + 2);
        assert_ne!(after.digest, before.digest);
        let kept = recent();
        assert!(kept
            .iter()
            .any(|e| e.what == "create buffer #7 of 100 bytes"));
        assert!(kept.iter().any(|e| e.what
            == "clEnqueueCopyBuffer on device 1, read of bytes 0..100 of buffer #7 and 1 more buffers"));
    }
}
