//! Commands launched without a vendor event of their own, and how they are backed
//! later: by the next command on their vendor queue that has one, or by a marker.

use super::*;

/// Commands issued on one vendor queue without a vendor event of their own, waiting for
/// the next command on that queue that has one.
pub struct Deferred {
    pub(super) vqueue: Arc<VQueue>,
    context: ContextKey,
    stream: u64,
    pub events: Vec<Arc<Event>>,
}

impl Deferred {
    /// `ev`, of a later command on their vendor queue, stands for them.
    fn back_with(&self, ev: &Arc<SharedVEvent>) {
        for e in &self.events {
            e.attach_vendor(VendorEvent {
                ev: ev.clone(),
                context: self.context,
                stream: self.stream,
            });
        }
    }
}

/// State an issuer job may use: the vendor queues to flush at the end of the batch, and
/// the kernels issued without a vendor event of their own. Asking a vendor for an event
/// per command is costly (NVIDIA records one per command), so within a batch a kernel
/// launch that a later command of the same batch on the same in-order vendor queue will
/// follow shares that command's event (see `run`).
#[derive(Default)]
pub struct IssuerState {
    /// Held, not borrowed: the application may release a queue while its flush is due.
    /// Inline: a thread that runs a job itself makes a state per job.
    pub(super) dirty: smallvec::SmallVec<[Arc<VQueue>; 4]>,
    pub(super) deferred: Vec<Deferred>,
    /// The issuer's kernels launched without a vendor event by the thread that enqueued
    /// them (`RunAs::Unbacked`), per vendor queue, with nothing after them there yet.
    pub(super) unbacked: Option<Unbacked>,
}

/// Kernels an application thread launched itself without a vendor event, where it asked
/// for no event and only waits through `clFinish` or a blocking command of the same
/// queue: NVIDIA charges an event 1.0-1.4 µs at the launch and more in the wait (a
/// kernel and `clFinish` took 13.5-14.0 µs natively without one, 15.3-16.6 with one).
/// Each is backed before anything else goes to its vendor queue: by the next command
/// there that has its own event and waits for nothing else not done, by a blocking
/// command's return, or by a marker; by `clFinish` of its queue (`Queue::finish`); or,
/// once anything else needs its completion, by a marker the issuer enqueues
/// (`Issuer::back`).
pub type Unbacked = Arc<parking_lot::Mutex<Vec<Deferred>>>;

/// How a job about to go to a vendor queue backs the unbacked kernels before it there.
pub enum Backing {
    /// Its own vendor event, or the one of a later job of its batch, stands for them:
    /// it waits for nothing not done off its queue.
    Follows,
    /// It blocks in the vendor and returns with them done.
    Returns,
    /// A marker with an event goes first.
    Marker,
}

impl IssuerState {
    /// A command went to `queue`: it is flushed at the end of the batch. Taken, not
    /// cloned: the job is done with it.
    pub fn touched(&mut self, queue: Arc<VQueue>) {
        if !self.dirty.iter().any(|q| Arc::ptr_eq(q, &queue)) {
            self.dirty.push(queue);
        }
    }

    /// `event`'s command went to `vqueue` without a vendor event: it completes with the
    /// next command there that has one.
    pub fn defer(
        &mut self,
        vqueue: &Arc<VQueue>,
        context: ContextKey,
        stream: u64,
        event: Arc<Event>,
    ) {
        match self
            .deferred
            .iter_mut()
            .find(|d| Arc::ptr_eq(&d.vqueue, vqueue))
        {
            Some(d) => d.events.push(event),
            None => self.deferred.push(Deferred {
                vqueue: vqueue.clone(),
                context,
                stream,
                events: vec![event],
            }),
        }
    }

    /// A command on `vqueue` got its own vendor event `ev`: the deferred commands before
    /// it on that in-order queue complete with it. Called before that command's own
    /// event is attached, so whoever sees it done also finds them done.
    pub fn back_with(&mut self, vqueue: &Arc<VQueue>, ev: &Arc<SharedVEvent>) {
        let Some(i) = self
            .deferred
            .iter()
            .position(|d| Arc::ptr_eq(&d.vqueue, vqueue))
        else {
            return;
        };
        self.deferred.swap_remove(i).back_with(ev);
    }

