//! An event's vendor side: the vendor event a command was issued as, shared by the
//! commands it stands for, and how a vendor queue can wait for an event.

use super::*;

/// A vendor event, with the final status a poll found: the other commands it stands
/// for (a kernel and the read after it, the writes a merged write carries) are then
/// found done without asking the vendor again.
pub struct SharedVEvent {
    ev: VEvent,
    /// `NOT_FOUND` until a poll found the vendor done with it.
    found: AtomicI32,
}

const NOT_FOUND: cl_int = cl_int::MAX;

impl SharedVEvent {
    pub fn new(ev: VEvent) -> SharedVEvent {
        SharedVEvent {
            ev,
            found: AtomicI32::new(NOT_FOUND),
        }
    }

    /// The final status, if the vendor is done with the command.
    fn final_status(&self) -> Option<cl_int> {
        let found = self.found.load(Ordering::Acquire);
        if found != NOT_FOUND {
            return Some(found);
        }
        match self.ev.status() {
            Ok(status) if status <= CL_COMPLETE => {
                self.found.store(status, Ordering::Release);
                Some(status)
            }
            _ => None,
        }
    }
}

impl std::ops::Deref for SharedVEvent {
    type Target = VEvent;
    fn deref(&self) -> &VEvent {
        &self.ev
    }
}

/// The vendor event a command was issued as.
pub struct VendorEvent {
    /// Shared by the commands it stands for (`IssuerState::back_with`) without asking
    /// the vendor for a reference each.
    pub ev: Arc<SharedVEvent>,
    /// The vendor context it belongs to: only there can it be waited on directly.
    pub context: ContextKey,
    pub stream: u64,
}

impl Event {
    pub fn vendor(&self) -> Option<&VendorEvent> {
        self.vendor.get()
    }

    /// Its kernel goes to the vendor without a vendor event (`issuer::Unbacked`).
    pub fn set_unbacked(&self) {
        self.unbacked.store(true, Ordering::Release);
    }

    /// Launched without a vendor event, and neither backed by one nor done yet.
    pub fn is_unbacked(&self) -> bool {
        self.unbacked.load(Ordering::Acquire) && self.vendor().is_none() && !self.is_done()
    }

    /// Something needs this unbacked kernel's completion: its issuer backs it.
    pub fn request_backing(&self) {
        if let Some(q) = self.queue() {
            if q.device.local() {
                q.device.issuer().back();
            }
        }
    }

    /// The command reached its vendor: it now completes with the vendor event.
    pub fn attach_vendor(self: &Arc<Self>, vendor: VendorEvent) {
        if self.vendor.set(vendor).is_err() {
            tracing::error!("a command was issued twice; keeping its first vendor event");
            return;
        }
        let wants_callback = {
            // Set before the lock is taken: a waiter that found no vendor event under
            // the lock is parked by the time this notifies.
            let st = self.state.lock();
            self.done.notify_all();
            !st.callbacks.is_empty()
        };
        self.advance(CL_SUBMITTED);
        if wants_callback {
            self.request_vendor_callback();
        }
    }

    /// Whether a vendor queue of `context` (in-order stream `stream`) can wait for this
    /// event by itself: it is done, or issued there, or it only joins events that are
    /// (looked through `depth` joins deep). A command left out here, or run on another
    /// rank, completes once its wait list has; holding a command for it until then
    /// would cost a completion round trip on the host per command of a chain.
    pub fn vendor_waitable(&self, context: Option<ContextKey>, stream: u64, depth: u32) -> bool {
        if self.is_done() {
            return true;
        }
        if let Some(v) = self.vendor() {
            return v.stream == stream || Some(v.context) == context;
        }
        if self.is_unbacked() {
            // Its vendor queue's order is the only way to wait for it.
            return self.stream == stream;
        }
        depth > 0
            && self.joins.get().is_some_and(|joins| {
                joins.iter().all(|j| {
                    j.upgrade()
                        .is_some_and(|e| e.vendor_waitable(context, stream, depth - 1))
                })
            })
    }

