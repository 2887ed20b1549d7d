//! Typed vendor objects: the only place MirrorCL calls a vendor's dispatch table.
//!
//! Each kind owns one reference to a vendor object: `Drop` releases it and `Clone`
//! retains another, so a vendor object lives exactly as long as something of MirrorCL's
//! holds it (an issuer's pending flush keeps its queue alive, a failed creation releases
//! what it made). Platforms are not reference counted; root devices count but ignore
//! retains and releases (OpenCL 1.2 §4.3), which the same code handles.
//!
//! Handles cross threads: OpenCL objects may be used from any thread (OpenCL 1.2 §A.2),
//! except that `clSetKernelArg` must not race on one kernel; MirrorCL only sets a device
//! kernel's arguments on that device's issuer thread, and a probe kernel's only from
//! the application's `clSetKernelArg` on its kernel (which the application must not
//! run on one kernel from two threads at once).

use super::query_bytes;
use crate::cl::cl_icd::_cl_icd_dispatch;
use crate::cl::*;
use crate::ClResult;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr::{null, null_mut, NonNull};

/// The dispatch table of a vendor object.
///
/// # Safety
/// `obj` must be a live object of an ICD-compliant vendor.
#[inline]
unsafe fn dispatch<'a>(obj: *mut c_void) -> &'a _cl_icd_dispatch {
    // SAFETY: ICD objects start with a pointer to their dispatch table (cl_khr_icd), which
    // lives as long as the vendor library (never unloaded).
    unsafe { &**(obj as *const *const _cl_icd_dispatch) }
}

/// The vendor's entry `$f` for `$obj`, or `CL_INVALID_OPERATION` when its table lacks
/// it (a vendor of an older OpenCL version).
macro_rules! entry {
    ($obj:expr, $f:ident) => {
        $obj.table().$f.ok_or(CL_INVALID_OPERATION)
    };
}

/// A pointer to a wait list as the vendors take it (NULL when empty).
#[inline]
fn wait_ptr(waits: &[cl_event]) -> *const cl_event {
    if waits.is_empty() {
        null()
    } else {
        waits.as_ptr()
    }
}

/// Raw handles of a list of vendor devices, for calls that take an array.
fn raw_devices(devices: &[&VDevice]) -> Vec<cl_device_id> {
    devices.iter().map(|d| d.raw()).collect()
}

/// Runs a call that creates an object and reports through `errcode_ret`: the object, or
/// the vendor's error (`CL_OUT_OF_RESOURCES` for a NULL object with no error).
fn created<T>(
    make: impl FnOnce(*mut cl_int) -> *mut c_void,
    wrap: impl FnOnce(NonNull<c_void>) -> T,
) -> ClResult<T> {
    let mut err = CL_SUCCESS;
    let raw = make(&mut err);
    match NonNull::new(raw) {
        Some(p) if err == CL_SUCCESS => Ok(wrap(p)),
        Some(p) => {
            // A vendor returned an object with an error: it is ours to release.
            drop(wrap(p));
            Err(err)
        }
        None => Err(if err == CL_SUCCESS {
            CL_OUT_OF_RESOURCES
        } else {
            err
        }),
    }
}

/// Reads a fixed-size answer of a query.
fn query_value<T: Copy + Default>(
    f: impl FnOnce(usize, *mut c_void, *mut usize) -> cl_int,
) -> ClResult<T> {
    let mut v = T::default();
    crate::check(f(
        std::mem::size_of::<T>(),
        &mut v as *mut T as *mut c_void,
        null_mut(),
    ))?;
    Ok(v)
}

macro_rules! reference_counted {
    ($(#[$doc:meta])* $name:ident, $retain:ident, $release:ident) => {
        $(#[$doc])*
        pub struct $name(NonNull<c_void>);

        // SAFETY: see the module documentation (OpenCL 1.2 §A.2).
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl $name {
            /// Takes over one reference the vendor handed out; `None` for NULL.
            ///
            /// # Safety
            /// `raw` is NULL or a live vendor object of this kind, and the caller gives
            /// up the reference it holds.
            pub unsafe fn from_raw(raw: *mut c_void) -> Option<$name> {
                NonNull::new(raw).map($name)
            }

            /// The vendor's handle, for the vendor's own array arguments and for
            /// identity; valid while `self` lives.
            #[inline]
            pub fn raw(&self) -> *mut c_void {
                self.0.as_ptr()
            }

            #[inline]
            fn table(&self) -> &_cl_icd_dispatch {
                // SAFETY: `self` holds a reference, so the object is live.
                unsafe { dispatch(self.raw()) }
            }
        }

        impl Clone for $name {
            fn clone(&self) -> $name {
                if let Some(retain) = self.table().$retain {
                    // SAFETY: a live object; the new reference belongs to the clone.
                    unsafe { retain(self.raw()) };
                }
                $name(self.0)
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                if let Some(release) = self.table().$release {
                    // SAFETY: gives back the one reference `self` holds.
                    unsafe { release(self.raw()) };
                }
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                self.0 == other.0
            }
        }

        impl Eq for $name {}

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:p})", stringify!($name), self.0)
            }
        }
    };
}

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
        Ok(super::c_string(&self.info(param)?))
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

