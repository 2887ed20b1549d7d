//! Step 4, the last: a vendor command (an application command this rank runs, or the
//! device work of a transfer step) goes to its device's issuer thread, still under the
//! scheduler lock, so every issuer receives commands in schedule order. On the issuer
//! its dependencies become a vendor wait list, the vendor call runs, and its vendor
//! event is attached to the MirrorCL event.

use crate::cl::*;
use crate::native::{VContext, VEvent, VQueue};
use crate::objects::device::Device;
use crate::objects::event::{Event, SharedVEvent, StandIns, VendorEvent};
use crate::objects::issuer::{Backing, Caller, IssuerState, JobInfo, Landing, RunAs, RunJob};
use crate::objects::queue::Queue;
use crate::ClResult;
use smallvec::SmallVec;
use std::sync::Arc;

/// A vendor command: given the vendor queue, the vendor wait list and whether a vendor
/// event is wanted, enqueue; returns the event. Runs on the issuer thread.
pub type VendorWork =
    Box<dyn FnOnce(&VQueue, &[cl_event], bool) -> ClResult<Option<VEvent>> + Send>;

/// What a command waits for: the application's wait list first (`failing` of them),
/// whose failure fails the command, then what MirrorCL adds (conflicts, queue order),
/// which only orders it: a command behind a failed one it did not ask to wait for runs.
pub(super) struct Deps {
    pub all: Vec<Arc<Event>>,
    pub failing: usize,
    /// Commands before it on its vendor queue, kept by that queue's order rather than
    /// waited on: a read that may go ahead of jobs held there stays behind these
    /// (`JobInfo::behind`).
    pub behind: Vec<Arc<Event>>,
}

/// A vendor command on its way to its device's issuer, with what running it there needs.
pub(super) struct VendorCommand {
    /// The device's vendor-context group: its vendor context is found on the issuer
    /// through the event's context, which outlives the command.
    pub group: u32,
    /// The application queue's vendor queue, or the device's transfer queue.
    pub vqueue: ClResult<Arc<VQueue>>,
    pub event: Arc<Event>,
    pub deps: Deps,
    pub work: VendorWork,
    /// Keeps the application's queue alive until the command ran: set when it goes to
    /// the issuer thread (`issue`); a thread that runs it itself holds the queue.
    pub keep_queue: Option<Arc<Queue>>,
    /// A blocking read or write: the vendor call itself blocks on the issuer.
    pub blocking: bool,
    /// A write of host bytes already in place (`work` writes them; `copy_from_landed`,
    /// `copy_from_sent_read`): the issuer may write them together with the landed bytes
    /// beside them (`RunAs::Merged`).
    pub landing: Option<Landing>,
    /// The application asked for no event (`Command::unseen`).
    pub unseen: bool,
}

impl Landing {
    /// The write alone.
    pub fn work(&self) -> VendorWork {
        let (mem, offset, len, host) = (self.mem.clone(), self.offset, self.len, self.host);
        Box::new(move |q, waits, want| {
            // SAFETY: the command's event keeps the block, which holds the `len` bytes
            // once what the job waits for (a receive, a read) is done, until the write
            // completes; a merged write's block is its own (`RunAs::Merged`).
            unsafe {
                q.read_write(
                    &mem,
                    true,
                    false,
                    offset,
                    len,
                    host as *mut std::ffi::c_void,
                    waits,
                    want,
                )
            }
        })
    }
}

/// Whether a blocking read or write blocks in the vendor call, on the issuer (the
/// vendor's fastest path for the host to get the bytes). Not once the program has named
/// host threads: a device's issuer serves every thread, and one thread's read waiting
/// there for bytes from another rank would hold up another thread's work that the other
/// rank waits for; the host thread waits for the event instead. Nor where the issuer
/// issues commands behind bridges (`Device::holds_for_the_vendor`): blocked in the
/// vendor, behind a command that waits on a bridge, it could not issue what the
/// bridge's dependency waits for (`pingpong` with a vendor context per PoCL device hung
/// so about one run in fifty on two busy cores).
pub(super) fn blocks_in_vendor(blocking: bool, device: &Device) -> bool {
    blocking && !crate::cluster::host_threads::several() && device.holds_for_the_vendor()
}

