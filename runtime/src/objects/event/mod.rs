//! Events: every command has one, whether or not the application asked for it. An
//! event completes when its vendor event does (vendor callback), when the commands it
//! stands for do (host-side commands, markers), or when the application says so (user
//! events).

use crate::cl::*;
use crate::cluster::thread_state::{run_unlocked, InCallback};
use crate::cluster::wire::EventStatuses;
use crate::native::{ContextKey, VEvent};
use crate::objects::context::Context;
use crate::objects::handle::{impl_handle, Header};
use crate::objects::queue::Queue;
use crate::observe::now_ns;
use crate::ClResult;
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::any::Any;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

pub type UserCallback = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

mod callbacks;
mod vendor;
mod wait;

use callbacks::*;

pub use vendor::{SharedVEvent, VendorEvent};
pub use wait::{polled_status, wait_all};

/// The commands an event waits for inside its vendor (`State::waits_for`).
type Waited = SmallVec<[Weak<Event>; 4]>;

/// The events whose vendor events stand for a command's dependencies
/// (`Event::vendor_stand_ins`): a few.
pub type StandIns = SmallVec<[Arc<Event>; 4]>;

#[derive(Default)]
struct State {
    callbacks: Callbacks,
    /// Whether the vendor was asked to call back on completion. Only events somebody
    /// waits on asynchronously (callbacks, dependencies across vendors) need it; the
    /// rest complete when a waiter waits in the vendor or a poll finds them done.
    vendor_callback: bool,
    /// Objects that must outlive the command (buffers whose memory it touches).
    /// Inline for the few of a command: no allocation per command.
    keep: SmallVec<[Arc<dyn Any + Send + Sync>; 4]>,
    /// The commands this one waits for inside its vendor (directly, or by the order of
    /// one vendor queue): done once this one is, though nothing tells MirrorCL so.
    waits_for: Waited,
}

#[repr(C)]
pub struct Event {
    header: Header,
    pub context: Arc<Context>,
    queue: Option<Weak<Queue>>,
    pub queue_handle: usize,
    pub command_type: cl_command_type,
    /// The in-order stream the command runs on (commands of one stream need no
    /// dependencies between them).
    pub stream: u64,
    /// Set once, when the command reaches its vendor (read without a lock by polls and
    /// by the commands that wait on it).
    vendor: OnceLock<VendorEvent>,
    /// Sequence number in enqueue order, for diagnostics.
    pub seq: u64,
    pub profiling: bool,
    /// Completes after its vendor command (a read whose bytes are then sent to the other
    /// ranks): the queue's next command must wait for it explicitly.
    outlives_vendor: std::sync::atomic::AtomicBool,
    /// The first buffer the command touches (its scheduler id; 0: none), for reports.
    subject: AtomicU64,
    /// The rank that runs the command (its device's owner); `u32::MAX` when every rank
    /// does (host-side commands, user events).
    /// Commands of other ranks in this one's wait list, when this rank does not learn
    /// their statuses as the command runs (a non-blocking device command): the ranks
    /// agree on them where the application asks (`wait_all`, `polled_status`).
    waits_elsewhere: std::sync::OnceLock<Vec<Weak<Event>>>,
    /// The application's wait list, kept while host threads are looked at for races
    /// (`races`): what orders this command after other threads' commands.
    pub after: std::sync::OnceLock<Box<[Weak<Event>]>>,
    /// What it completes after and nothing else (`complete_after`: a command left out
    /// or run on another rank, a host-side command): a vendor may wait on these instead.
    joins: OnceLock<Box<[Weak<Event>]>>,
    /// A host thread waited for it (`clWaitForEvents`, a blocking command, a status
    /// polled as complete; `clFinish` marks its queue instead).
    host_waited: std::sync::atomic::AtomicBool,
    /// Another rank waits for it (a read whose bytes are sent): an issuer polls it
    /// before the events only this rank waits for.
    urgent: std::sync::atomic::AtomicBool,
    /// Launched without a vendor event, to be backed later (`issuer::Unbacked`).
    unbacked: std::sync::atomic::AtomicBool,
    /// The command's name on every rank (`host_threads::next_command`; 0: none), which
    /// the message with its final status is tagged by once threads are named.
    pub command: AtomicU64,
    owner: std::sync::atomic::AtomicU32,
    status: AtomicI32,
    state: Mutex<State>,
    done: Condvar,
    /// Host clock (ns) when queued, submitted, started, ended.
    times: [AtomicU64; 4],
}

