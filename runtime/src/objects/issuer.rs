//! One issuer thread per actual device: the only thread that enqueues to that device's
//! vendor queues. Commands arrive in schedule order over a channel; after each batch the
//! vendor queues it touched are flushed, so bursts are submitted together.

use crate::cl::*;
use crate::native::{ContextKey, VMem, VQueue};
use crate::objects::event::{Event, SharedVEvent, VendorEvent};
use crate::observe::config::CallerIssues;
use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// Commands issued on one vendor queue without a vendor event of their own, waiting for
/// the next command on that queue that has one.
pub struct Deferred {
    vqueue: Arc<VQueue>,
    context: ContextKey,
    stream: u64,
    pub events: Vec<Arc<Event>>,
}

impl Deferred {
    /// `ev`, of a later command on their vendor queue, stands for them.
    fn back_with(&self, ev: &Arc<SharedVEvent>) {
        for e in &self.events {
            e.attach_vendor(VendorEvent {
                ev: ev.clone(),
                context: self.context,
                stream: self.stream,
            });
        }
    }
}

/// State an issuer job may use: the vendor queues to flush at the end of the batch, and
/// the kernels issued without a vendor event of their own. Asking a vendor for an event
/// per command is costly (NVIDIA records one per command), so within a batch a kernel
/// launch that a later command of the same batch on the same in-order vendor queue will
/// follow shares that command's event (see `run`).
#[derive(Default)]
pub struct IssuerState {
    /// Held, not borrowed: the application may release a queue while its flush is due.
    /// Inline: a thread that runs a job itself makes a state per job.
    dirty: smallvec::SmallVec<[Arc<VQueue>; 4]>,
    deferred: Vec<Deferred>,
    /// The issuer's kernels launched without a vendor event by the thread that enqueued
    /// them (`RunAs::Unbacked`), per vendor queue, with nothing after them there yet.
    unbacked: Option<Unbacked>,
}

/// Kernels an application thread launched itself without a vendor event, where it asked
/// for no event and only waits through `clFinish` or a blocking command of the same
/// queue: NVIDIA charges an event 1.0-1.4 µs at the launch and more in the wait (a
/// kernel and `clFinish` took 13.5-14.0 µs natively without one, 15.3-16.6 with one).
/// Each is backed before anything else goes to its vendor queue: by the next command
/// there that has its own event and waits for nothing else not done, by a blocking
/// command's return, or by a marker; by `clFinish` of its queue (`Queue::finish`); or,
/// once anything else needs its completion, by a marker the issuer enqueues
/// (`Issuer::back`).
pub type Unbacked = Arc<parking_lot::Mutex<Vec<Deferred>>>;

/// How a job about to go to a vendor queue backs the unbacked kernels before it there.
pub enum Backing {
    /// Its own vendor event, or the one of a later job of its batch, stands for them:
    /// it waits for nothing not done off its queue.
    Follows,
    /// It blocks in the vendor and returns with them done.
    Returns,
    /// A marker with an event goes first.
    Marker,
}

impl IssuerState {
    /// A command went to `queue`: it is flushed at the end of the batch. Taken, not
    /// cloned: the job is done with it.
    pub fn touched(&mut self, queue: Arc<VQueue>) {
        if !self.dirty.iter().any(|q| Arc::ptr_eq(q, &queue)) {
            self.dirty.push(queue);
        }
    }

    /// `event`'s command went to `vqueue` without a vendor event: it completes with the
    /// next command there that has one.
    pub fn defer(
        &mut self,
        vqueue: &Arc<VQueue>,
        context: ContextKey,
        stream: u64,
        event: Arc<Event>,
    ) {
        match self
            .deferred
            .iter_mut()
            .find(|d| Arc::ptr_eq(&d.vqueue, vqueue))
        {
            Some(d) => d.events.push(event),
            None => self.deferred.push(Deferred {
                vqueue: vqueue.clone(),
                context,
                stream,
                events: vec![event],
            }),
        }
    }

    /// A command on `vqueue` got its own vendor event `ev`: the deferred commands before
    /// it on that in-order queue complete with it. Called before that command's own
    /// event is attached, so whoever sees it done also finds them done.
    pub fn back_with(&mut self, vqueue: &Arc<VQueue>, ev: &Arc<SharedVEvent>) {
        let Some(i) = self
            .deferred
            .iter()
            .position(|d| Arc::ptr_eq(&d.vqueue, vqueue))
        else {
            return;
        };
        self.deferred.swap_remove(i).back_with(ev);
    }

    /// Before a job goes to `vqueue`: the unbacked kernels there are backed as `how`
    /// says (asked only when there are some); those a blocking job's return completes
    /// are handed back. A blocking job first backs those of other vendor queues by
    /// markers: it may wait in the vendor, through a bridge, for one of them.
    pub fn back_unbacked_before(
        &mut self,
        vqueue: &Arc<VQueue>,
        how: impl FnOnce() -> Backing,
        blocking: bool,
    ) -> Option<Deferred> {
        let (mine, others) = {
            let mut list = self.unbacked.as_ref()?.lock();
            if list.is_empty() {
                return None;
            }
            let mine = (list.iter())
                .position(|d| Arc::ptr_eq(&d.vqueue, vqueue))
                .map(|i| list.swap_remove(i));
            let others: Vec<Deferred> = match blocking {
                true => list.drain(..).collect(),
                false => Vec::new(),
            };
            (mine, others)
        };
        for d in others {
            self.back_by_marker(d);
        }
        let d = mine?;
        match how() {
            Backing::Follows => {
                // Before the batch's own deferred ones: they came later.
                match (self.deferred.iter_mut()).find(|e| Arc::ptr_eq(&e.vqueue, vqueue)) {
                    Some(e) => {
                        let later = std::mem::replace(&mut e.events, d.events);
                        e.events.extend(later);
                    }
                    None => self.deferred.push(d),
                }
                None
            }
            Backing::Returns => Some(d),
            Backing::Marker => {
                self.back_by_marker(d);
                None
            }
        }
    }