    /// For a `vendor_waitable` event: the events not done whose vendor events stand
    /// for it, appended to `out` (none on `stream`, which is in order).
    pub fn vendor_stand_ins(self: &Arc<Self>, stream: u64, out: &mut StandIns) {
        if self.is_done() {
            return;
        }
        match self.vendor() {
            Some(v) if v.stream == stream => {}
            Some(_) => out.push(self.clone()),
            None => {
                for e in (self.joins.get().into_iter().flatten()).filter_map(Weak::upgrade) {
                    e.vendor_stand_ins(stream, out);
                }
            }
        }
    }

    /// Asks the vendor to report completion (once), if the command reached it. On an
    /// issuer, with no application callback, the issuer polls the event instead and
    /// registers the callback only when it parks: NVIDIA enqueues 3-5 µs slower while
    /// callbacks are pending. The issuer asks here right after the vendor call, so it
    /// does not poll first (the command was just enqueued): a merged write backs the
    /// writes it carries, and one poll each held the kernel after them.
    pub(super) fn request_vendor_callback(self: &Arc<Self>) {
        if self.vendor().is_none() {
            if self.is_unbacked() {
                self.request_backing();
            }
            return;
        }
        {
            let mut st = self.state.lock();
            if st.vendor_callback {
                return;
            }
            st.vendor_callback = true;
        }
        if (!self.has_user_callbacks() && crate::objects::issuer::watch(self, false)) || self.poll()
        {
            return;
        }
        self.register_vendor_callback();
    }

    /// `clSetEventCallback` on the vendor event, which exists.
    pub(crate) fn register_vendor_callback(self: &Arc<Self>) {
        let Some(vendor) = self.vendor() else {
            return;
        };
        let raw = Arc::into_raw(self.clone()) as *mut c_void;
        let traced = crate::observe::trace::begin();
        // SAFETY: the trampoline takes back the Arc passed here, exactly once.
        let rc = unsafe { vendor.ev.on_complete(vendor_complete, raw) };
        if traced != 0 {
            crate::observe::trace::span(
                "vendor",
                "clSetEventCallback",
                traced,
                crate::trace_args![],
            );
        }
        match rc {
            // Some vendors (PoCL 3.1) never call back for an event already complete
            // when the callback is registered, which the specification requires.
            Ok(()) => {
                if !self.poll() && !self.has_user_callbacks() {
                    crate::objects::issuer::watch(self, true);
                }
            }
            Err(rc) => {
                // SAFETY: the callback was not registered, so the reference is still ours.
                drop(unsafe { Arc::from_raw(raw as *const Event) });
                tracing::error!("vendor clSetEventCallback failed ({rc}); waiting on the event");
                self.wait_vendor(vendor);
            }
        }
    }

    /// Blocks in the vendor until its event is done, then completes this event.
    pub(super) fn wait_vendor(self: &Arc<Self>, vendor: &VendorEvent) {
        // A failed wait is found by the poll below (or the deadline).
        let _ = vendor.ev.wait();
        self.poll();
    }

    /// Checks the vendor event; completes this event if the vendor is done with it.
    /// Returns whether this event is done.
    pub fn poll(self: &Arc<Self>) -> bool {
        if self.is_done() {
            return true;
        }
        match self.vendor_final() {
            Some(status) => {
                self.complete(status);
                true
            }
            None => false,
        }
    }

    /// Whether the vendor reports the command complete (whether or not this event knows
    /// yet).
    pub fn vendor_complete(&self) -> bool {
        self.vendor_final() == Some(CL_COMPLETE)
    }

    /// The vendor event's final status, if the vendor is done with it.
    pub(super) fn vendor_final(&self) -> Option<cl_int> {
        self.vendor()?.ev.final_status()
    }
}