impl_handle!(Event, Event, CL_INVALID_EVENT);

pub fn command_name(t: cl_command_type) -> &'static str {
    match t {
        CL_COMMAND_NDRANGE_KERNEL => "clEnqueueNDRangeKernel",
        CL_COMMAND_TASK => "clEnqueueTask",
        CL_COMMAND_READ_BUFFER => "clEnqueueReadBuffer",
        CL_COMMAND_WRITE_BUFFER => "clEnqueueWriteBuffer",
        CL_COMMAND_COPY_BUFFER => "clEnqueueCopyBuffer",
        CL_COMMAND_MAP_BUFFER => "clEnqueueMapBuffer",
        CL_COMMAND_UNMAP_MEM_OBJECT => "clEnqueueUnmapMemObject",
        CL_COMMAND_MARKER => "clEnqueueMarker",
        CL_COMMAND_BARRIER => "clEnqueueBarrier",
        CL_COMMAND_READ_BUFFER_RECT => "clEnqueueReadBufferRect",
        CL_COMMAND_WRITE_BUFFER_RECT => "clEnqueueWriteBufferRect",
        CL_COMMAND_COPY_BUFFER_RECT => "clEnqueueCopyBufferRect",
        CL_COMMAND_USER => "user event",
        CL_COMMAND_FILL_BUFFER => "clEnqueueFillBuffer",
        CL_COMMAND_MIGRATE_MEM_OBJECTS => "clEnqueueMigrateMemObjects",
        _ => "command",
    }
}

impl Event {
    pub fn new(
        context: Arc<Context>,
        queue: Option<&Arc<Queue>>,
        command_type: cl_command_type,
        stream: u64,
    ) -> Arc<Event> {
        let profiling = queue.is_some_and(|q| q.properties & CL_QUEUE_PROFILING_ENABLE != 0);
        let ev = Arc::new(Event {
            header: Header::new(),
            context,
            queue: queue.map(Arc::downgrade),
            queue_handle: queue.map_or(0, |q| Arc::as_ptr(q) as usize),
            command_type,
            stream,
            vendor: OnceLock::new(),
            seq: crate::cluster::host_threads::take_seq(),
            profiling,
            outlives_vendor: std::sync::atomic::AtomicBool::new(false),
            subject: AtomicU64::new(0),
            owner: std::sync::atomic::AtomicU32::new(u32::MAX),
            waits_elsewhere: std::sync::OnceLock::new(),
            after: std::sync::OnceLock::new(),
            joins: OnceLock::new(),
            host_waited: std::sync::atomic::AtomicBool::new(false),
            urgent: std::sync::atomic::AtomicBool::new(false),
            unbacked: std::sync::atomic::AtomicBool::new(false),
            command: AtomicU64::new(0),
            status: AtomicI32::new(if command_type == CL_COMMAND_USER {
                CL_SUBMITTED
            } else {
                CL_QUEUED
            }),
            state: Mutex::new(State::default()),
            done: Condvar::new(),
            times: Default::default(),
        });
        if profiling {
            ev.times[0].store(now_ns(), Ordering::Relaxed);
        }
        ev
    }

    pub fn queue(&self) -> Option<Arc<Queue>> {
        self.queue.as_ref().and_then(Weak::upgrade)
    }

    /// A host thread waited for this command: it and its queue's earlier commands are
    /// ordered before whatever any thread enqueues next.
    pub fn host_waited(&self) {
        // Only race checks read it, and they run only where threads are named.
        if !crate::cluster::host_threads::several() {
            return;
        }
        self.host_waited.store(true, Ordering::Release);
        if let Some(q) = self.queue() {
            q.waited_through(self.seq);
        }
    }

