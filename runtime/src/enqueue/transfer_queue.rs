//! Step 3, the device side of a transfer step: the vendor reads, writes and copies it
//! makes on this rank, each on its device's transfer queue and issued like any vendor
//! command.

use super::issue::{issue, Deps, VendorCommand, VendorWork};
use crate::cl::*;
use crate::native::ImageAt;
use crate::objects::context::{Context, TransferQueue};
use crate::objects::device::Device;
use crate::objects::event::Event;
use crate::objects::memory::Buffer;
use crate::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

/// A vendor copy between two devices of one vendor context, on the destination's
/// transfer queue.
pub(super) fn local_copy(
    ctx: &Arc<Context>,
    src_dev: &Arc<Device>,
    device: &Arc<Device>,
    root: &Arc<Buffer>,
    offset: usize,
    len: usize,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let tq = ctx.transfer_queue(device, false)?;
    let src = root.instance(src_dev)?;
    let dst = root.instance(device)?;
    let work: VendorWork = match root.image {
        Some(image) => {
            let (origin, region) = image.region_of(&(offset..offset + len));
            Box::new(move |q, waits, want| {
                let at = |image| ImageAt { image, origin };
                q.copy_image(at(&src), at(&dst), &region, waits, want)
            })
        }
        None => Box::new(move |q, waits, want| {
            q.copy_buffer(&src, &dst, offset, offset, len, waits, want)
        }),
    };
    Ok(issue_transfer(
        ctx,
        device,
        tq,
        CL_COMMAND_COPY_BUFFER,
        root,
        Deps {
            all: deps,
            failing: 0,
            behind: Vec::new(),
        },
        work,
    ))
}

/// Which way a transfer step's vendor command moves bytes between a device and host
/// memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// From host memory into the device's instance.
    Write,
    /// From the device's instance into host memory.
    Read,
    /// A step's only read, which may go behind the command that wrote its bytes
    /// ([`read_queue`]): a read of many pieces waits for sends between them, and would
    /// hold up the application's commands behind it there.
    OnlyRead,
}

impl Way {
    /// The way of each read of a step of `pieces` pieces.
    pub fn read_of(pieces: usize) -> Way {
        match pieces {
            1 => Way::OnlyRead,
            _ => Way::Read,
        }
    }
}

/// A vendor read of the device's instance into host memory at `host`, or a write from
/// it, on the device's transfer queue (a step's only read: see [`read_queue`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn local_transfer(
    ctx: &Arc<Context>,
    device: &Arc<Device>,
    root: &Arc<Buffer>,
    way: Way,
    offset: usize,
    len: usize,
    host: usize,
    mut deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let write = way == Way::Write;
    let (tq, behind) = match way {
        Way::Write => (ctx.transfer_queue(device, false)?, Vec::new()),
        Way::Read => (ctx.transfer_queue(device, true)?, Vec::new()),
        Way::OnlyRead => read_queue(ctx, device, &mut deps)?,
    };
    let mem = root.instance(device)?;
    let work: VendorWork = match root.image {
        // A piece of an image is one region, laid out at the host copy's pitches
        // from `host` on.
        Some(image) => {
            let (origin, region) = image.region_of(&(offset..offset + len));
            Box::new(move |q, waits, want| {
                let at = ImageAt {
                    image: &mem,
                    origin,
                };
                // SAFETY: as below.
                unsafe {
                    q.read_write_image(
                        at,
                        write,
                        false,
                        &region,
                        image.host_pitches(),
                        host as *mut c_void,
                        waits,
                        want,
                    )
                }
            })
        }
        None => Box::new(move |q, waits, want| {
            // SAFETY: the step keeps its host memory (the buffer's host copy, or a
            // staging block held until its bytes are sent or written) until the command
            // completes.
            unsafe {
                q.read_write(
                    &mem,
                    write,
                    false,
                    offset,
                    len,
                    host as *mut c_void,
                    waits,
                    want,
                )
            }
        }),
    };
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
        Deps {
            all: deps,
            failing: 0,
            behind,
        },
        work,
    ))
}

/// Where a read that takes bytes off `device` goes: behind the command that wrote them,
/// on its application queue, when nothing follows that command there yet (the vendor
/// then starts it without a wait between its queues: NVIDIA started a stencil's boundary
/// read some 9 µs after the kernel it waited for on another queue), or when that command
/// has not reached the vendor yet on an issuer that holds jobs for the vendor: the
/// issuer then puts the read right behind it, ahead of the commands handed over after it
/// (`JobInfo::behind`; IV.7.2's read went out after the local copy's vendor call and
/// waited across queues for the kernel). Otherwise on the device's outbound transfer
/// queue, where it never waits behind a write that waits for another rank. Moves the
/// dependencies the queue's order then keeps out of `deps`, into the list returned.
fn read_queue(
    ctx: &Arc<Context>,
    device: &Device,
    deps: &mut Vec<Arc<Event>>,
) -> ClResult<(TransferQueue, Vec<Arc<Event>>)> {
    let behind = deps.iter().find_map(|dep| {
        let queue = dep.queue()?;
        let vqueue = queue.vqueue.clone()?;
        let last = queue.last()?;
        let follows = Arc::ptr_eq(&last, dep)
            || (device.holds_for_the_vendor() && dep.vendor().is_none() && !dep.is_done());
        (queue.device.index == device.index && follows).then_some(TransferQueue {
            vqueue,
            stream: queue.stream,
        })
    });
    match behind {
        Some(q) => {
            let (same, other) = std::mem::take(deps)
                .into_iter()
                .partition(|d| d.stream == q.stream);
            *deps = other;
            Ok((q, same))
        }
        None => Ok((ctx.transfer_queue(device, true)?, Vec::new())),
    }
}

/// A transfer step's vendor command on `device`'s transfer queue; returns its event, which
/// keeps the root buffer alive.
fn issue_transfer(
    ctx: &Arc<Context>,
    device: &Arc<Device>,
    tq: crate::objects::context::TransferQueue,
    command_type: cl_command_type,
    root: &Arc<Buffer>,
    deps: Deps,
    work: VendorWork,
) -> Arc<Event> {
    let event = Event::new(ctx.clone(), None, command_type, tq.stream);
    event.keep(root.clone());
    // Issued while the scheduler lock is held: a job that comes back to run here does not
    // block (a transfer step never does).
    if let Some(job) = issue(
        device,
        VendorCommand {
            group: device.group,
            vqueue: Ok(tq.vqueue),
            event: event.clone(),
            deps,
            work,
            keep_queue: None,
            blocking: false,
            landing: None,
            unseen: false,
        },
        None,
    ) {
        job.run();
    }
    event
}