    /// `event`'s kernel went to `vqueue` without a vendor event, nothing after it there.
    pub fn leave_unbacked(
        &mut self,
        vqueue: &Arc<VQueue>,
        context: ContextKey,
        stream: u64,
        event: Arc<Event>,
    ) {
        crate::observe::stats::add(&crate::observe::stats::COUNTERS.kernels_unbacked, 1);
        let Some(list) = self.unbacked.as_ref() else {
            // Not where unbacked kernels are kept: as within a batch.
            return self.defer(vqueue, context, stream, event);
        };
        let mut list = list.lock();
        match list.iter_mut().find(|d| Arc::ptr_eq(&d.vqueue, vqueue)) {
            Some(d) => d.events.push(event),
            None => list.push(Deferred {
                vqueue: vqueue.clone(),
                context,
                stream,
                events: vec![event],
            }),
        }
    }

    /// Backs every unbacked kernel by a marker on its vendor queue (`Issuer::back`).
    fn back_all_unbacked(&mut self) {
        let Some(list) = self.unbacked.as_ref() else {
            return;
        };
        let taken = std::mem::take(&mut *list.lock());
        for d in taken {
            self.back_by_marker(d);
        }
    }

    /// A marker with an event on `d`'s vendor queue stands for its commands; if the
    /// vendor refuses one, the queue is waited for.
    pub fn back_by_marker(&mut self, d: Deferred) {
        crate::observe::stats::add(
            &crate::observe::stats::COUNTERS.unbacked_by_marker,
            d.events.len() as u64,
        );
        match d.vqueue.marker(&[], true) {
            Ok(Some(ev)) => {
                d.back_with(&Arc::new(SharedVEvent::new(ev)));
                // At once: a blocking job may wait, through a bridge, for one of them.
                let _ = d.vqueue.flush();
            }
            _ => finish_deferred(d),
        }
    }

    /// Flushes the vendor queues touched so far. Deferred commands are backed within
    /// their batch; any left (the command meant to back them failed) are waited for.
    pub fn flush(&mut self) {
        for d in self.deferred.drain(..) {
            finish_deferred(d);
        }
        for q in self.dirty.drain(..) {
            // A failed flush shows as the commands' own failures.
            let _ = q.flush();
        }
    }
}

/// Completes deferred commands whose backing command failed: waits for their queue.
fn finish_deferred(d: Deferred) {
    // As before a blocking job: what this thread polls is left to the vendor's callbacks
    // while it blocks, or a command on that queue behind a bridge to one of them would
    // never go.
    forget_watched();
    let status = match d.vqueue.finish() {
        Ok(()) => CL_COMPLETE,
        Err(_) => CL_OUT_OF_RESOURCES,
    };
    for e in &d.events {
        e.complete(status);
    }
}

/// What the issuer knows of a job before running it, to decide which kernels may share
/// a later command's vendor event.
pub struct JobInfo {
    /// The vendor queue it goes to (by address), for sharing events within a queue.
    pub vqueue: usize,
    /// The command's event: for the dependency check.
    pub event: Arc<Event>,
    /// A kernel launch on a non-profiling queue, not blocking, with every dependency done
    /// when it was scheduled.
    pub may_share: bool,
    /// The job blocks in the vendor: nothing before it in the batch may wait on it.
    pub blocking: bool,
    /// The events it waits for.
    pub deps: Vec<Arc<Event>>,
    /// A read that takes bytes off the device to another rank, on the vendor queue of
    /// the command that wrote them: the commands of that queue it must follow (the
    /// queue's order keeps them: they are not in `deps`). Where jobs are held on that
    /// queue, it goes right behind the last of these and the reads put behind them
    /// before it, ahead of the rest (`Held::hold`): those came later in schedule order
    /// but neither write its bytes nor wait for it, and may wait for another rank,
    /// which waits for this read.
    pub behind: Vec<Arc<Event>>,
    /// Its in-order stream and vendor context: a dependency issued there is waited on
    /// by the vendor directly (None: the context is gone, the job fails when it runs).
    pub stream: u64,
    pub context: Option<ContextKey>,
    /// Every dependency was done when it was scheduled: it completes after what is
    /// before it on its vendor queue and nothing else.
    pub free: bool,
    /// A transfer step's write into a device (its bytes received, or from the host
    /// copy): released after the other held jobs that became ready with it. What needs
    /// its bytes waits for it anyway; a copy that takes them straight from the received
    /// block (`copy_from_landed`) need not wait behind its vendor call.
    pub late: bool,
    /// An application command whose completion nothing awaits yet, or a blocking one:
    /// the thread handing it over may run it (`Issuer::caller_runs`).
    pub caller_may_run: bool,
    /// A kernel launch the application asked no event for, not profiled, not blocking,
    /// whose completion nothing awaits yet: the thread handing it over may launch it
    /// without a vendor event (`Unbacked`).
    pub may_go_unbacked: bool,
    /// The command's type and sequence number, for the trace.
    pub command_type: cl_command_type,
    pub seq: u64,
    /// Its place in the order jobs are handed to the issuers (`Held`).
    pub order: u64,
    /// A write of host bytes already in place (a copy's source landed from another
    /// rank, or read here for other ranks): consecutive ones into one buffer go as one
    /// vendor write (`Held::release`).
    pub landing: Option<Landing>,
}

/// A landed write: `len` bytes at `host` into `mem` at `offset`. The host bytes are
/// valid once the job is ready (its receive or read done) until its event completes
/// (the event keeps their block).
#[derive(Clone)]
pub struct Landing {
    pub mem: Arc<VMem>,
    pub offset: usize,
    pub len: usize,
    pub host: usize,
}

/// How a job runs.
pub enum RunAs {
    /// With a vendor event of its own.
    Own,
    /// Without one: a later command's on its vendor queue stands for it (`sharing`).
    Shared,
    /// Without one, launched by the thread that enqueued it: backed later (`Unbacked`).
    Unbacked,
    /// Without a vendor call: a later job's write carries its bytes (`Merged`), and
    /// that write's vendor event stands for it.
    Absorbed,
    /// A landed write that makes `write` instead of its own: the bytes of the jobs
    /// absorbed before it, then its own, in `bytes` (kept by its event).
    Merged { write: Landing, bytes: Arc<Vec<u8>> },
}

