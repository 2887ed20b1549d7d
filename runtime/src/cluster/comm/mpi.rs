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

struct Active {
    requests: Vec<ffi::MPI_Request>,
    /// The header sent or received, followed by the bytes of a packed transfer or of a
    /// framed receive.
    staged: Vec<u8>,
    /// A receive whose bytes arrive in `staged` after the header (one message with it,
    /// or framed), copied into place once all arrived and the header was checked.
    packed: bool,
    /// A larger receive whose header is awaited: its bytes are received only once the
    /// header shows they are the ones planned (a longer message truncated into a
    /// shorter buffer is not safe in every MPI).
    awaiting_header: bool,
    /// A framed receive whose header (its first request) is not checked yet: checked as
    /// soon as it is in, so that a sender whose plan differs is reported rather than
    /// waited for.
    header_unchecked: bool,
    /// The sender's status, from a header already checked.
    sender_status: i32,
    /// Whether one of the requests failed.
    failed: bool,
    transfer: Option<Transfer>,
    since: Instant,
    /// When it was posted, for the trace (0: not traced).
    traced: u64,
}

/// Messages up to this size travel eagerly: Open MPI's shared-memory transport sends
/// larger ones by rendezvous, which took 15-20 µs between two ranks' progress threads
/// (a stencil's 8 KiB ghost row) where an eager message took about 3. Its 4 KiB eager
/// limit counts its own headers: a ping-pong of 4,040 bytes took 0.4 µs, of 4,050 and
/// more 2.3 µs (Open MPI 4.1, `btl_vader_eager_limit` 4096), so a frame of 4 KiB went
/// by rendezvous too.
const FRAME: usize = (4 << 10) - 64;

/// Transfers up to this size travel as one message, header and bytes (copied through
/// `Active::staged`): a second message per small transfer cost the IV.7.2
/// microbenchmark a fifth of its iteration on two GPUs.
const PACKED_MAX: usize = FRAME - 32;

/// A packed receive has room for a message this long: one longer than planned (the
/// replicas diverged) arrives whole, for its header to say so, rather than truncated.
const PACKED_ROOM: usize = 16 << 10;

/// Transfers up to this size move their bytes in `FRAME`s, eagerly; larger ones in
/// chunks of up to `CHUNK` (a 64 KiB copy between two H100 ranks took 72 µs in 4 KiB
/// frames, 49 in one message).
const FRAMED_MAX: usize = 16 << 10;

/// The size of the messages carrying a transfer's bytes after its header.
fn chunk_for(len: usize) -> usize {
    if len <= FRAMED_MAX {
        FRAME
    } else {
        CHUNK
    }
}

/// Blocks that receives of up to `FRAMED_MAX` bytes land in, kept by the progress thread
/// for the next receives: allocating and zeroing a fresh 16 KiB block took 10-15 µs
/// (page faults), one receive posted in a progress turn held the send of the bytes a
/// peer waited for that long, and IV.7.2 posts a receive per cross-rank copy. A
/// recycled block holds the bytes of an earlier message: only what MPI writes into it
/// is read, as the header says.
#[derive(Default)]
struct ReceiveBlocks {
    /// Free blocks by length (a packed receive's, or a framed one's).
    free: Vec<(usize, Vec<Vec<u8>>)>,
}

/// How many free blocks of one length are kept (16 KiB each for packed receives).
const BLOCKS_KEPT: usize = 256;

impl ReceiveBlocks {
    /// A block of `len` bytes, recycled when one is free.
    fn take(&mut self, len: usize) -> Vec<u8> {
        (self.free.iter_mut())
            .find(|(l, _)| *l == len)
            .and_then(|(_, blocks)| blocks.pop())
            .unwrap_or_else(|| vec![0u8; len])
    }

    /// Keeps a finished receive's block for a later receive of its length.
    fn give(&mut self, block: Vec<u8>) {
        let len = block.len();
        // Not a header alone, nor a discard's chunk (up to `CHUNK`).
        if len <= 32 || len > 32 + PACKED_ROOM.max(FRAMED_MAX.div_ceil(FRAME) * FRAME) {
            return;
        }
        match self.free.iter_mut().find(|(l, _)| *l == len) {
            Some((_, blocks)) if blocks.len() < BLOCKS_KEPT => blocks.push(block),
            Some(_) => {}
            None => self.free.push((len, vec![block])),
        }
    }
}

