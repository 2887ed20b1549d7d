//! A model of one iteration of a workload's loop on one rank, from the simulated
//! figures: the rank's scheduling time, plus what its issuers run (its devices'
//! commands, its local copies, the device reads and writes of its messages) at a
//! per-command cost, plus its messages (sent and
//! received) at a per-message latency; optionally plus every command the program
//! creates at the cost of an enqueue call (every rank runs the whole host program, so
//! it makes every call, left out or not). The iteration takes as long as its slowest
//! rank (every iteration of the microbenchmark waits for every rank's copies).

use super::Figures;

/// The model's two measured parameters, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// What one issued command costs its rank (`--command-us`).
    pub command_us: f64,
    /// What one message costs, sent or received (`--latency-us`).
    pub latency_us: f64,
    /// What the host program's enqueue call costs per command created (`--enqueue-us`;
    /// 0 leaves the term out).
    pub enqueue_us: f64,
}

/// One rank's modelled time for the figures of one iteration, in µs.
pub fn rank_us(per_iteration: &Figures, costs: Costs) -> f64 {
    let f = per_iteration;
    f.scheduling_ns as f64 / 1e3
        + f.issuer_work() as f64 * costs.command_us
        + (f.sends + f.receives) as f64 * costs.latency_us
        + f.commands_created as f64 * costs.enqueue_us
}

/// The modelled iteration: its slowest rank, in µs. Every rank's scheduling time is
/// taken as the median rank's: measured on a shared machine, a rank's wall clock also
/// holds the moments its thread was not running, and the largest collects them.
pub fn iteration_us(per_iteration: &[Figures], costs: Costs) -> f64 {
    let mut sched: Vec<u64> = per_iteration.iter().map(|f| f.scheduling_ns).collect();
    sched.sort_unstable();
    let median = sched.get(sched.len() / 2).copied().unwrap_or(0);
    per_iteration
        .iter()
        .map(|f| {
            rank_us(
                &Figures {
                    scheduling_ns: median,
                    ..*f
                },
                costs,
            )
        })
        .fold(0.0, f64::max)
}

/// The figures of one steady-state iteration of a rank: between the second mark (the
/// end of the first iteration) and the last, divided by the iterations between them;
/// with a single iteration, that iteration (times are rounded down).
pub fn per_iteration(marks: &[Figures]) -> Option<Figures> {
    let (first, last, n) = match marks.len() {
        0 | 1 => return None,
        2 => (&marks[0], &marks[1], 1),
        k => (&marks[1], &marks[k - 1], (k - 2) as u64),
    };
    let d = last.since(first);
    let div = |x: u64| x / n;
    Some(Figures {
        commands_created: div(d.commands_created),
        commands_not_enqueued: div(d.commands_not_enqueued),
        commands_scheduled: div(d.commands_scheduled),
        commands_issued: div(d.commands_issued),
        local_copies: div(d.local_copies),
        sends: div(d.sends),
        receives: div(d.receives),
        bytes_sent: div(d.bytes_sent),
        bytes_received: div(d.bytes_received),
        scheduling_ns: div(d.scheduling_ns),
        step_device_ops: div(d.step_device_ops),
    })
}
