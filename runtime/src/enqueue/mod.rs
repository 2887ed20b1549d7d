//! From a validated enqueue call to vendor commands: each command is planned by the
//! context's scheduler (transfers first, conflicts ordered), then handed to the issuer of
//! the device that runs it. Arguments reaching this module are already validated.

use crate::cl::*;
use crate::config::Variant;
use crate::context::{new_stream, Context};
use crate::device::Device;
use crate::event::{command_name, Event, VendorEvent};
use crate::issuer::{IssuerState, Job, JobInfo};
use crate::kernel::{ArgValue, Kernel, VendorArg};
use crate::memory::{Buffer, Mapping};
use crate::node::What;
use crate::queue::Queue;
use crate::remote::{self, HostSpan, Staging};
use crate::stats::{add, COUNTERS};
use crate::vendor::V;
use crate::ClResult;
use mirrorcl_scheduler::{Access, Location, Mode, Scheduler, Step};
use std::ffi::c_void;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// A vendor command: given the vendor queue, the vendor wait list and where to put the
/// vendor event (NULL: none wanted), enqueue. Runs on the issuer thread.
pub type VendorWork = Box<dyn FnOnce(V, &[cl_event], *mut cl_event) -> ClResult<()> + Send>;

pub enum Work {
    Vendor(VendorWork),
    /// Nothing to run: the command is done when its dependencies are (maps, unmaps,
    /// markers, migrations to the host).
    Host,
}

/// One command as the scheduler sees it.
pub struct Command {
    pub queue: Arc<Queue>,
    pub command_type: cl_command_type,
    pub wait_list: Vec<Arc<Event>>,
    /// Buffer, range within that buffer (not the root), how it is used.
    pub accesses: Vec<(Arc<Buffer>, Range<usize>, Mode)>,
    /// Runs on the host copy rather than on the queue's device (maps, unmaps, markers).
    pub at_host: bool,
    /// A blocking read or write: the vendor call itself blocks on the issuer, which is
    /// the vendor's fastest path for the host to get the bytes.
    pub blocking: bool,
    /// A read: the host memory it fills, which every rank must see (the owner reads and
    /// sends the bytes to every other rank).
    pub fills_host: Option<HostSpan>,
}

fn root_arc(b: &Arc<Buffer>) -> Arc<Buffer> {
    b.parent.clone().unwrap_or_else(|| b.clone())
}

