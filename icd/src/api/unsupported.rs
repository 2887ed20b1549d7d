//! Entry points for what MirrorCL's devices report they lack: images and samplers
//! (`CL_DEVICE_IMAGE_SUPPORT` is `CL_FALSE`), native kernels (no `CL_EXEC_NATIVE_KERNEL`),
//! and OpenCL 2.x features of a 1.2 platform. Each validates what it can and returns the
//! error the specification names for a device without the feature.

use crate::info::{wait_list, Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::context::Context;
use mirrorcl_runtime::kernel::Kernel;
use mirrorcl_runtime::memory::Buffer;
use mirrorcl_runtime::object::Handle;
use mirrorcl_runtime::program::Program;
use mirrorcl_runtime::queue::Queue;
use mirrorcl_runtime::ClResult;
use std::convert::Infallible;
use std::ffi::c_void;

/// CL_INVALID_OPERATION: no device in the context supports images.
fn no_images(context: cl_context) -> ClResult<*mut c_void> {
    Context::from_handle(context)?;
    Err(CL_INVALID_OPERATION)
}

entry! {
    fn clCreateImage(
        context: cl_context,
        _flags: cl_mem_flags,
        _image_format: *const cl_image_format,
        _image_desc: *const cl_image_desc,
        _host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        no_images(context)
    }
}

entry! {
    fn clCreateImageWithProperties(
        context: cl_context,
        _properties: *const cl_mem_properties,
        _flags: cl_mem_flags,
        _image_format: *const cl_image_format,
        _image_desc: *const cl_image_desc,
        _host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        no_images(context)
    }
}

entry! {
    fn clCreateImage2D(
        context: cl_context,
        _flags: cl_mem_flags,
        _image_format: *const cl_image_format,
        _width: usize,
        _height: usize,
        _row_pitch: usize,
        _host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        no_images(context)
    }
}

entry! {
    fn clCreateImage3D(
        context: cl_context,
        _flags: cl_mem_flags,
        _image_format: *const cl_image_format,
        _width: usize,
        _height: usize,
        _depth: usize,
        _row_pitch: usize,
        _slice_pitch: usize,
        _host_ptr: *mut c_void,
    ) -> cl_mem, errcode_ret {
        no_images(context)
    }
}

entry! {
    fn clGetSupportedImageFormats(
        context: cl_context,
        _flags: cl_mem_flags,
        _image_type: cl_mem_object_type,
        num_entries: cl_uint,
        image_formats: *mut cl_image_format,
        num_image_formats: *mut cl_uint,
    ) -> cl_int {
        Context::from_handle(context)?;
        if num_entries == 0 && !image_formats.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        // No device supports images: the list is empty.
        if !num_image_formats.is_null() {
            // SAFETY: valid out-pointer.
            unsafe { *num_image_formats = 0 };
        }
        Ok(())
    }
}

/// Image queries and image commands: no memory object is an image.
fn not_an_image(memobj: cl_mem) -> ClResult<Infallible> {
    Buffer::from_handle(memobj)?;
    Err(CL_INVALID_MEM_OBJECT)
}

/// `clGetImageInfo` and `clGetPipeInfo`: no memory object is an image or a pipe.
pub(crate) struct ImageInfo;

impl InfoQuery for ImageInfo {
    type Handles = (cl_mem,);
    type Object = Infallible;
    #[inline]
    fn object((memobj,): (cl_mem,)) -> ClResult<Infallible> {
        not_an_image(memobj)
    }
    #[inline]
    fn answer(object: &Infallible, _: cl_uint) -> ClResult<Info> {
        match *object {}
    }
}

entry! {
    info fn clGetImageInfo(image: cl_mem; cl_image_info) => ImageInfo;
}

entry! {
    info fn clGetPipeInfo(pipe: cl_mem; cl_pipe_info) => ImageInfo;
}

/// An image command: the queue and wait list are checked first, then the image.
fn image_command(
    queue: cl_command_queue,
    image: cl_mem,
    n: cl_uint,
    list: *const cl_event,
) -> ClResult<()> {
    let q = Queue::from_handle(queue)?;
    wait_list(n, list, Some(&q.context))?;
    match not_an_image(image)? {}
}

entry! {
    fn clEnqueueReadImage(
        queue: cl_command_queue,
        image: cl_mem,
        _blocking: cl_bool,
        _origin: *const usize,
        _region: *const usize,
        _row_pitch: usize,
        _slice_pitch: usize,
        _ptr: *mut c_void,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, image, n, list)
    }
}

