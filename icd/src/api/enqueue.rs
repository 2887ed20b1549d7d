//! Enqueue entry points: validation per the specification, then the runtime.

use crate::api::memory::{buffer_in, mem_in};
use crate::info::{array, return_event, wait_list};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::enqueue::{self as rt, Rect};
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::event::Event;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::kernel::{ArgValue, Kernel, WorkGroupLimits};
use mirrorcl_runtime::objects::memory::Buffer;
use mirrorcl_runtime::objects::queue::Queue;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

/// The queue and wait list every enqueue starts with.
pub(crate) fn begin(
    queue: cl_command_queue,
    n: cl_uint,
    list: *const cl_event,
) -> ClResult<(Arc<Queue>, Vec<Arc<Event>>)> {
    let q = Queue::from_handle(queue)?;
    let waits = wait_list(n, list, Some(&q.context))?;
    Ok((q, waits))
}

/// CL_INVALID_VALUE if `offset..offset+size` is empty or outside the buffer.
fn check_range(b: &Buffer, offset: usize, size: usize) -> ClResult<()> {
    if size == 0 || offset.checked_add(size).is_none_or(|end| end > b.size) {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
}

/// CL_INVALID_OPERATION when the buffer's host access flags forbid the host to read
/// (`read`) or write it.
pub(crate) fn check_host_access(b: &Buffer, read: bool) -> ClResult<()> {
    let forbidden = if read {
        CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS
    } else {
        CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS
    };
    if b.flags & forbidden != 0 {
        return Err(CL_INVALID_OPERATION);
    }
    Ok(())
}

/// A map's flags: known and not contradictory (`CL_INVALID_VALUE`), and allowed by the
/// memory object's host access flags (`CL_INVALID_OPERATION`).
pub(crate) fn check_map_flags(b: &Buffer, map_flags: cl_map_flags) -> ClResult<()> {
    let known = CL_MAP_READ | CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION;
    if map_flags & !known != 0
        || (map_flags & CL_MAP_WRITE_INVALIDATE_REGION != 0
            && map_flags & (CL_MAP_READ | CL_MAP_WRITE) != 0)
    {
        return Err(CL_INVALID_VALUE);
    }
    if map_flags & CL_MAP_READ != 0 {
        check_host_access(b, true)?;
    }
    if map_flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0 {
        check_host_access(b, false)?;
    }
    Ok(())
}

/// `clEnqueueReadBuffer` (`write == false`) and `clEnqueueWriteBuffer`.
#[allow(clippy::too_many_arguments)]
fn rw_buffer(
    queue: cl_command_queue,
    buffer: cl_mem,
    write: bool,
    blocking: cl_bool,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let b = buffer_in(buffer, &q.context)?;
    check_range(&b, offset, size)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    check_host_access(&b, !write)?;
    let ev = rt::rw_buffer(
        &q,
        &b,
        write,
        blocking != CL_FALSE,
        offset,
        size,
        ptr,
        waits,
    )?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueReadBuffer(
        queue: cl_command_queue,
        buffer: cl_mem,
        blocking_read: cl_bool,
        offset: usize,
        size: usize,
        ptr: *mut c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_buffer(
            queue,
            buffer,
            false,
            blocking_read,
            offset,
            size,
            ptr,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueWriteBuffer(
        queue: cl_command_queue,
        buffer: cl_mem,
        blocking_write: cl_bool,
        offset: usize,
        size: usize,
        ptr: *const c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_buffer(
            queue,
            buffer,
            true,
            blocking_write,
            offset,
            size,
            ptr as *mut c_void,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

/// Same root buffer and overlapping root ranges.
fn overlaps(
    a: &Buffer,
    a_range: std::ops::Range<usize>,
    b: &Buffer,
    b_range: std::ops::Range<usize>,
) -> bool {
    if a.id != b.id {
        return false;
    }
    let ra = a.root_range(a_range.start, a_range.len());
    let rb = b.root_range(b_range.start, b_range.len());
    ra.start < rb.end && rb.start < ra.end
}

entry! {
    fn clEnqueueCopyBuffer(
        queue: cl_command_queue,
        src_buffer: cl_mem,
        dst_buffer: cl_mem,
        src_offset: usize,
        dst_offset: usize,
        size: usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        enqueue_copy_buffer(
            queue,
            src_buffer,
            dst_buffer,
            src_offset,
            dst_offset,
            size,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

fn enqueue_copy_buffer(
    queue: cl_command_queue,
    src_buffer: cl_mem,
    dst_buffer: cl_mem,
    src_offset: usize,
    dst_offset: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
    let src = buffer_in(src_buffer, &q.context)?;
    let dst = buffer_in(dst_buffer, &q.context)?;
    check_range(&src, src_offset, size)?;
    check_range(&dst, dst_offset, size)?;
    // CL_MEM_COPY_OVERLAP if the source and destination regions overlap (also for
    // sub-buffers of one buffer).
    if overlaps(
        &src,
        src_offset..src_offset + size,
        &dst,
        dst_offset..dst_offset + size,
    ) {
        return Err(CL_MEM_COPY_OVERLAP);
    }
    let ev = rt::copy_buffer(&q, &src, &dst, src_offset, dst_offset, size, waits)?;
    return_event(ev, event);
    Ok(())
}

pub(crate) fn triple(p: *const usize) -> ClResult<[usize; 3]> {
    if p.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let s = array(p, 3);
    Ok([s[0], s[1], s[2]])
}

/// Pitches defaulted and checked as §5.2.2 says; errors are CL_INVALID_VALUE.
fn pitches(region: [usize; 3], row: usize, slice: usize) -> ClResult<(usize, usize)> {
    let row = if row == 0 { region[0] } else { row };
    if row < region[0] {
        return Err(CL_INVALID_VALUE);
    }
    let slice = if slice == 0 { region[1] * row } else { slice };
    if slice < region[1] * row || slice % row != 0 {
        return Err(CL_INVALID_VALUE);
    }
    Ok((row, slice))
}

fn rect(origin: *const usize, region: [usize; 3], row: usize, slice: usize) -> ClResult<Rect> {
    let (row_pitch, slice_pitch) = pitches(region, row, slice)?;
    Ok(Rect {
        origin: triple(origin)?,
        row_pitch,
        slice_pitch,
    })
}

pub(crate) fn check_region(region: *const usize) -> ClResult<[usize; 3]> {
    let r = triple(region)?;
    if r.contains(&0) {
        return Err(CL_INVALID_VALUE);
    }
    Ok(r)
}

/// The rectangle must lie inside the buffer.
fn check_rect_in(b: &Buffer, r: &Rect, region: [usize; 3]) -> ClResult<()> {
    if r.span(region).end > b.size {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn rw_rect(
    queue: cl_command_queue,
    buffer: cl_mem,
    write: bool,
    blocking: cl_bool,
    buffer_origin: *const usize,
    host_origin: *const usize,
    region: *const usize,
    buffer_row_pitch: usize,
    buffer_slice_pitch: usize,
    host_row_pitch: usize,
    host_slice_pitch: usize,
    ptr: *mut c_void,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let b = buffer_in(buffer, &q.context)?;
    let region = check_region(region)?;
    let buf = rect(buffer_origin, region, buffer_row_pitch, buffer_slice_pitch)?;
    let host = rect(host_origin, region, host_row_pitch, host_slice_pitch)?;
    check_rect_in(&b, &buf, region)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    check_host_access(&b, !write)?;
    let ev = rt::rw_rect(
        &q,
        &b,
        write,
        blocking != CL_FALSE,
        buf,
        host,
        region,
        ptr,
        waits,
    )?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueReadBufferRect(
        queue: cl_command_queue,
        buffer: cl_mem,
        blocking_read: cl_bool,
        buffer_origin: *const usize,
        host_origin: *const usize,
        region: *const usize,
        buffer_row_pitch: usize,
        buffer_slice_pitch: usize,
        host_row_pitch: usize,
        host_slice_pitch: usize,
        ptr: *mut c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_rect(
            queue,
            buffer,
            false,
            blocking_read,
            buffer_origin,
            host_origin,
            region,
            buffer_row_pitch,
            buffer_slice_pitch,
            host_row_pitch,
            host_slice_pitch,
            ptr,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueWriteBufferRect(
        queue: cl_command_queue,
        buffer: cl_mem,
        blocking_write: cl_bool,
        buffer_origin: *const usize,
        host_origin: *const usize,
        region: *const usize,
        buffer_row_pitch: usize,
        buffer_slice_pitch: usize,
        host_row_pitch: usize,
        host_slice_pitch: usize,
        ptr: *const c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        rw_rect(
            queue,
            buffer,
            true,
            blocking_write,
            buffer_origin,
            host_origin,
            region,
            buffer_row_pitch,
            buffer_slice_pitch,
            host_row_pitch,
            host_slice_pitch,
            ptr as *mut c_void,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueCopyBufferRect(
        queue: cl_command_queue,
        src_buffer: cl_mem,
        dst_buffer: cl_mem,
        src_origin: *const usize,
        dst_origin: *const usize,
        region: *const usize,
        src_row_pitch: usize,
        src_slice_pitch: usize,
        dst_row_pitch: usize,
        dst_slice_pitch: usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        enqueue_copy_buffer_rect(
            queue,
            src_buffer,
            dst_buffer,
            src_origin,
            dst_origin,
            region,
            src_row_pitch,
            src_slice_pitch,
            dst_row_pitch,
            dst_slice_pitch,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

fn enqueue_copy_buffer_rect(
    queue: cl_command_queue,
    src_buffer: cl_mem,
    dst_buffer: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    src_row_pitch: usize,
    src_slice_pitch: usize,
    dst_row_pitch: usize,
    dst_slice_pitch: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
    let src = buffer_in(src_buffer, &q.context)?;
    let dst = buffer_in(dst_buffer, &q.context)?;
    let region = check_region(region)?;
    let s = rect(src_origin, region, src_row_pitch, src_slice_pitch)?;
    let d = rect(dst_origin, region, dst_row_pitch, dst_slice_pitch)?;
    check_rect_in(&src, &s, region)?;
    check_rect_in(&dst, &d, region)?;
    if src.id == dst.id {
        // CL_INVALID_VALUE if one buffer is both source and destination with different
        // pitches.
        if Arc::ptr_eq(&src, &dst) && (s.row_pitch != d.row_pitch || s.slice_pitch != d.slice_pitch)
        {
            return Err(CL_INVALID_VALUE);
        }
        if overlaps(&src, s.span(region), &dst, d.span(region)) {
            return Err(CL_MEM_COPY_OVERLAP);
        }
    }
    let ev = rt::copy_rect(&q, &src, &dst, s, d, region, waits)?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueFillBuffer(
        queue: cl_command_queue,
        buffer: cl_mem,
        pattern: *const c_void,
        pattern_size: usize,
        offset: usize,
        size: usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
        let b = buffer_in(buffer, &q.context)?;
        // CL_INVALID_VALUE if pattern is NULL, pattern_size is not one of the sizes of
        // OpenCL types (1..128, a power of two), or offset/size are not multiples of it.
        if pattern.is_null() || !pattern_size.is_power_of_two() || pattern_size > 128 {
            return Err(CL_INVALID_VALUE);
        }
        if !offset.is_multiple_of(pattern_size) || !size.is_multiple_of(pattern_size) {
            return Err(CL_INVALID_VALUE);
        }
        check_range(&b, offset, size)?;
        let bytes = array(pattern as *const u8, pattern_size).to_vec();
        let ev = rt::fill_buffer(&q, &b, bytes, offset, size, waits)?;
        return_event(ev, event);
        Ok(())
    }
}

entry! {
    fn clEnqueueMapBuffer(
        queue: cl_command_queue,
        buffer: cl_mem,
        blocking_map: cl_bool,
        map_flags: cl_map_flags,
        offset: usize,
        size: usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> *mut c_void, errcode_ret {
        enqueue_map_buffer(
            queue,
            buffer,
            blocking_map,
            map_flags,
            offset,
            size,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

fn enqueue_map_buffer(
    queue: cl_command_queue,
    buffer: cl_mem,
    blocking_map: cl_bool,
    map_flags: cl_map_flags,
    offset: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<*mut c_void> {
    let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
    let b = buffer_in(buffer, &q.context)?;
    check_range(&b, offset, size)?;
    check_map_flags(&b, map_flags)?;
    let (ev, ptr) = rt::map_buffer(
        &q,
        &b,
        blocking_map != CL_FALSE,
        map_flags,
        offset,
        size,
        waits,
    )?;
    return_event(ev, event);
    Ok(ptr)
}

entry! {
    fn clEnqueueUnmapMemObject(
        queue: cl_command_queue,
        memobj: cl_mem,
        mapped_ptr: *mut c_void,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
        let b = mem_in(memobj, &q.context)?;
        // CL_INVALID_VALUE if mapped_ptr is not a pointer returned by a map of memobj.
        let mapping = {
            let mut maps = b.maps.lock();
            let i = maps
                .iter()
                .position(|m| m.ptr == mapped_ptr as usize)
                .ok_or(CL_INVALID_VALUE)?;
            maps.remove(i)
        };
        let ev = rt::unmap(&q, &b, mapping, waits)?;
        return_event(ev, event);
        Ok(())
    }
}

entry! {
    fn clEnqueueMigrateMemObjects(
        queue: cl_command_queue,
        num_mem_objects: cl_uint,
        mem_objects: *const cl_mem,
        flags: cl_mem_migration_flags,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
        if num_mem_objects == 0 || mem_objects.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        if flags & !(CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) != 0 {
            return Err(CL_INVALID_VALUE);
        }
        let buffers = array(mem_objects, num_mem_objects as usize)
            .iter()
            .map(|&m| mem_in(m, &q.context))
            .collect::<ClResult<Vec<_>>>()?;
        let ev = rt::migrate(&q, buffers, flags, waits)?;
        return_event(ev, event);
        Ok(())
    }
}

/// The local work size of a launch, checked against the global size, the kernel's
/// limits and the device's (`None`: the implementation chooses).
fn local_size(
    local_work_size: *const usize,
    dims: usize,
    global: [usize; 3],
    limits: WorkGroupLimits,
    device: &Device,
) -> ClResult<Option<[usize; 3]>> {
    // CL_INVALID_WORK_GROUP_SIZE if local_work_size is NULL and the kernel declares
    // reqd_work_group_size (OpenCL 1.2; PoCL 3.1 says the same).
    let required = limits.required;
    if local_work_size.is_null() {
        if required != [0; 3] {
            return Err(CL_INVALID_WORK_GROUP_SIZE);
        }
        return Ok(None);
    }
    let mut l = [1usize; 3];
    l[..dims].copy_from_slice(array(local_work_size, dims));
    if (0..dims).any(|i| l[i] == 0 || !global[i].is_multiple_of(l[i])) {
        return Err(CL_INVALID_WORK_GROUP_SIZE);
    }
    if required != [0; 3] && required[..dims] != l[..dims] {
        return Err(CL_INVALID_WORK_GROUP_SIZE);
    }
    // OpenCL 1.2 names the device's limit here. The kernel's (CL_KERNEL_WORK_GROUP_SIZE)
    // is the vendor's to enforce: NVIDIA launches above it; a vendor that refuses fails
    // the command on its owner, and its event reports that on every rank.
    let device_max: usize = device.info_value(CL_DEVICE_MAX_WORK_GROUP_SIZE);
    if device_max > 0 && l.iter().product::<usize>() > device_max {
        return Err(CL_INVALID_WORK_GROUP_SIZE);
    }
    let max_items = device.info(CL_DEVICE_MAX_WORK_ITEM_SIZES).unwrap_or(&[]);
    for (i, &li) in l.iter().enumerate().take(dims) {
        let at = i * std::mem::size_of::<usize>();
        if let Some(bytes) = max_items.get(at..at + std::mem::size_of::<usize>()) {
            if li > usize::from_ne_bytes(bytes.try_into().expect("usize bytes")) {
                return Err(CL_INVALID_WORK_ITEM_SIZE);
            }
        }
    }
    Ok(Some(l))
}

#[allow(clippy::too_many_arguments)]
fn ndrange(
    queue: cl_command_queue,
    kernel: cl_kernel,
    command_type: cl_command_type,
    work_dim: cl_uint,
    global_work_offset: *const usize,
    global_work_size: *const usize,
    local_work_size: *const usize,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (q, waits) = begin(queue, n, list)?;
    let k = Kernel::from_handle(kernel)?;
    if !Arc::ptr_eq(&k.program.context, &q.context) {
        return Err(CL_INVALID_CONTEXT);
    }
    // CL_INVALID_PROGRAM_EXECUTABLE if there is no successfully built program executable
    // for the queue's device.
    let Some(limits) = k.limits(&q.device) else {
        return Err(CL_INVALID_PROGRAM_EXECUTABLE);
    };
    if !(1..=3).contains(&work_dim) {
        return Err(CL_INVALID_WORK_DIMENSION);
    }
    let dims = work_dim as usize;
    if global_work_size.is_null() {
        return Err(CL_INVALID_GLOBAL_WORK_SIZE);
    }
    let mut global = [1usize; 3];
    global[..dims].copy_from_slice(array(global_work_size, dims));
    if global[..dims].contains(&0) {
        return Err(CL_INVALID_GLOBAL_WORK_SIZE);
    }
    let offset = if global_work_offset.is_null() {
        None
    } else {
        let mut o = [0usize; 3];
        o[..dims].copy_from_slice(array(global_work_offset, dims));
        if (0..dims).any(|i| o[i].checked_add(global[i]).is_none()) {
            return Err(CL_INVALID_GLOBAL_OFFSET);
        }
        Some(o)
    };
    let local = local_size(local_work_size, dims, global, limits, &q.device)?;
    // CL_INVALID_KERNEL_ARGS if the kernel argument values have not been specified.
    let args: Vec<ArgValue> = k.launch_args()?;
    // CL_OUT_OF_RESOURCES: the local memory the launch needs (the kernel's own and its
    // __local arguments) exceeds the device's. Checked here, the same on every rank:
    // PoCL 3.1 asserts instead, and on another rank's device the vendor is not asked.
    if k.launch_exceeds_local_mem(&q.device, &args) {
        return Err(CL_OUT_OF_RESOURCES);
    }
    let ev = rt::ndrange(
        &q,
        &k,
        command_type,
        work_dim,
        offset,
        global,
        local,
        args,
        waits,
        event.is_null(),
    )?;
    return_event(ev, event);
    Ok(())
}

entry! {
    fn clEnqueueNDRangeKernel(
        queue: cl_command_queue,
        kernel: cl_kernel,
        work_dim: cl_uint,
        global_work_offset: *const usize,
        global_work_size: *const usize,
        local_work_size: *const usize,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        ndrange(
            queue,
            kernel,
            CL_COMMAND_NDRANGE_KERNEL,
            work_dim,
            global_work_offset,
            global_work_size,
            local_work_size,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueTask(
        queue: cl_command_queue,
        kernel: cl_kernel,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let one = [1usize];
        ndrange(
            queue,
            kernel,
            CL_COMMAND_TASK,
            1,
            std::ptr::null(),
            one.as_ptr(),
            one.as_ptr(),
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    }
}

entry! {
    fn clEnqueueMarkerWithWaitList(
        queue: cl_command_queue,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
        return_event(rt::marker(&q, CL_COMMAND_MARKER, waits)?, event);
        Ok(())
    }
}

entry! {
    fn clEnqueueBarrierWithWaitList(
        queue: cl_command_queue,
        num_events_in_wait_list: cl_uint,
        event_wait_list: *const cl_event,
        event: *mut cl_event,
    ) -> cl_int {
        let (q, waits) = begin(queue, num_events_in_wait_list, event_wait_list)?;
        // Commands of a queue already run in order, so a barrier is a marker whose
        // completion later commands wait for (they depend on the queue's last command).
        return_event(rt::marker(&q, CL_COMMAND_BARRIER, waits)?, event);
        Ok(())
    }
}

entry! {
    fn clEnqueueMarker(queue: cl_command_queue, event: *mut cl_event) -> cl_int {
        let (q, _) = begin(queue, 0, std::ptr::null())?;
        if event.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        return_event(rt::marker(&q, CL_COMMAND_MARKER, Vec::new())?, event);
        Ok(())
    }
}

entry! {
    fn clEnqueueBarrier(queue: cl_command_queue) -> cl_int {
        let (q, _) = begin(queue, 0, std::ptr::null())?;
        rt::marker(&q, CL_COMMAND_BARRIER, Vec::new()).map(|_| ())
    }
}

entry! {
    fn clEnqueueWaitForEvents(
        queue: cl_command_queue,
        num_events: cl_uint,
        event_list: *const cl_event,
    ) -> cl_int {
        let q = Queue::from_handle(queue)?;
        if num_events == 0 || event_list.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        let events = array(event_list, num_events as usize)
            .iter()
            .map(|&e| Event::from_handle(e))
            .collect::<ClResult<Vec<_>>>()?;
        if events.iter().any(|e| !Arc::ptr_eq(&e.context, &q.context)) {
            return Err(CL_INVALID_CONTEXT);
        }
        rt::marker(&q, CL_COMMAND_BARRIER, events).map(|_| ())
    }
}