/// Plans and submits a command; returns its event.
///
/// On every rank alike: the scheduler plans the command and its transfers. Then only the
/// owner of the queue's device runs it; elsewhere it is bookkeeping that completes after
/// its dependencies, except that a read's bytes reach every rank (the owner sends them).
pub fn submit(cmd: Command, work: Work) -> ClResult<Arc<Event>> {
    let queue = cmd.queue.clone();
    let cmd_blocking = cmd.blocking;
    let ctx = queue.context.clone();
    let device = queue.device.clone();
    add(&COUNTERS.commands_created, 1);
    let index = COMMAND_INDEX.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    if crate::verify::enabled() {
        let mut what = Vec::with_capacity(cmd.accesses.len() * 25);
        for (b, r, mode) in &cmd.accesses {
            let root = b.root_range(r.start, r.len());
            what.extend_from_slice(&b.id.to_le_bytes());
            what.extend_from_slice(&root.start.to_le_bytes());
            what.extend_from_slice(&root.end.to_le_bytes());
            what.push(*mode as u8);
        }
        what.extend_from_slice(&device.index.to_le_bytes());
        crate::verify::note(command_name(cmd.command_type), &[&what]);
    }
    let (at, stream) = if cmd.at_host {
        (Location::Host, new_stream())
    } else {
        (Location::Device(device.index), queue.stream)
    };
    let event = Event::new(ctx.clone(), Some(&queue), cmd.command_type, stream);
    let accesses: Vec<Access> = cmd
        .accesses
        .iter()
        .map(|(b, r, mode)| Access {
            buffer: b.id,
            range: b.root_range(r.start, r.end - r.start),
            mode: *mode,
        })
        .collect();
    event.keep_all(
        cmd.accesses
            .iter()
            .map(|(b, _, _)| root_arc(b) as Arc<dyn std::any::Any + Send + Sync>),
    );
    if let Some(a) = accesses.first() {
        event.set_subject(a.buffer);
    }
    if !cmd.at_host {
        event.set_owner(device.owner);
    }
    let work = match (
        work,
        device.local.then(|| injected_failure(index)).flatten(),
    ) {
        (Work::Vendor(_), Some(rc)) => Work::Vendor(Box::new(move |_, _, _| Err(rc))),
        (w, _) => w,
    };
    // The scheduler lock is held until the command reaches its issuer, so every issuer
    // receives commands in schedule order.
    let mut sched = ctx.lock_scheduler();
    if left_out(&cmd, &sched) {
        drop(sched);
        // Nothing here depends on it and nothing here must track it: not enqueued. Its
        // event still keeps the meaning of its wait list.
        add(&COUNTERS.commands_not_enqueued, 1);
        event.complete_after(cmd.wait_list);
        return Ok(event);
    }
    // The application's wait list comes first: only its failures fail the command; what
    // MirrorCL adds after it only orders it.
    let failing = cmd.wait_list.len();
    let mut deps = cmd.wait_list;
    let scheduling = std::time::Instant::now();
    add(&COUNTERS.commands_scheduled, 1);
    let conflicts = sched.schedule(at, stream, &accesses, &event, |step, step_deps| {
        transfer(&ctx, &cmd.accesses, step, step_deps)
    });
    add(
        &COUNTERS.scheduling_ns,
        scheduling.elapsed().as_nanos() as u64,
    );
    deps.extend(conflicts);
    if let Some(prev) = queue.last() {
        // A virtual device's queue has no vendor queue to keep it in order, and a read
        // whose bytes are still being sent outlives its vendor command.
        if prev.stream != stream || !device.local || prev.outlives_vendor() {
            deps.push(prev);
        }
    }
    queue.record(event.clone());
    let node = crate::node::node();
    let shared_read = cmd.fills_host.filter(|_| node.is_cluster());
    let what = || What {
        command: command_name(cmd.command_type),
        buffer: accesses.first().map_or(0, |a| a.buffer),
        offset: accesses.first().map_or(0, |a| a.range.start),
        len: accesses.first().map_or(0, |a| a.range.end - a.range.start),
    };
    let runs_here = cmd.at_host || device.local;
    let host_work = match (work, runs_here, shared_read) {
        (Work::Vendor(f), true, None) => {
            add(&COUNTERS.commands_issued, 1);
            let vctx = ctx.vendor_context(&device).vctx;
            issue(
                &device,
                vctx,
                queue.vqueue,
                event.clone(),
                Deps { all: deps, failing },
                f,
                Some(queue.clone()),
                cmd_blocking,
            );
            None
        }
        (Work::Vendor(f), true, Some(span)) => {
            add(&COUNTERS.commands_issued, 1);
            // The owner reads, then sends the bytes to every other rank.
            let vctx = ctx.vendor_context(&device).vctx;
            let read = Event::new(ctx.clone(), None, cmd.command_type, queue.stream);
            event.set_outlives_vendor();
            let data_peers = remote::other_ranks();
            let status_peers = remote::other_ranks();
            remote::send_read(&read, event.clone(), data_peers, status_peers, span, what());
            issue(
                &device,
                vctx,
                queue.vqueue,
                read,
                Deps { all: deps, failing },
                f,
                Some(queue.clone()),
                cmd_blocking,
            );
            None
        }
        (Work::Vendor(_), false, Some(span)) => {
            let tags = (node.tag_with(device.owner), node.tag_with(device.owner));
            remote::receive_read(deps, event.clone(), device.owner, tags, span, what());
            None
        }
        // Another rank's command, or one on the host copy: bookkeeping here.
        (Work::Vendor(_), false, None) | (Work::Host, _, _) => Some(deps),
    };
    drop(sched);
    // Completions run callbacks (the application's among them): never under the lock.
    if let Some(deps) = host_work {
        event.complete_after_ordered(deps, failing);
    }
    queue.prune();
    Ok(event)
}

