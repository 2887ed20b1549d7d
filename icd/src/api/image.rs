//! Image and sampler entry points (OpenCL 1.2 §5.3, §5.5): validation per the
//! specification, then the runtime, where an image is a buffer with a shape.

use crate::api::enqueue::{begin, check_host_access, check_map_flags, check_region, triple};
use crate::api::memory::{buffer_in, check_flags, mem_in};
use crate::info::{return_event, Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::enqueue as rt;
use mirrorcl_runtime::objects::context::Context;
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::image::{self as img, Image};
use mirrorcl_runtime::objects::memory::Buffer;
use mirrorcl_runtime::objects::queue::Queue;
use mirrorcl_runtime::objects::sampler::Sampler;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

fn supports_images(d: &Device) -> bool {
    d.info_value::<cl_bool>(CL_DEVICE_IMAGE_SUPPORT) != CL_FALSE
}

/// `CL_INVALID_OPERATION` unless some device of the context supports images.
fn context_with_images(context: cl_context) -> ClResult<Arc<Context>> {
    let ctx = Context::from_handle(context)?;
    if !ctx.devices.iter().any(|d| supports_images(d)) {
        return Err(CL_INVALID_OPERATION);
    }
    Ok(ctx)
}

/// `CL_INVALID_IMAGE_SIZE` when the image exceeds the limits of every device of the
/// context that supports images.
fn check_size(ctx: &Context, image: &Image) -> ClResult<()> {
    let fits = |d: &Arc<Device>| {
        let max = |p| d.info_value::<usize>(p);
        let [w, h, depth] = [image.width, image.height, image.depth];
        match image.image_type {
            CL_MEM_OBJECT_IMAGE1D_BUFFER => w <= max(CL_DEVICE_IMAGE_MAX_BUFFER_SIZE),
            CL_MEM_OBJECT_IMAGE1D => w <= max(CL_DEVICE_IMAGE2D_MAX_WIDTH),
            CL_MEM_OBJECT_IMAGE1D_ARRAY => {
                w <= max(CL_DEVICE_IMAGE2D_MAX_WIDTH)
                    && image.array_size <= max(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE)
            }
            CL_MEM_OBJECT_IMAGE2D => {
                w <= max(CL_DEVICE_IMAGE2D_MAX_WIDTH) && h <= max(CL_DEVICE_IMAGE2D_MAX_HEIGHT)
            }
            CL_MEM_OBJECT_IMAGE2D_ARRAY => {
                w <= max(CL_DEVICE_IMAGE2D_MAX_WIDTH)
                    && h <= max(CL_DEVICE_IMAGE2D_MAX_HEIGHT)
                    && image.array_size <= max(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE)
            }
            _ => {
                w <= max(CL_DEVICE_IMAGE3D_MAX_WIDTH)
                    && h <= max(CL_DEVICE_IMAGE3D_MAX_HEIGHT)
                    && depth <= max(CL_DEVICE_IMAGE3D_MAX_DEPTH)
            }
        }
    };
    if !ctx.devices.iter().any(|d| supports_images(d) && fits(d)) {
        return Err(CL_INVALID_IMAGE_SIZE);
    }
    Ok(())
}

/// `clCreateImage`, and through it the 1.1 and 3.0 forms.
fn create_image(
    context: cl_context,
    flags: cl_mem_flags,
    format: *const cl_image_format,
    desc: *const cl_image_desc,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    let ctx = Context::from_handle(context)?;
    check_flags(flags)?;
    if format.is_null() {
        return Err(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
    }
    if desc.is_null() {
        return Err(CL_INVALID_IMAGE_DESCRIPTOR);
    }
    // SAFETY: non-NULL pointers to the application's format and description.
    let (format, desc) = unsafe { (*format, *desc) };
    let lends_or_copies = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0;
    let image = Image::describe(&format, &desc, !host_ptr.is_null())?;
    let buffer = match desc.image_type {
        CL_MEM_OBJECT_IMAGE1D_BUFFER => {
            let b = Buffer::from_handle(desc.buffer).map_err(|_| CL_INVALID_IMAGE_DESCRIPTOR)?;
            if b.image.is_some() || !Arc::ptr_eq(&b.context, &ctx) {
                return Err(CL_INVALID_IMAGE_DESCRIPTOR);
            }
            // The image's memory is the buffer's: no host pointer of its own.
            if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0 {
                return Err(CL_INVALID_VALUE);
            }
            if image.host_bytes() > b.size {
                return Err(CL_INVALID_IMAGE_SIZE);
            }
            Some(b)
        }
        _ => None,
    };
    if lends_or_copies == host_ptr.is_null() {
        return Err(CL_INVALID_HOST_PTR);
    }
    if !ctx.devices.iter().any(|d| supports_images(d)) {
        return Err(CL_INVALID_OPERATION);
    }
    check_size(&ctx, &image)?;
    let supported = img::supported_formats(&ctx, flags, desc.image_type)?;
    if !supported.iter().any(|f| img::same_format(f, &format)) {
        return Err(CL_IMAGE_FORMAT_NOT_SUPPORTED);
    }
    let flags = match &buffer {
        // A 1D image buffer takes the buffer's access flags where it gives none.
        Some(b) if flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY) == 0 => {
            flags | (b.flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY))
        }
        _ => flags,
    };
    Ok(Buffer::into_handle(Buffer::new_image(
        ctx, flags, image, host_ptr, buffer,
    )?))
}

