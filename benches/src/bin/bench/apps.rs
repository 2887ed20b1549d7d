//! The applications of Table IV.5 (`benches/apps`): strong scaling under MirrorCL over
//! the rank counts (one device per rank), against the same program on the vendor's
//! platform directly (one device, and as many devices as ranks in one process where
//! the machine has them), with each run's time split as the program measures it.
//! The applications in [`THREADED`] also run with one host thread per device
//! (`APP_THREADS=1`) in every one of those runs, and are compared with themselves.

use crate::run::{fields_of, rank_lines, require_pass, Runner};
use serde_json::{json, Value};

pub const APPS: [&str; 6] = [
    "blackscholes",
    "binomialoption",
    "cp",
    "nbody",
    "matrixmul",
    "ep",
];

/// The applications that also have a variant with one host thread per device
/// (`APP_THREADS=1`: binomialoption as AMD's BinomialOptionMultiGPU drives its devices).
pub const THREADED: [&str; 1] = ["binomialoption"];

/// Problem sizes (`APP_SIZE`) by preset: `small` is the tests' (seconds in all on two
/// cores), `medium` the programs' defaults, `large` for GPUs (kernels of tens to
/// hundreds of milliseconds on one H100; checked on a sample, `APP_CHECK=sample`, where
/// outputs are independent, so that every rank's CPU reference takes seconds).
pub fn size(preset: &str, app: &str) -> Option<&'static str> {
    let i = APPS.iter().position(|a| *a == app)?;
    let table: [&str; 6] = match preset {
        "small" => ["16K", "4K", "128", "1024", "256", "1M"],
        "medium" => ["256K", "64K", "512", "16K", "1280", "64M"],
        "large" => ["16M", "1M", "16K", "128K", "10752", "4G"],
        _ => return None,
    };
    Some(table[i])
}

/// Whether the thesis counts the application as compute-bound (the 1.8x goal applies).
pub fn compute_bound(app: &str) -> bool {
    app != "blackscholes"
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// The vendor's platform directly, in one process.
    Native,
    /// MirrorCL, one device per rank.
    MirrorCl,
}

pub struct Row {
    pub app: &'static str,
    pub mode: Mode,
    /// Devices in all: the process's (native) or ranks x 1 (MirrorCL).
    pub devices: usize,
    pub size: String,
    /// One host thread per device (`APP_THREADS=1`) rather than one for all devices.
    pub threaded: bool,
    pub total: f64,
    pub host: f64,
    pub kernel: f64,
    pub transfer: f64,
    /// MirrorCL's scheduling time on rank 0 per repetition (`MIRRORCL_STATS`).
    pub scheduling: Option<f64>,
    /// Bytes rank 0 sent plus received per repetition.
    pub bytes_moved: Option<u64>,
}

impl Row {
    /// The platform and devices, whatever the host threading.
    fn run_label(&self) -> String {
        match self.mode {
            Mode::Native => format!("vendor, {} device(s), 1 process", self.devices),
            Mode::MirrorCl => format!("MirrorCL, {} rank(s)", self.devices),
        }
    }

    pub fn label(&self) -> String {
        if self.threaded {
            format!("{}, a host thread per device", self.run_label())
        } else {
            self.run_label()
        }
    }

    /// The same run with the other host threading.
    fn twin<'a>(&self, rows: &'a [Row]) -> Option<&'a Row> {
        rows.iter().find(|r| {
            r.app == self.app
                && r.mode == self.mode
                && r.devices == self.devices
                && r.threaded != self.threaded
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "app": self.app, "mode": match self.mode { Mode::Native => "native", Mode::MirrorCl => "mirrorcl" },
            "devices": self.devices, "size": self.size, "threaded": self.threaded, "total_s": self.total, "host_s": self.host,
            "kernel_s": self.kernel, "transfer_s": self.transfer,
            "mirrorcl_scheduling_s_rank0": self.scheduling, "bytes_moved_rank0": self.bytes_moved,
        })
    }

    pub const CSV_HEADER: &'static str =
        "app,mode,devices,size,total_s,host_s,kernel_s,transfer_s,mirrorcl_scheduling_s_rank0,bytes_moved_rank0,threaded";

    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{:.6},{:.6},{:.6},{:.6},{},{},{}",
            self.app,
            match self.mode {
                Mode::Native => "native",
                Mode::MirrorCl => "mirrorcl",
            },
            self.devices,
            self.size,
            self.total,
            self.host,
            self.kernel,
            self.transfer,
            self.scheduling
                .map(|s| format!("{s:.6}"))
                .unwrap_or_default(),
            self.bytes_moved.map(|b| b.to_string()).unwrap_or_default(),
            self.threaded
        )
    }
}

