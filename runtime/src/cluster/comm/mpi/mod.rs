//! The communicator of a real job, over MPI.
//!
//! - MPI is initialised lazily (the first OpenCL call), with `MPI_THREAD_MULTIPLE`, and
//!   finalised from an `atexit` handler. A program that initialised MPI itself keeps it:
//!   MirrorCL works on duplicates of its world and never finalises. Started without an
//!   MPI launcher (and without MPI initialised), this process is a cluster of one and MPI
//!   is never touched.
//! - Two duplicated communicators: `control` for the collectives application threads make
//!   at agreed points of the call sequence (device exchange, build results, kernel facts),
//!   `data` for buffer contents, moved by non-blocking point-to-point operations that one
//!   progress thread posts and completes.

use super::{arrival, describe, divergence_report, Arrival, Communicator, Direction, Header};
use super::{Place, Transfer};
use crossbeam_channel::{Receiver, Sender};
use mpi::ffi;
use mpi::topology::{Communicator as _, SimpleCommunicator};
use mpi::traits::{AsRaw, CommunicatorCollectives};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod asks;
pub mod family;
mod progress;
mod transfers;

use asks::*;
use progress::*;
use transfers::*;

/// The largest message MirrorCL posts: byte counts are `c_int` in MPI, so larger
/// transfers go as several messages with one tag (MPI keeps them in order).
const CHUNK: usize = 1 << 30;

/// The MPI tags MirrorCL uses on the data communicator: the largest power of two not
/// above `MPI_TAG_UB + 1` (at least 32768, the standard's smallest). Each host-thread
/// slot has an equal share, in which its tags wrap (MPI keeps messages of one sender
/// and tag in order).
static TAG_SPAN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(32768);

fn learn_tag_span(world: &SimpleCommunicator) {
    let mut value: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: MPI_TAG_UB's value is a pointer to an int that MPI owns, valid while MPI
    // is initialised; `value` and `flag` are written by the call.
    let ub = unsafe {
        ffi::MPI_Comm_get_attr(
            world.as_raw(),
            ffi::MPI_TAG_UB as c_int,
            &mut value as *mut *mut c_int as *mut std::ffi::c_void,
            &mut flag,
        );
        if flag != 0 && !value.is_null() {
            *value as u64
        } else {
            0
        }
    };
    let span = (ub + 1).max(32768);
    TAG_SPAN.store(1 << (63 - span.leading_zeros()), Ordering::Relaxed);
}

/// The MPI tag of MirrorCL's tag `tag` (a slot in the top bits, a count below).
fn mpi_tag(tag: u64) -> c_int {
    use crate::cluster::host_threads::{SLOTS, SLOT_SHIFT};
    let share = TAG_SPAN.load(Ordering::Relaxed) / SLOTS as u64;
    let slot = (tag >> SLOT_SHIFT) % SLOTS as u64;
    let count = tag & ((1 << SLOT_SHIFT) - 1);
    (slot * share + count % share) as c_int
}

/// On the alert communicator: a rank that found a message diverged asks its sender for
/// its call history, which the sender's progress thread answers.
const TAG_ASK: c_int = 1;
const TAG_ANSWER: c_int = 2;

/// A posted transfer as deadline reports show it: direction, peer, purpose, since when.
type PendingTransfer = (Direction, u32, super::What, Instant);
type Pending = Arc<Mutex<Vec<PendingTransfer>>>;

/// Set while MirrorCL owns MPI (initialised it) and has not started finalising it: the
/// program's own `MPI_Finalize` must then leave it alone.
static OWNS_MPI: AtomicBool = AtomicBool::new(false);

/// The value of `MPI_THREAD_MULTIPLE`.
pub fn thread_multiple() -> c_int {
    // SAFETY: reading an immutable constant of the MPI shim.
    unsafe { ffi::RSMPI_THREAD_MULTIPLE }
}

/// Whether MirrorCL initialised MPI and still needs it (see `OWNS_MPI`).
pub fn owns_mpi() -> bool {
    OWNS_MPI.load(Ordering::Acquire)
}

