//! The transfer family's measured operations: 16-byte blocking write and read,
//! copy between two buffers, and blocking map + unmap.

use std::ffi::c_void;
use std::ptr;
use std::time::Instant;

use opencl3::error_codes::CL_SUCCESS;
use opencl3::memory::{ClMem, CL_MAP_READ, CL_MAP_WRITE};
use opencl3::types::{cl_int, cl_mem, CL_BLOCKING};

use crate::api::{check, Api};
use crate::target::Target;
use crate::XFER_BYTES;

impl Target {
    pub fn write(&self, api: &Api, data: &mut [u8; XFER_BYTES]) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: blocking write of XFER_BYTES (the buffer's size) from a
        // live host array.
        let status = unsafe {
            (api.enqueue_write_buffer)(
                self.queue.get(),
                self.buffer.get(),
                CL_BLOCKING,
                0,
                XFER_BYTES,
                data.as_mut_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        let us = t.elapsed().as_secs_f64() * 1e6;
        check(status, "clEnqueueWriteBuffer")?;
        Ok(us)
    }

    pub fn read(&self, api: &Api, data: &mut [u8; XFER_BYTES]) -> Result<f64, String> {
        self.read_mem(api, self.buffer.get(), data)
    }

    /// Blocking read of `mem` (one of this target's XFER_BYTES buffers).
    pub fn read_mem(
        &self,
        api: &Api,
        mem: cl_mem,
        data: &mut [u8; XFER_BYTES],
    ) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: blocking read of XFER_BYTES (the size of `mem`, a buffer of
        // this target's context) into a live host array.
        let status = unsafe {
            (api.enqueue_read_buffer)(
                self.queue.get(),
                mem,
                CL_BLOCKING,
                0,
                XFER_BYTES,
                data.as_mut_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        let us = t.elapsed().as_secs_f64() * 1e6;
        check(status, "clEnqueueReadBuffer")?;
        Ok(us)
    }

    /// 16-byte clEnqueueCopyBuffer buffer -> buffer2 + clFinish.
    pub fn copy_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: two distinct XFER_BYTES buffers of this queue's context,
        // whole-buffer copy; no events.
        let status = unsafe {
            (api.enqueue_copy_buffer)(
                self.queue.get(),
                self.buffer.get(),
                self.buffer2.get(),
                0,
                0,
                XFER_BYTES,
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueCopyBuffer")?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    /// Blocking read|write map of all of buffer2; the caller unmaps.
    pub fn map(&self, api: &Api) -> Result<*mut c_void, String> {
        let mut status: cl_int = CL_SUCCESS;
        // SAFETY: valid queue and buffer, the whole buffer; no events; the
        // status goes to a live int.
        let p = unsafe {
            (api.enqueue_map_buffer)(
                self.queue.get(),
                self.buffer2.get(),
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                XFER_BYTES,
                0,
                ptr::null(),
                ptr::null_mut(),
                &mut status,
            )
        };
        check(status, "clEnqueueMapBuffer")?;
        if p.is_null() {
            return Err("clEnqueueMapBuffer returned CL_SUCCESS and a null pointer".into());
        }
        Ok(p)
    }

    pub fn unmap(&self, api: &Api, p: *mut c_void) -> Result<(), String> {
        // SAFETY: `p` is a live mapping of buffer2 from `map`; no events.
        let status = unsafe {
            (api.enqueue_unmap_mem_object)(
                self.queue.get(),
                self.buffer2.get(),
                p,
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueUnmapMemObject")
    }

    /// Blocking map + unmap + clFinish.
    pub fn map_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let p = self.map(api)?;
        self.unmap(api, p)?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }
}