impl RunAs {
    /// Whether the job asks for no vendor event of its own.
    pub fn shares(&self) -> bool {
        matches!(self, RunAs::Shared | RunAs::Absorbed | RunAs::Unbacked)
    }
}

/// The most bytes landed writes merge into one vendor write: above that the copy into
/// one block costs more than the vendor calls it saves.
pub const MERGED_AT_MOST: usize = 64 << 10;

/// What a job runs, as `RunAs` says: a vendor command (`enqueue::issue`), boxed once
/// when it is issued so that it moves as a pointer from then on.
pub trait RunJob: Send {
    fn run(self: Box<Self>, state: &mut IssuerState, how: RunAs);
}

pub type JobRun = Box<dyn RunJob>;

/// What is left of a job once it ran (boxed without an allocation).
struct Ran;

impl RunJob for Ran {
    fn run(self: Box<Self>, _: &mut IssuerState, _: RunAs) {}
}

pub struct Job {
    pub info: JobInfo,
    run: JobRun,
    /// When it was handed to the issuer (for the trace; 0: not traced).
    handed: u64,
}

/// How many joins deep a dependency is looked through (`Event::vendor_waitable`).
pub const JOIN_DEPTH: u32 = 4;

impl JobInfo {
    /// Whether the vendor can take the job now: each dependency is done, or issued on
    /// its stream or in its vendor context. Any other (a receive, a host-side command,
    /// a user event, a command of another vendor or not issued yet) would need a vendor
    /// user event, and NVIDIA takes a queue that waits on one off its fast path: every
    /// later command there is held and submitted by its own thread tens of µs after the
    /// event is set. The issuer holds such a job instead until its dependencies allow.
    fn ready(&self) -> bool {
        Self::ready_for(&self.deps, self.context, self.stream)
    }

    /// `ready` for a command with these dependencies, stream and vendor context, before
    /// any job is built (`Issuer::caller_runs`).
    pub fn ready_for(deps: &[Arc<Event>], context: Option<ContextKey>, stream: u64) -> bool {
        (deps.iter()).all(|d| d.vendor_waitable(context, stream, JOIN_DEPTH))
    }

    /// Whether a landed write may go in a merged write: every dependency done, or
    /// before it on its in-order stream (the merged write waits for one job's alone).
    /// A failed one is left to its own run, which fails it.
    fn mergeable(&self) -> bool {
        !self.blocking
            && !self.event.profiling
            && (self.deps.iter()).all(|d| {
                d.status() == CL_COMPLETE || d.vendor().is_some_and(|v| v.stream == self.stream)
            })
    }

    /// The dependencies the vendor cannot wait on yet.
    fn unready(&self) -> impl Iterator<Item = &Arc<Event>> {
        (self.deps.iter()).filter(|d| !d.vendor_waitable(self.context, self.stream, JOIN_DEPTH))
    }
}

/// A job as it reaches the issuer: boxed once, it moves through the channel, the
/// batch, the held queues and the pile of what jobs leave as one pointer. Each move of
/// the description itself (some 200 bytes) was a `memcpy`, about 600 instructions a
/// job in all (the seventeenth steps).
type Handed = Box<Job>;

/// What reaches an issuer: a job, word that a dependency of a held job is done, or
/// that an unbacked kernel's completion is needed (`Issuer::back`).
enum Message {
    Job(Handed),
    Wake,
    Back,
}

pub struct Issuer {
    tx: Sender<Message>,
    shared: Arc<Shared>,
    spin: Duration,
    /// Which jobs the handing thread issues itself (`send`): `Waited`, `Idle` or `Off`.
    policy: CallerIssues,
    /// A host thread waited for a command of this device since the last job was
    /// handed over: the program goes one command at a time (`send`).
    waited: std::sync::atomic::AtomicBool,
}

/// What an issuer shares with the threads that hand it jobs.
#[derive(Default)]
struct Shared {
    /// Held while jobs run: by the issuer thread for a batch, or by a thread that runs
    /// a command itself (`Issuer::caller_runs`).
    running: Arc<parking_lot::Mutex<()>>,
    /// Jobs handed to the issuer thread and not run yet (in its channel, or held).
    pending: std::sync::atomic::AtomicUsize,
    unbacked: Unbacked,
}

impl Shared {
    fn ran_one(&self) {
        self.pending
            .fetch_sub(1, std::sync::atomic::Ordering::Release);
    }
}

