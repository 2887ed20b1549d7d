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

enum Callback {
    User {
        stage: cl_int,
        f: UserCallback,
        data: usize,
        /// Its own host-thread slot, where it was registered on the main thread of a
        /// cluster (`host_threads::CallbackSlot`).
        slot: Option<crate::cluster::host_threads::CallbackSlot>,
    },
    Internal(Box<dyn FnOnce(cl_int) + Send>),
    /// Sends another rank waits for: kept before the others (`on_done_first`).
    First(Box<dyn FnOnce(cl_int) + Send>),
    /// One dependency of a `complete_after` arriving (`fails`: its failure counts).
    /// Not boxed: commands other ranks run join several events each.
    Join {
        join: Arc<Join>,
        fails: bool,
    },
}

impl Callback {
    fn due(&self, status: cl_int) -> bool {
        match self {
            Callback::User { stage, .. } => status <= *stage,
            _ => status <= CL_COMPLETE,
        }
    }
}

/// Most events get one or two callbacks: inline, no allocation.
type Callbacks = SmallVec<[Callback; 2]>;

/// An event completing after its dependencies (`complete_after_ordered`).
struct Join {
    event: Arc<Event>,
    remaining: AtomicI32,
    error: AtomicI32,
}

impl Join {
    /// One dependency done with `status`; only one whose failure counts (`fails`)
    /// fails the event.
    fn arrive(&self, status: cl_int, fails: bool) {
        let status = if fails {
            status
        } else {
            status.max(CL_COMPLETE)
        };
        if status < 0 {
            self.error.store(
                CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
                Ordering::Release,
            );
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.event.complete(self.error.load(Ordering::Acquire));
        }
    }
}

/// A vendor event, with the final status a poll found: the other commands it stands
/// for (a kernel and the read after it, the writes a merged write carries) are then
/// found done without asking the vendor again.
pub struct SharedVEvent {
    ev: VEvent,
    /// `NOT_FOUND` until a poll found the vendor done with it.
    found: AtomicI32,
}

const NOT_FOUND: cl_int = cl_int::MAX;

impl SharedVEvent {
    pub fn new(ev: VEvent) -> SharedVEvent {
        SharedVEvent {
            ev,
            found: AtomicI32::new(NOT_FOUND),
        }
    }

    /// The final status, if the vendor is done with the command.
    fn final_status(&self) -> Option<cl_int> {
        let found = self.found.load(Ordering::Acquire);
        if found != NOT_FOUND {
            return Some(found);
        }
        match self.ev.status() {
            Ok(status) if status <= CL_COMPLETE => {
                self.found.store(status, Ordering::Release);
                Some(status)
            }
            _ => None,
        }
    }
}

impl std::ops::Deref for SharedVEvent {
    type Target = VEvent;
    fn deref(&self) -> &VEvent {
        &self.ev
    }
}

