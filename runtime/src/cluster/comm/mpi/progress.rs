//! The progress thread: posts the transfers application threads hand it, tests its
//! requests in turns, and completes what arrived.

use super::*;

/// The progress thread's state.
struct Progress {
    rank: u32,
    comm: RawComm,
    pub(super) active: VecDeque<Active>,
    pending: Pending,
    pub(super) asks: Asks,
    /// Reused by `test_requests`: the requests in flight, and MPI's indices of those done.
    scratch: Vec<ffi::MPI_Request>,
    indices: Vec<c_int>,
    /// For each request in `scratch`: its transfer in `active` and its place there.
    owners: Vec<(usize, usize)>,
    /// How many sends are in flight: they lead `active`, newest first, and receives
    /// follow, oldest first (`start`).
    sends: usize,
    /// Where the rotating part of the next turn's test starts among the later
    /// receives (`test_requests`).
    cursor: usize,
    /// When the deadline is looked at next (it costs a pass over the transfers).
    next_deadline_check: Instant,
    /// When the transfers in flight were last published for reports, and whether there
    /// were none then (`publish`).
    published: (Instant, bool),
    pub(super) blocks: ReceiveBlocks,
    /// Receives not posted yet, in plan order, with when they came (`post_waiting`).
    waiting: VecDeque<(Transfer, Instant)>,
}

/// How many receives are posted to MPI at once, and how many more one progress turn
/// posts. A program far ahead plans hundreds of receives: IV.7.2's enqueuing thread
/// handed over some 300 at two ranks, each posting took 10-15 µs (a fresh block), and a
/// send queued behind them waited 53 µs on two H200. Later receives wait in plan order:
/// a message that comes first waits in MPI, and no planned receive waits for a later one
/// (a transfer follows only what was planned before it).
const RECEIVES_POSTED: usize = 64;
const RECEIVES_POSTED_PER_TURN: usize = 4;

/// How many of the oldest receives every progress turn tests, and how many of the later
/// ones it tests in turn. A program enqueuing far ahead posts a receive per transfer
/// planned: IV.7.2 at 4 ranks and 20,000 iterations on four H100 had tens of thousands
/// posted, and the turns that tested every one of them made an iteration take 2.4 ms
/// (the progress thread in a pass over them 60% of its time); testing these windows,
/// 0.17 ms. Messages mostly arrive in the order their receives were planned; a later
/// one is found within a few turns.
const TESTED_OLDEST: usize = 32;
const TESTED_IN_TURN: usize = 32;

/// How often the list of transfers in flight is published for reports at most (each
/// publication copies it); at once when it empties or stops being empty (`shut_down`
/// waits for it to be empty).
const PUBLISH_EVERY: Duration = Duration::from_millis(10);

/// A progress turn longer than this shows in the trace (`slow progress turn`).
const SLOW_TURN_NS: u64 = 5_000;

/// The transfers a progress turn tests, of `n` in flight whose first `sends` are sends:
/// every send, the `TESTED_OLDEST` oldest receives, and `TESTED_IN_TURN` of the later
/// ones from `cursor` on (wrapping around); with the cursor of the next turn.
fn turn_window(n: usize, sends: usize, cursor: usize) -> (impl Iterator<Item = usize>, usize) {
    let first = (sends + TESTED_OLDEST).min(n);
    let rest = n - first;
    let (from, k, next) = match rest {
        0 => (first, 0, 0),
        _ => {
            let at = cursor % rest;
            (first + at, TESTED_IN_TURN.min(rest), at + TESTED_IN_TURN)
        }
    };
    let wrapped = (from + k).saturating_sub(n);
    let tested = (0..first)
        .chain(from..(from + k).min(n))
        .chain(first..first + wrapped);
    (tested, next)
}

