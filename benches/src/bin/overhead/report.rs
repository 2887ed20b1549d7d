//! The report on standard output: the machine, the platforms, the sampling, and
//! one line per figure, then the burst's throughput and the per-family means.

use crate::cli::Args;
use crate::figures::{family_summaries, Figure, Kind, FAMILIES};
use crate::stats::Stat;
use crate::target::Target;
use crate::CALLS_PER_SAMPLE;

pub fn cpu_model() -> (String, usize) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let threads = text
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count();
    (model, threads)
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn print_report(args: &Args, native: &Target, mirror: Option<&Target>, figs: &[Figure]) {
    let (cpu, threads) = cpu_model();
    println!();
    println!(
        "machine : {cpu} ({threads} hardware threads), Linux {}",
        kernel_release()
    );
    for t in std::iter::once(native).chain(mirror) {
        println!(
            "{:<8}: platform \"{}\" ({}; {}); device \"{}\" ({}; driver {})",
            t.label,
            t.platform_name,
            t.platform_version,
            t.platform_vendor,
            t.device_name,
            t.device_version,
            t.driver_version
        );
    }
    println!(
        "samples : {} per figure in blocks of {} (+{} untimed), {} bursts of {} per platform, {} warm-up iterations; platforms alternate A/B, B/A per block and per burst{}",
        args.iters,
        args.batch,
        args.rewarm,
        args.bursts,
        args.burst_size,
        args.warmup,
        if args.quick { " (--quick)" } else { "" }
    );
    println!(
        "units   : µs per command; median (p90); \"per call\": {CALLS_PER_SAMPLE} calls timed together"
    );
    println!();
    let dash = "-";
    let fw = FAMILIES
        .iter()
        .map(|f| f.chars().count())
        .max()
        .unwrap_or(6);
    let nw = figs
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(6)
        .max(28);
    println!(
        "{:<fw$} | {:<nw$} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
        "family", "figure", "native µs", "MirrorCL µs", "ratio", "goal", "met?"
    );
    println!("{}", "-".repeat(fw + nw + 20 + 20 + 8 + 7 + 4 + 6 * 3));
    // Two decimals as before; more for sub-µs figures (per-call queries).
    let num = |x: f64| {
        let prec = if x < 0.1 {
            4
        } else if x < 1.0 {
            3
        } else {
            2
        };
        format!("{x:.prec$}")
    };
    let cell = |s: Stat| format!("{} ({})", num(s.median), num(s.p90));
    for f in figs {
        println!(
            "{:<fw$} | {:<nw$} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
            f.family,
            f.name,
            cell(f.native),
            f.mirror.map_or_else(|| dash.to_string(), cell),
            f.ratio()
                .map_or_else(|| dash.to_string(), |r| { format!("{r:.3}x") }),
            f.goal()
                .map_or_else(|| dash.to_string(), |(op, g)| format!("{op}{g}x")),
            f.met().map_or_else(
                || dash.to_string(),
                |m| (if m { "yes" } else { "NO" }).to_string()
            ),
        );
    }
    if let Some(b) = figs.iter().find(|f| f.kind == Kind::Burst) {
        let tput = |s: Stat| 1e6 / s.median;
        print!(
            "\nburst throughput: native {:.0} commands/s",
            tput(b.native)
        );
        match b.mirror {
            Some(m) => println!(
                ", MirrorCL {:.0} commands/s ({:.3}x of native)",
                tput(m),
                tput(m) / tput(b.native)
            ),
            None => println!(),
        }
    }
    println!("ratio: MirrorCL/native median time; for the burst, MirrorCL/native throughput.");
    if mirror.is_some() {
        println!(
            "\nper family, geometric mean of MirrorCL/native median time (burst as time per command; the enqueue-alone line left out):"
        );
        for fam in family_summaries(figs) {
            println!(
                "  {:<fw$} {:>8}  (over {})",
                fam.family,
                fam.time_ratio_geomean
                    .map_or_else(|| dash.to_string(), |r| format!("{r:.3}x")),
                fam.mean_keys.join(", ")
            );
        }
    }
    if mirror.is_none() {
        println!("(--native-only: MirrorCL not measured)");
    }
}
