//! Context and command-queue entry points.

use crate::api::platform::{device_list, devices_of_type};
use crate::info::{Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::context::{Context, ContextNotify};
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::platform::Platform;
use mirrorcl_runtime::objects::queue::Queue;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

type Notify = Option<unsafe extern "C" fn(*const libc::c_char, *const c_void, usize, *mut c_void)>;

/// Validates a context property list; returns it with its terminating 0.
fn context_properties(
    properties: *const cl_context_properties,
) -> ClResult<Vec<cl_context_properties>> {
    let mut out = Vec::new();
    if properties.is_null() {
        return Ok(out);
    }
    let mut seen = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: a zero-terminated list of (name, value) pairs.
        let name = unsafe { *properties.add(i) };
        if name == 0 {
            out.push(0);
            return Ok(out);
        }
        // SAFETY: as above.
        let value = unsafe { *properties.add(i + 1) };
        // CL_INVALID_PROPERTY if a property name is not supported or given twice.
        if seen.contains(&name) {
            return Err(CL_INVALID_PROPERTY);
        }
        seen.push(name);
        match name {
            CL_CONTEXT_PLATFORM => {
                Platform::check(value as cl_platform_id)?;
                if value == 0 {
                    return Err(CL_INVALID_PLATFORM);
                }
            }
            // A cl_bool: any other value is CL_INVALID_PROPERTY (the CTS checks -1).
            CL_CONTEXT_INTEROP_USER_SYNC => {
                if value != CL_TRUE as cl_context_properties
                    && value != CL_FALSE as cl_context_properties
                {
                    return Err(CL_INVALID_PROPERTY);
                }
            }
            _ => return Err(CL_INVALID_PROPERTY),
        }
        out.push(name);
        out.push(value);
        i += 2;
    }
}

fn create_context(
    properties: *const cl_context_properties,
    devices: Vec<Arc<Device>>,
    pfn_notify: Notify,
    user_data: *mut c_void,
) -> ClResult<*mut c_void> {
    // CL_INVALID_VALUE if pfn_notify is NULL but user_data is not NULL.
    if pfn_notify.is_none() && !user_data.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let props = context_properties(properties)?;
    let mut unique: Vec<Arc<Device>> = Vec::new();
    for d in devices {
        if !unique.iter().any(|u| u.index == d.index) {
            unique.push(d);
        }
    }
    let notify = pfn_notify.map(|f| (f as ContextNotify, user_data));
    let ctx = Context::new(unique, props, notify)?;
    Ok(Context::into_handle(ctx))
}

entry! {
    fn clCreateContext(
        properties: *const cl_context_properties,
        num_devices: cl_uint,
        devices: *const cl_device_id,
        pfn_notify: Notify,
        user_data: *mut c_void,
    ) -> cl_context, errcode_ret {
        // CL_INVALID_VALUE if devices is NULL or num_devices is 0.
        if devices.is_null() || num_devices == 0 {
            return Err(CL_INVALID_VALUE);
        }
        let list = device_list(num_devices, devices)?;
        create_context(properties, list, pfn_notify, user_data)
    }
}

entry! {
    fn clCreateContextFromType(
        properties: *const cl_context_properties,
        device_type: cl_device_type,
        pfn_notify: Notify,
        user_data: *mut c_void,
    ) -> cl_context, errcode_ret {
        context_properties(properties)?;
        let list = devices_of_type(device_type)?;
        create_context(properties, list, pfn_notify, user_data)
    }
}

entry! {
    fn clRetainContext(context: cl_context) -> cl_int {
        Context::retain_handle(context)
    }
}

entry! {
    fn clReleaseContext(context: cl_context) -> cl_int {
        Context::release_handle(context).map(|_| ())
    }
}

pub(crate) struct ContextInfo;