pub(super) fn progress_loop(
    rank: u32,
    comm: RawComm,
    alert: RawComm,
    jobs: Receiver<Transfer>,
    pending: Pending,
    stop: Arc<AtomicBool>,
    timeout: Option<Duration>,
) {
    let mut p = Progress {
        rank,
        comm,
        active: VecDeque::new(),
        pending,
        asks: Asks::new(alert),
        scratch: Vec::new(),
        indices: Vec::new(),
        owners: Vec::new(),
        sends: 0,
        cursor: 0,
        next_deadline_check: Instant::now(),
        published: (Instant::now(), true),
        blocks: ReceiveBlocks::default(),
        waiting: VecDeque::new(),
    };
    let mut next_serve = Instant::now();
    let mut turn_started = 0u64;
    loop {
        if turn_started != 0 {
            let t = crate::observe::trace::begin();
            if t.saturating_sub(turn_started) > SLOW_TURN_NS {
                let active = p.active.len() as u64;
                crate::observe::trace::span(
                    "transfer",
                    "slow progress turn",
                    turn_started,
                    crate::trace_args![("active", active)],
                );
            }
        }
        turn_started = crate::observe::trace::begin();
        // Another rank asks for this rank's call history only when a wait of its own
        // ran out: looked at every millisecond, not every turn (each look is an MPI
        // progress call, and one of those took 5-8 µs with messages moving).
        let now = Instant::now();
        if now >= next_serve {
            p.asks.serve();
            next_serve = now + Duration::from_millis(1);
        }
        // At exit, transfers still pending after the grace period are abandoned.
        if stop.load(Ordering::Acquire) {
            p.asks.close();
            return;
        }
        // Take every new transfer before the next progress call, so that a send starts
        // moving at once: block when there is nothing to progress.
        let mut started = false;
        if p.active.is_empty() && p.waiting.is_empty() {
            match jobs.recv_timeout(Duration::from_millis(50)) {
                Ok(t) => {
                    p.take(t);
                    started = true;
                }
                Err(_) => continue,
            }
        }
        while let Ok(t) = jobs.try_recv() {
            p.take(t);
            started = true;
        }
        // Sends first: what another rank waits for.
        started |= p.post_waiting();
        if p.complete_finished() || started {
            p.publish();
            continue;
        }
        // What completed since the last publication shows within `PUBLISH_EVERY`.
        p.publish();
        p.check_deadline(timeout);
        // Transfers in flight: keep driving MPI's progress (a large message moves in
        // fragments, each needing a progress call on both sides; napping between calls
        // cut the bandwidth of 1-64 MiB copies between two GPUs to a fifth). Yield
        // between polls: ranks may share cores.
        std::thread::yield_now();
    }
}

impl Progress {
    /// A new transfer: a send starts at once, a receive waits its turn to be posted.
    fn take(&mut self, t: Transfer) {
        if t.direction == Direction::Send {
            self.start(t);
        } else {
            self.waiting.push_back((t, Instant::now()));
        }
    }

    /// Posts waiting receives while fewer than `RECEIVES_POSTED` are; whether it did.
    fn post_waiting(&mut self) -> bool {
        let mut posted = 0;
        while posted < RECEIVES_POSTED_PER_TURN && self.active.len() - self.sends < RECEIVES_POSTED
        {
            let Some((t, _)) = self.waiting.pop_front() else {
                break;
            };
            self.start(t);
            posted += 1;
        }
        posted > 0
    }

    fn start(&mut self, t: Transfer) {
        let traced = crate::observe::trace::begin();
        match post(self.comm, &t, &mut self.blocks) {
            Ok(mut active) => {
                active.traced = traced;
                let send = t.direction == Direction::Send;
                active.transfer = Some(t);
                if send {
                    self.active.push_front(active);
                    self.sends += 1;
                } else {
                    self.active.push_back(active);
                }
            }
            Err(rc) => {
                crate::diag!(
                    "MirrorCL: rank {}: MPI error {rc} posting a {}",
                    self.rank,
                    describe(t.direction, t.peer, &t.what, Duration::ZERO)
                );
                complete(self.rank, t, super::super::CL_OUT_OF_RESOURCES);
            }
        }
    }

    /// Which transfers this turn tests (`turn_window`).
    fn tested(&mut self) -> impl Iterator<Item = usize> {
        let (tested, cursor) = turn_window(self.active.len(), self.sends, self.cursor);
        self.cursor = cursor;
        tested
    }

