//! Waiting for events (`clWaitForEvents`, blocking commands, polled statuses), with a
//! deadline, and the statuses the ranks agree on where the application asks.

use super::*;

impl Event {
    /// See `waits_elsewhere`; set once, at submission.
    pub fn set_waits_elsewhere(&self, events: Vec<Weak<Event>>) {
        let _ = self.waits_elsewhere.set(events);
    }

    fn waits_elsewhere(&self) -> &[Weak<Event>] {
        self.waits_elsewhere.get().map_or(&[], Vec::as_slice)
    }

    /// The statuses this rank reports for the commands of other ranks that `events`
    /// wait for (`waits_elsewhere`): those it owns, numbered from `first` in the order
    /// every rank lists them.
    fn elsewhere_statuses(events: &[Arc<Event>], first: u32, rank: u32) -> Vec<(u32, cl_int)> {
        let waited = events.iter().flat_map(|e| e.waits_elsewhere());
        (waited.enumerate())
            .filter_map(|(k, w)| {
                let w = w.upgrade()?;
                (w.owner() == Some(rank)).then(|| (first + k as u32, w.status()))
            })
            .collect()
    }

    /// Which of `events` waits for the `k`-th command of `elsewhere_statuses`.
    fn waiting_for(events: &[Arc<Event>], k: usize) -> Option<&Arc<Event>> {
        let mut k = k;
        for e in events {
            let n = e.waits_elsewhere().len();
            if k < n {
                return Some(e);
            }
            k -= n;
        }
        None
    }

    /// Blocks until the event is done; returns its final status. Spins briefly, then
    /// waits inside the vendor once the command has reached it (the vendor's own wake-up
    /// path, as fast as a native wait), or parks until it does.
    pub fn wait(self: &Arc<Self>) -> cl_int {
        if let Some(q) = self.queue() {
            if q.device.local() {
                q.device.issuer().note_waited();
            }
        }
        if self.is_done() {
            self.host_waited();
            return self.status();
        }
        if self.is_unbacked() {
            self.request_backing();
        }
        let start = crate::observe::stats::on().then(Instant::now);
        let traced = crate::observe::trace::begin();
        let status = self.wait_inner();
        if let Some(start) = start {
            let waited = start.elapsed().as_nanos() as u64;
            crate::observe::stats::add(&crate::observe::stats::COUNTERS.waiting_ns, waited);
        }
        if traced != 0 {
            crate::observe::trace::span(
                "wait",
                "wait",
                traced,
                crate::trace_args![
                    ("command", self.seq),
                    ("for", command_name(self.command_type))
                ],
            );
        }
        self.host_waited();
        status
    }