/// The order vendor commands are handed to the issuers in (under the scheduler lock:
/// schedule order). A command's own transfer steps come before it, though their events
/// were made after its own.
static ISSUE_ORDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sends a vendor command to `device`'s issuer, or gives it back for the caller to run
/// once it has released the scheduler lock (`Issuer::caller_runs`). `queue`: the
/// application's queue of an application command (None for a transfer step).
pub(super) fn issue<'a>(
    device: &'a Device,
    cmd: VendorCommand,
    queue: Option<&Arc<Queue>>,
) -> Option<Inline<'a>> {
    // Boxed once: from here on it moves as a pointer, to the caller that runs it or
    // through the issuer's channel and queues.
    let mut cmd = Box::new(cmd);
    // Its completion then completes the dependencies the vendor waits for silently.
    let awaited = cmd.event.waits_for(&cmd.deps.all);
    // A kernel launch that returns at once, on a queue that does not profile.
    let launch = !cmd.blocking
        && !cmd.event.profiling
        && matches!(
            cmd.event.command_type,
            CL_COMMAND_NDRANGE_KERNEL | CL_COMMAND_TASK
        );
    // Not a transfer step, nor a read whose bytes go to other ranks: their completions
    // are polled by the issuer thread, not by a caller gone back to the application.
    let caller_may_run = queue.is_some() && (cmd.blocking || !awaited);
    let may_go_unbacked = launch && caller_may_run && cmd.unseen;
    let context = (cmd.event.context.vendor_context_of(cmd.group).ok()).map(|v| v.vctx.key());
    let stream = cmd.event.stream;
    let issuer = device.issuer();
    let ready = || JobInfo::ready_for(&cmd.deps.all, context, stream);
    if let Some(caller) = issuer.caller_runs(cmd.blocking, caller_may_run, may_go_unbacked, ready) {
        return Some(Inline { caller, cmd });
    }
    let free = cmd.deps.all.iter().all(|d| d.is_done());
    cmd.keep_queue = queue.cloned();
    issuer.send(
        JobInfo {
            vqueue: cmd.vqueue.as_ref().map_or(0, |q| q.raw() as usize),
            event: cmd.event.clone(),
            may_share: launch && free,
            blocking: cmd.blocking,
            deps: cmd.deps.all.clone(),
            behind: std::mem::take(&mut cmd.deps.behind),
            stream,
            context,
            free,
            // Transfer steps' events belong to no application queue.
            late: cmd.event.command_type == CL_COMMAND_WRITE_BUFFER && cmd.event.queue_handle == 0,
            caller_may_run,
            may_go_unbacked,
            command_type: cmd.event.command_type,
            seq: cmd.event.seq,
            order: ISSUE_ORDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            landing: cmd.landing.take(),
        },
        cmd,
    );
    None
}

/// A vendor command its handing thread runs itself (`Issuer::caller_runs`).
#[must_use = "the command runs only when run"]
pub(super) struct Inline<'a> {
    caller: Caller<'a>,
    cmd: Box<VendorCommand>,
}

impl Inline<'_> {
    pub(super) fn run(self) {
        let (command_type, seq) = (self.cmd.event.command_type, self.cmd.event.seq);
        let cmd = self.cmd;
        self.caller
            .run(command_type, seq, move |state, how| cmd.run(state, how));
    }
}

