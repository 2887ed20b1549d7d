//! Host programs with several threads. In a cluster every rank runs the
//! whole host program, but its threads interleave their OpenCL calls differently on
//! each rank. What must agree between ranks is therefore named per thread, not by the
//! global call order:
//!
//! - **A thread's slot.** MirrorCL stands in for `pthread_create` (preloaded, it sees
//!   the program's threads start). The main thread is slot 0; the k-th thread the main
//!   thread creates outside MirrorCL (C's `pthread_create`, C++'s `std::thread`,
//!   OpenMP's team) is slot `1 + k % (SLOTS - 2)`, the same on every rank because the
//!   main thread creates them in program order. Threads of MPI, the vendors and
//!   MirrorCL itself are not counted.
//! - **Per slot:** the tags of messages between each pair of ranks (`Node::tag_with`),
//!   the call history whose stamps messages and collectives compare (`history`), the
//!   ids of the buffers the thread creates ([`next_id`]), and collectives, which a
//!   thread other than the main one runs as point-to-point messages under its own tags
//!   (`Node::all_gather`). The scheduler's plans depend only on each buffer's past
//!   accesses, which the program itself orders (or it races even in one process), so
//!   they agree too.
//! - **Races** between threads on one buffer are reported with both calls
//!   (`memory::Buffer::check_race`): a command of one thread that touches bytes another
//!   thread's command wrote (or reads bytes this one writes) must be ordered after it by
//!   OpenCL's own means: a wait list, or a host wait (`clFinish`, `clWaitForEvents`, a
//!   blocking command, a status polled as complete) before it was enqueued.
//!
//! - **Event callbacks** the main thread registers are named as the threads it creates
//!   ([`CallbackSlot`]): a callback runs at another point of the program on every rank,
//!   and one that enqueues has its own slot wherever it runs.
//!
//! A slot is reused once its previous thread has ended (joined); its counters go on.
//! Threads MirrorCL cannot name (created by a thread other than the main one, or every
//! thread when the library is loaded by the ICD loader rather than preloaded) share
//! slot 0 with the main thread, and then must take turns: one at a time, the next only
//! after the previous one ended. The first call that breaks that rule is named, with
//! the rule, and ends the job, instead of a hang until the deadline. Calls from
//! application event callbacks and from MirrorCL's own threads do not count; a single
//! process is not concerned.

use crate::observe::os_id;
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// How many threads can be named at once, and where a slot sits in per-slot counters:
/// shared with the scheduler's tag counting (`mirrorcl_scheduler::tags`).
pub use mirrorcl_scheduler::tags::{SLOTS, SLOT_SHIFT};

/// This thread's slot: unknown until asked, then a slot or `UNNAMED`.
const UNKNOWN: u16 = u16::MAX;
const UNNAMED: u16 = u16::MAX - 1;

thread_local! {
    static SLOT: Cell<u16> = const { Cell::new(UNKNOWN) };
    /// Marks the slot free again when the thread holding it ends.
    static HOLDER: Holder = const { Holder(Cell::new(None)) };
}

/// Whether each slot's thread is still running.
static HELD: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
/// Threads the main thread created outside MirrorCL.
static CREATED_BY_MAIN: AtomicU64 = AtomicU64::new(0);
/// Per slot, the last id [`next_id`] gave.
static IDS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Per slot, the last command number [`next_command`] gave.
static COMMANDS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The slot whose tags carry commands' final statuses ([`status_tag`]); no thread has it.
pub const STATUS_SLOT: usize = SLOTS - 1;
/// Per slot, how many threads have held it (a thread is a slot and its generation).
static GENERATION: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Per slot, the number of the next command (`Event::seq`) when its thread was created:
/// the main thread's earlier commands come before everything the thread does.
static CREATED_AT: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Whether the main thread has created a named thread (races are then looked for).
static SEVERAL: AtomicBool = AtomicBool::new(false);

struct Holder(Cell<Option<u16>>);

impl Drop for Holder {
    fn drop(&mut self) {
        if let Some(s) = self.0.get() {
            HELD[s as usize].store(false, Ordering::Release);
        }
    }
}

fn is_main_thread() -> bool {
    // SAFETY: getpid takes no arguments and cannot fail.
    let pid = unsafe { libc::getpid() };
    pid == os_id()
}

/// This thread's slot, `None` for a thread MirrorCL could not name.
pub fn named_slot() -> Option<usize> {
    let s = SLOT.try_with(|s| {
        if s.get() == UNKNOWN {
            s.set(if is_main_thread() { 0 } else { UNNAMED });
        }
        s.get()
    });
    match s {
        Ok(s) if s != UNNAMED => Some(s as usize),
        _ => None,
    }
}

/// Names this thread as `slot` (in-process tests, whose threads MirrorCL does not start).
#[cfg(test)]
pub(crate) fn name_this_thread(slot: usize) {
    SLOT.with(|s| s.set(slot as u16));
}

/// The slot whose counters this thread uses: its own, or the main thread's.
pub fn slot() -> usize {
    named_slot().unwrap_or(0)
}

