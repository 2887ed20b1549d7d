//! Step 1, for images: `clEnqueue{Read,Write,Copy,Fill,Map}Image` and the copies between
//! images and buffers. A command touches its images whole (see `crate::objects::image`): a write
//! of part of an image also reads it, so the rest of the image is current where it runs.

use super::buffer_commands::{device_instance, finish_blocking};
use super::issue::blocks_in_vendor;
use super::submit::{submit, Command, Work};
use crate::cl::*;
use crate::enqueue::remote::HostSpan;
use crate::native::ImageAt;
use crate::objects::event::Event;
use crate::objects::image::Image;
use crate::objects::memory::{Buffer, Mapping};
use crate::objects::queue::Queue;
use crate::ClResult;
use mirrorcl_scheduler::Mode;
use std::ffi::c_void;
use std::sync::Arc;

/// An image's description; images reach here validated.
fn shape(image: &Buffer) -> Image {
    image.image.expect("validated as an image")
}

/// How a command that writes `region` at `origin` uses the image: a write of all of
/// it, or of part of it (which keeps the rest).
fn written(image: &Buffer, origin: [usize; 3], region: [usize; 3]) -> Mode {
    if shape(image).covers(origin, region) {
        Mode::Write
    } else {
        Mode::ReadWrite
    }
}

fn whole(image: &Arc<Buffer>, mode: Mode) -> (Arc<Buffer>, std::ops::Range<usize>, Mode) {
    (image.clone(), 0..image.size, mode)
}

/// The application's host memory of a region, for a read whose bytes every rank
/// receives: rows of `region[0]` elements at `row_pitch`, slices at `slice_pitch` (a
/// 1D array's layers are its rows, at the slice pitch).
fn host_span(image: &Image, ptr: usize, region: [usize; 3], pitches: (usize, usize)) -> HostSpan {
    let row = region[0] * image.element_size;
    let (rows, slices, row_pitch, slice_pitch) = if image.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY
    {
        (region[1], 1, pitches.1, pitches.1 * region[1])
    } else {
        (region[1], region[2], pitches.0, pitches.1)
    };
    HostSpan::Rect {
        ptr,
        origin: [0; 3],
        region: [row, rows, slices],
        row_pitch,
        slice_pitch,
    }
}

/// The pitches of the application's host memory for a region: 0 means packed (§5.3.3).
pub fn host_pitches(
    image: &Image,
    region: [usize; 3],
    row_pitch: usize,
    slice_pitch: usize,
) -> (usize, usize) {
    let row = if row_pitch == 0 {
        region[0] * image.element_size
    } else {
        row_pitch
    };
    let slice = match (slice_pitch, image.image_type) {
        (0, CL_MEM_OBJECT_IMAGE1D_ARRAY) => row,
        (0, CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE3D) => row * region[1],
        (p, _) => p,
    };
    (row, slice)
}

/// `clEnqueueReadImage` (`write == false`) and `clEnqueueWriteImage`; `pitches` as
/// [`host_pitches`] gives them.
#[allow(clippy::too_many_arguments)]
pub fn rw_image(
    queue: &Arc<Queue>,
    image: &Arc<Buffer>,
    write: bool,
    blocking: bool,
    origin: [usize; 3],
    region: [usize; 3],
    pitches: (usize, usize),
    ptr: *mut c_void,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let m = device_instance(queue, image);
    let shape = shape(image);
    if write && crate::cluster::verify::enabled() {
        let span = host_span(&shape, ptr as usize, region, pitches);
        // SAFETY: the application's region at its pitches (validated).
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, span_end(&span)) };
        crate::cluster::verify::note("clEnqueueWriteImage (data)", &[bytes]);
    }
    let ptr = ptr as usize;
    // The vendor takes a 1D image's and a 2D image's slice pitch as 0.
    let vendor_pitches = match shape.image_type {
        CL_MEM_OBJECT_IMAGE1D | CL_MEM_OBJECT_IMAGE1D_BUFFER | CL_MEM_OBJECT_IMAGE2D => {
            (pitches.0, 0)
        }
        _ => pitches,
    };
    let in_vendor = blocks_in_vendor(blocking, &queue.device);
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: if write {
                CL_COMMAND_WRITE_IMAGE
            } else {
                CL_COMMAND_READ_IMAGE
            },
            wait_list,
            accesses: vec![whole(
                image,
                if write {
                    written(image, origin, region)
                } else {
                    Mode::Read
                },
            )],
            at_host: false,
            blocking,
            fills_host: (!write).then(|| host_span(&shape, ptr, region, pitches)),
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            let mem = m?;
            let at = ImageAt {
                image: &mem,
                origin,
            };
            // SAFETY: the application keeps its validated region at `ptr` valid until
            // the command completes (OpenCL 1.2 §5.3.3).
            unsafe {
                q.read_write_image(
                    at,
                    write,
                    in_vendor,
                    &region,
                    vendor_pitches,
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

/// One past the last byte of a host span.
fn span_end(span: &HostSpan) -> usize {
    match *span {
        HostSpan::Contiguous { len, .. } => len,
        HostSpan::Rect {
            region,
            row_pitch,
            slice_pitch,
            ..
        } => (region[2] - 1) * slice_pitch + (region[1] - 1) * row_pitch + region[0],
    }
}

#[allow(clippy::too_many_arguments)]
pub fn copy_image(
    queue: &Arc<Queue>,
    src: &Arc<Buffer>,
    dst: &Arc<Buffer>,
    src_origin: [usize; 3],
    dst_origin: [usize; 3],
    region: [usize; 3],
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let s = device_instance(queue, src);
    let d = device_instance(queue, dst);
    let accesses = if Arc::ptr_eq(src, dst) {
        vec![whole(src, Mode::ReadWrite)]
    } else {
        vec![
            whole(src, Mode::Read),
            whole(dst, written(dst, dst_origin, region)),
        ]
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_COPY_IMAGE,
            wait_list,
            accesses,
            at_host: false,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            let (s, d) = (s?, d?);
            q.copy_image(
                ImageAt {
                    image: &s,
                    origin: src_origin,
                },
                ImageAt {
                    image: &d,
                    origin: dst_origin,
                },
                &region,
                waits,
                want,
            )
        })),
    )
}

