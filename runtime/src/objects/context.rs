//! Contexts: one MirrorCL context spans devices of several vendor platforms; underneath
//! it holds one vendor context per vendor platform, and a transfer queue per device for
//! the data movements the scheduler plans.

use crate::cl::*;
use crate::native::VDevice;
use crate::native::{VContext, VQueue};
use crate::objects::device::Device;
use crate::objects::event::Event;
use crate::objects::handle::{impl_handle, Destructors, Header};
use crate::ClResult;
use mirrorcl_scheduler::Scheduler;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::native::ContextNotify;

/// The vendor context holding this context's devices of one vendor platform.
pub struct VendorContext {
    pub vendor: u32,
    /// Devices of one group share this vendor context (see `Device::group`).
    pub group: u32,
    /// Commands in flight reach it through their event's context, which outlives them,
    /// so it is released (before the notify target) only after the last of them.
    pub vctx: VContext,
    pub devices: Vec<Arc<Device>>,
    /// Page-locked staging of each of its devices (by cluster index), made on first use.
    pub pinned: Vec<(u32, Arc<crate::native::staging::Pinned>)>,
}

/// An internal in-order vendor queue on one device for planned transfers.
#[derive(Clone)]
pub struct TransferQueue {
    pub vqueue: Arc<VQueue>,
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
    /// Per device and host-thread slot: a queue is in order, and one shared by threads
    /// would order their steps differently on each rank (a receive of one thread ahead
    /// of a send of another here, the other way round on the peer: a deadlock).
    transfer_queues: Mutex<HashMap<(u32, usize, bool), TransferQueue>>,
    /// Buffers gone since the scheduler last ran, forgotten at its next run.
    released: Mutex<Vec<mirrorcl_scheduler::BufferId>>,
    /// `released` may hold some: most commands then find nothing to forget without
    /// taking its lock.
    released_any: std::sync::atomic::AtomicBool,
    /// The application's error callback, handed to every vendor context (freed after
    /// them).
    notify: Option<usize>,
    /// `clSetContextDestructorCallback`.
    pub destructors: Destructors,
    /// `clGetSupportedImageFormats` answers per access flags, image type and host-thread
    /// slot: agreeing on them is a collective, which each thread makes on its first ask,
    /// on every rank alike.
    #[allow(clippy::type_complexity)]
    pub image_formats:
        Mutex<HashMap<(cl_mem_flags, cl_mem_object_type, usize), Vec<cl_image_format>>>,
    /// Its number in `MIRRORCL_RECORD`'s stream.
    pub record_id: u64,
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
        let platform = crate::objects::platform::platform();
        let target = notify.map(|(f, d)| {
            Box::into_raw(Box::new(NotifyTarget {
                f,
                data: d as usize,
            }))
        });
        // Local devices per vendor-context group, in device order.
        let mut groups: Vec<(u32, u32, Vec<Arc<Device>>)> = Vec::new();
        for d in devices.iter().filter(|d| d.local()) {
            match groups.iter_mut().find(|(group, _, _)| *group == d.group) {
                Some((_, _, list)) => list.push(d.clone()),
                None => groups.push((d.group, d.vendor, vec![d.clone()])),
            }
        }
        let made: ClResult<Vec<VendorContext>> = groups
            .into_iter()
            .map(|(group, vendor, list)| {
                let vdevs: Vec<&VDevice> = list.iter().filter_map(|d| d.vdev.as_ref()).collect();
                let notify = target.map(|t| (forward_notify as ContextNotify, t as *mut c_void));
                let vctx = platform
                    .vendor(vendor)
                    .platform
                    .create_context(&vdevs, notify)?;
                let pinned = (list.iter())
                    .filter_map(|d| Some((d.index, d.vdev.clone()?)))
                    .map(|(i, vdev)| (i, crate::native::staging::Pinned::new(vctx.clone(), vdev)))
                    .collect();
                Ok(VendorContext {
                    vendor,
                    group,
                    vctx,
                    devices: list,
                    pinned,
                })
            })
            .collect();
        let vendor_contexts = match made {
            Ok(list) => list,
            Err(rc) => {
                // The contexts made before the failure were released by `collect`.
                if let Some(t) = target {
                    // SAFETY: allocated above; no vendor context holds it any more.
                    drop(unsafe { Box::from_raw(t) });
                }
                return Err(rc);
            }
        };
        if devices.iter().any(|d| !d.local()) {
            // Small transfers between ranks stage through these from the first one on.
            for (_, pinned) in vendor_contexts.iter().flat_map(|v| &v.pinned) {
                pinned.prepare_small();
            }
        }
        let mut scheduler = Scheduler::with_done(|e: &Arc<Event>| e.is_done());
        let record_id = crate::cluster::record::next_context();
        for d in &devices {
            crate::cluster::record::device(record_id, d.index, d.scheduled());
            scheduler.add_device(d.index, d.scheduled());
        }
        Ok(Arc::new(Context {
            header: Header::new(),
            devices,
            properties,
            vendor_contexts,
            scheduler: Mutex::new(scheduler),
            transfer_queues: Mutex::new(HashMap::new()),
            released: Mutex::new(Vec::new()),
            released_any: Default::default(),
            notify: target.map(|t| t as usize),
            destructors: Destructors::default(),
            image_formats: Mutex::new(HashMap::new()),
            record_id,
        }))
    }

    pub fn has_device(&self, device: &Device) -> bool {
        self.devices.iter().any(|d| d.index == device.index)
    }

    pub fn device_by_index(&self, index: u32) -> Option<&Arc<Device>> {
        self.devices.iter().find(|d| d.index == index)
    }

    /// The vendor context of a vendor-context group (see `Device::group`).
    pub fn vendor_context_of(&self, group: u32) -> ClResult<&VendorContext> {
        self.vendor_contexts
            .iter()
            .find(|v| v.group == group)
            .ok_or(CL_INVALID_CONTEXT)
    }

    /// `device`'s page-locked staging in this context (a local device of it).
    pub fn pinned(&self, device: &Device) -> Option<&Arc<crate::native::staging::Pinned>> {
        let vc = self
            .vendor_contexts
            .iter()
            .find(|v| v.group == device.group)?;
        vc.pinned
            .iter()
            .find(|(i, _)| *i == device.index)
            .map(|(_, p)| p)
    }

    pub fn vendor_context(&self, device: &Device) -> &VendorContext {
        self.vendor_contexts
            .iter()
            .find(|v| v.group == device.group)
            .expect("every device of a context has its vendor context")
    }

    /// Records that a buffer is gone, without taking the scheduler lock.
    pub fn forget_buffer(&self, id: mirrorcl_scheduler::BufferId) {
        let mut released = self.released.lock();
        released.push(id);
        (self.released_any).store(true, std::sync::atomic::Ordering::Release);
    }

    /// Locks the scheduler, first forgetting buffers released since its last use.
    pub fn lock_scheduler(&self) -> SchedulerLock<'_> {
        let mut sched = self.scheduler.lock();
        if (self.released_any).load(std::sync::atomic::Ordering::Acquire) {
            let mut released = self.released.lock();
            // Under the lock: a buffer released after this sets it again.
            (self.released_any).store(false, std::sync::atomic::Ordering::Relaxed);
            for id in released.drain(..) {
                crate::cluster::record::release(self.record_id, id);
                sched.release_buffer(id);
            }
        }
        SchedulerLock {
            sched,
            _scheduling: crate::cluster::thread_state::Scheduling::begin(),
        }
    }

    /// The transfer queue of `device` for this host thread, created on first use: one
    /// for what leaves the device (`outbound`: reads, often feeding sends), one for what
    /// reaches it. Apart, a read whose bytes another rank waits for never queues behind
    /// a write waiting for bytes from that rank.
    pub fn transfer_queue(&self, device: &Device, outbound: bool) -> ClResult<TransferQueue> {
        let key = (device.index, crate::cluster::host_threads::slot(), outbound);
        let mut queues = self.transfer_queues.lock();
        if let Some(q) = queues.get(&key) {
            return Ok(q.clone());
        }
        // Transfers run on actual devices only.
        let vdev = device.vdev.as_ref().ok_or(CL_INVALID_DEVICE)?;
        let vqueue = self.vendor_context(device).vctx.create_queue(vdev, 0)?;
        let q = TransferQueue {
            vqueue: Arc::new(vqueue),
            stream: new_stream(),
        };
        queues.insert(key, q.clone());
        Ok(q)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // The vendor contexts go before the notify target they report to.
        self.transfer_queues.get_mut().clear();
        self.vendor_contexts.clear();
        if let Some(t) = self.notify.take() {
            // SAFETY: allocated in `new`; the vendor contexts using it are released.
            drop(unsafe { Box::from_raw(t as *mut NotifyTarget) });
        }
        let handle = self as *mut Context as usize;
        self.destructors.run(handle);
    }
}

/// A context's scheduler, locked (`Context::lock_scheduler`). The application callbacks
/// of the events this thread completes meanwhile run when it is dropped, after the lock
/// (fields drop in order).
pub struct SchedulerLock<'a> {
    sched: parking_lot::MutexGuard<'a, Scheduler<Arc<Event>>>,
    _scheduling: crate::cluster::thread_state::Scheduling,
}

impl std::ops::Deref for SchedulerLock<'_> {
    type Target = Scheduler<Arc<Event>>;
    fn deref(&self) -> &Self::Target {
        &self.sched
    }
}

impl std::ops::DerefMut for SchedulerLock<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sched
    }
}
