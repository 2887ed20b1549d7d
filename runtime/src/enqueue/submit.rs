//! Step 2: a built command is planned and routed. On every rank alike the context's
//! scheduler plans it (its transfer steps go to `transfer_steps`, its conflicts become
//! dependencies); then the owner of the queue's device issues it (`issue`), a read's
//! bytes reach every rank, and elsewhere it is bookkeeping. Also the queueing
//! optimisation (`left_out`) and `clAttachBufferToDevice` (`attach`), which plans
//! through the same scheduler.

use super::issue::{blocks_in_vendor, issue, Deps, Inline, VendorCommand, VendorWork};
use super::transfer_steps::{read_for_predicted_sends, transfer, transfer_landing, Landed};
use super::{into_root, root_arc};
use crate::cl::*;
use crate::cluster::node::What;
use crate::enqueue::remote::{self, HostSpan};
use crate::objects::context::{new_stream, Context};
use crate::objects::device::Device;
use crate::objects::event::{command_name, Event};
use crate::objects::issuer::{Landing, MERGED_AT_MOST};
use crate::objects::memory::Buffer;
use crate::objects::queue::Queue;
use crate::observe::config::Variant;
use crate::observe::stats::{add, COUNTERS};
use crate::ClResult;
use mirrorcl_scheduler::{Access, Location, Mode, Placement, Scheduler};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// What a command runs where it runs.
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
    /// The wait list is the queue's unfinished commands (a marker without a list):
    /// which those are depends on timing, so it differs between ranks.
    pub waits_on_queue: bool,
    /// The application asked for no event: only its queue's order, `clFinish` and
    /// MirrorCL's own dependencies see the command complete (`JobInfo::may_go_unbacked`).
    pub unseen: bool,
}

