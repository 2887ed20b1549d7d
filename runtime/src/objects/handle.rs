//! Handles: every OpenCL object starts with a [`Header`] whose first word is the ICD
//! dispatch pointer (the loader dispatches through it), and every handle given out is
//! registered until its object is deleted, so that NULL, foreign and deleted handles are
//! recognised without ever dereferencing them.
//!
//! An object lives while the application holds a reference (`clRetain*`/`clRelease*`,
//! the registry's strong reference) or anything else uses it (a queue its context, a
//! kernel its program, a sub-buffer its parent, a command its buffers): OpenCL 1.2
//! §5.x keeps it until both are gone, and a handle read back from a live object
//! (`CL_QUEUE_CONTEXT` after `clReleaseContext`) stays valid, as C++ bindings expect.

use crate::cl::cl_int;
use parking_lot::RwLock;
use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, Weak};

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
    /// Whether the object was given a handle (its registry entry goes with it).
    registered: AtomicBool,
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
            registered: AtomicBool::new(false),
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

impl Drop for Header {
    fn drop(&mut self) {
        // The header is the object's first field: its address is the handle. Removed
        // before the memory is freed, so a new object at this address is not mistaken
        // for this one.
        if self.registered.load(Ordering::Acquire) {
            registry().write().remove(&(self as *const Header as usize));
        }
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

/// A live object of any kind: the application's reference, held by the registry.
#[derive(Clone)]
pub enum Object {
    Device(Arc<crate::objects::device::Device>),
    Context(Arc<crate::objects::context::Context>),
    Queue(Arc<crate::objects::queue::Queue>),
    Mem(Arc<crate::objects::memory::Buffer>),
    Program(Arc<crate::objects::program::Program>),
    Kernel(Arc<crate::objects::kernel::Kernel>),
    Event(Arc<crate::objects::event::Event>),
    Sampler(Arc<crate::objects::sampler::Sampler>),
}

/// An object of any kind, not kept alive.
#[derive(Clone)]
pub enum WeakObject {
    Device(Weak<crate::objects::device::Device>),
    Context(Weak<crate::objects::context::Context>),
    Queue(Weak<crate::objects::queue::Queue>),
    Mem(Weak<crate::objects::memory::Buffer>),
    Program(Weak<crate::objects::program::Program>),
    Kernel(Weak<crate::objects::kernel::Kernel>),
    Event(Weak<crate::objects::event::Event>),
    Sampler(Weak<crate::objects::sampler::Sampler>),
}

/// A handle's entry: the object, and the application's reference while it holds one.
struct Entry {
    object: WeakObject,
    application: Option<Object>,
}

fn registry() -> &'static RwLock<HashMap<usize, Entry>> {
    static REGISTRY: OnceLock<RwLock<HashMap<usize, Entry>>> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::default()))
}

/// The handles this thread looked up lately. The registry's lock costs two atomic
/// operations a look-up, and a solver's loop looks up its kernels, buffers and queues
/// over and over (two look-ups for every `clSetKernelArg`). An entry holds a weak
/// reference: it cannot make a deleted object valid again (its upgrade fails, as the
/// registry's would), and while it is held no other object can be allocated at that
/// address, so it cannot stand for another object either.
mod recent {
    use super::WeakObject;
    use std::cell::RefCell;

    /// Entries, direct-mapped by address (a power of two).
    const SLOTS: usize = 256;

    thread_local! {
        static RECENT: RefCell<Vec<(usize, Option<WeakObject>)>> = const { RefCell::new(Vec::new()) };
    }

    fn slot(handle: usize) -> usize {
        // Objects are at least 16-byte aligned; the multiplication mixes higher bits in.
        (handle >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - SLOTS.trailing_zeros())
    }

    /// What `of` makes of this thread's entry for `handle`, if it has one.
    pub fn find<T>(handle: usize, of: impl FnOnce(&WeakObject) -> T) -> Option<T> {
        RECENT
            .try_with(|r| match r.try_borrow().ok()?.get(slot(handle))? {
                (h, Some(o)) if *h == handle => Some(of(o)),
                _ => None,
            })
            .ok()
            .flatten()
    }

