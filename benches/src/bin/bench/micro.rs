//! The microbenchmark of section IV.7.2: every device's 16-byte buffer copied into every
//! device's buffer with `clEnqueueCopyBuffer`, n^2 copies an iteration
//! (`tests/c/cluster_alltoall.c`), in the thesis' three variants, next to the same
//! exchange written by hand with MPI point-to-point calls (`benches/micro/alltoall_mpi.c`)
//! and to the same program in one process on the vendor's own platform with all n
//! devices in one context (one node, several GPUs: what a user would run instead).

use crate::run::{rank_lines, read_stats, require_pass, Runner};
use serde_json::{json, Value};

pub const VARIANTS: [&str; 3] = ["decentralization", "attach", "full"];
pub const MPI: &str = "mpi";
/// The program in one process on the vendor's platform, n devices in one context.
pub const VENDOR: &str = "vendor";

pub struct Row {
    pub ranks: usize,
    /// One of `VARIANTS`, `MPI` or `VENDOR`.
    pub variant: &'static str,
    pub iters: usize,
    /// Seconds of the copy loop on rank 0, one per repetition.
    pub runs: Vec<f64>,
    /// MirrorCL's statistics of the last repetition (`MIRRORCL_STATS`).
    pub stats: Option<Value>,
}

impl Row {
    pub fn median(&self) -> f64 {
        crate::median(&self.runs)
    }

    /// Microseconds per iteration (n^2 copies), median of the repetitions.
    pub fn us_per_iter(&self) -> f64 {
        self.median() / self.iters as f64 * 1e6
    }

    fn stat(&self, key: &str) -> Option<u64> {
        self.stats.as_ref()?["ranks"][0][key].as_u64()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "ranks": self.ranks, "variant": self.variant, "iterations": self.iters,
            "copies_per_iteration": self.ranks * self.ranks,
            "loop_seconds": self.runs, "median_seconds": self.median(),
            "us_per_iteration": self.us_per_iter(),
            "rank0": self.stats.as_ref().map(|s| s["ranks"][0].clone()),
        })
    }

    pub const CSV_HEADER: &'static str = "ranks,variant,iterations,copies_per_iteration,median_loop_s,us_per_iteration,runs,created_rank0,not_enqueued_rank0,scheduled_rank0,issued_rank0,scheduling_ms_rank0";

    pub fn csv(&self) -> String {
        let s = |k| self.stat(k).map(|v| v.to_string()).unwrap_or_default();
        format!(
            "{},{},{},{},{:.6},{:.2},{},{},{},{},{},{}",
            self.ranks,
            self.variant,
            self.iters,
            self.ranks * self.ranks,
            self.median(),
            self.us_per_iter(),
            self.runs.len(),
            s("commands_created"),
            s("commands_not_enqueued"),
            s("commands_scheduled"),
            s("commands_issued"),
            self.stat("scheduling_ns")
                .map(|v| format!("{:.3}", v as f64 / 1e6))
                .unwrap_or_default()
        )
    }
}

fn loop_seconds(stdout: &str) -> Result<f64, String> {
    rank_lines(stdout, 0)
        .iter()
        .find_map(|l| {
            let (_, rest) = l.split_once(" copies: ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .ok_or_else(|| "no loop time in the output".to_string())
}

/// Every rank count, every variant and MPI, `reps` times, interleaved so that machine
/// noise hits all alike.
pub fn run(
    runner: &Runner,
    ranks: &[usize],
    iters: usize,
    reps: usize,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &n in ranks {
        let mut these: Vec<Row> = VARIANTS
            .iter()
            .chain([MPI, VENDOR].iter())
            .map(|&variant| Row {
                ranks: n,
                variant,
                iters,
                runs: Vec::new(),
                stats: None,
            })
            .collect();
        for rep in 0..reps {
            for row in these.iter_mut() {
                eprintln!(
                    "  micro: {n} rank(s), {}, repetition {}/{reps}",
                    row.variant,
                    rep + 1
                );
                let iters_env = ("CLUSTER_ITERS".to_string(), iters.to_string());
                if row.variant == MPI {
                    let out = runner.native_mpi(n, "alltoall_mpi", &[], &[iters_env])?;
                    require_pass(&out, "alltoall_mpi", n)?;
                    row.runs.push(loop_seconds(&out.stdout)?);
                } else if row.variant == VENDOR {
                    let env = [iters_env, ("CTEST_EXPECT_DEVICES".into(), n.to_string())];
                    // A comparison only: a vendor without n devices leaves the row out.
                    match runner.native(n, "cluster_alltoall", &env) {
                        Ok(out) => {
                            require_pass(&out, "cluster_alltoall", 1)?;
                            row.runs.push(loop_seconds(&out.stdout)?);
                        }
                        Err(e) => eprintln!("  micro: the vendor with {n} devices: {e}"),
                    }
                } else {
                    let stats = runner
                        .logs
                        .join(format!("stats-micro-{n}-{}.json", row.variant));
                    let env = [
                        iters_env,
                        ("MIRRORCL_VARIANT".into(), row.variant.into()),
                        ("MIRRORCL_STATS".into(), stats.display().to_string()),
                    ];
                    let out = runner.mirrorcl(n, "cluster_alltoall", &[], &env)?;
                    require_pass(&out, "cluster_alltoall", n)?;
                    row.runs.push(loop_seconds(&out.stdout)?);
                    row.stats = read_stats(&stats);
                }
            }
        }
        rows.extend(these.into_iter().filter(|r| !r.runs.is_empty()));
    }
    Ok(rows)
}

/// The Markdown table and the goals: full against decentralization-only, and against MPI.
pub fn summary(rows: &[Row]) -> String {
    let mut t = String::from(
        "| ranks | copies / iteration | decentralization µs/iter | + attach µs/iter | full µs/iter | hand-written MPI µs/iter | the vendor, one process µs/iter | full vs decentralization | full / MPI (goal ≤ 3×) | full / the vendor's one process |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut ranks: Vec<usize> = rows.iter().map(|r| r.ranks).collect();
    ranks.dedup();
    for n in ranks {
        let get = |v: &str| {
            rows.iter()
                .find(|r| r.ranks == n && r.variant == v)
                .map(|r| r.us_per_iter())
        };
        let (d, a, f, m, v) = (
            get(VARIANTS[0]),
            get(VARIANTS[1]),
            get(VARIANTS[2]),
            get(MPI),
            get(VENDOR),
        );
        let cell = |x: Option<f64>| x.map(|v| format!("{v:.1}")).unwrap_or("–".into());
        let speedup = match (d, f) {
            (Some(d), Some(f)) if f > 0.0 => format!("{:.2}× faster", d / f),
            _ => "–".into(),
        };
        let vs_mpi = match (f, m) {
            (Some(f), Some(m)) if m > 0.0 => {
                let r = f / m;
                format!(
                    "{r:.1}× {}",
                    if r <= 3.0 { "(met)" } else { "(**not met**)" }
                )
            }
            _ => "–".into(),
        };
        let vs_vendor = match (f, v) {
            (Some(f), Some(v)) if v > 0.0 => format!("{:.2}×", f / v),
            _ => "–".into(),
        };
        t.push_str(&format!(
            "| {n} | {} | {} | {} | {} | {} | {} | {speedup} | {vs_mpi} | {vs_vendor} |\n",
            n * n,
            cell(d),
            cell(a),
            cell(f),
            cell(m),
            cell(v)
        ));
    }
    t
}
