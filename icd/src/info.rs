//! Answers to `clGet*Info` queries, and the array arguments of entry points.

use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::event::Event;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

/// One `clGet*Info` function: how its handles (one, or one and a device or an index)
/// become the object asked about, or the handle's error, and how a parameter of that
/// object becomes an answer, or `CL_INVALID_VALUE`. [`get_info`] does the rest, the same
/// for every query.
pub(crate) trait InfoQuery {
    type Handles;
    type Object;
    fn object(handles: Self::Handles) -> ClResult<Self::Object>;
    fn answer(object: &Self::Object, param: cl_uint) -> ClResult<Info>;
}

/// A `clGet*Info` call: the object, its answer, and the answer written per the
/// specification.
#[inline]
pub(crate) fn get_info<Q: InfoQuery>(
    handles: Q::Handles,
    param: cl_uint,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let object = Q::object(handles)?;
    Q::answer(&object, param)?.write(size, value, size_ret)
}

/// One query answer.
pub struct Info(Answer);

enum Answer {
    Bytes(Vec<u8>),
    /// `CL_PROGRAM_BINARIES`: the answer is an array of pointers the application gives,
    /// and each binary is copied to where its pointer points.
    Binaries(Vec<Vec<u8>>),
}

impl Info {
    #[inline]
    pub fn bytes(v: Vec<u8>) -> Info {
        Info(Answer::Bytes(v))
    }

    #[inline]
    pub fn value<T: Copy>(v: T) -> Info {
        Info::slice(std::slice::from_ref(&v))
    }

    #[inline]
    pub fn slice<T: Copy>(v: &[T]) -> Info {
        let len = std::mem::size_of_val(v);
        let mut out = vec![0u8; len];
        // SAFETY: `out` has exactly the byte size of `v`; T is plain data.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), len) };
        Info::bytes(out)
    }

    #[inline]
    pub fn text(s: &str) -> Info {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        Info::bytes(v)
    }

    pub fn binaries(bins: Vec<Vec<u8>>) -> Info {
        Info(Answer::Binaries(bins))
    }

    /// The answer's size in bytes.
    #[inline]
    fn len(&self) -> usize {
        match &self.0 {
            Answer::Bytes(b) => b.len(),
            Answer::Binaries(bins) => bins.len() * std::mem::size_of::<*mut u8>(),
        }
    }

    /// Writes the answer per the specification: `CL_INVALID_VALUE` if `size` is smaller
    /// than the answer and `value` is not NULL.
    #[inline]
    pub fn write(&self, size: usize, value: *mut c_void, size_ret: *mut usize) -> ClResult<()> {
        let len = self.len();
        if !value.is_null() {
            if size < len {
                return Err(CL_INVALID_VALUE);
            }
            match &self.0 {
                // SAFETY: the application guarantees `size` writable bytes at `value`.
                Answer::Bytes(b) => unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), value as *mut u8, len)
                },
                Answer::Binaries(bins) => {
                    let ptrs = value as *const *mut u8;
                    for (i, b) in bins.iter().enumerate() {
                        // SAFETY: `bins.len()` pointers (the size was checked); each
                        // non-NULL one points to a buffer of at least
                        // CL_PROGRAM_BINARY_SIZES[i] bytes.
                        let dst = unsafe { *ptrs.add(i) };
                        if !dst.is_null() {
                            // SAFETY: as above.
                            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst, b.len()) };
                        }
                    }
                }
            }
        }
        if !size_ret.is_null() {
            // SAFETY: valid out-pointer.
            unsafe { *size_ret = len };
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
    context: Option<&Arc<mirrorcl_runtime::objects::context::Context>>,
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
        mirrorcl_runtime::objects::event::keep_while_awaited(&ev);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(info: &Info, size: usize, value: *mut c_void) -> (ClResult<()>, usize) {
        let mut ret = usize::MAX;
        (info.write(size, value, &mut ret), ret)
    }

    #[test]
    fn size_query_without_value() {
        let (r, ret) = write(&Info::value::<cl_uint>(7), 0, std::ptr::null_mut());
        assert_eq!((r, ret), (Ok(()), 4));
        let r = Info::text("ab").write(0, std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(r, Ok(()));
    }

    #[test]
    fn too_small_is_invalid_value_and_writes_nothing() {
        let mut out = [0xAAu8; 3];
        let (r, ret) = write(&Info::text("abc"), 3, out.as_mut_ptr().cast());
        assert_eq!(r, Err(CL_INVALID_VALUE));
        assert_eq!(ret, usize::MAX);
        assert_eq!(out, [0xAA; 3]);
    }

    #[test]
    fn exact_and_larger_sizes_write_the_answer() {
        let mut out = [0xAAu8; 6];
        let (r, ret) = write(&Info::text("abc"), 6, out.as_mut_ptr().cast());
        assert_eq!((r, ret), (Ok(()), 4));
        assert_eq!(out, [b'a', b'b', b'c', 0, 0xAA, 0xAA]);
        let mut v: cl_ulong = 0;
        let (r, ret) = write(
            &Info::value::<cl_ulong>(42),
            8,
            (&mut v as *mut cl_ulong).cast(),
        );
        assert_eq!((r, ret, v), (Ok(()), 8, 42));
    }

    #[test]
    fn binaries_copy_to_the_given_pointers() {
        let info = Info::binaries(vec![vec![1, 2], vec![3]]);
        let ptr_size = std::mem::size_of::<*mut u8>();
        let (r, ret) = write(&info, 0, std::ptr::null_mut());
        assert_eq!((r, ret), (Ok(()), 2 * ptr_size));
        let mut first = [0u8; 2];
        let mut ptrs = [first.as_mut_ptr(), std::ptr::null_mut()];
        let (r, _) = write(&info, ptr_size, ptrs.as_mut_ptr().cast());
        assert_eq!(r, Err(CL_INVALID_VALUE));
        let (r, ret) = write(&info, 2 * ptr_size, ptrs.as_mut_ptr().cast());
        assert_eq!((r, ret), (Ok(()), 2 * ptr_size));
        assert_eq!(first, [1, 2]);
    }

    /// A query whose objects are numbers: `get_info` converts, answers and writes.
    struct Doubling;

    impl InfoQuery for Doubling {
        type Handles = (u32,);
        type Object = u32;
        fn object((h,): (u32,)) -> ClResult<u32> {
            if h == 0 {
                Err(CL_INVALID_MEM_OBJECT)
            } else {
                Ok(h)
            }
        }
        fn answer(object: &u32, param: cl_uint) -> ClResult<Info> {
            match param {
                1 => Ok(Info::value::<cl_uint>(object * 2)),
                _ => Err(CL_INVALID_VALUE),
            }
        }
    }

    #[test]
    fn get_info_orders_handle_param_then_size_errors() {
        let mut v: cl_uint = 0;
        let out = (&mut v as *mut cl_uint).cast();
        let null = std::ptr::null_mut();
        assert_eq!(
            get_info::<Doubling>((0,), 9, 0, out, null),
            Err(CL_INVALID_MEM_OBJECT)
        );
        assert_eq!(
            get_info::<Doubling>((3,), 9, 4, out, null),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(
            get_info::<Doubling>((3,), 1, 2, out, null),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(get_info::<Doubling>((3,), 1, 4, out, null), Ok(()));
        assert_eq!(v, 6);
    }
}
