//! How ranks reach each other: one interface for the collectives at agreed points of the
//! call sequence and the point-to-point transfers of buffer contents, with an MPI
//! implementation (a real job), a single-rank one (no launcher) and an in-process one
//! (ranks as threads, for unit tests).

pub mod local;
pub mod mpi;

use crate::cluster::history::Stamp;
use std::time::Duration;

/// What a transfer is for: the deadline diagnostic names it, and its stamp (where the
/// planning rank stood in its call sequence when it planned the transfer) travels with
/// the message for the receiver to compare with its own.
#[derive(Clone, Copy, Debug)]
pub struct What {
    pub command: &'static str,
    pub buffer: u64,
    pub offset: u64,
    pub len: u64,
    pub stamp: Stamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Send,
    Recv,
    /// A receive whose bytes this rank cannot take (it failed before it could): the
    /// message is consumed, so that its sender completes, and dropped.
    Discard,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Recv => "receive",
            Direction::Discard => "discard",
        }
    }
}

/// One point-to-point transfer. `ptr` must stay valid (and, for a send, unchanged) until
/// `done` runs.
///
/// Every message travels with a [`Header`]: the sender's status for the bytes (a failure
/// on the sending side reaches the receiver as that failure, promptly, instead of stale
/// bytes or a wait that never ends), their length and the planning stamp. A failed send
/// carries no bytes.
pub struct Transfer {
    pub direction: Direction,
    pub peer: u32,
    pub tag: u64,
    pub ptr: usize,
    pub len: usize,
    pub what: What,
    /// A send: `CL_COMPLETE`, or the failure the bytes stand for (then none are sent).
    pub status: i32,
    /// Runs (on whichever thread completes the transfer) with `CL_COMPLETE`, the
    /// sender's failure (a receive), or `CL_OUT_OF_RESOURCES` (the transport failed).
    pub done: Box<dyn FnOnce(i32) + Send>,
}

/// What precedes every message's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Header {
    pub magic: u32,
    pub status: i32,
    pub len: u64,
    pub stamp: Stamp,
}

pub const HEADER_MAGIC: u32 = u32::from_le_bytes(*b"MCLd");

impl Header {
    pub fn of(t: &Transfer) -> Header {
        Header {
            magic: HEADER_MAGIC,
            status: t.status.min(0),
            len: t.len as u64,
            stamp: t.what.stamp,
        }
    }

    /// The header's bytes (both ends run one build on one architecture).
    pub fn as_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..8].copy_from_slice(&self.status.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.stamp.entries.to_le_bytes());
        b[24..32].copy_from_slice(&self.stamp.digest.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; 32]) -> Header {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Header {
            magic: u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
            status: i32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            len: u64_at(8),
            stamp: Stamp {
                entries: u64_at(16),
                digest: u64_at(24),
            },
        }
    }
}

/// How a received message turned out.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// `CL_COMPLETE`, or the sender's failure.
    Status(i32),
    /// The sender planned it elsewhere in its call sequence, or sent other bytes: the
    /// replicas diverged (the text says how).
    Diverged(String),
}

/// Checks a receive's header against what this rank planned. `transport_ok`: whether
/// the transport delivered the bytes without error (a longer message than planned
/// fails as truncated, and its header says why).
pub fn arrival(t: &Transfer, h: &Header, transport_ok: bool) -> Arrival {
    if h.magic != HEADER_MAGIC {
        return Arrival::Diverged(format!(
            "the {} has no MirrorCL header: the ranks run different builds or exchange \
             other messages",
            describe(t.direction, t.peer, &t.what, Duration::ZERO)
        ));
    }
    let planned_alike = h.stamp == t.what.stamp;
    if !planned_alike || (h.status >= 0 && h.len != t.len as u64) {
        return Arrival::Diverged(format!(
            "rank {} sent {} bytes planned after its {}, where this rank planned {} bytes \
             after its {} ({})",
            t.peer,
            h.len,
            h.stamp,
            t.len,
            t.what.stamp,
            describe(t.direction, t.peer, &t.what, Duration::ZERO)
        ));
    }
    if h.status < 0 {
        return Arrival::Status(h.status);
    }
    if t.direction == Direction::Discard {
        // Dropped here: this rank failed before it could take the bytes.
        return Arrival::Status(CL_OUT_OF_RESOURCES);
    }
    Arrival::Status(if transport_ok { 0 } else { CL_OUT_OF_RESOURCES })
}

/// The report of a message that showed the replicas diverged, with the first call
/// that differs between this rank's kept history and the sender's (`theirs`, when it
/// arrived).
pub fn divergence_report(
    rank: u32,
    peer: u32,
    text: &str,
    theirs: Option<Vec<crate::cluster::wire::HistoryEntry>>,
) -> String {
    let detail = match theirs {
        Some(theirs) => {
            let mut lists = vec![(rank, crate::cluster::history::recent()), (peer, theirs)];
            lists.sort_by_key(|(r, _)| *r);
            crate::cluster::history::first_difference(&lists)
        }
        None => format!("rank {peer}'s call history did not arrive"),
    };
    format!(
        "MirrorCL: rank {rank}: {text}; {detail}\nMirrorCL: the replicas diverged \
         (rank-dependent input, unseeded randomness, host threads?); aborting the job."
    )
}

/// `CL_OUT_OF_RESOURCES`: the transport failed.
const CL_OUT_OF_RESOURCES: i32 = -5;

/// This rank's place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub rank: u32,
    pub size: u32,
    /// This rank among the ranks of its host, and how many share the host.
    pub local_rank: u32,
    pub local_size: u32,
    pub host: String,
}

/// The operations the runtime needs from its peers. Collectives are made by every rank
/// at the same point of its call sequence; transfers are matched by (peer, tag).
pub trait Communicator: Send + Sync {
    fn place(&self) -> &Place;

    /// Whether collectives can still run (a hybrid program may have finalised MPI).
    fn can_communicate(&self) -> bool;

    /// Every rank's `mine`, in rank order.
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>>;

    /// Queues a point-to-point transfer; its `done` runs once it is over.
    fn transfer(&self, t: Transfer);

    /// What this rank is still waiting for from its peers (for deadline reports).
    fn pending_report(&self) -> Vec<String>;

    /// Ends the whole job after a fatal condition was reported.
    fn abort(&self) -> !;

    /// At process exit: lets transfers in flight finish (briefly), then releases the
    /// transport.
    fn shut_down(&self) {}
}

/// A process started without a launcher: a cluster of one, with nobody to talk to.
pub struct Solo(pub Place);

impl Communicator for Solo {
    fn place(&self) -> &Place {
        &self.0
    }
    fn can_communicate(&self) -> bool {
        false
    }
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        vec![mine.to_vec()]
    }
    fn transfer(&self, t: Transfer) {
        (t.done)(CL_OUT_OF_RESOURCES)
    }
    fn pending_report(&self) -> Vec<String> {
        Vec::new()
    }
    fn abort(&self) -> ! {
        std::process::abort()
    }
}

/// One line of a deadline report on a transfer.
pub fn describe(dir: Direction, peer: u32, what: &What, waited: Duration) -> String {
    format!(
        "{} of bytes {}..{} of buffer #{} {} rank {} (for {}), pending {:.1} s",
        match dir {
            Direction::Send => "send",
            Direction::Recv => "receive",
            Direction::Discard => "discarded receive",
        },
        what.offset,
        what.offset + what.len,
        what.buffer,
        match dir {
            Direction::Send => "to",
            Direction::Recv | Direction::Discard => "from",
        },
        peer,
        what.command,
        waited.as_secs_f64()
    )
}