entry! {
    fn clCreateImage(
        context: cl_context,
        flags: cl_mem_flags,
        image_format: *const cl_image_format,
        image_desc: *const cl_image_desc,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        create_image(context, flags, image_format, image_desc, host_ptr)
    }
}

entry! {
    fn clCreateImageWithProperties(
        context: cl_context,
        properties: *const cl_mem_properties,
        flags: cl_mem_flags,
        image_format: *const cl_image_format,
        image_desc: *const cl_image_desc,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        // SAFETY: a zero-terminated list or NULL; no image properties are supported.
        if !properties.is_null() && unsafe { *properties } != 0 {
            Context::from_handle(context)?;
            return Err(CL_INVALID_PROPERTY);
        }
        create_image(context, flags, image_format, image_desc, host_ptr)
    }
}

/// A 1.1 image's description.
fn legacy_desc(
    image_type: cl_mem_object_type,
    [width, height, depth]: [usize; 3],
    row_pitch: usize,
    slice_pitch: usize,
) -> cl_image_desc {
    cl_image_desc {
        image_type,
        image_width: width,
        image_height: height,
        image_depth: depth,
        image_array_size: 0,
        image_row_pitch: row_pitch,
        image_slice_pitch: slice_pitch,
        num_mip_levels: 0,
        num_samples: 0,
        buffer: std::ptr::null_mut(),
    }
}

entry! {
    fn clCreateImage2D(
        context: cl_context,
        flags: cl_mem_flags,
        image_format: *const cl_image_format,
        width: usize,
        height: usize,
        row_pitch: usize,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        let desc = legacy_desc(CL_MEM_OBJECT_IMAGE2D, [width, height, 0], row_pitch, 0);
        create_image(context, flags, image_format, &desc, host_ptr)
    }
}

entry! {
    fn clCreateImage3D(
        context: cl_context,
        flags: cl_mem_flags,
        image_format: *const cl_image_format,
        width: usize,
        height: usize,
        depth: usize,
        row_pitch: usize,
        slice_pitch: usize,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        // CL_INVALID_IMAGE_SIZE: a 3D image of one slice is not one (§5.3.1, 1.1).
        if depth <= 1 {
            Context::from_handle(context)?;
            return Err(CL_INVALID_IMAGE_SIZE);
        }
        let desc = legacy_desc(
            CL_MEM_OBJECT_IMAGE3D,
            [width, height, depth],
            row_pitch,
            slice_pitch,
        );
        create_image(context, flags, image_format, &desc, host_ptr)
    }
}