/// Posts a transfer. Up to `PACKED_MAX` bytes: one message, the header then the bytes.
/// Larger: the header, then the bytes in chunks (`chunk_for`), all with its tag
/// (MPI keeps messages of one sender and tag in order); a receive of up to
/// `FRAMED_MAX` posts its frames with the header, a larger one takes the header first
/// and posts the chunks once it is checked (`post_bytes`). Both ends decide from
/// the planned length and exchange as many chunks as it needs; a failed send's chunks
/// are empty (a failed packed send is its header alone).
fn post(comm: RawComm, t: &Transfer, blocks: &mut ReceiveBlocks) -> Result<Active, c_int> {
    let packed = t.len <= PACKED_MAX;
    // A framed receive posts its frames with its header, into `staged`: eager frames
    // waiting for receives posted a turn after the header cost an 8 KiB row one more
    // progress turn (about 6 µs on an H100 host) per message. Each frame has room for a
    // whole frame, so that none is truncated whatever the sender planned.
    let frames = (t.direction == Direction::Recv && !packed && t.len <= FRAMED_MAX)
        .then(|| t.len.div_ceil(FRAME));
    let mut staged = match (t.direction, frames) {
        (Direction::Send, _) => Header::of(t).as_bytes().to_vec(),
        (_, Some(n)) => blocks.take(32 + n * FRAME),
        (Direction::Recv | Direction::Discard, None) if packed => blocks.take(32 + PACKED_ROOM),
        (Direction::Recv | Direction::Discard, None) => vec![0u8; 32],
    };
    if packed && t.direction == Direction::Send && t.status >= 0 && t.len > 0 {
        // SAFETY: the caller keeps `len` readable bytes at `ptr` (the `Transfer`
        // contract).
        staged.extend_from_slice(unsafe { std::slice::from_raw_parts(t.ptr as *const u8, t.len) });
    }
    let tag = mpi_tag(t.tag);
    // The vector's heap buffer stays put when `Active` moves.
    let staged_ptr = staged.as_mut_ptr();
    let mut requests = Vec::with_capacity(2);
    let mut message = |ptr: *mut u8, n: usize| -> Result<(), c_int> {
        requests.push(post_one(
            comm,
            t.direction == Direction::Send,
            ptr,
            n,
            t.peer,
            tag,
        )?);
        Ok(())
    };
    message(staged_ptr, if frames.is_some() { 32 } else { staged.len() })?;
    for k in 0..frames.unwrap_or(0) {
        // SAFETY: `staged` holds 32 bytes then `frames` frames.
        message(unsafe { staged_ptr.add(32 + k * FRAME) }, FRAME)?;
    }
    if !packed && t.direction == Direction::Send {
        let mut offset = 0usize;
        loop {
            let n = (t.len - offset).min(chunk_for(t.len));
            if t.status >= 0 {
                message((t.ptr + offset) as *mut u8, n)?;
            } else {
                message(staged_ptr, 0)?;
            }
            offset += n;
            if offset >= t.len {
                break;
            }
        }
    }
    Ok(Active {
        requests,
        staged,
        packed: packed || frames.is_some(),
        awaiting_header: !packed && frames.is_none() && t.direction != Direction::Send,
        header_unchecked: frames.is_some(),
        sender_status: 0,
        failed: false,
        transfer: None,
        since: Instant::now(),
        traced: 0,
    })
}

