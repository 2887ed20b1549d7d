//! Answers to `clGet*Info` queries, and the array arguments of entry points.

use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::event::Event;
use mirrorcl_runtime::object::Handle;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

/// The bytes of one query answer.
pub struct Info(pub Vec<u8>);

impl Info {
    pub fn value<T: Copy>(v: T) -> Info {
        Info::slice(std::slice::from_ref(&v))
    }

    pub fn slice<T: Copy>(v: &[T]) -> Info {
        let len = std::mem::size_of_val(v);
        let mut out = vec![0u8; len];
        // SAFETY: `out` has exactly the byte size of `v`; T is plain data.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), len) };
        Info(out)
    }

    pub fn text(s: &str) -> Info {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        Info(v)
    }

    /// Writes the answer per the specification: `CL_INVALID_VALUE` if `size` is smaller
    /// than the answer and `value` is not NULL.
    pub fn write(&self, size: usize, value: *mut c_void, size_ret: *mut usize) -> ClResult<()> {
        if !value.is_null() {
            if size < self.0.len() {
                return Err(CL_INVALID_VALUE);
            }
            // SAFETY: the application guarantees `size` writable bytes at `value`.
            unsafe {
                std::ptr::copy_nonoverlapping(self.0.as_ptr(), value as *mut u8, self.0.len())
            };
        }
        if !size_ret.is_null() {
            // SAFETY: valid out-pointer or NULL.
            unsafe { *size_ret = self.0.len() };
        }
        Ok(())
    }
}

/// An array argument `(count, pointer)`; NULL with a zero count is empty.
pub fn array<'a, T>(ptr: *const T, n: usize) -> &'a [T] {
    if ptr.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: the application passes `n` readable elements at `ptr`.
        unsafe { std::slice::from_raw_parts(ptr, n) }
    }
}

/// Converts an event wait list: `CL_INVALID_EVENT_WAIT_LIST` for a NULL list with a
/// count, a list without one, or an invalid event; `CL_INVALID_CONTEXT` for an event of
/// another context (when `context` is given).
pub fn wait_list(
    n: cl_uint,
    list: *const cl_event,
    context: Option<&Arc<mirrorcl_runtime::context::Context>>,
) -> ClResult<Vec<Arc<Event>>> {
    if (n > 0 && list.is_null()) || (n == 0 && !list.is_null()) {
        return Err(CL_INVALID_EVENT_WAIT_LIST);
    }
    let mut out = Vec::with_capacity(n as usize);
    for &e in array(list, n as usize) {
        let ev = Event::from_handle(e).map_err(|_| CL_INVALID_EVENT_WAIT_LIST)?;
        if let Some(ctx) = context {
            if !Arc::ptr_eq(&ev.context, ctx) {
                return Err(CL_INVALID_CONTEXT);
            }
        }
        out.push(ev);
    }
    Ok(out)
}

/// Hands an event to the application if it asked for one.
pub fn return_event(event: Arc<Event>, out: *mut cl_event) {
    if !out.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *out = Event::into_handle(event) };
    }
}