/// A fresh id, the same on every rank for the same call of the same thread.
pub fn next_id() -> u64 {
    let s = slot();
    let n = IDS[s].fetch_add(1, Ordering::Relaxed) + 1;
    (s as u64) << SLOT_SHIFT | n
}

/// A named thread: its slot and the slot's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub slot: usize,
    pub generation: u64,
}

impl Named {
    /// This thread, if MirrorCL named it.
    pub fn me() -> Option<Named> {
        named_slot().map(|slot| Named {
            slot,
            generation: GENERATION[slot].load(Ordering::Acquire),
        })
    }

    /// Whether the thread has ended (the main thread never does).
    pub fn ended(self) -> bool {
        self.slot != 0
            && (GENERATION[self.slot].load(Ordering::Acquire) != self.generation
                || !HELD[self.slot].load(Ordering::Acquire))
    }

    /// Whether command `seq` of the main thread came before this thread was created.
    pub fn created_after(self, seq: u64) -> bool {
        self.slot != 0 && seq < CREATED_AT[self.slot].load(Ordering::Acquire)
    }
}

/// Whether the program has named host threads besides the main one.
pub fn several() -> bool {
    SEVERAL.load(Ordering::Acquire)
}

/// A command's name, the same on every rank: its thread's slot and its number there.
pub fn next_command() -> u64 {
    let s = slot();
    let n = COMMANDS[s].fetch_add(1, Ordering::Relaxed) + 1;
    (s as u64) << SLOT_SHIFT | n
}

/// The tag of the message that carries the final status of command `command`
/// ([`next_command`]) from its owner: derived from the command alone, so that it pairs
/// whichever thread waits for it, whenever (a finalizer run by a garbage collector).
pub fn status_tag(command: u64) -> u64 {
    let slot = command >> SLOT_SHIFT;
    let n = command & ((1 << SLOT_SHIFT) - 1);
    (STATUS_SLOT as u64) << SLOT_SHIFT | (n << 6 | slot)
}

/// A start routine as `pthread_create` takes it.
pub type StartRoutine = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;

/// What the new thread needs before the program's routine runs.
struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
    slot: u16,
}

/// Whether the start routine belongs to MPI, a vendor or MirrorCL: those threads never
/// call OpenCL for the program and may start differently on each rank.
fn runtime_thread(routine: StartRoutine) -> bool {
    // SAFETY: an all-zero Dl_info is a valid value to be filled in.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    if unsafe { libc::dladdr(routine as *const c_void, &mut info) } == 0 || info.dli_fname.is_null()
    {
        return false;
    }
    // SAFETY: dladdr gives a NUL-terminated file name.
    let file = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_bytes();
    let base = file.rsplit(|&c| c == b'/').next().unwrap_or(file);
    const RUNTIMES: [&[u8]; 12] = [
        b"libmpi",
        b"libopen-",
        b"libpmix",
        b"libucs",
        b"libucp",
        b"libuct",
        b"libpocl",
        b"libnvidia",
        b"libcuda",
        b"libhwloc",
        b"libevent",
        b"libmirrorcl",
    ];
    RUNTIMES.iter().any(|r| base.starts_with(r))
}

static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// The number the next command will get.
pub fn next_seq() -> u64 {
    NEXT_SEQ.load(Ordering::Acquire)
}

/// A new command's number (enqueue order on this rank; for diagnostics).
pub fn take_seq() -> u64 {
    NEXT_SEQ.fetch_add(1, Ordering::Relaxed)
}

/// The slot a thread about to be created gets: the main thread's creations outside
/// MirrorCL are named in order; a slot whose previous thread still runs is not reused.
fn slot_for_new_thread(routine: StartRoutine) -> u16 {
    if crate::cluster::replica::inside_mirrorcl() || !is_main_thread() || runtime_thread(routine) {
        return UNNAMED;
    }
    match claim_created_slot() {
        Some(s) => {
            SEVERAL.store(true, Ordering::Release);
            s
        }
        None => UNNAMED,
    }
}

/// The slot of the next thread or callback the main thread creates, held from now on;
/// None while it is held (more than SLOTS - 2 at once: this one takes turns on slot 0).
fn claim_created_slot() -> Option<u16> {
    let k = CREATED_BY_MAIN.fetch_add(1, Ordering::Relaxed);
    let s = 1 + (k % (SLOTS as u64 - 2)) as usize;
    if HELD[s].swap(true, Ordering::AcqRel) {
        return None;
    }
    GENERATION[s].fetch_add(1, Ordering::AcqRel);
    CREATED_AT[s].store(next_seq(), Ordering::Release);
    Some(s as u16)
}

/// The slot of an application event callback (`clSetEventCallback`). A callback runs
/// at another point of the program on every rank, on whichever thread learns of the
/// completion; one that enqueues (OpenCL 1.2 §5.9 allows it) made those commands part
/// of the main thread's history at different places, and the ranks diverged. In a
/// cluster a callback the main thread registers is named as the threads it creates are
/// (their count goes on: registrations are in program order too), and runs as that
/// slot's thread wherever it runs; the slot is free again once it has run or was
/// dropped. A callback registered elsewhere, or while every slot is held, runs as it
/// did: it may only enqueue what no other rank's plan depends on.
pub struct CallbackSlot(u16);

