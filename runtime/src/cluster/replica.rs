//! Making N replicas of one host program look like one program to the outside world
//! (thesis IV.2.3): one copy of the output, one set of output files, one random seed.
//!
//! - **Output** (`MIRRORCL_OUTPUT`): `root` (default) lets only rank 0's standard output
//!   and error through; `all` lets every rank's through, each line prefixed with
//!   `[rank r] ` by a small forwarding process (forked, then detached, at set-up) that
//!   copies the rank's pipes to the original descriptors until the last writer closes
//!   them; `raw` leaves every rank's output alone (for `mpirun --output-filename` and
//!   `--tag-output`). Set up once per rank, by the first load of the library in the
//!   rank, from the launcher's rank variables alone (MPI is not initialised then), so
//!   that nothing printed before the first OpenCL call escapes. That load records the
//!   set-up in the environment (`MIRRORCL_RANK_STDERR`), so later loads in the same
//!   rank — the program an exec wrapper (`env`, `stdbuf`, a shell) starts, the program's
//!   own child processes — keep it instead of setting it up again: nothing is prefixed
//!   twice, and nothing depends on a thread or descriptor that `exec` ends.
//! - **MirrorCL's own reports** (`diag`: deadlines, divergence, internal errors) go to
//!   the rank's standard error as the first load found it, in every mode: a duplicate
//!   kept open across `exec`, so they reach the launcher's terminal whatever the program
//!   did to its descriptors since (pytest's capture, a `dup2` onto 2, `2>file` in a
//!   wrapper script). The launcher's descriptors are known only if the library is loaded
//!   at process start (`LD_PRELOAD`, as `mirrorcl run` does, or linked): loaded later by
//!   an ICD loader, MirrorCL takes descriptors 1 and 2 as they are at that moment
//!   (nothing records what a process started with), which under a capturing test runner
//!   are the runner's files.
//! - **Files** (`MIRRORCL_FILES`): `root` (default): a file opened for writing with
//!   `fopen` is written by rank 0 only; the other ranks write to `/dev/null`. Paths in
//!   the caches (`~/.cache`, `$XDG_CACHE_HOME`, `$POCL_CACHE_DIR`, `$CUDA_CACHE_PATH`,
//!   `~/.nv`) and under `/dev`, `/proc`, `/sys`, `/run` are written by every rank:
//!   vendors write files there that they read back. `all`: every rank writes everywhere.
//! - **Seeds**: `srand`, `srandom` and `srand48` take rank 0's seed on every rank, so a
//!   program seeded from the clock or its pid still has identical replicas.

use crate::observe::diag::{diag, identity, set_diag, write_all};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// This rank as the launcher said at load time (`u32::MAX`: not launched by MPI).
static LAUNCH_RANK: AtomicU32 = AtomicU32::new(u32::MAX);

/// The environment variable through which the first load in a rank tells later loads
/// in the same rank (after `exec`, in child processes) that output is set up and where
/// the original standard error is: `job:rank:fd:dev:ino`.
const HANDOFF: &str = "MIRRORCL_RANK_STDERR";

/// The rank an MPI launcher gave this process, from its environment: Open MPI's, PMIx's,
/// the PMI of Hydra and Slurm (MPICH, Intel MPI), MVAPICH's `mpirun_rsh`, Cray's PALS,
/// then Slurm's own.
pub fn launcher_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "MV2_COMM_WORLD_RANK",
        "PALS_RANKID",
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

/// A duplicate of `fd` at a high number (out of the way of programs that reuse low
/// ones), closed on `exec` or not.
fn dup_high(fd: RawFd, cloexec: bool) -> Option<RawFd> {
    let cmd = if cloexec {
        libc::F_DUPFD_CLOEXEC
    } else {
        libc::F_DUPFD
    };
    // SAFETY: duplicating a descriptor number; failure is reported as -1.
    let high = unsafe { libc::fcntl(fd, cmd, 200) };
    if high >= 0 {
        return Some(high);
    }
    // SAFETY: as above (a limit on descriptors below 200).
    let low = unsafe { libc::fcntl(fd, cmd, 3) };
    (low >= 0).then_some(low)
}