pub struct Mpi {
    place: Place,
    control: Mutex<MpiHandle<SimpleCommunicator>>,
    world: RawComm,
    jobs: Sender<Transfer>,
    pending: Pending,
    stop: Arc<AtomicBool>,
    progress: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Set when MirrorCL initialised MPI (and so must finalise it).
    universe: Mutex<Option<MpiHandle<mpi::environment::Universe>>>,
}

/// An MPI object used from several threads.
struct MpiHandle<T>(T);
// SAFETY: MPI is initialised with MPI_THREAD_MULTIPLE, so MPI objects may be used from
// any thread; the mutexes around them serialise MirrorCL's own uses.
unsafe impl<T> Send for MpiHandle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for MpiHandle<T> {}

#[derive(Clone, Copy)]
struct RawComm(ffi::MPI_Comm);
// SAFETY: an MPI communicator handle is a plain identifier; with MPI_THREAD_MULTIPLE any
// thread may use it.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// Initialises MPI if the program did not (and a launcher started this process), with
/// `MPI_THREAD_MULTIPLE`. `None`: no MPI for this process, or it failed to start.
fn universe() -> Option<Option<mpi::environment::Universe>> {
    if mpi::is_initialized() {
        let mut provided: c_int = 0;
        // SAFETY: MPI is initialised; out-pointer.
        unsafe { ffi::MPI_Query_thread(&mut provided) };
        if provided != thread_multiple() {
            crate::diag!(
                "MirrorCL: the program initialised MPI without MPI_THREAD_MULTIPLE; \
                 MirrorCL's progress thread needs it (use MPI_Init_thread)"
            );
        }
        return Some(None);
    }
    crate::cluster::replica::launcher_rank()?;
    let (u, level) = mpi::initialize_with_threading(mpi::Threading::Multiple)?;
    OWNS_MPI.store(true, Ordering::Release);
    if level != mpi::Threading::Multiple {
        crate::diag!(
            "MirrorCL: this MPI provides {level:?}, not MPI_THREAD_MULTIPLE; \
             transfers may misbehave"
        );
    }
    Some(Some(u))
}

impl Mpi {
    /// Joins the job: `None` when this process is not part of an MPI job. `host` is this
    /// rank's host identity; `named` says it was set (`MIRRORCL_HOST`) rather than taken
    /// from the hostname.
    pub fn start(host: String, named: bool, wait_timeout: Option<Duration>) -> Option<Mpi> {
        let universe = universe()?;
        let world = SimpleCommunicator::world();
        let control = world.duplicate();
        let data = world.duplicate();
        let alert = world.duplicate();
        learn_tag_span(&world);
        let (local_rank, local_size) = host_group(&world, &host, named);
        if crate::observe::trace::on() {
            // The point every rank's trace notes its clock at, for the merge.
            world.barrier();
            crate::observe::trace::sync_point();
        }
        let data_raw = RawComm(data.as_raw());
        let alert_raw = RawComm(alert.as_raw());
        // SAFETY: a live communicator; a failed transfer (a message longer than planned,
        // a discarded one) must come back as an error code, not end the job unexplained.
        unsafe { ffi::MPI_Comm_set_errhandler(data_raw.0, ffi::RSMPI_ERRORS_RETURN) };
        // These communicators live as long as the process (freed by MPI_Finalize).
        std::mem::forget(data);
        std::mem::forget(alert);
        let (jobs, rx) = crossbeam_channel::unbounded();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let rank = world.rank() as u32;
        let progress = {
            let pending = pending.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("mirrorcl-progress".into())
                .spawn(move || {
                    crate::cluster::replica::mark_runtime_thread();
                    progress_loop(rank, data_raw, alert_raw, rx, pending, stop, wait_timeout)
                })
                .expect("spawn the MPI progress thread")
        };
        Some(Mpi {
            place: Place {
                rank,
                size: world.size() as u32,
                local_rank,
                local_size,
                host,
            },
            control: Mutex::new(MpiHandle(control)),
            world: RawComm(world.as_raw()),
            jobs,
            pending,
            stop,
            progress: Mutex::new(Some(progress)),
            universe: Mutex::new(universe.map(MpiHandle)),
        })
    }
}