impl RunJob for VendorCommand {
    /// On the issuer: the vendor call with its wait list; `how`: with a vendor event of
    /// its own, or not (a later command's stands for it), or no call at all, or a
    /// merged write (`RunAs`). A blocking call asks for no vendor event either unless
    /// the queue profiles: it returns with the command done, and NVIDIA records an
    /// event per command that asks for one (some 4 µs of a 16-byte write).
    fn run(self: Box<Self>, state: &mut IssuerState, how: RunAs) {
        let VendorCommand {
            group,
            vqueue,
            event,
            deps: Deps {
                all: deps, failing, ..
            },
            work: f,
            keep_queue,
            blocking,
            landing: _,
            unseen: _,
        } = *self;
        let share = how.shares();
        let lazy = matches!(how, RunAs::Unbacked);
        let has_event = matches!(how, RunAs::Own | RunAs::Shared | RunAs::Merged { .. });
        let f = match how {
            RunAs::Absorbed => None,
            RunAs::Merged { write, bytes } => {
                event.keep(bytes);
                Some(write.work())
            }
            RunAs::Own | RunAs::Shared | RunAs::Unbacked => Some(f),
        };
        let stream = event.stream;
        let done_on_return = blocking && !event.profiling;
        // A failed dependency fails this command, first (before any bridge below lets
        // the vendor go on), whatever the vendor then does with it: vendors differ in
        // how they treat commands behind a failed event (PoCL 3.1 asserts or runs them).
        for dep in deps[..failing].iter().filter(|d| !d.is_done()) {
            let ev = event.clone();
            dep.on_done(move |status| {
                if status < 0 {
                    ev.complete(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
                }
            });
        }
        if blocking {
            // This job will block in the vendor: what it may wait for on this issuer's
            // other queues must have reached the devices (a vendor may hold commands
            // until a flush).
            state.flush();
        }
        if lazy {
            // Before the call: whoever needs its completion from now on asks for it.
            event.set_unbacked();
        }
        let mut returns_with: Option<crate::objects::issuer::Deferred> = None;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let vqueue = vqueue?;
            let vctx = &event.context.vendor_context_of(group)?.vctx;
            let waits = VendorWaits::resolve(&deps, failing, vctx, stream)?;
            if blocking {
                // What this thread polls is left to the vendor's callbacks meanwhile,
                // including what the wait list just asked to watch (a bridge's
                // dependency): polled by nobody while this thread blocks, it would
                // never complete the bridge the vendor call waits on.
                crate::objects::issuer::forget_watched();
            }
            let Some(f) = f else {
                // Absorbed: the merged write that follows on this queue stands for it.
                return Ok((vqueue, vctx.key(), None));
            };
            if !lazy {
                // The unbacked kernels before it on its vendor queue: its event may stand
                // for them only if it waits for nothing else not done.
                let backing = || {
                    if done_on_return {
                        Backing::Returns
                    } else if has_event && (deps.iter()).all(|d| d.is_done() || d.stream == stream)
                    {
                        Backing::Follows
                    } else {
                        Backing::Marker
                    }
                };
                returns_with = state.back_unbacked_before(&vqueue, backing, blocking);
            }
            let traced = crate::observe::trace::begin();
            let vev = f(&vqueue, &waits.list, !share && !done_on_return);
            if traced != 0 {
                let n = waits.list.len();
                crate::observe::trace::span(
                    "vendor",
                    "vendor call",
                    traced,
                    crate::trace_args![("waits", n)],
                );
            }
            let vev = vev?;
            Ok::<_, cl_int>((vqueue, vctx.key(), vev))
        }));
        if let Some(d) = returns_with {
            match result {
                // In order: the kernels before it on its queue are done.
                Ok(Ok(_)) => d.events.iter().for_each(|e| e.complete(CL_COMPLETE)),
                _ => state.back_by_marker(d),
            }
        }
        match result {
            Ok(Ok((vqueue, context, _))) if lazy => {
                state.leave_unbacked(&vqueue, context, stream, event.clone());
                state.touched(vqueue);
            }
            Ok(Ok((vqueue, context, _))) if share => {
                state.defer(&vqueue, context, stream, event.clone());
                state.touched(vqueue);
            }
            Ok(Ok((vqueue, context, Some(vev)))) => {
                let vev = Arc::new(SharedVEvent::new(vev));
                // Earlier commands first: whoever sees this one done may look at them.
                state.back_with(&vqueue, &vev);
                event.attach_vendor(VendorEvent {
                    ev: vev,
                    context,
                    stream,
                });
                state.touched(vqueue);
                if blocking {
                    // The vendor call returned with the bytes in place.
                    event.poll();
                }
            }
            // The vendor call returned with the bytes in place.
            // (Already submitted: no flush.)
            Ok(Ok((_, _, None))) if done_on_return => event.complete(CL_COMPLETE),
            // A vendor that returned no event where one was asked for.
            Ok(Ok((_, _, None))) => event.complete(CL_OUT_OF_RESOURCES),
            Ok(Err(rc)) => event.complete(rc),
            Err(_) => event.complete(CL_OUT_OF_RESOURCES),
        }
        drop(keep_queue);
        crate::objects::issuer::leave(crate::objects::issuer::Left::Events(deps));
    }
}

