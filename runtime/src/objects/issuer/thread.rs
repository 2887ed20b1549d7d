//! The issuer thread: takes jobs in schedule order, holds those not yet ready, runs
//! batches (merging the writes that land side by side), and drops what jobs leave
//! behind once it has nothing to run.

use super::*;

pub(super) fn run(
    rx: Receiver<Message>,
    wake: Sender<Message>,
    spin: Duration,
    hold_always: bool,
    shared: &Shared,
) {
    WATCHED.with(|w| *w.borrow_mut() = Some(Watching::default()));
    LEFT.with(|l| *l.borrow_mut() = Some(Vec::new()));
    let mut state = IssuerState {
        unbacked: Some(shared.unbacked.clone()),
        ..Default::default()
    };
    let mut batch: Vec<Handed> = Vec::new();
    let mut held = Held::default();
    loop {
        let message = next_message(&rx, spin);
        let _running = shared.running.lock();
        match message {
            Some(Message::Job(job)) => batch.push(job),
            Some(Message::Wake) => {
                if crate::observe::trace::on() {
                    crate::observe::trace::instant("issue", "woken", crate::trace_args![]);
                }
            }
            Some(Message::Back) => state.back_all_unbacked(),
            None => return,
        }
        while let Ok(message) = rx.try_recv() {
            match message {
                Message::Job(job) => batch.push(job),
                Message::Back => state.back_all_unbacked(),
                Message::Wake => {}
            }
        }
        // Held jobs came first: they go before the batch when they can.
        held.release(&mut state, shared);
        // Holding costs a wake-up of this thread per release unless it spins. With the
        // cores taken, a vendor that waits on user events in its own worker (PoCL) is
        // the cheaper hand-off; NVIDIA, with thousands of commands waiting on user
        // events, took 7 ms per IV.7.2 iteration instead of 0.2.
        let hold = hold_always || (!spin.is_zero() && crate::objects::spin::core_free());
        if !hold {
            // Jobs held while a core was free go now, through bridges, before the
            // batch: a blocking job of the batch would otherwise block this thread in
            // the vendor, waiting for a held one (through a bridge) that only this
            // thread can issue (`images` and `pingpong` with a vendor context per
            // device hung so on PoCL, about one run in ten).
            held.release_all(&mut state, shared);
        }
        let share = sharing(&batch);
        let mut jobs = batch.drain(..).zip(share).peekable();
        while let Some((job, share)) = jobs.next() {
            if held.holds_queue(&job.info)
                || (hold && !job.info.ready())
                || held.blocks_too_soon(&job.info)
            {
                held.hold(job, &wake);
            } else {
                let how = if share { RunAs::Shared } else { RunAs::Own };
                run_job(job, how, &mut state);
                shared.ran_one();
                // A long batch must not hold back what the vendor finished meanwhile.
                poll_between_jobs(jobs.peek().map(|(j, _)| &j.info));
            }
        }
        drop(jobs);
        // A job of the batch may be what a held one waited for.
        held.release(&mut state, shared);
        state.flush();
    }
}

/// Jobs that wait for a dependency the vendor cannot wait on, per vendor queue in the
/// order they came: a later job on the same queue waits behind them (the queue is in
/// order), jobs on other queues go on. Only the first of each queue can be next, so a
/// program enqueuing far ahead costs nothing per held job.
///
/// A read another rank waits for does not hold back the jobs after it on its queue: a
/// gate that did (until the read was seen done, up to 30 µs) cost IV.7.2 on four H200
/// 122-126 µs an iteration at 4 ranks against 114-117 without, and the 2-rank stencil
/// 48-59 µs a step against 48-52; the read is polled between those jobs instead.
#[derive(Default)]
struct Held {
    queues: Vec<(usize, VecDeque<Handed>)>,
}

impl Held {
    fn holds_queue(&self, job: &JobInfo) -> bool {
        self.queues.iter().any(|(q, _)| *q == job.vqueue)
    }

