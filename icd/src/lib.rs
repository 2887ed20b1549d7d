//! `libmirrorcl.so`: MirrorCL's C ABI. Every OpenCL entry point is exported under its own
//! name (for `LD_PRELOAD` and direct linking) and placed in the ICD dispatch table that
//! every MirrorCL handle starts with (for the ICD loader). Each entry point validates its
//! arguments as the OpenCL 1.2 specification says, converts handles, and calls the
//! runtime; none lets a panic cross into C.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

mod api;
mod info;
mod replica;

use mirrorcl_runtime::cl::cl_icd::_cl_icd_dispatch;
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::ClResult;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Marks this library so that vendor discovery skips it when it is also listed as an
/// ICD (the name is `mirrorcl_runtime::platform::OWN_MARKER`).
#[no_mangle]
pub static mirrorcl_icd_marker: u32 = 0x4d434c;

/// Runs an entry point: a panic becomes `CL_OUT_OF_HOST_MEMORY` (the closest code the
/// specification has for an internal failure) instead of unwinding into C.
pub(crate) fn entry(f: impl FnOnce() -> ClResult<()>) -> cl_int {
    count_call();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CL_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => CL_OUT_OF_HOST_MEMORY,
    }
}

/// Runs an entry point that returns an object and reports through `errcode_ret`.
pub(crate) fn entry_obj<T>(
    errcode_ret: *mut cl_int,
    f: impl FnOnce() -> ClResult<*mut T>,
) -> *mut T {
    count_call();
    let (ptr, code) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(p)) => (p, CL_SUCCESS),
        Ok(Err(e)) => (std::ptr::null_mut(), e),
        Err(_) => (std::ptr::null_mut(), CL_OUT_OF_HOST_MEMORY),
    };
    if !errcode_ret.is_null() {
        // SAFETY: the application passed a valid out-pointer or NULL.
        unsafe { *errcode_ret = code };
    }
    ptr
}

#[inline]
fn count_call() {
    use mirrorcl_runtime::stats::{add, COUNTERS};
    add(&COUNTERS.api_calls, 1);
}

/// Initialises the platform on the first call; every entry point calls it.
pub(crate) fn platform() -> &'static mirrorcl_runtime::platform::Platform {
    mirrorcl_runtime::object::set_dispatch(&DISPATCH as *const _cl_icd_dispatch as *const c_void);
    mirrorcl_runtime::platform::platform()
}

macro_rules! entry_points {
    ($($name:ident),* $(,)?) => {
        /// The ICD dispatch table, in `cl_icd.h` order (the struct fixes it); entries
        /// left NULL are interop extensions MirrorCL does not offer.
        pub static DISPATCH: _cl_icd_dispatch = {
            // SAFETY: the table is a struct of nullable function pointers.
            let mut d: _cl_icd_dispatch = unsafe { std::mem::zeroed() };
            $( d.$name = Some(api::$name); )*
            d
        };

        /// An entry point by name (`clGetExtensionFunctionAddress*`).
        pub(crate) fn lookup(name: &[u8]) -> *mut c_void {
            $( if name == stringify!($name).as_bytes() { return api::$name as *mut c_void; } )*
            if name == b"clIcdGetPlatformIDsKHR" {
                return api::clIcdGetPlatformIDsKHR as *mut c_void;
            }
            // MirrorCL's extension (cl_mirrorcl_attach_buffer), also under the
            // platform's ICD suffix.
            if name == b"clAttachBufferToDevice" || name == b"clAttachBufferToDeviceMCL" {
                return api::clAttachBufferToDevice as *mut c_void;
            }
            std::ptr::null_mut()
        }
    };
}

entry_points! {
    clGetPlatformIDs, clGetPlatformInfo, clGetDeviceIDs, clGetDeviceInfo,
    clCreateSubDevices, clRetainDevice, clReleaseDevice,
    clCreateContext, clCreateContextFromType, clRetainContext, clReleaseContext, clGetContextInfo,
    clCreateCommandQueue, clCreateCommandQueueWithProperties, clRetainCommandQueue,
    clReleaseCommandQueue, clGetCommandQueueInfo, clSetCommandQueueProperty,
    clCreateBuffer, clCreateSubBuffer, clRetainMemObject, clReleaseMemObject,
    clGetMemObjectInfo, clSetMemObjectDestructorCallback, clCreateBufferWithProperties,
    clCreateImage, clCreateImage2D, clCreateImage3D, clCreateImageWithProperties,
    clGetSupportedImageFormats, clGetImageInfo,
    clCreateSampler, clCreateSamplerWithProperties, clRetainSampler, clReleaseSampler, clGetSamplerInfo,
    clCreateProgramWithSource, clCreateProgramWithBinary, clCreateProgramWithBuiltInKernels,
    clCreateProgramWithIL, clRetainProgram, clReleaseProgram, clBuildProgram, clCompileProgram,
    clLinkProgram, clUnloadCompiler, clUnloadPlatformCompiler, clGetProgramInfo, clGetProgramBuildInfo,
    clCreateKernel, clCreateKernelsInProgram, clRetainKernel, clReleaseKernel, clSetKernelArg,
    clGetKernelInfo, clGetKernelArgInfo, clGetKernelWorkGroupInfo,
    clWaitForEvents, clGetEventInfo, clCreateUserEvent, clRetainEvent, clReleaseEvent,
    clSetUserEventStatus, clSetEventCallback, clGetEventProfilingInfo, clFlush, clFinish,
    clEnqueueReadBuffer, clEnqueueReadBufferRect, clEnqueueWriteBuffer, clEnqueueWriteBufferRect,
    clEnqueueFillBuffer, clEnqueueCopyBuffer, clEnqueueCopyBufferRect, clEnqueueMapBuffer,
    clEnqueueUnmapMemObject, clEnqueueMigrateMemObjects, clEnqueueNDRangeKernel, clEnqueueTask,
    clEnqueueNativeKernel, clEnqueueMarkerWithWaitList, clEnqueueBarrierWithWaitList,
    clEnqueueMarker, clEnqueueWaitForEvents, clEnqueueBarrier,
    clEnqueueReadImage, clEnqueueWriteImage, clEnqueueFillImage, clEnqueueCopyImage,
    clEnqueueCopyImageToBuffer, clEnqueueCopyBufferToImage, clEnqueueMapImage,
    clGetExtensionFunctionAddress, clGetExtensionFunctionAddressForPlatform,
    clCreatePipe, clGetPipeInfo, clSVMAlloc, clSVMFree, clEnqueueSVMFree, clEnqueueSVMMemcpy,
    clEnqueueSVMMemFill, clEnqueueSVMMap, clEnqueueSVMUnmap, clSetKernelArgSVMPointer,
    clSetKernelExecInfo, clCloneKernel, clEnqueueSVMMigrateMem, clGetDeviceAndHostTimer,
    clGetHostTimer, clGetKernelSubGroupInfo, clSetDefaultDeviceCommandQueue,
    clSetProgramReleaseCallback, clSetProgramSpecializationConstant, clSetContextDestructorCallback,
}

/// Reads a C string argument.
pub(crate) fn c_str<'a>(p: *const libc::c_char) -> Option<&'a CStr> {
    // SAFETY: the application passes a NUL-terminated string or NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}
