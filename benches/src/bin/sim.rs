//! `mirrorcl-sim`: MirrorCL's scheduler for N virtual ranks (see the library's docs).
//!
//!     mirrorcl-sim --workload alltoall --ranks 16,32,64 --iters 3
//!     mirrorcl-sim --replay FILE.0 --ranks 2 --per-rank
//!
//! Prints, per rank count and variant, every rank's figures (`--per-rank`) or their
//! range, the figures of one steady-state iteration of the loop, the modelled iteration
//! time, and how long the simulation took; `--svg` plots scheduling time per rank
//! against the rank count.

use clap::Parser;
use mirrorcl_scheduler::sim::model::{self, Costs};
use mirrorcl_scheduler::sim::{record, simulate, variant_name, Figures, Workload};
use mirrorcl_scheduler::Variant;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "mirrorcl-sim",
    about = "MirrorCL's scheduler for N virtual ranks"
)]
struct Args {
    /// Built-in workload: alltoall (IV.7.2) or stencil (halo exchange).
    #[arg(long, default_value = "alltoall")]
    workload: String,
    /// Replay a stream recorded with MIRRORCL_RECORD (one rank's file).
    #[arg(long)]
    replay: Option<std::path::PathBuf>,
    /// Rank counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    ranks: Vec<u32>,
    /// Variants, comma-separated (decentralization, attach, full).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "decentralization,attach,full"
    )]
    variants: Vec<String>,
    /// Iterations of the workload's loop (the thesis: 100; counts per iteration are
    /// the same from the second on).
    #[arg(long, default_value_t = 100)]
    iters: u32,
    /// Devices per rank (built-in workloads).
    #[arg(long, default_value_t = 1)]
    devices_per_rank: u32,
    /// Elements of the stencil's domain.
    #[arg(long, default_value_t = 65536)]
    elements: u64,
    /// Simulate only this many ranks, evenly spread (first and last included).
    #[arg(long)]
    sample: Option<u32>,
    /// Worker threads (ranks simulated at once); default: the machine's cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Print every simulated rank's figures.
    #[arg(long)]
    per_rank: bool,
    /// Model: what one operation of a rank's issuers (a command, a local copy, a device
    /// read or write of a message) costs, µs.
    #[arg(long, default_value_t = 2.11)]
    command_us: f64,
    /// Model: what one message (sent or received) costs its rank, µs.
    #[arg(long, default_value_t = 55.5)]
    latency_us: f64,
    /// Model, second column: what the enqueue call costs per command created, µs.
    #[arg(long, default_value_t = 1.12)]
    enqueue_us: f64,
    /// Also write the rows as CSV.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Write a plot of scheduling time per rank and iteration against the rank count.
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
}

fn range(v: impl Iterator<Item = u64>) -> String {
    let v: Vec<u64> = v.collect();
    let (lo, hi) = (v.iter().min().copied(), v.iter().max().copied());
    match (lo, hi) {
        (Some(l), Some(h)) if l == h => l.to_string(),
        (Some(l), Some(h)) => format!("{l}–{h}"),
        _ => "-".into(),
    }
}

fn median(v: impl Iterator<Item = u64>) -> f64 {
    let mut v: Vec<u64> = v.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0) as f64
}

