//! What this rank did, counted as it happens (relaxed atomics: a few nanoseconds per
//! command), and reported at exit with `MIRRORCL_STATS` (`cluster::statistics` gathers them): `1` prints a table, per rank and
//! summed over the cluster (rank 0 prints it); any other value is a path rank 0 writes the
//! same figures to as JSON. These are the figures of Tables IV.6 and IV.7 of the thesis.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// This rank's counters.
        pub struct Counters {
            $(#[doc = $doc] pub $name: AtomicU64,)*
        }

        /// A snapshot of the counters, as reported.
        #[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
        pub struct Figures {
            $(#[doc = $doc] pub $name: u64,)*
        }

        impl Counters {
            const fn new() -> Self {
                Counters { $($name: AtomicU64::new(0),)* }
            }

            pub fn snapshot(&self) -> Figures {
                Figures { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl Figures {
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            pub(crate) fn values(&self) -> Vec<u64> {
                vec![$(self.$name),*]
            }

            pub(crate) fn from_values(v: &[u64]) -> Figures {
                let mut it = v.iter().copied();
                Figures { $($name: it.next().unwrap_or(0),)* }
            }

            pub(crate) fn add(&mut self, other: &Figures) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

counters! {
    api_calls: "OpenCL API calls",
    commands_created: "commands the program enqueued",
    commands_not_enqueued: "commands left out by the queueing optimisation",
    commands_scheduled: "commands the scheduler planned",
    commands_issued: "commands issued to this rank's actual devices",
    jobs_handed: "vendor commands handed to an issuer thread (the enqueuing thread ran the rest itself)",
    local_copies: "consistency actions within this rank (device copy, host copy to device)",
    sends: "messages sent to other ranks",
    receives: "messages received from other ranks",
    bytes_sent: "bytes sent to other ranks",
    bytes_received: "bytes received from other ranks",
    scheduling_ns: "time spent scheduling (ns)",
    waiting_ns: "time application threads spent waiting for commands (ns)",
    pace_ns: "time enqueues waited for a queue's oldest commands (MIRRORCL_AHEAD) (ns)",
    writes_merged: "writes of landed bytes that went in the vendor write of the bytes beside them",
    reads_ahead: "small local copies made from a read taken ahead for the sends their source's last sends predict",
    kernels_unbacked: "kernels the enqueuing thread launched without a vendor event (issuer::Unbacked)",
    unbacked_by_marker: "of those, kernels backed by a marker because something else needed their completion",
}

pub static COUNTERS: Counters = Counters::new();

/// Whether the counters are reported (`MIRRORCL_STATS`). Off, nothing counts: the
/// counters share cache lines that the enqueuing thread, the issuers and the progress
/// thread would otherwise each write on every command.
static ON: AtomicBool = AtomicBool::new(false);

/// Starts counting; called once the configuration asks for a report.
pub fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether figures are counted (and so whether they are worth measuring).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

#[inline]
pub fn add(counter: &AtomicU64, n: u64) {
    if on() {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The report: every rank's figures and their sum.
#[derive(Serialize)]
pub(crate) struct Report {
    pub ranks: Vec<Figures>,
    pub total: Figures,
}

pub(crate) fn table(report: &Report) -> String {
    let mut t = String::from("MirrorCL statistics\n");
    t.push_str(&format!("  {:<24}", "figure"));
    for r in 0..report.ranks.len() {
        t.push_str(&format!(" {:>14}", format!("rank {r}")));
    }
    t.push_str(&format!(" {:>14}\n", "cluster"));
    let total = report.total.values();
    for (i, name) in Figures::NAMES.iter().enumerate() {
        t.push_str(&format!("  {name:<24}"));
        for f in &report.ranks {
            t.push_str(&format!(" {:>14}", f.values()[i]));
        }
        t.push_str(&format!(" {:>14}\n", total[i]));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_round_trip_and_sum() {
        let a = Figures {
            api_calls: 3,
            bytes_sent: 7,
            ..Default::default()
        };
        let b = Figures::from_values(&a.values());
        assert_eq!(a, b);
        let mut t = a;
        t.add(&b);
        assert_eq!(t.api_calls, 6);
        let text = table(&Report {
            ranks: vec![a, b],
            total: t,
        });
        assert!(text.contains("api_calls"), "{text}");
        assert!(text.contains("rank 1"), "{text}");
    }
}
