//! MirrorCL's runtime: everything the `icd` crate calls once it has validated an API
//! call's arguments and converted its handles. Five layers, each a folder that uses only
//! those below it (`docs/architecture.md`, "Layers"; `tests/layers.rs` holds the order):
//! `observe` < `cluster` < `native` < `objects` < `enqueue`.

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