impl Issuer {
    /// `hold_always`: hold jobs whose dependencies the vendor cannot wait on even when
    /// this thread cannot spin (see `run`). `policy`: see `send`.
    pub fn spawn(name: String, hold_always: bool, policy: CallerIssues) -> Issuer {
        let (tx, rx) = unbounded::<Message>();
        let spin = crate::objects::platform::platform().config.spin();
        let wake = tx.clone();
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                crate::cluster::replica::mark_runtime_thread();
                run(rx, wake, spin, hold_always, &theirs)
            })
            .expect("spawning an issuer thread");
        Issuer {
            tx,
            shared,
            spin,
            policy,
            waited: Default::default(),
        }
    }

    /// Something needs the completion of a kernel launched without a vendor event: the
    /// issuer backs the unbacked ones by markers.
    pub fn back(&self) {
        let _ = self.tx.send(Message::Back);
    }

    /// The unbacked kernels on `vqueue` now, each already enqueued there (an event is
    /// listed once its vendor call returned).
    pub fn unbacked_on(&self, vqueue: &Arc<VQueue>) -> Vec<Arc<Event>> {
        (self.shared.unbacked.lock().iter())
            .find(|d| Arc::ptr_eq(&d.vqueue, vqueue))
            .map_or_else(Vec::new, |d| d.events.clone())
    }

    /// `clFinish` of `vqueue`, called after `unbacked_on` answered `done`, returned:
    /// those are complete.
    pub fn finished_unbacked(&self, vqueue: &Arc<VQueue>, done: &[Arc<Event>]) {
        for e in done {
            e.complete(CL_COMPLETE);
        }
        let mut list = self.shared.unbacked.lock();
        if let Some(i) = list.iter().position(|d| Arc::ptr_eq(&d.vqueue, vqueue)) {
            list[i].events.retain(|e| !e.is_done());
            if list[i].events.is_empty() {
                list.swap_remove(i);
            }
        }
    }

    /// A host thread waited for one of this device's commands.
    pub fn note_waited(&self) {
        if self.policy == CallerIssues::Waited {
            self.waited
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether the thread handing a command over runs it itself, once it has let go of
    /// the scheduler lock ([`Caller`]), rather than hand it to the issuer thread: where
    /// the issuer thread has nothing before it and the vendor can take the command now
    /// (`ready`, asked last):
    /// - where that thread would have to be woken for it (it cannot spin: the cores are
    ///   taken, or spinning is off), a command that does not block: four PoCL devices on
    ///   two cores paid a context switch per command of a solver;
    /// - as the issuer's policy says (`CallerIssues`): `Idle`, any command that does not
    ///   block, while the program has not named host threads; `Waited`, an application
    ///   command the caller will wait for, a blocking one or the first after the
    ///   program waited for this device, unless something already awaits its
    ///   completion (`JobInfo::caller_may_run`). On an H100 a kernel and `clFinish` took
    ///   20.4–22.3 µs so against 26.3–27.5, and a 16-byte blocking write 9.1–11.5
    ///   against 12–13.
    ///
    /// Decided before a job is built: the caller runs the command as it is, with no job
    /// description, boxed closure or hand-over (about a thousand instructions of the
    /// eight thousand MirrorCL added to a PoCL kernel launch). Otherwise `send`.
    pub fn caller_runs(
        &self,
        blocking: bool,
        caller_may_run: bool,
        may_go_unbacked: bool,
        ready: impl FnOnce() -> bool,
    ) -> Option<Caller<'_>> {
        use std::sync::atomic::Ordering;
        let by_caller = match self.policy {
            CallerIssues::Waited => {
                let waited = self.waited.swap(false, Ordering::Relaxed);
                caller_may_run && (blocking || waited)
            }
            // Not once the program has named host threads: a thread issuing its own
            // commands to PoCL lets another thread's commands of other ranks' devices,
            // bookkeeping here, run far ahead, and a race between the two went
            // unreported on both ranks of `cluster_threads`, which then planned apart.
            CallerIssues::Idle => !blocking && !crate::cluster::host_threads::several(),
            CallerIssues::Auto | CallerIssues::Off => false,
        } || (!blocking
            && (self.spin.is_zero()
                || !crate::objects::spin::core_free_within(
                    crate::objects::spin::FRESH_FOR_HANDOFF,
                )));
        if !by_caller || !ready() {
            return None;
        }
        let running = self.shared.running.try_lock()?;
        // Under the lock: every job handed over before has run.
        if self.shared.pending.load(Ordering::Acquire) != 0 {
            return None;
        }
        // One thread's commands only: another's could go to the vendor queue behind an
        // unbacked kernel without backing it first.
        let lazy = self.policy == CallerIssues::Waited
            && may_go_unbacked
            && !crate::cluster::host_threads::several();
        Some(Caller {
            _running: running,
            handed: crate::observe::trace::begin(),
            // Only that policy leaves kernels unbacked: elsewhere the list stays empty,
            // and a command need not look at it (a lock, two atomic operations).
            unbacked: (self.policy == CallerIssues::Waited).then(|| self.shared.unbacked.clone()),
            lazy,
        })
    }

    /// Hands `job` to the issuer thread, in schedule order (the caller holds the
    /// scheduler lock), where `caller_runs` said no.
    pub fn send(&self, info: JobInfo, run: JobRun) {
        use std::sync::atomic::Ordering;
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        crate::observe::stats::add(&crate::observe::stats::COUNTERS.jobs_handed, 1);
        let job = Box::new(Job {
            info,
            run,
            handed: crate::observe::trace::begin(),
        });
        // The issuer only stops when the process exits, so the channel stays open.
        let _ = self.tx.send(Message::Job(job));
    }
}

/// A command its handing thread runs itself, holding the issuer's `running` lock from
/// the hand-over on: jobs handed over later wait for it, as they would behind it on the
/// issuer thread.
#[must_use = "the command runs only when run"]
pub struct Caller<'a> {
    _running: parking_lot::MutexGuard<'a, ()>,
    handed: u64,
    /// The issuer's unbacked kernels, where its policy leaves any (`CallerIssues::Waited`).
    unbacked: Option<Unbacked>,
    /// The kernel goes without a vendor event (`Issuer::caller_runs`).
    lazy: bool,
}

impl Caller<'_> {
    /// Runs the command (`run`, as `RunAs` says), as the issuer runs its jobs.
    pub fn run(
        self,
        command_type: cl_command_type,
        seq: u64,
        run: impl FnOnce(&mut IssuerState, RunAs),
    ) {
        let how = if self.lazy {
            RunAs::Unbacked
        } else {
            RunAs::Own
        };
        let mut state = IssuerState {
            unbacked: self.unbacked,
            ..Default::default()
        };
        run_traced(&mut state, how, self.handed, command_type, seq, run);
        state.flush();
    }
}

/// A watched event, and whether its vendor callback is registered.
type Watched = (Arc<Event>, bool);

/// The watched events, each list oldest first: those another rank waits for
/// (`Event::is_urgent`: reads whose bytes are sent), then the others.
#[derive(Default)]
struct Watching {
    urgent: VecDeque<Watched>,
    rest: VecDeque<Watched>,
}

