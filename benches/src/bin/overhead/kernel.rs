//! The kernel family's measured operations: the trivial kernel's enqueue (its
//! round trip with clFinish, and bursts of it) and `clSetKernelArg` of one int.

use std::ptr;
use std::time::Instant;

use opencl3::types::cl_int;

use crate::api::{check, Api};
use crate::target::Target;

impl Target {
    pub fn enqueue_kernel(&self, api: &Api) -> Result<(), String> {
        let global = [1usize];
        // SAFETY: valid queue/kernel with its argument set; no events.
        let status = unsafe {
            (api.enqueue_nd_range_kernel)(
                self.queue.get(),
                self.kernel.get(),
                1,
                ptr::null(),
                global.as_ptr(),
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueNDRangeKernel")
    }

    pub fn kernel_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        self.enqueue_kernel(api)?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    pub fn set_scalar_arg(&self, api: &Api, value: cl_int) -> Result<(), String> {
        // SAFETY: argument 1 of `s` is an int; a live int of that size is
        // passed (the implementation copies it).
        let status = unsafe {
            (api.set_kernel_arg)(
                self.setarg_kernel.get(),
                1,
                std::mem::size_of::<cl_int>(),
                ptr::from_ref(&value).cast(),
            )
        };
        check(status, "clSetKernelArg")
    }

    /// `calls` clSetKernelArg calls with different values; µs per call.
    pub fn set_arg_calls(&self, api: &Api, calls: usize) -> Result<f64, String> {
        let t = Instant::now();
        for i in 0..calls {
            self.set_scalar_arg(api, i as cl_int)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    }

    /// Self-check only: runs `s` once (global size 1).
    pub fn enqueue_setarg_kernel(&self, api: &Api) -> Result<(), String> {
        let global = [1usize];
        // SAFETY: valid queue/kernel with both arguments set; no events.
        let status = unsafe {
            (api.enqueue_nd_range_kernel)(
                self.queue.get(),
                self.setarg_kernel.get(),
                1,
                ptr::null(),
                global.as_ptr(),
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueNDRangeKernel(s)")
    }

    /// Returns (µs per command over the whole burst, µs per enqueue call).
    pub fn burst(&self, api: &Api, size: usize) -> Result<(f64, f64), String> {
        self.finish(api)?;
        let t = Instant::now();
        for _ in 0..size {
            self.enqueue_kernel(api)?;
        }
        let enqueued = t.elapsed();
        self.finish(api)?;
        let total = t.elapsed();
        let n = size as f64;
        Ok((
            total.as_secs_f64() * 1e6 / n,
            enqueued.as_secs_f64() * 1e6 / n,
        ))
    }
}