    /// Notes the live object behind `handle`.
    pub fn keep(handle: usize, object: WeakObject) {
        let old = RECENT.try_with(|r| {
            let mut r = r.try_borrow_mut().ok()?;
            if r.is_empty() {
                r.resize_with(SLOTS, || (0, None));
            }
            Some(std::mem::replace(
                &mut r[slot(handle)],
                (handle, Some(object)),
            ))
        });
        // The entry replaced goes once the borrow has ended: a weak reference's last
        // drop frees the object's memory.
        drop(old);
    }
}

/// A type that has a handle.
pub trait Handle: Sized {
    /// The error code for an invalid handle of this type.
    const INVALID: cl_int;
    fn header(&self) -> &Header;
    fn wrap(this: Arc<Self>) -> Object;
    fn wrap_weak(this: &Arc<Self>) -> WeakObject;
    fn unwrap_weak(obj: &WeakObject) -> Option<&Weak<Self>>;

    /// Registers a new object, with the application's one reference, and returns its
    /// handle.
    fn into_handle(this: Arc<Self>) -> *mut c_void {
        let ptr = Arc::as_ptr(&this) as *mut c_void;
        this.header().registered.store(true, Ordering::Release);
        let entry = Entry {
            object: Self::wrap_weak(&this),
            application: Some(Self::wrap(this)),
        };
        registry().write().insert(ptr as usize, entry);
        ptr
    }

    /// The object behind a handle, or this type's invalid-handle error.
    fn from_handle(handle: *mut c_void) -> Result<Arc<Self>, cl_int> {
        if handle.is_null() {
            return Err(Self::INVALID);
        }
        if let Some(known) = recent::find(handle as usize, |o| {
            Self::unwrap_weak(o).and_then(Weak::upgrade)
        }) {
            return known.ok_or(Self::INVALID);
        }
        let registry = registry().read();
        let entry = registry.get(&(handle as usize)).ok_or(Self::INVALID)?;
        let found = Self::unwrap_weak(&entry.object)
            .and_then(Weak::upgrade)
            .ok_or(Self::INVALID)?;
        let object = entry.object.clone();
        drop(registry);
        recent::keep(handle as usize, object);
        Ok(found)
    }

    fn handle(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }

    /// One more application reference; the first again (a handle read back from a live
    /// object) takes the application's hold on it again.
    fn retain_handle(handle: *mut c_void) -> Result<(), cl_int> {
        let obj = Self::from_handle(handle)?;
        let mut registry = registry().write();
        let entry = registry.get_mut(&(handle as usize)).ok_or(Self::INVALID)?;
        if entry.application.is_none() {
            entry.application = Some(Self::wrap(obj.clone()));
        }
        obj.header().retain();
        drop(registry);
        Ok(())
    }

    /// Drops an application reference. The last one lets go of the application's hold:
    /// the object is deleted (and its handle unregistered) once nothing else uses it.
    /// Returns the object when that was the last application reference.
    fn release_handle(handle: *mut c_void) -> Result<Option<Arc<Self>>, cl_int> {
        let obj = Self::from_handle(handle)?;
        let mut registry = registry().write();
        // A handle whose application references are all released is invalid to
        // release again, even while something else keeps the object.
        if obj.header().count() == 0 {
            return Err(Self::INVALID);
        }
        if !obj.header().release() {
            return Ok(None);
        }
        let hold = registry
            .get_mut(&(handle as usize))
            .and_then(|e| e.application.take());
        // Objects are deleted (and take the registry lock) only after it is released.
        drop(registry);
        drop(hold);
        Ok(Some(obj))
    }
}

macro_rules! impl_handle {
    ($ty:ty, $variant:ident, $invalid:expr) => {
        impl $crate::objects::handle::Handle for $ty {
            const INVALID: $crate::cl::cl_int = $invalid;
            fn header(&self) -> &$crate::objects::handle::Header {
                &self.header
            }
            fn wrap(this: std::sync::Arc<Self>) -> $crate::objects::handle::Object {
                $crate::objects::handle::Object::$variant(this)
            }
            fn wrap_weak(this: &std::sync::Arc<Self>) -> $crate::objects::handle::WeakObject {
                $crate::objects::handle::WeakObject::$variant(std::sync::Arc::downgrade(this))
            }
            fn unwrap_weak(
                obj: &$crate::objects::handle::WeakObject,
            ) -> Option<&std::sync::Weak<Self>> {
                match obj {
                    $crate::objects::handle::WeakObject::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use impl_handle;
