//! The node layer: this rank's place in the cluster and everything that crosses to other
//! ranks, over MPI.
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
//! - Tags come from a counter per pair of ranks that both advance at the same points of
//!   the command stream, so both ends of a transfer agree without asking each other.

use crate::config::{Config, MpiMode};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The largest message MirrorCL posts: byte counts are `c_int` in MPI, so larger
/// transfers go as several messages with one tag (MPI keeps them in order).
const CHUNK: usize = 1 << 30;

/// Tags wrap below the smallest `MPI_TAG_UB` the standard allows.
const TAG_SPAN: u64 = 32768;

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

/// One point-to-point transfer for the progress thread. `ptr` must stay valid (and, for a
/// send, unchanged) until `done` runs.
pub struct Transfer {
    pub direction: Direction,
    pub peer: u32,
    pub tag: u64,
    pub ptr: usize,
    pub len: usize,
    pub what: What,
    /// Runs on the progress thread when the transfer completed (`true`) or failed.
    pub done: Box<dyn FnOnce(bool) + Send>,
}

/// A posted transfer as deadline reports show it: direction, peer, purpose, since when.
type PendingTransfer = (Direction, u32, What, Instant);
type Pending = Arc<Mutex<Vec<PendingTransfer>>>;

struct Mpi {
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

pub struct Node {
    pub rank: u32,
    pub size: u32,
    /// This rank among the ranks of its host, and how many share the host.
    pub local_rank: u32,
    pub local_size: u32,
    pub host: String,
    mpi: Option<Mpi>,
    /// Per peer rank, the tag of the next message with it.
    tags: Mutex<Vec<u64>>,
}

static NODE: OnceLock<Node> = OnceLock::new();

/// Sets up this rank's node (once, from the platform's initialisation).
pub fn init(config: &Config) -> &'static Node {
    NODE.get_or_init(|| Node::init(config))
}

/// Sets up this rank's node before the platform (a seed agreed at `srand`).
pub fn init_alone() -> &'static Node {
    NODE.get_or_init(|| Node::init(&Config::load().unwrap_or_default()))
}

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

/// This rank's node.
pub fn node() -> &'static Node {
    match NODE.get() {
        Some(n) => n,
        None => {
            crate::platform::platform();
            NODE.get().expect("the platform sets up the node")
        }
    }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer of the given length.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return "localhost".into();
    }
    crate::vendor::c_string(&buf)
}

impl Node {
    fn single() -> Node {
        Node {
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: 1,
            host: host_name(),
            mpi: None,
            tags: Mutex::new(vec![0]),
        }
    }

