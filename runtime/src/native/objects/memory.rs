//! Buffers and sub-buffers.

use super::*;

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
