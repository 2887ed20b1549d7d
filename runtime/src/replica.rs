//! Making N replicas of one host program look like one program to the outside world
//! (thesis IV.2.3): one copy of the output, one set of output files, one random seed.
//!
//! - **Output** (`MIRRORCL_OUTPUT`): `root` (default) lets only rank 0's standard output
//!   and error through; `all` lets every rank's through, each line prefixed with
//!   `[rank r] `; `raw` leaves every rank's output alone (for `mpirun --output-filename`
//!   and `--tag-output`). Set up when the library is loaded, from the launcher's rank
//!   variables alone (MPI is not initialised then), so that nothing printed before the
//!   first OpenCL call escapes. MirrorCL's own reports still reach every rank's standard
//!   error (`diag`).
//! - **Files** (`MIRRORCL_FILES`): `root` (default): a file opened for writing with
//!   `fopen` is written by rank 0 only; the other ranks write to `/dev/null`. Paths in
//!   the caches (`~/.cache`, `$XDG_CACHE_HOME`, `$POCL_CACHE_DIR`, `$CUDA_CACHE_PATH`,
//!   `~/.nv`) and under `/dev`, `/proc`, `/sys`, `/run` are written by every rank:
//!   vendors write files there that they read back. `all`: every rank writes everywhere.
//! - **Seeds**: `srand`, `srandom` and `srand48` take rank 0's seed on every rank, so a
//!   program seeded from the clock or its pid still has identical replicas.

use std::io::Write;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::OnceLock;

/// Where MirrorCL's own reports go: this rank's original standard error.
static DIAG_FD: AtomicI32 = AtomicI32::new(2);
/// This rank as the launcher said at load time (`u32::MAX`: not launched by MPI).
static LAUNCH_RANK: AtomicU32 = AtomicU32::new(u32::MAX);

/// The rank an MPI launcher gave this process, from its environment.
pub fn launcher_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Root,
    All,
    Raw,
}

fn output_mode() -> Output {
    match std::env::var("MIRRORCL_OUTPUT").as_deref() {
        Ok("all") => Output::All,
        Ok("raw") => Output::Raw,
        _ => Output::Root,
    }
}

/// Writes one of MirrorCL's own reports to this rank's original standard error, whatever
/// became of the program's.
pub fn diag(text: &str) {
    let fd = DIAG_FD.load(Ordering::Relaxed);
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: writing a live buffer to a file descriptor this process owns.
        let n = unsafe { libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// `eprintln!` for MirrorCL's reports (see [`diag`]).
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::replica::diag(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Readers of the `all` mode's pipes, joined at exit.
static PREFIXERS: OnceLock<parking_lot::Mutex<Vec<std::thread::JoinHandle<()>>>> = OnceLock::new();

/// Sets up this rank's output as `MIRRORCL_OUTPUT` says. Runs when the library is loaded:
/// reads only the environment and moves file descriptors.
pub fn at_load() {
    let Some(rank) = launcher_rank() else {
        return;
    };
    LAUNCH_RANK.store(rank, Ordering::Relaxed);
    // A panic inside MirrorCL (caught at the C boundary) must be seen on every rank,
    // whatever became of the program's standard error.
    std::panic::set_hook(Box::new(move |info| {
        diag(&format!("MirrorCL: rank {rank}: internal error: {info}\n"));
    }));
    match output_mode() {
        Output::Raw => {}
        Output::Root if rank == 0 => {}
        Output::Root => {
            // SAFETY: plain descriptor operations on this process's own descriptors.
            unsafe {
                let saved = libc::dup(2);
                if saved >= 0 {
                    libc::fcntl(saved, libc::F_SETFD, libc::FD_CLOEXEC);
                    DIAG_FD.store(saved, Ordering::Relaxed);
                }
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                if null >= 0 {
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    libc::close(null);
                }
            }
        }
        Output::All => {
            let mut readers = Vec::new();
            for fd in [1, 2] {
                if let Some(h) = prefix_lines(fd, rank) {
                    readers.push(h);
                }
            }
            let _ = PREFIXERS.set(parking_lot::Mutex::new(readers));
            // SAFETY: registering a plain extern "C" function.
            unsafe { libc::atexit(drain_prefixers) };
        }
    }
}

/// Replaces `fd` by a pipe whose lines a thread copies to the original, prefixed.
fn prefix_lines(fd: RawFd, rank: u32) -> Option<std::thread::JoinHandle<()>> {
    let mut ends = [0; 2];
    // SAFETY: plain descriptor operations on this process's own descriptors.
    let original = unsafe {
        if libc::pipe(ends.as_mut_ptr()) != 0 {
            return None;
        }
        let original = libc::dup(fd);
        libc::fcntl(original, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(ends[0], libc::F_SETFD, libc::FD_CLOEXEC);
        libc::dup2(ends[1], fd);
        libc::close(ends[1]);
        original
    };
    if fd == 2 {
        DIAG_FD.store(original, Ordering::Relaxed);
    }
    let read_end = ends[0];
    std::thread::Builder::new()
        .name("mirrorcl-output".into())
        .spawn(move || {
            mark_runtime_thread();
            use std::io::BufRead;
            use std::os::fd::FromRawFd;
            // SAFETY: this thread owns the pipe's read end and a duplicate of the output.
            let input = unsafe { std::fs::File::from_raw_fd(read_end) };
            // SAFETY: as above.
            let mut out = unsafe { std::fs::File::from_raw_fd(original) };
            let prefix = format!("[rank {rank}] ");
            for line in std::io::BufReader::new(input)
                .split(b'\n')
                .map_while(Result::ok)
            {
                let mut text = prefix.clone().into_bytes();
                text.extend_from_slice(&line);
                text.push(b'\n');
                let _ = out.write_all(&text);
            }
        })
        .ok()
}

/// At exit: flushes the program's streams into the pipes, closes them, and waits for
/// the readers to copy the last lines out.
extern "C" fn drain_prefixers() {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: flushing every C stream, then pointing 1 and 2 at /dev/null closes the
        // pipes' last write ends.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            if null >= 0 {
                libc::dup2(null, 1);
                libc::dup2(null, 2);
                libc::close(null);
            }
        }
        if let Some(readers) = PREFIXERS.get() {
            for h in readers.lock().drain(..) {
                let _ = h.join();
            }
        }
    });
}

