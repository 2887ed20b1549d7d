//! How ranks reach each other: one interface for the collectives at agreed points of the
//! call sequence and the point-to-point transfers of buffer contents, with an MPI
//! implementation (a real job), a single-rank one (no launcher) and an in-process one
//! (ranks as threads, for unit tests).

pub mod local;
pub mod mpi;

use std::time::Duration;

/// What a transfer is for, for the deadline diagnostic.
#[derive(Clone, Copy, Debug)]
pub struct What {
    pub command: &'static str,
    pub buffer: u64,
    pub offset: u64,
    pub len: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Send,
    Recv,
}

/// One point-to-point transfer. `ptr` must stay valid (and, for a send, unchanged) until
/// `done` runs.
pub struct Transfer {
    pub direction: Direction,
    pub peer: u32,
    pub tag: u64,
    pub ptr: usize,
    pub len: usize,
    pub what: What,
    /// Runs (on whichever thread completes the transfer) when it completed (`true`) or
    /// failed.
    pub done: Box<dyn FnOnce(bool) + Send>,
}

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
        (t.done)(false)
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
        },
        what.offset,
        what.offset + what.len,
        what.buffer,
        match dir {
            Direction::Send => "to",
            Direction::Recv => "from",
        },
        peer,
        what.command,
        waited.as_secs_f64()
    )
}