fn main() {
    let args = Args::parse();
    let variants: Vec<Variant> = args
        .variants
        .iter()
        .map(|v| {
            mirrorcl_scheduler::sim::parse_variant(v)
                .unwrap_or_else(|| panic!("unknown variant {v}"))
        })
        .collect();
    let workload = match &args.replay {
        Some(path) => Workload::Replay(record::read(path).unwrap_or_else(|e| {
            eprintln!("mirrorcl-sim: {e}");
            std::process::exit(2)
        })),
        None => match args.workload.as_str() {
            "alltoall" => Workload::AllToAll { iters: args.iters },
            "stencil" => Workload::Stencil {
                elements: args.elements,
                iters: args.iters,
            },
            w => {
                eprintln!("mirrorcl-sim: unknown workload {w} (alltoall, stencil)");
                std::process::exit(2)
            }
        },
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let costs = Costs {
        command_us: args.command_us,
        latency_us: args.latency_us,
        enqueue_us: 0.0,
    };
    let with_enqueue = Costs {
        enqueue_us: args.enqueue_us,
        ..costs
    };
    let mut csv = String::from("ranks,variant,simulated_ranks,created_per_iter,scheduled_per_iter,issued_per_iter,issuer_work_per_iter,messages_per_iter,scheduling_us_per_iter,model_us_per_iter,model_with_enqueue_us_per_iter,simulated_s\n");
    let name = match &args.replay {
        Some(p) => format!("replay of {}", p.display()),
        None => args.workload.clone(),
    };
    println!(
        "mirrorcl-sim: {name}, {} iteration(s), {} device(s) per rank, {threads} thread(s); model: {} µs per issuer operation, {} µs per message; second model: also {} µs per command created",
        args.iters, args.devices_per_rank, costs.command_us, costs.latency_us, with_enqueue.enqueue_us
    );
    println!();
    println!("Per rank (a range where ranks differ); \"/iter\": one steady-state iteration; scheduling: the median rank.");
    println!();
    println!("| ranks | variant | created | not enqueued | scheduled | issued | local copies | sends | receives | bytes sent | bytes received | scheduling ms | scheduled /iter | issuer work /iter | messages /iter | scheduling µs /iter | model µs /iter | model + enqueue µs /iter | simulated in s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut plot: Vec<(Variant, u32, f64)> = Vec::new();
    for &n in &args.ranks {
        let only: Option<Vec<u32>> = args.sample.filter(|&k| k < n).map(|k| {
            let mut v: Vec<u32> = (0..k)
                .map(|i| (u64::from(i) * u64::from(n - 1) / u64::from(k.max(2) - 1)) as u32)
                .collect();
            v.dedup();
            v
        });
        for &variant in &variants {
            let start = Instant::now();
            let per = args.devices_per_rank;
            let results = simulate(n, variant, threads, only.as_deref(), &|out| {
                workload.emit(n, per, out)
            });
            let took = start.elapsed().as_secs_f64();
            let all: Vec<&Figures> = results.iter().map(|(_, f, _)| f).collect();
            let iter: Vec<Figures> = results
                .iter()
                .filter_map(|(_, _, m)| model::per_iteration(m))
                .collect();
            let col = |g: fn(&Figures) -> u64| range(all.iter().map(|f| g(f)));
            let icol = |g: fn(&Figures) -> u64| range(iter.iter().map(g));
            // The median rank: a rank's wall clock also counts the moments this machine
            // gave its thread to something else, which the largest figure collects.
            let sched_ms = median(all.iter().map(|f| f.scheduling_ns)) / 1e6;
            let sched_iter_us = median(iter.iter().map(|f| f.scheduling_ns)) / 1e3;
            let model_us = model::iteration_us(&iter, costs);
            let model2_us = model::iteration_us(&iter, with_enqueue);
            let simulated = results.len();
            let med = |g: fn(&Figures) -> u64| median(iter.iter().map(g));
            csv.push_str(&format!(
                "{n},{},{simulated},{},{},{},{},{},{sched_iter_us:.3},{model_us:.3},{model2_us:.3},{took:.3}\n",
                variant_name(variant),
                med(|f| f.commands_created),
                med(|f| f.commands_scheduled),
                med(|f| f.commands_issued),
                med(|f| f.issuer_work()),
                med(|f| f.sends + f.receives),
            ));
            println!(
                "| {n}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {sched_ms:.2} | {} | {} | {} | {sched_iter_us:.1} | {} | {} | {took:.2} |",
                only.as_ref().map_or(String::new(), |o| format!(" ({} simulated)", o.len())),
                variant_name(variant),
                col(|f| f.commands_created),
                col(|f| f.commands_not_enqueued),
                col(|f| f.commands_scheduled),
                col(|f| f.commands_issued),
                col(|f| f.local_copies),
                col(|f| f.sends),
                col(|f| f.receives),
                col(|f| f.bytes_sent),
                col(|f| f.bytes_received),
                icol(|f| f.commands_scheduled),
                icol(|f| f.issuer_work()),
                icol(|f| f.sends + f.receives),
                if iter.is_empty() { "-".to_string() } else { format!("{model_us:.1}") },
                if iter.is_empty() { "-".to_string() } else { format!("{model2_us:.1}") },
            );
            if !iter.is_empty() {
                plot.push((variant, n, sched_iter_us));
            }
            if args.per_rank {
                for (r, f, _) in &results {
                    println!(
                        "rank {r} {}",
                        Figures::COUNT_NAMES
                            .iter()
                            .zip(f.counts())
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                            + &format!(
                                " step_device_ops={} scheduling_ns={}",
                                f.step_device_ops, f.scheduling_ns
                            )
                    );
                }
            }
        }
    }
    if let Some(path) = &args.csv {
        if let Err(e) = std::fs::write(path, &csv) {
            eprintln!("mirrorcl-sim: {}: {e}", path.display());
            std::process::exit(1);
        }
    }
    if let Some(path) = &args.svg {
        if let Err(e) = svg(path, &name, &plot) {
            eprintln!("mirrorcl-sim: {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("\nplot: {}", path.display());
    }
}

/// Scheduling time per rank and iteration (the median rank) against the rank count,
/// one line per variant, both axes logarithmic.
fn svg(
    path: &std::path::Path,
    name: &str,
    points: &[(Variant, u32, f64)],
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let xs = points.iter().map(|p| p.1 as f64);
    let ys = points.iter().map(|p| p.2.max(0.01));
    let (x0, x1) = (xs.clone().fold(f64::MAX, f64::min), xs.fold(1.0, f64::max));
    let (y0, y1) = (ys.clone().fold(f64::MAX, f64::min), ys.fold(0.1, f64::max));
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("mirrorcl-sim, {name}: scheduling time per rank and iteration"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 / 1.2..x1 * 1.2).log_scale(),
            (y0 / 2.0..y1 * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("ranks (one device each)")
        .y_desc("µs per iteration (median rank)")
        .draw()?;
    let colours = [RED, BLUE, GREEN];
    for (i, v) in [Variant::Decentralization, Variant::Attach, Variant::Full]
        .into_iter()
        .enumerate()
    {
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.0 == v)
            .map(|p| (p.1 as f64, p.2.max(0.01)))
            .collect();
        if line.is_empty() {
            continue;
        }
        let c = colours[i];
        chart
            .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))?
            .label(variant_name(v))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
        chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