/// Plans and submits a command; returns its event.
///
/// On every rank alike: the scheduler plans the command and its transfers. Then only the
/// owner of the queue's device runs it; elsewhere it is bookkeeping that completes after
/// its dependencies, except that a read's bytes reach every rank (the owner sends them).
pub fn submit(mut cmd: Command, work: Work) -> ClResult<Arc<Event>> {
    // Out of the command, which is only read from here on: its queue, context, device
    // and buffers are borrowed, not cloned (an atomic operation each way, some 20
    // cycles, on every command).
    let mut wait_list = std::mem::take(&mut cmd.wait_list);
    let cmd = cmd;
    let queue = &cmd.queue;
    let ctx = &queue.context;
    let device = &queue.device;
    queue.keep_pace();
    add(&COUNTERS.commands_created, 1);
    let index = command_index();
    if crate::cluster::history::kept() {
        crate::cluster::history::note_command(
            command_name(cmd.command_type),
            cmd.command_type,
            device.index,
            cmd.accesses.iter().map(|(b, r, mode)| {
                let root = b.root_range(r.start, r.len());
                (b.id, root.start, root.end, *mode as u8)
            }),
        );
    }
    if crate::cluster::verify::enabled() {
        note_for_verify(&cmd, device);
    }
    let (at, stream) = if cmd.at_host {
        (Location::Host, new_stream())
    } else {
        (Location::Device(device.index), queue.stream)
    };
    let event = Event::new(ctx.clone(), Some(queue), cmd.command_type, stream);
    if crate::cluster::host_threads::several() && crate::cluster::node::is_cluster_now() {
        // Named only where threads are: waits then pair by it (`event::wait_all`).
        let command = crate::cluster::host_threads::next_command();
        event
            .command
            .store(command, std::sync::atomic::Ordering::Release);
        let accesses: Vec<_> = (cmd.accesses.iter())
            .map(|(b, r, mode)| {
                let writes = matches!(mode, Mode::Write | Mode::ReadWrite);
                (
                    &b.root().races,
                    b.id,
                    b.root_range(r.start, r.len()),
                    writes,
                )
            })
            .collect();
        crate::objects::races::check(queue, &wait_list, &event, &accesses);
    }
    let waits = crate::cluster::record::enabled().then(|| recorded_waits(&cmd, &wait_list));
    let vendor = matches!(work, Work::Vendor(_));
    wait_list_elsewhere(&cmd, &mut wait_list, &event);
    name_for_reports(&cmd, &event);
    let injected = device.local().then(|| injected_failure(index)).flatten();
    let work = match (work, injected) {
        (Work::Vendor(_), Some(rc)) => Work::Vendor(Box::new(move |_, _, _| Err(rc))),
        (w, _) => w,
    };
    // The scheduler lock is held until the command reaches its issuer, so every issuer
    // receives commands in schedule order.
    let mut sched = ctx.lock_scheduler();
    if let Some(waits) = waits {
        // After the releases the lock reported: the order the scheduler sees.
        crate::cluster::record::command(
            ctx.record_id,
            cmd.command_type,
            device.index,
            cmd.at_host,
            queue.stream,
            vendor,
            cmd.fills_host.map(|s| s.len()),
            cmd.blocking,
            &waits,
            &scheduled_accesses(&cmd),
        );
    }
    if left_out(&cmd, &sched) {
        drop(sched);
        // Nothing here depends on it and nothing here must track it: not enqueued. Its
        // event still keeps the meaning of its wait list.
        add(&COUNTERS.commands_not_enqueued, 1);
        event.complete_after(wait_list);
        return Ok(event);
    }
    // Built only now: a command left out needs none.
    let accesses = scheduled_accesses(&cmd);
    // The application's wait list comes first: only its failures fail the command; what
    // MirrorCL adds after it only orders it.
    let failing = wait_list.len();
    let mut deps = wait_list;
    let scheduling = crate::observe::stats::on().then(std::time::Instant::now);
    let traced = crate::observe::trace::begin();
    add(&COUNTERS.commands_scheduled, 1);
    let mut steps = Vec::new();
    let mut landed = Vec::new();
    sched.set_thread(crate::cluster::host_threads::slot() as u32);
    let conflicts = sched.schedule(at, stream, &accesses, &event, |step, step_deps| {
        let (stream, step, land) = transfer_landing(ctx, &cmd.accesses, step, step_deps);
        steps.push(step.clone());
        landed.extend(land.map(|l| (step.clone(), l)));
        (stream, step)
    });
    let in_place = sched.read_elsewhere().first().map(|&(_, d)| d);
    if let Location::Device(d) = at {
        for (b, _, _) in cmd.accesses.iter().filter(|(_, _, m)| *m != Mode::Read) {
            b.root().wrote_on(d);
        }
    }
    if let Some(start) = scheduling {
        add(&COUNTERS.scheduling_ns, start.elapsed().as_nanos() as u64);
    }
    if traced != 0 {
        let (name, n) = (command_name(cmd.command_type), steps.len());
        let args = crate::trace_args![("command", event.seq), ("index", index), ("steps", n)];
        crate::observe::trace::span("schedule", name, traced, args);
    }
    // The steps that bring its bytes first among the rest: a command run on the host
    // copy (a map) also fails with them, so that a map whose bytes could not come (a
    // failure where they were, a host copy not allocated) fails on every rank.
    let (brought, others): (Vec<_>, Vec<_>) = if steps.is_empty() {
        (Vec::new(), conflicts)
    } else {
        (conflicts.into_iter()).partition(|c| steps.iter().any(|s| Arc::ptr_eq(s, c)))
    };
    let host_failing = failing + brought.len();
    deps.extend(brought);
    deps.extend(others);
    let work = match (injected, in_place) {
        (Some(_), _) => (work, None),
        (None, Some(source)) => (copy_in_place(&cmd, ctx, source).unwrap_or(work), None),
        (None, None) => {
            let landing = match steps.is_empty() {
                true => copy_from_sent_read(&cmd, device, &mut deps, &event),
                false => copy_from_landed(&cmd, device, landed, &mut deps, &event),
            };
            match landing {
                Some(l) => (Work::Vendor(l.work()), Some(l)),
                None => (work, None),
            }
        }
    };
    // Planning a copy's bytes may read what the queue holds (`read_queue`): recorded
    // only now, still under the scheduler lock, so queues list commands in schedule order.
    // A virtual device's queue has no vendor queue to keep it in order, and a read
    // whose bytes are still being sent outlives its vendor command.
    let after = |prev: &Event| prev.stream != stream || !device.local() || prev.outlives_vendor();
    if let Some(prev) = queue.record(event.clone(), after) {
        deps.push(prev);
    }
    let routed = route(
        &cmd,
        device,
        work,
        &event,
        &accesses,
        Deps {
            all: deps,
            failing,
            behind: Vec::new(),
        },
    );
    // Its buffers live as long as it may run or move their bytes: the command's own
    // references move to its event (it holds them until now).
    event.keep_all(
        (cmd.accesses.into_iter())
            .map(|(b, _, _)| into_root(b) as Arc<dyn std::any::Any + Send + Sync>),
    );
    drop(sched);
    let host_work = match routed {
        Routed::Here(inline) => {
            if let Some(job) = inline {
                job.run();
            }
            None
        }
        Routed::Bookkeeping(deps) => Some(deps),
    };
    // Completions run callbacks (the application's among them): never under the lock.
    if let Some(Deps { all, .. }) = host_work {
        event.complete_after_ordered(all, host_failing);
    }
    queue.prune();
    Ok(event)
}