fn parse(
    app: &'static str,
    mode: Mode,
    devices: usize,
    threaded: bool,
    stdout: &str,
    stats: Option<Value>,
    reps: usize,
) -> Result<Row, String> {
    let lines = rank_lines(stdout, 0);
    let f = fields_of(&lines, "TIME ")
        .into_iter()
        .next()
        .ok_or_else(|| format!("{app}: no TIME line"))?;
    let num = |k: &str| -> Result<f64, String> {
        f.get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{app}: TIME line without {k}"))
    };
    let rank0 = stats.as_ref().map(|s| s["ranks"][0].clone());
    let per_rep = |k: &str| {
        rank0
            .as_ref()
            .and_then(|r| r[k].as_u64())
            .map(|v| v / reps as u64)
    };
    Ok(Row {
        app,
        mode,
        devices,
        size: f.get("size").unwrap_or(&"?").to_string(),
        threaded,
        total: num("total_s")?,
        host: num("host_s")?,
        kernel: num("kernel_s")?,
        transfer: num("transfer_s")?,
        scheduling: per_rep("scheduling_ns").map(|ns| ns as f64 / 1e9),
        bytes_moved: per_rep("bytes_sent")
            .zip(per_rep("bytes_received"))
            .map(|(a, b)| a + b),
    })
}

pub struct Plan<'a> {
    pub apps: &'a [&'static str],
    pub ranks: &'a [usize],
    pub sizes: &'a dyn Fn(&str) -> String,
    pub reps: usize,
    /// `APP_CHECK`: all outputs, or a sample of them.
    pub check: &'a str,
    /// Most devices one native process may use (GPUs on the machine; PoCL: any).
    pub native_max_devices: usize,
}

pub fn run(runner: &Runner, plan: &Plan) -> Result<(Vec<Row>, Vec<String>), String> {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for &app in plan.apps {
        let size = (plan.sizes)(app);
        // A threaded run follows the same run with one host thread at once, so that the
        // two compared see the same load (a machine shared with others drifts).
        let variants: &[bool] = if THREADED.contains(&app) {
            &[false, true]
        } else {
            &[false]
        };
        let env_of = |threaded: bool| {
            vec![
                ("APP_SIZE".to_string(), size.clone()),
                ("APP_REPS".to_string(), plan.reps.to_string()),
                ("APP_CHECK".to_string(), plan.check.to_string()),
                ("APP_THREADS".to_string(), u8::from(threaded).to_string()),
            ]
        };
        let threads = |threaded: bool| {
            if threaded {
                ", a host thread per device"
            } else {
                ""
            }
        };
        let first = rows.len();
        let mut native_counts: Vec<usize> = std::iter::once(1)
            .chain(plan.ranks.iter().copied())
            .filter(|&n| n <= plan.native_max_devices)
            .collect();
        native_counts.sort_unstable();
        native_counts.dedup();
        for n in native_counts {
            for &threaded in variants {
                let t = threads(threaded);
                eprintln!("  apps: {app} (size {size}), vendor, {n} device(s) in one process{t}");
                let mut env = env_of(threaded);
                env.push(("CTEST_EXPECT_DEVICES".into(), n.to_string()));
                match runner.native(n, app, &env) {
                    Ok(out) => {
                        require_pass(&out, app, 1)?;
                        rows.push(parse(
                            app,
                            Mode::Native,
                            n,
                            threaded,
                            &out.stdout,
                            None,
                            plan.reps,
                        )?);
                    }
                    // The 1-device baseline must run; more devices are a comparison only.
                    Err(e) if n > 1 => notes.push(format!(
                        "{app}: vendor with {n} devices{t} did not run: {e}"
                    )),
                    Err(e) => return Err(e),
                }
            }
        }
        for &n in plan.ranks {
            for &threaded in variants {
                let t = threads(threaded);
                eprintln!("  apps: {app} (size {size}), MirrorCL, {n} rank(s){t}");
                let variant = if threaded { "-threaded" } else { "" };
                let stats = runner.logs.join(format!("stats-{app}{variant}-{n}.json"));
                let mut env = env_of(threaded);
                env.push(("MIRRORCL_STATS".into(), stats.display().to_string()));
                env.push(("CTEST_EXPECT_DEVICES".into(), n.to_string()));
                let out = runner.mirrorcl(n, app, &[], &env)?;
                require_pass(&out, app, n)?;
                let stats = std::fs::read_to_string(&stats)
                    .ok()
                    .and_then(|s| serde_json::from_str(&s).ok());
                rows.push(parse(
                    app,
                    Mode::MirrorCl,
                    n,
                    threaded,
                    &out.stdout,
                    stats,
                    plan.reps,
                )?);
            }
        }
        // The table lists the application's single-threaded runs first (a stable sort).
        rows[first..].sort_by_key(|r| r.threaded);
    }
    Ok((rows, notes))
}

