//! Contexts: where queues, buffers, programs and user events are made.

use super::*;

reference_counted!(
    /// A vendor context.
    VContext,
    clRetainContext,
    clReleaseContext
);

/// A vendor context's identity: commands of one vendor context can wait on each
/// other's vendor events directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextKey(usize);

impl VContext {
    pub fn key(&self) -> ContextKey {
        ContextKey(self.raw() as usize)
    }

    /// An in-order queue on `device` (`clCreateCommandQueue` is in every vendor's table).
    pub fn create_queue(
        &self,
        device: &VDevice,
        properties: cl_command_queue_properties,
    ) -> ClResult<VQueue> {
        let f = entry!(self, clCreateCommandQueue)?;
        created(
            // SAFETY: a live context and one of its devices.
            |err| unsafe { f(self.raw(), device.raw(), properties, err) },
            VQueue,
        )
    }

    /// A device buffer of `size` bytes, without a host pointer.
    pub fn create_buffer(&self, flags: cl_mem_flags, size: usize) -> ClResult<VMem> {
        let f = entry!(self, clCreateBuffer)?;
        created(
            // SAFETY: a live context; no host pointer.
            |err| unsafe { f(self.raw(), flags, size, null_mut(), err) },
            VMem,
        )
    }

    /// A user event, complete when `VEvent::set_user_status` says so.
    pub fn create_user_event(&self) -> ClResult<VEvent> {
        let f = entry!(self, clCreateUserEvent)?;
        // SAFETY: a live context.
        created(|err| unsafe { f(self.raw(), err) }, VEvent)
    }

    pub fn create_program_with_source(&self, source: &CStr) -> ClResult<VProgram> {
        let f = entry!(self, clCreateProgramWithSource)?;
        let mut ptr = source.as_ptr();
        created(
            // SAFETY: one NUL-terminated string.
            |err| unsafe { f(self.raw(), 1, &mut ptr, null(), err) },
            VProgram,
        )
    }

    /// `clCreateProgramWithBinary`: `binaries[i]` for `devices[i]`; `status[i]` gets
    /// each device's result whether or not the call succeeds.
    pub fn create_program_with_binary(
        &self,
        devices: &[&VDevice],
        binaries: &[&[u8]],
        status: &mut [cl_int],
    ) -> ClResult<VProgram> {
        assert!(devices.len() == binaries.len() && devices.len() == status.len());
        let f = entry!(self, clCreateProgramWithBinary)?;
        let vdevs = raw_devices(devices);
        let lens: Vec<usize> = binaries.iter().map(|b| b.len()).collect();
        let mut ptrs: Vec<*const u8> = binaries.iter().map(|b| b.as_ptr()).collect();
        created(
            // SAFETY: arrays of devices.len() entries each.
            |err| unsafe {
                f(
                    self.raw(),
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    lens.as_ptr(),
                    ptrs.as_mut_ptr(),
                    status.as_mut_ptr(),
                    err,
                )
            },
            VProgram,
        )
    }

    /// `clLinkProgram`: the program (a failed link may still return one, whose log
    /// says why) and the vendor's status.
    pub fn link_program(
        &self,
        devices: &[&VDevice],
        options: &CStr,
        inputs: &[&VProgram],
    ) -> (Option<VProgram>, cl_int) {
        let Ok(f) = entry!(self, clLinkProgram) else {
            return (None, CL_INVALID_OPERATION);
        };
        let vdevs = raw_devices(devices);
        let vinputs: Vec<cl_program> = inputs.iter().map(|p| p.raw()).collect();
        let mut err = CL_SUCCESS;
        // SAFETY: arrays of matching lengths; live objects of this context.
        let p = unsafe {
            f(
                self.raw(),
                vdevs.len() as cl_uint,
                vdevs.as_ptr(),
                options.as_ptr(),
                vinputs.len() as cl_uint,
                vinputs.as_ptr(),
                None,
                null_mut(),
                &mut err,
            )
        };
        (NonNull::new(p).map(VProgram), err)
    }
}