/// Posts one message of `n` bytes at `ptr` to or from `peer`. The caller keeps the
/// bytes valid until the request completes; `n` is at most `CHUNK`.
fn post_one(
    comm: RawComm,
    send: bool,
    ptr: *mut u8,
    n: usize,
    peer: u32,
    tag: c_int,
) -> Result<ffi::MPI_Request, c_int> {
    // SAFETY: a null request handle, filled in by MPI.
    let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
    let ptr = ptr as *mut std::ffi::c_void;
    // SAFETY: the caller keeps `n` bytes at `ptr` valid until the request completes;
    // the count fits a c_int (CHUNK).
    let rc = unsafe {
        if send {
            ffi::MPI_Isend(
                ptr,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                tag,
                comm.0,
                &mut req,
            )
        } else {
            ffi::MPI_Irecv(
                ptr,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                tag,
                comm.0,
                &mut req,
            )
        }
    };
    if rc != 0 {
        return Err(rc);
    }
    Ok(req)
}

/// The chunks of a larger receive whose header `h` was checked: into the receive's
/// memory, or, for the empty chunks of a failed send or the bytes of a discarded
/// receive, into `a.staged` (one block the size of a chunk, shared by all: what a
/// discard receives is dropped).
fn post_bytes(comm: RawComm, t: &Transfer, h: &Header, a: &mut Active) -> Result<(), c_int> {
    let tag = mpi_tag(t.tag);
    let into_place = t.direction == Direction::Recv && h.status >= 0;
    if !into_place && h.status >= 0 {
        a.staged = vec![0u8; t.len.min(chunk_for(t.len))];
    }
    let mut offset = 0usize;
    loop {
        let n = (t.len - offset).min(chunk_for(t.len));
        let (ptr, count) = match (into_place, h.status >= 0) {
            (true, _) => ((t.ptr + offset) as *mut u8, n),
            (false, true) => (a.staged.as_mut_ptr(), n),
            (false, false) => (a.staged.as_mut_ptr(), 0),
        };
        let req = post_one(comm, false, ptr, count, t.peer, tag)?;
        a.requests.push(req);
        offset += n;
        if offset >= t.len {
            return Ok(());
        }
    }
}

/// Runs a transfer's completion on the progress thread. A panic there (a MirrorCL bug)
/// would end the thread every transfer depends on and leave the job hanging: it ends the
/// job instead, naming the transfer.
fn complete(rank: u32, t: Transfer, status: i32) {
    let what = describe(t.direction, t.peer, &t.what, Duration::ZERO);
    let done = t.done;
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(status))).is_err() {
        crate::diag!(
            "MirrorCL: rank {rank}: internal error completing the {what}; aborting the job."
        );
        crate::cluster::node::node().abort();
    }
}

/// A finished send or receive, from its posting to now, in the trace.
fn trace_message(rank: u32, t: &Transfer, posted: u64, status: i32) {
    if posted == 0 {
        return;
    }
    let send = t.direction == Direction::Send;
    let (from, to) = if send { (rank, t.peer) } else { (t.peer, rank) };
    crate::observe::trace::message(
        send,
        posted,
        crate::observe::trace::message_id(from, to, t.tag),
        crate::trace_args![
            ("peer", t.peer),
            ("tag", t.tag),
            ("bytes", t.len),
            ("status", status)
        ],
    );
}

/// The progress thread's state.
struct Progress {
    rank: u32,
    comm: RawComm,
    active: VecDeque<Active>,
    pending: Pending,
    asks: Asks,
    /// Reused by `test_requests`: the requests in flight, and MPI's indices of those done.
    scratch: Vec<ffi::MPI_Request>,
    indices: Vec<c_int>,
    /// For each request in `scratch`: its transfer in `active` and its place there.
    owners: Vec<(usize, usize)>,
    /// How many sends are in flight: they lead `active`, newest first, and receives
    /// follow, oldest first (`start`).
    sends: usize,
    /// Where the rotating part of the next turn's test starts among the later
    /// receives (`test_requests`).
    cursor: usize,
    /// When the deadline is looked at next (it costs a pass over the transfers).
    next_deadline_check: Instant,
    /// When the transfers in flight were last published for reports, and whether there
    /// were none then (`publish`).
    published: (Instant, bool),
    blocks: ReceiveBlocks,
    /// Receives not posted yet, in plan order, with when they came (`post_waiting`).
    waiting: VecDeque<(Transfer, Instant)>,
}