    /// Each dependency the vendor cannot wait on wakes the issuer when done (one held
    /// only behind another on its queue needs none: it goes when that one has).
    fn hold(&mut self, job: Handed, wake: &Sender<Message>) {
        if crate::observe::trace::on() {
            // The commands it waits for that the vendor cannot (up to three).
            let mut by = job.info.unready().map(|d| d.seq);
            crate::observe::trace::instant(
                "issue",
                "held",
                crate::trace_args![
                    ("command", job.info.seq),
                    ("by", by.next().unwrap_or(0)),
                    ("by2", by.next().unwrap_or(0)),
                    ("by3", by.next().unwrap_or(0))
                ],
            );
        }
        for dep in job.info.unready() {
            let wake = wake.clone();
            dep.on_done(move |_| {
                let _ = wake.send(Message::Wake);
            });
        }
        match self.queues.iter_mut().find(|(q, _)| *q == job.info.vqueue) {
            Some((_, jobs)) if !job.info.behind.is_empty() => {
                // Jobs of the queue not held here were issued before the first held one.
                // Behind the last of its writers, and behind the reads put there before
                // it: a later read ahead of an earlier one may wait, through another
                // rank, for the earlier one's bytes (`events` on two ranks hung so, with
                // every issuer holding).
                let behind = |e: &Arc<Event>| job.info.behind.iter().any(|b| Arc::ptr_eq(b, e));
                let at = (jobs.iter())
                    .rposition(|j| behind(&j.info.event) || j.info.behind.iter().any(behind))
                    .map_or(0, |i| i + 1);
                let mut job = job;
                if let Some(next) = jobs.get(at) {
                    // Held queues stay in hand-over order (`blocks_too_soon`).
                    job.info.order = job.info.order.min(next.info.order);
                }
                jobs.insert(at, job);
            }
            Some((_, jobs)) => jobs.push_back(job),
            None => {
                let vqueue = job.info.vqueue;
                self.queues.push((vqueue, [job].into()));
            }
        }
    }

    /// Issues every held job, in order on each queue, ready or not (the vendor waits
    /// for the rest through bridges).
    fn release_all(&mut self, state: &mut IssuerState, shared: &Shared) {
        // In hand-over order across queues: a blocking job among them must find every
        // older one issued (`blocks_too_soon`).
        while let Some(i) = self.first_by(|job| Some(job.order)) {
            let job = self.queues[i].1.pop_front().expect("a first job");
            run_job(job, RunAs::Own, state);
            shared.ran_one();
        }
        self.queues.clear();
    }