    /// Whether a host thread waited for this command or a later one of its queue.
    pub fn was_host_waited(&self) -> bool {
        self.host_waited.load(Ordering::Acquire)
            || self
                .queue()
                .is_some_and(|q| q.waited_through_seq() >= self.seq)
    }

    pub fn status(&self) -> cl_int {
        self.status.load(Ordering::Acquire)
    }

    pub fn is_done(&self) -> bool {
        self.status() <= CL_COMPLETE
    }

    pub fn set_owner(&self, rank: u32) {
        self.owner.store(rank, Ordering::Relaxed);
    }

    /// The rank that runs the command, if only one does.
    pub fn owner(&self) -> Option<u32> {
        let o = self.owner.load(Ordering::Relaxed);
        (o != u32::MAX).then_some(o)
    }

    /// Takes the status the command's owner reported, at a collective every rank makes
    /// at the same point: another rank's failure replaces the `CL_COMPLETE` this rank's
    /// bookkeeping gave a command it did not run (the one change of a final status, so
    /// that every rank answers the owner's; an error is never replaced).
    pub fn adopt(self: &Arc<Self>, status: cl_int) {
        if status >= 0 {
            return;
        }
        if !self.finish(status) {
            let _ = self.status.compare_exchange(
                CL_COMPLETE,
                status,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    pub fn set_subject(&self, buffer: u64) {
        self.subject.store(buffer, Ordering::Relaxed);
    }

    pub fn set_outlives_vendor(&self) {
        self.outlives_vendor.store(true, Ordering::Relaxed);
    }

    pub fn outlives_vendor(&self) -> bool {
        self.outlives_vendor.load(Ordering::Relaxed)
    }

    pub fn keep(&self, obj: Arc<dyn Any + Send + Sync>) {
        self.state.lock().keep.push(obj);
    }

    /// `keep` for each of `objs`; none if the event is done already (its completion let
    /// go of what it kept, and these would stay until the event goes).
    pub fn keep_all(&self, objs: impl Iterator<Item = Arc<dyn Any + Send + Sync>>) {
        let mut st = self.state.lock();
        // Under the lock: `settle` marks the event done before it takes what is kept.
        if !self.is_done() {
            st.keep.extend(objs);
        }
    }

    /// Records the commands this one runs after (a vendor command's dependencies), so
    /// that its completion completes them too. Held weakly: a dependency nothing else
    /// holds is gone already, with what it kept. Also answers, under the same lock,
    /// whether anything waits for its completion by callback yet.
    pub fn waits_for(&self, deps: &[Arc<Event>]) -> bool {
        let mut st = self.state.lock();
        st.waits_for
            .extend((deps.iter()).filter(|d| !d.is_done()).map(Arc::downgrade));
        !st.callbacks.is_empty()
    }

    /// Moves the status forward to `stage` (never back, never from a final status),
    /// running callbacks due; whether it moved.
    fn advance(self: &Arc<Self>, stage: cl_int) -> bool {
        if !advance_status(&self.status, stage) {
            return false;
        }
        if self.profiling {
            let t = now_ns();
            if stage <= CL_SUBMITTED {
                let _ = self.times[1].compare_exchange(0, t, Ordering::AcqRel, Ordering::Acquire);
            }
            if stage <= CL_RUNNING {
                let _ = self.times[2].compare_exchange(0, t, Ordering::AcqRel, Ordering::Acquire);
            }
            if stage <= CL_COMPLETE {
                self.times[3].store(t, Ordering::Release);
            }
        }
        self.run_callbacks(stage);
        true
    }

    /// Final status: `CL_COMPLETE` or a negative error. The first final status wins.
    pub fn complete(self: &Arc<Self>, status: cl_int) {
        self.finish(status);
    }

    /// `complete`, saying whether this status was the first final one.
    ///
    /// The vendor commands this one waited for are done too, but nothing tells MirrorCL
    /// of those nobody polls or waits for (a transfer step waited for inside the vendor
    /// by the command it serves): each is asked now, so that it lets go of what it
    /// keeps. Otherwise a transfer's event kept its buffer, and the scheduler kept the
    /// event until the buffer was gone: every released buffer stayed allocated (the CTS
    /// `basic` `async_copy_global_to_local`: 24 GB resident, natively 2.4 GB). A loop
    /// rather than recursion: the chain behind a command may be long.
    fn finish(self: &Arc<Self>, status: cl_int) -> bool {
        let Some(mut waited) = self.settle(status) else {
            return false;
        };
        while let Some(dep) = waited.pop() {
            let Some(dep) = dep.upgrade().filter(|d| !d.is_done()) else {
                continue;
            };
            if let Some(status) = dep.vendor_final() {
                waited.extend(dep.settle(status).unwrap_or_default());
            }
        }
        true
    }

    /// Completes this event alone: the commands it waited for, or `None` if another
    /// final status came first.
    fn settle(self: &Arc<Self>, status: cl_int) -> Option<Waited> {
        let status = status.min(CL_COMPLETE);
        if !self.advance(status) {
            return None;
        }
        if crate::observe::trace::on() {
            crate::observe::trace::instant(
                "complete",
                command_name(self.command_type),
                crate::trace_args![("command", self.seq), ("status", status)],
            );
        }
        let (keep, waited) = {
            let mut st = self.state.lock();
            self.done.notify_all();
            (
                std::mem::take(&mut st.keep),
                std::mem::take(&mut st.waits_for),
            )
        };
        drop(keep);
        Some(waited)
    }

    /// Another rank waits for this event (`urgent`); before `on_done`.
    pub fn mark_urgent(&self) {
        self.urgent.store(true, Ordering::Relaxed);
    }

    pub fn is_urgent(&self) -> bool {
        self.urgent.load(Ordering::Relaxed)
    }

    /// Profiling information: the vendor's timestamps when the command ran on a vendor
    /// queue, MirrorCL's own (same monotonic time base) otherwise.
    pub fn profiling_info(&self, param: cl_profiling_info) -> ClResult<cl_ulong> {
        if !self.profiling || self.command_type == CL_COMMAND_USER || !self.is_done() {
            return Err(CL_PROFILING_INFO_NOT_AVAILABLE);
        }
        let index = match param {
            CL_PROFILING_COMMAND_QUEUED => 0,
            CL_PROFILING_COMMAND_SUBMIT => 1,
            CL_PROFILING_COMMAND_START => 2,
            CL_PROFILING_COMMAND_END => 3,
            _ => return Err(CL_INVALID_VALUE),
        };
        if let Some(Ok(value)) = self.vendor().map(|v| v.ev.profiling_info(param)) {
            return Ok(value);
        }
        let t: Vec<u64> = self
            .times
            .iter()
            .map(|t| t.load(Ordering::Acquire))
            .collect();
        // Fill stages that were skipped (a host command has no separate submit/start).
        let mut out = t[0];
        for v in &t[..=index] {
            if *v != 0 {
                out = (*v).max(out);
            }
        }
        Ok(out)
    }
}

unsafe extern "C" fn vendor_complete(_ev: cl_event, status: cl_int, data: *mut c_void) {
    // SAFETY: `data` is the Arc<Event> leaked in attach_vendor, taken back exactly once.
    let event = unsafe { Arc::from_raw(data as *const Event) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        event.complete(if status < 0 { status } else { CL_COMPLETE })
    }));
}

/// A user event (`clCreateUserEvent`).
pub fn user_event(context: Arc<Context>) -> Arc<Event> {
    Event::new(context, None, CL_COMMAND_USER, u64::MAX)
}

/// User events that a command waits for and whose status is not set yet, kept alive
/// until it is. Vendors keep such an event with the command, so a program may release
/// it before it sets the status (a common sample bug that every vendor accepts); a rank
/// that left the command out, or passed it to another rank's device, holds nothing of
/// it, and answered `CL_INVALID_EVENT` where the owner answered `CL_SUCCESS`. Every rank
/// makes the same enqueue calls, so every rank keeps the same events.
static AWAITED_USER_EVENTS: Mutex<Vec<Arc<Event>>> = Mutex::new(Vec::new());

/// Keeps `event` while its status is unset, if it is a user event (a command's wait
/// list names it).
pub fn keep_while_awaited(event: &Arc<Event>) {
    if event.command_type != CL_COMMAND_USER || event.is_done() {
        return;
    }
    let mut kept = AWAITED_USER_EVENTS.lock();
    if !kept.iter().any(|e| Arc::ptr_eq(e, event)) {
        kept.push(event.clone());
    }
    drop(kept);
    // Set meanwhile by another thread: `set_user_status` may have looked already.
    if event.is_done() {
        let_go_of_awaited(event);
    }
}

fn let_go_of_awaited(event: &Arc<Event>) {
    let released = {
        let mut kept = AWAITED_USER_EVENTS.lock();
        let at = kept.iter().position(|e| Arc::ptr_eq(e, event));
        at.map(|i| kept.swap_remove(i))
    };
    // Dropped with the lock let go: the last reference deletes the event.
    drop(released);
}

/// `clSetUserEventStatus`.
pub fn set_user_status(event: &Arc<Event>, status: cl_int) -> ClResult<()> {
    if event.command_type != CL_COMMAND_USER {
        return Err(CL_INVALID_EVENT);
    }
    if status > CL_COMPLETE {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_OPERATION if the status was already set (by another thread too).
    if !event.finish(status) {
        return Err(CL_INVALID_OPERATION);
    }
    let_go_of_awaited(event);
    Ok(())
}

/// Moves `status` forward to `stage`: execution statuses only decrease (queued,
/// submitted, running), and `CL_COMPLETE` and errors are final, so the first final
/// status set wins. Whether it moved.
fn advance_status(status: &AtomicI32, stage: cl_int) -> bool {
    let mut cur = status.load(Ordering::Acquire);
    loop {
        if cur <= CL_COMPLETE || cur <= stage {
            return false;
        }
        match status.compare_exchange(cur, stage, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_statuses_are_final() {
        let s = AtomicI32::new(CL_QUEUED);
        assert!(advance_status(&s, CL_SUBMITTED));
        assert!(!advance_status(&s, CL_QUEUED), "never back");
        assert!(advance_status(&s, CL_RUNNING));
        assert!(advance_status(&s, CL_COMPLETE));
        // A completed command stays complete: no error afterwards, nor anything else.
        for later in [
            CL_OUT_OF_RESOURCES,
            CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
            -1000,
        ] {
            assert!(!advance_status(&s, later));
        }
        assert_eq!(s.load(Ordering::Acquire), CL_COMPLETE);
        // A failed one keeps its first error, even a "more negative" one.
        let s = AtomicI32::new(CL_RUNNING);
        assert!(advance_status(&s, CL_OUT_OF_RESOURCES));
        assert!(!advance_status(
            &s,
            CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
        ));
        assert!(!advance_status(&s, CL_COMPLETE));
        assert_eq!(s.load(Ordering::Acquire), CL_OUT_OF_RESOURCES);
    }

    /// Threads racing to end one command: exactly one wins and its status stays.
    #[test]
    fn the_first_final_status_wins_a_race() {
        for _ in 0..200 {
            let s = Arc::new(AtomicI32::new(CL_RUNNING));
            let finals = [CL_COMPLETE, CL_OUT_OF_RESOURCES, -1000, CL_COMPLETE];
            let handles: Vec<_> = finals
                .iter()
                .map(|&f| {
                    let s = s.clone();
                    std::thread::spawn(move || advance_status(&s, f).then_some(f))
                })
                .collect();
            let won: Vec<cl_int> = handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect();
            assert_eq!(won.len(), 1, "one final status is set: {won:?}");
            assert_eq!(s.load(Ordering::Acquire), won[0]);
        }
    }
}
