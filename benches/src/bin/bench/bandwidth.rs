//! Copy bandwidth between devices of two ranks (`benches/micro/bandwidth.c` under
//! MirrorCL), next to raw MPI between the same two ranks, the same copy written by
//! hand with MPI and the vendor's OpenCL (`benches/micro/bandwidth_mpi.c`), and the
//! vendor's own copy between two devices of one process.

use crate::run::{fields_of, rank_lines, require_pass, Runner};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const MIRRORCL: &str = "MirrorCL, 2 ranks";
pub const MPI: &str = "raw MPI, host memory";
pub const MPICL: &str = "hand-written MPI + OpenCL";
pub const NATIVE: &str = "vendor, 2 devices in 1 process";
pub const SERIES: [&str; 4] = [MIRRORCL, MPI, MPICL, NATIVE];

/// Seconds per copy, by series, by size in bytes.
pub type Figures = BTreeMap<usize, BTreeMap<&'static str, f64>>;

fn collect(fig: &mut Figures, series: &'static str, lines: &[&str], tag: &str) {
    for f in fields_of(lines, tag) {
        if let (Some(b), Some(s)) = (
            f.get("bytes").and_then(|v| v.parse::<usize>().ok()),
            f.get("seconds_per_copy")
                .and_then(|v| v.parse::<f64>().ok()),
        ) {
            fig.entry(b).or_default().insert(series, s);
        }
    }
}

pub fn run(runner: &Runner, max_bytes: usize) -> Result<(Figures, Vec<String>), String> {
    let mut fig = Figures::new();
    let mut notes = Vec::new();
    let env = [("BW_MAX_BYTES".to_string(), max_bytes.to_string())];
    eprintln!("  bandwidth: raw MPI");
    let out = runner.native_mpi(2, "bandwidth_mpi", &[], &env)?;
    collect(&mut fig, MPI, &rank_lines(&out.stdout, 1), "MPI ");
    eprintln!("  bandwidth: hand-written MPI + OpenCL");
    let out = runner.native_mpi(2, "bandwidth_mpi", &["--opencl"], &env)?;
    require_pass(&out, "bandwidth_mpi", 2)?;
    collect(&mut fig, MPICL, &rank_lines(&out.stdout, 1), "MPICL ");
    eprintln!("  bandwidth: MirrorCL");
    let out = runner.mirrorcl(2, "bandwidth", &[], &env)?;
    require_pass(&out, "bandwidth", 2)?;
    // The destination's rank, timed like the MPI receiver.
    collect(&mut fig, MIRRORCL, &rank_lines(&out.stdout, 1), "BW ");
    eprintln!("  bandwidth: the vendor's copy in one process");
    match runner.native(2, "bandwidth", &env) {
        Ok(out) => {
            require_pass(&out, "bandwidth", 1)?;
            collect(&mut fig, NATIVE, &rank_lines(&out.stdout, 0), "BW ");
        }
        Err(e) => notes.push(format!("the vendor's two-device copy did not run: {e}")),
    }
    Ok((fig, notes))
}

pub fn to_json(fig: &Figures) -> Value {
    Value::Array(
        fig.iter()
            .map(|(bytes, s)| {
                let series: serde_json::Map<String, Value> = s
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.to_string(),
                            json!({"seconds_per_copy": v, "gbytes_per_s": *bytes as f64 / v / 1e9}),
                        )
                    })
                    .collect();
                json!({"bytes": bytes, "series": series})
            })
            .collect(),
    )
}

pub fn csv(fig: &Figures) -> String {
    let mut t = String::from("bytes,series,seconds_per_copy,gbytes_per_s\n");
    for (bytes, s) in fig {
        for (k, v) in s {
            // Series names hold commas: quoted.
            t.push_str(&format!(
                "{bytes},\"{k}\",{v:.9},{:.4}\n",
                *bytes as f64 / v / 1e9
            ));
        }
    }
    t
}

pub fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The Markdown table: GB/s per series (µs per copy for the smallest size), and the
/// goals: 90% of MPI's bandwidth at the largest size, 2x MPI's latency at the smallest.
pub fn summary(fig: &Figures) -> String {
    let present: Vec<&str> = SERIES
        .iter()
        .copied()
        .filter(|s| fig.values().any(|m| m.contains_key(s)))
        .collect();
    let mut t = String::from("| size |");
    for s in &present {
        t.push_str(&format!(" {s} |"));
    }
    t.push_str(" MirrorCL / raw MPI | MirrorCL / MPI + OpenCL |\n|---|");
    t.push_str(&"---|".repeat(present.len() + 2));
    t.push('\n');
    let smallest = fig.keys().next().copied();
    for (&bytes, s) in fig {
        let latency = Some(bytes) == smallest;
        t.push_str(&format!("| {} |", size_name(bytes)));
        for k in &present {
            t.push_str(&match s.get(k) {
                Some(v) if latency => format!(" {:.1} µs |", v * 1e6),
                Some(v) => format!(" {:.2} GB/s |", bytes as f64 / v / 1e9),
                None => " – |".into(),
            });
        }
        for base in [MPI, MPICL] {
            t.push_str(&match (s.get(MIRRORCL), s.get(base)) {
                (Some(m), Some(b)) if latency => format!(" {:.1}× the time |", m / b),
                (Some(m), Some(b)) => format!(" {:.0}% |", b / m * 100.0),
                _ => " – |".into(),
            });
        }
        t.push('\n');
    }
    if let (Some((&small, s)), Some((&large, l))) = (fig.iter().next(), fig.iter().next_back()) {
        if let (Some(m), Some(b)) = (s.get(MIRRORCL), s.get(MPI)) {
            let r = m / b;
            t.push_str(&format!(
                "\nGoal, latency within 2× raw MPI's at {}: {:.1}× — {}.\n",
                size_name(small),
                r,
                if r <= 2.0 { "met" } else { "**not met**" }
            ));
        }
        if let (Some(m), Some(b)) = (l.get(MIRRORCL), l.get(MPI)) {
            let r = b / m;
            t.push_str(&format!(
                "Goal, at least 90% of raw MPI's bandwidth at {}: {:.0}% — {}.\n",
                size_name(large),
                r * 100.0,
                if r >= 0.9 { "met" } else { "**not met**" }
            ));
        }
    }
    t
}
