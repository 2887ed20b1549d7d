//! In a cluster every rank must make the same OpenCL calls in the same order. Host
//! threads that interleave their calls do so differently on each rank, so the ranks'
//! tags and plans stop matching and their transfers never pair (issue 16). Until such
//! programs are supported, the first interleaving is named, with the rule, and ends the
//! job at once, instead of a hang until the deadline.
//!
//! The rule: one host thread at a time. A thread may call OpenCL while another has
//! called since this one's previous call only if that other thread has ended (the
//! program joined it). A thread that starts calling takes over; threads joined right
//! after their work, or a worker that does all the OpenCL work while the main thread
//! waits, follow the rule. Calls from application event callbacks and from MirrorCL's
//! own threads do not count; a single process is not concerned.

use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The serial of the thread that made the last counted call (0: none yet).
static LAST: AtomicU64 = AtomicU64::new(0);
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// Whether each thread that has called is still running, and its name, by serial.
type Callers = Mutex<HashMap<u64, (Arc<AtomicBool>, String)>>;

fn callers() -> &'static Callers {
    static CALLERS: OnceLock<Callers> = OnceLock::new();
    CALLERS.get_or_init(Default::default)
}

/// This thread as a caller: its serial, whether it is running, whether it has called.
struct Me {
    serial: u64,
    alive: Arc<AtomicBool>,
    called: Cell<bool>,
}

impl Drop for Me {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Release);
    }
}

thread_local! {
    static ME: Me = Me {
        serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        alive: Arc::new(AtomicBool::new(true)),
        called: Cell::new(false),
    };
}

fn thread_name() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) => n.to_string(),
        // SAFETY: gettid has no arguments and cannot fail.
        None => format!("thread {}", unsafe { libc::syscall(libc::SYS_gettid) }),
    }
}

/// Checks the rule for an application call of `call` on this thread (in a cluster).
pub fn check(call: &str) {
    if !crate::node::is_cluster_now() || crate::event::in_callback() {
        return;
    }
    let Ok(Some(other)) = ME.try_with(|me| {
        let last = LAST.swap(me.serial, Ordering::AcqRel);
        if last == me.serial {
            return None;
        }
        if !me.called.replace(true) {
            // A thread that starts calling takes over.
            callers()
                .lock()
                .insert(me.serial, (me.alive.clone(), thread_name()));
            return None;
        }
        let callers = callers().lock();
        let (alive, name) = callers.get(&last)?;
        alive.load(Ordering::Acquire).then(|| name.clone())
    }) else {
        return;
    };
    // The first thread to find the rule broken reports it; the others wait for the end.
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if REPORTED.swap(true, Ordering::AcqRel) {
        loop {
            std::thread::park();
        }
    }
    let node = crate::node::node();
    crate::diag!(
        "MirrorCL: rank {}: {call} on host thread \"{}\" while host thread \"{other}\", which \
         called OpenCL since this thread's previous call, is still running. In a cluster \
         every rank must make the same OpenCL calls in the same order, so host threads must \
         take turns: one thread at a time, the next one only after the previous one has \
         ended (joined). Interleaved calls from several threads are not supported yet \
         (their order differs between ranks); ending the job.",
        node.rank,
        thread_name()
    );
    node.abort();
}