/// A copy whose source the scheduler reads in place on `source`, a device of the copy's
/// vendor context: one vendor copy between the two devices' instances, where a step
/// would copy into the source's replica first. Bookkeeping elsewhere (`None`).
fn copy_in_place(cmd: &Command, ctx: &Arc<Context>, source: u32) -> Option<Work> {
    let [(src, src_range, _), (dst, dst_range, _)] = &cmd.accesses[..] else {
        return None;
    };
    let device = ctx.device_by_index(source)?;
    if !device.local() || !cmd.queue.device.local() {
        return None;
    }
    let s = src.instance(device);
    let d = dst.instance(&cmd.queue.device);
    let (src_offset, dst_offset, len) = (src_range.start, dst_range.start, src_range.len());
    Some(Work::Vendor(Box::new(move |q, waits, want| {
        q.copy_buffer(&*s?, &*d?, src_offset, dst_offset, len, waits, want)
    })))
}

/// A copy whose only step received its source range from another rank in one piece:
/// it writes its destination straight from the received block instead of copying from
/// a replica. A pass-through step (`Step::pass_through`, the rule for copies) writes no
/// replica at all; another still writes it, off the copy's path, for later readers of
/// the source here. One or two vendor commands less on the path of every halo exchange
/// and all-to-all. Its wait on the step becomes a wait on the receive.
fn copy_from_landed(
    cmd: &Command,
    device: &Device,
    landed: Vec<(Arc<Event>, Landed)>,
    deps: &mut [Arc<Event>],
    event: &Arc<Event>,
) -> Option<Landing> {
    // Its other steps can only be write-backs of an attached destination, after it.
    if cmd.command_type != CL_COMMAND_COPY_BUFFER || !device.local() {
        return None;
    }
    let [(step, l)] = <[_; 1]>::try_from(landed).ok()?;
    let [(src, src_range, _), (dst, dst_range, _)] = &cmd.accesses[..] else {
        return None;
    };
    let whole_source =
        l.buffer == src.id && l.range == src.root_range(src_range.start, src_range.len());
    if !whole_source || dst.id == src.id || dst.image.is_some() {
        return None;
    }
    let mem = dst.instance(device).ok()?;
    let at = deps.iter().position(|d| Arc::ptr_eq(d, &step))?;
    deps[at] = l.received;
    let host = l.block.addr();
    event.keep(l.block);
    Some(Landing {
        mem,
        offset: dst_range.start,
        len: dst_range.len(),
        host,
    })
}

