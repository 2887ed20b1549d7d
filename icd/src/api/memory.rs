//! Buffer and sub-buffer entry points.

use crate::info::{Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::context::Context;
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::memory::Buffer;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

const ACCESS: cl_mem_flags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
const HOST_PTR: cl_mem_flags = CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;
const HOST_ACCESS: cl_mem_flags =
    CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;

/// CL_INVALID_VALUE if flags has unknown bits or mutually exclusive ones.
pub(crate) fn check_flags(flags: cl_mem_flags) -> ClResult<()> {
    if flags & !(ACCESS | HOST_PTR | HOST_ACCESS) != 0
        || (flags & ACCESS).count_ones() > 1
        || (flags & HOST_ACCESS).count_ones() > 1
        || (flags & CL_MEM_USE_HOST_PTR != 0
            && flags & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0)
    {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
}

fn create_buffer(
    context: cl_context,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> ClResult<*mut c_void> {
    let ctx = Context::from_handle(context)?;
    check_flags(flags)?;
    // CL_INVALID_BUFFER_SIZE if size is 0 or greater than CL_DEVICE_MAX_MEM_ALLOC_SIZE
    // of every device in context.
    let max = ctx
        .devices
        .iter()
        .map(|d| d.info_value::<cl_ulong>(CL_DEVICE_MAX_MEM_ALLOC_SIZE))
        .max()
        .unwrap_or(0);
    if size == 0 || size as u64 > max {
        return Err(CL_INVALID_BUFFER_SIZE);
    }
    // CL_INVALID_HOST_PTR if host_ptr is NULL with USE/COPY_HOST_PTR, or not NULL without.
    let wants_ptr = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0;
    if wants_ptr == host_ptr.is_null() {
        return Err(CL_INVALID_HOST_PTR);
    }
    Ok(Buffer::into_handle(Buffer::new(
        ctx, flags, size, host_ptr,
    )?))
}

entry! {
    fn clCreateBuffer(
        context: cl_context,
        flags: cl_mem_flags,
        size: usize,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        create_buffer(context, flags, size, host_ptr)
    }
}

entry! {
    fn clCreateBufferWithProperties(
        context: cl_context,
        properties: *const cl_mem_properties,
        flags: cl_mem_flags,
        size: usize,
        host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        // SAFETY: a zero-terminated list or NULL; no buffer properties are supported.
        if !properties.is_null() && unsafe { *properties } != 0 {
            Context::from_handle(context)?;
            return Err(CL_INVALID_PROPERTY);
        }
        create_buffer(context, flags, size, host_ptr)
    }
}

entry! {
    fn clCreateSubBuffer(
        buffer: cl_mem,
        flags: cl_mem_flags,
        buffer_create_type: cl_buffer_create_type,
        buffer_create_info: *const c_void,
    ) -> cl_mem, errcode_ret {
        create_sub_buffer(buffer, flags, buffer_create_type, buffer_create_info)
    }
}

fn create_sub_buffer(
    buffer: cl_mem,
    flags: cl_mem_flags,
    buffer_create_type: cl_buffer_create_type,
    buffer_create_info: *const c_void,
) -> ClResult<cl_mem> {
    let parent = Buffer::from_handle(buffer)?;
    // CL_INVALID_MEM_OBJECT if buffer is a sub-buffer (or an image).
    if parent.parent.is_some() || parent.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    check_flags(flags)?;
    // Host pointer flags cannot be given; access flags must not widen the parent's.
    if flags & HOST_PTR != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let p = parent.flags;
    let widened = (p & CL_MEM_WRITE_ONLY != 0
        && flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY) != 0)
        || (p & CL_MEM_READ_ONLY != 0 && flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY) != 0)
        || (p & CL_MEM_HOST_WRITE_ONLY != 0 && flags & CL_MEM_HOST_READ_ONLY != 0)
        || (p & CL_MEM_HOST_READ_ONLY != 0 && flags & CL_MEM_HOST_WRITE_ONLY != 0)
        || (p & CL_MEM_HOST_NO_ACCESS != 0
            && flags & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY) != 0);
    if widened {
        return Err(CL_INVALID_VALUE);
    }
    let mut sub_flags = flags;
    if flags & ACCESS == 0 {
        sub_flags |= p & ACCESS;
    }
    if flags & HOST_ACCESS == 0 {
        sub_flags |= p & HOST_ACCESS;
    }
    sub_flags |= p & HOST_PTR;
    if buffer_create_type != CL_BUFFER_CREATE_TYPE_REGION || buffer_create_info.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: a cl_buffer_region for CL_BUFFER_CREATE_TYPE_REGION.
    let region = unsafe { *(buffer_create_info as *const cl_buffer_region) };
    if region.size == 0 {
        return Err(CL_INVALID_BUFFER_SIZE);
    }
    if region
        .origin
        .checked_add(region.size)
        .is_none_or(|end| end > parent.size)
    {
        return Err(CL_INVALID_VALUE);
    }
    // Every device gets its own instance of the sub-buffer, so the origin must suit
    // every device's base address alignment.
    if parent
        .context
        .devices
        .iter()
        .any(|d| !(region.origin as u64).is_multiple_of(d.base_align()))
    {
        return Err(CL_MISALIGNED_SUB_BUFFER_OFFSET);
    }
    Ok(Buffer::into_handle(Buffer::new_sub(
        &parent,
        sub_flags,
        region.origin,
        region.size,
    )))
}

