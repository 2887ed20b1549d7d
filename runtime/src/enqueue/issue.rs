//! Step 4, the last: a vendor command (an application command this rank runs, or the
//! device work of a transfer step) goes to its device's issuer thread, still under the
//! scheduler lock, so every issuer receives commands in schedule order. On the issuer
//! its dependencies become a vendor wait list, the vendor call runs, and its vendor
//! event is attached to the MirrorCL event.

use crate::cl::*;
use crate::device::Device;
use crate::event::{Event, VendorEvent};
use crate::issuer::{IssuerState, Job, JobInfo};
use crate::queue::Queue;
use crate::vendor::V;
use crate::ClResult;
use std::sync::Arc;

/// A vendor command: given the vendor queue, the vendor wait list and where to put the
/// vendor event (NULL: none wanted), enqueue. Runs on the issuer thread.
pub type VendorWork = Box<dyn FnOnce(V, &[cl_event], *mut cl_event) -> ClResult<()> + Send>;

/// What a command waits for: the application's wait list first (`failing` of them),
/// whose failure fails the command, then what MirrorCL adds (conflicts, queue order),
/// which only orders it: a command behind a failed one it did not ask to wait for runs.
pub(super) struct Deps {
    pub all: Vec<Arc<Event>>,
    pub failing: usize,
}

/// A vendor command on its way to its device's issuer, with what running it there needs.
pub(super) struct VendorCommand {
    pub vctx: V,
    /// The application queue's vendor queue, or the device's transfer queue.
    pub vqueue: V,
    pub event: Arc<Event>,
    pub deps: Deps,
    pub work: VendorWork,
    /// Keeps the application's queue alive until the command ran.
    pub keep_queue: Option<Arc<Queue>>,
    /// A blocking read or write: the vendor call itself blocks on the issuer.
    pub blocking: bool,
}

/// Sends a vendor command to `device`'s issuer.
pub(super) fn issue(device: &Device, cmd: VendorCommand) {
    let free = cmd.deps.all.iter().all(|d| d.is_done());
    let info = JobInfo {
        vqueue: cmd.vqueue,
        event: Arc::as_ptr(&cmd.event) as usize,
        may_share: !cmd.blocking
            && !cmd.event.profiling
            && matches!(
                cmd.event.command_type,
                CL_COMMAND_NDRANGE_KERNEL | CL_COMMAND_TASK
            )
            && free,
        blocking: cmd.blocking,
        deps: cmd
            .deps
            .all
            .iter()
            .map(|d| Arc::as_ptr(d) as usize)
            .collect(),
        free,
    };
    device.issuer().send(Job {
        info,
        run: Box::new(move |state: &mut IssuerState, share: bool| cmd.run(state, share)),
    });
}

impl VendorCommand {
    /// On the issuer: the vendor call with its wait list; `share`: no vendor event of its
    /// own (a later command's stands for it).
    fn run(self, state: &mut IssuerState, share: bool) {
        let VendorCommand {
            vctx,
            vqueue,
            event,
            deps: Deps { all: deps, failing },
            work: f,
            keep_queue,
            blocking,
        } = self;
        let stream = event.stream;
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
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let waits = VendorWaits::resolve(&deps, failing, vctx, stream)?;
            let mut ev: cl_event = std::ptr::null_mut();
            let out = if share {
                std::ptr::null_mut()
            } else {
                &mut ev as *mut cl_event
            };
            let result = f(vqueue, &waits.list, out);
            waits.release_own();
            result.map(|()| ev)
        }));
        match result {
            Ok(Ok(_)) if share => {
                state.defer(vqueue, vctx, stream, event.clone());
                state.touched(vqueue);
            }
            Ok(Ok(vev)) => {
                // Earlier commands first: whoever sees this one done may look at them.
                state.back_with(vqueue, V(vev));
                event.attach_vendor(VendorEvent {
                    ev: V(vev),
                    vctx,
                    stream,
                });
                state.touched(vqueue);
                if blocking {
                    // The vendor call returned with the bytes in place.
                    event.poll();
                }
            }
            Ok(Err(rc)) => event.complete(rc),
            Err(_) => event.complete(CL_OUT_OF_RESOURCES),
        }
        drop(keep_queue);
    }
}

/// A vendor wait list for a command's dependencies. A dependency issued in the same
/// vendor context is waited on directly; any other (another vendor, a user event, a
/// host-side command, a command not issued yet) through a vendor user event that
/// MirrorCL completes when the dependency does.
struct VendorWaits {
    list: Vec<cl_event>,
    bridges: Vec<V>,
}

impl VendorWaits {
    fn resolve(deps: &[Arc<Event>], failing: usize, vctx: V, stream: u64) -> ClResult<VendorWaits> {
        let mut waits = VendorWaits {
            list: Vec::new(),
            bridges: Vec::new(),
        };
        for (i, dep) in deps.iter().enumerate() {
            let status = dep.status();
            if status == CL_COMPLETE || (status < 0 && i >= failing) {
                continue;
            }
            if status < 0 {
                waits.release_own();
                return Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
            }
            if let Some(v) = dep.vendor() {
                if v.stream == stream {
                    continue;
                }
                if v.vctx == vctx {
                    waits.list.push(v.ev.0);
                    continue;
                }
            }
            match bridge(dep, vctx) {
                Ok(ue) => {
                    waits.list.push(ue.0);
                    waits.bridges.push(ue);
                }
                Err(rc) => {
                    waits.release_own();
                    return Err(rc);
                }
            }
        }
        Ok(waits)
    }

    /// Drops the issuer's references to the bridge events (the vendor holds its own for
    /// the commands waiting on them).
    fn release_own(&self) {
        for ue in &self.bridges {
            release_event(*ue);
        }
    }
}

fn release_event(e: V) {
    if let Ok(f) = vfn!(e.0, clReleaseEvent) {
        // SAFETY: we own one reference.
        unsafe { f(e.0) };
    }
}

/// A vendor user event in `vctx` that completes with `dep`.
fn bridge(dep: &Arc<Event>, vctx: V) -> ClResult<V> {
    let create = vfn!(vctx.0, clCreateUserEvent)?;
    let mut err = CL_SUCCESS;
    // SAFETY: live vendor context.
    let ue = V(unsafe { create(vctx.0, &mut err) });
    crate::check(err)?;
    let retain = vfn!(ue.0, clRetainEvent)?;
    // SAFETY: live vendor event; this reference belongs to the completion callback.
    unsafe { retain(ue.0) };
    dep.on_done(move |status| {
        if let Ok(set) = vfn!(ue.0, clSetUserEventStatus) {
            // Always CL_COMPLETE: a vendor queue behind a failed user event may stall or
            // abort (PoCL 3.1); the MirrorCL event of the waiting command already failed.
            let _ = status;
            let s = CL_COMPLETE;
            // SAFETY: live vendor user event, status set once.
            unsafe { set(ue.0, s) };
        }
        release_event(ue);
    });
    Ok(ue)
}

/// A vendor call's wait list pointer: NULL when the list is empty, as OpenCL requires.
pub fn wait_ptr(waits: &[cl_event]) -> *const cl_event {
    if waits.is_empty() {
        std::ptr::null()
    } else {
        waits.as_ptr()
    }
}