    /// The queue whose first job has the least `key` (none: not eligible).
    fn first_by<K: Ord>(&self, key: impl Fn(&JobInfo) -> Option<K>) -> Option<usize> {
        (self.queues.iter().enumerate())
            .filter_map(|(i, (_, jobs))| Some((key(&jobs.front()?.info)?, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Whether `job` would block this thread in the vendor while an older job is held
    /// here: what it waits for may wait, through another device's commands and a
    /// bridge, for that job, which only this thread can issue. Three PoCL devices with
    /// a vendor context each hung so (`pingpong`, about one run in fifty on two busy
    /// cores): a blocking read waited for a write,
    /// the write through a bridge for a read held on this issuer.
    fn blocks_too_soon(&self, job: &JobInfo) -> bool {
        job.blocking
            && (self.queues.iter())
                .any(|(_, jobs)| jobs.front().is_some_and(|j| j.info.order < job.order))
    }

    /// Issues the held jobs that became ready, in order on each queue, until none does
    /// (one may be what another waited for). Without a later job of their batch to back
    /// them, they take vendor events of their own. Across queues the oldest ready job
    /// goes first, transfer writes after the others (`JobInfo::late`): a stencil's
    /// boundary read, which the neighbour waits for, went after the next step's copy and
    /// kernel of the application queue, some 11 µs later on an H100.
    fn release(&mut self, state: &mut IssuerState, shared: &Shared) {
        while let Some(i) = self.next_ready() {
            let job = self.queues[i].1.pop_front().expect("a first job");
            let absorbed = self.landed_after(i, &job.info);
            if !absorbed.is_empty() {
                run_merged(job, absorbed, state);
            } else if self.backs(i, &job.info) {
                // Back to back, nothing polled between: the kernel's completion is the
                // next job's.
                let next = self.queues[i].1.pop_front().expect("a next job");
                run_job(job, RunAs::Shared, state);
                run_job(next, RunAs::Own, state);
            } else {
                run_job(job, RunAs::Own, state);
            }
            shared.ran_one();
            // As in a batch: ten held jobs released after a receive took 120 µs of
            // vendor calls on an H100, and a boundary read done after the third was
            // seen 70 µs late.
            let next = self.next_ready().and_then(|i| self.queues[i].1.front());
            poll_between_jobs(next.map(|j| &j.info));
        }
        self.queues.retain(|(_, jobs)| !jobs.is_empty());
    }

    /// After landed write `first`, popped from queue `i`: the ready landed writes that
    /// follow it there into the bytes right after its own, whose bytes may go with it in
    /// one vendor write. An all-to-all lands one piece from each rank side by side (the
    /// hand-written twin writes them with one call; IV.7.2 at 4 ranks made three).
    fn landed_after(&mut self, i: usize, first: &JobInfo) -> Vec<Handed> {
        let mut taken = Vec::new();
        let Some(l) = first.landing.as_ref().filter(|_| first.mergeable()) else {
            return taken;
        };
        let (start, mut end) = (l.offset, l.offset + l.len);
        while let Some(next) = self.queues[i].1.front() {
            let fits = next.info.landing.as_ref().filter(|n| {
                Arc::ptr_eq(&n.mem, &l.mem)
                    && n.offset == end
                    && end + n.len - start <= MERGED_AT_MOST
            });
            let Some(n) = fits.filter(|_| next.info.ready() && next.info.mergeable()) else {
                break;
            };
            end += n.len;
            taken.push(self.queues[i].1.pop_front().expect("a front job"));
        }
        taken
    }

    /// Whether kernel `first`, popped from queue `i`, may go without a vendor event of
    /// its own because the job now first there goes right after it with one: that job
    /// is ready without it (so waits for it only through the queue's order), and waits
    /// for nothing else not done (its event completes when the kernel's would). A read
    /// another rank waits for follows the kernel that wrote its bytes so (IV.7.2, a
    /// stencil's boundary rows): NVIDIA charges an event 1.0-1.4 µs at the launch.
    fn backs(&self, i: usize, first: &JobInfo) -> bool {
        let kernel = matches!(
            first.command_type,
            CL_COMMAND_NDRANGE_KERNEL | CL_COMMAND_TASK
        );
        kernel
            && !first.blocking
            && !first.event.profiling
            && self.queues[i].1.front().is_some_and(|next| {
                next.info.ready() && next.info.mergeable() && !self.blocks_too_soon(&next.info)
            })
    }

    /// The queue whose first held job `release` issues next: ready, not blocking too
    /// soon, the oldest, transfer writes last.
    fn next_ready(&self) -> Option<usize> {
        self.first_by(|job| {
            (job.ready() && !self.blocks_too_soon(job)).then_some((job.late, job.order))
        })
    }
}

/// Which jobs of a batch issue without a vendor event of their own: a kernel launch
/// that a later job of the batch on the same vendor queue follows (its event then
/// stands for both), that no later job of the batch waits for, and that no blocking job
/// follows (a blocking job must find everything before it backed). The job that follows
/// must be free of pending dependencies: otherwise the kernel's completion would wait
/// for them, and they may wait for the kernel (through another device, or another rank).
fn sharing(batch: &[Handed]) -> Vec<bool> {
    let mut share = vec![false; batch.len()];
    // Per vendor queue, whether the next job of the batch on it is free.
    let mut later_queues: Vec<(usize, bool)> = Vec::new();
    let mut waited_for: rustc_hash::FxHashSet<*const Event> = Default::default();
    let mut blocking_later = false;
    for (i, job) in batch.iter().enumerate().rev() {
        let info = &job.info;
        let next = later_queues.iter_mut().find(|(q, _)| *q == info.vqueue);
        share[i] = info.may_share
            && !blocking_later
            && next.as_ref().is_some_and(|(_, free)| *free)
            && !waited_for.contains(&Arc::as_ptr(&info.event));
        match next {
            Some(entry) => entry.1 = info.free,
            None => later_queues.push((info.vqueue, info.free)),
        }
        waited_for.extend(info.deps.iter().chain(&info.behind).map(Arc::as_ptr));
        blocking_later |= info.blocking;
    }
    share
}

/// Landed write `first` and those after it (`Held::landed_after`) as one vendor write:
/// made by the last, the others absorbed into it, each completing with it.
fn run_merged(first: Handed, rest: Vec<Handed>, state: &mut IssuerState) {
    let mut jobs = vec![first];
    jobs.extend(rest);
    let landings: Vec<&Landing> = (jobs.iter())
        .filter_map(|j| j.info.landing.as_ref())
        .collect();
    let mut bytes = Vec::with_capacity(landings.iter().map(|l| l.len).sum());
    for l in &landings {
        // SAFETY: a ready landed write's bytes are in place (its receive or read is
        // done) and kept by its event, which is not complete before this write is.
        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(l.host as *const u8, l.len) });
    }
    let bytes = Arc::new(bytes);
    let write = Landing {
        mem: landings[0].mem.clone(),
        offset: landings[0].offset,
        len: bytes.len(),
        host: bytes.as_ptr() as usize,
    };
    let last = jobs.pop().expect("at least two jobs");
    crate::observe::stats::add(
        &crate::observe::stats::COUNTERS.writes_merged,
        jobs.len() as u64,
    );
    let absorbed: Vec<Arc<Event>> = jobs.iter().map(|j| j.info.event.clone()).collect();
    for job in jobs {
        run_job(job, RunAs::Absorbed, state);
    }
    let event = last.info.event.clone();
    run_job(last, RunAs::Merged { write, bytes }, state);
    // The write failed: so did the writes it carried.
    let status = event.status();
    if status < 0 {
        for e in absorbed {
            e.complete(status);
        }
    }
}

/// Runs a job; traced, its span is the vendor call, and says how long the job waited
/// on this thread's channel since it was handed over.
fn run_job(mut job: Handed, how: RunAs, state: &mut IssuerState) {
    let (command_type, seq) = (job.info.command_type, job.info.seq);
    // Taken out for its one call; the box, with the description, goes to the pile
    // whole.
    let run = std::mem::replace(&mut job.run, Box::new(Ran));
    run_traced(state, how, job.handed, command_type, seq, |state, how| {
        run.run(state, how)
    });
    leave(Left::Job(job));
}

/// Runs a command as `how` says, a panic caught; traced, its span is the vendor call,
/// with how long the command waited since it was handed over (`handed`).
pub(super) fn run_traced(
    state: &mut IssuerState,
    how: RunAs,
    handed: u64,
    command_type: cl_command_type,
    seq: u64,
    run: impl FnOnce(&mut IssuerState, RunAs),
) {
    let started = crate::observe::trace::begin();
    let share = how.shares();
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(state, how))).is_err() {
        tracing::error!("an issuer job panicked");
    }
    if started != 0 {
        crate::observe::trace::span(
            "issue",
            crate::objects::event::command_name(command_type),
            started,
            crate::trace_args![
                ("command", seq),
                ("queued_ns", started.saturating_sub(handed)),
                ("shares_a_later_event", share as u64)
            ],
        );
    }
}