/// A small copy between two buffers of its device whose source range that device read
/// for other ranks since it was last written there (`SentRead`), or is about to
/// (`read_for_predicted_sends`): it writes its destination from the host bytes of that
/// read, once they are in, instead of copying on the device. Such a write goes with the
/// landed bytes written beside it in one vendor write (`RunAs::Merged`): an
/// all-to-all's own piece lands among the others'.
fn copy_from_sent_read(
    cmd: &Command,
    device: &Arc<Device>,
    deps: &mut Vec<Arc<Event>>,
    event: &Arc<Event>,
) -> Option<Landing> {
    if cmd.command_type != CL_COMMAND_COPY_BUFFER || !device.local() {
        return None;
    }
    let [(src, src_range, _), (dst, dst_range, _)] = &cmd.accesses[..] else {
        return None;
    };
    if dst.id == src.id || dst.image.is_some() || src_range.len() > MERGED_AT_MOST {
        return None;
    }
    let range = src.root_range(src_range.start, src_range.len());
    let range = range.start as usize..range.end as usize;
    let sent = {
        let sent = src.root().sent_read.lock();
        (sent.current.as_ref())
            .filter(|s| s.device == device.index && s.range == range)
            .and_then(|s| Some((s.read.clone(), s.block.upgrade()?)))
    };
    let mem = dst.instance(device).ok()?;
    let (read, block) = match sent {
        Some(sent) => sent,
        None => {
            // The copy follows what is before it on its queue by that queue's order, not
            // by `deps`: so must the read (it then goes behind it, on that queue).
            let read_deps = deps.iter().cloned().chain(cmd.queue.last()).collect();
            let ctx = &cmd.queue.context;
            read_for_predicted_sends(ctx, device, &root_arc(src), range, read_deps)?
        }
    };
    // The bytes are on the host once the read is done: the write waits for that, not
    // for the read's place on the device (a vendor may take the host bytes when the
    // write is enqueued).
    let bytes_in = Event::new(
        event.context.clone(),
        None,
        CL_COMMAND_READ_BUFFER,
        new_stream(),
    );
    let (done, copy) = (bytes_in.clone(), event.clone());
    read.on_done(move |status| {
        if status < 0 {
            copy.complete(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        }
        done.complete(CL_COMPLETE);
    });
    deps.push(bytes_in);
    let host = block.addr();
    event.keep(block);
    Some(Landing {
        mem,
        offset: dst_range.start,
        len: dst_range.len(),
        host,
    })
}

/// The devices of the wait list's device commands whose statuses the command learns
/// (`learn_wait_list_statuses`), for `MIRRORCL_RECORD`.
fn recorded_waits(cmd: &Command, wait_list: &[Arc<Event>]) -> Vec<u32> {
    if cmd.waits_on_queue || !(cmd.blocking || cmd.at_host) {
        return Vec::new();
    }
    (wait_list.iter())
        .filter(|e| e.owner().is_some())
        .filter_map(|e| e.queue().map(|q| q.device.index))
        .collect()
}

/// Notes the command for the cross-rank check (`MIRRORCL_VERIFY`): its accesses and device.
fn note_for_verify(cmd: &Command, device: &Device) {
    let mut what = Vec::with_capacity(cmd.accesses.len() * 25);
    for (b, r, mode) in &cmd.accesses {
        let root = b.root_range(r.start, r.len());
        what.extend_from_slice(&b.id.to_le_bytes());
        what.extend_from_slice(&root.start.to_le_bytes());
        what.extend_from_slice(&root.end.to_le_bytes());
        what.push(*mode as u8);
    }
    what.extend_from_slice(&device.index.to_le_bytes());
    crate::cluster::verify::note(command_name(cmd.command_type), &[&what]);
}

/// The command's accesses as the scheduler sees them (root buffer ranges): inline for
/// the few of most commands.
fn scheduled_accesses(cmd: &Command) -> smallvec::SmallVec<[Access; 4]> {
    let copy = copies_between_buffers(cmd);
    (cmd.accesses.iter().enumerate())
        .map(|(i, (b, r, mode))| Access {
            buffer: b.id,
            range: b.root_range(r.start, r.end - r.start),
            mode: *mode,
            // A sub-buffer's or image's commands go through a vendor object aliasing
            // the instance.
            aliased: b.parent.is_some() || b.image.is_some(),
            pass_through: copy && i == 0,
        })
        .collect()
}

/// What reports name the command by: its first buffer and the rank that runs it.
fn name_for_reports(cmd: &Command, event: &Event) {
    if let Some((b, _, _)) = cmd.accesses.first() {
        event.set_subject(b.id);
    }
    if !cmd.at_host {
        event.set_owner(cmd.queue.device.owner);
    }
}

/// A copy between two buffers: its source serves it alone (`Access::pass_through`). A
/// halo exchange or an all-to-all reads a source once per copy and never again where the
/// copy runs, so the bytes go straight from where they are valid into the destination:
/// read in place on a device of the same vendor context ([`copy_in_place`]), or written
/// from the block another rank's bytes landed in ([`copy_from_landed`]), never through
/// a replica of the source.
fn copies_between_buffers(cmd: &Command) -> bool {
    let [(src, _, _), (dst, _, _)] = &cmd.accesses[..] else {
        return false;
    };
    cmd.command_type == CL_COMMAND_COPY_BUFFER
        && src.id != dst.id
        && src.image.is_none()
        && dst.image.is_none()
}

/// What became of a routed command.
enum Routed<'a> {
    /// Issued or received here; a vendor command may come back for the caller to run
    /// once it has released the scheduler lock (`Issuer::caller_runs`).
    Here(Option<Inline<'a>>),
    /// Bookkeeping: it completes after these dependencies, once the lock is released.
    Bookkeeping(Deps),
}

/// Where a planned command goes, under the scheduler lock: to its device's issuer when
/// it runs here (a read in a cluster also sends its bytes down the relay to every rank),
/// or, for another rank's read, a receive of its bytes (passed on down the relay).
/// Otherwise it is bookkeeping here.
fn route<'a>(
    cmd: &Command,
    device: &'a Device,
    (work, mut landing): (Work, Option<Landing>),
    event: &Arc<Event>,
    accesses: &[Access],
    deps: Deps,
) -> Routed<'a> {
    let queue = &cmd.queue;
    let node = crate::cluster::node::node();
    let shared_read = cmd.fills_host.filter(|_| node.is_cluster());
    let what = || What {
        command: command_name(cmd.command_type),
        buffer: accesses.first().map_or(0, |a| a.buffer),
        offset: accesses.first().map_or(0, |a| a.range.start),
        len: accesses.first().map_or(0, |a| a.range.end - a.range.start),
        stamp: crate::cluster::history::stamp(),
    };
    let runs_here = cmd.at_host || device.local();
    let mut issued = |event: Arc<Event>, work: VendorWork, deps: Deps| VendorCommand {
        group: device.group,
        vqueue: queue.vqueue.clone().ok_or(CL_INVALID_COMMAND_QUEUE),
        event,
        deps,
        work,
        keep_queue: None,
        blocking: blocks_in_vendor(cmd.blocking, device),
        landing: landing.take(),
        unseen: cmd.unseen,
    };
    match (work, runs_here, shared_read) {
        (Work::Vendor(f), true, None) => {
            add(&COUNTERS.commands_issued, 1);
            Routed::Here(issue(device, issued(event.clone(), f, deps), Some(queue)))
        }
        (Work::Vendor(f), true, Some(span)) => {
            add(&COUNTERS.commands_issued, 1);
            // The owner reads, then sends the bytes down the relay to every rank.
            let read = Event::new(queue.context.clone(), None, cmd.command_type, queue.stream);
            event.set_outlives_vendor();
            let peers = remote::relay(device.owner, span.len() as u64, 1).to;
            remote::send_when_done(&read, event.clone(), peers, span, what(), None);
            Routed::Here(issue(device, issued(read, f, deps), Some(queue)))
        }
        (Work::Vendor(_), false, Some(span)) => {
            let relay = remote::relay(device.owner, span.len() as u64, 1);
            let (from, tags) = relay.from.expect("a rank other than the owner receives");
            let forward = relay.to;
            // Done once the bytes have arrived and been passed on: the application may
            // overwrite its memory as soon as the read is complete.
            let received = match forward.is_empty() {
                true => event.clone(),
                false => Event::new(queue.context.clone(), None, cmd.command_type, new_stream()),
            };
            remote::receive_after(
                deps.all,
                received.clone(),
                from,
                tags.start,
                span,
                what(),
                None,
            );
            if !forward.is_empty() {
                remote::send_when_done(&received, event.clone(), forward, span, what(), None);
            }
            Routed::Here(None)
        }
        // Another rank's command, or one on the host copy: bookkeeping here.
        (Work::Vendor(_), false, None) | (Work::Host, _, _) => Routed::Bookkeeping(deps),
    }
}

