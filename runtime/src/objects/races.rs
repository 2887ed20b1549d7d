//! Host threads racing on one buffer. Every rank schedules a buffer's
//! accesses in the order its threads enqueue them; two threads whose conflicting
//! commands the program does not order enqueue them in a different order on each rank,
//! and the ranks' plans part silently. Such a program races natively too (OpenCL runs
//! commands of different queues in any order unless an event or a host wait orders
//! them), so MirrorCL reports it, naming both calls, and ends the job.
//!
//! A command of thread B that touches bytes an earlier command of thread A wrote (or
//! writes bytes A's command touched) is ordered after it when:
//! - its wait list reaches A's command (directly, through a later command of A's queue,
//!   or through the wait lists of those, transitively);
//! - a host thread waited for A's command (`clFinish` of its queue, `clWaitForEvents`, a
//!   blocking command, a status polled as complete);
//! - both are on one queue (in order), A has ended, or A is the main thread and its
//!   command came before it created B.

use crate::cluster::host_threads::{self, Named};
use crate::objects::event::{command_name, Event};
use crate::objects::queue::Queue;
use parking_lot::Mutex;
use std::ops::Range;
use std::sync::{Arc, Weak};

/// An access of a root buffer by a command of a named thread, not yet ordered before
/// everything that follows.
pub struct Access {
    range: Range<u64>,
    writes: bool,
    thread: Named,
    thread_name: Arc<str>,
    call: &'static str,
    device: u32,
    /// Held: a command of another rank's device is bookkeeping here, done at once, and
    /// its event may be gone long before anything orders it.
    event: Arc<Event>,
}

/// The recent accesses of one root buffer.
#[derive(Default)]
pub struct Accesses(Mutex<Vec<Access>>);

thread_local! {
    static NAME: std::cell::OnceCell<Arc<str>> = const { std::cell::OnceCell::new() };
}

fn my_name() -> Arc<str> {
    NAME.with(|n| n.get_or_init(|| host_threads::thread_name().into()).clone())
}

/// Whether a command of `queue` waiting for `waits` is ordered after `earlier`.
fn ordered_after(queue: &Arc<Queue>, waits: &[Arc<Event>], earlier: &Arc<Event>) -> bool {
    let same_queue = |handle: usize| handle != 0 && handle == earlier.queue_handle;
    if earlier.was_host_waited() || same_queue(Arc::as_ptr(queue) as usize) {
        return true;
    }
    // The wait lists, transitively, up to a bounded number of events.
    let mut todo: Vec<Arc<Event>> = waits.to_vec();
    let mut seen = 0;
    while let Some(w) = todo.pop() {
        if Arc::ptr_eq(&w, earlier) || (same_queue(w.queue_handle) && w.seq >= earlier.seq) {
            return true;
        }
        seen += 1;
        if seen > 256 {
            break;
        }
        if let Some(after) = w.after.get() {
            todo.extend(after.iter().filter_map(Weak::upgrade));
        }
    }
    false
}

/// Before command `event` of `queue` is scheduled: checks its accesses (root buffer,
/// root range, writes) against other threads' recent ones, ends the job at a race, and
/// records them. Only in a cluster whose program named threads.
pub fn check(
    queue: &Arc<Queue>,
    waits: &[Arc<Event>],
    event: &Arc<Event>,
    accesses: &[(&Accesses, u64, Range<u64>, bool)],
) {
    let Some(me) = Named::me() else {
        return;
    };
    let _ = event.after.set(waits.iter().map(Arc::downgrade).collect());
    for (recent, buffer, range, writes) in accesses {
        let mut list = recent.0.lock();
        // What is ordered before everything from now on needs no checking again.
        list.retain(|a| !a.thread.ended() && !a.event.was_host_waited());
        for a in list.iter() {
            if a.thread == me
                || !(a.writes || *writes)
                || a.range.end <= range.start
                || range.end <= a.range.start
            {
                continue;
            }
            let earlier = &a.event;
            if a.thread.slot == 0 && me.created_after(earlier.seq) {
                continue;
            }
            if ordered_after(queue, waits, earlier) {
                continue;
            }
            report(a, event, queue, *buffer, range, *writes);
        }
        // A thread's newer access of the same bytes stands for its older ones.
        list.retain(|a| {
            !(a.thread == me
                && a.writes <= *writes
                && range.start <= a.range.start
                && a.range.end <= range.end)
        });
        list.push(Access {
            range: range.clone(),
            writes: *writes,
            thread: me,
            thread_name: my_name(),
            call: command_name(event.command_type),
            device: queue.device.index,
            event: event.clone(),
        });
    }
}

fn mode(writes: bool) -> &'static str {
    if writes {
        "writes"
    } else {
        "reads"
    }
}

fn report(
    a: &Access,
    event: &Arc<Event>,
    queue: &Arc<Queue>,
    buffer: u64,
    range: &Range<u64>,
    writes: bool,
) -> ! {
    let node = crate::cluster::node::node();
    crate::diag!(
        "MirrorCL: rank {}: host threads race on buffer #{buffer}: {} on host thread \"{}\" \
         (device {}) {} bytes {}..{}, and {} on host thread \"{}\" (device {}) {} bytes \
         {}..{} before it, and nothing orders the two: no wait list reaches the earlier \
         command, no host thread waited for it (clFinish, clWaitForEvents, a blocking call, \
         a status polled as complete), they are on different queues, and its thread still \
         runs. OpenCL may run them in either order, and each rank schedules them in the \
         order its threads happened to enqueue them; ending the job.",
        node.rank,
        command_name(event.command_type),
        my_name(),
        queue.device.index,
        mode(writes),
        range.start,
        range.end,
        a.call,
        a.thread_name,
        a.device,
        mode(a.writes),
        a.range.start,
        a.range.end,
    );
    node.abort()
}
