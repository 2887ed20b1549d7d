//! `mirrorcl-bench`: MirrorCL's benchmark suite in one command; what it runs and its
//! options: [`Options`] (`--help`).

mod apps;
mod bandwidth;
mod micro;
mod overhead;
mod plot;
mod run;
mod stencil;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Parser, ValueEnum};
use run::{describe_machine, Runner, Vendor};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// MirrorCL's benchmark suite in one command (`benches/run.sh` builds everything, then calls this).
///
/// Runs the IV.7.2 microbenchmark in the thesis' three variants next to hand-written MPI,
/// the cost per command against the native platform per API family, the copy bandwidth
/// between two ranks next to raw MPI, the applications' strong scaling (binomialoption
/// also with one host thread per device, against itself with one), and a stencil's time
/// per step next to its hand-written MPI + OpenCL twin; writes JSON, CSV, SVG plots and a
/// Markdown summary, and (with --docs) puts the summary into docs/benchmarks.md.
#[derive(Parser)]
#[command(name = "mirrorcl-bench")]
// The last of a repeated option wins: scripts put their defaults before the user's.
#[command(args_override_self = true)]
struct Options {
    /// Parts to run, comma-separated
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',', action = ArgAction::Set,
          default_value = "micro,overhead,bandwidth,apps,stencil")]
    parts: Vec<Part>,
    /// Rank counts of the microbenchmark and the applications, comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = ArgAction::Set,
          default_value = "1,2,4", value_parser = positive)]
    ranks: Vec<usize>,
    /// Repetitions of every measured run: the median, or the applications' best, is reported
    #[arg(long, value_name = "N", default_value = "3", default_value_if("quick", "true", "1"),
          value_parser = at_least_one)]
    reps: usize,
    /// Microbenchmark iterations (100 as in the thesis; --quick: 20)
    #[arg(long, value_name = "N", default_value = "100", default_value_if("quick", "true", "20"),
          value_parser = at_least_one)]
    iters: usize,
    /// The platform MirrorCL wraps and the native runs use; one device per rank
    #[arg(
        long,
        value_name = "NAME",
        value_enum,
        ignore_case = true,
        default_value = "pocl"
    )]
    vendor: Vendor,
    /// Application and stencil sizes (large: GPUs; --quick: small)
    #[arg(long, value_name = "PRESET", default_value = "medium",
          default_value_if("quick", "true", "small"),
          value_parser = ["small", "medium", "large"])]
    sizes: String,
    /// One application's (or the stencil's) APP_SIZE (repeatable)
    #[arg(long = "app-size", value_name = "APP=N", value_parser = app_size)]
    app_sizes: Vec<(String, String)>,
    /// Outputs the applications check against their CPU reference (default: sample for large sizes, else all)
    #[arg(long, value_name = "MODE", value_parser = ["all", "sample"])]
    app_check: Option<String>,
    /// Applications to run, comma-separated (default: all)
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = ArgAction::Set,
          default_values = apps::APPS, hide_default_value = true,
          value_parser = PossibleValuesParser::new(apps::APPS).map(|a| app_name(&a)))]
    apps: Vec<&'static str>,
    /// The stencil's steps (default by --sizes: small 20, medium 100, large 1000)
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    stencil_steps: Option<usize>,
    /// Largest bandwidth size, with suffix K, M or G (--quick: 4M)
    #[arg(long, value_name = "N", default_value = "1G", default_value_if("quick", "true", "4M"),
          value_parser = bytes)]
    max_bytes: usize,
    /// Names the machine's results (letters, digits, -, _, .)
    #[arg(long, value_name = "NAME", default_value = "local", value_parser = label)]
    label: String,
    /// Where results go (default: target/bench/LABEL)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Put the summary into FILE's section for LABEL and copy the results to bench/LABEL/ beside it
    #[arg(long, value_name = "FILE")]
    docs: Option<PathBuf>,
    /// The MPI the library and the hand-written twins were built for (`MIRRORCL_BUILD_MPI`'s
    /// spelling); its launcher starts both
    #[arg(long, value_name = "MPI", default_value = "openmpi",
          value_parser = ["openmpi", "mpich"])]
    mpi: String,
    /// The C programs (default: target/bench/bin; for MPICH target/mpich/bench/bin)
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// libmirrorcl.so (default: target/release/; for MPICH target/mpich/release/)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// mirrorcl-overhead (default: beside this program)
    #[arg(long, value_name = "PATH")]
    overhead_bin: Option<PathBuf>,
    /// Deadline of one run in seconds
    #[arg(long, value_name = "S", default_value = "900")]
    timeout: u64,
    /// A smoke run: 20 iterations, 1 repetition, small sizes, 4 MiB (explicit values win)
    #[arg(long)]
    quick: bool,
    /// Run nothing: summarise what --out holds (parts run separately into one directory add up) and publish it with --docs
    #[arg(long)]
    publish_only: bool,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Part {
    Micro,
    Overhead,
    Bandwidth,
    Apps,
    Stencil,
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("not a positive number: {s}")),
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .map(|n| n.max(1))
        .map_err(|_| format!("not a number: {s}"))
}