fn get_supported_formats(
    context: cl_context,
    flags: cl_mem_flags,
    image_type: cl_mem_object_type,
    num_entries: cl_uint,
    image_formats: *mut cl_image_format,
    num_image_formats: *mut cl_uint,
) -> ClResult<()> {
    let ctx = Context::from_handle(context)?;
    check_flags(flags)?;
    if num_entries == 0 && !image_formats.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    if !matches!(
        image_type,
        CL_MEM_OBJECT_IMAGE1D
            | CL_MEM_OBJECT_IMAGE1D_BUFFER
            | CL_MEM_OBJECT_IMAGE1D_ARRAY
            | CL_MEM_OBJECT_IMAGE2D
            | CL_MEM_OBJECT_IMAGE2D_ARRAY
            | CL_MEM_OBJECT_IMAGE3D
    ) {
        return Err(CL_INVALID_VALUE);
    }
    let formats = if ctx.devices.iter().any(|d| supports_images(d)) {
        img::supported_formats(&ctx, flags, image_type)?
    } else {
        Vec::new()
    };
    if !image_formats.is_null() {
        for (i, f) in formats.iter().take(num_entries as usize).enumerate() {
            // SAFETY: the application passes room for `num_entries` formats.
            unsafe { *image_formats.add(i) = *f };
        }
    }
    if !num_image_formats.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *num_image_formats = formats.len() as cl_uint };
    }
    Ok(())
}

entry! {
    fn clGetSupportedImageFormats(
        context: cl_context,
        flags: cl_mem_flags,
        image_type: cl_mem_object_type,
        num_entries: cl_uint,
        image_formats: *mut cl_image_format,
        num_image_formats: *mut cl_uint,
    ) -> cl_int {
        get_supported_formats(context, flags, image_type, num_entries, image_formats, num_image_formats)
    }
}

pub(crate) struct ImageInfo;