    fn init(config: &Config) -> Node {
        if config.runtime.mpi == MpiMode::Off {
            return Node::single();
        }
        let already = mpi::is_initialized();
        if !already && crate::replica::launcher_rank().is_none() {
            return Node::single();
        }
        let universe = if already {
            let mut provided: c_int = 0;
            // SAFETY: MPI is initialised; out-pointer.
            unsafe { ffi::MPI_Query_thread(&mut provided) };
            // SAFETY: reading an immutable constant of the MPI shim.
            if provided != unsafe { ffi::RSMPI_THREAD_MULTIPLE } {
                crate::diag!(
                    "MirrorCL: the program initialised MPI without MPI_THREAD_MULTIPLE; \
                     MirrorCL's progress thread needs it (use MPI_Init_thread)"
                );
            }
            None
        } else {
            match mpi::initialize_with_threading(mpi::Threading::Multiple) {
                Some((u, level)) => {
                    OWNS_MPI.store(true, Ordering::Release);
                    if level != mpi::Threading::Multiple {
                        crate::diag!(
                            "MirrorCL: this MPI provides {level:?}, not MPI_THREAD_MULTIPLE; \
                             transfers may misbehave"
                        );
                    }
                    Some(u)
                }
                None => return Node::single(),
            }
        };
        let world = SimpleCommunicator::world();
        let control = world.duplicate();
        let data = world.duplicate();
        let local = world.split_shared(world.rank());
        let data_raw = RawComm(data.as_raw());
        // The data communicator lives as long as the process (freed by MPI_Finalize).
        std::mem::forget(data);
        let (jobs, rx) = crossbeam_channel::unbounded();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let progress = {
            let pending = pending.clone();
            let stop = stop.clone();
            let timeout = config.wait_timeout();
            let rank = world.rank() as u32;
            std::thread::Builder::new()
                .name("mirrorcl-progress".into())
                .spawn(move || progress_loop(rank, data_raw, rx, pending, stop, timeout))
                .expect("spawn the MPI progress thread")
        };
        let node = Node {
            rank: world.rank() as u32,
            size: world.size() as u32,
            local_rank: local.rank() as u32,
            local_size: local.size() as u32,
            host: host_name(),
            mpi: Some(Mpi {
                control: Mutex::new(MpiHandle(control)),
                world: RawComm(world.as_raw()),
                jobs,
                pending,
                stop,
                progress: Mutex::new(Some(progress)),
                universe: Mutex::new(universe.map(MpiHandle)),
            }),
            tags: Mutex::new(vec![0; world.size() as usize]),
        };
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(shut_down_at_exit) };
        node
    }

    pub fn is_cluster(&self) -> bool {
        self.size > 1
    }

    /// Whether collectives can still run (a hybrid program may have finalised MPI).
    pub fn can_communicate(&self) -> bool {
        self.mpi.is_some() && !mpi::is_finalized()
    }

    /// The tag of the next message between this rank and `peer`, in either direction.
    /// Both ranks of a pair see the same commands in the same order (commands are only
    /// left out on ranks they do not involve), so each takes the same tags for the
    /// messages between them without asking, whatever other ranks exchange.
    pub fn tag_with(&self, peer: u32) -> u64 {
        let mut tags = self.tags.lock();
        let t = &mut tags[peer as usize];
        let tag = *t;
        *t += 1;
        tag
    }

    /// The tags of the next `count` messages between this rank and `peer`: what `count`
    /// calls of [`Node::tag_with`] return, taken at once.
    pub fn tags_with(&self, peer: u32, count: usize) -> std::ops::Range<u64> {
        let mut tags = self.tags.lock();
        let t = &mut tags[peer as usize];
        let first = *t;
        *t += count as u64;
        first..*t
    }

    /// Every rank's `mine`, in rank order (a collective on the control communicator).
    pub fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let Some(m) = &self.mpi else {
            return vec![mine.to_vec()];
        };
        let guard = m.control.lock();
        let comm = &guard.0;
        let n = self.size as usize;
        let len = i32::try_from(mine.len()).expect("control messages stay below 2 GiB");
        let mut lens = vec![0i32; n];
        comm.all_gather_into(&len, &mut lens[..]);
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

    /// Queues a point-to-point transfer on the data communicator.
    pub fn transfer(&self, t: Transfer) {
        use crate::stats::{add, COUNTERS};
        match t.direction {
            Direction::Send => {
                add(&COUNTERS.sends, 1);
                add(&COUNTERS.bytes_sent, t.len as u64);
            }
            Direction::Recv => {
                add(&COUNTERS.receives, 1);
                add(&COUNTERS.bytes_received, t.len as u64);
            }
        }
        match &self.mpi {
            Some(m) => {
                if m.jobs.send(t).is_err() {
                    unreachable!("the progress thread lives until exit");
                }
            }
            None => (t.done)(false),
        }
    }

    /// What this rank is still waiting for from its peers (for deadline reports).
    pub fn pending_report(&self) -> Vec<String> {
        let Some(m) = &self.mpi else {
            return Vec::new();
        };
        m.pending
            .lock()
            .iter()
            .map(|(dir, peer, what, since)| describe(*dir, *peer, what, since.elapsed()))
            .collect()
    }

    /// Ends the whole job after a fatal condition was reported.
    pub fn abort(&self) -> ! {
        if let Some(m) = &self.mpi {
            // Give the other stuck ranks a moment to print their own report.
            std::thread::sleep(Duration::from_secs(2));
            // SAFETY: MPI is initialised; aborting the world is always allowed.
            unsafe { ffi::MPI_Abort(m.world.0, 1) };
        }
        std::process::abort();
    }
}