entry! {
    fn clRetainMemObject(memobj: cl_mem) -> cl_int {
        Buffer::retain_handle(memobj)
    }
}

entry! {
    fn clReleaseMemObject(memobj: cl_mem) -> cl_int {
        Buffer::release_handle(memobj).map(|_| ())
    }
}

pub(crate) struct MemInfo;

impl InfoQuery for MemInfo {
    type Handles = (cl_mem,);
    type Object = Arc<Buffer>;
    #[inline]
    fn object((memobj,): (cl_mem,)) -> ClResult<Arc<Buffer>> {
        Buffer::from_handle(memobj)
    }
    #[inline]
    fn answer(b: &Arc<Buffer>, param: cl_mem_info) -> ClResult<Info> {
        Ok(match param {
            CL_MEM_TYPE => Info::value::<cl_mem_object_type>(
                b.image.map_or(CL_MEM_OBJECT_BUFFER, |i| i.image_type),
            ),
            CL_MEM_FLAGS => Info::value::<cl_mem_flags>(b.flags),
            CL_MEM_SIZE => Info::value::<usize>(b.size),
            CL_MEM_HOST_PTR => Info::value::<*mut c_void>(b.host_ptr as *mut c_void),
            CL_MEM_MAP_COUNT => Info::value::<cl_uint>(b.mappings()),
            CL_MEM_REFERENCE_COUNT => Info::value::<cl_uint>(b.retain_count()),
            CL_MEM_CONTEXT => Info::value(b.context.handle()),
            CL_MEM_ASSOCIATED_MEMOBJECT => Info::value::<cl_mem>(
                b.parent
                    .as_ref()
                    .map_or(std::ptr::null_mut(), |p| p.handle()),
            ),
            CL_MEM_OFFSET => Info::value::<usize>(if b.image.is_some() { 0 } else { b.origin }),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetMemObjectInfo(memobj: cl_mem; cl_mem_info) => MemInfo;
}

entry! {
    fn clSetMemObjectDestructorCallback(
        memobj: cl_mem,
        pfn_notify: Option<unsafe extern "C" fn(cl_mem, *mut c_void)>,
        user_data: *mut c_void,
    ) -> cl_int {
        let b = Buffer::from_handle(memobj)?;
        let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
        b.destructors.add(f, user_data);
        Ok(())
    }
}

/// A memory object argument of an enqueue (a buffer or an image): valid, and of the
/// queue's context.
pub(crate) fn mem_in(mem: cl_mem, context: &Arc<Context>) -> ClResult<Arc<Buffer>> {
    let b = Buffer::from_handle(mem)?;
    if !Arc::ptr_eq(&b.context, context) {
        return Err(CL_INVALID_CONTEXT);
    }
    Ok(b)
}

/// A buffer argument of an enqueue: `CL_INVALID_MEM_OBJECT` for an image.
pub(crate) fn buffer_in(mem: cl_mem, context: &Arc<Context>) -> ClResult<Arc<Buffer>> {
    let b = mem_in(mem, context)?;
    if b.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    Ok(b)
}

entry! {
    /// `cl_mirrorcl_attach_buffer` (`include/CL/cl_ext_mirrorcl.h`): from now on `device`
    /// always holds the newest bytes of `buffer` (SnuCL-D's `clAttachBufferToDevice`). The
    /// thesis declares it `void`; callers that ignore the result keep working.
    fn clAttachBufferToDevice(buffer: cl_mem, device: cl_device_id) -> cl_int {
        // CL_INVALID_MEM_OBJECT if buffer is not a valid buffer object; a sub-buffer is
        // a window on its parent, which is what can be attached.
        let b = Buffer::from_handle(buffer)?;
        if b.parent.is_some() {
            return Err(CL_INVALID_MEM_OBJECT);
        }
        // CL_INVALID_DEVICE if device is not a valid device of the buffer's context.
        let d = Device::from_handle(device)?;
        if !b.context.has_device(&d) {
            return Err(CL_INVALID_DEVICE);
        }
        mirrorcl_runtime::enqueue::attach(&b, &d)
    }
}