/// Speedup of each run over the vendor's platform with one device (and one host thread).
pub fn speedup(rows: &[Row], row: &Row) -> Option<f64> {
    rows.iter()
        .find(|r| r.app == row.app && r.mode == Mode::Native && r.devices == 1 && !r.threaded)
        .map(|base| base.total / row.total)
}

/// Each run of a [`THREADED`] application with one host thread per device against the
/// same run with one host thread: (single-threaded row, threaded row).
pub fn threaded_pairs(rows: &[Row]) -> Vec<(&Row, &Row)> {
    rows.iter()
        .filter(|r| r.threaded)
        .filter_map(|t| Some((t.twin(rows)?, t)))
        .collect()
}

/// [`threaded_pairs`] as JSON: seconds per repetition (the best) and their ratio.
pub fn threaded_json(rows: &[Row]) -> Value {
    Value::Array(
        threaded_pairs(rows)
            .into_iter()
            .map(|(s, t)| {
                json!({
                    "app": t.app,
                    "mode": match t.mode { Mode::Native => "native", Mode::MirrorCl => "mirrorcl" },
                    "devices": t.devices, "size": t.size,
                    "single_threaded_s_per_rep": s.total, "threaded_s_per_rep": t.total,
                    "threaded_over_single_threaded": t.total / s.total,
                })
            })
            .collect(),
    )
}

pub fn summary(rows: &[Row]) -> String {
    let mut t = String::from(
        "| application | size | run | total s | host s | kernel s | transfer s | MirrorCL scheduling s (rank 0) | MB moved (rank 0) | speedup over 1 device |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {} | {} | {} |\n",
            r.app,
            r.size,
            r.label(),
            r.total,
            r.host,
            r.kernel,
            r.transfer,
            r.scheduling
                .map(|s| format!("{s:.4}"))
                .unwrap_or("–".into()),
            r.bytes_moved
                .map(|b| format!("{:.1}", b as f64 / 1e6))
                .unwrap_or("–".into()),
            speedup(rows, r)
                .map(|s| format!("{s:.2}×"))
                .unwrap_or("–".into())
        ));
    }
    let two: Vec<String> = rows
        .iter()
        .filter(|r| r.mode == Mode::MirrorCl && r.devices == 2 && !r.threaded)
        .filter(|r| compute_bound(r.app))
        .filter_map(|r| speedup(rows, r).map(|s| format!("{} {s:.2}×", r.app)))
        .collect();
    if !two.is_empty() {
        let met = rows
            .iter()
            .filter(|r| r.mode == Mode::MirrorCl && r.devices == 2 && !r.threaded)
            .filter(|r| compute_bound(r.app))
            .all(|r| speedup(rows, r).is_some_and(|s| s >= 1.8));
        t.push_str(&format!(
            "\nGoal, compute-bound applications at least 1.8× on two devices (two ranks) over one: {} — {}.\n",
            two.join(", "),
            if met { "met" } else { "**not met**" }
        ));
    }
    let pairs = threaded_pairs(rows);
    if !pairs.is_empty() {
        t.push_str(
            "\nOne host thread per device (`APP_THREADS=1`, as AMD's BinomialOptionMultiGPU: \
             each thread maps, unmaps, runs its kernel and polls its events on its own queue) \
             against one host thread for all devices, seconds per repetition (the best):\n\n\
             | application | size | run | one host thread s/rep | a host thread per device s/rep | threaded / one thread |\n\
             |---|---|---|---|---|---|\n",
        );
        for (s, th) in pairs {
            t.push_str(&format!(
                "| {} | {} | {} | {:.4} | {:.4} | {:.2}× |\n",
                th.app,
                th.size,
                th.run_label(),
                s.total,
                th.total,
                th.total / s.total
            ));
        }
    }
    t
}