/// How many receives are posted to MPI at once, and how many more one progress turn
/// posts. A program far ahead plans hundreds of receives: IV.7.2's enqueuing thread
/// handed over some 300 at two ranks, each posting took 10-15 µs (a fresh block), and a
/// send queued behind them waited 53 µs on two H200. Later receives wait in plan order:
/// a message that comes first waits in MPI, and no planned receive waits for a later one
/// (a transfer follows only what was planned before it).
const RECEIVES_POSTED: usize = 64;
const RECEIVES_POSTED_PER_TURN: usize = 4;

/// How many of the oldest receives every progress turn tests, and how many of the later
/// ones it tests in turn. A program enqueuing far ahead posts a receive per transfer
/// planned: IV.7.2 at 4 ranks and 20,000 iterations on four H100 had tens of thousands
/// posted, and the turns that tested every one of them made an iteration take 2.4 ms
/// (the progress thread in a pass over them 60% of its time); testing these windows,
/// 0.17 ms. Messages mostly arrive in the order their receives were planned; a later
/// one is found within a few turns.
const TESTED_OLDEST: usize = 32;
const TESTED_IN_TURN: usize = 32;

/// How often the list of transfers in flight is published for reports at most (each
/// publication copies it); at once when it empties or stops being empty (`shut_down`
/// waits for it to be empty).
const PUBLISH_EVERY: Duration = Duration::from_millis(10);

/// A progress turn longer than this shows in the trace (`slow progress turn`).
const SLOW_TURN_NS: u64 = 5_000;

/// The transfers a progress turn tests, of `n` in flight whose first `sends` are sends:
/// every send, the `TESTED_OLDEST` oldest receives, and `TESTED_IN_TURN` of the later
/// ones from `cursor` on (wrapping around); with the cursor of the next turn.
fn turn_window(n: usize, sends: usize, cursor: usize) -> (impl Iterator<Item = usize>, usize) {
    let first = (sends + TESTED_OLDEST).min(n);
    let rest = n - first;
    let (from, k, next) = match rest {
        0 => (first, 0, 0),
        _ => {
            let at = cursor % rest;
            (first + at, TESTED_IN_TURN.min(rest), at + TESTED_IN_TURN)
        }
    };
    let wrapped = (from + k).saturating_sub(n);
    let tested = (0..first)
        .chain(from..(from + k).min(n))
        .chain(first..first + wrapped);
    (tested, next)
}

fn progress_loop(
    rank: u32,
    comm: RawComm,
    alert: RawComm,
    jobs: Receiver<Transfer>,
    pending: Pending,
    stop: Arc<AtomicBool>,
    timeout: Option<Duration>,
) {
    let mut p = Progress {
        rank,
        comm,
        active: VecDeque::new(),
        pending,
        asks: Asks::new(alert),
        scratch: Vec::new(),
        indices: Vec::new(),
        owners: Vec::new(),
        sends: 0,
        cursor: 0,
        next_deadline_check: Instant::now(),
        published: (Instant::now(), true),
        blocks: ReceiveBlocks::default(),
        waiting: VecDeque::new(),
    };
    let mut next_serve = Instant::now();
    let mut turn_started = 0u64;
    loop {
        if turn_started != 0 {
            let t = crate::observe::trace::begin();
            if t.saturating_sub(turn_started) > SLOW_TURN_NS {
                let active = p.active.len() as u64;
                crate::observe::trace::span(
                    "transfer",
                    "slow progress turn",
                    turn_started,
                    crate::trace_args![("active", active)],
                );
            }
        }
        turn_started = crate::observe::trace::begin();
        // Another rank asks for this rank's call history only when a wait of its own
        // ran out: looked at every millisecond, not every turn (each look is an MPI
        // progress call, and one of those took 5-8 µs with messages moving).
        let now = Instant::now();
        if now >= next_serve {
            p.asks.serve();
            next_serve = now + Duration::from_millis(1);
        }
        // At exit, transfers still pending after the grace period are abandoned.
        if stop.load(Ordering::Acquire) {
            p.asks.close();
            return;
        }
        // Take every new transfer before the next progress call, so that a send starts
        // moving at once: block when there is nothing to progress.
        let mut started = false;
        if p.active.is_empty() && p.waiting.is_empty() {
            match jobs.recv_timeout(Duration::from_millis(50)) {
                Ok(t) => {
                    p.take(t);
                    started = true;
                }
                Err(_) => continue,
            }
        }
        while let Ok(t) = jobs.try_recv() {
            p.take(t);
            started = true;
        }
        // Sends first: what another rank waits for.
        started |= p.post_waiting();
        if p.complete_finished() || started {
            p.publish();
            continue;
        }
        // What completed since the last publication shows within `PUBLISH_EVERY`.
        p.publish();
        p.check_deadline(timeout);
        // Transfers in flight: keep driving MPI's progress (a large message moves in
        // fragments, each needing a progress call on both sides; napping between calls
        // cut the bandwidth of 1-64 MiB copies between two GPUs to a fifth). Yield
        // between polls: ranks may share cores.
        std::thread::yield_now();
    }
}