/// A command's wait list may hold another rank's command, whose failure must fail this
/// command on every rank as it does on that rank. A blocking command or a host command
/// (a map) learns it as it runs (`learn_wait_list_statuses`); another command on a
/// device keeps those commands for the ranks to agree on where the application asks
/// (`note_waits_elsewhere`): learning costs the owner a vendor callback on the command,
/// which doubled the IV.7.2 microbenchmark's iteration. Not for a wait list that is the
/// queue's unfinished commands, which differ between ranks.
fn wait_list_elsewhere(cmd: &Command, wait_list: &mut [Arc<Event>], event: &Arc<Event>) {
    if !crate::cluster::node::node().is_cluster() || cmd.waits_on_queue {
        return;
    }
    if cmd.blocking || cmd.at_host {
        learn_wait_list_statuses(cmd, wait_list);
    } else {
        note_waits_elsewhere(cmd, wait_list, event);
    }
}

/// The owner of each command of another rank in the wait list sends its status (a
/// message without bytes, planned alike on both ranks) to every rank that runs this
/// command, which waits on that arrival in its place. Before `left_out`: the owner
/// sends even where this command is not enqueued.
fn learn_wait_list_statuses(cmd: &Command, wait_list: &mut [Arc<Event>]) {
    if wait_list.iter().all(|e| e.owner().is_none()) {
        return;
    }
    let node = crate::cluster::node::node();
    // Who runs the command: its device's owner, or every rank (on the host copy).
    let runs_on = (!cmd.at_host).then_some(cmd.queue.device.owner);
    let what = What {
        command: "a wait-list status",
        buffer: 0,
        offset: 0,
        len: 0,
        stamp: crate::cluster::history::stamp(),
    };
    let nothing = HostSpan::Contiguous { ptr: 0, len: 0 };
    for e in wait_list.iter_mut() {
        let Some(owner) = e.owner() else { continue };
        let runs_here = runs_on.is_none_or(|r| r == node.rank);
        if node.rank == owner {
            let peers: Vec<(u32, u64)> = (0..node.size)
                .filter(|&r| r != owner && runs_on.is_none_or(|o| o == r))
                .map(|r| (r, node.tag_with(r)))
                .collect();
            if !peers.is_empty() {
                let sent = Event::new(e.context.clone(), None, CL_COMMAND_MARKER, new_stream());
                remote::send_when_done(e, sent, peers, nothing, what, None);
            }
        } else if runs_here {
            let learned = Event::new(e.context.clone(), None, e.command_type, new_stream());
            let tag = node.tag_with(owner);
            remote::receive_after(Vec::new(), learned.clone(), owner, tag, nothing, what, None);
            *e = learned;
        }
    }
}

