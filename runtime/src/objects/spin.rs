//! Spinning at a hand-off (host thread → issuer, completion → waiting thread) saves the
//! 45–65 µs of waking a parked thread, but only while a core is free: a spinning thread
//! on a machine with more runnable threads than cores takes the core a vendor's worker
//! needs (four PoCL devices on two cores: a solver 15× slower than native). So a spin
//! goes on only while the machine's runnable threads fit its cores, as the kernel counts
//! them (`/proc/loadavg`, every rank and process of the node included), looked up at
//! most every [`FRESH`] by whichever spinning thread asks. A look-up is a `pread` of a
//! file kept open (0.9 µs on a 64-core H100 host; opening, reading and closing it took
//! 2.3-3 µs), and a thread handing work over, which asks for every command, takes a
//! count up to [`FRESH_FOR_HANDOFF`] old: IV.7.2's enqueuing thread at 4 ranks then
//! spent 88-91 µs of CPU an iteration instead of 93-106.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a count of runnable threads stands for the present.
const FRESH: Duration = Duration::from_micros(100);

/// How old a count a thread handing work over (`Issuer::caller_runs`) acts on.
pub const FRESH_FOR_HANDOFF: Duration = Duration::from_millis(1);

/// How long a count that found the cores taken stands, whoever asks. Taken cores stay
/// taken for a while, and acting on an old "taken" only parks a thread that might have
/// spun: CG on four PoCL devices and two cores read the count 4 times an iteration.
const BUSY_FRESH: Duration = Duration::from_millis(1);

/// How often a spinning thread asks again.
pub const RECHECK: Duration = Duration::from_micros(20);

struct Machine {
    cores: u64,
    start: Instant,
    /// Microseconds since `start` of the last count (high bits) and the count (low 16).
    last: AtomicU64,
    /// Whether the kernel tells the count at all (not on every system).
    counted: bool,
}

fn machine() -> &'static Machine {
    static M: OnceLock<Machine> = OnceLock::new();
    M.get_or_init(|| Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        start: Instant::now(),
        last: AtomicU64::new(u64::MAX),
        counted: runnable_threads().is_some(),
    })
}

/// Runnable threads of the whole machine now: the numerator of `/proc/loadavg`'s fourth
/// field (`running/total`), which includes the caller.
fn runnable_threads() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    static LOADAVG: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let file = LOADAVG
        .get_or_init(|| std::fs::File::open("/proc/loadavg").ok())
        .as_ref()?;
    let mut buf = [0u8; 128];
    // At offset 0 the kernel writes the file anew: one system call, no shared offset.
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Whether a thread may spin now: every runnable thread of the machine has a core.
pub fn core_free() -> bool {
    core_free_within(FRESH)
}

/// `core_free` from a count up to `fresh` old.
pub fn core_free_within(fresh: Duration) -> bool {
    let m = machine();
    if !m.counted {
        return true;
    }
    let now = m.start.elapsed().as_micros() as u64;
    let last = m.last.load(Ordering::Relaxed);
    let fresh = if last & 0xffff > m.cores {
        fresh.max(BUSY_FRESH)
    } else {
        fresh
    };
    let running = if last != u64::MAX && now.saturating_sub(last >> 16) < fresh.as_micros() as u64 {
        last & 0xffff
    } else {
        let running = runnable_threads().unwrap_or(0).min(0xffff);
        m.last.store(now << 16 | running, Ordering::Relaxed);
        running
    };
    running <= m.cores
}

/// A spin of up to `limit` that stops as soon as the cores are taken: `spinning()`
/// answers whether to go on.
pub struct Spin {
    limit: Duration,
    start: Instant,
    checked: Instant,
    free: bool,
}

impl Spin {
    pub fn new(limit: Duration) -> Spin {
        let now = Instant::now();
        Spin {
            limit,
            start: now,
            checked: now,
            free: !limit.is_zero() && core_free(),
        }
    }

    /// Starts the spin anew (progress was made).
    pub fn restart(&mut self) {
        *self = Spin::new(self.limit);
    }

    /// Whether to keep spinning: within the limit, and while a core is free.
    pub fn spinning(&mut self) -> bool {
        if !self.free {
            return false;
        }
        let now = Instant::now();
        if now.duration_since(self.start) >= self.limit {
            return false;
        }
        if now.duration_since(self.checked) >= RECHECK {
            self.checked = now;
            self.free = core_free();
        }
        self.free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_includes_this_thread() {
        if let Some(n) = runnable_threads() {
            assert!(n >= 1, "runnable threads: {n}");
        }
    }

    #[test]
    fn a_zero_spin_never_spins() {
        assert!(!Spin::new(Duration::ZERO).spinning());
    }

    #[test]
    fn a_spin_ends_at_its_limit() {
        let mut s = Spin::new(Duration::from_micros(200));
        let start = Instant::now();
        while s.spinning() {
            assert!(start.elapsed() < Duration::from_secs(1));
        }
    }
}