impl Progress {
    /// A new transfer: a send starts at once, a receive waits its turn to be posted.
    fn take(&mut self, t: Transfer) {
        if t.direction == Direction::Send {
            self.start(t);
        } else {
            self.waiting.push_back((t, Instant::now()));
        }
    }

    /// Posts waiting receives while fewer than `RECEIVES_POSTED` are; whether it did.
    fn post_waiting(&mut self) -> bool {
        let mut posted = 0;
        while posted < RECEIVES_POSTED_PER_TURN && self.active.len() - self.sends < RECEIVES_POSTED
        {
            let Some((t, _)) = self.waiting.pop_front() else {
                break;
            };
            self.start(t);
            posted += 1;
        }
        posted > 0
    }

    fn start(&mut self, t: Transfer) {
        let traced = crate::observe::trace::begin();
        match post(self.comm, &t, &mut self.blocks) {
            Ok(mut active) => {
                active.traced = traced;
                let send = t.direction == Direction::Send;
                active.transfer = Some(t);
                if send {
                    self.active.push_front(active);
                    self.sends += 1;
                } else {
                    self.active.push_back(active);
                }
            }
            Err(rc) => {
                crate::diag!(
                    "MirrorCL: rank {}: MPI error {rc} posting a {}",
                    self.rank,
                    describe(t.direction, t.peer, &t.what, Duration::ZERO)
                );
                complete(self.rank, t, super::CL_OUT_OF_RESOURCES);
            }
        }
    }

    /// Which transfers this turn tests (`turn_window`).
    fn tested(&mut self) -> impl Iterator<Item = usize> {
        let (tested, cursor) = turn_window(self.active.len(), self.sends, self.cursor);
        self.cursor = cursor;
        tested
    }