    /// Before a job goes to `vqueue`: the unbacked kernels there are backed as `how`
    /// says (asked only when there are some); those a blocking job's return completes
    /// are handed back. A blocking job first backs those of other vendor queues by
    /// markers: it may wait in the vendor, through a bridge, for one of them.
    pub fn back_unbacked_before(
        &mut self,
        vqueue: &Arc<VQueue>,
        how: impl FnOnce() -> Backing,
        blocking: bool,
    ) -> Option<Deferred> {
        let (mine, others) = {
            let mut list = self.unbacked.as_ref()?.lock();
            if list.is_empty() {
                return None;
            }
            let mine = (list.iter())
                .position(|d| Arc::ptr_eq(&d.vqueue, vqueue))
                .map(|i| list.swap_remove(i));
            let others: Vec<Deferred> = match blocking {
                true => list.drain(..).collect(),
                false => Vec::new(),
            };
            (mine, others)
        };
        for d in others {
            self.back_by_marker(d);
        }
        let d = mine?;
        match how() {
            Backing::Follows => {
                // Before the batch's own deferred ones: they came later.
                match (self.deferred.iter_mut()).find(|e| Arc::ptr_eq(&e.vqueue, vqueue)) {
                    Some(e) => {
                        let later = std::mem::replace(&mut e.events, d.events);
                        e.events.extend(later);
                    }
                    None => self.deferred.push(d),
                }
                None
            }
            Backing::Returns => Some(d),
            Backing::Marker => {
                self.back_by_marker(d);
                None
            }
        }
    }

    /// `event`'s kernel went to `vqueue` without a vendor event, nothing after it there.
    pub fn leave_unbacked(
        &mut self,
        vqueue: &Arc<VQueue>,
        context: ContextKey,
        stream: u64,
        event: Arc<Event>,
    ) {
        crate::observe::stats::add(&crate::observe::stats::COUNTERS.kernels_unbacked, 1);
        let Some(list) = self.unbacked.as_ref() else {
            // Not where unbacked kernels are kept: as within a batch.
            return self.defer(vqueue, context, stream, event);
        };
        let mut list = list.lock();
        match list.iter_mut().find(|d| Arc::ptr_eq(&d.vqueue, vqueue)) {
            Some(d) => d.events.push(event),
            None => list.push(Deferred {
                vqueue: vqueue.clone(),
                context,
                stream,
                events: vec![event],
            }),
        }
    }

    /// Backs every unbacked kernel by a marker on its vendor queue (`Issuer::back`).
    pub(super) fn back_all_unbacked(&mut self) {
        let Some(list) = self.unbacked.as_ref() else {
            return;
        };
        let taken = std::mem::take(&mut *list.lock());
        for d in taken {
            self.back_by_marker(d);
        }
    }

    /// A marker with an event on `d`'s vendor queue stands for its commands; if the
    /// vendor refuses one, the queue is waited for.
    pub fn back_by_marker(&mut self, d: Deferred) {
        crate::observe::stats::add(
            &crate::observe::stats::COUNTERS.unbacked_by_marker,
            d.events.len() as u64,
        );
        match d.vqueue.marker(&[], true) {
            Ok(Some(ev)) => {
                d.back_with(&Arc::new(SharedVEvent::new(ev)));
                // At once: a blocking job may wait, through a bridge, for one of them.
                let _ = d.vqueue.flush();
            }
            _ => finish_deferred(d),
        }
    }

    /// Flushes the vendor queues touched so far. Deferred commands are backed within
    /// their batch; any left (the command meant to back them failed) are waited for.
    pub fn flush(&mut self) {
        for d in self.deferred.drain(..) {
            finish_deferred(d);
        }
        for q in self.dirty.drain(..) {
            // A failed flush shows as the commands' own failures.
            let _ = q.flush();
        }
    }
}

/// Completes deferred commands whose backing command failed: waits for their queue.
fn finish_deferred(d: Deferred) {
    // As before a blocking job: what this thread polls is left to the vendor's callbacks
    // while it blocks, or a command on that queue behind a bridge to one of them would
    // never go.
    forget_watched();
    let status = match d.vqueue.finish() {
        Ok(()) => CL_COMPLETE,
        Err(_) => CL_OUT_OF_RESOURCES,
    };
    for e in &d.events {
        e.complete(status);
    }
}