/// This rank's job as the launcher's variables name it (a hash): a job started from
/// within a rank (`mpirun` run by a rank) inherits the record but is another job.
fn launch_job() -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for var in [
        "PMIX_NAMESPACE",
        "OMPI_MCA_ess_base_jobid",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "PMI_PORT",
    ] {
        for b in std::env::var(var).unwrap_or_default().bytes().chain([0]) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    hash
}

/// An earlier load's set-up in this rank, from the environment: its job and rank match,
/// and the original standard error if this process still has it open.
fn inherited_setup(rank: u32) -> Option<Option<(RawFd, (u64, u64))>> {
    let value = std::env::var(HANDOFF).ok()?;
    let mut fields = value.split(':');
    let job: u64 = fields.next()?.parse().ok()?;
    let r: u32 = fields.next()?.parse().ok()?;
    let fd: RawFd = fields.next()?.parse().ok()?;
    let dev: u64 = fields.next()?.parse().ok()?;
    let ino: u64 = fields.next()?.parse().ok()?;
    if job != launch_job() || r != rank {
        return None;
    }
    Some((fd >= 0 && identity(fd) == Some((dev, ino))).then_some((fd, (dev, ino))))
}

/// Whether this process runs threads besides the caller (a late load, by an ICD loader).
fn other_threads() -> bool {
    std::fs::read_dir("/proc/self/task").map_or(true, |d| d.count() > 1)
}

