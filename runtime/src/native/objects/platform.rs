//! Platforms and devices.

use super::*;

/// A vendor platform (not reference counted: it lives as long as its library, which is
/// never unloaded).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VPlatform(NonNull<c_void>);

// SAFETY: see the module documentation (OpenCL 1.2 §A.2).
unsafe impl Send for VPlatform {}
// SAFETY: as above.
unsafe impl Sync for VPlatform {}

impl fmt::Debug for VPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VPlatform({:p})", self.0)
    }
}

/// The error callback a vendor context reports to.
pub type ContextNotify =
    unsafe extern "C" fn(*const libc::c_char, *const c_void, usize, *mut c_void);

impl VPlatform {
    /// # Safety
    /// `raw` is NULL or a platform of a loaded ICD-compliant vendor.
    pub unsafe fn from_raw(raw: cl_platform_id) -> Option<VPlatform> {
        NonNull::new(raw).map(VPlatform)
    }

    #[inline]
    pub fn raw(&self) -> cl_platform_id {
        self.0.as_ptr()
    }

    #[inline]
    fn table(&self) -> &_cl_icd_dispatch {
        // SAFETY: platforms live as long as their (never unloaded) library.
        unsafe { dispatch(self.raw()) }
    }

    /// A `clGetPlatformInfo` answer's bytes.
    pub fn info(&self, param: cl_platform_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetPlatformInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query with a buffer of the announced size.
            unsafe { f(self.raw(), param, size, value, ret) }
        })
    }

    /// A platform string (name, version, …).
    pub fn info_string(&self, param: cl_platform_info) -> ClResult<String> {
        Ok(crate::c_string(&self.info(param)?))
    }

    /// The platform's devices of `device_type` (none is not an error here).
    pub fn devices(&self, device_type: cl_device_type) -> ClResult<Vec<VDevice>> {
        let f = entry!(self, clGetDeviceIDs)?;
        let mut n: cl_uint = 0;
        // SAFETY: counting call on a live platform.
        match unsafe { f(self.raw(), device_type, 0, null_mut(), &mut n) } {
            CL_SUCCESS => {}
            CL_DEVICE_NOT_FOUND => return Ok(Vec::new()),
            rc => return Err(rc),
        }
        let mut ids = vec![null_mut(); n as usize];
        // SAFETY: a buffer of n entries.
        crate::check(unsafe { f(self.raw(), device_type, n, ids.as_mut_ptr(), null_mut()) })?;
        Ok(ids
            .into_iter()
            // SAFETY: devices the vendor just listed; root devices ignore reference
            // counting, so holding one without a retain is balanced.
            .filter_map(|id| unsafe { VDevice::from_raw(id) })
            .collect())
    }

    /// A context of `devices` (all of this platform), reporting errors to `notify`.
    pub fn create_context(
        &self,
        devices: &[&VDevice],
        notify: Option<(ContextNotify, *mut c_void)>,
    ) -> ClResult<VContext> {
        let f = entry!(self, clCreateContext)?;
        let props: [cl_context_properties; 3] = [
            CL_CONTEXT_PLATFORM as cl_context_properties,
            self.raw() as cl_context_properties,
            0,
        ];
        let vdevs = raw_devices(devices);
        created(
            // SAFETY: a terminated property list naming this platform, its devices, and
            // a callback whose data outlives the context (the caller's contract).
            |err| unsafe {
                f(
                    props.as_ptr(),
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    notify.map(|(cb, _)| cb),
                    notify.map_or(null_mut(), |(_, data)| data),
                    err,
                )
            },
            VContext,
        )
    }
}

reference_counted!(
    /// A vendor device: a root device (reference counting ignored) or a sub-device.
    VDevice,
    clRetainDevice,
    clReleaseDevice
);

impl VDevice {
    /// A `clGetDeviceInfo` answer's bytes.
    pub fn info(&self, param: cl_device_info) -> ClResult<Vec<u8>> {
        let f = entry!(self, clGetDeviceInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query on a live device.
            unsafe { f(self.raw(), param, size, value, ret) }
        })
    }

    /// A fixed-size `clGetDeviceInfo` answer.
    pub fn info_value<T: Copy + Default>(&self, param: cl_device_info) -> ClResult<T> {
        let f = entry!(self, clGetDeviceInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe { f(self.raw(), param, size, value, ret) })
    }

    /// How many sub-devices `props` (zero-terminated) would make.
    pub fn count_sub_devices(&self, props: &[cl_device_partition_property]) -> ClResult<u32> {
        let f = entry!(self, clCreateSubDevices)?;
        let mut n: cl_uint = 0;
        // SAFETY: counting call with a zero-terminated property list.
        crate::check(unsafe { f(self.raw(), props.as_ptr(), 0, null_mut(), &mut n) })?;
        Ok(n)
    }

    /// `clCreateSubDevices` with `props` (zero-terminated).
    pub fn create_sub_devices(
        &self,
        props: &[cl_device_partition_property],
    ) -> ClResult<Vec<VDevice>> {
        let n = self.count_sub_devices(props)?;
        let f = entry!(self, clCreateSubDevices)?;
        let mut subs = vec![null_mut(); n as usize];
        // SAFETY: n writable entries.
        crate::check(unsafe { f(self.raw(), props.as_ptr(), n, subs.as_mut_ptr(), null_mut()) })?;
        Ok(subs
            .into_iter()
            // SAFETY: sub-devices just created; each reference is ours.
            .filter_map(|d| unsafe { VDevice::from_raw(d) })
            .collect())
    }
}