reference_counted!(
    /// A vendor command queue (always in order).
    VQueue,
    clRetainCommandQueue,
    clReleaseCommandQueue
);

impl VQueue {
    pub fn flush(&self) -> ClResult<()> {
        let f = entry!(self, clFlush)?;
        // SAFETY: a live queue.
        crate::check(unsafe { f(self.raw()) })
    }

    pub fn finish(&self) -> ClResult<()> {
        let f = entry!(self, clFinish)?;
        // SAFETY: a live queue.
        crate::check(unsafe { f(self.raw()) })
    }

    /// Runs one enqueue call with the wait list and, when `want_event`, an event out.
    fn enqueue(
        waits: &[cl_event],
        want_event: bool,
        call: impl FnOnce(cl_uint, *const cl_event, *mut cl_event) -> cl_int,
    ) -> ClResult<Option<VEvent>> {
        let mut ev: cl_event = null_mut();
        let out = if want_event {
            &mut ev as *mut cl_event
        } else {
            null_mut()
        };
        crate::check(call(waits.len() as cl_uint, wait_ptr(waits), out))?;
        // SAFETY: the event the vendor just returned, ours to release.
        Ok(unsafe { VEvent::from_raw(ev) })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn copy_buffer(
        &self,
        src: &VMem,
        dst: &VMem,
        src_offset: usize,
        dst_offset: usize,
        len: usize,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueCopyBuffer)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: live objects of one context; the caller validated the ranges.
            unsafe {
                f(
                    self.raw(),
                    src.raw(),
                    dst.raw(),
                    src_offset,
                    dst_offset,
                    len,
                    n,
                    list,
                    out,
                )
            }
        })
    }

    /// `clEnqueueWriteBuffer` (`write`) or `clEnqueueReadBuffer` of `len` bytes at
    /// `offset` from or into `host`.
    ///
    /// # Safety
    /// `host` holds `len` bytes that stay valid (and, for a write, unchanged) until the
    /// command completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read_write(
        &self,
        mem: &VMem,
        write: bool,
        blocking: bool,
        offset: usize,
        len: usize,
        host: *mut c_void,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        if write {
            let f = entry!(self, clEnqueueWriteBuffer)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: a validated range of a live buffer; `host` per the contract.
                unsafe {
                    f(
                        self.raw(),
                        mem.raw(),
                        blocking as cl_bool,
                        offset,
                        len,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        } else {
            let f = entry!(self, clEnqueueReadBuffer)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: as above.
                unsafe {
                    f(
                        self.raw(),
                        mem.raw(),
                        blocking as cl_bool,
                        offset,
                        len,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        }
    }

    /// `clEnqueueWriteBufferRect` (`write`) or `clEnqueueReadBufferRect`, not blocking.
    ///
    /// # Safety
    /// `host` covers the host rectangle and stays valid until the command completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read_write_rect(
        &self,
        mem: &VMem,
        write: bool,
        buffer: &Rect,
        host_side: &Rect,
        region: &[usize; 3],
        host: *mut c_void,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let (b, h) = (buffer, host_side);
        if write {
            let f = entry!(self, clEnqueueWriteBufferRect)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: validated rectangles of a live buffer; `host` per the contract.
                unsafe {
                    f(
                        self.raw(),
                        mem.raw(),
                        CL_FALSE,
                        b.origin.as_ptr(),
                        h.origin.as_ptr(),
                        region.as_ptr(),
                        b.row_pitch,
                        b.slice_pitch,
                        h.row_pitch,
                        h.slice_pitch,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        } else {
            let f = entry!(self, clEnqueueReadBufferRect)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: as above.
                unsafe {
                    f(
                        self.raw(),
                        mem.raw(),
                        CL_FALSE,
                        b.origin.as_ptr(),
                        h.origin.as_ptr(),
                        region.as_ptr(),
                        b.row_pitch,
                        b.slice_pitch,
                        h.row_pitch,
                        h.slice_pitch,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn copy_rect(
        &self,
        src: &VMem,
        dst: &VMem,
        s: &Rect,
        d: &Rect,
        region: &[usize; 3],
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueCopyBufferRect)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: validated rectangles of live buffers of one context.
            unsafe {
                f(
                    self.raw(),
                    src.raw(),
                    dst.raw(),
                    s.origin.as_ptr(),
                    d.origin.as_ptr(),
                    region.as_ptr(),
                    s.row_pitch,
                    s.slice_pitch,
                    d.row_pitch,
                    d.slice_pitch,
                    n,
                    list,
                    out,
                )
            }
        })
    }

    pub fn fill(
        &self,
        mem: &VMem,
        pattern: &[u8],
        offset: usize,
        size: usize,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueFillBuffer)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: a validated pattern and range; the vendor copies the pattern.
            unsafe {
                f(
                    self.raw(),
                    mem.raw(),
                    pattern.as_ptr() as *const c_void,
                    pattern.len(),
                    offset,
                    size,
                    n,
                    list,
                    out,
                )
            }
        })
    }

    pub fn marker(&self, waits: &[cl_event], want_event: bool) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueMarkerWithWaitList)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: a live queue and events.
            unsafe { f(self.raw(), n, list, out) }
        })
    }

    /// `clEnqueueNDRangeKernel` with sizes of `global.len()` dimensions.
    pub fn ndrange(
        &self,
        kernel: &VKernel,
        offset: Option<&[usize]>,
        global: &[usize],
        local: Option<&[usize]>,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueNDRangeKernel)?;
        let off = offset.map_or(null(), |o| o.as_ptr());
        let loc = local.map_or(null(), |l| l.as_ptr());
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: validated dimensions and sizes; the kernel's arguments are set.
            unsafe {
                f(
                    self.raw(),
                    kernel.raw(),
                    global.len() as cl_uint,
                    off,
                    global.as_ptr(),
                    loc,
                    n,
                    list,
                    out,
                )
            }
        })
    }
}