/// A vendor wait list for a command's dependencies. A dependency issued in the same
/// vendor context is waited on directly, a join of such commands through theirs; any
/// other (another vendor, a user event, a host-side command, a command not issued yet:
/// where the issuer did not hold the job until it allowed) through a vendor user event
/// that MirrorCL completes when the dependency does.
struct VendorWaits {
    /// Borrowed from the dependencies' vendor events and from `bridges`.
    list: SmallVec<[cl_event; 4]>,
    /// The issuer's references to the bridges (the vendor holds its own for the
    /// commands waiting on them).
    bridges: SmallVec<[VEvent; 2]>,
    /// The events whose vendor events are in `list` (kept while it is used).
    stand_ins: StandIns,
}

impl VendorWaits {
    fn resolve(
        deps: &[Arc<Event>],
        failing: usize,
        vctx: &VContext,
        stream: u64,
    ) -> ClResult<VendorWaits> {
        let mut waits = VendorWaits {
            list: SmallVec::new(),
            bridges: SmallVec::new(),
            stand_ins: SmallVec::new(),
        };
        for (i, dep) in deps.iter().enumerate() {
            let status = dep.status();
            if status == CL_COMPLETE || (status < 0 && i >= failing) {
                continue;
            }
            if status < 0 {
                return Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
            }
            if dep.vendor_waitable(Some(vctx.key()), stream, crate::objects::issuer::JOIN_DEPTH) {
                // Issued in this context, or a join of such commands: their events.
                let first = waits.stand_ins.len();
                dep.vendor_stand_ins(stream, &mut waits.stand_ins);
                // One the vendor finished leaves the list: each event of another queue
                // costs NVIDIA a wait between its streams.
                let mut kept = first;
                for i in first..waits.stand_ins.len() {
                    if !waits.stand_ins[i].vendor_complete() {
                        waits.stand_ins.swap(kept, i);
                        kept += 1;
                    }
                }
                waits.stand_ins.truncate(kept);
                let stand_ins = &waits.stand_ins[first..];
                (waits.list).extend(stand_ins.iter().filter_map(|e| Some(e.vendor()?.ev.raw())));
                continue;
            }
            let ue = bridge(dep, vctx)?;
            waits.list.push(ue.raw());
            waits.bridges.push(ue);
        }
        Ok(waits)
    }
}

/// A vendor user event in `vctx` that completes with `dep`.
fn bridge(dep: &Arc<Event>, vctx: &VContext) -> ClResult<VEvent> {
    let ue = vctx.create_user_event()?;
    let completer = ue.clone();
    dep.on_done(move |status| {
        // Always CL_COMPLETE: a vendor queue behind a failed user event may stall or
        // abort (PoCL 3.1); the MirrorCL event of the waiting command already failed.
        let _ = status;
        let _ = completer.set_user_status(CL_COMPLETE);
    });
    Ok(ue)
}