pub fn fill_image(
    queue: &Arc<Queue>,
    image: &Arc<Buffer>,
    color: [u8; 16],
    origin: [usize; 3],
    region: [usize; 3],
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let m = device_instance(queue, image);
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_FILL_IMAGE,
            wait_list,
            accesses: vec![whole(image, written(image, origin, region))],
            at_host: false,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            let mem = m?;
            q.fill_image(
                ImageAt {
                    image: &mem,
                    origin,
                },
                &color,
                &region,
                waits,
                want,
            )
        })),
    )
}

/// `clEnqueueCopyImageToBuffer` (`to_buffer`) and `clEnqueueCopyBufferToImage`.
#[allow(clippy::too_many_arguments)]
pub fn copy_image_buffer(
    queue: &Arc<Queue>,
    image: &Arc<Buffer>,
    buffer: &Arc<Buffer>,
    origin: [usize; 3],
    region: [usize; 3],
    offset: usize,
    to_buffer: bool,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let i = device_instance(queue, image);
    let b = device_instance(queue, buffer);
    let bytes = offset..offset + shape(image).region_bytes(region);
    let accesses = if to_buffer {
        vec![
            whole(image, Mode::Read),
            (buffer.clone(), bytes, Mode::Write),
        ]
    } else {
        vec![
            (buffer.clone(), bytes, Mode::Read),
            whole(image, written(image, origin, region)),
        ]
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type: if to_buffer {
                CL_COMMAND_COPY_IMAGE_TO_BUFFER
            } else {
                CL_COMMAND_COPY_BUFFER_TO_IMAGE
            },
            wait_list,
            accesses,
            at_host: false,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            let (i, b) = (i?, b?);
            q.copy_image_buffer(
                ImageAt { image: &i, origin },
                &b,
                offset,
                to_buffer,
                &region,
                waits,
                want,
            )
        })),
    )
}

/// `clEnqueueMapImage`: the mapped memory is the image's host copy (the application's
/// own memory for `CL_MEM_USE_HOST_PTR`), at its pitches, which are returned.
#[allow(clippy::too_many_arguments)]
pub fn map_image(
    queue: &Arc<Queue>,
    image: &Arc<Buffer>,
    blocking: bool,
    flags: cl_map_flags,
    origin: [usize; 3],
    region: [usize; 3],
    wait_list: Vec<Arc<Event>>,
) -> ClResult<(Arc<Event>, *mut c_void, (usize, usize))> {
    let shape = shape(image);
    let host = image.host_copy()?;
    let start = image.origin + shape.host_offset(origin);
    // SAFETY: the origin lies inside the image (validated), whose host copy holds it.
    let ptr = unsafe { host.add(start) } as *mut c_void;
    let invalidate = flags & CL_MAP_WRITE_INVALIDATE_REGION != 0;
    let writes = invalidate || flags & CL_MAP_WRITE != 0;
    let mode = if invalidate {
        written(image, origin, region)
    } else {
        Mode::Read
    };
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_MAP_IMAGE,
            wait_list,
            accesses: vec![whole(image, mode)],
            at_host: true,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Host,
    )?;
    // The unmap of a writing map makes the whole host copy the newest.
    image.add_mapping(Mapping {
        ptr: ptr as usize,
        offset: 0,
        size: image.size,
        writes,
    });
    finish_blocking(&event, blocking)?;
    Ok((event, ptr, shape.host_pitches()))
}