fn bytes(s: &str) -> Result<usize, String> {
    let (num, shift) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    num.parse::<usize>()
        .map(|n| n << shift)
        .map_err(|_| format!("not a size: {s}"))
}

fn app_size(s: &str) -> Result<(String, String), String> {
    let (app, n) = s.split_once('=').ok_or_else(|| format!("APP=N, not {s}"))?;
    Ok((app.into(), n.into()))
}

/// The static name of an application clap has already checked against [`apps::APPS`].
fn app_name(a: &str) -> &'static str {
    apps::APPS
        .iter()
        .copied()
        .find(|x| *x == a)
        .unwrap_or_default()
}

fn label(s: &str) -> Result<String, String> {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        Ok(s.into())
    } else {
        Err("letters, digits, - _ . only".into())
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> ExitCode {
    match run_all(&Options::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mirrorcl-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_all(o: &Options) -> Result<(), String> {
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/bench").join(&o.label));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    if o.publish_only {
        // The plots are drawn again from results.json (drawing may have changed).
        if let Some(results) = std::fs::read_to_string(out.join("results.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            plot::all(&out, &results)?;
        }
        let md = summary(&out)?;
        println!("{md}");
        if let Some(docs) = &o.docs {
            publish(docs, &o.label, &out, &md)?;
        }
        return Ok(());
    }
    let mpi: mirrorcl_tests::Mpi = o.mpi.parse()?;
    let target = PathBuf::from(match mpi {
        mirrorcl_tests::Mpi::OpenMpi => "target",
        mirrorcl_tests::Mpi::Mpich => "target/mpich",
    });
    let runner = Runner::new(
        o.vendor,
        mpi,
        o.bin_dir
            .clone()
            .unwrap_or_else(|| target.join("bench/bin")),
        o.lib
            .clone()
            .unwrap_or_else(|| target.join("release/libmirrorcl.so")),
        Duration::from_secs(o.timeout),
        &out,
    )?;
    let machine = describe_machine(&runner);
    let machine_line = format!(
        "{} ({} cores), {} — {}; {}; {}",
        machine["cpu"],
        machine["cores"],
        machine["vendor_platform"],
        machine["vendor_devices"],
        machine["mpi"],
        machine["date"]
    );
    eprintln!("mirrorcl-bench: {machine_line}");
    let has = |p: Part| o.parts.contains(&p);
    // One GPU per rank: more ranks than GPUs would leave ranks without a device.
    let gpus = machine["vendor_devices"]
        .split("; ")
        .filter(|s| !s.is_empty())
        .count();
    let most = o.ranks.iter().copied().max().unwrap_or(1);
    if o.vendor == Vendor::Nvidia && has(Part::Bandwidth) && gpus < 2 {
        return Err(format!(
            "the bandwidth part needs 2 GPUs (one per rank); this machine has {gpus}"
        ));
    }
    if o.vendor == Vendor::Nvidia && most > gpus {
        return Err(format!(
            "--ranks {most} needs {most} GPUs (one per rank); this machine has {gpus}"
        ));
    }
    // Parts run separately into one directory add up: results.json is merged, and the
    // summary is made of every part's section found there.
    let mut results: Value = std::fs::read_to_string(out.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(|v: &Value| v["label"] == json!(o.label))
        .unwrap_or_else(|| json!({}));
    let run_line = format!(
        "_Measured on {machine_line}; one device per rank ({}), ranks on one host; \
         `mirrorcl-bench {}`._\n",
        o.vendor.name(),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    results["label"] = json!(o.label);
    results["machine"] = json!(machine);
    results["vendor"] = json!(o.vendor.name());
    write(
        &out.join("machine.md"),
        &format!("Machine: {machine_line}.\n"),
    )?;
    // Written after every part, so that a later part's failure keeps the earlier ones.
    let save = |results: &Value| -> Result<(), String> {
        write(
            &out.join("results.json"),
            &serde_json::to_string_pretty(results).map_err(|e| e.to_string())?,
        )
    };
    let part = |name: &str, md: String, notes: &[String]| -> Result<(), String> {
        let mut text = md;
        if !notes.is_empty() {
            text.push_str("\nNotes:\n");
            for n in notes {
                text.push_str(&format!("- {}\n", n.lines().next().unwrap_or("")));
            }
        }
        write(&out.join(format!("part-{name}.md")), &text)
    };
    let rel = |f: &str| format!("bench/{}/{f}", o.label);

    if has(Part::Micro) {
        eprintln!("mirrorcl-bench: the IV.7.2 microbenchmark");
        let rows = micro::run(&runner, &o.ranks, o.iters, o.reps)?;
        results["micro"] = Value::Array(rows.iter().map(|r| r.to_json()).collect());
        save(&results)?;
        let mut csv = format!("{}\n", micro::Row::CSV_HEADER);
        for r in &rows {
            csv.push_str(&format!("{}\n", r.csv()));
        }
        write(&out.join("micro.csv"), &csv)?;
        part("1-micro", format!(
            "\n#### The IV.7.2 microbenchmark ({} iterations, median of {} runs)\n\n{run_line}\n{}\n![microbenchmark]({})\n",
            o.iters,
            o.reps,
            micro::summary(&rows),
            rel("micro.svg")
        ), &[])?;
    }

    if has(Part::Overhead) {
        eprintln!("mirrorcl-bench: cost per command against the native platform");
        let bin = match &o.overhead_bin {
            Some(b) => b.clone(),
            None => std::env::current_exe()
                .map_err(|e| e.to_string())?
                .with_file_name("mirrorcl-overhead"),
        };
        let v = overhead::run(&runner, &bin, o.quick, &out)?;
        write(&out.join("overhead.csv"), &overhead::csv(&v))?;
        part("2-overhead", format!(
            "\n#### Cost per command against the native platform (one rank, one process)\n\n{run_line}\n{}\n![overhead]({})\n",
            overhead::summary(&v),
            rel("overhead.svg")
        ), &[])?;
        results["overhead"] = v;
        save(&results)?;
    }

    if has(Part::Bandwidth) {
        eprintln!("mirrorcl-bench: copy bandwidth between two ranks");
        let (fig, notes) = bandwidth::run(&runner, o.max_bytes)?;
        results["bandwidth_notes"] = json!(notes);
        results["bandwidth"] = bandwidth::to_json(&fig);
        save(&results)?;
        write(&out.join("bandwidth.csv"), &bandwidth::csv(&fig))?;
        part("3-bandwidth", format!(
            "\n#### Copy bandwidth between devices of two ranks\n\n{run_line}\n{}\n![bandwidth]({})\n",
            bandwidth::summary(&fig),
            rel("bandwidth.svg")
        ), &notes)?;
    }

    if has(Part::Apps) {
        eprintln!("mirrorcl-bench: the applications");
        let size_of = |app: &str| {
            o.app_sizes
                .iter()
                .find(|(a, _)| a == app)
                .map(|(_, s)| s.clone())
                .or_else(|| apps::size(&o.sizes, app).map(String::from))
                .unwrap_or_default()
        };
        let plan = apps::Plan {
            apps: &o.apps,
            ranks: &o.ranks,
            sizes: &size_of,
            reps: o.reps,
            check: o.app_check.as_deref().unwrap_or(if o.sizes == "large" {
                "sample"
            } else {
                "all"
            }),
            native_max_devices: if o.vendor == Vendor::Nvidia {
                gpus
            } else {
                usize::MAX
            },
        };
        let (rows, notes) = apps::run(&runner, &plan)?;
        results["apps_notes"] = json!(notes);
        results["apps"] = Value::Array(rows.iter().map(|r| r.to_json()).collect());
        results["apps_threaded"] = apps::threaded_json(&rows);
        save(&results)?;
        let mut csv = format!("{}\n", apps::Row::CSV_HEADER);
        for r in &rows {
            csv.push_str(&format!("{}\n", r.csv()));
        }
        write(&out.join("apps.csv"), &csv)?;
        part("4-apps", format!(
            "\n#### Applications: strong scaling (best of {} repetitions)\n\n{run_line}\n{}\n![applications]({})\n",
            o.reps,
            apps::summary(&rows),
            rel("apps.svg")
        ), &notes)?;
    }

    if has(Part::Stencil) {
        eprintln!("mirrorcl-bench: the stencil against its hand-written MPI + OpenCL twin");
        let (preset_size, preset_steps) = stencil::size(&o.sizes).unwrap_or(("1024", 100));
        let size = o
            .app_sizes
            .iter()
            .find(|(a, _)| a == "stencil")
            .map_or(preset_size, |(_, s)| s.as_str());
        let steps = o.stencil_steps.unwrap_or(preset_steps);
        let rows = stencil::run(&runner, &o.ranks, size, steps, o.reps)?;
        results["stencil"] = Value::Array(rows.iter().map(|r| r.to_json(&rows)).collect());
        save(&results)?;
        let mut csv = format!("{}\n", stencil::Row::CSV_HEADER);
        for r in &rows {
            csv.push_str(&format!("{}\n", r.csv(&rows)));
        }
        write(&out.join("stencil.csv"), &csv)?;
        part("5-stencil", format!(
            "\n#### Stencil: time per step against the hand-written MPI + OpenCL twin (median of {} runs)\n\n{run_line}\n{}",
            o.reps,
            stencil::summary(&rows)
        ), &[])?;
    }

    save(&results)?;
    plot::all(&out, &results)?;
    let md = summary(&out)?;
    write(&out.join("summary.md"), &md)?;
    eprintln!("mirrorcl-bench: results in {}", out.display());
    println!("{md}");
    if let Some(docs) = &o.docs {
        publish(docs, &o.label, &out, &md)?;
    }
    Ok(())
}

/// The machine line and every part's section found in `out`, in the order of the parts.
fn summary(out: &Path) -> Result<String, String> {
    let mut md = std::fs::read_to_string(out.join("machine.md")).unwrap_or_default();
    let mut parts: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("part-") && n.ends_with(".md"))
        })
        .collect();
    parts.sort();
    for p in parts {
        md.push_str(&std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    Ok(md)
}

/// Copies the results next to `docs` (bench/LABEL/) and replaces LABEL's section of it.
fn publish(docs: &Path, label: &str, out: &Path, md: &str) -> Result<(), String> {
    let dir = docs
        .parent()
        .unwrap_or(Path::new("."))
        .join("bench")
        .join(label);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in std::fs::read_dir(out).map_err(|e| e.to_string())?.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".svg")
            || name.ends_with(".csv")
            || name == "results.json"
            || name == "summary.md"
        {
            std::fs::copy(&p, dir.join(e.file_name())).map_err(|e| e.to_string())?;
        }
    }
    let begin = format!("<!-- mirrorcl-bench {label} begin -->");
    let end = format!("<!-- mirrorcl-bench {label} end -->");
    let section = format!("{begin}\n### Results: {label}\n\n{md}\n{end}");
    let text = std::fs::read_to_string(docs).unwrap_or_default();
    let new = match (text.find(&begin), text.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{section}{}", &text[..b], &text[e + end.len()..]),
        _ => format!("{}\n{section}\n", text.trim_end()),
    };
    write(docs, &new)?;
    eprintln!(
        "mirrorcl-bench: {} updated (section {label})",
        docs.display()
    );
    Ok(())
}
