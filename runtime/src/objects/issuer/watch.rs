//! Events an issuer polls between its jobs, those another rank waits for first, so
//! that completions are learned without the vendor's callbacks.

use super::*;

/// A watched event, and whether its vendor callback is registered.
type Watched = (Arc<Event>, bool);

/// The watched events, each list oldest first: those another rank waits for
/// (`Event::is_urgent`: reads whose bytes are sent), then the others.
#[derive(Default)]
pub(super) struct Watching {
    urgent: VecDeque<Watched>,
    rest: VecDeque<Watched>,
}

thread_local! {
    /// On an issuer thread: the events of its commands that others wait on
    /// asynchronously (a send after a read, a bridge to another vendor, a join), polled
    /// while the issuer spins for its next job; with whether the vendor's callback is
    /// registered. NVIDIA reports a completion through its callback thread some 20 µs
    /// after the fact; a poll that finds the event done completes it here (the first
    /// final status wins, so a callback that comes later does nothing).
    pub(super) static WATCHED: std::cell::RefCell<Option<Watching>> =
        const { std::cell::RefCell::new(None) };
}

/// On an issuer: polls `event` while the issuer spins; whether this thread is one.
/// `registered`: its vendor callback is, for when the issuer parks; otherwise it is
/// registered only then, or before the issuer blocks in a vendor call.
pub fn watch(event: &Arc<Event>, registered: bool) -> bool {
    WATCHED.with(|w| match w.borrow_mut().as_mut() {
        Some(w) => {
            let list = if event.is_urgent() {
                &mut w.urgent
            } else {
                &mut w.rest
            };
            list.push_back((event.clone(), registered));
            true
        }
        None => false,
    })
}

/// How many pending watched events one poll looks at, oldest first, besides the urgent
/// ones: a program that enqueues far ahead has thousands in flight, and they mostly
/// complete in order. The rest wait for the next poll, or for their callbacks once the
/// issuer parks.
pub(super) const POLL_AT_ONCE: usize = 8;

/// The same for the urgent events. Where commands wait in the vendor for what they
/// depend on (PoCL), a program far ahead has hundreds of them queued there: polled all
/// at every turn, IV.7.2's issuer at 4 ranks on PoCL spent 1.2 s of a 4.5 s run in
/// polls. Where they are held until the vendor can take them (GPUs) there are a few.
const POLL_URGENT_AT_ONCE: usize = 32;

/// How often the issuer, between jobs it has ready, also polls events no other rank
/// waits for.
const POLL_REST_EVERY: Duration = Duration::from_micros(50);

/// How long the events no other rank waits for may go unpolled while an urgent one is
/// pending (`poll_watched_up_to`): a bound, since an urgent read may wait in the vendor,
/// through a bridge, for one of them.
const URGENT_FIRST_FOR: Duration = Duration::from_micros(200);

thread_local! {
    /// When this issuer last polled the events no other rank waits for.
    static LAST_REST_POLL: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Between two jobs: the urgent events, the others only every `POLL_REST_EVERY`. A
/// completion runs its callbacks, and on four H100 the completions one landed write
/// brought (the bookkeeping of other ranks' commands behind it) held the kernel after
/// it in IV.7.2 for 10 µs; the rest wait until the issuer has nothing ready, unless
/// it is busy that long.
///
/// Not the others when the next job is one another rank waits for (a read whose bytes
/// are sent): a kernel's completion found so ran the bookkeeping of the other ranks'
/// commands behind it first, and IV.7.2's read at 4 ranks went 20 µs after the kernel
/// on four H200 (every rank waits for it).
pub(super) fn poll_between_jobs(next: Option<&JobInfo>) -> bool {
    if next.is_some_and(|j| j.event.is_urgent()) {
        return poll_watched_up_to(0);
    }
    let now = std::time::Instant::now();
    let due = LAST_REST_POLL.with(|last| last.get().is_none_or(|t| now - t >= POLL_REST_EVERY));
    poll_watched_up_to(if due { POLL_AT_ONCE } else { 0 })
}

/// Polls the oldest urgent watched events (up to `POLL_URGENT_AT_ONCE` pending), then
/// the oldest `at_most` others; whether one completed. Only pending events count: each
/// completion runs its callbacks, and a read polled behind eight others that completed
/// was sent some 20 µs late on an H100 (a stencil's ghost row). Completions'
/// callbacks may watch further events: the lists are not borrowed meanwhile. An event
/// that got an application callback since is left to the vendor's callback thread
/// (application callbacks never run on an issuer).
///
/// While an urgent event stays pending the others wait, up to `URGENT_FIRST_FOR` since
/// they were last polled: their completions run the bookkeeping of other ranks'
/// commands, and in IV.7.2 at 4 ranks on four H200 a kernel's cascade of them (some
/// 20 µs) came before its read, which every other rank waits for, was seen done.
pub(super) fn poll_watched_up_to(at_most: usize) -> bool {
    let taken = WATCHED.with(|w| w.borrow_mut().as_mut().map(std::mem::take));
    let Some(Watching {
        mut urgent,
        mut rest,
    }) = taken
    else {
        return false;
    };
    if urgent.is_empty() && rest.is_empty() {
        return false;
    }
    let before = urgent.len() + rest.len();
    poll_front(&mut urgent, POLL_URGENT_AT_ONCE);
    let mut at_most = at_most;
    if at_most > 0 {
        let now = std::time::Instant::now();
        let recent = LAST_REST_POLL.with(|l| l.get().is_some_and(|t| now - t < URGENT_FIRST_FOR));
        if !urgent.is_empty() && recent {
            at_most = 0;
        } else {
            LAST_REST_POLL.with(|last| last.set(Some(now)));
        }
    }
    poll_front(&mut rest, at_most);
    let progressed = urgent.len() + rest.len() < before;
    WATCHED.with(|w| {
        if let Some(w) = w.borrow_mut().as_mut() {
            // Watched meanwhile (by completions' callbacks): after the older ones.
            for (list, kept) in [(&mut w.urgent, urgent), (&mut w.rest, rest)] {
                let newer = std::mem::replace(list, kept);
                list.extend(newer);
            }
        }
    });
    progressed
}

/// Polls `list` from the front until `at_most` events are found pending, dropping those
/// done in place; the rest of the list is not looked at.
fn poll_front(list: &mut VecDeque<Watched>, at_most: usize) {
    let (mut i, mut pending) = (0, 0);
    while pending < at_most && i < list.len() {
        let (event, registered) = &list[i];
        let gone = if event.has_user_callbacks() {
            if !registered {
                event.register_vendor_callback();
            }
            true
        } else {
            event.poll()
        };
        if gone {
            // Near the front: VecDeque moves the few before it.
            list.remove(i);
        } else {
            i += 1;
            pending += 1;
        }
    }
}

/// Stops watching before the issuer parks or blocks in a vendor call: the vendor's
/// callbacks complete what is left.
pub fn forget_watched() {
    let taken = WATCHED.with(|w| w.borrow_mut().as_mut().map(std::mem::take));
    let Some(w) = taken else {
        return;
    };
    for (event, registered) in w.urgent.into_iter().chain(w.rest) {
        if !registered && !event.is_done() {
            event.register_vendor_callback();
        }
    }
}