fn describe(dir: Direction, peer: u32, what: &What, waited: Duration) -> String {
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

struct Active {
    requests: Vec<ffi::MPI_Request>,
    transfer: Option<Transfer>,
    since: Instant,
}

fn post(comm: RawComm, t: &Transfer) -> Result<Vec<ffi::MPI_Request>, c_int> {
    let mut requests = Vec::new();
    let tag = (t.tag % TAG_SPAN) as c_int;
    let mut offset = 0usize;
    // A zero-byte transfer still posts one (empty) message so both ends complete.
    loop {
        let n = (t.len - offset).min(CHUNK);
        // SAFETY: a null request handle, filled in by MPI.
        let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        let ptr = (t.ptr + offset) as *mut std::ffi::c_void;
        // SAFETY: the caller keeps `len` bytes at `ptr` valid until `done`; the count
        // fits a c_int (CHUNK).
        let rc = unsafe {
            match t.direction {
                Direction::Send => ffi::MPI_Isend(
                    ptr,
                    n as c_int,
                    ffi::RSMPI_UINT8_T,
                    t.peer as c_int,
                    tag,
                    comm.0,
                    &mut req,
                ),
                Direction::Recv => ffi::MPI_Irecv(
                    ptr,
                    n as c_int,
                    ffi::RSMPI_UINT8_T,
                    t.peer as c_int,
                    tag,
                    comm.0,
                    &mut req,
                ),
            }
        };
        if rc != 0 {
            return Err(rc);
        }
        requests.push(req);
        offset += n;
        if offset >= t.len {
            return Ok(requests);
        }
    }
}

fn progress_loop(
    rank: u32,
    comm: RawComm,
    jobs: Receiver<Transfer>,
    pending: Pending,
    stop: Arc<AtomicBool>,
    timeout: Option<Duration>,
) {
    let mut active: VecDeque<Active> = VecDeque::new();
    loop {
        // At exit, transfers still pending after the grace period are abandoned.
        if stop.load(Ordering::Acquire) {
            return;
        }
        // Take new work: block when there is nothing to progress.
        let next = if active.is_empty() {
            match jobs.recv_timeout(Duration::from_millis(50)) {
                Ok(t) => Some(t),
                Err(_) => continue,
            }
        } else {
            match jobs.try_recv() {
                Ok(t) => Some(t),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => None,
            }
        };
        if let Some(t) = next {
            match post(comm, &t) {
                Ok(requests) => active.push_back(Active {
                    requests,
                    transfer: Some(t),
                    since: Instant::now(),
                }),
                Err(rc) => {
                    crate::diag!(
                        "MirrorCL: rank {rank}: MPI error {rc} posting a {}",
                        describe(t.direction, t.peer, &t.what, Duration::ZERO)
                    );
                    (t.done)(false);
                }
            }
            publish(&active, &pending);
            continue;
        }
        let mut progressed = false;
        let mut i = 0;
        while i < active.len() {
            let a = &mut active[i];
            let mut flag: c_int = 0;
            // SAFETY: live requests posted above; statuses ignored.
            let rc = unsafe {
                ffi::MPI_Testall(
                    a.requests.len() as c_int,
                    a.requests.as_mut_ptr(),
                    &mut flag,
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            if rc != 0 || flag != 0 {
                let mut done = active.remove(i).expect("index in range");
                if let Some(t) = done.transfer.take() {
                    (t.done)(rc == 0);
                }
                progressed = true;
            } else {
                i += 1;
            }
        }
        if progressed {
            publish(&active, &pending);
            continue;
        }
        if let (Some(limit), Some(oldest)) = (timeout, active.iter().map(|a| a.since).min()) {
            if oldest.elapsed() > limit {
                for a in &active {
                    if let Some(t) = &a.transfer {
                        crate::diag!(
                            "MirrorCL: rank {rank}: {} never completed \
                             (deadline MIRRORCL_WAIT_TIMEOUT)",
                            describe(t.direction, t.peer, &t.what, a.since.elapsed())
                        );
                    }
                }
                node().abort();
            }
        }
        // Transfers in flight: keep driving MPI's progress (a large message moves in
        // fragments, each needing a progress call on both sides; napping between calls
        // cut the bandwidth of 1-64 MiB copies between two GPUs to a fifth). Yield
        // between polls: ranks may share cores.
        std::thread::yield_now();
    }
}

fn publish(active: &VecDeque<Active>, pending: &Mutex<Vec<PendingTransfer>>) {
    let mut p = pending.lock();
    p.clear();
    p.extend(active.iter().filter_map(|a| {
        a.transfer
            .as_ref()
            .map(|t| (t.direction, t.peer, t.what, a.since))
    }));
}

/// Stops the progress thread (after the transfers in flight, within a few seconds) and
/// finalises MPI if MirrorCL initialised it.
extern "C" fn shut_down_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(node) = NODE.get() else { return };
        let Some(m) = &node.mpi else { return };
        let give_up = Instant::now() + Duration::from_secs(5);
        while !(m.pending.lock().is_empty() && m.jobs.is_empty()) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        m.stop.store(true, Ordering::Release);
        if let Some(h) = m.progress.lock().take() {
            let _ = h.join();
        }
        OWNS_MPI.store(false, Ordering::Release);
        if let Some(u) = m.universe.lock().take() {
            // Finalising is collective: every rank gets here at its own exit.
            drop(u);
        }
    });
}
