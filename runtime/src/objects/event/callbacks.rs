//! What runs when an event completes: the application's callbacks, MirrorCL's own
//! (sends another rank waits for, joins of several events), in order.

use super::*;

pub(super) enum Callback {
    User {
        stage: cl_int,
        f: UserCallback,
        data: usize,
        /// Its own host-thread slot, where it was registered on the main thread of a
        /// cluster (`host_threads::CallbackSlot`).
        slot: Option<crate::cluster::host_threads::CallbackSlot>,
    },
    Internal(Box<dyn FnOnce(cl_int) + Send>),
    /// Sends another rank waits for: kept before the others (`on_done_first`).
    First(Box<dyn FnOnce(cl_int) + Send>),
    /// One dependency of a `complete_after` arriving (`fails`: its failure counts).
    /// Not boxed: commands other ranks run join several events each.
    Join {
        join: Arc<Join>,
        fails: bool,
    },
}

impl Callback {
    fn due(&self, status: cl_int) -> bool {
        match self {
            Callback::User { stage, .. } => status <= *stage,
            _ => status <= CL_COMPLETE,
        }
    }
}

/// Most events get one or two callbacks: inline, no allocation.
pub(super) type Callbacks = SmallVec<[Callback; 2]>;

/// An event completing after its dependencies (`complete_after_ordered`).
pub(super) struct Join {
    event: Arc<Event>,
    remaining: AtomicI32,
    error: AtomicI32,
}

impl Join {
    /// One dependency done with `status`; only one whose failure counts (`fails`)
    /// fails the event.
    fn arrive(&self, status: cl_int, fails: bool) {
        let status = if fails {
            status
        } else {
            status.max(CL_COMPLETE)
        };
        if status < 0 {
            self.error.store(
                CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
                Ordering::Release,
            );
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.event.complete(self.error.load(Ordering::Acquire));
        }
    }
}

impl Event {
    /// Application callbacks run where the vendor calls back, never on an issuer.
    pub fn has_user_callbacks(&self) -> bool {
        (self.state.lock().callbacks.iter()).any(|c| matches!(c, Callback::User { .. }))
    }

    pub(super) fn run_callbacks(self: &Arc<Self>, status: cl_int) {
        let due: Callbacks = {
            let mut st = self.state.lock();
            // A command reaching its vendor (`CL_SUBMITTED`) has none due but an
            // application's: its list is left as it is.
            if !st.callbacks.iter().any(|cb| cb.due(status)) {
                return;
            }
            if st.callbacks.iter().all(|cb| cb.due(status)) {
                std::mem::take(&mut st.callbacks)
            } else {
                let (due, rest) =
                    (std::mem::take(&mut st.callbacks).into_iter()).partition(|cb| cb.due(status));
                st.callbacks = rest;
                due
            }
        };
        for cb in due {
            match cb {
                Callback::User {
                    stage,
                    f,
                    data,
                    slot,
                } => {
                    let arg = if status < 0 { status } else { stage };
                    // Kept alive until it runs, should it wait for a scheduler lock.
                    let event = self.clone();
                    run_unlocked(move || {
                        let handle = Arc::as_ptr(&event) as cl_event;
                        let _in_callback = InCallback::enter();
                        let call = || {
                            // SAFETY: the application registered this callback for this
                            // event.
                            let _ = std::panic::catch_unwind(|| unsafe {
                                f(handle, arg, data as *mut c_void)
                            });
                        };
                        match slot {
                            Some(slot) => slot.run(call),
                            None => call(),
                        }
                    });
                }
                Callback::Internal(f) | Callback::First(f) => f(status),
                Callback::Join { join, fails } => join.arrive(status, fails),
            }
        }
    }

    /// Registers an application callback for `stage` (`clSetEventCallback`).
    pub fn add_user_callback(self: &Arc<Self>, stage: cl_int, f: UserCallback, data: *mut c_void) {
        let slot = crate::cluster::host_threads::CallbackSlot::new();
        self.state.lock().callbacks.push(Callback::User {
            stage,
            f,
            data: data as usize,
            slot,
        });
        let status = self.status();
        if status <= stage {
            self.run_callbacks(status);
        } else {
            self.request_vendor_callback();
        }
    }

    /// Runs `f` with the final status once the event is done (now, if it is).
    pub fn on_done(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static) {
        self.on_done_as(f, false);
    }

    /// `on_done` for what another rank waits for (a send): it runs before the event's
    /// other callbacks. A read shared by three sends completed the bookkeeping of
    /// other ranks' commands between them on four H100, and the last send left up to
    /// 17 µs after the first.
    pub fn on_done_first(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static) {
        self.on_done_as(f, true);
    }

    fn on_done_as(self: &Arc<Self>, f: impl FnOnce(cl_int) + Send + 'static, first: bool) {
        if self.is_done() {
            return f(self.status());
        }
        let f = Box::new(f);
        let callback = match first {
            true => Callback::First(f),
            false => Callback::Internal(f),
        };
        if let Err(Callback::Internal(f) | Callback::First(f)) = self.push_callback(callback) {
            f(self.status());
        }
    }

    /// Keeps `callback` for when the event is done, or hands it back if it is.
    fn push_callback(self: &Arc<Self>, callback: Callback) -> Result<(), Callback> {
        let mut st = self.state.lock();
        if self.is_done() {
            return Err(callback);
        }
        match callback {
            // After the earlier ones of its kind, before all others.
            Callback::First(_) => {
                let at = (st.callbacks.iter())
                    .take_while(|c| matches!(c, Callback::First(_)))
                    .count();
                st.callbacks.insert(at, callback);
            }
            _ => st.callbacks.push(callback),
        }
        drop(st);
        self.request_vendor_callback();
        Ok(())
    }

    /// Completes this event after all of `deps`; a failed dependency fails it.
    pub fn complete_after(self: &Arc<Self>, deps: Vec<Arc<Event>>) {
        let n = deps.len();
        self.complete_after_ordered(deps, n);
    }

    /// Completes this event after all of `deps`; a failure of one of the first `failing`
    /// (the application's wait list) fails it, the others (orderings MirrorCL adds) only
    /// order it.
    pub fn complete_after_ordered(self: &Arc<Self>, mut deps: Vec<Arc<Event>>, failing: usize) {
        // Those already done need no callback (a lock of theirs, two allocations): only
        // a failure among the first `failing` counts. For `vendor_waitable` a done event
        // stands for nothing, so `joins` keeps only the others.
        let (mut error, mut i, mut failing_kept) = (0, 0, 0);
        deps.retain(|dep| {
            let fails = i < failing;
            i += 1;
            let status = dep.status();
            if status > CL_COMPLETE {
                failing_kept += usize::from(fails);
                return true;
            }
            if fails && status < 0 {
                error = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
            }
            false
        });
        let failing = failing_kept;
        let _ = self.joins.set(deps.iter().map(Arc::downgrade).collect());
        self.advance(CL_SUBMITTED);
        if deps.is_empty() {
            self.complete(error);
            return;
        }
        let join = Arc::new(Join {
            event: self.clone(),
            remaining: AtomicI32::new(deps.len() as i32 + 1),
            error: AtomicI32::new(error),
        });
        for (i, dep) in deps.into_iter().enumerate() {
            let fails = i < failing;
            let callback = Callback::Join {
                join: join.clone(),
                fails,
            };
            if let Err(Callback::Join { join, fails }) = dep.push_callback(callback) {
                join.arrive(dep.status(), fails);
            }
        }
        join.arrive(CL_COMPLETE, false);
    }
}