    /// Tests the requests of the transfers `tested` picks with one `MPI_Testsome`: one
    /// progress call per turn, where an `MPI_Test` per request made each turn cost the
    /// number of transfers planned ahead. Should it report an error, each request is
    /// tested on its own (one that fails, a truncated message, must not end the
    /// transfer while its others still use the buffers).
    fn test_requests(&mut self) -> Vec<usize> {
        // SAFETY: a null request handle to compare with.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        let mut reqs = std::mem::take(&mut self.scratch);
        reqs.clear();
        self.owners.clear();
        for i in self.tested() {
            let a = &self.active[i];
            for (j, r) in a.requests.iter().enumerate().filter(|(_, r)| **r != null) {
                reqs.push(*r);
                self.owners.push((i, j));
            }
        }
        let mut touched = Vec::new();
        if reqs.is_empty() {
            self.scratch = reqs;
            return touched;
        }
        let mut indices = std::mem::take(&mut self.indices);
        indices.resize(reqs.len(), 0);
        let mut count: c_int = 0;
        // SAFETY: live requests posted above (MPI nulls those complete); `indices` has
        // room for all of them.
        let rc = unsafe {
            ffi::MPI_Testsome(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                &mut count,
                indices.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        if rc == 0 {
            for &k in &indices[..count.max(0) as usize] {
                let (i, j) = self.owners[k as usize];
                self.active[i].requests[j] = null;
                touched.push(i);
            }
        } else {
            for (i, a) in self.active.iter_mut().enumerate() {
                for req in a.requests.iter_mut().filter(|r| **r != null) {
                    let mut flag: c_int = 0;
                    // SAFETY: a live request posted above (MPI nulls it once complete).
                    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                    if rc != 0 {
                        a.failed = true;
                        *req = null;
                    }
                }
                touched.push(i);
            }
        }
        self.scratch = reqs;
        self.indices = indices;
        // Highest first: removing one moves only those after it, which are done.
        touched.sort_unstable_by(|x, y| y.cmp(x));
        touched.dedup();
        touched
    }

    /// Runs the `done` of every transfer MPI finished; whether there was one.
    fn complete_finished(&mut self) -> bool {
        let touched = self.test_requests();
        let mut progressed = false;
        // SAFETY: a null request handle to compare with.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        for i in touched {
            let a = &mut self.active[i];
            if a.header_unchecked && a.requests[0] == null {
                a.header_unchecked = false;
                let head: &[u8; 32] = a.staged[..32].try_into().expect("a header");
                let t = a.transfer.as_ref().expect("a posted transfer");
                if let Arrival::Diverged(text) = arrival(t, &Header::from_bytes(head), !a.failed) {
                    let peer = t.peer;
                    self.diverged(peer, &text);
                }
            }
            let a = &mut self.active[i];
            if a.requests.iter().all(|r| *r == null) && a.awaiting_header {
                // A larger receive's header: checked before its bytes are received.
                let a = &mut self.active[i];
                a.requests.clear();
                a.awaiting_header = false;
                let head: &[u8; 32] = a.staged[..32].try_into().expect("a header");
                let h = Header::from_bytes(head);
                let t = a.transfer.take().expect("a posted transfer");
                match arrival(&t, &h, !a.failed) {
                    Arrival::Diverged(text) => self.diverged(t.peer, &text),
                    Arrival::Status(s) => a.sender_status = s,
                }
                a.failed = false;
                if post_bytes(self.comm, &t, &h, a).is_err() {
                    a.failed = true;
                }
                a.transfer = Some(t);
                progressed = true;
                // Tested from the next turn on; nothing posted (a failure) ends it now.
                if a.requests.iter().any(|r| *r != null) {
                    continue;
                }
            }
            let a = &mut self.active[i];
            if a.requests.iter().all(|r| *r == null) {
                // In place: sends lead, and receives keep their order (`tested`).
                let mut done = self.active.remove(i).expect("index in range");
                if i < self.sends {
                    self.sends -= 1;
                }
                let ok = !done.failed;
                // A packed or framed receive's block came from `blocks` (`post`).
                let recycled = done.packed
                    && (done.transfer.as_ref()).is_some_and(|t| t.direction != Direction::Send);
                if let Some(t) = done.transfer.take() {
                    let status = match t.direction {
                        Direction::Send if ok => 0,
                        Direction::Send => super::CL_OUT_OF_RESOURCES,
                        Direction::Discard => super::CL_OUT_OF_RESOURCES,
                        Direction::Recv if !done.packed => match done.sender_status {
                            s if s < 0 => s,
                            _ if ok => 0,
                            _ => super::CL_OUT_OF_RESOURCES,
                        },
                        Direction::Recv => {
                            let head: &[u8; 32] =
                                done.staged[..32].try_into().expect("a header first");
                            match arrival(&t, &Header::from_bytes(head), ok) {
                                Arrival::Status(0) if done.packed && t.len > 0 => {
                                    // SAFETY: the receive's `len` bytes at `ptr` stay
                                    // valid until `done`; `staged` holds them after the
                                    // header.
                                    unsafe {
                                        std::ptr::copy_nonoverlapping(
                                            done.staged[32..32 + t.len].as_ptr(),
                                            t.ptr as *mut u8,
                                            t.len,
                                        )
                                    };
                                    0
                                }
                                Arrival::Status(s) => s,
                                Arrival::Diverged(text) => self.diverged(t.peer, &text),
                            }
                        }
                    };
                    trace_message(self.rank, &t, done.traced, status);
                    complete(self.rank, t, status);
                }
                if recycled {
                    self.blocks.give(std::mem::take(&mut done.staged));
                }
                progressed = true;
            }
        }
        progressed
    }

    /// Reports every transfer in flight and ends the job once the oldest is overdue.
    fn check_deadline(&mut self, timeout: Option<Duration>) {
        let now = Instant::now();
        if now < self.next_deadline_check {
            return;
        }
        self.next_deadline_check = now + Duration::from_millis(10);
        let (Some(limit), Some(oldest)) = (timeout, self.active.iter().map(|a| a.since).min())
        else {
            return;
        };
        if oldest.elapsed() <= limit {
            return;
        }
        for a in &self.active {
            if let Some(t) = &a.transfer {
                crate::diag!(
                    "MirrorCL: rank {}: {} never completed \
                     (deadline MIRRORCL_WAIT_TIMEOUT)",
                    self.rank,
                    describe(t.direction, t.peer, &t.what, a.since.elapsed())
                );
            }
        }
        crate::cluster::node::node().abort();
    }

    /// A message showed the replicas diverged: asks its sender for its call history
    /// (a few seconds at most), reports the first call that differs, ends the job.
    fn diverged(&mut self, peer: u32, text: &str) -> ! {
        let theirs = self.asks.history_of(peer);
        crate::diag!("{}", divergence_report(self.rank, peer, text, theirs));
        crate::cluster::node::node().abort()
    }

    fn publish(&mut self) {
        let (at, was_empty) = self.published;
        let now = Instant::now();
        let empty = self.active.is_empty() && self.waiting.is_empty();
        if empty == was_empty && now - at < PUBLISH_EVERY {
            return;
        }
        self.published = (now, empty);
        let mut p = self.pending.lock();
        p.clear();
        p.extend(self.active.iter().filter_map(|a| {
            a.transfer
                .as_ref()
                .map(|t| (t.direction, t.peer, t.what, a.since))
        }));
        p.extend((self.waiting.iter()).map(|(t, since)| (t.direction, t.peer, t.what, *since)));
    }
}

/// The progress thread's side of the alert communicator: answers other ranks' requests
/// for this rank's call history, and asks for another's.
struct Asks {
    alert: RawComm,
    request: ffi::MPI_Request,
    word: Box<[u8; 8]>,
}

impl Asks {
    fn new(alert: RawComm) -> Asks {
        let mut asks = Asks {
            alert,
            // SAFETY: a null request handle, replaced by `listen`.
            request: unsafe { ffi::RSMPI_REQUEST_NULL },
            word: Box::new([0; 8]),
        };
        asks.listen();
        asks
    }

