//! `libmirrorcl.so`: MirrorCL's C ABI. Every OpenCL entry point is exported under its own
//! name (for `LD_PRELOAD` and direct linking) and placed in the ICD dispatch table that
//! every MirrorCL handle starts with (for the ICD loader). Each entry point validates its
//! arguments as the OpenCL 1.2 specification says, converts handles, and calls the
//! runtime; none lets a panic cross into C.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

/// Declares exported C functions. Every arm writes the `#[no_mangle] pub unsafe extern
/// "C" fn` itself and wraps the body, so no entry point can skip the policy: a panic
/// guard around everything, the call counter and platform initialisation first, and the
/// `errcode_ret` write last.
///
/// - `fn f(args) -> cl_int { ClResult<()> }`: the error, or `CL_SUCCESS`.
/// - `fn f(args) -> T, errcode_ret { ClResult<T> }`: appends `errcode_ret: *mut cl_int`;
///   NULL and the error, or the object and `CL_SUCCESS`.
/// - `fn f(args) -> (T, cl_int), errcode_ret { ClResult<(T, cl_int)> }`: the same, for an
///   object returned with a code other than `CL_SUCCESS`.
/// - `fn f(args) -> T = fallback; { T }` and `fn f(args) { }`: pointers and `void`;
///   `fallback` (nothing for `void`) if the body panics.
/// - `info fn f(handles; param_type) => Query;`: a `clGet*Info` function, its last four
///   parameters appended and answered by [`info::get_info`].
///
/// A `lazy` prefix leaves platform initialisation to the body, for entry points that
/// must work before (or without) it; an `interpose` prefix is for the C-library and MPI
/// functions MirrorCL stands in for, which are no OpenCL calls: neither counted nor
/// initialising anything.
///
/// rustfmt does not reach inside a macro call: a body of more than a few lines calls an
/// ordinary function named after the entry point (`clSetKernelArg` → `set_kernel_arg`).
macro_rules! entry {
    ($(#[$m:meta])* lazy $($rest:tt)+) => { entry!(@fn lazy [$(#[$m])*] $($rest)+); };
    ($(#[$m:meta])* interpose $($rest:tt)+) => {
        entry!(@fn interpose [$(#[$m])*] $($rest)+);
    };
    ($(#[$m:meta])* fn $($rest:tt)+) => { entry!(@fn eager [$(#[$m])*] fn $($rest)+); };
    ($(#[$m:meta])* info $($rest:tt)+) => { entry!(@fn eager [$(#[$m])*] info $($rest)+); };

    // OpenCL calls are traced (`MIRRORCL_TRACE`) from entry to return.
    (@prologue eager $name:ident) => {
        || ($crate::ApiSpan::begin(stringify!($name)), $crate::opencl_call(stringify!($name)))
    };
    (@prologue lazy $name:ident) => {
        || ($crate::ApiSpan::begin(stringify!($name)), $crate::opencl_call_lazy())
    };
    (@prologue interpose $name:ident) => { $crate::interposed_call };

    (@fn $mode:ident [$($attr:tt)*]
        fn $name:ident($($a:ident: $t:ty),* $(,)?) -> cl_int { $($body:tt)* }) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $crate::cl_int {
            $crate::run_status(entry!(@prologue $mode $name), || -> $crate::ClResult<()> {
                $($body)*
            })
        }
    };
    (@fn $mode:ident [$($attr:tt)*]
        fn $name:ident($($a:ident: $t:ty),* $(,)?) -> ($ret:ty, cl_int), errcode_ret
        { $($body:tt)* }) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t,)* errcode_ret: *mut $crate::cl_int) -> $ret {
            $crate::run_object_with_code(
                entry!(@prologue $mode $name),
                errcode_ret,
                || -> $crate::ClResult<($ret, $crate::cl_int)> { $($body)* },
            )
        }
    };
    (@fn $mode:ident [$($attr:tt)*]
        fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $ret:ty, errcode_ret { $($body:tt)* }) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t,)* errcode_ret: *mut $crate::cl_int) -> $ret {
            $crate::run_object(
                entry!(@prologue $mode $name),
                errcode_ret,
                || -> $crate::ClResult<$ret> { $($body)* },
            )
        }
    };
    (@fn $mode:ident [$($attr:tt)*]
        fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $ret:ty = $fallback:expr;
        { $($body:tt)* }) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $ret {
            $crate::run_value(entry!(@prologue $mode $name), $fallback, || -> $ret { $($body)* })
        }
    };
    (@fn $mode:ident [$($attr:tt)*]
        fn $name:ident($($a:ident: $t:ty),* $(,)?) { $($body:tt)* }) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) {
            $crate::run_value(entry!(@prologue $mode $name), (), || { $($body)* })
        }
    };
    (@fn $mode:ident [$($attr:tt)*]
        info fn $name:ident($($a:ident: $t:ty),+ ; $param:ty) => $query:ty;) => {
        entry!(@fn $mode [$($attr)*]
            fn $name(
                $($a: $t,)+
                param_name: $param,
                param_value_size: usize,
                param_value: *mut std::ffi::c_void,
                param_value_size_ret: *mut usize,
            ) -> cl_int {
                $crate::info::get_info::<$query>(
                    ($($a,)+),
                    param_name,
                    param_value_size,
                    param_value,
                    param_value_size_ret,
                )
            });
    };
}

