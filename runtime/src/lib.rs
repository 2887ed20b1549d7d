//! MirrorCL's runtime: the objects behind the OpenCL handles, the vendor platforms they
//! drive, one issuer thread per actual device, and the glue to the scheduler.
//!
//! The `icd` crate validates arguments and converts handles; everything it calls lives
//! here. See `docs/architecture.md` for the data path of one command.

pub mod cluster;
pub mod enqueue;
pub mod native;
pub mod objects;
pub mod observe;

pub use opencl_sys as cl;

/// The result of anything that can fail with an OpenCL error code.
pub type ClResult<T> = Result<T, cl::cl_int>;

/// Turns a vendor status code into a result.
#[inline]
pub fn check(code: cl::cl_int) -> ClResult<()> {
    if code == cl::CL_SUCCESS {
        Ok(())
    } else {
        Err(code)
    }
}

/// A NUL-terminated byte string as Rust text.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