    fn listen(&mut self) {
        // SAFETY: `word` lives as long as the request (in `self`, boxed).
        unsafe {
            ffi::MPI_Irecv(
                self.word.as_mut_ptr() as *mut std::ffi::c_void,
                8,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                TAG_ASK,
                self.alert.0,
                &mut self.request,
            )
        };
    }

    /// Withdraws the standing receive (before MPI is finalised).
    fn close(&mut self) {
        // SAFETY: the live request posted by `listen`: cancelled, then completed.
        unsafe {
            ffi::MPI_Cancel(&mut self.request);
            ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE);
        }
    }

    /// Answers a request that arrived, if any.
    fn serve(&mut self) {
        let mut flag: c_int = 0;
        // SAFETY: an all-zero MPI_Status is a valid value to be overwritten.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the live request posted by `listen`.
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, &mut status) };
        if flag == 0 {
            return;
        }
        let answer = crate::cluster::wire::encode(&crate::cluster::wire::RecentHistory(
            crate::cluster::history::recent(),
        ));
        // SAFETY: `answer` outlives the blocking send; the asker waits for it.
        unsafe {
            ffi::MPI_Send(
                answer.as_ptr() as *const std::ffi::c_void,
                answer.len() as c_int,
                ffi::RSMPI_UINT8_T,
                status.MPI_SOURCE,
                TAG_ANSWER,
                self.alert.0,
            )
        };
        self.listen();
    }

    /// `peer`'s kept call history, if it answers within a few seconds.
    fn history_of(&mut self, peer: u32) -> Option<Vec<crate::cluster::wire::HistoryEntry>> {
        let ask = [0u8; 8];
        // SAFETY: a small message from a live buffer.
        unsafe {
            ffi::MPI_Send(
                ask.as_ptr() as *const std::ffi::c_void,
                8,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                TAG_ASK,
                self.alert.0,
            )
        };
        let give_up = Instant::now() + Duration::from_secs(3);
        // SAFETY: as in `serve`.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        loop {
            // The peer may be asking this rank at the same time.
            self.serve();
            let mut flag: c_int = 0;
            // SAFETY: out-pointers to locals.
            unsafe {
                ffi::MPI_Iprobe(
                    peer as c_int,
                    TAG_ANSWER,
                    self.alert.0,
                    &mut flag,
                    &mut status,
                )
            };
            if flag != 0 {
                break;
            }
            if Instant::now() > give_up {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut count: c_int = 0;
        // SAFETY: the status of the probed message.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut bytes = vec![0u8; count.max(0) as usize];
        // SAFETY: a buffer of the probed message's size.
        unsafe {
            ffi::MPI_Recv(
                bytes.as_mut_ptr() as *mut std::ffi::c_void,
                count,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                TAG_ANSWER,
                self.alert.0,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        crate::cluster::wire::decode::<crate::cluster::wire::RecentHistory>(&bytes, peer)
            .ok()
            .map(|h| h.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every turn tests every send and the oldest receives; every later receive is
    /// tested within as many turns as it takes the window to come round; none twice in
    /// a turn.
    #[test]
    fn a_turn_tests_the_sends_the_oldest_and_the_rest_in_turn() {
        for (n, sends) in [
            (0, 0),
            (5, 2),
            (40, 3),
            (41, 0),
            (100, 7),
            (1000, 1),
            (70, 38),
        ] {
            let mut cursor = 0;
            let first = (sends + TESTED_OLDEST).min(n);
            let rest = n - first;
            let turns = rest.div_ceil(TESTED_IN_TURN).max(1);
            let mut seen = vec![false; n];
            for _ in 0..turns {
                let (tested, next) = turn_window(n, sends, cursor);
                let tested: Vec<usize> = tested.collect();
                cursor = next;
                let mut unique = tested.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(unique.len(), tested.len(), "n {n}: one tested twice");
                assert!(tested.iter().all(|&i| i < n));
                assert!(
                    (0..first).all(|i| tested.contains(&i)),
                    "n {n}: oldest left out"
                );
                assert!(tested.len() <= first + TESTED_IN_TURN);
                for i in tested {
                    seen[i] = true;
                }
            }
            assert!(
                seen.iter().all(|&s| s),
                "n {n}, sends {sends}: one never tested"
            );
        }
    }

    /// A finished receive's block serves the next receive of its length, with its bytes
    /// as they were; header-only blocks and discards' chunks are not kept, nor more than
    /// `BLOCKS_KEPT` of one length.
    #[test]
    fn receive_blocks_are_recycled_by_length_and_bounded() {
        let mut blocks = ReceiveBlocks::default();
        let packed = 32 + PACKED_ROOM;
        let mut b = blocks.take(packed);
        assert_eq!(b.len(), packed);
        b[40] = 7;
        let at = b.as_ptr();
        blocks.give(b);
        let framed = blocks.take(32 + 2 * FRAME);
        assert_eq!(framed.len(), 32 + 2 * FRAME);
        assert_ne!(framed.as_ptr(), at, "another length gets its own block");
        let again = blocks.take(packed);
        assert_eq!((again.as_ptr(), again[40]), (at, 7));
        blocks.give(vec![0u8; 32]);
        blocks.give(vec![0u8; 1 << 20]);
        assert!(
            blocks
                .free
                .iter()
                .all(|(l, v)| *l == packed && v.is_empty()),
            "kept: {:?}",
            (blocks.free.iter())
                .map(|(l, v)| (*l, v.len()))
                .collect::<Vec<_>>()
        );
        for _ in 0..BLOCKS_KEPT + 10 {
            blocks.give(vec![0u8; packed]);
        }
        assert_eq!(blocks.free[0].1.len(), BLOCKS_KEPT);
    }
}