/// Whether this rank's writes to files are to vanish (`MIRRORCL_FILES`).
pub fn files_go_nowhere() -> bool {
    let rank = LAUNCH_RANK.load(Ordering::Relaxed);
    rank != u32::MAX && rank != 0 && std::env::var("MIRRORCL_FILES").as_deref() != Ok("all")
}

/// Where every rank keeps writing: devices and kernel interfaces, and the caches where
/// vendors (PoCL's kernel cache, NVIDIA's compute cache) write files they read back.
fn everyone_writes(path: &[u8]) -> bool {
    static PREFIXES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let prefixes = PREFIXES.get_or_init(|| {
        let mut p: Vec<Vec<u8>> = ["/dev/", "/proc/", "/sys/", "/run/"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let env_dir = |v: &str| std::env::var(v).ok().filter(|d| d.starts_with('/'));
        for dir in ["XDG_CACHE_HOME", "POCL_CACHE_DIR", "CUDA_CACHE_PATH"]
            .iter()
            .filter_map(|v| env_dir(v))
        {
            p.push(format!("{}/", dir.trim_end_matches('/')).into_bytes());
        }
        if let Some(home) = env_dir("HOME") {
            for sub in [".cache/", ".nv/"] {
                p.push(format!("{}/{sub}", home.trim_end_matches('/')).into_bytes());
            }
        }
        p
    });
    prefixes.iter().any(|p| path.starts_with(p))
}

/// Whether `fopen(path, mode)` is a write MirrorCL sends nowhere on this rank: a mode
/// that writes, on a path where only rank 0 writes (see `everyone_writes`).
pub fn redirect_open(path: &[u8], mode: &[u8]) -> bool {
    let writes = mode.iter().any(|c| matches!(c, b'w' | b'a' | b'+'));
    writes && files_go_nowhere() && !everyone_writes(path)
}

/// Rank 0's value of a seed, on every rank (a collective: every replica seeds at the same
/// point of its run). Outside a cluster, the seed itself.
pub fn common_seed(seed: u64) -> u64 {
    if launcher_rank().is_none() && !mpi::is_initialized() {
        return seed;
    }
    let node = crate::node::init_alone();
    if !node.can_communicate() {
        return seed;
    }
    // Needs no platform: the node's communicator and the wire format only.
    node.exchange(&crate::wire::Seed(seed))
        .first()
        .map_or(seed, |rank0| rank0.0)
}

thread_local! {
    /// How deep this thread is inside MirrorCL: in an OpenCL call (whose vendor calls
    /// may seed or draw from the C library's random streams), or a thread of MirrorCL's
    /// own (issuers, progress, output).
    static INSIDE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// While it lives, this thread is inside MirrorCL (see [`inside_mirrorcl`]).
pub struct Inside(());

impl Inside {
    pub fn enter() -> Inside {
        INSIDE.with(|d| d.set(d.get() + 1));
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Marks the calling thread, one of MirrorCL's own, as inside MirrorCL for its life.
pub fn mark_runtime_thread() {
    std::mem::forget(Inside::enter());
}

/// Whether the C library's random functions called now are called by a vendor (from
/// within an OpenCL call or on one of MirrorCL's threads), not by the application: such
/// calls must neither reseed nor draw from the application's streams, which would then
/// differ between ranks with devices and ranks without (NVIDIA seeds during builds).
pub fn inside_mirrorcl() -> bool {
    INSIDE.try_with(|d| d.get() > 0).unwrap_or(true)
}
