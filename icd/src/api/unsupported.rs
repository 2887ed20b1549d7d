//! Entry points for what MirrorCL's devices report they lack: native kernels (no
//! `CL_EXEC_NATIVE_KERNEL`), pipes, and OpenCL 2.x features of a 1.2 platform. Each validates what it can and returns the
//! error the specification names for a device without the feature.

use crate::info::{Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::context::Context;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::kernel::Kernel;
use mirrorcl_runtime::objects::memory::Buffer;
use mirrorcl_runtime::objects::program::Program;
use mirrorcl_runtime::objects::queue::Queue;
use mirrorcl_runtime::ClResult;
use std::convert::Infallible;
use std::ffi::c_void;

/// CL_INVALID_OPERATION: no device in the context supports the feature.
fn unsupported_in(context: cl_context) -> ClResult<*mut c_void> {
    Context::from_handle(context)?;
    Err(CL_INVALID_OPERATION)
}

/// `clGetPipeInfo`: no memory object is a pipe.
pub(crate) struct PipeInfo;

impl InfoQuery for PipeInfo {
    type Handles = (cl_mem,);
    type Object = Infallible;
    #[inline]
    fn object((memobj,): (cl_mem,)) -> ClResult<Infallible> {
        Buffer::from_handle(memobj)?;
        Err(CL_INVALID_MEM_OBJECT)
    }
    #[inline]
    fn answer(object: &Infallible, _: cl_uint) -> ClResult<Info> {
        match *object {}
    }
}

entry! {
    info fn clGetPipeInfo(pipe: cl_mem; cl_pipe_info) => PipeInfo;
}

entry! {
    fn clEnqueueNativeKernel(
        queue: cl_command_queue,
        _user_func: Option<unsafe extern "C" fn(*mut c_void)>,
        _args: *mut c_void,
        _cb_args: usize,
        _num_mem_objects: cl_uint,
        _mem_list: *const cl_mem,
        _args_mem_loc: *mut *const c_void,
        _n: cl_uint,
        _list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        Queue::from_handle(queue)?;
        // CL_INVALID_OPERATION if the device cannot execute the native kernel.
        Err(CL_INVALID_OPERATION)
    }
}

entry! {
    fn clCreateProgramWithIL(
        context: cl_context,
        _il: *const c_void,
        _length: usize,
    ) -> cl_program, errcode_ret {
        // CL_INVALID_OPERATION if no devices in context support intermediate language
        // programs.
        unsupported_in(context)
    }
}

entry! {
    fn clCreateProgramWithBuiltInKernels(
        context: cl_context,
        _num_devices: cl_uint,
        _device_list: *const cl_device_id,
        _kernel_names: *const libc::c_char,
    ) -> cl_program, errcode_ret {
        Context::from_handle(context)?;
        // CL_INVALID_VALUE if a kernel name is not supported by any device: devices
        // report no built-in kernels.
        Err(CL_INVALID_VALUE)
    }
}

entry! {
    fn clCreatePipe(
        context: cl_context,
        _flags: cl_mem_flags,
        _packet_size: cl_uint,
        _max_packets: cl_uint,
        _properties: *const cl_pipe_properties,
    ) -> cl_mem, errcode_ret {
        unsupported_in(context)
    }
}

entry! {
    /// No device supports shared virtual memory.
    lazy fn clSVMAlloc(
        _context: cl_context,
        _flags: cl_svm_mem_flags,
        _size: usize,
        _alignment: cl_uint,
    ) -> *mut c_void = std::ptr::null_mut(); {
        std::ptr::null_mut()
    }
}

entry! {
    lazy fn clSVMFree(_context: cl_context, _svm_pointer: *mut c_void) {}
}

/// An SVM command: the queue is checked, then the feature is missing.
fn svm_command(queue: cl_command_queue) -> ClResult<()> {
    Queue::from_handle(queue)?;
    Err(CL_INVALID_OPERATION)
}

entry! {
    fn clEnqueueSVMFree(
        queue: cl_command_queue,
        _n: cl_uint,
        _ptrs: *mut *mut c_void,
        _f: Option<unsafe extern "C" fn(cl_command_queue, cl_uint, *mut *mut c_void, *mut c_void)>,
        _d: *mut c_void,
        _ne: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

entry! {
    fn clEnqueueSVMMemcpy(
        queue: cl_command_queue,
        _b: cl_bool,
        _dst: *mut c_void,
        _src: *const c_void,
        _size: usize,
        _n: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

entry! {
    fn clEnqueueSVMMemFill(
        queue: cl_command_queue,
        _p: *mut c_void,
        _pat: *const c_void,
        _ps: usize,
        _size: usize,
        _n: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

entry! {
    fn clEnqueueSVMMap(
        queue: cl_command_queue,
        _b: cl_bool,
        _f: cl_map_flags,
        _p: *mut c_void,
        _size: usize,
        _n: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

entry! {
    fn clEnqueueSVMUnmap(
        queue: cl_command_queue,
        _p: *mut c_void,
        _n: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

entry! {
    fn clEnqueueSVMMigrateMem(
        queue: cl_command_queue,
        _n: cl_uint,
        _p: *mut *const c_void,
        _s: *const usize,
        _f: cl_mem_migration_flags,
        _ne: cl_uint,
        _l: *const cl_event,
        _e: *mut cl_event,
    ) -> cl_int {
        svm_command(queue)
    }
}

/// An OpenCL 2.x kernel feature: the kernel is checked, then the feature is missing.
fn kernel_feature(kernel: cl_kernel) -> ClResult<()> {
    Kernel::from_handle(kernel)?;
    Err(CL_INVALID_OPERATION)
}

entry! {
    fn clSetKernelArgSVMPointer(kernel: cl_kernel, _i: cl_uint, _v: *const c_void) -> cl_int {
        kernel_feature(kernel)
    }
}

entry! {
    fn clSetKernelExecInfo(
        kernel: cl_kernel,
        _p: cl_kernel_exec_info,
        _s: usize,
        _v: *const c_void,
    ) -> cl_int {
        kernel_feature(kernel)
    }
}

entry! {
    fn clCloneKernel(source_kernel: cl_kernel) -> cl_kernel, errcode_ret {
        Kernel::from_handle(source_kernel)?;
        Err(CL_INVALID_OPERATION)
    }
}

entry! {
    fn clGetKernelSubGroupInfo(
        kernel: cl_kernel,
        _d: cl_device_id,
        _p: cl_kernel_sub_group_info,
        _is: usize,
        _iv: *const c_void,
        _s: usize,
        _v: *mut c_void,
        _r: *mut usize,
    ) -> cl_int {
        kernel_feature(kernel)
    }
}

entry! {
    fn clSetDefaultDeviceCommandQueue(
        context: cl_context,
        _device: cl_device_id,
        _queue: cl_command_queue,
    ) -> cl_int {
        unsupported_in(context).map(|_| ())
    }
}

entry! {
    fn clSetProgramSpecializationConstant(
        program: cl_program,
        _id: cl_uint,
        _s: usize,
        _v: *const c_void,
    ) -> cl_int {
        Program::from_handle(program)?;
        Err(CL_INVALID_PROGRAM)
    }
}