/// Every command's number in enqueue order, the same on every rank.
static COMMAND_INDEX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `MIRRORCL_INJECT_FAILURE=N:CODE`: the vendor "fails" command number N (counted from 1
/// in enqueue order) with CODE on the rank that runs it, as a vendor would fail a kernel
/// or an allocation. For testing how failures reach every rank; off unless set.
fn injected_failure(index: u64) -> Option<cl_int> {
    static PLAN: OnceLock<Option<(u64, cl_int)>> = OnceLock::new();
    let plan = PLAN.get_or_init(|| {
        let v = std::env::var("MIRRORCL_INJECT_FAILURE").ok()?;
        let (n, code) = v.split_once(':')?;
        Some((n.trim().parse().ok()?, code.trim().parse().ok()?))
    });
    plan.filter(|(n, _)| *n == index).map(|(_, code)| code)
}

/// The queueing optimisation (thesis IV.6, Table IV.2, and further): a command is not
/// enqueued on this rank when it runs on another rank's device, is not a read (whose
/// bytes every rank must receive), and every buffer it touches is attached to a device
/// of another rank that is not in another vendor group of the command's rank. Then no
/// step of it involves this rank (an attached buffer's steps go directly between its
/// device and the command's, both elsewhere), and it changes nothing this
/// rank tracks (attached buffers have no valid set; the hazards of other ranks' device
/// instances only order work this rank never runs). Commands that touch no buffer
/// (kernels with only values) qualify too. Every rank the command involves still
/// schedules it, in the same order, so the ranks of each pair agree on their tags.
fn left_out(cmd: &Command, sched: &Scheduler<Arc<Event>>) -> bool {
    let device = &cmd.queue.device;
    if device.local || cmd.at_host || cmd.fills_host.is_some() {
        return false;
    }
    let platform = crate::platform::platform();
    if platform.config.runtime.variant != Variant::Full || platform.size == 1 {
        return false;
    }
    let ctx = &cmd.queue.context;
    cmd.accesses.iter().all(|(b, _, _)| {
        sched
            .attached(b.id)
            .and_then(|a| ctx.device_by_index(a))
            .is_some_and(|a| {
                // Between two groups of one rank the bytes stage through the host copy,
                // which is a broadcast every rank takes part in.
                !a.local && (a.owner != device.owner || a.owner_group == device.owner_group)
            })
    })
}

/// `clAttachBufferToDevice`: makes `device`'s copy of the buffer current (the bytes move
/// there from wherever they are, identically on every rank), then attaches it. Ignored
/// in the `decentralization` variant.
pub fn attach(buffer: &Arc<Buffer>, device: &Arc<Device>) -> ClResult<()> {
    let platform = crate::platform::platform();
    if platform.config.runtime.variant == Variant::Decentralization {
        return Ok(());
    }
    let ctx = buffer.context.clone();
    let event = Event::new(
        ctx.clone(),
        None,
        CL_COMMAND_MIGRATE_MEM_OBJECTS,
        new_stream(),
    );
    let accesses = [(buffer.clone(), 0..buffer.size, Mode::Read)];
    event.keep(buffer.clone());
    let mut sched = ctx.lock_scheduler();
    let deps = sched.schedule(
        Location::Device(device.index),
        event.stream,
        &[Access {
            buffer: buffer.id,
            range: 0..buffer.size as u64,
            mode: Mode::Read,
        }],
        &event,
        |step, step_deps| transfer(&ctx, &accesses, step, step_deps),
    );
    sched.attach(buffer.id, device.index);
    drop(sched);
    event.complete_after(deps);
    Ok(())
}

/// What a command waits for: the application's wait list first (`failing` of them),
/// whose failure fails the command, then what MirrorCL adds (conflicts, queue order),
/// which only orders it: a command behind a failed one it did not ask to wait for runs.
struct Deps {
    all: Vec<Arc<Event>>,
    failing: usize,
}

/// Sends a vendor command to `device`'s issuer.
#[allow(clippy::too_many_arguments)]
fn issue(
    device: &Device,
    vctx: V,
    vqueue: V,
    event: Arc<Event>,
    deps: Deps,
    f: VendorWork,
    keep_queue: Option<Arc<Queue>>,
    blocking: bool,
) {
    let stream = event.stream;
    let Deps { all: deps, failing } = deps;
    let free = deps.iter().all(|d| d.is_done());
    let info = JobInfo {
        vqueue,
        event: Arc::as_ptr(&event) as usize,
        may_share: !blocking
            && !event.profiling
            && matches!(
                event.command_type,
                CL_COMMAND_NDRANGE_KERNEL | CL_COMMAND_TASK
            )
            && free,
        blocking,
        deps: deps.iter().map(|d| Arc::as_ptr(d) as usize).collect(),
        free,
    };
    let run = move |state: &mut IssuerState, share: bool| {
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
    };
    device.issuer().send(Job {
        info,
        run: Box::new(run),
    });
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

/// Submits one planned transfer step; returns its stream and event. What this rank does
/// follows Table IV.1 (`docs/scheduler.md`): a local copy, a read and a send, a receive
/// and a write, or nothing (an event that is complete at once).
fn transfer(
    ctx: &Arc<Context>,
    buffers: &[(Arc<Buffer>, Range<usize>, Mode)],
    step: &Step,
    deps: Vec<Arc<Event>>,
) -> (u64, Arc<Event>) {
    let node = crate::node::node();
    let offset = step.range.start as usize;
    let len = (step.range.end - step.range.start) as usize;
    let pieces = remote::pieces(offset, len);
    let root = buffers
        .iter()
        .find(|(b, _, _)| b.id == step.buffer)
        .map(|(b, _, _)| root_arc(b))
        .expect("steps are planned for the command's own buffers");
    let device_of = |l: Location| match l {
        Location::Device(d) => Some(
            ctx.device_by_index(d)
                .expect("the scheduler only plans the context's devices")
                .clone(),
        ),
        Location::Host => None,
    };
    let (src, dst) = (device_of(step.from), device_of(step.to));
    tracing::trace!(
        "step: buffer {} {:?} {:?} -> {:?}",
        step.buffer,
        step.range,
        step.from,
        step.to
    );
    let what = |piece: &Range<usize>| What {
        command: "a planned transfer",
        buffer: step.buffer,
        offset: piece.start as u64,
        len: piece.len() as u64,
    };
    let nothing = || {
        let event = Event::new(ctx.clone(), None, CL_COMMAND_MARKER, new_stream());
        event.complete(CL_COMPLETE);
        (event.stream, event)
    };
    let failed = |command_type, rc| {
        let event = Event::new(ctx.clone(), None, command_type, new_stream());
        event.complete(rc);
        (event.stream, event)
    };
    let result = match (&src, &dst) {
        (Some(s), Some(d)) if s.owner != d.owner && s.local => {
            // Read each piece into a staging block and send it to the destination's
            // owner; a block is reused once its piece has been sent.
            (|| {
                let blocks = (0..remote::WINDOW.min(pieces.len()))
                    .map(|_| Staging::new(len.min(remote::piece_size(len))))
                    .collect::<ClResult<Vec<_>>>()?;
                let all_sent = Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, new_stream());
                let arrive = remote::join(all_sent.clone(), pieces.len());
                let mut sent: Vec<Arc<Event>> = Vec::new();
                for (i, piece) in pieces.iter().enumerate() {
                    let block = blocks[i % blocks.len()].clone();
                    let mut piece_deps = deps.clone();
                    if i >= blocks.len() {
                        piece_deps.push(sent[i - blocks.len()].clone());
                    }
                    let read = local_transfer(
                        ctx,
                        s,
                        &root,
                        false,
                        piece.start,
                        piece.len(),
                        block.addr(),
                        piece_deps,
                    )?;
                    let piece_sent =
                        Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, read.stream);
                    let span = HostSpan::Contiguous {
                        ptr: block.addr(),
                        len: piece.len(),
                    };
                    remote::send_when_done(
                        &read,
                        piece_sent.clone(),
                        vec![(d.owner, node.tag_with(d.owner))],
                        span,
                        what(piece),
                        Some(block),
                    );
                    let arrive = arrive.clone();
                    piece_sent.on_done(move |status| arrive(status >= 0));
                    sent.push(piece_sent);
                }
                Ok::<_, cl_int>(all_sent)
            })()
            .map_err(|rc| (CL_COMMAND_COPY_BUFFER, rc))
        }
        (Some(s), Some(d)) if s.owner != d.owner && d.local => {
            // Receive each piece into a staging block and write it to the device; a
            // block is received into again once its previous piece is written.
            (|| {
                let blocks = (0..remote::WINDOW.min(pieces.len()))
                    .map(|_| Staging::new(len.min(remote::piece_size(len))))
                    .collect::<ClResult<Vec<_>>>()?;
                let mut writes: Vec<Arc<Event>> = Vec::new();
                for (i, piece) in pieces.iter().enumerate() {
                    let block = blocks[i % blocks.len()].clone();
                    let received =
                        Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, new_stream());
                    let span = HostSpan::Contiguous {
                        ptr: block.addr(),
                        len: piece.len(),
                    };
                    let free = if i >= blocks.len() {
                        vec![writes[i - blocks.len()].clone()]
                    } else {
                        Vec::new()
                    };
                    remote::receive_after(
                        free,
                        received.clone(),
                        s.owner,
                        node.tag_with(s.owner),
                        span,
                        what(piece),
                        Some(block.clone()),
                    );
                    let mut piece_deps = deps.clone();
                    piece_deps.push(received);
                    let write = local_transfer(
                        ctx,
                        d,
                        &root,
                        true,
                        piece.start,
                        piece.len(),
                        block.addr(),
                        piece_deps,
                    )?;
                    write.keep(block);
                    writes.push(write);
                }
                // The transfer queue is in order: the last write completes last.
                Ok::<_, cl_int>(writes.pop().expect("at least one piece"))
            })()
            .map_err(|rc| (CL_COMMAND_COPY_BUFFER, rc))
        }
        (Some(s), Some(d)) if s.owner != d.owner => return nothing(),
        (Some(s), Some(d)) => {
            if !s.local {
                return nothing();
            }
            add(&COUNTERS.local_copies, 1);
            local_copy(ctx, s, d, &root, offset, len, deps)
                .map_err(|rc| (CL_COMMAND_COPY_BUFFER, rc))
        }
        (None, Some(d)) => {
            if !d.local {
                return nothing();
            }
            add(&COUNTERS.local_copies, 1);
            root.host_copy()
                .and_then(|h| {
                    local_transfer(ctx, d, &root, true, offset, len, h as usize + offset, deps)
                })
                .map_err(|rc| (CL_COMMAND_WRITE_BUFFER, rc))
        }
        (Some(s), None) => {
            // The host copy is replicated: the owner reads each piece into its own and
            // sends it to every other rank, which receive into theirs.
            (|| {
                let host = root.host_copy()? as usize;
                if s.local && !node.is_cluster() {
                    add(&COUNTERS.local_copies, 1);
                    return local_transfer(ctx, s, &root, false, offset, len, host + offset, deps);
                }
                let done = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
                let arrive = remote::join(done.clone(), pieces.len());
                for piece in pieces.iter() {
                    let span = HostSpan::Contiguous {
                        ptr: host + piece.start,
                        len: piece.len(),
                    };
                    let piece_done =
                        Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
                    if s.local {
                        let read = local_transfer(
                            ctx,
                            s,
                            &root,
                            false,
                            piece.start,
                            piece.len(),
                            host + piece.start,
                            deps.clone(),
                        )?;
                        remote::send_when_done(
                            &read,
                            piece_done.clone(),
                            remote::other_ranks(),
                            span,
                            what(piece),
                            Some(root.clone()),
                        );
                    } else {
                        remote::receive_after(
                            deps.clone(),
                            piece_done.clone(),
                            s.owner,
                            node.tag_with(s.owner),
                            span,
                            what(piece),
                            Some(root.clone()),
                        );
                    }
                    let arrive = arrive.clone();
                    piece_done.on_done(move |status| arrive(status >= 0));
                }
                Ok::<_, cl_int>(done)
            })()
            .map_err(|rc| (CL_COMMAND_READ_BUFFER, rc))
        }
        (None, None) => unreachable!("the host copy never transfers to itself"),
    };
    match result {
        Ok(e) => (e.stream, e),
        Err((command_type, rc)) => failed(command_type, rc),
    }
}