/// Sets up this rank's output as `MIRRORCL_OUTPUT` says (once per rank, see the module
/// documentation). Runs when the library is loaded: reads only the environment and
/// moves file descriptors.
pub fn at_load() {
    let Some(rank) = launcher_rank() else {
        return;
    };
    // Read before the hand-off below sets a variable: a program may define its own
    // getenv and setenv (bash does), which before its own start-up lose the environment
    // once one is set.
    let mode = output_mode();
    LAUNCH_RANK.store(rank, Ordering::Relaxed);
    // A panic inside MirrorCL (caught at the C boundary) must be seen on every rank,
    // whatever became of the program's standard error.
    std::panic::set_hook(Box::new(move |info| {
        diag(&format!("MirrorCL: rank {rank}: internal error: {info}\n"));
    }));
    if let Some(inherited) = inherited_setup(rank) {
        // A later load in this rank: output is set up already (re-doing it would prefix
        // twice, or keep /dev/null as the "original"). A child process started with
        // its descriptors closed keeps reporting to its standard error.
        if let Some((fd, id)) = inherited {
            set_diag(fd, id);
        }
        return;
    }
    // Kept open across exec for the loads after an exec wrapper.
    let saved = dup_high(2, false).and_then(|fd| Some((fd, identity(fd)?)));
    if let Some((fd, id)) = saved {
        set_diag(fd, id);
    }
    // setenv races with getenv in other threads: only at process start (preloaded or
    // linked), the case exec wrappers and child processes inherit.
    if !other_threads() {
        let (fd, (dev, ino)) = saved.unwrap_or((-1, (0, 0)));
        let job = launch_job();
        std::env::set_var(HANDOFF, format!("{job}:{rank}:{fd}:{dev}:{ino}"));
    }
    match mode {
        Output::Raw => {}
        Output::Root if rank == 0 => {}
        Output::Root => {
            // SAFETY: plain descriptor operations on this process's own descriptors.
            unsafe {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if null >= 0 {
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    libc::close(null);
                }
            }
        }
        Output::All => {
            if !forward_prefixed(rank) {
                diag(&format!(
                    "MirrorCL: rank {rank}: cannot start the output forwarder ({}); \
                     output unprefixed\n",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
}

/// Points descriptors 1 and 2 at pipes that a forwarding process copies to the
/// original ones, each line prefixed with `[rank r] `. The process is forked twice
/// (detached: the program never sees it as a child to wait for, and it outlives
/// `exec`) and ends when the last writer of both pipes closes them: the rank and every
/// process it started with those descriptors, so nothing is lost at exit, at `_exit` or
/// at a crash.
fn forward_prefixed(rank: u32) -> bool {
    let prefix = format!("[rank {rank}] ").into_bytes();
    // Allocated before fork: the forwarding process makes system calls only.
    let mut streams = [Stream::new(prefix.clone()), Stream::new(prefix)];
    let (mut out_pipe, mut err_pipe) = ([-1; 2], [-1; 2]);
    let mut originals = [-1; 2];
    // SAFETY: plain descriptor operations on this process's own descriptors; after
    // fork, the child makes system calls only and leaves with _exit.
    unsafe {
        let close_all = |fds: &[RawFd]| {
            for &fd in fds {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
        };
        if libc::pipe2(out_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return false;
        }
        if libc::pipe2(err_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            close_all(&out_pipe);
            return false;
        }
        originals[0] = dup_high(1, true).unwrap_or(-1);
        originals[1] = dup_high(2, true).unwrap_or(-1);
        let all = [
            out_pipe[0],
            out_pipe[1],
            err_pipe[0],
            err_pipe[1],
            originals[0],
            originals[1],
        ];
        if originals.contains(&-1) {
            close_all(&all);
            return false;
        }
        let child = libc::fork();
        if child < 0 {
            close_all(&all);
            return false;
        }
        if child == 0 {
            // The intermediate process: fork the forwarder, report, leave.
            match libc::fork() {
                0 => {}
                -1 => libc::_exit(1),
                _ => libc::_exit(0),
            }
            libc::setsid();
            // Named in ps and top (it runs the program's image, not a program of its own).
            libc::prctl(libc::PR_SET_NAME, c"mirrorcl-output".as_ptr());
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            let keep = [out_pipe[0], err_pipe[0], originals[0], originals[1]];
            close_all_but(keep);
            streams[0].fd = originals[0];
            streams[1].fd = originals[1];
            copy_lines([out_pipe[0], err_pipe[0]], &mut streams);
            libc::_exit(0);
        }
        // Stays 0 (started) if the program reaps children itself (SIGCHLD ignored).
        let mut status = 0;
        while libc::waitpid(child, &mut status, 0) < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        let started = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if started {
            libc::dup2(out_pipe[1], 1);
            libc::dup2(err_pipe[1], 2);
        }
        close_all(&all);
        started
    }
}

/// Closes every descriptor of this process but `keep` (in the forwarding process).
fn close_all_but(mut keep: [RawFd; 4]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for fd in keep.into_iter().map(|fd| fd as u32).chain([u32::MAX]) {
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd.saturating_add(1);
    }
}

/// Closes descriptors `lo..=hi`.
fn close_range(lo: u32, hi: u32) {
    // SAFETY: close_range(2) closes descriptor numbers; no memory is involved.
    if unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0) } == 0 {
        return;
    }
    // Kernels before 5.9: one by one, up to the descriptor limit.
    // SAFETY: getrlimit fills a zeroed struct; close on any number is harmless here.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 20) as u32
        } else {
            1024
        };
        for fd in lo..=hi.min(max) {
            libc::close(fd as RawFd);
        }
    }
}

/// One forwarded stream: where its lines go and the line being gathered (prefix
/// included), in a buffer allocated before fork.
struct Stream {
    fd: RawFd,
    prefix: Vec<u8>,
    line: Vec<u8>,
    /// Whether the next byte starts a line (a line longer than the buffer goes out in
    /// pieces, prefixed once).
    at_start: bool,
}

const LINE_CAP: usize = 64 * 1024;

impl Stream {
    fn new(prefix: Vec<u8>) -> Stream {
        Stream {
            fd: -1,
            line: Vec::with_capacity(LINE_CAP + prefix.len() + 1),
            prefix,
            at_start: true,
        }
    }

    /// Takes `bytes` read from the pipe, writing out every completed line; `eof`: the
    /// pipe closed, the last unterminated line goes out with a newline.
    fn take(&mut self, mut bytes: &[u8], eof: bool) {
        while !bytes.is_empty() {
            if self.at_start && self.line.is_empty() {
                self.line.extend_from_slice(&self.prefix);
                self.at_start = false;
            }
            let room = LINE_CAP + self.prefix.len() - self.line.len();
            let (piece, newline) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) if i < room => (&bytes[..=i], true),
                _ => (&bytes[..room.min(bytes.len())], false),
            };
            self.line.extend_from_slice(piece);
            bytes = &bytes[piece.len()..];
            if newline || self.line.len() >= LINE_CAP + self.prefix.len() {
                write_all(self.fd, &self.line);
                self.line.clear();
                self.at_start = newline;
            }
        }
        if eof && !self.line.is_empty() {
            self.line.push(b'\n');
            write_all(self.fd, &self.line);
            self.line.clear();
        }
    }
}