impl CallbackSlot {
    pub fn new() -> Option<CallbackSlot> {
        if !crate::cluster::node::is_cluster_now()
            || crate::cluster::thread_state::in_callback()
            || named_slot() != Some(0)
        {
            return None;
        }
        claim_created_slot().map(CallbackSlot)
    }

    /// Runs `f` as the slot's thread, on this thread.
    pub fn run<R>(self, f: impl FnOnce() -> R) -> R {
        struct Restore(u16);
        impl Drop for Restore {
            fn drop(&mut self) {
                let _ = SLOT.try_with(|s| s.set(self.0));
            }
        }
        let _restore = Restore(SLOT.with(|s| s.replace(self.0)));
        f()
    }
}

impl Drop for CallbackSlot {
    fn drop(&mut self) {
        HELD[self.0 as usize].store(false, Ordering::Release);
    }
}

unsafe extern "C-unwind" fn start_named(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box<Start> leaked by `create`, taken back exactly once; nothing
    // with a destructor stays in this frame, so the thread may end by `pthread_exit`.
    let Start { routine, arg, slot } = *unsafe { Box::from_raw(p as *mut Start) };
    let _ = SLOT.try_with(|s| s.set(slot));
    if slot != UNNAMED {
        let _ = HOLDER.try_with(|h| h.0.set(Some(slot)));
    }
    // SAFETY: the program's routine with the program's argument, as it asked.
    unsafe { routine(arg) }
}

/// A `pthread_create` function.
pub type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> libc::c_int;

/// `pthread_create` through `real`, naming the new thread (see the module's text).
///
/// # Safety
/// The arguments are `pthread_create`'s, and `real` is the C library's function.
pub unsafe fn create(
    real: PthreadCreate,
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
) -> libc::c_int {
    let slot = slot_for_new_thread(routine);
    let start = Box::into_raw(Box::new(Start { routine, arg, slot }));
    // SAFETY: the caller's arguments, with our start routine and its box instead.
    let rc = unsafe { real(thread, attr, start_named, start as *mut c_void) };
    if rc != 0 {
        // SAFETY: the thread was not created, so the box is still ours.
        drop(unsafe { Box::from_raw(start) });
        if slot != UNNAMED {
            HELD[slot as usize].store(false, Ordering::Release);
        }
    }
    rc
}

// The rule for threads that share slot 0.

/// The serial of the thread that made the last counted call on slot 0 (0: none yet).
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

/// This thread's name for reports: the program's name for it, its slot, or its id.
pub fn thread_name() -> String {
    let t = std::thread::current();
    let id = match named_slot() {
        Some(0) => "main thread".to_string(),
        Some(s) => format!("thread #{s}"),
        None => format!("thread {}", os_id()),
    };
    match t.name() {
        Some(n) if n != "main" => format!("{n} ({id})"),
        _ => id,
    }
}

/// Checks the rule for an application call of `call` on this thread (in a cluster).
/// Inline and out of line: alone, a call is one load, where the compiler hoisted the
/// thread-local look-ups of the check's body (a call into the loader each) to its entry.
#[inline]
pub fn check(call: &str) {
    if crate::cluster::node::is_cluster_now() {
        check_in_cluster(call);
    }
}

#[inline(never)]
fn check_in_cluster(call: &str) {
    if crate::cluster::thread_state::in_callback() {
        return;
    }
    // A named thread other than the main one has its own slot.
    if named_slot().is_some_and(|s| s != 0) {
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
    let node = crate::cluster::node::node();
    crate::diag!(
        "MirrorCL: rank {}: {call} on host thread \"{}\" while host thread \"{other}\", which \
         called OpenCL since this thread's previous call, is still running. In a cluster \
         MirrorCL tells host threads apart only when the main thread creates them with \
         MirrorCL preloaded (`mirrorcl run`, LD_PRELOAD); other host threads must take \
         turns: one thread at a time, the next one only after the previous one has ended \
         (joined). Their interleaved calls differ between ranks; ending the job.",
        node.rank,
        thread_name()
    );
    node.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A callback's slot is the thread's slot while it runs, on whichever thread, and
    /// free again once the callback has run.
    #[test]
    fn a_callback_runs_as_its_slot() {
        let claimed = claim_created_slot().expect("a free slot");
        let callback = CallbackSlot(claimed);
        assert!(HELD[claimed as usize].load(Ordering::Acquire));
        let seen = std::thread::spawn(move || {
            let before = slot();
            let inside = callback.run(slot);
            (before, inside, slot())
        })
        .join()
        .expect("the thread ran");
        assert_eq!(seen, (0, claimed as usize, 0));
        assert!(!HELD[claimed as usize].load(Ordering::Acquire));
    }
}