    /// Tests the requests of the transfers `tested` picks with one `MPI_Testsome`: one
    /// progress call per turn, where an `MPI_Test` per request made each turn cost the
    /// number of transfers planned ahead. Should it report an error, each request is
    /// tested on its own (one that fails, a truncated message, must not end the
    /// transfer while its others still use the buffers).
    fn test_requests(&mut self) -> Vec<usize> {
        // SAFETY: a null request handle to compare with.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        let mut reqs = std::mem::take(&mut self.scratch);
        reqs.clear();
        self.owners.clear();
        for i in self.tested() {
            let a = &self.active[i];
            for (j, r) in a.requests.iter().enumerate().filter(|(_, r)| **r != null) {
                reqs.push(*r);
                self.owners.push((i, j));
            }
        }
        let mut touched = Vec::new();
        if reqs.is_empty() {
            self.scratch = reqs;
            return touched;
        }
        let mut indices = std::mem::take(&mut self.indices);
        indices.resize(reqs.len(), 0);
        let mut count: c_int = 0;
        // SAFETY: live requests posted above (MPI nulls those complete); `indices` has
        // room for all of them.
        let rc = unsafe {
            ffi::MPI_Testsome(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                &mut count,
                indices.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        if rc == 0 {
            for &k in &indices[..count.max(0) as usize] {
                let (i, j) = self.owners[k as usize];
                self.active[i].requests[j] = null;
                touched.push(i);
            }
        } else {
            for (i, a) in self.active.iter_mut().enumerate() {
                for req in a.requests.iter_mut().filter(|r| **r != null) {
                    let mut flag: c_int = 0;
                    // SAFETY: a live request posted above (MPI nulls it once complete).
                    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                    if rc != 0 {
                        a.failed = true;
                        *req = null;
                    }
                }
                touched.push(i);
            }
        }
        self.scratch = reqs;
        self.indices = indices;
        // Highest first: removing one moves only those after it, which are done.
        touched.sort_unstable_by(|x, y| y.cmp(x));
        touched.dedup();
        touched
    }

    /// Runs the `done` of every transfer MPI finished; whether there was one.
    fn complete_finished(&mut self) -> bool {
        let touched = self.test_requests();
        let mut progressed = false;
        // SAFETY: a null request handle to compare with.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        for i in touched {
            let a = &mut self.active[i];
            if a.header_unchecked && a.requests[0] == null {
                a.header_unchecked = false;
                let head: &[u8; 32] = a.staged[..32].try_into().expect("a header");
                let t = a.transfer.as_ref().expect("a posted transfer");
                if let Arrival::Diverged(text) = arrival(t, &Header::from_bytes(head), !a.failed) {
                    let peer = t.peer;
                    self.diverged(peer, &text);
                }
            }
            let a = &mut self.active[i];
            if a.requests.iter().all(|r| *r == null) && a.awaiting_header {
                // A larger receive's header: checked before its bytes are received.
                let a = &mut self.active[i];
                a.requests.clear();
                a.awaiting_header = false;
                let head: &[u8; 32] = a.staged[..32].try_into().expect("a header");
                let h = Header::from_bytes(head);
                let t = a.transfer.take().expect("a posted transfer");
                match arrival(&t, &h, !a.failed) {
                    Arrival::Diverged(text) => self.diverged(t.peer, &text),
                    Arrival::Status(s) => a.sender_status = s,
                }
                a.failed = false;
                if post_bytes(self.comm, &t, &h, a).is_err() {
                    a.failed = true;
                }
                a.transfer = Some(t);
                progressed = true;
                // Tested from the next turn on; nothing posted (a failure) ends it now.
                if a.requests.iter().any(|r| *r != null) {
                    continue;
                }
            }
            let a = &mut self.active[i];
            if a.requests.iter().all(|r| *r == null) {
                // In place: sends lead, and receives keep their order (`tested`).
                let mut done = self.active.remove(i).expect("index in range");
                if i < self.sends {
                    self.sends -= 1;
                }
                let ok = !done.failed;
                // A packed or framed receive's block came from `blocks` (`post`).
                let recycled = done.packed
                    && (done.transfer.as_ref()).is_some_and(|t| t.direction != Direction::Send);
                if let Some(t) = done.transfer.take() {
                    let status = match t.direction {
                        Direction::Send if ok => 0,
                        Direction::Send => super::super::CL_OUT_OF_RESOURCES,
                        Direction::Discard => super::super::CL_OUT_OF_RESOURCES,
                        Direction::Recv if !done.packed => match done.sender_status {
                            s if s < 0 => s,
                            _ if ok => 0,
                            _ => super::super::CL_OUT_OF_RESOURCES,
                        },
                        Direction::Recv => {
                            let head: &[u8; 32] =
                                done.staged[..32].try_into().expect("a header first");
                            match arrival(&t, &Header::from_bytes(head), ok) {
                                Arrival::Status(0) if done.packed && t.len > 0 => {
                                    // SAFETY: the receive's `len` bytes at `ptr` stay
                                    // valid until `done`; `staged` holds them after the
                                    // header.
                                    unsafe {
                                        std::ptr::copy_nonoverlapping(
                                            done.staged[32..32 + t.len].as_ptr(),
                                            t.ptr as *mut u8,
                                            t.len,
                                        )
                                    };
                                    0
                                }
                                Arrival::Status(s) => s,
                                Arrival::Diverged(text) => self.diverged(t.peer, &text),
                            }
                        }
                    };
                    trace_message(self.rank, &t, done.traced, status);
                    complete(self.rank, t, status);
                }
                if recycled {
                    self.blocks.give(std::mem::take(&mut done.staged));
                }
                progressed = true;
            }
        }
        progressed
    }

    /// Reports every transfer in flight and ends the job once the oldest is overdue.
    fn check_deadline(&mut self, timeout: Option<Duration>) {
        let now = Instant::now();
        if now < self.next_deadline_check {
            return;
        }
        self.next_deadline_check = now + Duration::from_millis(10);
        let (Some(limit), Some(oldest)) = (timeout, self.active.iter().map(|a| a.since).min())
        else {
            return;
        };
        if oldest.elapsed() <= limit {
            return;
        }
        for a in &self.active {
            if let Some(t) = &a.transfer {
                crate::diag!(
                    "MirrorCL: rank {}: {} never completed \
                     (deadline MIRRORCL_WAIT_TIMEOUT)",
                    self.rank,
                    describe(t.direction, t.peer, &t.what, a.since.elapsed())
                );
            }
        }
        crate::cluster::node::node().abort();
    }

    /// A message showed the replicas diverged: asks its sender for its call history
    /// (a few seconds at most), reports the first call that differs, ends the job.
    fn diverged(&mut self, peer: u32, text: &str) -> ! {
        let theirs = self.asks.history_of(peer);
        crate::diag!("{}", divergence_report(self.rank, peer, text, theirs));
        crate::cluster::node::node().abort()
    }

    fn publish(&mut self) {
        let (at, was_empty) = self.published;
        let now = Instant::now();
        let empty = self.active.is_empty() && self.waiting.is_empty();
        if empty == was_empty && now - at < PUBLISH_EVERY {
            return;
        }
        self.published = (now, empty);
        let mut p = self.pending.lock();
        p.clear();
        p.extend(self.active.iter().filter_map(|a| {
            a.transfer
                .as_ref()
                .map(|t| (t.direction, t.peer, t.what, a.since))
        }));
        p.extend((self.waiting.iter()).map(|(t, since)| (t.direction, t.peer, t.what, *since)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every turn tests every send and the oldest receives; every later receive is
    /// tested within as many turns as it takes the window to come round; none twice in
    /// a turn.
    #[test]
    fn a_turn_tests_the_sends_the_oldest_and_the_rest_in_turn() {
        for (n, sends) in [
            (0, 0),
            (5, 2),
            (40, 3),
            (41, 0),
            (100, 7),
            (1000, 1),
            (70, 38),
        ] {
            let mut cursor = 0;
            let first = (sends + TESTED_OLDEST).min(n);
            let rest = n - first;
            let turns = rest.div_ceil(TESTED_IN_TURN).max(1);
            let mut seen = vec![false; n];
            for _ in 0..turns {
                let (tested, next) = turn_window(n, sends, cursor);
                let tested: Vec<usize> = tested.collect();
                cursor = next;
                let mut unique = tested.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(unique.len(), tested.len(), "n {n}: one tested twice");
                assert!(tested.iter().all(|&i| i < n));
                assert!(
                    (0..first).all(|i| tested.contains(&i)),
                    "n {n}: oldest left out"
                );
                assert!(tested.len() <= first + TESTED_IN_TURN);
                for i in tested {
                    seen[i] = true;
                }
            }
            assert!(
                seen.iter().all(|&s| s),
                "n {n}, sends {sends}: one never tested"
            );
        }
    }
}
