//! Step 1, for buffer contents: `clEnqueue{Read,Write,Copy,Fill}Buffer` and the
//! rectangle variants, each turned into a [`Command`] (the ranges it touches and how) and
//! its vendor call, then submitted. Also the helpers the other command builders share.

use super::issue::blocks_in_vendor;
use super::submit::{submit, Command, Work};
use crate::cl::*;
use crate::enqueue::remote::HostSpan;
use crate::native::VMem;
use crate::objects::event::{command_name, Event};
use crate::objects::memory::Buffer;
use crate::objects::queue::Queue;
use crate::ClResult;
use mirrorcl_scheduler::Mode;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::Arc;

/// Waits for a blocking command; a failed command reports
/// `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST` (OpenCL 1.2 §5.2.2).
pub fn finish_blocking(event: &Arc<Event>, blocking: bool) -> ClResult<()> {
    if blocking {
        crate::cluster::verify::check(command_name(event.command_type));
        let status = event.wait();
        // Commands before it in the queue are done too: forget them (and let go of
        // their buffers).
        if let Some(q) = event.queue() {
            q.prune_completed();
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
pub(super) fn device_instance(queue: &Queue, b: &Buffer) -> ClResult<Arc<VMem>> {
    if queue.device.local() {
        b.instance(&queue.device)
    } else {
        // Never used: the command does not run here.
        Err(CL_INVALID_DEVICE)
    }
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
    if write && crate::cluster::verify::enabled() {
        // SAFETY: the application passed `size` readable bytes at `ptr` (validated).
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, size) };
        crate::cluster::verify::note("clEnqueueWriteBuffer (data)", &[data]);
    }
    let ptr = ptr as usize;
    let in_vendor = blocks_in_vendor(blocking, &queue.device);
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
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            // SAFETY: the application keeps `ptr` valid until the command completes
            // (OpenCL 1.2 §5.2.2); `size` bytes there were validated.
            unsafe {
                q.read_write(
                    &*m?,
                    write,
                    in_vendor,
                    offset,
                    size,
                    ptr as *mut c_void,
                    waits,
                    want,
                )
            }
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
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            q.copy_buffer(&*s?, &*d?, src_offset, dst_offset, size, waits, want)
        })),
    )
}

/// Origin, region and pitches of one side of a rectangular transfer.
pub use crate::native::Rect;

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
    let in_vendor = blocks_in_vendor(blocking, &queue.device);
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
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            // SAFETY: validated rectangles; the application keeps `ptr` valid until
            // the command completes.
            unsafe {
                q.read_write_rect(
                    &*m?,
                    write,
                    in_vendor,
                    &buf,
                    &host,
                    &region,
                    ptr as *mut c_void,
                    waits,
                    want,
                )
            }
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
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            q.copy_rect(&*sm?, &*dm?, &s, &d, &region, waits, want)
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
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            q.fill(&*m?, &pattern, offset, size, waits, want)
        })),
    )
}
