//! The measured entry points, taken from the ICD loader itself (`dlopen` +
//! `dlsym`) and called through typed function pointers, so that the timed paths
//! pass a null event pointer where `opencl3`'s wrappers would always ask for one.

use std::ffi::{c_char, c_int, c_void, CString};

use opencl3::error_codes::CL_SUCCESS;
use opencl3::types::{
    cl_bool, cl_command_queue, cl_context, cl_device_id, cl_device_info, cl_event, cl_event_info,
    cl_int, cl_kernel, cl_map_flags, cl_mem, cl_mem_flags, cl_mem_info, cl_uint,
};

type EnqueueNdRangeKernel = unsafe extern "C" fn(
    cl_command_queue,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type EnqueueRwBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_bool,
    usize,
    usize,
    *mut c_void,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type Finish = unsafe extern "C" fn(cl_command_queue) -> cl_int;
type SetKernelArg = unsafe extern "C" fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int;
type EnqueueCopyBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type EnqueueMapBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_bool,
    cl_map_flags,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
    *mut cl_int,
) -> *mut c_void;
type EnqueueUnmapMemObject = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    *mut c_void,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type CreateBuffer =
    unsafe extern "C" fn(cl_context, cl_mem_flags, usize, *mut c_void, *mut cl_int) -> cl_mem;
type ReleaseMemObject = unsafe extern "C" fn(cl_mem) -> cl_int;
type EnqueueMarkerWithWaitList =
    unsafe extern "C" fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
type WaitForEvents = unsafe extern "C" fn(cl_uint, *const cl_event) -> cl_int;
type ReleaseEvent = unsafe extern "C" fn(cl_event) -> cl_int;
type GetDeviceInfo =
    unsafe extern "C" fn(cl_device_id, cl_device_info, usize, *mut c_void, *mut usize) -> cl_int;
type GetMemObjectInfo =
    unsafe extern "C" fn(cl_mem, cl_mem_info, usize, *mut c_void, *mut usize) -> cl_int;
type GetEventInfo =
    unsafe extern "C" fn(cl_event, cl_event_info, usize, *mut c_void, *mut usize) -> cl_int;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

pub struct Api {
    pub enqueue_nd_range_kernel: EnqueueNdRangeKernel,
    pub enqueue_write_buffer: EnqueueRwBuffer,
    pub enqueue_read_buffer: EnqueueRwBuffer,
    pub finish: Finish,
    pub set_kernel_arg: SetKernelArg,
    pub enqueue_copy_buffer: EnqueueCopyBuffer,
    pub enqueue_map_buffer: EnqueueMapBuffer,
    pub enqueue_unmap_mem_object: EnqueueUnmapMemObject,
    pub create_buffer: CreateBuffer,
    pub release_mem_object: ReleaseMemObject,
    pub enqueue_marker_with_wait_list: EnqueueMarkerWithWaitList,
    pub wait_for_events: WaitForEvents,
    pub release_event: ReleaseEvent,
    pub get_device_info: GetDeviceInfo,
    pub get_mem_object_info: GetMemObjectInfo,
    /// Self-check only (a marker's status).
    pub get_event_info: GetEventInfo,
}

impl Api {
    /// Opens the same loader `opencl3` (cl3, "dynamic") opens: the entries of
    /// `OPENCL_DYLIB_PATH` first, then `libOpenCL.so.1`. dlopen of an already
    /// loaded library returns the same handle, so this is one loader.
    pub fn load() -> Result<Self, String> {
        let mut candidates: Vec<String> = std::env::var("OPENCL_DYLIB_PATH")
            .map(|v| v.split(';').map(str::to_string).collect())
            .unwrap_or_default();
        candidates.push("libOpenCL.so.1".to_string());
        let handle = candidates
            .iter()
            .filter_map(|name| CString::new(name.as_str()).ok())
            // SAFETY: dlopen with a NUL-terminated name.
            .map(|name| unsafe { dlopen(name.as_ptr(), RTLD_NOW) })
            .find(|h| !h.is_null())
            .ok_or("cannot dlopen the OpenCL ICD loader (libOpenCL.so.1)")?;
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let c = CString::new(name).expect("symbol name");
            // SAFETY: a live dlopen handle and a NUL-terminated symbol name.
            let p = unsafe { dlsym(handle, c.as_ptr()) };
            if p.is_null() {
                Err(format!("{name} not found in the OpenCL ICD loader"))
            } else {
                Ok(p)
            }
        };
        // SAFETY: these are the OpenCL 1.2 C entry points with exactly the
        // signatures declared above (each symbol is transmuted to the type
        // of the field it fills).
        unsafe {
            Ok(Self {
                enqueue_nd_range_kernel: std::mem::transmute::<*mut c_void, EnqueueNdRangeKernel>(
                    sym("clEnqueueNDRangeKernel")?,
                ),
                enqueue_write_buffer: std::mem::transmute::<*mut c_void, EnqueueRwBuffer>(sym(
                    "clEnqueueWriteBuffer",
                )?),
                enqueue_read_buffer: std::mem::transmute::<*mut c_void, EnqueueRwBuffer>(sym(
                    "clEnqueueReadBuffer",
                )?),
                finish: std::mem::transmute::<*mut c_void, Finish>(sym("clFinish")?),
                set_kernel_arg: std::mem::transmute::<*mut c_void, SetKernelArg>(sym(
                    "clSetKernelArg",
                )?),
                enqueue_copy_buffer: std::mem::transmute::<*mut c_void, EnqueueCopyBuffer>(sym(
                    "clEnqueueCopyBuffer",
                )?),
                enqueue_map_buffer: std::mem::transmute::<*mut c_void, EnqueueMapBuffer>(sym(
                    "clEnqueueMapBuffer",
                )?),
                enqueue_unmap_mem_object: std::mem::transmute::<*mut c_void, EnqueueUnmapMemObject>(
                    sym("clEnqueueUnmapMemObject")?,
                ),
                create_buffer: std::mem::transmute::<*mut c_void, CreateBuffer>(sym(
                    "clCreateBuffer",
                )?),
                release_mem_object: std::mem::transmute::<*mut c_void, ReleaseMemObject>(sym(
                    "clReleaseMemObject",
                )?),
                enqueue_marker_with_wait_list: std::mem::transmute::<
                    *mut c_void,
                    EnqueueMarkerWithWaitList,
                >(sym(
                    "clEnqueueMarkerWithWaitList",
                )?),
                wait_for_events: std::mem::transmute::<*mut c_void, WaitForEvents>(sym(
                    "clWaitForEvents",
                )?),
                release_event: std::mem::transmute::<*mut c_void, ReleaseEvent>(sym(
                    "clReleaseEvent",
                )?),
                get_device_info: std::mem::transmute::<*mut c_void, GetDeviceInfo>(sym(
                    "clGetDeviceInfo",
                )?),
                get_mem_object_info: std::mem::transmute::<*mut c_void, GetMemObjectInfo>(sym(
                    "clGetMemObjectInfo",
                )?),
                get_event_info: std::mem::transmute::<*mut c_void, GetEventInfo>(sym(
                    "clGetEventInfo",
                )?),
            })
        }
    }
}

pub fn check(status: cl_int, what: &str) -> Result<(), String> {
    if status == CL_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {status}"))
    }
}
