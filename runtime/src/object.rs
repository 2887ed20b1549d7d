//! Handles: every OpenCL object starts with a [`Header`] whose first word is the ICD
//! dispatch pointer (the loader dispatches through it), and every live handle is
//! registered, so that NULL, foreign and released handles are recognised without ever
//! dereferencing them.

use crate::cl::cl_int;
use parking_lot::RwLock;
use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

static DISPATCH: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Sets the dispatch table every new object points to. Called once by the ICD layer
/// before the first object is created.
pub fn set_dispatch(table: *const c_void) {
    DISPATCH.store(table as *mut c_void, Ordering::Release);
}

/// The first field of every object (`#[repr(C)]`): the ICD loader reads the dispatch
/// pointer from the first word of a handle.
#[repr(C)]
pub struct Header {
    dispatch: *const c_void,
    /// The number of references the application holds (clRetain*/clRelease*).
    pub ref_count: AtomicU32,
}

// SAFETY: the dispatch pointer refers to an immutable static table.
unsafe impl Send for Header {}
// SAFETY: as above; the counter is atomic.
unsafe impl Sync for Header {}

impl Header {
    pub fn new() -> Self {
        Header {
            dispatch: DISPATCH.load(Ordering::Acquire),
            ref_count: AtomicU32::new(1),
        }
    }

    pub fn retain(&self) {
        self.ref_count.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops one application reference; true when it was the last.
    pub fn release(&self) -> bool {
        self.ref_count.fetch_sub(1, Ordering::AcqRel) == 1
    }

    pub fn count(&self) -> u32 {
        self.ref_count.load(Ordering::Acquire)
    }
}

impl Default for Header {
    fn default() -> Self {
        Self::new()
    }
}

/// An application callback run when an object is deleted (memory objects, contexts,
/// programs: all handles are pointers, so one signature serves them all).
pub type DestructorFn = unsafe extern "C" fn(*mut c_void, *mut c_void);

/// The destructor callbacks registered on one object.
#[derive(Default)]
pub struct Destructors(parking_lot::Mutex<Vec<(DestructorFn, usize)>>);

impl Destructors {
    pub fn add(&self, f: DestructorFn, data: *mut c_void) {
        self.0.lock().push((f, data as usize));
    }

    /// Runs the callbacks in the reverse order of registration (OpenCL 1.2 §5.4.1).
    /// `handle` is the object's handle, as an address: the object is being deleted.
    pub fn run(&mut self, handle: usize) {
        for (f, data) in self.0.get_mut().drain(..).rev() {
            // SAFETY: the application's callback with its own user data.
            let _ = std::panic::catch_unwind(|| unsafe {
                f(handle as *mut c_void, data as *mut c_void)
            });
        }
    }
}

/// A live object of any kind, as held by the registry.
#[derive(Clone)]
pub enum Object {
    Device(Arc<crate::device::Device>),
    Context(Arc<crate::context::Context>),
    Queue(Arc<crate::queue::Queue>),
    Mem(Arc<crate::memory::Buffer>),
    Program(Arc<crate::program::Program>),
    Kernel(Arc<crate::kernel::Kernel>),
    Event(Arc<crate::event::Event>),
}

fn registry() -> &'static RwLock<HashMap<usize, Object>> {
    static REGISTRY: OnceLock<RwLock<HashMap<usize, Object>>> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::default()))
}

/// A type that has a handle.
pub trait Handle: Sized {
    /// The error code for an invalid handle of this type.
    const INVALID: cl_int;
    fn header(&self) -> &Header;
    fn wrap(this: Arc<Self>) -> Object;
    fn unwrap(obj: &Object) -> Option<&Arc<Self>>;

    /// Registers a new object and returns its handle.
    fn into_handle(this: Arc<Self>) -> *mut c_void {
        let ptr = Arc::as_ptr(&this) as *mut c_void;
        registry().write().insert(ptr as usize, Self::wrap(this));
        ptr
    }

    /// The object behind a handle, or this type's invalid-handle error.
    fn from_handle(handle: *mut c_void) -> Result<Arc<Self>, cl_int> {
        if handle.is_null() {
            return Err(Self::INVALID);
        }
        registry()
            .read()
            .get(&(handle as usize))
            .and_then(Self::unwrap)
            .cloned()
            .ok_or(Self::INVALID)
    }

    fn handle(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }

    fn retain_handle(handle: *mut c_void) -> Result<(), cl_int> {
        Self::from_handle(handle)?.header().retain();
        Ok(())
    }

    /// Drops an application reference; the last one unregisters the handle. Internal
    /// references (pending commands, child objects) keep the object itself alive.
    fn release_handle(handle: *mut c_void) -> Result<Option<Arc<Self>>, cl_int> {
        let obj = Self::from_handle(handle)?;
        if obj.header().release() {
            registry().write().remove(&(handle as usize));
            return Ok(Some(obj));
        }
        Ok(None)
    }
}

macro_rules! impl_handle {
    ($ty:ty, $variant:ident, $invalid:expr) => {
        impl $crate::object::Handle for $ty {
            const INVALID: $crate::cl::cl_int = $invalid;
            fn header(&self) -> &$crate::object::Header {
                &self.header
            }
            fn wrap(this: std::sync::Arc<Self>) -> $crate::object::Object {
                $crate::object::Object::$variant(this)
            }
            fn unwrap(obj: &$crate::object::Object) -> Option<&std::sync::Arc<Self>> {
                match obj {
                    $crate::object::Object::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use impl_handle;