thread_local! {
    /// On an issuer thread: the events of its commands that others wait on
    /// asynchronously (a send after a read, a bridge to another vendor, a join), polled
    /// while the issuer spins for its next job; with whether the vendor's callback is
    /// registered. NVIDIA reports a completion through its callback thread some 20 µs
    /// after the fact; a poll that finds the event done completes it here (the first
    /// final status wins, so a callback that comes later does nothing).
    static WATCHED: std::cell::RefCell<Option<Watching>> =
        const { std::cell::RefCell::new(None) };
}

/// On an issuer: polls `event` while the issuer spins; whether this thread is one.
/// `registered`: its vendor callback is, for when the issuer parks; otherwise it is
/// registered only then, or before the issuer blocks in a vendor call.
pub fn watch(event: &Arc<Event>, registered: bool) -> bool {
    WATCHED.with(|w| match w.borrow_mut().as_mut() {
        Some(w) => {
            let list = if event.is_urgent() {
                &mut w.urgent
            } else {
                &mut w.rest
            };
            list.push_back((event.clone(), registered));
            true
        }
        None => false,
    })
}

/// How many pending watched events one poll looks at, oldest first, besides the urgent
/// ones: a program that enqueues far ahead has thousands in flight, and they mostly
/// complete in order. The rest wait for the next poll, or for their callbacks once the
/// issuer parks.
const POLL_AT_ONCE: usize = 8;

/// The same for the urgent events. Where commands wait in the vendor for what they
/// depend on (PoCL), a program far ahead has hundreds of them queued there: polled all
/// at every turn, IV.7.2's issuer at 4 ranks on PoCL spent 1.2 s of a 4.5 s run in
/// polls. Where they are held until the vendor can take them (GPUs) there are a few.
const POLL_URGENT_AT_ONCE: usize = 32;

/// How often the issuer, between jobs it has ready, also polls events no other rank
/// waits for.
const POLL_REST_EVERY: Duration = Duration::from_micros(50);

/// How long the events no other rank waits for may go unpolled while an urgent one is
/// pending (`poll_watched_up_to`): a bound, since an urgent read may wait in the vendor,
/// through a bridge, for one of them.
const URGENT_FIRST_FOR: Duration = Duration::from_micros(200);