impl InfoQuery for ContextInfo {
    type Handles = (cl_context,);
    type Object = Arc<Context>;
    #[inline]
    fn object((context,): (cl_context,)) -> ClResult<Arc<Context>> {
        Context::from_handle(context)
    }
    #[inline]
    fn answer(ctx: &Arc<Context>, param: cl_context_info) -> ClResult<Info> {
        Ok(match param {
            CL_CONTEXT_REFERENCE_COUNT => Info::value::<cl_uint>(ctx.header().count()),
            CL_CONTEXT_NUM_DEVICES => Info::value::<cl_uint>(ctx.devices.len() as cl_uint),
            CL_CONTEXT_DEVICES => {
                let handles: Vec<cl_device_id> = ctx.devices.iter().map(|d| d.handle()).collect();
                Info::slice(&handles)
            }
            CL_CONTEXT_PROPERTIES => Info::slice(&ctx.properties),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetContextInfo(context: cl_context; cl_context_info) => ContextInfo;
}

entry! {
    fn clSetContextDestructorCallback(
        context: cl_context,
        pfn_notify: Option<unsafe extern "C" fn(cl_context, *mut c_void)>,
        user_data: *mut c_void,
    ) -> cl_int {
        let ctx = Context::from_handle(context)?;
        let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
        // Runs when the context is deleted, after its objects are.
        ctx.destructors.add(f, user_data);
        Ok(())
    }
}

const QUEUE_PROPERTIES: cl_command_queue_properties =
    CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_PROFILING_ENABLE;

fn create_queue(
    context: cl_context,
    device: cl_device_id,
    properties: cl_command_queue_properties,
) -> ClResult<*mut c_void> {
    let ctx = Context::from_handle(context)?;
    let dev = Device::from_handle(device)?;
    // CL_INVALID_DEVICE if device is not associated with context.
    if !ctx.has_device(&dev) {
        return Err(CL_INVALID_DEVICE);
    }
    // CL_INVALID_VALUE if values specified in properties are not valid.
    if properties & !(QUEUE_PROPERTIES | CL_QUEUE_ON_DEVICE | CL_QUEUE_ON_DEVICE_DEFAULT) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    // Device-side queues are OpenCL 2.0.
    if properties & (CL_QUEUE_ON_DEVICE | CL_QUEUE_ON_DEVICE_DEFAULT) != 0 {
        return Err(CL_INVALID_QUEUE_PROPERTIES);
    }
    Ok(Queue::into_handle(Queue::new(ctx, dev, properties)?))
}

entry! {
    fn clCreateCommandQueue(
        context: cl_context,
        device: cl_device_id,
        properties: cl_command_queue_properties,
    ) -> cl_command_queue, errcode_ret {
        create_queue(context, device, properties)
    }
}

entry! {
    fn clCreateCommandQueueWithProperties(
        context: cl_context,
        device: cl_device_id,
        properties: *const cl_queue_properties,
    ) -> cl_command_queue, errcode_ret {
        let mut bits = 0;
        if !properties.is_null() {
            let mut i = 0;
            loop {
                // SAFETY: a zero-terminated list of (name, value) pairs.
                let name = unsafe { *properties.add(i) };
                if name == 0 {
                    break;
                }
                // SAFETY: as above.
                let value = unsafe { *properties.add(i + 1) };
                match name as cl_uint {
                    CL_QUEUE_PROPERTIES => bits = value,
                    CL_QUEUE_SIZE => return Err(CL_INVALID_QUEUE_PROPERTIES),
                    _ => return Err(CL_INVALID_VALUE),
                }
                i += 2;
            }
        }
        create_queue(context, device, bits)
    }
}

entry! {
    fn clRetainCommandQueue(queue: cl_command_queue) -> cl_int {
        Queue::retain_handle(queue)
    }
}

entry! {
    fn clReleaseCommandQueue(queue: cl_command_queue) -> cl_int {
        // Issuers flush after every batch, which is the implicit flush asked for here.
        if let Ok(q) = Queue::from_handle(queue) {
            q.back_unbacked();
        }
        Queue::release_handle(queue).map(|_| ())
    }
}

pub(crate) struct QueueInfo;

impl InfoQuery for QueueInfo {
    type Handles = (cl_command_queue,);
    type Object = Arc<Queue>;
    #[inline]
    fn object((queue,): (cl_command_queue,)) -> ClResult<Arc<Queue>> {
        Queue::from_handle(queue)
    }
    #[inline]
    fn answer(q: &Arc<Queue>, param: cl_command_queue_info) -> ClResult<Info> {
        Ok(match param {
            CL_QUEUE_CONTEXT => Info::value(q.context.handle()),
            CL_QUEUE_DEVICE => Info::value(q.device.handle()),
            CL_QUEUE_REFERENCE_COUNT => Info::value::<cl_uint>(q.header().count()),
            CL_QUEUE_PROPERTIES => Info::value::<cl_command_queue_properties>(q.properties),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetCommandQueueInfo(queue: cl_command_queue; cl_command_queue_info) => QueueInfo;
}

entry! {
    fn clSetCommandQueueProperty(
        queue: cl_command_queue,
        _properties: cl_command_queue_properties,
        _enable: cl_bool,
        _old_properties: *mut cl_command_queue_properties,
    ) -> cl_int {
        Queue::from_handle(queue)?;
        // Removed in OpenCL 1.1; properties are fixed at creation.
        Err(CL_INVALID_OPERATION)
    }
}

entry! {
    fn clFlush(queue: cl_command_queue) -> cl_int {
        // Issuers submit and flush every batch as soon as it arrives.
        Queue::from_handle(queue).map(|_| ())
    }
}

entry! {
    fn clFinish(queue: cl_command_queue) -> cl_int {
        let q = Queue::from_handle(queue)?;
        mirrorcl_runtime::cluster::verify::check("clFinish");
        q.finish()
    }
}
