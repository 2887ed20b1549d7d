//! A job: one vendor command as the enqueuing thread describes it to an issuer (its
//! event, dependencies, queue, what it lands), and how it runs.

use super::*;

/// What the issuer knows of a job before running it, to decide which kernels may share
/// a later command's vendor event.
pub struct JobInfo {
    /// The vendor queue it goes to (by address), for sharing events within a queue.
    pub vqueue: usize,
    /// The command's event: for the dependency check.
    pub event: Arc<Event>,
    /// A kernel launch on a non-profiling queue, not blocking, with every dependency done
    /// when it was scheduled.
    pub may_share: bool,
    /// The job blocks in the vendor: nothing before it in the batch may wait on it.
    pub blocking: bool,
    /// The events it waits for.
    pub deps: Vec<Arc<Event>>,
    /// A read that takes bytes off the device to another rank, on the vendor queue of
    /// the command that wrote them: the commands of that queue it must follow (the
    /// queue's order keeps them: they are not in `deps`). Where jobs are held on that
    /// queue, it goes right behind the last of these and the reads put behind them
    /// before it, ahead of the rest (`Held::hold`): those came later in schedule order
    /// but neither write its bytes nor wait for it, and may wait for another rank,
    /// which waits for this read.
    pub behind: Vec<Arc<Event>>,
    /// Its in-order stream and vendor context: a dependency issued there is waited on
    /// by the vendor directly (None: the context is gone, the job fails when it runs).
    pub stream: u64,
    pub context: Option<ContextKey>,
    /// Every dependency was done when it was scheduled: it completes after what is
    /// before it on its vendor queue and nothing else.
    pub free: bool,
    /// A transfer step's write into a device (its bytes received, or from the host
    /// copy): released after the other held jobs that became ready with it. What needs
    /// its bytes waits for it anyway; a copy that takes them straight from the received
    /// block (`copy_from_landed`) need not wait behind its vendor call.
    pub late: bool,
    /// An application command whose completion nothing awaits yet, or a blocking one:
    /// the thread handing it over may run it (`Issuer::caller_runs`).
    pub caller_may_run: bool,
    /// A kernel launch the application asked no event for, not profiled, not blocking,
    /// whose completion nothing awaits yet: the thread handing it over may launch it
    /// without a vendor event (`Unbacked`).
    pub may_go_unbacked: bool,
    /// The command's type and sequence number, for the trace.
    pub command_type: cl_command_type,
    pub seq: u64,
    /// Its place in the order jobs are handed to the issuers (`Held`).
    pub order: u64,
    /// A write of host bytes already in place (a copy's source landed from another
    /// rank, or read here for other ranks): consecutive ones into one buffer go as one
    /// vendor write (`Held::release`).
    pub landing: Option<Landing>,
}

/// A landed write: `len` bytes at `host` into `mem` at `offset`. The host bytes are
/// valid once the job is ready (its receive or read done) until its event completes
/// (the event keeps their block).
#[derive(Clone)]
pub struct Landing {
    pub mem: Arc<VMem>,
    pub offset: usize,
    pub len: usize,
    pub host: usize,
}

/// How a job runs.
pub enum RunAs {
    /// With a vendor event of its own.
    Own,
    /// Without one: a later command's on its vendor queue stands for it (`sharing`).
    Shared,
    /// Without one, launched by the thread that enqueued it: backed later (`Unbacked`).
    Unbacked,
    /// Without a vendor call: a later job's write carries its bytes (`Merged`), and
    /// that write's vendor event stands for it.
    Absorbed,
    /// A landed write that makes `write` instead of its own: the bytes of the jobs
    /// absorbed before it, then its own, in `bytes` (kept by its event).
    Merged { write: Landing, bytes: Arc<Vec<u8>> },
}

impl RunAs {
    /// Whether the job asks for no vendor event of its own.
    pub fn shares(&self) -> bool {
        matches!(self, RunAs::Shared | RunAs::Absorbed | RunAs::Unbacked)
    }
}

/// The most bytes landed writes merge into one vendor write: above that the copy into
/// one block costs more than the vendor calls it saves.
pub const MERGED_AT_MOST: usize = 64 << 10;

/// What a job runs, as `RunAs` says: a vendor command (`enqueue::issue`), boxed once
/// when it is issued so that it moves as a pointer from then on.
pub trait RunJob: Send {
    fn run(self: Box<Self>, state: &mut IssuerState, how: RunAs);
}

pub type JobRun = Box<dyn RunJob>;

/// What is left of a job once it ran (boxed without an allocation).
pub(super) struct Ran;

impl RunJob for Ran {
    fn run(self: Box<Self>, _: &mut IssuerState, _: RunAs) {}
}

pub struct Job {
    pub info: JobInfo,
    pub(super) run: JobRun,
    /// When it was handed to the issuer (for the trace; 0: not traced).
    pub(super) handed: u64,
}

/// How many joins deep a dependency is looked through (`Event::vendor_waitable`).
pub const JOIN_DEPTH: u32 = 4;

impl JobInfo {
    /// Whether the vendor can take the job now: each dependency is done, or issued on
    /// its stream or in its vendor context. Any other (a receive, a host-side command,
    /// a user event, a command of another vendor or not issued yet) would need a vendor
    /// user event, and NVIDIA takes a queue that waits on one off its fast path: every
    /// later command there is held and submitted by its own thread tens of µs after the
    /// event is set. The issuer holds such a job instead until its dependencies allow.
    pub(super) fn ready(&self) -> bool {
        Self::ready_for(&self.deps, self.context, self.stream)
    }

    /// `ready` for a command with these dependencies, stream and vendor context, before
    /// any job is built (`Issuer::caller_runs`).
    pub fn ready_for(deps: &[Arc<Event>], context: Option<ContextKey>, stream: u64) -> bool {
        (deps.iter()).all(|d| d.vendor_waitable(context, stream, JOIN_DEPTH))
    }

    /// Whether a landed write may go in a merged write: every dependency done, or
    /// before it on its in-order stream (the merged write waits for one job's alone).
    /// A failed one is left to its own run, which fails it.
    pub(super) fn mergeable(&self) -> bool {
        !self.blocking
            && !self.event.profiling
            && (self.deps.iter()).all(|d| {
                d.status() == CL_COMPLETE || d.vendor().is_some_and(|v| v.stream == self.stream)
            })
    }

    /// The dependencies the vendor cannot wait on yet.
    pub(super) fn unready(&self) -> impl Iterator<Item = &Arc<Event>> {
        (self.deps.iter()).filter(|d| !d.vendor_waitable(self.context, self.stream, JOIN_DEPTH))
    }
}