mod api;
mod info;
mod replica;

mod allocator;

use mirrorcl_runtime::cl::cl_icd::_cl_icd_dispatch;
pub(crate) use mirrorcl_runtime::cl::{cl_int, CL_OUT_OF_HOST_MEMORY, CL_SUCCESS};
use mirrorcl_runtime::cluster::replica::Inside;
pub(crate) use mirrorcl_runtime::observe::trace::ApiSpan;
pub(crate) use mirrorcl_runtime::ClResult;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Marks this library so that vendor discovery skips it when it is also listed as an
/// ICD (the name is `mirrorcl_runtime::objects::platform::OWN_MARKER`).
#[no_mangle]
pub static mirrorcl_icd_marker: u32 = 0x4d434c;

/// The one panic guard of every exported function: `on_panic` instead of unwinding into
/// C.
#[inline]
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// The prologue of an OpenCL entry point: counted, inside MirrorCL until the returned
/// guard drops (what vendors do meanwhile is not the application's), the platform
/// initialised, and, for the application's own calls, its host threads taking turns
/// (`mirrorcl_runtime::cluster::host_threads`).
#[inline]
pub(crate) fn opencl_call(name: &'static str) -> Inside {
    count_call();
    let (inside, nested) = Inside::enter_nested();
    platform();
    if !nested {
        mirrorcl_runtime::cluster::host_threads::check(name);
    }
    inside
}

/// The prologue of a `lazy` OpenCL entry point: counted and inside MirrorCL only.
#[inline]
pub(crate) fn opencl_call_lazy() -> Inside {
    count_call();
    Inside::enter()
}

/// The prologue of an interposed C-library or MPI function: nothing.
#[inline]
pub(crate) fn interposed_call() {}

/// An entry point returning `cl_int`: the error, or `CL_SUCCESS`; a panic is
/// `CL_OUT_OF_HOST_MEMORY`, the closest code the specification has for an internal failure.
#[inline]
pub(crate) fn run_status<G>(
    prologue: impl FnOnce() -> G,
    body: impl FnOnce() -> ClResult<()>,
) -> cl_int {
    guard(CL_OUT_OF_HOST_MEMORY, || {
        let _prologue = prologue();
        match body() {
            Ok(()) => CL_SUCCESS,
            Err(e) => e,
        }
    })
}

/// An entry point creating an object: the object and `CL_SUCCESS` through `errcode_ret`,
/// or NULL and the error.
#[inline]
pub(crate) fn run_object<T, G>(
    prologue: impl FnOnce() -> G,
    errcode_ret: *mut cl_int,
    body: impl FnOnce() -> ClResult<*mut T>,
) -> *mut T {
    run_object_with_code(prologue, errcode_ret, || body().map(|p| (p, CL_SUCCESS)))
}

/// [`run_object`] for an object returned with a code of its own.
#[inline]
pub(crate) fn run_object_with_code<T, G>(
    prologue: impl FnOnce() -> G,
    errcode_ret: *mut cl_int,
    body: impl FnOnce() -> ClResult<(*mut T, cl_int)>,
) -> *mut T {
    let (object, code) = guard((std::ptr::null_mut(), CL_OUT_OF_HOST_MEMORY), || {
        let _prologue = prologue();
        body().unwrap_or_else(|e| (std::ptr::null_mut(), e))
    });
    if !errcode_ret.is_null() {
        // SAFETY: the application passed a valid out-pointer or NULL.
        unsafe { *errcode_ret = code };
    }
    object
}

/// An entry point returning a pointer or nothing: `on_panic` if the body panics.
#[inline]
pub(crate) fn run_value<R, G>(
    prologue: impl FnOnce() -> G,
    on_panic: R,
    body: impl FnOnce() -> R,
) -> R {
    guard(on_panic, || {
        let _prologue = prologue();
        body()
    })
}

#[inline]
fn count_call() {
    use mirrorcl_runtime::observe::stats::{add, COUNTERS};
    add(&COUNTERS.api_calls, 1);
}

/// Initialises the platform on the first call; every entry point but the `lazy` ones
/// calls it first.
pub(crate) fn platform() -> &'static mirrorcl_runtime::objects::platform::Platform {
    mirrorcl_runtime::objects::handle::set_dispatch(
        &DISPATCH as *const _cl_icd_dispatch as *const c_void,
    );
    mirrorcl_runtime::objects::platform::platform()
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

#[cfg(test)]
mod tests {
    /// Every exported function is declared through `entry!`: `#[no_mangle]` is written
    /// only in the macro and on the ICD marker.
    #[test]
    fn no_mangle_only_through_entry() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src];
        let mut found = Vec::new();
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).expect("source directory") {
                let path = e.expect("directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&path).expect("source file");
                    let n = text.lines().filter(|l| l.trim() == "#[no_mangle]").count();
                    if n > 0 {
                        found.push((path.file_name().unwrap().to_owned(), n));
                    }
                }
            }
        }
        // Five arms of the macro (the `info` arm delegates) and the marker.
        assert_eq!(found, vec![("lib.rs".into(), 6)], "{found:?}");
    }
}