/// A vendor copy between two devices of one vendor context, on the destination's
/// transfer queue.
fn local_copy(
    ctx: &Arc<Context>,
    src_dev: &Arc<Device>,
    device: &Arc<Device>,
    root: &Arc<Buffer>,
    offset: usize,
    len: usize,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let tq = ctx.transfer_queue(device)?;
    let src = root.instance(src_dev)?;
    let dst = root.instance(device)?;
    let work: VendorWork = Box::new(move |q, waits, out| {
        let f = vfn!(q.0, clEnqueueCopyBuffer)?;
        // SAFETY: live vendor objects of one context; range inside both.
        crate::check(unsafe {
            f(
                q.0,
                src.get(),
                dst.get(),
                offset,
                offset,
                len,
                waits.len() as cl_uint,
                wait_ptr(waits),
                out,
            )
        })?;
        Ok(())
    });
    Ok(issue_transfer(
        ctx,
        device,
        tq,
        CL_COMMAND_COPY_BUFFER,
        root,
        deps,
        work,
    ))
}

/// A vendor read of the device's instance into host memory at `host`, or a write from
/// it (`(device, true)`), on the device's transfer queue.
#[allow(clippy::too_many_arguments)]
fn local_transfer(
    ctx: &Arc<Context>,
    device: &Arc<Device>,
    root: &Arc<Buffer>,
    write: bool,
    offset: usize,
    len: usize,
    host: usize,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let tq = ctx.transfer_queue(device)?;
    let mem = root.instance(device)?;
    let work: VendorWork = Box::new(move |q, waits, out| {
        vendor_rw(q, mem, write, false, offset, len, host, waits, out)
    });
    let command_type = if write {
        CL_COMMAND_WRITE_BUFFER
    } else {
        CL_COMMAND_READ_BUFFER
    };
    Ok(issue_transfer(
        ctx,
        device,
        tq,
        command_type,
        root,
        deps,
        work,
    ))
}

