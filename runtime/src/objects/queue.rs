//! Command queues. Each wraps an in-order vendor queue on its device; an out-of-order
//! queue is accepted and executed in order (a valid schedule of it).

use crate::cl::*;
use crate::native::VQueue;
use crate::objects::context::{new_stream, Context};
use crate::objects::device::Device;
use crate::objects::event::Event;
use crate::objects::handle::{impl_handle, Header};
use crate::ClResult;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

#[repr(C)]
pub struct Queue {
    header: Header,
    pub context: Arc<Context>,
    pub device: Arc<Device>,
    /// The properties the application asked for (reported back as given).
    pub properties: cl_command_queue_properties,
    /// The vendor queue (none for a virtual device's queue, which is bookkeeping);
    /// shared with the issuer's pending flushes, so releasing it never races them.
    pub vqueue: Option<Arc<VQueue>>,
    pub stream: u64,
    /// Commands not yet known to be complete, in enqueue order.
    inflight: Mutex<VecDeque<Arc<Event>>>,
    /// How many `inflight` held when last changed: every enqueue asks whether to prune,
    /// which mostly needs no lock.
    inflight_len: std::sync::atomic::AtomicUsize,
    /// The newest command (`Event::seq`) a host thread waited for: it and the queue's
    /// earlier ones are ordered before later calls of any thread (`races`).
    waited_through: std::sync::atomic::AtomicU64,
    /// The oldest command an enqueue gave up waiting for (`keep_pace`; 0: none).
    stalled: std::sync::atomic::AtomicU64,
}

impl_handle!(Queue, Queue, CL_INVALID_COMMAND_QUEUE);

/// How many commands a queue tracks before it looks for completed ones to forget.
const PRUNE_AT: usize = 1024;

/// How long an enqueue waits for the oldest command of a queue that is `MIRRORCL_AHEAD`
/// commands ahead (`Queue::keep_pace`) before it goes on regardless.
const AHEAD_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

