//! Observability, the bottom layer: configuration, the trace, the statistics and
//! MirrorCL's own reports, which every other layer writes to; and the clock and thread
//! ids they share. It knows nothing of ranks or OpenCL.

pub mod config;
pub mod diag;
pub mod stats;
pub mod trace;

use std::sync::OnceLock;
use std::time::Instant;

/// The calling thread's id as the kernel knows it (`gettid`).
pub fn os_id() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Nanoseconds on the monotonic clock, the time base of profiling information.
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } == 0 {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Logging to standard error, filtered by `MIRRORCL_LOG` (e.g. `MIRRORCL_LOG=debug`);
/// warnings and errors by default.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MIRRORCL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