entry! {
    fn clEnqueueWriteImage(
        queue: cl_command_queue,
        image: cl_mem,
        _blocking: cl_bool,
        _origin: *const usize,
        _region: *const usize,
        _row_pitch: usize,
        _slice_pitch: usize,
        _ptr: *const c_void,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, image, n, list)
    }
}

entry! {
    fn clEnqueueFillImage(
        queue: cl_command_queue,
        image: cl_mem,
        _fill_color: *const c_void,
        _origin: *const usize,
        _region: *const usize,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, image, n, list)
    }
}

entry! {
    fn clEnqueueCopyImage(
        queue: cl_command_queue,
        src_image: cl_mem,
        _dst_image: cl_mem,
        _src_origin: *const usize,
        _dst_origin: *const usize,
        _region: *const usize,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, src_image, n, list)
    }
}

entry! {
    fn clEnqueueCopyImageToBuffer(
        queue: cl_command_queue,
        src_image: cl_mem,
        _dst_buffer: cl_mem,
        _src_origin: *const usize,
        _region: *const usize,
        _dst_offset: usize,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, src_image, n, list)
    }
}

entry! {
    fn clEnqueueCopyBufferToImage(
        queue: cl_command_queue,
        _src_buffer: cl_mem,
        dst_image: cl_mem,
        _src_offset: usize,
        _dst_origin: *const usize,
        _region: *const usize,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> cl_int {
        image_command(queue, dst_image, n, list)
    }
}

entry! {
    fn clEnqueueMapImage(
        queue: cl_command_queue,
        image: cl_mem,
        _blocking_map: cl_bool,
        _map_flags: cl_map_flags,
        _origin: *const usize,
        _region: *const usize,
        _image_row_pitch: *mut usize,
        _image_slice_pitch: *mut usize,
        n: cl_uint,
        list: *const cl_event,
        _event: *mut cl_event,
    ) -> *mut c_void, errcode_ret {
        image_command(queue, image, n, list).map(|_| std::ptr::null_mut())
    }
}

entry! {
    fn clCreateSampler(
        context: cl_context,
        _normalized_coords: cl_bool,
        _addressing_mode: cl_addressing_mode,
        _filter_mode: cl_filter_mode,
    ) -> cl_sampler, errcode_ret {
        no_images(context)
    }
}

entry! {
    fn clCreateSamplerWithProperties(
        context: cl_context,
        _properties: *const cl_sampler_properties,
    ) -> cl_sampler, errcode_ret {
        no_images(context)
    }
}

/// No sampler can exist, so every sampler handle is invalid (no platform needed to know).
pub(crate) struct SamplerInfo;

impl InfoQuery for SamplerInfo {
    type Handles = (cl_sampler,);
    type Object = Infallible;
    #[inline]
    fn object(_: (cl_sampler,)) -> ClResult<Infallible> {
        Err(CL_INVALID_SAMPLER)
    }
    #[inline]
    fn answer(object: &Infallible, _: cl_uint) -> ClResult<Info> {
        match *object {}
    }
}

entry! {
    /// No sampler can exist, so every sampler handle is invalid.
    lazy fn clRetainSampler(_sampler: cl_sampler) -> cl_int {
        Err(CL_INVALID_SAMPLER)
    }
}

entry! {
    lazy fn clReleaseSampler(_sampler: cl_sampler) -> cl_int {
        Err(CL_INVALID_SAMPLER)
    }
}

entry! {
    lazy info fn clGetSamplerInfo(sampler: cl_sampler; cl_sampler_info) => SamplerInfo;
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
        no_images(context)
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
        no_images(context)
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
        no_images(context).map(|_| ())
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