fn issue_transfer(
    ctx: &Arc<Context>,
    device: &Arc<Device>,
    tq: crate::context::TransferQueue,
    command_type: cl_command_type,
    root: &Arc<Buffer>,
    deps: Vec<Arc<Event>>,
    work: VendorWork,
) -> Arc<Event> {
    let event = Event::new(ctx.clone(), None, command_type, tq.stream);
    event.keep(root.clone());
    let vctx = ctx.vendor_context(device).vctx;
    issue(
        device,
        vctx,
        tq.vqueue,
        event.clone(),
        Deps {
            all: deps,
            failing: 0,
        },
        work,
        None,
        false,
    );
    event
}

pub fn wait_ptr(waits: &[cl_event]) -> *const cl_event {
    if waits.is_empty() {
        std::ptr::null()
    } else {
        waits.as_ptr()
    }
}

/// Waits for a blocking command; a failed command reports
/// `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST` (OpenCL 1.2 §5.2.2).
pub fn finish_blocking(event: &Arc<Event>, blocking: bool) -> ClResult<()> {
    if blocking {
        crate::verify::check(command_name(event.command_type));
        let status = event.wait();
        // Commands before it in the queue are done too: record it.
        if let Some(q) = event.queue() {
            q.prune();
        }
        if status < 0 {
            return Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        }
    }
    Ok(())
}

/// Byte span `[first, last+1)` touched by a rectangle, relative to the buffer.
pub fn rect_span(
    origin: [usize; 3],
    region: [usize; 3],
    row_pitch: usize,
    slice_pitch: usize,
) -> Range<usize> {
    let start = origin[2] * slice_pitch + origin[1] * row_pitch + origin[0];
    let end = (origin[2] + region[2] - 1) * slice_pitch
        + (origin[1] + region[1] - 1) * row_pitch
        + origin[0]
        + region[0];
    start..end
}

