//! Queues: every enqueue MirrorCL makes.

use super::*;

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
    pub(super) fn enqueue(
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
        blocking: bool,
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
                        blocking as cl_bool,
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
                        blocking as cl_bool,
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

    /// Maps all `size` bytes of `mem` for reading and writing, blocking, and leaves them
    /// mapped: the host address of a `CL_MEM_ALLOC_HOST_PTR` buffer, which the vendor
    /// keeps page-locked.
    pub fn map_whole(&self, mem: &VMem, size: usize) -> ClResult<*mut u8> {
        let f = entry!(self, clEnqueueMapBuffer)?;
        let mut err: cl_int = CL_SUCCESS;
        // SAFETY: a live queue and buffer of `size` bytes; blocking, no wait list.
        let ptr = unsafe {
            f(
                self.raw(),
                mem.raw(),
                CL_TRUE,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                size,
                0,
                null(),
                null_mut(),
                &mut err,
            )
        };
        crate::check(err)?;
        if ptr.is_null() {
            return Err(CL_MAP_FAILURE);
        }
        Ok(ptr as *mut u8)
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