/// The commands of other ranks a non-blocking device command waits for: the ranks
/// agree on their statuses where the application asks for this command's
/// (`event::wait_all`, `event::polled_status`), so that its failure shows on every rank.
fn note_waits_elsewhere(cmd: &Command, wait_list: &[Arc<Event>], event: &Arc<Event>) {
    let runs_on = cmd.queue.device.owner;
    let elsewhere: Vec<_> = (wait_list.iter())
        .filter(|e| e.owner().is_some_and(|o| o != runs_on))
        .map(Arc::downgrade)
        .collect();
    if !elsewhere.is_empty() {
        event.set_waits_elsewhere(elsewhere);
    }
}

/// Every command's number in enqueue order, the same on every rank.
static COMMAND_INDEX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The command's number (`COMMAND_INDEX`) where something reads it: a failure to
/// inject, or the trace. Both are set for the whole run on every rank alike; otherwise
/// 0, without the atomic operation.
fn command_index() -> u64 {
    if injection_planned().is_none() && !crate::observe::trace::on() {
        return 0;
    }
    COMMAND_INDEX.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

/// `MIRRORCL_INJECT_FAILURE=N:CODE`: the vendor "fails" command number N (counted from 1
/// in enqueue order) with CODE on the rank that runs it, as a vendor would fail a kernel
/// or an allocation. For testing how failures reach every rank; off unless set.
fn injected_failure(index: u64) -> Option<cl_int> {
    injection_planned()
        .filter(|(n, _)| *n == index)
        .map(|(_, code)| code)
}

/// `MIRRORCL_INJECT_FAILURE`, read once: (command number, code).
fn injection_planned() -> Option<(u64, cl_int)> {
    static PLAN: OnceLock<Option<(u64, cl_int)>> = OnceLock::new();
    *PLAN.get_or_init(|| {
        let v = std::env::var("MIRRORCL_INJECT_FAILURE").ok()?;
        let (n, code) = v.split_once(':')?;
        Some((n.trim().parse().ok()?, code.trim().parse().ok()?))
    })
}

/// The queueing optimisation (thesis IV.6, Table IV.2, and further), decided by
/// [`mirrorcl_scheduler::left_out`] (the simulator decides it there too): a command of
/// another rank's device, not a read, whose buffers are all attached to other ranks'
/// devices (not in another vendor group of the command's rank) is not enqueued here.
fn left_out(cmd: &Command, sched: &Scheduler<Arc<Event>>) -> bool {
    let platform = crate::objects::platform::platform();
    let device = &cmd.queue.device;
    let placement = Placement {
        device: device.scheduled(),
        at_host: cmd.at_host,
        fills_host: cmd.fills_host.is_some(),
    };
    sched.leaves_out(
        variant(platform.config.runtime.variant),
        platform.rank,
        platform.size,
        &placement,
        cmd.accesses.iter().map(|(b, _, _)| b.id),
    )
}

/// The scheduler's name for the configured variant.
fn variant(v: Variant) -> mirrorcl_scheduler::Variant {
    match v {
        Variant::Decentralization => mirrorcl_scheduler::Variant::Decentralization,
        Variant::Attach => mirrorcl_scheduler::Variant::Attach,
        Variant::Full => mirrorcl_scheduler::Variant::Full,
    }
}

/// `clAttachBufferToDevice`: makes `device`'s copy of the buffer current (the bytes move
/// there from wherever they are, identically on every rank), then attaches it. Ignored
/// in the `decentralization` variant.
pub fn attach(buffer: &Arc<Buffer>, device: &Arc<Device>) -> ClResult<()> {
    let platform = crate::objects::platform::platform();
    crate::cluster::record::attach(buffer.context.record_id, buffer.id, device.index);
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
    sched.set_thread(crate::cluster::host_threads::slot() as u32);
    let deps = sched.schedule(
        Location::Device(device.index),
        event.stream,
        &[Access {
            buffer: buffer.id,
            range: 0..buffer.size as u64,
            mode: Mode::Read,
            aliased: false,
            pass_through: false,
        }],
        &event,
        |step, step_deps| transfer(&ctx, &accesses, step, step_deps),
    );
    sched.attach(buffer.id, device.index);
    drop(sched);
    event.complete_after(deps);
    Ok(())
}