/// The buffer's instance on the queue's device; none on a virtual device, whose commands
/// never reach a vendor here. A failure (the vendor cannot allocate it) is carried into
/// the command, which then fails with it: its event reports it on every rank, where an
/// error returned here would be returned on the owner alone.
fn device_instance(queue: &Queue, b: &Buffer) -> ClResult<V> {
    if queue.device.local {
        b.instance(&queue.device)
    } else {
        Ok(V::NULL)
    }
}

/// One vendor read (`write == false`) or write of `len` bytes at `offset` between a
/// vendor buffer and host memory; returns the vendor event.
#[allow(clippy::too_many_arguments)]
fn vendor_rw(
    q: V,
    mem: V,
    write: bool,
    blocking: bool,
    offset: usize,
    len: usize,
    host: usize,
    waits: &[cl_event],
    out: *mut cl_event,
) -> ClResult<()> {
    let n = waits.len() as cl_uint;
    let rc = if write {
        let f = vfn!(q.0, clEnqueueWriteBuffer)?;
        // SAFETY: a validated range of a live vendor buffer; the caller keeps `host`
        // valid until the command completes.
        unsafe {
            f(
                q.0,
                mem.0,
                blocking as cl_bool,
                offset,
                len,
                host as *const c_void,
                n,
                wait_ptr(waits),
                out,
            )
        }
    } else {
        let f = vfn!(q.0, clEnqueueReadBuffer)?;
        // SAFETY: as above.
        unsafe {
            f(
                q.0,
                mem.0,
                blocking as cl_bool,
                offset,
                len,
                host as *mut c_void,
                n,
                wait_ptr(waits),
                out,
            )
        }
    };
    crate::check(rc)?;
    Ok(())
}

/// `clEnqueueReadBuffer` (`write == false`) and `clEnqueueWriteBuffer`.
#[allow(clippy::too_many_arguments)]
pub fn rw_buffer(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    write: bool,
    blocking: bool,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let m = device_instance(queue, buffer);
    if write && crate::verify::enabled() {
        // SAFETY: the application passed `size` readable bytes at `ptr` (validated).
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, size) };
        crate::verify::note("clEnqueueWriteBuffer (data)", &[data]);
    }
    let ptr = ptr as usize;
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: if write {
                CL_COMMAND_WRITE_BUFFER
            } else {
                CL_COMMAND_READ_BUFFER
            },
            wait_list,
            accesses: vec![(
                buffer.clone(),
                offset..offset + size,
                if write { Mode::Write } else { Mode::Read },
            )],
            at_host: false,
            blocking,
            fills_host: (!write).then_some(HostSpan::Contiguous { ptr, len: size }),
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            vendor_rw(q, m?, write, blocking, offset, size, ptr, waits, out)
        })),
    )?;
    finish_blocking(&event, blocking)?;
    Ok(event)
}

pub fn copy_buffer(
    queue: &Arc<Queue>,
    src: &Arc<Buffer>,
    dst: &Arc<Buffer>,
    src_offset: usize,
    dst_offset: usize,
    size: usize,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let s = device_instance(queue, src);
    let d = device_instance(queue, dst);
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_COPY_BUFFER,
            wait_list,
            accesses: vec![
                (src.clone(), src_offset..src_offset + size, Mode::Read),
                (dst.clone(), dst_offset..dst_offset + size, Mode::Write),
            ],
            at_host: false,
            blocking: false,
            fills_host: None,
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            let (s, d) = (s?, d?);
            let f = vfn!(q.0, clEnqueueCopyBuffer)?;
            // SAFETY: validated ranges on live vendor buffers.
            crate::check(unsafe {
                f(
                    q.0,
                    s.get(),
                    d.get(),
                    src_offset,
                    dst_offset,
                    size,
                    waits.len() as cl_uint,
                    wait_ptr(waits),
                    out,
                )
            })?;
            Ok(())
        })),
    )
}

