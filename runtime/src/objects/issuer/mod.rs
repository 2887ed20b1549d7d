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

mod backing;
mod job;
mod thread;
mod watch;

pub use backing::*;
pub use job::*;
use thread::*;
pub use thread::{leave, Left};
use watch::*;
pub use watch::{forget_watched, watch};

/// A job as it reaches the issuer: boxed once, it moves through the channel, the
/// batch, the held queues and the pile of what jobs leave as one pointer. Each move of
/// the description itself (some 200 bytes) was a `memcpy`, about 600 instructions a
/// job in all.
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