impl InfoQuery for ImageInfo {
    type Handles = (cl_mem,);
    type Object = (Arc<Buffer>, Image);
    #[inline]
    fn object((memobj,): (cl_mem,)) -> ClResult<(Arc<Buffer>, Image)> {
        let b = Buffer::from_handle(memobj)?;
        let image = b.image.ok_or(CL_INVALID_MEM_OBJECT)?;
        Ok((b, image))
    }
    fn answer((b, i): &(Arc<Buffer>, Image), param: cl_image_info) -> ClResult<Info> {
        let t = i.image_type;
        let has = |types: &[cl_mem_object_type], v: usize| if types.contains(&t) { v } else { 0 };
        Ok(match param {
            CL_IMAGE_FORMAT => Info::value(i.format),
            CL_IMAGE_ELEMENT_SIZE => Info::value::<usize>(i.element_size),
            CL_IMAGE_ROW_PITCH => Info::value::<usize>(i.row_pitch),
            CL_IMAGE_SLICE_PITCH => Info::value::<usize>(i.host_pitches().1),
            CL_IMAGE_WIDTH => Info::value::<usize>(i.width),
            CL_IMAGE_HEIGHT => Info::value::<usize>(has(
                &[
                    CL_MEM_OBJECT_IMAGE2D,
                    CL_MEM_OBJECT_IMAGE2D_ARRAY,
                    CL_MEM_OBJECT_IMAGE3D,
                ],
                i.height,
            )),
            CL_IMAGE_DEPTH => Info::value::<usize>(has(&[CL_MEM_OBJECT_IMAGE3D], i.depth)),
            CL_IMAGE_ARRAY_SIZE => Info::value::<usize>(has(
                &[CL_MEM_OBJECT_IMAGE1D_ARRAY, CL_MEM_OBJECT_IMAGE2D_ARRAY],
                i.array_size,
            )),
            CL_IMAGE_BUFFER => Info::value::<cl_mem>(match (&b.parent, t) {
                (Some(p), CL_MEM_OBJECT_IMAGE1D_BUFFER) => p.handle(),
                _ => std::ptr::null_mut(),
            }),
            CL_IMAGE_NUM_MIP_LEVELS | CL_IMAGE_NUM_SAMPLES => Info::value::<cl_uint>(0),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetImageInfo(image: cl_mem; cl_image_info) => ImageInfo;
}

/// An image argument of an enqueue: `CL_INVALID_MEM_OBJECT` for a buffer, and
/// `CL_INVALID_OPERATION` when the queue's device does not support images.
fn image_in(mem: cl_mem, queue: &Queue) -> ClResult<(Arc<Buffer>, Image)> {
    let b = mem_in(mem, &queue.context)?;
    let image = b.image.ok_or(CL_INVALID_MEM_OBJECT)?;
    if !supports_images(&queue.device) {
        return Err(CL_INVALID_OPERATION);
    }
    Ok((b, image))
}

/// An origin and a region inside the image (`CL_INVALID_VALUE` otherwise).
fn region_in(
    image: &Image,
    origin: *const usize,
    region: *const usize,
) -> ClResult<([usize; 3], [usize; 3])> {
    let (origin, region) = (triple(origin)?, check_region(region)?);
    image.check_region(origin, region)?;
    Ok((origin, region))
}

/// `clEnqueueReadImage` (`write == false`) and `clEnqueueWriteImage`.
#[allow(clippy::too_many_arguments)]
fn rw_image(
    queue: cl_command_queue,
    image: cl_mem,
    write: bool,
    blocking: cl_bool,
    origin: *const usize,
    region: *const usize,
    row_pitch: usize,
    slice_pitch: usize,
    ptr: *mut c_void,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let (b, shape) = image_in(image, &q)?;
    let (origin, region) = region_in(&shape, origin, region)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // §5.3.3: a slice pitch only for images with slices; pitches that hold the region.
    let has_slices = shape.host_pitches().1 != 0;
    if !has_slices && slice_pitch != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let pitches = rt::host_pitches(&shape, region, row_pitch, slice_pitch);
    let row_bytes = region[0] * shape.element_size;
    let rows = if shape.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY {
        1
    } else {
        region[1]
    };
    if pitches.0 < row_bytes || (has_slices && pitches.1 < pitches.0 * rows) {
        return Err(CL_INVALID_VALUE);
    }
    check_host_access(&b, !write)?;
    let ev = rt::rw_image(
        &q,
        &b,
        write,
        blocking != CL_FALSE,
        origin,
        region,
        pitches,
        ptr,
        waits,
    )?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueReadImage(
        queue: cl_command_queue,
        image: cl_mem,
        blocking_read: cl_bool,
        origin: *const usize,
        region: *const usize,
        row_pitch: usize,
        slice_pitch: usize,
        ptr: *mut c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_image(
            queue,
            image,
            false,
            blocking_read,
            origin,
            region,
            row_pitch,
            slice_pitch,
            ptr,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueWriteImage(
        queue: cl_command_queue,
        image: cl_mem,
        blocking_write: cl_bool,
        origin: *const usize,
        region: *const usize,
        input_row_pitch: usize,
        input_slice_pitch: usize,
        ptr: *const c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_image(
            queue,
            image,
            true,
            blocking_write,
            origin,
            region,
            input_row_pitch,
            input_slice_pitch,
            ptr as *mut c_void,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

fn fill_image(
    queue: cl_command_queue,
    image: cl_mem,
    fill_color: *const c_void,
    origin: *const usize,
    region: *const usize,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let (b, shape) = image_in(image, &q)?;
    let (origin, region) = region_in(&shape, origin, region)?;
    if fill_color.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // A four-channel colour: float4, int4 or uint4 after the image's data type.
    let mut color = [0u8; 16];
    // SAFETY: the application passes a four-component colour (16 bytes).
    unsafe { std::ptr::copy_nonoverlapping(fill_color as *const u8, color.as_mut_ptr(), 16) };
    let ev = rt::fill_image(&q, &b, color, origin, region, waits)?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueFillImage(
        queue: cl_command_queue,
        image: cl_mem,
        fill_color: *const c_void,
        origin: *const usize,
        region: *const usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        fill_image(queue, image, fill_color, origin, region, num_events_in_wait_list, event_wait_list, event)
    }
}

#[allow(clippy::too_many_arguments)]
fn copy_image(
    queue: cl_command_queue,
    src_image: cl_mem,
    dst_image: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let (src, s) = image_in(src_image, &q)?;
    let (dst, d) = image_in(dst_image, &q)?;
    if !img::same_format(&s.format, &d.format) {
        return Err(CL_IMAGE_FORMAT_MISMATCH);
    }
    let (src_origin, region) = region_in(&s, src_origin, region)?;
    let dst_origin = triple(dst_origin)?;
    d.check_region(dst_origin, region)?;
    if Arc::ptr_eq(&src, &dst)
        && (0..3).all(|i| {
            src_origin[i] < dst_origin[i] + region[i] && dst_origin[i] < src_origin[i] + region[i]
        })
    {
        return Err(CL_MEM_COPY_OVERLAP);
    }
    let ev = rt::copy_image(&q, &src, &dst, src_origin, dst_origin, region, waits)?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueCopyImage(
        queue: cl_command_queue,
        src_image: cl_mem,
        dst_image: cl_mem,
        src_origin: *const usize,
        dst_origin: *const usize,
        region: *const usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        copy_image(
            queue,
            src_image,
            dst_image,
            src_origin,
            dst_origin,
            region,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

/// `clEnqueueCopyImageToBuffer` (`to_buffer`) and `clEnqueueCopyBufferToImage`.
#[allow(clippy::too_many_arguments)]
fn copy_image_buffer(
    queue: cl_command_queue,
    image: cl_mem,
    buffer: cl_mem,
    origin: *const usize,
    region: *const usize,
    offset: usize,
    to_buffer: bool,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let (i, shape) = image_in(image, &q)?;
    let b = buffer_in(buffer, &q.context)?;
    let (origin, region) = region_in(&shape, origin, region)?;
    let bytes = shape.region_bytes(region);
    if offset.checked_add(bytes).is_none_or(|end| end > b.size) {
        return Err(CL_INVALID_VALUE);
    }
    let ev = rt::copy_image_buffer(&q, &i, &b, origin, region, offset, to_buffer, waits)?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueCopyImageToBuffer(
        queue: cl_command_queue,
        src_image: cl_mem,
        dst_buffer: cl_mem,
        src_origin: *const usize,
        region: *const usize,
        dst_offset: usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        copy_image_buffer(
            queue,
            src_image,
            dst_buffer,
            src_origin,
            region,
            dst_offset,
            true,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueCopyBufferToImage(
        queue: cl_command_queue,
        src_buffer: cl_mem,
        dst_image: cl_mem,
        src_offset: usize,
        dst_origin: *const usize,
        region: *const usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        copy_image_buffer(
            queue,
            dst_image,
            src_buffer,
            dst_origin,
            region,
            src_offset,
            false,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn map_image(
    queue: cl_command_queue,
    image: cl_mem,
    blocking_map: cl_bool,
    map_flags: cl_map_flags,
    origin: *const usize,
    region: *const usize,
    image_row_pitch: *mut usize,
    image_slice_pitch: *mut usize,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<*mut c_void> {
    let (q, waits) = begin(queue, n, list)?;
    let (b, shape) = image_in(image, &q)?;
    let (origin, region) = region_in(&shape, origin, region)?;
    let has_slices = shape.host_pitches().1 != 0;
    if image_row_pitch.is_null() || (has_slices && image_slice_pitch.is_null()) {
        return Err(CL_INVALID_VALUE);
    }
    check_map_flags(&b, map_flags)?;
    let (ev, ptr, (row, slice)) = rt::map_image(
        &q,
        &b,
        blocking_map != CL_FALSE,
        map_flags,
        origin,
        region,
        waits,
    )?;
    // SAFETY: checked out-pointers (the slice pitch's may be NULL without slices).
    unsafe {
        *image_row_pitch = row;
        if !image_slice_pitch.is_null() {
            *image_slice_pitch = slice;
        }
    }
    return_event(ev, event);
    Ok(ptr)
}

entry! {
    fn clEnqueueMapImage(
        queue: cl_command_queue,
        image: cl_mem,
        blocking_map: cl_bool,
        map_flags: cl_map_flags,
        origin: *const usize,
        region: *const usize,
        image_row_pitch: *mut usize,
        image_slice_pitch: *mut usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> *mut c_void, errcode_ret {
        map_image(
            queue,
            image,
            blocking_map,
            map_flags,
            origin,
            region,
            image_row_pitch,
            image_slice_pitch,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

fn create_sampler(
    context: cl_context,
    normalized: cl_bool,
    addressing: cl_addressing_mode,
    filter: cl_filter_mode,
) -> ClResult<cl_sampler> {
    let ctx = context_with_images(context)?;
    Ok(Sampler::into_handle(Sampler::new(
        ctx, normalized, addressing, filter,
    )?))
}

entry! {
    fn clCreateSampler(
        context: cl_context,
        normalized_coords: cl_bool,
        addressing_mode: cl_addressing_mode,
        filter_mode: cl_filter_mode,
    ) -> cl_sampler, errcode_ret {
        create_sampler(context, normalized_coords, addressing_mode, filter_mode)
    }
}

entry! {
    fn clCreateSamplerWithProperties(
        context: cl_context,
        properties: *const cl_sampler_properties,
    ) -> cl_sampler, errcode_ret {
        // The 1.2 defaults, changed by (name, value) pairs up to a 0.
        let (mut normalized, mut addressing, mut filter) =
            (CL_TRUE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST);
        let mut p = properties;
        while !p.is_null() {
            // SAFETY: a zero-terminated list of (name, value) pairs.
            let (name, value) = unsafe { (*p, if *p == 0 { 0 } else { *p.add(1) }) };
            match name as cl_uint {
                0 => break,
                CL_SAMPLER_NORMALIZED_COORDS => normalized = value as cl_bool,
                CL_SAMPLER_ADDRESSING_MODE => addressing = value as cl_addressing_mode,
                CL_SAMPLER_FILTER_MODE => filter = value as cl_filter_mode,
                _ => {
                    Context::from_handle(context)?;
                    return Err(CL_INVALID_VALUE);
                }
            }
            // SAFETY: the pair just read is followed by more of the list.
            p = unsafe { p.add(2) };
        }
        create_sampler(context, normalized, addressing, filter)
    }
}

entry! {
    fn clRetainSampler(sampler: cl_sampler) -> cl_int {
        Sampler::retain_handle(sampler)
    }
}

entry! {
    fn clReleaseSampler(sampler: cl_sampler) -> cl_int {
        Sampler::release_handle(sampler).map(|_| ())
    }
}

pub(crate) struct SamplerInfo;

impl InfoQuery for SamplerInfo {
    type Handles = (cl_sampler,);
    type Object = Arc<Sampler>;
    #[inline]
    fn object((sampler,): (cl_sampler,)) -> ClResult<Arc<Sampler>> {
        Sampler::from_handle(sampler)
    }
    fn answer(s: &Arc<Sampler>, param: cl_sampler_info) -> ClResult<Info> {
        Ok(match param {
            CL_SAMPLER_REFERENCE_COUNT => Info::value::<cl_uint>(s.retain_count()),
            CL_SAMPLER_CONTEXT => Info::value(s.context.handle()),
            CL_SAMPLER_NORMALIZED_COORDS => Info::value::<cl_bool>(s.normalized),
            CL_SAMPLER_ADDRESSING_MODE => Info::value::<cl_addressing_mode>(s.addressing),
            CL_SAMPLER_FILTER_MODE => Info::value::<cl_filter_mode>(s.filter),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetSamplerInfo(sampler: cl_sampler; cl_sampler_info) => SamplerInfo;
}