/// The forwarding process's loop: copies both pipes line by line until both close.
fn copy_lines(pipes: [RawFd; 2], streams: &mut [Stream; 2]) {
    let mut polls = pipes.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let mut chunk = [0u8; 16 * 1024];
    while polls.iter().any(|p| p.fd >= 0) {
        // SAFETY: polling two pollfd structs this function owns.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        for (p, stream) in polls.iter_mut().zip(streams.iter_mut()) {
            if p.fd < 0 || p.revents == 0 {
                continue;
            }
            // SAFETY: reading into a live stack buffer of the given length.
            let got =
                unsafe { libc::read(p.fd, chunk.as_mut_ptr() as *mut libc::c_void, chunk.len()) };
            if got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            if got <= 0 {
                stream.take(&[], true);
                p.fd = -1;
            } else {
                stream.take(&chunk[..got as usize], false);
            }
        }
    }
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
    let node = crate::cluster::node::node();
    if !node.can_communicate() {
        return seed;
    }
    // Needs no platform: the node's communicator and the wire format only.
    node.exchange(&crate::cluster::wire::Seed(seed))
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

    /// `enter`, and whether the thread was inside already ([`inside_mirrorcl`]): one
    /// look at the thread-local on every OpenCL call instead of two.
    pub fn enter_nested() -> (Inside, bool) {
        let before = INSIDE.try_with(|d| d.replace(d.get() + 1)).unwrap_or(1);
        (Inside(()), before > 0)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        // A call made while the thread's locals are being destroyed entered nothing.
        let _ = INSIDE.try_with(|d| d.set(d.get().saturating_sub(1)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// What a stream writes for `chunks` read from its pipe, then the pipe's end.
    fn forwarded(chunks: &[&[u8]]) -> Vec<u8> {
        let path = std::env::temp_dir().join(format!(
            "mirrorcl-forward-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = std::fs::File::create(&path).expect("temporary file");
        let mut stream = Stream::new(b"[rank 3] ".to_vec());
        stream.fd = file.as_raw_fd();
        for chunk in chunks {
            stream.take(chunk, false);
        }
        stream.take(&[], true);
        drop(file);
        let text = std::fs::read(&path).expect("read back");
        let _ = std::fs::remove_file(&path);
        text
    }

    #[test]
    fn lines_are_prefixed_once_whatever_the_chunks() {
        assert_eq!(
            forwarded(&[b"one\ntw", b"o\n", b"\nthree"]),
            b"[rank 3] one\n[rank 3] two\n[rank 3] \n[rank 3] three\n"
        );
        assert!(forwarded(&[]).is_empty());
    }

    #[test]
    fn a_line_longer_than_the_buffer_keeps_one_prefix() {
        let long = vec![b'x'; LINE_CAP * 2 + 5];
        let mut input = long.clone();
        input.extend_from_slice(b"\nnext\n");
        let got = forwarded(&[&input[..1000], &input[1000..]]);
        let mut want = b"[rank 3] ".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"\n[rank 3] next\n");
        assert_eq!(got, want);
    }
}
