//! The figures: per OpenCL API family, what each is (round trip or burst with a
//! goal, or a cost reported only), its samples' statistics on each platform,
//! the MirrorCL/native ratio, and each family's geometric mean.

use crate::stats::{stat, Stat};
use crate::target::Samples;
use crate::{BURST_GOAL, CALLS_PER_SAMPLE, ROUND_TRIP_GOAL};

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// Lower is better; ratio = MirrorCL / native, goal ratio ≤ ROUND_TRIP_GOAL.
    RoundTrip,
    /// Higher throughput is better; ratio = MirrorCL / native throughput.
    Burst,
    /// Reported, no goal: a part of the figure above it (the burst's
    /// enqueue calls alone); left out of the family summaries.
    Info,
    /// Lower is better; ratio = MirrorCL / native; reported, no goal.
    Cost,
}

impl Kind {
    pub fn json(self) -> &'static str {
        match self {
            Kind::RoundTrip => "round_trip",
            Kind::Burst => "burst",
            Kind::Info => "info",
            Kind::Cost => "cost",
        }
    }
}

/// The OpenCL API families, in report order.
pub const FAMILIES: [&str; 5] = [
    "kernel",
    "transfer",
    "memory objects",
    "synchronisation",
    "queries",
];

pub struct Figure {
    pub key: &'static str,
    pub family: &'static str,
    pub name: String,
    pub kind: Kind,
    /// Calls timed together per sample (the figure is per call).
    pub calls_per_sample: usize,
    pub native: Stat,
    pub mirror: Option<Stat>,
}

impl Figure {
    pub fn ratio(&self) -> Option<f64> {
        let m = self.mirror?;
        Some(match self.kind {
            Kind::RoundTrip | Kind::Info | Kind::Cost => m.median / self.native.median,
            Kind::Burst => self.native.median / m.median,
        })
    }
    /// MirrorCL / native median time, whatever the kind (for the burst, the
    /// inverse of its throughput ratio).
    pub fn time_ratio(&self) -> Option<f64> {
        Some(self.mirror?.median / self.native.median)
    }
    pub fn goal(&self) -> Option<(&'static str, f64)> {
        match self.kind {
            Kind::RoundTrip => Some(("<=", ROUND_TRIP_GOAL)),
            Kind::Burst => Some((">=", BURST_GOAL)),
            Kind::Info | Kind::Cost => None,
        }
    }
    pub fn met(&self) -> Option<bool> {
        let r = self.ratio()?;
        match self.kind {
            Kind::RoundTrip => Some(r <= ROUND_TRIP_GOAL),
            Kind::Burst => Some(r >= BURST_GOAL),
            Kind::Info | Kind::Cost => None,
        }
    }
}

/// Picks one figure's samples out of a platform's [`Samples`].
type Pick = fn(&Samples) -> &[f64];

pub fn figures(native: &Samples, mirror: Option<&Samples>, burst_size: usize) -> Vec<Figure> {
    let one = 1;
    let many = CALLS_PER_SAMPLE;
    let pick: [(&'static str, &'static str, String, Kind, usize, Pick); 12] = [
        (
            "kernel_round_trip",
            "kernel",
            "kernel enqueue + clFinish".into(),
            Kind::RoundTrip,
            one,
            |s| &s.kernel_rt,
        ),
        (
            "burst_per_command",
            "kernel",
            format!("burst of {burst_size}, per command"),
            Kind::Burst,
            one,
            |s| &s.burst,
        ),
        (
            "burst_enqueue_per_call",
            "kernel",
            "  (enqueue call alone)".into(),
            Kind::Info,
            one,
            |s| &s.burst_enqueue,
        ),
        (
            "set_kernel_arg",
            "kernel",
            "clSetKernelArg (int), per call".into(),
            Kind::Cost,
            many,
            |s| &s.set_arg,
        ),
        (
            "write_16b",
            "transfer",
            "16 B blocking write".into(),
            Kind::RoundTrip,
            one,
            |s| &s.write,
        ),
        (
            "read_16b",
            "transfer",
            "16 B blocking read".into(),
            Kind::RoundTrip,
            one,
            |s| &s.read,
        ),
        (
            "copy_16b",
            "transfer",
            "16 B copy + clFinish".into(),
            Kind::Cost,
            one,
            |s| &s.copy,
        ),
        (
            "map_unmap_16b",
            "transfer",
            "16 B blocking map + unmap + clFinish".into(),
            Kind::Cost,
            one,
            |s| &s.map,
        ),
        (
            "create_release_buffer_4k",
            "memory objects",
            "clCreateBuffer 4 KiB + release".into(),
            Kind::Cost,
            one,
            |s| &s.create,
        ),
        (
            "marker_wait_release",
            "synchronisation",
            "marker + clWaitForEvents + release".into(),
            Kind::Cost,
            one,
            |s| &s.marker,
        ),
        (
            "device_info_name",
            "queries",
            "clGetDeviceInfo(NAME), per call".into(),
            Kind::Cost,
            many,
            |s| &s.device_info,
        ),
        (
            "mem_object_info_size",
            "queries",
            "clGetMemObjectInfo(SIZE), per call".into(),
            Kind::Cost,
            many,
            |s| &s.mem_info,
        ),
    ];
    pick.into_iter()
        .map(|(key, family, name, kind, calls_per_sample, f)| Figure {
            key,
            family,
            name,
            kind,
            calls_per_sample,
            native: stat(f(native)),
            mirror: mirror.map(|m| stat(f(m))),
        })
        .collect()
}

/// One family's summary: its figures' keys and the geometric mean of their
/// MirrorCL/native median-time ratios (sub-figures, [`Kind::Info`], left
/// out; the burst counts as its time per command).
pub struct FamilySummary {
    pub family: &'static str,
    pub keys: Vec<&'static str>,
    /// The keys the mean is over.
    pub mean_keys: Vec<&'static str>,
    pub time_ratio_geomean: Option<f64>,
}

pub fn family_summaries(figs: &[Figure]) -> Vec<FamilySummary> {
    FAMILIES
        .iter()
        .map(|&family| {
            let members: Vec<&Figure> = figs.iter().filter(|f| f.family == family).collect();
            let in_mean: Vec<&Figure> = members
                .iter()
                .copied()
                .filter(|f| f.kind != Kind::Info)
                .collect();
            let ratios: Option<Vec<f64>> = in_mean.iter().map(|f| f.time_ratio()).collect();
            let time_ratio_geomean = ratios
                .filter(|r| !r.is_empty())
                .map(|r| (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp());
            FamilySummary {
                family,
                keys: members.iter().map(|f| f.key).collect(),
                mean_keys: in_mean.iter().map(|f| f.key).collect(),
                time_ratio_geomean,
            }
        })
        .collect()
}