/// One side of a rectangular transfer: origin (bytes, rows, slices) and pitches.
#[derive(Clone, Copy, Debug)]
pub struct Rect {
    pub origin: [usize; 3],
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

reference_counted!(
    /// A vendor buffer or sub-buffer.
    VMem,
    clRetainMemObject,
    clReleaseMemObject
);

impl VMem {
    /// A sub-buffer of `size` bytes at `origin`.
    pub fn create_sub_buffer(
        &self,
        flags: cl_mem_flags,
        origin: usize,
        size: usize,
    ) -> ClResult<VMem> {
        let f = entry!(self, clCreateSubBuffer)?;
        let region = cl_buffer_region { origin, size };
        created(
            // SAFETY: a live buffer and a region inside it.
            |err| unsafe {
                f(
                    self.raw(),
                    flags,
                    CL_BUFFER_CREATE_TYPE_REGION,
                    &region as *const cl_buffer_region as *const c_void,
                    err,
                )
            },
            VMem,
        )
    }
}

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

reference_counted!(
    /// A vendor event.
    VEvent,
    clRetainEvent,
    clReleaseEvent
);

/// What a vendor calls when an event completes.
pub type EventNotify = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

impl VEvent {
    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`.
    pub fn status(&self) -> ClResult<cl_int> {
        let f = entry!(self, clGetEventInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe {
            f(
                self.raw(),
                CL_EVENT_COMMAND_EXECUTION_STATUS,
                size,
                value,
                ret,
            )
        })
    }

    /// Blocks in the vendor until the event is done.
    pub fn wait(&self) -> ClResult<()> {
        let f = entry!(self, clWaitForEvents)?;
        let raw = self.raw();
        // SAFETY: one live event.
        crate::check(unsafe { f(1, &raw) })
    }

    pub fn profiling_info(&self, param: cl_profiling_info) -> ClResult<cl_ulong> {
        let f = entry!(self, clGetEventProfilingInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe { f(self.raw(), param, size, value, ret) })
    }

    /// Asks the vendor to call `notify(…, data)` once the event completes.
    ///
    /// # Safety
    /// `data` stays valid until `notify` runs, and `notify` may run on any thread.
    pub unsafe fn on_complete(&self, notify: EventNotify, data: *mut c_void) -> ClResult<()> {
        let f = entry!(self, clSetEventCallback)?;
        // SAFETY: a live event; `data` per the contract.
        crate::check(unsafe { f(self.raw(), CL_COMPLETE, Some(notify), data) })
    }

    /// Completes a user event.
    pub fn set_user_status(&self, status: cl_int) -> ClResult<()> {
        let f = entry!(self, clSetUserEventStatus)?;
        // SAFETY: a live user event.
        crate::check(unsafe { f(self.raw(), status) })
    }
}