/// Origin, region and pitches of one side of a rectangular transfer.
#[derive(Clone, Copy)]
pub struct Rect {
    pub origin: [usize; 3],
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

impl Rect {
    pub fn span(&self, region: [usize; 3]) -> Range<usize> {
        rect_span(self.origin, region, self.row_pitch, self.slice_pitch)
    }
}

/// `clEnqueueReadBufferRect` (`write == false`) and `clEnqueueWriteBufferRect`.
#[allow(clippy::too_many_arguments)]
pub fn rw_rect(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    write: bool,
    blocking: bool,
    buf: Rect,
    host: Rect,
    region: [usize; 3],
    ptr: *mut c_void,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let m = device_instance(queue, buffer);
    let ptr = ptr as usize;
    // A rectangle does not cover its span, so a write also needs the bytes in between.
    let mode = if write { Mode::ReadWrite } else { Mode::Read };
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: if write {
                CL_COMMAND_WRITE_BUFFER_RECT
            } else {
                CL_COMMAND_READ_BUFFER_RECT
            },
            wait_list,
            accesses: vec![(buffer.clone(), buf.span(region), mode)],
            at_host: false,
            blocking,
            fills_host: (!write).then_some(HostSpan::Rect {
                ptr,
                origin: host.origin,
                region,
                row_pitch: host.row_pitch,
                slice_pitch: host.slice_pitch,
            }),
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            let m = m?;
            let n = waits.len() as cl_uint;
            // SAFETY: validated rectangles; the application keeps ptr valid until completion.
            let rc = if write {
                let f = vfn!(q.0, clEnqueueWriteBufferRect)?;
                unsafe {
                    f(
                        q.0,
                        m.get(),
                        CL_FALSE,
                        buf.origin.as_ptr(),
                        host.origin.as_ptr(),
                        region.as_ptr(),
                        buf.row_pitch,
                        buf.slice_pitch,
                        host.row_pitch,
                        host.slice_pitch,
                        ptr as *const c_void,
                        n,
                        wait_ptr(waits),
                        out,
                    )
                }
            } else {
                let f = vfn!(q.0, clEnqueueReadBufferRect)?;
                // SAFETY: as above.
                unsafe {
                    f(
                        q.0,
                        m.get(),
                        CL_FALSE,
                        buf.origin.as_ptr(),
                        host.origin.as_ptr(),
                        region.as_ptr(),
                        buf.row_pitch,
                        buf.slice_pitch,
                        host.row_pitch,
                        host.slice_pitch,
                        ptr as *mut c_void,
                        n,
                        wait_ptr(waits),
                        out,
                    )
                }
            };
            crate::check(rc)?;
            Ok(())
        })),
    )?;
    finish_blocking(&event, blocking)?;
    Ok(event)
}

pub fn copy_rect(
    queue: &Arc<Queue>,
    src: &Arc<Buffer>,
    dst: &Arc<Buffer>,
    s: Rect,
    d: Rect,
    region: [usize; 3],
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let sm = device_instance(queue, src);
    let dm = device_instance(queue, dst);
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_COPY_BUFFER_RECT,
            wait_list,
            accesses: vec![
                (src.clone(), s.span(region), Mode::Read),
                (dst.clone(), d.span(region), Mode::ReadWrite),
            ],
            at_host: false,
            blocking: false,
            fills_host: None,
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            let (sm, dm) = (sm?, dm?);
            let f = vfn!(q.0, clEnqueueCopyBufferRect)?;
            // SAFETY: validated rectangles on live vendor buffers.
            crate::check(unsafe {
                f(
                    q.0,
                    sm.get(),
                    dm.get(),
                    s.origin.as_ptr(),
                    d.origin.as_ptr(),
                    region.as_ptr(),
                    s.row_pitch,
                    s.slice_pitch,
                    d.row_pitch,
                    d.slice_pitch,
                    waits.len() as cl_uint,
                    wait_ptr(waits),
                    out,
                )
            })?;
            Ok(())
        })),
    )
}

pub fn fill_buffer(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    pattern: Vec<u8>,
    offset: usize,
    size: usize,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let m = device_instance(queue, buffer);
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_FILL_BUFFER,
            wait_list,
            accesses: vec![(buffer.clone(), offset..offset + size, Mode::Write)],
            at_host: false,
            blocking: false,
            fills_host: None,
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            let m = m?;
            let f = vfn!(q.0, clEnqueueFillBuffer)?;
            // SAFETY: validated pattern and range; the vendor copies the pattern.
            crate::check(unsafe {
                f(
                    q.0,
                    m.get(),
                    pattern.as_ptr() as *const c_void,
                    pattern.len(),
                    offset,
                    size,
                    waits.len() as cl_uint,
                    wait_ptr(waits),
                    out,
                )
            })?;
            Ok(())
        })),
    )
}

/// `clEnqueueMapBuffer`: the mapped memory is the buffer's host copy (the application's
/// own memory for `CL_MEM_USE_HOST_PTR`), made current unless the map invalidates it.
pub fn map_buffer(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    blocking: bool,
    flags: cl_map_flags,
    offset: usize,
    size: usize,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<(Arc<Event>, *mut c_void)> {
    let host = buffer.host_copy()?;
    let root_offset = buffer.origin + offset;
    // SAFETY: offset+size is inside the root buffer, whose host copy has its size.
    let ptr = unsafe { host.add(root_offset) } as *mut c_void;
    let invalidate = flags & CL_MAP_WRITE_INVALIDATE_REGION != 0;
    let writes = invalidate || flags & CL_MAP_WRITE != 0;
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_MAP_BUFFER,
            wait_list,
            accesses: vec![(
                buffer.clone(),
                offset..offset + size,
                if invalidate { Mode::Write } else { Mode::Read },
            )],
            at_host: true,
            blocking: false,
            fills_host: None,
        },
        Work::Host,
    )?;
    buffer.maps.lock().push(Mapping {
        ptr: ptr as usize,
        offset,
        size,
        writes,
    });
    buffer
        .map_count
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    finish_blocking(&event, blocking)?;
    Ok((event, ptr))
}