/// What an issuer's jobs leave behind: their descriptions and the events they waited
/// for, often the last references (a transfer's receive, the read behind a landed
/// write). Callgrind of an issuer releasing IV.7.2's held jobs at 4 PoCL ranks put a
/// fifth of its work there: dropping events, and freeing what other threads had
/// allocated. An issuer drops them once it has nothing to run (`drop_left`).
pub enum Left {
    Job(Box<Job>),
    Events(Vec<Arc<Event>>),
}

/// How much an issuer lets pile up before dropping it anyway.
const LEFT_AT_MOST: usize = 1024;

thread_local! {
    /// On an issuer thread, what its jobs left (`Left`); None elsewhere (a thread that
    /// runs a job itself drops at once).
    static LEFT: std::cell::RefCell<Option<Vec<Left>>> = const { std::cell::RefCell::new(None) };
}

/// Drops `left` now, or on an issuer once it has nothing to run.
pub fn leave(left: Left) {
    let full = LEFT.with(|l| match l.borrow_mut().as_mut() {
        Some(pile) => {
            pile.push(left);
            pile.len() >= LEFT_AT_MOST
        }
        None => false,
    });
    if full {
        drop_left();
    }
}

/// Drops what this issuer's jobs left (taken out first: a drop may leave more).
fn drop_left() {
    let pile = LEFT.with(|l| {
        (l.borrow_mut().as_mut())
            .filter(|pile| !pile.is_empty())
            .map(|pile| std::mem::replace(pile, Vec::with_capacity(pile.capacity())))
    });
    drop(pile);
}

/// Spins for `spin` (while a core is free: `crate::objects::spin`) before parking on the
/// channel, polling the watched events meanwhile.
fn next_message(rx: &Receiver<Message>, spin: Duration) -> Option<Message> {
    let mut spin = crate::objects::spin::Spin::new(spin);
    let mut turns = 0u32;
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        if turns == 0 {
            drop_left();
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(16) && poll_watched_up_to(POLL_AT_ONCE) {
            spin.restart();
            continue;
        }
        if !spin.spinning() {
            forget_watched();
            return rx.recv().ok();
        }
        std::hint::spin_loop();
    }
}
