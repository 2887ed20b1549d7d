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
//! kernel's arguments on that device's issuer thread, and a probe kernel's only while
//! creating its kernel and from the application's `clSetKernelArg` on it (which the
//! application must not run on one kernel from two threads at once).

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
        pub struct $name(pub(super) NonNull<c_void>);

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
            pub(super) fn table(&self) -> &_cl_icd_dispatch {
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

mod context;
mod event;
mod image;
mod memory;
mod platform;
mod program;
mod queue;

pub use context::{ContextKey, VContext};
pub use event::{EventNotify, VEvent};
pub use image::{ImageAt, VSampler};
pub use memory::VMem;
pub use platform::{ContextNotify, VDevice, VPlatform};
pub use program::{VKernel, VProgram};
pub use queue::{Rect, VQueue};
