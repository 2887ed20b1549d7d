//! Contexts: one MirrorCL context spans devices of several vendor platforms; underneath
//! it holds one vendor context per vendor platform, and a transfer queue per device for
//! the data movements the scheduler plans.

use crate::cl::*;
use crate::device::Device;
use crate::event::Event;
use crate::object::{impl_handle, Destructors, Header};
use crate::vendor::V;
use crate::ClResult;
use mirrorcl_scheduler::{DeviceDesc, Scheduler};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub type ContextNotify =
    unsafe extern "C" fn(*const libc::c_char, *const c_void, usize, *mut c_void);

/// The vendor context holding this context's devices of one vendor platform.
pub struct VendorContext {
    pub vendor: u32,
    /// Devices of one group share this vendor context (see `Device::group`).
    pub group: u32,
    pub vctx: V,
    pub devices: Vec<Arc<Device>>,
}

/// An internal in-order vendor queue on one device for planned transfers.
#[derive(Clone, Copy)]
pub struct TransferQueue {
    pub vqueue: V,
    pub stream: u64,
}

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// A fresh stream id: one per vendor queue.
pub fn new_stream() -> u64 {
    NEXT_STREAM.fetch_add(1, Ordering::Relaxed)
}

#[repr(C)]
pub struct Context {
    header: Header,
    pub devices: Vec<Arc<Device>>,
    /// The properties as given, with the terminating 0 (empty when NULL was given).
    pub properties: Vec<cl_context_properties>,
    pub vendor_contexts: Vec<VendorContext>,
    pub scheduler: Mutex<Scheduler<Arc<Event>>>,
    transfer_queues: Mutex<HashMap<u32, TransferQueue>>,
    /// Buffers gone since the scheduler last ran, forgotten at its next run.
    released: Mutex<Vec<mirrorcl_scheduler::BufferId>>,
    /// The application's error callback, handed to every vendor context (freed after
    /// them).
    notify: Option<usize>,
    /// `clSetContextDestructorCallback`.
    pub destructors: Destructors,
}

/// The application's `pfn_notify` and `user_data`, passed to vendor contexts so their
/// error reports reach the application.
pub struct NotifyTarget {
    f: ContextNotify,
    data: usize,
}

unsafe extern "C" fn forward_notify(
    errinfo: *const libc::c_char,
    private: *const c_void,
    cb: usize,
    target: *mut c_void,
) {
    // SAFETY: `target` is the NotifyTarget the context owns; it outlives its vendor contexts.
    let t = unsafe { &*(target as *const NotifyTarget) };
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the application's callback with its own user data.
        unsafe { (t.f)(errinfo, private, cb, t.data as *mut c_void) }
    });
}

impl_handle!(Context, Context, CL_INVALID_CONTEXT);

impl Context {
    pub fn new(
        devices: Vec<Arc<Device>>,
        properties: Vec<cl_context_properties>,
        notify: Option<(ContextNotify, *mut c_void)>,
    ) -> ClResult<Arc<Context>> {
        let platform = crate::platform::platform();
        let target = notify.map(|(f, d)| {
            Box::into_raw(Box::new(NotifyTarget {
                f,
                data: d as usize,
            }))
        });
        let mut vendor_contexts: Vec<VendorContext> = Vec::new();
        for d in devices.iter().filter(|d| d.local) {
            match vendor_contexts.iter_mut().find(|v| v.group == d.group) {
                Some(v) => v.devices.push(d.clone()),
                None => vendor_contexts.push(VendorContext {
                    vendor: d.vendor,
                    group: d.group,
                    vctx: V::NULL,
                    devices: vec![d.clone()],
                }),
            }
        }
        for v in &mut vendor_contexts {
            let vendor = platform.vendor(v.vendor);
            let props: [cl_context_properties; 3] = [
                CL_CONTEXT_PLATFORM as cl_context_properties,
                vendor.platform.0 as cl_context_properties,
                0,
            ];
            let vdevs: Vec<cl_device_id> = v.devices.iter().map(|d| d.vdev.0).collect();
            let create = vfn!(vendor.platform.0, clCreateContext)?;
            let mut err = CL_SUCCESS;
            // SAFETY: valid property list and vendor device handles of this vendor.
            let vctx = unsafe {
                create(
                    props.as_ptr(),
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    target.map(|_| forward_notify as unsafe extern "C" fn(_, _, _, _)),
                    target.map_or(std::ptr::null_mut(), |t| t as *mut c_void),
                    &mut err,
                )
            };
            if err != CL_SUCCESS || vctx.is_null() {
                release_vendor_contexts(&vendor_contexts);
                if let Some(t) = target {
                    // SAFETY: allocated above; no vendor context holds it any more.
                    drop(unsafe { Box::from_raw(t) });
                }
                return Err(if err == CL_SUCCESS {
                    CL_OUT_OF_RESOURCES
                } else {
                    err
                });
            }
            v.vctx = V(vctx);
        }
        let mut scheduler = Scheduler::new();
        for d in &devices {
            scheduler.add_device(
                d.index,
                DeviceDesc {
                    owner: d.owner,
                    group: d.owner_group,
                },
            );
        }
        Ok(Arc::new(Context {
            header: Header::new(),
            devices,
            properties,
            vendor_contexts,
            scheduler: Mutex::new(scheduler),
            transfer_queues: Mutex::new(HashMap::new()),
            released: Mutex::new(Vec::new()),
            notify: target.map(|t| t as usize),
            destructors: Destructors::default(),
        }))
    }

