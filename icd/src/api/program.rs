//! Program and kernel entry points.

use crate::api::platform::device_list;
use crate::c_str;
use crate::info::{array, Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::context::Context;
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::kernel::{ArgValue, Kernel};
use mirrorcl_runtime::objects::memory::Buffer;
use mirrorcl_runtime::objects::program::Program;
use mirrorcl_runtime::objects::sampler::Sampler;
use mirrorcl_runtime::ClResult;
use std::ffi::{c_void, CString};
use std::sync::Arc;

type BuildNotify = Option<unsafe extern "C" fn(cl_program, *mut c_void)>;

entry! {
    fn clCreateProgramWithSource(
        context: cl_context,
        count: cl_uint,
        strings: *mut *const libc::c_char,
        lengths: *const usize,
    ) -> cl_program, errcode_ret {
        create_program_with_source(context, count, strings, lengths)
    }
}

fn create_program_with_source(
    context: cl_context,
    count: cl_uint,
    strings: *mut *const libc::c_char,
    lengths: *const usize,
) -> ClResult<cl_program> {
    let ctx = Context::from_handle(context)?;
    // CL_INVALID_VALUE if count is zero or strings or any entry in strings is NULL.
    if count == 0 || strings.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let mut source = Vec::new();
    for i in 0..count as usize {
        // SAFETY: `count` string pointers.
        let s = unsafe { *strings.add(i) };
        if s.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        let len = if lengths.is_null() {
            0
        } else {
            // SAFETY: `lengths` has `count` entries when not NULL.
            unsafe { *lengths.add(i) }
        };
        if len == 0 {
            source.extend_from_slice(c_str(s).expect("checked non-NULL").to_bytes());
        } else {
            // SAFETY: the application gives `len` readable bytes.
            source.extend_from_slice(unsafe { std::slice::from_raw_parts(s as *const u8, len) });
        }
    }
    let text = String::from_utf8_lossy(&source).into_owned();
    Ok(Program::into_handle(Program::with_source(ctx, text)?))
}

entry! {
    fn clCreateProgramWithBinary(
        context: cl_context,
        num_devices: cl_uint,
        device_list_ptr: *const cl_device_id,
        lengths: *const usize,
        binaries: *mut *const u8,
        binary_status: *mut cl_int,
    ) -> cl_program, errcode_ret {
        create_program_with_binary(
            context,
            num_devices,
            device_list_ptr,
            lengths,
            binaries,
            binary_status,
        )
    }
}

fn create_program_with_binary(
    context: cl_context,
    num_devices: cl_uint,
    device_list_ptr: *const cl_device_id,
    lengths: *const usize,
    binaries: *mut *const u8,
    binary_status: *mut cl_int,
) -> ClResult<cl_program> {
    let ctx = Context::from_handle(context)?;
    if device_list_ptr.is_null() || num_devices == 0 {
        return Err(CL_INVALID_VALUE);
    }
    let devices = device_list(num_devices, device_list_ptr)?;
    if devices.iter().any(|d| !ctx.has_device(d)) {
        return Err(CL_INVALID_DEVICE);
    }
    if lengths.is_null() || binaries.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let n = num_devices as usize;
    let mut status = vec![CL_SUCCESS; n];
    let mut bins: Vec<&[u8]> = Vec::with_capacity(n);
    for (i, st) in status.iter_mut().enumerate() {
        // SAFETY: `n` entries each.
        let (len, ptr) = unsafe { (*lengths.add(i), *binaries.add(i)) };
        if len == 0 || ptr.is_null() {
            *st = CL_INVALID_VALUE;
        }
        bins.push(if len == 0 || ptr.is_null() {
            &[]
        } else {
            // SAFETY: `len` readable bytes.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        });
    }
    let write_status = |status: &[cl_int]| {
        if !binary_status.is_null() {
            for (i, s) in status.iter().enumerate() {
                // SAFETY: `n` writable entries.
                unsafe { *binary_status.add(i) = *s };
            }
        }
    };
    if status.iter().any(|&s| s != CL_SUCCESS) {
        write_status(&status);
        return Err(CL_INVALID_VALUE);
    }
    let result = Program::with_binaries(ctx, devices, &bins, &mut status);
    for s in status.iter_mut() {
        if *s != CL_SUCCESS {
            *s = CL_INVALID_BINARY;
        }
    }
    write_status(&status);
    match result {
        Ok(p) => Ok(Program::into_handle(p)),
        Err(CL_INVALID_VALUE) | Err(CL_INVALID_BINARY) => Err(CL_INVALID_BINARY),
        Err(e) => Err(e),
    }
}

entry! {
    fn clRetainProgram(program: cl_program) -> cl_int {
        Program::retain_handle(program)
    }
}

entry! {
    fn clReleaseProgram(program: cl_program) -> cl_int {
        Program::release_handle(program).map(|_| ())
    }
}

/// The device list of a build-like call, checked against the program's devices.
fn program_devices(
    program: &Program,
    n: cl_uint,
    list: *const cl_device_id,
) -> ClResult<Vec<Arc<Device>>> {
    if (list.is_null() && n > 0) || (!list.is_null() && n == 0) {
        return Err(CL_INVALID_VALUE);
    }
    let devices = device_list(n, list)?;
    if devices
        .iter()
        .any(|d| !program.devices.iter().any(|p| p.index == d.index))
    {
        return Err(CL_INVALID_DEVICE);
    }
    Ok(devices)
}

fn options_text(options: *const libc::c_char) -> String {
    c_str(options)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

entry! {
    fn clBuildProgram(
        program: cl_program,
        num_devices: cl_uint,
        device_list_ptr: *const cl_device_id,
        options: *const libc::c_char,
        pfn_notify: BuildNotify,
        user_data: *mut c_void,
    ) -> cl_int {
        let p = Program::from_handle(program)?;
        let devices = program_devices(&p, num_devices, device_list_ptr)?;
        if pfn_notify.is_none() && !user_data.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        // CL_INVALID_OPERATION if there are kernel objects attached to program.
        if p.kernel_count() > 0 {
            return Err(CL_INVALID_OPERATION);
        }
        let result = p.build(&devices, &options_text(options));
        if let Some(f) = pfn_notify {
            // SAFETY: the application's callback, called once the build is done.
            unsafe { f(program, user_data) };
        }
        result
    }
}

entry! {
    fn clCompileProgram(
        program: cl_program,
        num_devices: cl_uint,
        device_list_ptr: *const cl_device_id,
        options: *const libc::c_char,
        num_input_headers: cl_uint,
        input_headers: *const cl_program,
        header_include_names: *mut *const libc::c_char,
        pfn_notify: BuildNotify,
        user_data: *mut c_void,
    ) -> cl_int {
        compile_program(
            program,
            num_devices,
            device_list_ptr,
            options,
            num_input_headers,
            input_headers,
            header_include_names,
            pfn_notify,
            user_data,
        )
    }
}

fn compile_program(
    program: cl_program,
    num_devices: cl_uint,
    device_list_ptr: *const cl_device_id,
    options: *const libc::c_char,
    num_input_headers: cl_uint,
    input_headers: *const cl_program,
    header_include_names: *mut *const libc::c_char,
    pfn_notify: BuildNotify,
    user_data: *mut c_void,
) -> ClResult<()> {
    let p = Program::from_handle(program)?;
    let devices = program_devices(&p, num_devices, device_list_ptr)?;
    if pfn_notify.is_none() && !user_data.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    if (num_input_headers == 0 && (!input_headers.is_null() || !header_include_names.is_null()))
        || (num_input_headers > 0 && (input_headers.is_null() || header_include_names.is_null()))
    {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_OPERATION if program has no source.
    if p.source.is_none() {
        return Err(CL_INVALID_OPERATION);
    }
    if p.kernel_count() > 0 {
        return Err(CL_INVALID_OPERATION);
    }
    let mut headers = Vec::new();
    for i in 0..num_input_headers as usize {
        // SAFETY: `num_input_headers` entries each.
        let (h, name) = unsafe { (*input_headers.add(i), *header_include_names.add(i)) };
        let hp = Program::from_handle(h)?;
        let name = c_str(name).ok_or(CL_INVALID_VALUE)?;
        headers.push((hp, CString::from(name)));
    }
    let result = p.compile(&devices, &options_text(options), &headers);
    if let Some(f) = pfn_notify {
        // SAFETY: the application's callback.
        unsafe { f(program, user_data) };
    }
    result
}

entry! {
    /// A failed link still returns the program, so that its log can be read, with
    /// CL_LINK_PROGRAM_FAILURE.
    fn clLinkProgram(
        context: cl_context,
        num_devices: cl_uint,
        device_list_ptr: *const cl_device_id,
        options: *const libc::c_char,
        num_input_programs: cl_uint,
        input_programs: *const cl_program,
        pfn_notify: BuildNotify,
        user_data: *mut c_void,
    ) -> (cl_program, cl_int), errcode_ret {
        let ctx = Context::from_handle(context)?;
        if (device_list_ptr.is_null() && num_devices > 0)
            || (!device_list_ptr.is_null() && num_devices == 0)
        {
            return Err(CL_INVALID_VALUE);
        }
        let devices = device_list(num_devices, device_list_ptr)?;
        if devices.iter().any(|d| !ctx.has_device(d)) {
            return Err(CL_INVALID_DEVICE);
        }
        if num_input_programs == 0 || input_programs.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        if pfn_notify.is_none() && !user_data.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        let inputs = array(input_programs, num_input_programs as usize)
            .iter()
            .map(|&p| Program::from_handle(p))
            .collect::<ClResult<Vec<_>>>()?;
        if inputs.iter().any(|p| !Arc::ptr_eq(&p.context, &ctx)) {
            return Err(CL_INVALID_PROGRAM);
        }
        let linked = Program::link(ctx, devices, &options_text(options), &inputs)?;
        let failed = linked.devices.iter().any(|d| !linked.is_built_for(d));
        let handle = Program::into_handle(linked);
        if let Some(f) = pfn_notify {
            // SAFETY: the application's callback.
            unsafe { f(handle, user_data) };
        }
        let code = if failed { CL_LINK_PROGRAM_FAILURE } else { CL_SUCCESS };
        Ok((handle, code))
    }
}

pub(crate) struct ProgramInfo;

impl InfoQuery for ProgramInfo {
    type Handles = (cl_program,);
    type Object = Arc<Program>;
    #[inline]
    fn object((program,): (cl_program,)) -> ClResult<Arc<Program>> {
        Program::from_handle(program)
    }
    #[inline]
    fn answer(p: &Arc<Program>, param: cl_program_info) -> ClResult<Info> {
        Ok(match param {
            CL_PROGRAM_REFERENCE_COUNT => Info::value::<cl_uint>(p.header().count()),
            CL_PROGRAM_CONTEXT => Info::value(p.context.handle()),
            CL_PROGRAM_NUM_DEVICES => Info::value::<cl_uint>(p.devices.len() as cl_uint),
            CL_PROGRAM_DEVICES => {
                let handles: Vec<cl_device_id> = p.devices.iter().map(|d| d.handle()).collect();
                Info::slice(&handles)
            }
            CL_PROGRAM_SOURCE => Info::text(p.source.as_deref().unwrap_or("")),
            CL_PROGRAM_BINARY_SIZES => {
                let sizes: Vec<usize> = p.binaries()?.iter().map(|b| b.len()).collect();
                Info::slice(&sizes)
            }
            CL_PROGRAM_BINARIES => Info::binaries(p.binaries()?),
            CL_PROGRAM_NUM_KERNELS | CL_PROGRAM_KERNEL_NAMES => {
                if !p.devices.iter().any(|d| p.is_built_for(d)) {
                    return Err(CL_INVALID_PROGRAM_EXECUTABLE);
                }
                let names = p.kernel_names()?;
                if param == CL_PROGRAM_NUM_KERNELS {
                    Info::value::<usize>(names.split(';').filter(|s| !s.is_empty()).count())
                } else {
                    Info::text(&names)
                }
            }
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetProgramInfo(program: cl_program; cl_program_info) => ProgramInfo;
}

pub(crate) struct ProgramBuildInfo;

impl InfoQuery for ProgramBuildInfo {
    type Handles = (cl_program, cl_device_id);
    type Object = (Arc<Program>, Arc<Device>);
    #[inline]
    fn object((program, device): Self::Handles) -> ClResult<Self::Object> {
        let p = Program::from_handle(program)?;
        let d = Device::from_handle(device)?;
        if !p.devices.iter().any(|x| x.index == d.index) {
            return Err(CL_INVALID_DEVICE);
        }
        Ok((p, d))
    }
    #[inline]
    fn answer((p, d): &Self::Object, param: cl_program_build_info) -> ClResult<Info> {
        Ok(match param {
            CL_PROGRAM_BUILD_OPTIONS => Info::text(&p.build.lock().options),
            CL_PROGRAM_BUILD_STATUS => Info::value::<cl_build_status>(p.build_status(d)),
            CL_PROGRAM_BUILD_LOG => Info::text(&p.build_log(d)),
            CL_PROGRAM_BINARY_TYPE => Info::value::<cl_program_binary_type>(p.binary_type(d)),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetProgramBuildInfo(
        program: cl_program,
        device: cl_device_id;
        cl_program_build_info
    ) => ProgramBuildInfo;
}

entry! {
    fn clCreateKernel(
        program: cl_program,
        kernel_name: *const libc::c_char,
    ) -> cl_kernel, errcode_ret {
        let p = Program::from_handle(program)?;
        let name = c_str(kernel_name).ok_or(CL_INVALID_VALUE)?;
        if !p.devices.iter().any(|d| p.is_built_for(d)) {
            return Err(CL_INVALID_PROGRAM_EXECUTABLE);
        }
        Ok(Kernel::into_handle(Kernel::new(
            p,
            &name.to_string_lossy(),
        )?))
    }
}

entry! {
    fn clCreateKernelsInProgram(
        program: cl_program,
        num_kernels: cl_uint,
        kernels: *mut cl_kernel,
        num_kernels_ret: *mut cl_uint,
    ) -> cl_int {
        create_kernels_in_program(program, num_kernels, kernels, num_kernels_ret)
    }
}

fn create_kernels_in_program(
    program: cl_program,
    num_kernels: cl_uint,
    kernels: *mut cl_kernel,
    num_kernels_ret: *mut cl_uint,
) -> ClResult<()> {
    let p = Program::from_handle(program)?;
    if !p.devices.iter().any(|d| p.is_built_for(d)) {
        return Err(CL_INVALID_PROGRAM_EXECUTABLE);
    }
    let names = p.kernel_names()?;
    let names: Vec<&str> = names.split(';').filter(|s| !s.is_empty()).collect();
    if !kernels.is_null() && (num_kernels as usize) < names.len() {
        return Err(CL_INVALID_VALUE);
    }
    if !kernels.is_null() {
        let created = names
            .iter()
            .map(|n| Kernel::new(p.clone(), n))
            .collect::<ClResult<Vec<_>>>()?;
        for (i, k) in created.into_iter().enumerate() {
            // SAFETY: num_kernels >= names.len() writable entries.
            unsafe { *kernels.add(i) = Kernel::into_handle(k) };
        }
    }
    if !num_kernels_ret.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *num_kernels_ret = names.len() as cl_uint };
    }
    Ok(())
}

entry! {
    fn clRetainKernel(kernel: cl_kernel) -> cl_int {
        Kernel::retain_handle(kernel)
    }
}

entry! {
    fn clReleaseKernel(kernel: cl_kernel) -> cl_int {
        Kernel::release_handle(kernel).map(|_| ())
    }
}

/// A buffer argument: `CL_INVALID_ARG_SIZE` unless the size is that of a `cl_mem`; NULL
/// (or a pointer to NULL) is a NULL buffer.
fn mem_arg(k: &Kernel, arg_size: usize, arg_value: *const c_void) -> ClResult<ArgValue> {
    if arg_size != std::mem::size_of::<cl_mem>() {
        return Err(CL_INVALID_ARG_SIZE);
    }
    if arg_value.is_null() {
        return Ok(ArgValue::Mem(None));
    }
    // SAFETY: arg_value points to a cl_mem (size checked).
    let mem = unsafe { *(arg_value as *const cl_mem) };
    if mem.is_null() {
        return Ok(ArgValue::Mem(None));
    }
    let b = Buffer::from_handle(mem)?;
    if !Arc::ptr_eq(&b.context, &k.program.context) {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    Ok(ArgValue::Mem(Some(b)))
}

/// A `sampler_t` argument: a sampler of the kernel's context. Not shown to the probes
/// (they would take MirrorCL's handle for theirs); each device's vendor kernel gets its
/// vendor's sampler at launch.
fn sampler_arg(k: &Kernel, arg_size: usize, arg_value: *const c_void) -> ClResult<ArgValue> {
    if arg_size != std::mem::size_of::<cl_sampler>() {
        return Err(CL_INVALID_ARG_SIZE);
    }
    // CL_INVALID_ARG_VALUE, as for every argument but a `__local` one (PoCL says the same).
    if arg_value.is_null() {
        return Err(CL_INVALID_ARG_VALUE);
    }
    // SAFETY: arg_value points to a cl_sampler (size checked).
    let s = Sampler::from_handle(unsafe { *(arg_value as *const cl_sampler) })?;
    if !Arc::ptr_eq(&s.context, &k.program.context) {
        return Err(CL_INVALID_SAMPLER);
    }
    Ok(ArgValue::Sampler(s))
}

entry! {
    fn clSetKernelArg(
        kernel: cl_kernel,
        arg_index: cl_uint,
        arg_size: usize,
        arg_value: *const c_void,
    ) -> cl_int {
        set_kernel_arg(kernel, arg_index, arg_size, arg_value)
    }
}

fn set_kernel_arg(
    kernel: cl_kernel,
    arg_index: cl_uint,
    arg_size: usize,
    arg_value: *const c_void,
) -> ClResult<()> {
    let k = Kernel::from_handle(kernel)?;
    if arg_index >= k.num_args {
        return Err(CL_INVALID_ARG_INDEX);
    }
    let value = match k.arg_info.as_ref().map(|i| i[arg_index as usize].address) {
        Some(CL_KERNEL_ARG_ADDRESS_GLOBAL) | Some(CL_KERNEL_ARG_ADDRESS_CONSTANT) => {
            mem_arg(&k, arg_size, arg_value)?
        }
        Some(CL_KERNEL_ARG_ADDRESS_LOCAL) => {
            if !arg_value.is_null() {
                return Err(CL_INVALID_ARG_VALUE);
            }
            if arg_size == 0 {
                return Err(CL_INVALID_ARG_SIZE);
            }
            k.vendor_check(arg_index, arg_size, arg_value, true)?;
            ArgValue::Local(arg_size)
        }
        Some(_)
            if k.arg_info
                .as_ref()
                .is_some_and(|i| i[arg_index as usize].sampler) =>
        {
            sampler_arg(&k, arg_size, arg_value)?
        }
        Some(_) => {
            if arg_value.is_null() {
                return Err(CL_INVALID_ARG_VALUE);
            }
            // No type has size 0 (PoCL 3.1 crashes on a struct of size 0).
            if arg_size == 0 {
                return Err(CL_INVALID_ARG_SIZE);
            }
            // The sizes the vendor accepts are its own (PoCL takes 12 bytes for a
            // float4, any size for a struct): it is asked, the same on every rank.
            k.vendor_check(arg_index, arg_size, arg_value, true)?;
            // SAFETY: `arg_size` readable bytes, accepted by the vendor.
            ArgValue::Bytes(
                unsafe { std::slice::from_raw_parts(arg_value as *const u8, arg_size) }.into(),
            )
        }
        None => {
            // Without argument information: a registered cl_mem is a buffer, NULL a
            // local size, anything else bytes the vendor accepts (what it checks may
            // depend on the bytes: asked every time).
            if arg_size == 0 {
                return Err(CL_INVALID_ARG_SIZE);
            }
            // SAFETY: read only when the size is that of a cl_mem.
            let as_mem = (arg_size == std::mem::size_of::<cl_mem>() && !arg_value.is_null())
                .then(|| unsafe { *(arg_value as *const cl_mem) });
            match as_mem {
                Some(m) if Buffer::from_handle(m).is_ok() => mem_arg(&k, arg_size, arg_value)?,
                Some(m) if Sampler::from_handle(m).is_ok() => sampler_arg(&k, arg_size, arg_value)?,
                _ if arg_value.is_null() => {
                    k.vendor_check(arg_index, arg_size, arg_value, false)?;
                    ArgValue::Local(arg_size)
                }
                _ => {
                    k.vendor_check(arg_index, arg_size, arg_value, false)?;
                    // SAFETY: as above.
                    ArgValue::Bytes(
                        unsafe { std::slice::from_raw_parts(arg_value as *const u8, arg_size) }
                            .into(),
                    )
                }
            }
        }
    };
    if mirrorcl_runtime::cluster::verify::enabled() {
        let what: Vec<u8> = match &value {
            ArgValue::Mem(Some(b)) => b.id.to_le_bytes().to_vec(),
            ArgValue::Mem(None) => Vec::new(),
            ArgValue::Sampler(s) => [s.normalized, s.addressing, s.filter]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            ArgValue::Local(n) => n.to_le_bytes().to_vec(),
            ArgValue::Bytes(b) => b.to_vec(),
        };
        let call: &[&[u8]] = &[k.name.as_bytes(), &arg_index.to_le_bytes(), &what];
        match value {
            ArgValue::Bytes(_) => {
                mirrorcl_runtime::cluster::verify::note_value("clSetKernelArg", call)
            }
            _ => mirrorcl_runtime::cluster::verify::note("clSetKernelArg", call),
        }
    }
    k.set_arg(arg_index, value);
    Ok(())
}

pub(crate) struct KernelInfo;

impl InfoQuery for KernelInfo {
    type Handles = (cl_kernel,);
    type Object = Arc<Kernel>;
    #[inline]
    fn object((kernel,): (cl_kernel,)) -> ClResult<Arc<Kernel>> {
        Kernel::from_handle(kernel)
    }
    #[inline]
    fn answer(k: &Arc<Kernel>, param: cl_kernel_info) -> ClResult<Info> {
        Ok(match param {
            CL_KERNEL_FUNCTION_NAME => Info::text(&k.name),
            CL_KERNEL_NUM_ARGS => Info::value::<cl_uint>(k.num_args),
            CL_KERNEL_REFERENCE_COUNT => Info::value::<cl_uint>(k.header().count()),
            CL_KERNEL_CONTEXT => Info::value(k.program.context.handle()),
            CL_KERNEL_PROGRAM => Info::value(k.program.handle()),
            CL_KERNEL_ATTRIBUTES => match &k.facts.attributes {
                Some(a) => Info::bytes(a.clone()),
                None => Info::text(""),
            },
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetKernelInfo(kernel: cl_kernel; cl_kernel_info) => KernelInfo;
}

pub(crate) struct KernelArgInfo;

impl InfoQuery for KernelArgInfo {
    type Handles = (cl_kernel, cl_uint);
    type Object = (Arc<Kernel>, cl_uint);
    #[inline]
    fn object((kernel, arg_index): Self::Handles) -> ClResult<Self::Object> {
        let k = Kernel::from_handle(kernel)?;
        if arg_index >= k.num_args {
            return Err(CL_INVALID_ARG_INDEX);
        }
        Ok((k, arg_index))
    }
    #[inline]
    fn answer((k, arg_index): &Self::Object, param: cl_kernel_arg_info) -> ClResult<Info> {
        match k.facts.arg_answer(*arg_index, param) {
            Some(Ok(b)) => Ok(Info::bytes(b.clone())),
            Some(Err(_)) => Err(CL_KERNEL_ARG_INFO_NOT_AVAILABLE),
            None => Err(CL_INVALID_VALUE),
        }
    }
}

entry! {
    info fn clGetKernelArgInfo(
        kernel: cl_kernel,
        arg_index: cl_uint;
        cl_kernel_arg_info
    ) => KernelArgInfo;
}

/// The device a per-device kernel query is about: `device` may be NULL only when the
/// kernel's program has one device.
pub(crate) fn kernel_device(k: &Kernel, device: cl_device_id) -> ClResult<Arc<Device>> {
    let d = if device.is_null() {
        match k.program.devices.as_slice() {
            [only] => only.clone(),
            _ => return Err(CL_INVALID_DEVICE),
        }
    } else {
        Device::from_handle(device)?
    };
    if !k.facts.work_group.contains_key(&d.index) {
        return Err(CL_INVALID_DEVICE);
    }
    Ok(d)
}

pub(crate) struct KernelWorkGroupInfo;

impl InfoQuery for KernelWorkGroupInfo {
    type Handles = (cl_kernel, cl_device_id);
    type Object = (Arc<Kernel>, Arc<Device>);
    #[inline]
    fn object((kernel, device): Self::Handles) -> ClResult<Self::Object> {
        let k = Kernel::from_handle(kernel)?;
        let d = kernel_device(&k, device)?;
        Ok((k, d))
    }
    #[inline]
    fn answer((k, d): &Self::Object, param: cl_kernel_work_group_info) -> ClResult<Info> {
        if param == CL_KERNEL_LOCAL_MEM_SIZE {
            if let Some(v) = k.local_mem_size(d) {
                return Ok(Info::value::<cl_ulong>(v));
            }
        }
        // The device's owner answered when the kernel was created.
        match k.facts.work_group_answer(d.index, param) {
            Some(Ok(b)) => Ok(Info::bytes(b.clone())),
            Some(Err(rc)) => Err(*rc),
            None => Err(CL_INVALID_VALUE),
        }
    }
}

entry! {
    info fn clGetKernelWorkGroupInfo(
        kernel: cl_kernel,
        device: cl_device_id;
        cl_kernel_work_group_info
    ) => KernelWorkGroupInfo;
}

entry! {
    fn clSetProgramReleaseCallback(
        program: cl_program,
        pfn_notify: Option<unsafe extern "C" fn(cl_program, *mut c_void)>,
        user_data: *mut c_void,
    ) -> cl_int {
        let p = Program::from_handle(program)?;
        let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
        p.release_callbacks.add(f, user_data);
        Ok(())
    }
}