    fn wait_inner(self: &Arc<Self>) -> cl_int {
        let platform = crate::objects::platform::platform();
        let start = Instant::now();
        // Polling the vendor's status while spinning catches completion sooner than a
        // vendor wait's own wake-up; spinning only while a core is free (`crate::objects::spin`).
        let mut spin = crate::objects::spin::Spin::new(platform.config.spin());
        let mut polls = 0u32;
        while spin.spinning() {
            if self.is_done() {
                return self.status();
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(16) && self.poll() {
                return self.status();
            }
            std::hint::spin_loop();
        }
        let deadline = platform.config.wait_timeout().map(|t| start + t);
        let mut waited_in_vendor = false;
        loop {
            if self.is_done() {
                return self.status();
            }
            if !waited_in_vendor {
                if let Some(v) = self.vendor() {
                    waited_in_vendor = true;
                    self.wait_vendor(v);
                    continue;
                }
            }
            // Not issued yet, or the vendor gave up on it without saying (a failed
            // dependency): park until MirrorCL attaches or completes it.
            let mut st = self.state.lock();
            if self.is_done() || (!waited_in_vendor && self.vendor().is_some()) {
                continue;
            }
            match deadline {
                Some(d) => {
                    if self.done.wait_until(&mut st, d).timed_out() && !self.is_done() {
                        drop(st);
                        self.deadline_expired(d.duration_since(start));
                    }
                }
                None => self.done.wait(&mut st),
            }
        }
    }

    fn deadline_expired(&self, waited: Duration) -> ! {
        let p = crate::objects::platform::platform();
        let node = crate::cluster::node::node();
        let mut report = format!(
            "MirrorCL: rank {} waited {:.0} s for command #{} ({}) on {}; it never completed \
             (status {}). Deadline: MIRRORCL_WAIT_TIMEOUT.",
            p.rank,
            waited.as_secs_f64(),
            self.seq,
            command_name(self.command_type),
            self.queue()
                .map(|q| {
                    let d = &q.device;
                    let owner = if d.local() {
                        String::new()
                    } else {
                        format!(", owned by rank {}", d.owner)
                    };
                    format!("device {} ({}{owner})", d.index, d.name())
                })
                .unwrap_or_else(|| "no queue (user event)".into()),
            self.status()
        );
        let buffer = self.subject.load(Ordering::Relaxed);
        if buffer != 0 {
            report.push_str(&format!(" It uses buffer #{buffer}."));
        }
        for line in node.pending_report() {
            report.push_str(&format!("\n  still waiting: {line}"));
        }
        self.report_unfinished_deps(&mut report, 2);
        crate::diag!("{report}\nMirrorCL: aborting the job.");
        node.abort();
    }

    /// The commands it waits for that are not done, and theirs (`depth` levels below
    /// the first), for a deadline report: whether each reached its vendor tells a
    /// command held back from one stuck inside the vendor.
    fn report_unfinished_deps(&self, report: &mut String, depth: usize) {
        let deps: Vec<Arc<Event>> = (self.state.lock().waits_for.iter())
            .filter_map(Weak::upgrade)
            .filter(|d| !d.is_done())
            .collect();
        for d in deps.iter().take(8) {
            let indent = "  ".repeat(3 - depth.min(2));
            report.push_str(&format!(
                "\n  {indent}waits for command #{} ({}{}), status {}, {}",
                d.seq,
                command_name(d.command_type),
                d.queue()
                    .map(|q| format!(" on device {}", q.device.index))
                    .unwrap_or_default(),
                d.status(),
                match d.vendor() {
                    Some(v) => format!("in the vendor (its status {:?})", v.ev.status()),
                    None if d.is_unbacked() => "in the vendor, without a vendor event yet".into(),
                    None => "not issued".into(),
                }
            ));
            if depth > 0 {
                d.report_unfinished_deps(report, depth - 1);
            }
        }
    }
}

/// Waits for all of `events`; the first failed one gives
/// `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST`.
/// `clWaitForEvents`. In a cluster the ranks then agree on the statuses: each command's
/// owner reports those of its commands (a collective: every replica waits for the same
/// list), so a command that failed on its owner reports its error on every rank.
pub fn wait_all(events: &[Arc<Event>]) -> ClResult<()> {
    for e in events {
        e.wait();
    }
    let node = crate::cluster::node::node();
    if node.is_cluster() && crate::cluster::host_threads::several() {
        statuses_from_owners(events);
    } else if node.is_cluster() && events.iter().any(|e| e.owner().is_some()) {
        let what: Vec<u64> = (events.iter())
            .map(|e| (e.command_type as u64) << 32 | e.owner().unwrap_or(u32::MAX) as u64)
            .collect();
        crate::cluster::history::note_call("clWaitForEvents", &what);
        let mut mine: Vec<(u32, cl_int)> = (events.iter().enumerate())
            .filter(|(_, e)| e.owner() == Some(node.rank))
            .map(|(i, e)| (i as u32, e.status()))
            .collect();
        let n = events.len();
        mine.extend(Event::elsewhere_statuses(events, n as u32, node.rank));
        for EventStatuses(theirs) in node.exchange(&EventStatuses(mine)) {
            for (i, status) in theirs {
                match (i as usize).checked_sub(n) {
                    None => {
                        if let Some(e) = events.get(i as usize) {
                            e.adopt(status);
                        }
                    }
                    // A command another rank ran, which this one waited for, failed.
                    Some(k) if status < 0 => {
                        if let Some(e) = Event::waiting_for(events, k) {
                            e.adopt(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    // The commands before these in their queues are done too: forget them, as a
    // blocking command does, so that a program that only ever waits here does not keep
    // up to 1,024 completed commands' buffers.
    let mut pruned: Vec<*const Queue> = Vec::new();
    for q in events.iter().filter_map(|e| e.queue()) {
        if !pruned.contains(&Arc::as_ptr(&q)) {
            pruned.push(Arc::as_ptr(&q));
            q.prune_completed();
        }
    }
    if events.iter().any(|e| e.status() < 0) {
        Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    } else {
        Ok(())
    }
}

/// `clWaitForEvents` once the program has named host threads: each command's owner sends
/// its final status to every other rank, tagged by the command's name, and the others
/// take it. No collective: a wait may come from any thread at any point (a finalizer a
/// garbage collector runs, as pyopencl's "nanny" events do), and two ranks need not wait
/// in the same order. (A failure of a command of another rank in a waited command's wait
/// list is not carried here, only the waited commands' own statuses.)
fn statuses_from_owners(events: &[Arc<Event>]) {
    let node = crate::cluster::node::node();
    let what = crate::cluster::node::What {
        command: "a waited command's status",
        buffer: 0,
        offset: 0,
        len: 0,
        // Waits need not come at the same points of any thread's calls on every rank.
        stamp: crate::cluster::history::Stamp::default(),
    };
    for e in events {
        let (Some(owner), command) = (e.owner(), e.command.load(Ordering::Acquire)) else {
            continue;
        };
        if command == 0 {
            continue;
        }
        let tag = crate::cluster::host_threads::status_tag(command);
        if owner == node.rank {
            for peer in (0..node.size).filter(|&r| r != node.rank) {
                node.transfer(crate::cluster::node::Transfer {
                    direction: crate::cluster::node::Direction::Send,
                    peer,
                    tag,
                    ptr: 0,
                    len: 0,
                    what,
                    status: e.status(),
                    done: Box::new(|_| {}),
                });
            }
        } else {
            let status = node.message_status(owner, tag, what);
            e.adopt(status);
        }
    }
}

/// `CL_EVENT_COMMAND_EXECUTION_STATUS`. In a cluster the ranks agree on it: the command's
/// owner reports its status, for an event without an owner the least advanced rank's
/// (a collective: every replica polls in the same order), so a
/// program that branches on a polled status (the CTS `events` `waitlists`) takes the same
/// branch, and makes the same calls, on every rank. In an event callback, which runs at
/// different times on different ranks, the status is this rank's own.
pub fn polled_status(event: &Arc<Event>) -> cl_int {
    // Events nobody waits on learn of completion when asked.
    event.poll();
    let node = crate::cluster::node::node();
    if !node.is_cluster() || crate::cluster::thread_state::in_callback() {
        return event.status();
    }
    let owner = event.owner();
    let what = (event.command_type as u64) << 32 | owner.unwrap_or(u32::MAX) as u64;
    crate::cluster::history::note_call(
        "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
        &[what],
    );
    let mut mine = if owner.is_none() || owner == Some(node.rank) {
        vec![(0, event.status())]
    } else {
        Vec::new()
    };
    let one = std::slice::from_ref(event);
    mine.extend(Event::elsewhere_statuses(one, 1, node.rank));
    let all = node.exchange(&EventStatuses(mine));
    // A command another rank ran, which this one waits for, failed.
    let failed_elsewhere = (all.iter().flat_map(|m| m.0.iter())).any(|&(i, s)| i > 0 && s < 0);
    let all: Vec<EventStatuses> = (all.into_iter())
        .map(|m| EventStatuses(m.0.into_iter().filter(|&(i, _)| i == 0).collect()))
        .collect();
    let answer = match owner {
        Some(owner) => (all.into_iter().nth(owner as usize))
            .and_then(|EventStatuses(s)| s.first().map(|&(_, status)| status)),
        // An event without an owner (a command run on every rank, a user event): the
        // least advanced status of any rank, an error first.
        None => {
            let statuses: Vec<cl_int> = all
                .iter()
                .filter_map(|m| m.0.first().map(|&(_, s)| s))
                .collect();
            let error = statuses.iter().copied().filter(|&s| s < 0).min();
            error.or_else(|| statuses.iter().copied().max())
        }
    };
    let answer = match answer {
        Some(CL_COMPLETE) if failed_elsewhere => Some(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
        a => a,
    };
    match answer {
        Some(status) => {
            if status == CL_COMPLETE && !event.is_done() {
                // The owner is done, this rank's part may not be: a read's bytes may
                // still be on their way here, and the program reads them next.
                event.wait();
            }
            event.adopt(status);
            if status == CL_COMPLETE {
                event.host_waited();
            }
            status
        }
        None => event.status(),
    }
}