/// `clEnqueueUnmapMemObject` for a mapping found by the caller.
pub fn unmap(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    mapping: Mapping,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    buffer
        .map_count
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    let range = mapping.offset..mapping.offset + mapping.size;
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_UNMAP_MEM_OBJECT,
            wait_list,
            // The host wrote the mapped bytes in place: the host copy is now the newest.
            accesses: if mapping.writes {
                vec![(buffer.clone(), range, Mode::Write)]
            } else {
                Vec::new()
            },
            at_host: true,
            blocking: false,
            fills_host: None,
        },
        Work::Host,
    )
}

/// `clEnqueueMarkerWithWaitList` / `clEnqueueBarrierWithWaitList`: completes after the
/// listed events, or after every earlier command of the queue when the list is empty.
pub fn marker(
    queue: &Arc<Queue>,
    command_type: cl_command_type,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let deps = if wait_list.is_empty() {
        queue.pending()
    } else {
        wait_list
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type,
            wait_list: deps,
            accesses: Vec::new(),
            at_host: true,
            blocking: false,
            fills_host: None,
        },
        Work::Host,
    )
}

pub fn migrate(
    queue: &Arc<Queue>,
    buffers: Vec<Arc<Buffer>>,
    flags: cl_mem_migration_flags,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let to_host = flags & CL_MIGRATE_MEM_OBJECT_HOST != 0;
    let mode = if flags & CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED != 0 {
        Mode::Write
    } else {
        Mode::Read
    };
    let instances: ClResult<()> = if to_host {
        Ok(())
    } else {
        buffers
            .iter()
            .try_for_each(|b| device_instance(queue, b).map(|_| ()))
    };
    // The transfers the scheduler plans are the migration; what remains on the device
    // is a marker that orders the queue.
    let work = if to_host {
        Work::Host
    } else {
        Work::Vendor(Box::new(move |q, waits, out| {
            instances?;
            let f = vfn!(q.0, clEnqueueMarkerWithWaitList)?;
            // SAFETY: live vendor queue and events.
            crate::check(unsafe { f(q.0, waits.len() as cl_uint, wait_ptr(waits), out) })?;
            Ok(())
        }))
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_MIGRATE_MEM_OBJECTS,
            wait_list,
            accesses: buffers
                .iter()
                .map(|b| (b.clone(), 0..b.size, mode))
                .collect(),
            at_host: to_host,
            blocking: false,
            fills_host: None,
        },
        work,
    )
}

/// `clEnqueueNDRangeKernel` after validation. `args` is the snapshot of the kernel's
/// arguments at enqueue time.
#[allow(clippy::too_many_arguments)]
pub fn ndrange(
    queue: &Arc<Queue>,
    kernel: &Arc<Kernel>,
    command_type: cl_command_type,
    dims: u32,
    offset: Option<[usize; 3]>,
    global: [usize; 3],
    local: Option<[usize; 3]>,
    args: Vec<ArgValue>,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let mut accesses = Vec::new();
    let mut vendor_args = Vec::with_capacity(args.len());
    let mut instance_failure = None;
    for (i, arg) in args.iter().enumerate() {
        vendor_args.push(match arg {
            ArgValue::Mem(Some(b)) => {
                let read_only = b.flags & CL_MEM_READ_ONLY != 0
                    || kernel
                        .arg_info
                        .as_ref()
                        .is_some_and(|info| info[i].read_only);
                accesses.push((
                    b.clone(),
                    0..b.size,
                    if read_only {
                        Mode::Read
                    } else {
                        Mode::ReadWrite
                    },
                ));
                VendorArg::Mem(device_instance(queue, b).unwrap_or_else(|rc| {
                    instance_failure.get_or_insert(rc);
                    V::NULL
                }))
            }
            ArgValue::Mem(None) => VendorArg::Mem(V::NULL),
            ArgValue::Local(n) => VendorArg::Local(*n),
            ArgValue::Bytes(b) => VendorArg::Bytes(b.clone()),
        });
    }
    let k = kernel.clone();
    let device = queue.device.clone();
    submit(
        Command {
            queue: queue.clone(),
            command_type,
            wait_list,
            accesses,
            at_host: false,
            blocking: false,
            fills_host: None,
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            if let Some(rc) = instance_failure {
                return Err(rc);
            }
            let vk = k.apply_args(&device, &vendor_args)?;
            let f = vfn!(q.0, clEnqueueNDRangeKernel)?;
            let off = offset.as_ref().map_or(std::ptr::null(), |o| o.as_ptr());
            let loc = local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr());
            // SAFETY: validated dimensions and sizes; arguments set above.
            crate::check(unsafe {
                f(
                    q.0,
                    vk.0,
                    dims,
                    off,
                    global.as_ptr(),
                    loc,
                    waits.len() as cl_uint,
                    wait_ptr(waits),
                    out,
                )
            })?;
            Ok(())
        })),
    )
}