/// The vendor event a command was issued as.
pub struct VendorEvent {
    /// Shared by the commands it stands for (`IssuerState::back_with`) without asking
    /// the vendor for a reference each.
    pub ev: Arc<SharedVEvent>,
    /// The vendor context it belongs to: only there can it be waited on directly.
    pub context: ContextKey,
    pub stream: u64,
}

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

    /// See `waits_elsewhere`; set once, at submission.
    pub fn set_waits_elsewhere(&self, events: Vec<Weak<Event>>) {
        let _ = self.waits_elsewhere.set(events);
    }

    fn waits_elsewhere(&self) -> &[Weak<Event>] {
        self.waits_elsewhere.get().map_or(&[], Vec::as_slice)
    }

    /// The statuses this rank reports for the commands of other ranks that `events`
    /// wait for (`waits_elsewhere`): those it owns, numbered from `first` in the order
    /// every rank lists them.
    fn elsewhere_statuses(events: &[Arc<Event>], first: u32, rank: u32) -> Vec<(u32, cl_int)> {
        let waited = events.iter().flat_map(|e| e.waits_elsewhere());
        (waited.enumerate())
            .filter_map(|(k, w)| {
                let w = w.upgrade()?;
                (w.owner() == Some(rank)).then(|| (first + k as u32, w.status()))
            })
            .collect()
    }

    /// Which of `events` waits for the `k`-th command of `elsewhere_statuses`.
    fn waiting_for(events: &[Arc<Event>], k: usize) -> Option<&Arc<Event>> {
        let mut k = k;
        for e in events {
            let n = e.waits_elsewhere().len();
            if k < n {
                return Some(e);
            }
            k -= n;
        }
        None
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

    pub fn vendor(&self) -> Option<&VendorEvent> {
        self.vendor.get()
    }

    /// Its kernel goes to the vendor without a vendor event (`issuer::Unbacked`).
    pub fn set_unbacked(&self) {
        self.unbacked.store(true, Ordering::Release);
    }

    /// Launched without a vendor event, and neither backed by one nor done yet.
    pub fn is_unbacked(&self) -> bool {
        self.unbacked.load(Ordering::Acquire) && self.vendor().is_none() && !self.is_done()
    }

    /// Something needs this unbacked kernel's completion: its issuer backs it.
    pub fn request_backing(&self) {
        if let Some(q) = self.queue() {
            if q.device.local() {
                q.device.issuer().back();
            }
        }
    }

    /// The command reached its vendor: it now completes with the vendor event.
    pub fn attach_vendor(self: &Arc<Self>, vendor: VendorEvent) {
        if self.vendor.set(vendor).is_err() {
            tracing::error!("a command was issued twice; keeping its first vendor event");
            return;
        }
        let wants_callback = {
            // Set before the lock is taken: a waiter that found no vendor event under
            // the lock is parked by the time this notifies.
            let st = self.state.lock();
            self.done.notify_all();
            !st.callbacks.is_empty()
        };
        self.advance(CL_SUBMITTED);
        if wants_callback {
            self.request_vendor_callback();
        }
    }

    /// Whether a vendor queue of `context` (in-order stream `stream`) can wait for this
    /// event by itself: it is done, or issued there, or it only joins events that are
    /// (looked through `depth` joins deep). A command left out here, or run on another
    /// rank, completes once its wait list has; holding a command for it until then
    /// would cost a completion round trip on the host per command of a chain.
    pub fn vendor_waitable(&self, context: Option<ContextKey>, stream: u64, depth: u32) -> bool {
        if self.is_done() {
            return true;
        }
        if let Some(v) = self.vendor() {
            return v.stream == stream || Some(v.context) == context;
        }
        if self.is_unbacked() {
            // Its vendor queue's order is the only way to wait for it.
            return self.stream == stream;
        }
        depth > 0
            && self.joins.get().is_some_and(|joins| {
                joins.iter().all(|j| {
                    j.upgrade()
                        .is_some_and(|e| e.vendor_waitable(context, stream, depth - 1))
                })
            })
    }

    /// For a `vendor_waitable` event: the events not done whose vendor events stand
    /// for it, appended to `out` (none on `stream`, which is in order).
    pub fn vendor_stand_ins(self: &Arc<Self>, stream: u64, out: &mut StandIns) {
        if self.is_done() {
            return;
        }
        match self.vendor() {
            Some(v) if v.stream == stream => {}
            Some(_) => out.push(self.clone()),
            None => {
                for e in (self.joins.get().into_iter().flatten()).filter_map(Weak::upgrade) {
                    e.vendor_stand_ins(stream, out);
                }
            }
        }
    }

    /// Asks the vendor to report completion (once), if the command reached it. On an
    /// issuer, with no application callback, the issuer polls the event instead and
    /// registers the callback only when it parks: NVIDIA enqueues 3-5 µs slower while
    /// callbacks are pending. The issuer asks here right after the vendor call, so it
    /// does not poll first (the command was just enqueued): a merged write backs the
    /// writes it carries, and one poll each held the kernel after them.
    fn request_vendor_callback(self: &Arc<Self>) {
        if self.vendor().is_none() {
            if self.is_unbacked() {
                self.request_backing();
            }
            return;
        }
        {
            let mut st = self.state.lock();
            if st.vendor_callback {
                return;
            }
            st.vendor_callback = true;
        }
        if (!self.has_user_callbacks() && crate::objects::issuer::watch(self, false)) || self.poll()
        {
            return;
        }
        self.register_vendor_callback();
    }

    /// `clSetEventCallback` on the vendor event, which exists.
    pub(crate) fn register_vendor_callback(self: &Arc<Self>) {
        let Some(vendor) = self.vendor() else {
            return;
        };
        let raw = Arc::into_raw(self.clone()) as *mut c_void;
        let traced = crate::observe::trace::begin();
        // SAFETY: the trampoline takes back the Arc passed here, exactly once.
        let rc = unsafe { vendor.ev.on_complete(vendor_complete, raw) };
        if traced != 0 {
            crate::observe::trace::span(
                "vendor",
                "clSetEventCallback",
                traced,
                crate::trace_args![],
            );
        }
        match rc {
            // Some vendors (PoCL 3.1) never call back for an event already complete
            // when the callback is registered, which the specification requires.
            Ok(()) => {
                if !self.poll() && !self.has_user_callbacks() {
                    crate::objects::issuer::watch(self, true);
                }
            }
            Err(rc) => {
                // SAFETY: the callback was not registered, so the reference is still ours.
                drop(unsafe { Arc::from_raw(raw as *const Event) });
                tracing::error!("vendor clSetEventCallback failed ({rc}); waiting on the event");
                self.wait_vendor(vendor);
            }
        }
    }

    /// Application callbacks run where the vendor calls back, never on an issuer.
    pub fn has_user_callbacks(&self) -> bool {
        (self.state.lock().callbacks.iter()).any(|c| matches!(c, Callback::User { .. }))
    }

    /// Blocks in the vendor until its event is done, then completes this event.
    fn wait_vendor(self: &Arc<Self>, vendor: &VendorEvent) {
        // A failed wait is found by the poll below (or the deadline).
        let _ = vendor.ev.wait();
        self.poll();
    }

    /// Checks the vendor event; completes this event if the vendor is done with it.
    /// Returns whether this event is done.
    pub fn poll(self: &Arc<Self>) -> bool {
        if self.is_done() {
            return true;
        }
        match self.vendor_final() {
            Some(status) => {
                self.complete(status);
                true
            }
            None => false,
        }
    }

    /// Whether the vendor reports the command complete (whether or not this event knows
    /// yet).
    pub fn vendor_complete(&self) -> bool {
        self.vendor_final() == Some(CL_COMPLETE)
    }

    /// The vendor event's final status, if the vendor is done with it.
    fn vendor_final(&self) -> Option<cl_int> {
        self.vendor()?.ev.final_status()
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

    fn run_callbacks(self: &Arc<Self>, status: cl_int) {
        let due: Callbacks = {
            let mut st = self.state.lock();
            // A command reaching its vendor (`CL_SUBMITTED`) has none due but an
            // application's: its list is left as it is.
            if !st.callbacks.iter().any(|cb| cb.due(status)) {
                return;
            }
            if st.callbacks.iter().all(|cb| cb.due(status)) {
                std::mem::take(&mut st.callbacks)
            } else {
                let (due, rest) =
                    (std::mem::take(&mut st.callbacks).into_iter()).partition(|cb| cb.due(status));
                st.callbacks = rest;
                due
            }
        };
        for cb in due {
            match cb {
                Callback::User {
                    stage,
                    f,
                    data,
                    slot,
                } => {
                    let arg = if status < 0 { status } else { stage };
                    // Kept alive until it runs, should it wait for a scheduler lock.
                    let event = self.clone();
                    run_unlocked(move || {
                        let handle = Arc::as_ptr(&event) as cl_event;
                        let _in_callback = InCallback::enter();
                        let call = || {
                            // SAFETY: the application registered this callback for this
                            // event.
                            let _ = std::panic::catch_unwind(|| unsafe {
                                f(handle, arg, data as *mut c_void)
                            });
                        };
                        match slot {
                            Some(slot) => slot.run(call),
                            None => call(),
                        }
                    });
                }
                Callback::Internal(f) | Callback::First(f) => f(status),
                Callback::Join { join, fails } => join.arrive(status, fails),
            }
        }
    }

    /// Registers an application callback for `stage` (`clSetEventCallback`).
    pub fn add_user_callback(self: &Arc<Self>, stage: cl_int, f: UserCallback, data: *mut c_void) {
        let slot = crate::cluster::host_threads::CallbackSlot::new();
        self.state.lock().callbacks.push(Callback::User {
            stage,
            f,
            data: data as usize,
            slot,
        });
        let status = self.status();
        if status <= stage {
            self.run_callbacks(status);
        } else {
            self.request_vendor_callback();
        }
    }

    /// Another rank waits for this event (`urgent`); before `on_done`.
    pub fn mark_urgent(&self) {
        self.urgent.store(true, Ordering::Relaxed);
    }

    pub fn is_urgent(&self) -> bool {
        self.urgent.load(Ordering::Relaxed)
    }

    /// Runs `f` with the final status once the event is done (now, if it is).
    pub fn on_done(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static) {
        self.on_done_as(f, false);
    }

    /// `on_done` for what another rank waits for (a send): it runs before the event's
    /// other callbacks. A read shared by three sends completed the bookkeeping of
    /// other ranks' commands between them on four H100, and the last send left up to
    /// 17 µs after the first.
    pub fn on_done_first(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static) {
        self.on_done_as(f, true);
    }

    fn on_done_as(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static, first: bool) {
        if self.is_done() {
            return f(self.status());
        }
        let f = Box::new(f);
        let callback = match first {
            true => Callback::First(f),
            false => Callback::Internal(f),
        };
        if let Err(Callback::Internal(f) | Callback::First(f)) = self.push_callback(callback) {
            f(self.status());
        }
    }

    /// Keeps `callback` for when the event is done, or hands it back if it is.
    fn push_callback(self: &Arc<Self>, callback: Callback) -> Result<(), Callback> {
        let mut st = self.state.lock();
        if self.is_done() {
            return Err(callback);
        }
        match callback {
            // After the earlier ones of its kind, before all others.
            Callback::First(_) => {
                let at = (st.callbacks.iter())
                    .take_while(|c| matches!(c, Callback::First(_)))
                    .count();
                st.callbacks.insert(at, callback);
            }
            _ => st.callbacks.push(callback),
        }
        drop(st);
        self.request_vendor_callback();
        Ok(())
    }

    /// Completes this event after all of `deps`; a failed dependency fails it.
    pub fn complete_after(self: &Arc<Self>, deps: Vec<Arc<Event>>) {
        let n = deps.len();
        self.complete_after_ordered(deps, n);
    }

    /// Completes this event after all of `deps`; a failure of one of the first `failing`
    /// (the application's wait list) fails it, the others (orderings MirrorCL adds) only
    /// order it.
    pub fn complete_after_ordered(self: &Arc<Self>, mut deps: Vec<Arc<Event>>, failing: usize) {
        // Those already done need no callback (a lock of theirs, two allocations): only
        // a failure among the first `failing` counts. For `vendor_waitable` a done event
        // stands for nothing, so `joins` keeps only the others.
        let (mut error, mut i, mut failing_kept) = (0, 0, 0);
        deps.retain(|dep| {
            let fails = i < failing;
            i += 1;
            let status = dep.status();
            if status > CL_COMPLETE {
                failing_kept += usize::from(fails);
                return true;
            }
            if fails && status < 0 {
                error = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
            }
            false
        });
        let failing = failing_kept;
        let _ = self.joins.set(deps.iter().map(Arc::downgrade).collect());
        self.advance(CL_SUBMITTED);
        if deps.is_empty() {
            self.complete(error);
            return;
        }
        let join = Arc::new(Join {
            event: self.clone(),
            remaining: AtomicI32::new(deps.len() as i32 + 1),
            error: AtomicI32::new(error),
        });
        for (i, dep) in deps.into_iter().enumerate() {
            let fails = i < failing;
            let callback = Callback::Join {
                join: join.clone(),
                fails,
            };
            if let Err(Callback::Join { join, fails }) = dep.push_callback(callback) {
                join.arrive(dep.status(), fails);
            }
        }
        join.arrive(CL_COMPLETE, false);
    }

    /// Blocks until the event is done; returns its final status. Spins briefly, then
    /// waits inside the vendor once the command has reached it (the vendor's own wake-up
    /// path, as fast as a native wait), or parks until it does.
    pub fn wait(self: &Arc<Self>) -> cl_int {
        if let Some(q) = self.queue() {
            if q.device.local() {
                q.device.issuer().note_waited();
            }
        }
        if self.is_done() {
            self.host_waited();
            return self.status();
        }
        if self.is_unbacked() {
            self.request_backing();
        }
        let start = crate::observe::stats::on().then(Instant::now);
        let traced = crate::observe::trace::begin();
        let status = self.wait_inner();
        if let Some(start) = start {
            let waited = start.elapsed().as_nanos() as u64;
            crate::observe::stats::add(&crate::observe::stats::COUNTERS.waiting_ns, waited);
        }
        if traced != 0 {
            crate::observe::trace::span(
                "wait",
                "wait",
                traced,
                crate::trace_args![
                    ("command", self.seq),
                    ("for", command_name(self.command_type))
                ],
            );
        }
        self.host_waited();
        status
    }

    fn wait_inner(self: &Arc<Self>) -> cl_int {
        let platform = crate::objects::platform::platform();
        let start = Instant::now();
        // Polling the vendor's status while spinning catches completion sooner than a
        // vendor wait's own wake-up; spinning only while a core is free (`crate::objects::spin`).
        let mut spin = crate::objects::spin::Spin::new(platform.config.spin());
        let mut polls = 0u32;
        while spin.spinning() {
            if self.is_done() {
                return self.status();
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(16) && self.poll() {
                return self.status();
            }
            std::hint::spin_loop();
        }
        let deadline = platform.config.wait_timeout().map(|t| start + t);
        let mut waited_in_vendor = false;
        loop {
            if self.is_done() {
                return self.status();
            }
            if !waited_in_vendor {
                if let Some(v) = self.vendor() {
                    waited_in_vendor = true;
                    self.wait_vendor(v);
                    continue;
                }
            }
            // Not issued yet, or the vendor gave up on it without saying (a failed
            // dependency): park until MirrorCL attaches or completes it.
            let mut st = self.state.lock();
            if self.is_done() || (!waited_in_vendor && self.vendor().is_some()) {
                continue;
            }
            match deadline {
                Some(d) => {
                    if self.done.wait_until(&mut st, d).timed_out() && !self.is_done() {
                        drop(st);
                        self.deadline_expired(d.duration_since(start));
                    }
                }
                None => self.done.wait(&mut st),
            }
        }
    }

    fn deadline_expired(&self, waited: Duration) -> ! {
        let p = crate::objects::platform::platform();
        let node = crate::cluster::node::node();
        let mut report = format!(
            "MirrorCL: rank {} waited {:.0} s for command #{} ({}) on {}; it never completed \
             (status {}). Deadline: MIRRORCL_WAIT_TIMEOUT.",
            p.rank,
            waited.as_secs_f64(),
            self.seq,
            command_name(self.command_type),
            self.queue()
                .map(|q| {
                    let d = &q.device;
                    let owner = if d.local() {
                        String::new()
                    } else {
                        format!(", owned by rank {}", d.owner)
                    };
                    format!("device {} ({}{owner})", d.index, d.name())
                })
                .unwrap_or_else(|| "no queue (user event)".into()),
            self.status()
        );
        let buffer = self.subject.load(Ordering::Relaxed);
        if buffer != 0 {
            report.push_str(&format!(" It uses buffer #{buffer}."));
        }
        for line in node.pending_report() {
            report.push_str(&format!("\n  still waiting: {line}"));
        }
        self.report_unfinished_deps(&mut report, 2);
        crate::diag!("{report}\nMirrorCL: aborting the job.");
        node.abort();
    }

    /// The commands it waits for that are not done, and theirs (`depth` levels below
    /// the first), for a deadline report: whether each reached its vendor tells a
    /// command held back from one stuck inside the vendor.
    fn report_unfinished_deps(&self, report: &mut String, depth: usize) {
        let deps: Vec<Arc<Event>> = (self.state.lock().waits_for.iter())
            .filter_map(Weak::upgrade)
            .filter(|d| !d.is_done())
            .collect();
        for d in deps.iter().take(8) {
            let indent = "  ".repeat(3 - depth.min(2));
            report.push_str(&format!(
                "\n  {indent}waits for command #{} ({}{}), status {}, {}",
                d.seq,
                command_name(d.command_type),
                d.queue()
                    .map(|q| format!(" on device {}", q.device.index))
                    .unwrap_or_default(),
                d.status(),
                match d.vendor() {
                    Some(v) => format!("in the vendor (its status {:?})", v.ev.status()),
                    None if d.is_unbacked() => "in the vendor, without a vendor event yet".into(),
                    None => "not issued".into(),
                }
            ));
            if depth > 0 {
                d.report_unfinished_deps(report, depth - 1);
            }
        }
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

/// Waits for all of `events`; the first failed one gives
/// `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST`.
/// `clWaitForEvents`. In a cluster the ranks then agree on the statuses: each command's
/// owner reports those of its commands (a collective: every replica waits for the same
/// list), so a command that failed on its owner reports its error on every rank.
pub fn wait_all(events: &[Arc<Event>]) -> ClResult<()> {
    for e in events {
        e.wait();
    }
    let node = crate::cluster::node::node();
    if node.is_cluster() && crate::cluster::host_threads::several() {
        statuses_from_owners(events);
    } else if node.is_cluster() && events.iter().any(|e| e.owner().is_some()) {
        let what: Vec<u64> = (events.iter())
            .map(|e| (e.command_type as u64) << 32 | e.owner().unwrap_or(u32::MAX) as u64)
            .collect();
        crate::cluster::history::note_call("clWaitForEvents", &what);
        let mut mine: Vec<(u32, cl_int)> = (events.iter().enumerate())
            .filter(|(_, e)| e.owner() == Some(node.rank))
            .map(|(i, e)| (i as u32, e.status()))
            .collect();
        let n = events.len();
        mine.extend(Event::elsewhere_statuses(events, n as u32, node.rank));
        for EventStatuses(theirs) in node.exchange(&EventStatuses(mine)) {
            for (i, status) in theirs {
                match (i as usize).checked_sub(n) {
                    None => {
                        if let Some(e) = events.get(i as usize) {
                            e.adopt(status);
                        }
                    }
                    // A command another rank ran, which this one waited for, failed.
                    Some(k) if status < 0 => {
                        if let Some(e) = Event::waiting_for(events, k) {
                            e.adopt(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    // The commands before these in their queues are done too: forget them, as a
    // blocking command does, so that a program that only ever waits here does not keep
    // up to 1,024 completed commands' buffers.
    let mut pruned: Vec<*const Queue> = Vec::new();
    for q in events.iter().filter_map(|e| e.queue()) {
        if !pruned.contains(&Arc::as_ptr(&q)) {
            pruned.push(Arc::as_ptr(&q));
            q.prune_completed();
        }
    }
    if events.iter().any(|e| e.status() < 0) {
        Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    } else {
        Ok(())
    }
}

/// `clWaitForEvents` once the program has named host threads: each command's owner sends
/// its final status to every other rank, tagged by the command's name, and the others
/// take it. No collective: a wait may come from any thread at any point (a finalizer a
/// garbage collector runs, as pyopencl's "nanny" events do), and two ranks need not wait
/// in the same order. (A failure of a command of another rank in a waited command's wait
/// list is not carried here, only the waited commands' own statuses.)
fn statuses_from_owners(events: &[Arc<Event>]) {
    let node = crate::cluster::node::node();
    let what = crate::cluster::node::What {
        command: "a waited command's status",
        buffer: 0,
        offset: 0,
        len: 0,
        // Waits need not come at the same points of any thread's calls on every rank.
        stamp: crate::cluster::history::Stamp::default(),
    };
    for e in events {
        let (Some(owner), command) = (e.owner(), e.command.load(Ordering::Acquire)) else {
            continue;
        };
        if command == 0 {
            continue;
        }
        let tag = crate::cluster::host_threads::status_tag(command);
        if owner == node.rank {
            for peer in (0..node.size).filter(|&r| r != node.rank) {
                node.transfer(crate::cluster::node::Transfer {
                    direction: crate::cluster::node::Direction::Send,
                    peer,
                    tag,
                    ptr: 0,
                    len: 0,
                    what,
                    status: e.status(),
                    done: Box::new(|_| {}),
                });
            }
        } else {
            let status = node.message_status(owner, tag, what);
            e.adopt(status);
        }
    }
}

/// `CL_EVENT_COMMAND_EXECUTION_STATUS`. In a cluster the ranks agree on it: the command's
/// owner reports its status, for an event without an owner the least advanced rank's
/// (a collective: every replica polls in the same order), so a
/// program that branches on a polled status (the CTS `events` `waitlists`) takes the same
/// branch, and makes the same calls, on every rank. In an event callback, which runs at
/// different times on different ranks, the status is this rank's own.
pub fn polled_status(event: &Arc<Event>) -> cl_int {
    // Events nobody waits on learn of completion when asked.
    event.poll();
    let node = crate::cluster::node::node();
    if !node.is_cluster() || crate::cluster::thread_state::in_callback() {
        return event.status();
    }
    let owner = event.owner();
    let what = (event.command_type as u64) << 32 | owner.unwrap_or(u32::MAX) as u64;
    crate::cluster::history::note_call(
        "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
        &[what],
    );
    let mut mine = if owner.is_none() || owner == Some(node.rank) {
        vec![(0, event.status())]
    } else {
        Vec::new()
    };
    let one = std::slice::from_ref(event);
    mine.extend(Event::elsewhere_statuses(one, 1, node.rank));
    let all = node.exchange(&EventStatuses(mine));
    // A command another rank ran, which this one waits for, failed.
    let failed_elsewhere = (all.iter().flat_map(|m| m.0.iter())).any(|&(i, s)| i > 0 && s < 0);
    let all: Vec<EventStatuses> = (all.into_iter())
        .map(|m| EventStatuses(m.0.into_iter().filter(|&(i, _)| i == 0).collect()))
        .collect();
    let answer = match owner {
        Some(owner) => (all.into_iter().nth(owner as usize))
            .and_then(|EventStatuses(s)| s.first().map(|&(_, status)| status)),
        // An event without an owner (a command run on every rank, a user event): the
        // least advanced status of any rank, an error first.
        None => {
            let statuses: Vec<cl_int> = all
                .iter()
                .filter_map(|m| m.0.first().map(|&(_, s)| s))
                .collect();
            let error = statuses.iter().copied().filter(|&s| s < 0).min();
            error.or_else(|| statuses.iter().copied().max())
        }
    };
    let answer = match answer {
        Some(CL_COMPLETE) if failed_elsewhere => Some(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
        a => a,
    };
    match answer {
        Some(status) => {
            if status == CL_COMPLETE && !event.is_done() {
                // The owner is done, this rank's part may not be: a read's bytes may
                // still be on their way here, and the program reads them next.
                event.wait();
            }
            event.adopt(status);
            if status == CL_COMPLETE {
                event.host_waited();
            }
            status
        }
        None => event.status(),
    }
}

/// A user event (`clCreateUserEvent`).
pub fn user_event(context: Arc<Context>) -> Arc<Event> {
    Event::new(context, None, CL_COMMAND_USER, u64::MAX)
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
