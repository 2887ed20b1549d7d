//! The memory-object family's measured operation: `clCreateBuffer` (4 KiB, no
//! host pointer) + `clReleaseMemObject`.

use std::ptr;
use std::time::Instant;

use opencl3::error_codes::CL_SUCCESS;
use opencl3::memory::CL_MEM_READ_WRITE;
use opencl3::types::{cl_int, cl_mem};

use crate::api::{check, Api};
use crate::target::Target;
use crate::CREATE_BYTES;

impl Target {
    pub fn create_buffer(&self, api: &Api) -> Result<cl_mem, String> {
        let mut status: cl_int = CL_SUCCESS;
        // SAFETY: a valid context, no host pointer; the status goes to a
        // live int.
        let mem = unsafe {
            (api.create_buffer)(
                self.context.get(),
                CL_MEM_READ_WRITE,
                CREATE_BYTES,
                ptr::null_mut(),
                &mut status,
            )
        };
        check(status, "clCreateBuffer")?;
        if mem.is_null() {
            return Err("clCreateBuffer returned CL_SUCCESS and a null buffer".into());
        }
        Ok(mem)
    }

    pub fn release_mem(&self, api: &Api, mem: cl_mem) -> Result<(), String> {
        // SAFETY: `mem` came from create_buffer and is released once.
        check(
            unsafe { (api.release_mem_object)(mem) },
            "clReleaseMemObject",
        )
    }

    /// clCreateBuffer (4 KiB) + clReleaseMemObject.
    pub fn create_release(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let mem = self.create_buffer(api)?;
        self.release_mem(api, mem)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }
}