/// This rank among the ranks of its host, and how many share it. MPI's shared-memory
/// grouping knows the node; when any rank named its host (`MIRRORCL_HOST`: containers,
/// or several "hosts" on one machine in tests), every rank groups by the names instead,
/// so that all ranks agree on the rule.
fn host_group(world: &SimpleCommunicator, host: &str, named: bool) -> (u32, u32) {
    let shared = world.split_shared(world.rank());
    // Fixed records: whether the name was set, its length, up to 255 bytes of it.
    const RECORD: usize = 257;
    let name = &host.as_bytes()[..host.len().min(RECORD - 2)];
    let mut mine = [0u8; RECORD];
    mine[0] = named as u8;
    mine[1] = name.len() as u8;
    mine[2..2 + name.len()].copy_from_slice(name);
    let mut all = vec![0u8; RECORD * world.size() as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    let records: Vec<&[u8]> = all.chunks(RECORD).collect();
    if !records.iter().any(|r| r[0] == 1) {
        return (shared.rank() as u32, shared.size() as u32);
    }
    let same_host = |r: &[u8]| r[1..2 + r[1] as usize] == mine[1..2 + name.len()];
    let me = world.rank() as usize;
    let local_rank = records[..me].iter().filter(|r| same_host(r)).count();
    let local_size = records.iter().filter(|r| same_host(r)).count();
    (local_rank as u32, local_size as u32)
}

impl Communicator for Mpi {
    fn place(&self) -> &Place {
        &self.place
    }

    fn can_communicate(&self) -> bool {
        !mpi::is_finalized()
    }

    /// A collective on the control communicator.
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let guard = self.control.lock();
        let comm = &guard.0;
        let n = self.place.size as usize;
        // MPI counts and displacements are `int`: a larger collective ends the job on
        // every rank (each sees every length) instead of wrapping.
        let len = i32::try_from(mine.len()).unwrap_or(-1);
        let mut lens = vec![0i32; n];
        comm.all_gather_into(&len, &mut lens[..]);
        let total: i64 = lens.iter().map(|&l| l as i64).sum();
        if lens.iter().any(|&l| l < 0) || total > i32::MAX as i64 {
            crate::diag!(
                "MirrorCL: rank {}: a collective of {:?} bytes per rank exceeds MPI's 2 GiB \
                 count; aborting the job.",
                self.place.rank,
                lens
            );
            drop(guard);
            self.abort();
        }
        let displs: Vec<i32> = lens
            .iter()
            .scan(0i32, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut partition =
                mpi::datatype::PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            comm.all_gather_varcount_into(mine, &mut partition);
        }
        (0..n)
            .map(|r| all[displs[r] as usize..(displs[r] + lens[r]) as usize].to_vec())
            .collect()
    }

    /// Hands the transfer to the progress thread (data communicator).
    fn transfer(&self, t: Transfer) {
        if self.jobs.send(t).is_err() {
            unreachable!("the progress thread lives until exit");
        }
    }

    fn pending_report(&self) -> Vec<String> {
        self.pending
            .lock()
            .iter()
            .map(|(dir, peer, what, since)| describe(*dir, *peer, what, since.elapsed()))
            .collect()
    }

    fn abort(&self) -> ! {
        // Give the other stuck ranks a moment to print their own report.
        std::thread::sleep(Duration::from_secs(2));
        // SAFETY: MPI is initialised; aborting the world is always allowed.
        unsafe { ffi::MPI_Abort(self.world.0, 1) };
        std::process::abort();
    }

    /// Stops the progress thread (after the transfers in flight, within a few seconds)
    /// and finalises MPI if MirrorCL initialised it.
    fn shut_down(&self) {
        let give_up = Instant::now() + Duration::from_secs(5);
        while !(self.pending.lock().is_empty() && self.jobs.is_empty()) && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.progress.lock().take() {
            let _ = h.join();
        }
        OWNS_MPI.store(false, Ordering::Release);
        // Finalising is collective: every rank gets here at its own exit. Taken out of
        // the lock first: MPI_Finalize reaches the interposed one, which comes back here.
        let universe = self.universe.lock().take();
        drop(universe);
    }
}