impl Queue {
    pub fn new(
        context: Arc<Context>,
        device: Arc<Device>,
        properties: cl_command_queue_properties,
    ) -> ClResult<Arc<Queue>> {
        // A virtual device's queue is bookkeeping: it has no vendor queue here.
        let vqueue = match device.vdev.as_ref() {
            Some(vdev) => {
                let vctx = &context.vendor_context(&device).vctx;
                let vendor_props = properties & CL_QUEUE_PROFILING_ENABLE;
                let vqueue = vctx.create_queue(vdev, vendor_props)?;
                device.issuer();
                Some(Arc::new(vqueue))
            }
            None => None,
        };
        Ok(Arc::new(Queue {
            header: Header::new(),
            context,
            device,
            properties,
            vqueue,
            stream: new_stream(),
            inflight: Mutex::new(VecDeque::new()),
            inflight_len: std::sync::atomic::AtomicUsize::new(0),
            waited_through: std::sync::atomic::AtomicU64::new(0),
            stalled: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// A host thread waited for command `seq` of this queue.
    pub fn waited_through(&self, seq: u64) {
        (self.waited_through).fetch_max(seq, std::sync::atomic::Ordering::AcqRel);
    }

    pub fn waited_through_seq(&self) -> u64 {
        (self.waited_through).load(std::sync::atomic::Ordering::Acquire)
    }

    /// The newest command of the queue, if it may still be running.
    pub fn last(&self) -> Option<Arc<Event>> {
        self.inflight.lock().back().cloned()
    }

    /// Records a new command (in schedule order, under the scheduler lock); returns
    /// the newest before it, if it may still be running ([`Queue::last`]) and the new
    /// one must wait for it (`waits_for`: mostly not, the vendor queue's order keeps
    /// them, and the reference is not taken).
    pub fn record(
        &self,
        event: Arc<Event>,
        waits_for: impl FnOnce(&Event) -> bool,
    ) -> Option<Arc<Event>> {
        let mut q = self.inflight.lock();
        let before = q.back().filter(|e| waits_for(e)).cloned();
        q.push_back(event);
        self.note_len(&q);
        before
    }

    /// Notes `inflight`'s length (its lock held): a stale count only makes `prune`
    /// look under the lock.
    fn note_len(&self, q: &VecDeque<Arc<Event>>) {
        (self.inflight_len).store(q.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Forgets completed commands at the front, only once many have gathered, so that a
    /// burst of enqueues does not poll the vendor (and contend with its workers) for
    /// every command. Polling may complete events
    /// and run their callbacks, so this is never called with the scheduler locked.
    pub fn prune(&self) {
        if self.inflight_len.load(std::sync::atomic::Ordering::Relaxed) >= PRUNE_AT {
            self.forget_completed(64, PRUNE_AT);
        }
    }

    /// After a blocking command of this queue completed: forgets the completed commands
    /// at the front whatever their number. They are done or nearly (the vendor queue is
    /// in order), so the polls are cheap, and a completed command no longer keeps its
    /// buffers alive: without this, buffers the application released stayed allocated
    /// until `PRUNE_AT` commands had gathered (a loop of 1 GiB images held 8 GB).
    pub fn prune_completed(&self) {
        self.forget_completed(PRUNE_AT, 0);
    }

    /// Forgets up to `most` completed commands at the front, while at least `above`
    /// remain.
    fn forget_completed(&self, most: usize, above: usize) {
        for _ in 0..most {
            let front = {
                let q = self.inflight.lock();
                if q.len() < above {
                    return;
                }
                q.front().cloned()
            };
            match front {
                Some(e) if e.poll() => {
                    let mut q = self.inflight.lock();
                    if q.front().is_some_and(|f| Arc::ptr_eq(f, &e)) {
                        q.pop_front();
                        self.note_len(&q);
                    }
                }
                _ => return,
            }
        }
    }

    /// In a cluster, before an enqueue: while more than `MIRRORCL_AHEAD` commands of
    /// this queue are in flight, waits for the oldest (up to `AHEAD_WAIT`). A program
    /// that enqueues far ahead of its devices otherwise fills every list the pipeline
    /// keeps (receives posted, each with a 16 KiB block; jobs held; events watched;
    /// staging from fresh pages): IV.7.2 over 20,000 iterations posted 60,000 receives.
    /// A vendor bounds its own queues too (NVIDIA's enqueue blocks once its buffer of
    /// commands is full). A safety net, not a pace: bounded at 64, the attached stencil
    /// at 4 ranks on four H100 took 112-369 µs a step against 87-165 without (the
    /// enqueuing thread's polls of the vendor and yields got in the issuers' way); at
    /// 1024, IV.7.2 over 2,000 iterations ran as without. One process alone is not
    /// bounded.
    pub fn keep_pace(&self) {
        let limit = crate::objects::platform::platform().config.runtime.ahead as usize;
        if limit == 0 || !crate::cluster::node::is_cluster_now() {
            return;
        }
        let mut until = None;
        let mut paced = PaceTimer(None);
        loop {
            self.forget_completed(usize::MAX, limit + 1);
            let oldest = {
                let q = self.inflight.lock();
                match q.front() {
                    Some(front) if q.len() > limit => front.clone(),
                    _ => return,
                }
            };
            // Given up on once: it waits for what the program does later (a user
            // event it sets, a command of another thread), not for the devices.
            if oldest.seq == self.stalled.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            let now = std::time::Instant::now();
            if paced.0.is_none() && crate::observe::stats::on() {
                paced.0 = Some(now);
            }
            let until = *until.get_or_insert(now + AHEAD_WAIT);
            if now >= until {
                (self.stalled).store(oldest.seq, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            // Spinning only while a core is free: the pipeline's threads need theirs.
            if crate::objects::spin::core_free() {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
    }

    /// The program lets go of the queue: a kernel left without a vendor event there is
    /// backed now, so that it completes and lets go of what it keeps.
    pub fn back_unbacked(&self) {
        if let Some(e) = self.last().filter(|e| e.is_unbacked()) {
            e.request_backing();
        }
    }

    /// Every command not yet known complete (for markers, barriers and finish).
    pub fn pending(&self) -> Vec<Arc<Event>> {
        let mut q = self.inflight.lock();
        q.retain(|e| !e.is_done());
        self.note_len(&q);
        q.iter().cloned().collect()
    }

    /// `clFinish`: waits for every command enqueued so far. The newest is waited for
    /// first: commands before it on the same vendor queue are then done too, so events
    /// nobody else holds are simply forgotten and the rest found done by a poll.
    pub fn finish(&self) -> ClResult<()> {
        let through = crate::cluster::host_threads::next_seq() - 1;
        let Some(last) = self.last() else {
            self.waited_through(through);
            return Ok(());
        };
        // Launched without a vendor event, nothing after it on its vendor queue: the
        // vendor's own `clFinish`, as the program would call it natively. Only once its
        // vendor call has returned (listed), or that `clFinish` might not cover it.
        if let Some(vq) = self.vqueue.as_ref().filter(|_| last.is_unbacked()) {
            let issuer = self.device.issuer();
            let issued = issuer.unbacked_on(vq);
            if issued.iter().any(|e| Arc::ptr_eq(e, &last)) && vq.finish().is_ok() {
                issuer.finished_unbacked(vq, &issued);
            }
        }
        last.wait();
        let pending: Vec<Arc<Event>> = {
            let mut q = self.inflight.lock();
            q.retain(|e| Arc::strong_count(e) > 1 && !e.is_done());
            self.note_len(&q);
            q.iter().cloned().collect()
        };
        for e in pending.iter().rev() {
            if !e.poll() {
                e.wait();
            }
        }
        self.waited_through(through);
        Ok(())
    }
}

/// Counts the time an enqueue waited in `Queue::keep_pace` (`MIRRORCL_STATS`), however
/// the wait ends.
struct PaceTimer(Option<std::time::Instant>);

impl Drop for PaceTimer {
    fn drop(&mut self) {
        if let Some(start) = self.0 {
            let waited = start.elapsed().as_nanos() as u64;
            crate::observe::stats::add(&crate::observe::stats::COUNTERS.pace_ns, waited);
        }
    }
}