    pub fn has_device(&self, device: &Device) -> bool {
        self.devices.iter().any(|d| d.index == device.index)
    }

    pub fn device_by_index(&self, index: u32) -> Option<&Arc<Device>> {
        self.devices.iter().find(|d| d.index == index)
    }

    pub fn vendor_context(&self, device: &Device) -> &VendorContext {
        self.vendor_contexts
            .iter()
            .find(|v| v.group == device.group)
            .expect("every device of a context has its vendor context")
    }

    /// Records that a buffer is gone, without taking the scheduler lock.
    pub fn forget_buffer(&self, id: mirrorcl_scheduler::BufferId) {
        self.released.lock().push(id);
    }

    /// Locks the scheduler, first forgetting buffers released since its last use.
    pub fn lock_scheduler(&self) -> parking_lot::MutexGuard<'_, Scheduler<Arc<Event>>> {
        let mut sched = self.scheduler.lock();
        for id in self.released.lock().drain(..) {
            sched.release_buffer(id);
        }
        sched
    }

    /// The transfer queue of `device`, created on first use.
    pub fn transfer_queue(&self, device: &Device) -> ClResult<TransferQueue> {
        let mut queues = self.transfer_queues.lock();
        if let Some(q) = queues.get(&device.index) {
            return Ok(*q);
        }
        debug_assert!(device.local, "transfers run on actual devices only");
        let vctx = self.vendor_context(device).vctx;
        let vqueue = create_vendor_queue(vctx, device.vdev, 0)?;
        let q = TransferQueue {
            vqueue,
            stream: new_stream(),
        };
        queues.insert(device.index, q);
        Ok(q)
    }
}

/// A vendor in-order queue (`clCreateCommandQueue` is in every vendor's table).
pub fn create_vendor_queue(
    vctx: V,
    vdev: V,
    properties: cl_command_queue_properties,
) -> ClResult<V> {
    let create = vfn!(vctx.0, clCreateCommandQueue)?;
    let mut err = CL_SUCCESS;
    // SAFETY: live vendor context and device.
    #[allow(deprecated)]
    let q = unsafe { create(vctx.0, vdev.0, properties, &mut err) };
    crate::check(err)?;
    Ok(V(q))
}

fn release_vendor_contexts(list: &[VendorContext]) {
    for v in list.iter().filter(|v| !v.vctx.0.is_null()) {
        if let Ok(f) = vfn!(v.vctx.0, clReleaseContext) {
            // SAFETY: we own one reference.
            unsafe { f(v.vctx.0) };
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        for q in self.transfer_queues.get_mut().values() {
            if let Ok(f) = vfn!(q.vqueue.0, clReleaseCommandQueue) {
                // SAFETY: we own one reference.
                unsafe { f(q.vqueue.0) };
            }
        }
        release_vendor_contexts(&self.vendor_contexts);
        if let Some(t) = self.notify.take() {
            // SAFETY: allocated in `new`; the vendor contexts using it are released.
            drop(unsafe { Box::from_raw(t as *mut NotifyTarget) });
        }
        let handle = self as *mut Context as usize;
        self.destructors.run(handle);
    }
}
