//! The query family's measured operations, timed many calls at a time:
//! `clGetDeviceInfo(CL_DEVICE_NAME)` and `clGetMemObjectInfo(CL_MEM_SIZE)`.

use std::ptr;
use std::time::Instant;

use opencl3::device::CL_DEVICE_NAME;
use opencl3::memory::{ClMem, CL_MEM_SIZE};
use opencl3::types::cl_mem;

use crate::api::{check, Api};
use crate::target::Target;
use crate::XFER_BYTES;

impl Target {
    /// clGetDeviceInfo(CL_DEVICE_NAME) into `name` (device_name_size bytes).
    pub fn device_name_query(&self, api: &Api, name: &mut [u8]) -> Result<(), String> {
        let mut size = 0usize;
        // SAFETY: valid device; `name` is a live buffer of the length passed.
        let status = unsafe {
            (api.get_device_info)(
                self.device_id,
                CL_DEVICE_NAME,
                name.len(),
                name.as_mut_ptr().cast(),
                &mut size,
            )
        };
        check(status, "clGetDeviceInfo(CL_DEVICE_NAME)")?;
        if size != self.device_name_size {
            return Err(format!(
                "clGetDeviceInfo(CL_DEVICE_NAME) returned {size} bytes, {} before",
                self.device_name_size
            ));
        }
        Ok(())
    }

    /// `calls` clGetDeviceInfo(CL_DEVICE_NAME); µs per call.
    pub fn device_info_calls(
        &self,
        api: &Api,
        name: &mut [u8],
        calls: usize,
    ) -> Result<f64, String> {
        let t = Instant::now();
        for _ in 0..calls {
            self.device_name_query(api, name)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    }

    pub fn mem_size(&self, api: &Api, mem: cl_mem) -> Result<usize, String> {
        let mut size = 0usize;
        // SAFETY: a valid buffer; a live usize-sized output (CL_MEM_SIZE is
        // a size_t).
        let status = unsafe {
            (api.get_mem_object_info)(
                mem,
                CL_MEM_SIZE,
                std::mem::size_of::<usize>(),
                ptr::from_mut(&mut size).cast(),
                ptr::null_mut(),
            )
        };
        check(status, "clGetMemObjectInfo(CL_MEM_SIZE)")?;
        Ok(size)
    }

    /// `calls` clGetMemObjectInfo(CL_MEM_SIZE) on the 16-byte buffer; µs per
    /// call. A wrong size is an error.
    pub fn mem_info_calls(&self, api: &Api, calls: usize) -> Result<f64, String> {
        let mem = self.buffer.get();
        let t = Instant::now();
        for _ in 0..calls {
            let size = self.mem_size(api, mem)?;
            if size != XFER_BYTES {
                return Err(format!(
                    "clGetMemObjectInfo(CL_MEM_SIZE): {size}, expected {XFER_BYTES}"
                ));
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    }
}
