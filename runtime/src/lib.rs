//! MirrorCL's runtime: the objects behind the OpenCL handles, the vendor platforms they
//! drive, one issuer thread per actual device, and the glue to the scheduler.
//!
//! The `icd` crate validates arguments and converts handles; everything it calls lives
//! here. See `docs/architecture.md` for the data path of one command.

pub mod comm;
pub mod config;
pub mod context;
pub mod device;
pub mod enqueue;
pub mod event;
pub mod history;
pub mod host_threads;
pub mod image;
pub mod issuer;
pub mod kernel;
pub mod memory;
pub mod node;
pub mod object;
pub mod platform;
pub mod program;
pub mod queue;
pub mod races;
pub mod record;
pub mod remote;
pub mod replica;
pub mod sampler;
pub mod spin;
pub mod stats;
pub mod trace;
pub mod vendor;
pub mod verify;
pub mod wire;

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