thread_local! {
    /// When this issuer last polled the events no other rank waits for.
    static LAST_REST_POLL: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Between two jobs: the urgent events, the others only every `POLL_REST_EVERY`. A
/// completion runs its callbacks, and on four H100 the completions one landed write
/// brought (the bookkeeping of other ranks' commands behind it) held the kernel after
/// it in IV.7.2 for 10 µs; the rest wait until the issuer has nothing ready, unless
/// it is busy that long.
///
/// Not the others when the next job is one another rank waits for (a read whose bytes
/// are sent): a kernel's completion found so ran the bookkeeping of the other ranks'
/// commands behind it first, and IV.7.2's read at 4 ranks went 20 µs after the kernel
/// on four H200 (every rank waits for it).
fn poll_between_jobs(next: Option<&JobInfo>) -> bool {
    if next.is_some_and(|j| j.event.is_urgent()) {
        return poll_watched_up_to(0);
    }
    let now = std::time::Instant::now();
    let due = LAST_REST_POLL.with(|last| last.get().is_none_or(|t| now - t >= POLL_REST_EVERY));
    poll_watched_up_to(if due { POLL_AT_ONCE } else { 0 })
}

/// Polls the oldest urgent watched events (up to `POLL_URGENT_AT_ONCE` pending), then
/// the oldest `at_most` others; whether one completed. Only pending events count: each
/// completion runs its callbacks, and a read polled behind eight others that completed
/// was sent some 20 µs late on an H100 (a stencil's ghost row). Completions'
/// callbacks may watch further events: the lists are not borrowed meanwhile. An event
/// that got an application callback since is left to the vendor's callback thread
/// (application callbacks never run on an issuer).
///
/// While an urgent event stays pending the others wait, up to `URGENT_FIRST_FOR` since
/// they were last polled: their completions run the bookkeeping of other ranks'
/// commands, and in IV.7.2 at 4 ranks on four H200 a kernel's cascade of them (some
/// 20 µs) came before its read, which every other rank waits for, was seen done.
fn poll_watched_up_to(at_most: usize) -> bool {
    let taken = WATCHED.with(|w| w.borrow_mut().as_mut().map(std::mem::take));
    let Some(Watching {
        mut urgent,
        mut rest,
    }) = taken
    else {
        return false;
    };
    if urgent.is_empty() && rest.is_empty() {
        return false;
    }
    let before = urgent.len() + rest.len();
    poll_front(&mut urgent, POLL_URGENT_AT_ONCE);
    let mut at_most = at_most;
    if at_most > 0 {
        let now = std::time::Instant::now();
        let recent = LAST_REST_POLL.with(|l| l.get().is_some_and(|t| now - t < URGENT_FIRST_FOR));
        if !urgent.is_empty() && recent {
            at_most = 0;
        } else {
            LAST_REST_POLL.with(|last| last.set(Some(now)));
        }
    }
    poll_front(&mut rest, at_most);
    let progressed = urgent.len() + rest.len() < before;
    WATCHED.with(|w| {
        if let Some(w) = w.borrow_mut().as_mut() {
            // Watched meanwhile (by completions' callbacks): after the older ones.
            for (list, kept) in [(&mut w.urgent, urgent), (&mut w.rest, rest)] {
                let newer = std::mem::replace(list, kept);
                list.extend(newer);
            }
        }
    });
    progressed
}

/// Polls `list` from the front until `at_most` events are found pending, dropping those
/// done in place; the rest of the list is not looked at.
fn poll_front(list: &mut VecDeque<Watched>, at_most: usize) {
    let (mut i, mut pending) = (0, 0);
    while pending < at_most && i < list.len() {
        let (event, registered) = &list[i];
        let gone = if event.has_user_callbacks() {
            if !registered {
                event.register_vendor_callback();
            }
            true
        } else {
            event.poll()
        };
        if gone {
            // Near the front: VecDeque moves the few before it.
            list.remove(i);
        } else {
            i += 1;
            pending += 1;
        }
    }
}

/// Stops watching before the issuer parks or blocks in a vendor call: the vendor's
/// callbacks complete what is left.
pub fn forget_watched() {
    let taken = WATCHED.with(|w| w.borrow_mut().as_mut().map(std::mem::take));
    let Some(w) = taken else {
        return;
    };
    for (event, registered) in w.urgent.into_iter().chain(w.rest) {
        if !registered && !event.is_done() {
            event.register_vendor_callback();
        }
    }
}

fn run(
    rx: Receiver<Message>,
    wake: Sender<Message>,
    spin: Duration,
    hold_always: bool,
    shared: &Shared,
) {
    WATCHED.with(|w| *w.borrow_mut() = Some(Watching::default()));
    LEFT.with(|l| *l.borrow_mut() = Some(Vec::new()));
    let mut state = IssuerState {
        unbacked: Some(shared.unbacked.clone()),
        ..Default::default()
    };
    let mut batch: Vec<Handed> = Vec::new();
    let mut held = Held::default();
    loop {
        let message = next_message(&rx, spin);
        let _running = shared.running.lock();
        match message {
            Some(Message::Job(job)) => batch.push(job),
            Some(Message::Wake) => {
                if crate::observe::trace::on() {
                    crate::observe::trace::instant("issue", "woken", crate::trace_args![]);
                }
            }
            Some(Message::Back) => state.back_all_unbacked(),
            None => return,
        }
        while let Ok(message) = rx.try_recv() {
            match message {
                Message::Job(job) => batch.push(job),
                Message::Back => state.back_all_unbacked(),
                Message::Wake => {}
            }
        }
        // Held jobs came first: they go before the batch when they can.
        held.release(&mut state, shared);
        // Holding costs a wake-up of this thread per release unless it spins. With the
        // cores taken, a vendor that waits on user events in its own worker (PoCL) is
        // the cheaper hand-off; NVIDIA, with thousands of commands waiting on user
        // events, took 7 ms per IV.7.2 iteration instead of 0.2.
        let hold = hold_always || (!spin.is_zero() && crate::objects::spin::core_free());
        if !hold {
            // Jobs held while a core was free go now, through bridges, before the
            // batch: a blocking job of the batch would otherwise block this thread in
            // the vendor, waiting for a held one (through a bridge) that only this
            // thread can issue (`images` and `pingpong` with a vendor context per
            // device hung so on PoCL, about one run in ten).
            held.release_all(&mut state, shared);
        }
        let share = sharing(&batch);
        let mut jobs = batch.drain(..).zip(share).peekable();
        while let Some((job, share)) = jobs.next() {
            if held.holds_queue(&job.info)
                || (hold && !job.info.ready())
                || held.blocks_too_soon(&job.info)
            {
                held.hold(job, &wake);
            } else {
                let how = if share { RunAs::Shared } else { RunAs::Own };
                run_job(job, how, &mut state);
                shared.ran_one();
                // A long batch must not hold back what the vendor finished meanwhile.
                poll_between_jobs(jobs.peek().map(|(j, _)| &j.info));
            }
        }
        drop(jobs);
        // A job of the batch may be what a held one waited for.
        held.release(&mut state, shared);
        state.flush();
    }
}

/// Jobs that wait for a dependency the vendor cannot wait on, per vendor queue in the
/// order they came: a later job on the same queue waits behind them (the queue is in
/// order), jobs on other queues go on. Only the first of each queue can be next, so a
/// program enqueuing far ahead costs nothing per held job.
///
/// A read another rank waits for does not hold back the jobs after it on its queue: a
/// gate that did (until the read was seen done, up to 30 µs) cost IV.7.2 on four H200
/// 122-126 µs an iteration at 4 ranks against 114-117 without, and the 2-rank stencil
/// 48-59 µs a step against 48-52; the read is polled between those jobs instead.
#[derive(Default)]
struct Held {
    queues: Vec<(usize, VecDeque<Handed>)>,
}

impl Held {
    fn holds_queue(&self, job: &JobInfo) -> bool {
        self.queues.iter().any(|(q, _)| *q == job.vqueue)
    }

    /// Each dependency the vendor cannot wait on wakes the issuer when done (one held
    /// only behind another on its queue needs none: it goes when that one has).
    fn hold(&mut self, job: Handed, wake: &Sender<Message>) {
        if crate::observe::trace::on() {
            // The commands it waits for that the vendor cannot (up to three).
            let mut by = job.info.unready().map(|d| d.seq);
            crate::observe::trace::instant(
                "issue",
                "held",
                crate::trace_args![
                    ("command", job.info.seq),
                    ("by", by.next().unwrap_or(0)),
                    ("by2", by.next().unwrap_or(0)),
                    ("by3", by.next().unwrap_or(0))
                ],
            );
        }
        for dep in job.info.unready() {
            let wake = wake.clone();
            dep.on_done(move |_| {
                let _ = wake.send(Message::Wake);
            });
        }
        match self.queues.iter_mut().find(|(q, _)| *q == job.info.vqueue) {
            Some((_, jobs)) if !job.info.behind.is_empty() => {
                // Jobs of the queue not held here were issued before the first held one.
                // Behind the last of its writers, and behind the reads put there before
                // it: a later read ahead of an earlier one may wait, through another
                // rank, for the earlier one's bytes (`events` on two ranks hung so, with
                // every issuer holding).
                let behind = |e: &Arc<Event>| job.info.behind.iter().any(|b| Arc::ptr_eq(b, e));
                let at = (jobs.iter())
                    .rposition(|j| behind(&j.info.event) || j.info.behind.iter().any(behind))
                    .map_or(0, |i| i + 1);
                let mut job = job;
                if let Some(next) = jobs.get(at) {
                    // Held queues stay in hand-over order (`blocks_too_soon`).
                    job.info.order = job.info.order.min(next.info.order);
                }
                jobs.insert(at, job);
            }
            Some((_, jobs)) => jobs.push_back(job),
            None => {
                let vqueue = job.info.vqueue;
                self.queues.push((vqueue, [job].into()));
            }
        }
    }

    /// Issues every held job, in order on each queue, ready or not (the vendor waits
    /// for the rest through bridges).
    fn release_all(&mut self, state: &mut IssuerState, shared: &Shared) {
        // In hand-over order across queues: a blocking job among them must find every
        // older one issued (`blocks_too_soon`).
        while let Some(i) = self.first_by(|job| Some(job.order)) {
            let job = self.queues[i].1.pop_front().expect("a first job");
            run_job(job, RunAs::Own, state);
            shared.ran_one();
        }
        self.queues.clear();
    }

    /// The queue whose first job has the least `key` (none: not eligible).
    fn first_by<K: Ord>(&self, key: impl Fn(&JobInfo) -> Option<K>) -> Option<usize> {
        (self.queues.iter().enumerate())
            .filter_map(|(i, (_, jobs))| Some((key(&jobs.front()?.info)?, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Whether `job` would block this thread in the vendor while an older job is held
    /// here: what it waits for may wait, through another device's commands and a
    /// bridge, for that job, which only this thread can issue. Three PoCL devices with
    /// a vendor context each hung so (`pingpong`, about one run in fifty on two busy
    /// cores, before this session's changes too): a blocking read waited for a write,
    /// the write through a bridge for a read held on this issuer.
    fn blocks_too_soon(&self, job: &JobInfo) -> bool {
        job.blocking
            && (self.queues.iter())
                .any(|(_, jobs)| jobs.front().is_some_and(|j| j.info.order < job.order))
    }

    /// Issues the held jobs that became ready, in order on each queue, until none does
    /// (one may be what another waited for). Without a later job of their batch to back
    /// them, they take vendor events of their own. Across queues the oldest ready job
    /// goes first, transfer writes after the others (`JobInfo::late`): a stencil's
    /// boundary read, which the neighbour waits for, went after the next step's copy and
    /// kernel of the application queue, some 11 µs later on an H100.
    fn release(&mut self, state: &mut IssuerState, shared: &Shared) {
        while let Some(i) = self.next_ready() {
            let job = self.queues[i].1.pop_front().expect("a first job");
            let absorbed = self.landed_after(i, &job.info);
            if !absorbed.is_empty() {
                run_merged(job, absorbed, state);
            } else if self.backs(i, &job.info) {
                // Back to back, nothing polled between: the kernel's completion is the
                // next job's.
                let next = self.queues[i].1.pop_front().expect("a next job");
                run_job(job, RunAs::Shared, state);
                run_job(next, RunAs::Own, state);
            } else {
                run_job(job, RunAs::Own, state);
            }
            shared.ran_one();
            // As in a batch: ten held jobs released after a receive took 120 µs of
            // vendor calls on an H100, and a boundary read done after the third was
            // seen 70 µs late.
            let next = self.next_ready().and_then(|i| self.queues[i].1.front());
            poll_between_jobs(next.map(|j| &j.info));
        }
        self.queues.retain(|(_, jobs)| !jobs.is_empty());
    }

    /// After landed write `first`, popped from queue `i`: the ready landed writes that
    /// follow it there into the bytes right after its own, whose bytes may go with it in
    /// one vendor write. An all-to-all lands one piece from each rank side by side (the
    /// hand-written twin writes them with one call; IV.7.2 at 4 ranks made three).
    fn landed_after(&mut self, i: usize, first: &JobInfo) -> Vec<Handed> {
        let mut taken = Vec::new();
        let Some(l) = first.landing.as_ref().filter(|_| first.mergeable()) else {
            return taken;
        };
        let (start, mut end) = (l.offset, l.offset + l.len);
        while let Some(next) = self.queues[i].1.front() {
            let fits = next.info.landing.as_ref().filter(|n| {
                Arc::ptr_eq(&n.mem, &l.mem)
                    && n.offset == end
                    && end + n.len - start <= MERGED_AT_MOST
            });
            let Some(n) = fits.filter(|_| next.info.ready() && next.info.mergeable()) else {
                break;
            };
            end += n.len;
            taken.push(self.queues[i].1.pop_front().expect("a front job"));
        }
        taken
    }

    /// Whether kernel `first`, popped from queue `i`, may go without a vendor event of
    /// its own because the job now first there goes right after it with one: that job
    /// is ready without it (so waits for it only through the queue's order), and waits
    /// for nothing else not done (its event completes when the kernel's would). A read
    /// another rank waits for follows the kernel that wrote its bytes so (IV.7.2, a
    /// stencil's boundary rows): NVIDIA charges an event 1.0-1.4 µs at the launch.
    fn backs(&self, i: usize, first: &JobInfo) -> bool {
        let kernel = matches!(
            first.command_type,
            CL_COMMAND_NDRANGE_KERNEL | CL_COMMAND_TASK
        );
        kernel
            && !first.blocking
            && !first.event.profiling
            && self.queues[i].1.front().is_some_and(|next| {
                next.info.ready() && next.info.mergeable() && !self.blocks_too_soon(&next.info)
            })
    }

    /// The queue whose first held job `release` issues next: ready, not blocking too
    /// soon, the oldest, transfer writes last.
    fn next_ready(&self) -> Option<usize> {
        self.first_by(|job| {
            (job.ready() && !self.blocks_too_soon(job)).then_some((job.late, job.order))
        })
    }
}

/// Which jobs of a batch issue without a vendor event of their own: a kernel launch
/// that a later job of the batch on the same vendor queue follows (its event then
/// stands for both), that no later job of the batch waits for, and that no blocking job
/// follows (a blocking job must find everything before it backed). The job that follows
/// must be free of pending dependencies: otherwise the kernel's completion would wait
/// for them, and they may wait for the kernel (through another device, or another rank).
fn sharing(batch: &[Handed]) -> Vec<bool> {
    let mut share = vec![false; batch.len()];
    // Per vendor queue, whether the next job of the batch on it is free.
    let mut later_queues: Vec<(usize, bool)> = Vec::new();
    let mut waited_for: rustc_hash::FxHashSet<*const Event> = Default::default();
    let mut blocking_later = false;
    for (i, job) in batch.iter().enumerate().rev() {
        let info = &job.info;
        let next = later_queues.iter_mut().find(|(q, _)| *q == info.vqueue);
        share[i] = info.may_share
            && !blocking_later
            && next.as_ref().is_some_and(|(_, free)| *free)
            && !waited_for.contains(&Arc::as_ptr(&info.event));
        match next {
            Some(entry) => entry.1 = info.free,
            None => later_queues.push((info.vqueue, info.free)),
        }
        waited_for.extend(info.deps.iter().chain(&info.behind).map(Arc::as_ptr));
        blocking_later |= info.blocking;
    }
    share
}

/// Landed write `first` and those after it (`Held::landed_after`) as one vendor write:
/// made by the last, the others absorbed into it, each completing with it.
fn run_merged(first: Handed, rest: Vec<Handed>, state: &mut IssuerState) {
    let mut jobs = vec![first];
    jobs.extend(rest);
    let landings: Vec<&Landing> = (jobs.iter())
        .filter_map(|j| j.info.landing.as_ref())
        .collect();
    let mut bytes = Vec::with_capacity(landings.iter().map(|l| l.len).sum());
    for l in &landings {
        // SAFETY: a ready landed write's bytes are in place (its receive or read is
        // done) and kept by its event, which is not complete before this write is.
        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(l.host as *const u8, l.len) });
    }
    let bytes = Arc::new(bytes);
    let write = Landing {
        mem: landings[0].mem.clone(),
        offset: landings[0].offset,
        len: bytes.len(),
        host: bytes.as_ptr() as usize,
    };
    let last = jobs.pop().expect("at least two jobs");
    crate::observe::stats::add(
        &crate::observe::stats::COUNTERS.writes_merged,
        jobs.len() as u64,
    );
    let absorbed: Vec<Arc<Event>> = jobs.iter().map(|j| j.info.event.clone()).collect();
    for job in jobs {
        run_job(job, RunAs::Absorbed, state);
    }
    let event = last.info.event.clone();
    run_job(last, RunAs::Merged { write, bytes }, state);
    // The write failed: so did the writes it carried.
    let status = event.status();
    if status < 0 {
        for e in absorbed {
            e.complete(status);
        }
    }
}

/// Runs a job; traced, its span is the vendor call, and says how long the job waited
/// on this thread's channel since it was handed over.
fn run_job(mut job: Handed, how: RunAs, state: &mut IssuerState) {
    let (command_type, seq) = (job.info.command_type, job.info.seq);
    // Taken out for its one call; the box, with the description, goes to the pile
    // whole.
    let run = std::mem::replace(&mut job.run, Box::new(Ran));
    run_traced(state, how, job.handed, command_type, seq, |state, how| {
        run.run(state, how)
    });
    leave(Left::Job(job));
}

/// Runs a command as `how` says, a panic caught; traced, its span is the vendor call,
/// with how long the command waited since it was handed over (`handed`).
fn run_traced(
    state: &mut IssuerState,
    how: RunAs,
    handed: u64,
    command_type: cl_command_type,
    seq: u64,
    run: impl FnOnce(&mut IssuerState, RunAs),
) {
    let started = crate::observe::trace::begin();
    let share = how.shares();
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(state, how))).is_err() {
        tracing::error!("an issuer job panicked");
    }
    if started != 0 {
        crate::observe::trace::span(
            "issue",
            crate::objects::event::command_name(command_type),
            started,
            crate::trace_args![
                ("command", seq),
                ("queued_ns", started.saturating_sub(handed)),
                ("shares_a_later_event", share as u64)
            ],
        );
    }
}

/// What an issuer's jobs leave behind: their descriptions and the events they waited
/// for, often the last references (a transfer's receive, the read behind a landed
/// write). Callgrind of an issuer releasing IV.7.2's held jobs at 4 PoCL ranks put a
/// fifth of its work there: dropping events, and freeing what other threads had
/// allocated. An issuer drops them once it has nothing to run (`drop_left`).
pub enum Left {
    Job(Box<Job>),
    Events(Vec<Arc<Event>>),
}

/// How much an issuer lets pile up before dropping it anyway.
const LEFT_AT_MOST: usize = 1024;

thread_local! {
    /// On an issuer thread, what its jobs left (`Left`); None elsewhere (a thread that
    /// runs a job itself drops at once).
    static LEFT: std::cell::RefCell<Option<Vec<Left>>> = const { std::cell::RefCell::new(None) };
}

/// Drops `left` now, or on an issuer once it has nothing to run.
pub fn leave(left: Left) {
    let full = LEFT.with(|l| match l.borrow_mut().as_mut() {
        Some(pile) => {
            pile.push(left);
            pile.len() >= LEFT_AT_MOST
        }
        None => false,
    });
    if full {
        drop_left();
    }
}

/// Drops what this issuer's jobs left (taken out first: a drop may leave more).
fn drop_left() {
    let pile = LEFT.with(|l| {
        (l.borrow_mut().as_mut())
            .filter(|pile| !pile.is_empty())
            .map(|pile| std::mem::replace(pile, Vec::with_capacity(pile.capacity())))
    });
    drop(pile);
}

/// Spins for `spin` (while a core is free: `crate::objects::spin`) before parking on the
/// channel, polling the watched events meanwhile.
fn next_message(rx: &Receiver<Message>, spin: Duration) -> Option<Message> {
    let mut spin = crate::objects::spin::Spin::new(spin);
    let mut turns = 0u32;
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        if turns == 0 {
            drop_left();
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(16) && poll_watched_up_to(POLL_AT_ONCE) {
            spin.restart();
            continue;
        }
        if !spin.spinning() {
            forget_watched();
            return rx.recv().ok();
        }
        std::hint::spin_loop();
    }
}

/// Logging to standard error, filtered by `MIRRORCL_LOG` (e.g. `MIRRORCL_LOG=debug`);
/// warnings and errors by default.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MIRRORCL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
