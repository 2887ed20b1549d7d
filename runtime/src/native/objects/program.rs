//! Programs and kernels.

use super::*;

reference_counted!(
    /// A vendor program.
    VProgram,
    clRetainProgram,
    clReleaseProgram
);

impl VProgram {
    /// `clBuildProgram` for `devices` (no callback: it returns when done).
    pub fn build(&self, devices: &[&VDevice], options: &CStr) -> ClResult<()> {
        let f = entry!(self, clBuildProgram)?;
        let vdevs = raw_devices(devices);
        // SAFETY: a live program and devices of its context.
        crate::check(unsafe {
            f(
                self.raw(),
                vdevs.len() as cl_uint,
                vdevs.as_ptr(),
                options.as_ptr(),
                None,
                null_mut(),
            )
        })
    }

    /// `clCompileProgram` with `headers` (program, include name) of the same context.
    pub fn compile(
        &self,
        devices: &[&VDevice],
        options: &CStr,
        headers: &[(&VProgram, &CStr)],
    ) -> ClResult<()> {
        let f = entry!(self, clCompileProgram)?;
        let vdevs = raw_devices(devices);
        let hprogs: Vec<cl_program> = headers.iter().map(|(p, _)| p.raw()).collect();
        let mut hnames: Vec<*const libc::c_char> =
            headers.iter().map(|(_, n)| n.as_ptr()).collect();
        // SAFETY: arrays of matching lengths (NULL when empty); live objects of one
        // context.
        crate::check(unsafe {
            f(
                self.raw(),
                vdevs.len() as cl_uint,
                vdevs.as_ptr(),
                options.as_ptr(),
                hprogs.len() as cl_uint,
                if hprogs.is_empty() {
                    null()
                } else {
                    hprogs.as_ptr()
                },
                if hnames.is_empty() {
                    null_mut()
                } else {
                    hnames.as_mut_ptr()
                },
                None,
                null_mut(),
            )
        })
    }

    /// A `clGetProgramBuildInfo` answer's bytes for `device`.
    pub fn build_info(&self, device: &VDevice, param: cl_program_build_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetProgramBuildInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(self.raw(), device.raw(), param, size, value, ret) }
        })
    }

    /// A `clGetProgramInfo` answer's bytes.
    pub fn info(&self, param: cl_program_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetProgramInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(self.raw(), param, size, value, ret) }
        })
    }

    /// Per device of the program (`CL_PROGRAM_DEVICES` order): its raw handle and
    /// binary.
    pub fn binaries(&self) -> ClResult<Vec<(cl_device_id, Vec<u8>)>> {
        let f = entry!(self, clGetProgramInfo)?;
        let words = |bytes: Vec<u8>| -> Vec<usize> {
            bytes
                .chunks_exact(std::mem::size_of::<usize>())
                .map(|c| usize::from_ne_bytes(c.try_into().expect("chunk size")))
                .collect()
        };
        let devices = words(self.info(CL_PROGRAM_DEVICES)?);
        let sizes = words(self.info(CL_PROGRAM_BINARY_SIZES)?);
        let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0u8; s]).collect();
        let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        // SAFETY: one buffer of the announced size per device.
        crate::check(unsafe {
            f(
                self.raw(),
                CL_PROGRAM_BINARIES,
                ptrs.len() * std::mem::size_of::<*mut u8>(),
                ptrs.as_mut_ptr() as *mut c_void,
                null_mut(),
            )
        })?;
        Ok(devices
            .into_iter()
            .map(|d| d as cl_device_id)
            .zip(bufs)
            .collect())
    }

    pub fn create_kernel(&self, name: &CStr) -> ClResult<VKernel> {
        let f = entry!(self, clCreateKernel)?;
        created(
            // SAFETY: a live program, a NUL-terminated name.
            |err| unsafe { f(self.raw(), name.as_ptr(), err) },
            VKernel,
        )
    }
}

reference_counted!(
    /// A vendor kernel.
    VKernel,
    clRetainKernel,
    clReleaseKernel
);

impl VKernel {
    /// A `clGetKernelInfo` answer's bytes.
    pub fn info(&self, param: cl_kernel_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetKernelInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(self.raw(), param, size, value, ret) }
        })
    }

    /// A fixed-size `clGetKernelInfo` answer.
    pub fn info_value<T: Copy + Default>(&self, param: cl_kernel_info) -> ClResult<T> {
        let f = entry!(self, clGetKernelInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe { f(self.raw(), param, size, value, ret) })
    }

    /// A `clGetKernelArgInfo` answer's bytes.
    pub fn arg_info(&self, index: cl_uint, param: cl_kernel_arg_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetKernelArgInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(self.raw(), index, param, size, value, ret) }
        })
    }

    /// A `clGetKernelWorkGroupInfo` answer's bytes for `device`.
    pub fn work_group_info(
        &self,
        device: &VDevice,
        param: cl_kernel_work_group_info,
    ) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetKernelWorkGroupInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(self.raw(), device.raw(), param, size, value, ret) }
        })
    }

    /// `clSetKernelArg` as the application gave it.
    ///
    /// # Safety
    /// `value` is NULL or points to `size` readable bytes; no other thread sets this
    /// kernel's arguments at the same time.
    pub unsafe fn set_arg(
        &self,
        index: cl_uint,
        size: usize,
        value: *const c_void,
    ) -> ClResult<()> {
        let f = entry!(self, clSetKernelArg)?;
        // SAFETY: per the contract.
        crate::check(unsafe { f(self.raw(), index, size, value) })
    }

    /// A buffer argument (NULL for `None`).
    ///
    /// # Safety
    /// No other thread sets this kernel's arguments at the same time.
    pub unsafe fn set_arg_mem(&self, index: cl_uint, mem: Option<&VMem>) -> ClResult<()> {
        let value: cl_mem = mem.map_or(null_mut(), |m| m.raw());
        let ptr = if value.is_null() {
            null()
        } else {
            &value as *const cl_mem as *const c_void
        };
        // SAFETY: a cl_mem value of the right size, or NULL; exclusivity per the contract.
        unsafe { self.set_arg(index, std::mem::size_of::<cl_mem>(), ptr) }
    }
}
