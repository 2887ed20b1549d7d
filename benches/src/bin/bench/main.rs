//! `mirrorcl-bench`: MirrorCL's benchmark suite in one command (`benches/run.sh` builds
//! the programs and calls it). Runs the IV.7.2 microbenchmark in the thesis' three
//! variants next to hand-written MPI, the cost per command against the native platform
//! per API family, the copy bandwidth between two ranks next to raw MPI, and the
//! applications' strong scaling; writes JSON, CSV, SVG plots and a Markdown summary,
//! and (with `--docs`) puts the summary into `docs/benchmarks.md`.

mod apps;
mod bandwidth;
mod micro;
mod overhead;
mod plot;
mod run;

use run::{describe_machine, Runner, Vendor};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
usage: mirrorcl-bench [options]        (benches/run.sh builds everything, then calls this)

  --parts LIST        micro,overhead,bandwidth,apps (default: all four)
  --ranks LIST        rank counts for the microbenchmark and the applications (default 1,2,4)
  --reps N            repetitions of every measured run (default 3; the median, or the
                      applications' best, is reported)
  --iters N           microbenchmark iterations (default 100, as in the thesis)
  --vendor NAME       pocl (default) or nvidia: the platform MirrorCL wraps and the
                      native runs use; one device per rank
  --sizes PRESET      application sizes: small, medium (default), large (GPUs)
  --app-size APP=N    one application's APP_SIZE (repeatable)
  --app-check MODE    all or sample: which outputs the applications check against
                      their CPU reference (default: sample for large sizes, else all)
  --apps LIST         applications to run (default: all six)
  --max-bytes N       largest bandwidth size (default 1G; suffixes K, M, G)
  --label NAME        names the machine's results (default: local)
  --out DIR           where results go (default target/bench/LABEL)
  --docs FILE         put the summary into FILE's section for LABEL and copy the
                      results to docs/bench/LABEL/ beside it
  --bin-dir DIR       the C programs (default target/bench/bin)
  --lib PATH          libmirrorcl.so (default target/release/libmirrorcl.so)
  --overhead-bin PATH mirrorcl-overhead (default: beside this program)
  --timeout S         deadline of one run in seconds (default 900)
  --quick             a smoke run: 20 iterations, 1 repetition, small sizes, 4 MiB
  --publish-only      run nothing: summarise what --out holds (parts run separately
                      into one directory add up) and publish it with --docs
";

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

struct Options {
    parts: Vec<String>,
    ranks: Vec<usize>,
    reps: usize,
    iters: usize,
    vendor: Vendor,
    sizes: String,
    app_sizes: Vec<(String, String)>,
    app_check: Option<String>,
    apps: Vec<&'static str>,
    max_bytes: usize,
    label: String,
    out: Option<PathBuf>,
    docs: Option<PathBuf>,
    bin_dir: PathBuf,
    lib: PathBuf,
    overhead_bin: Option<PathBuf>,
    timeout: u64,
    quick: bool,
    publish_only: bool,
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

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        parts: ["micro", "overhead", "bandwidth", "apps"]
            .map(String::from)
            .to_vec(),
        ranks: vec![1, 2, 4],
        reps: 3,
        iters: 100,
        vendor: Vendor::Pocl,
        sizes: "medium".into(),
        app_sizes: Vec::new(),
        app_check: None,
        apps: apps::APPS.to_vec(),
        max_bytes: 1 << 30,
        label: "local".into(),
        out: None,
        docs: None,
        bin_dir: PathBuf::from("target/bench/bin"),
        lib: PathBuf::from("target/release/libmirrorcl.so"),
        overhead_bin: None,
        timeout: 900,
        quick: false,
        publish_only: false,
    };
    let (mut reps, mut iters, mut max, mut sizes) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{a}: not a number: {v}"))
        };
        match a.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            "--parts" => {
                o.parts = value()?.split(',').map(String::from).collect();
                for p in &o.parts {
                    if !["micro", "overhead", "bandwidth", "apps"].contains(&p.as_str()) {
                        return Err(format!("--parts: unknown part {p}"));
                    }
                }
            }
            "--ranks" => {
                o.ranks = value()?
                    .split(',')
                    .map(|r| r.parse::<usize>().map_err(|_| format!("--ranks: {r}")))
                    .collect::<Result<_, _>>()?;
                if o.ranks.is_empty() || o.ranks.contains(&0) {
                    return Err("--ranks: positive counts".into());
                }
            }
            "--reps" => reps = Some(number(value()?)?.max(1)),
            "--iters" => iters = Some(number(value()?)?.max(1)),
            "--vendor" => o.vendor = Vendor::parse(&value()?)?,
            "--sizes" => {
                let v = value()?;
                if apps::size(&v, "ep").is_none() {
                    return Err(format!("--sizes: small, medium or large, not {v}"));
                }
                sizes = Some(v);
            }
            "--app-size" => {
                let v = value()?;
                let (app, n) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--app-size APP=N, not {v}"))?;
                o.app_sizes.push((app.into(), n.into()));
            }
            "--app-check" => {
                let v = value()?;
                if v != "all" && v != "sample" {
                    return Err(format!("--app-check: all or sample, not {v}"));
                }
                o.app_check = Some(v);
            }
            "--apps" => {
                o.apps = value()?
                    .split(',')
                    .map(|a| {
                        apps::APPS
                            .iter()
                            .copied()
                            .find(|x| *x == a)
                            .ok_or_else(|| format!("--apps: unknown application {a}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--max-bytes" => max = Some(bytes(&value()?)?),
            "--label" => o.label = value()?,
            "--out" => o.out = Some(value()?.into()),
            "--docs" => o.docs = Some(value()?.into()),
            "--bin-dir" => o.bin_dir = value()?.into(),
            "--lib" => o.lib = value()?.into(),
            "--overhead-bin" => o.overhead_bin = Some(value()?.into()),
            "--timeout" => o.timeout = number(value()?)? as u64,
            "--quick" => o.quick = true,
            "--publish-only" => o.publish_only = true,
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    o.reps = reps.unwrap_or(if o.quick { 1 } else { 3 });
    o.iters = iters.unwrap_or(if o.quick { 20 } else { 100 });
    o.max_bytes = max.unwrap_or(if o.quick { 4 << 20 } else { 1 << 30 });
    o.sizes = sizes.unwrap_or(if o.quick { "small".into() } else { o.sizes });
    if !o
        .label
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("--label: letters, digits, - _ . only".into());
    }
    Ok(o)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|o| run_all(&o)) {
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
    let runner = Runner::new(
        o.vendor,
        o.bin_dir.clone(),
        o.lib.clone(),
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
    let has = |p: &str| o.parts.iter().any(|x| x == p);
    // One GPU per rank: more ranks than GPUs would leave ranks without a device.
    let gpus = machine["vendor_devices"]
        .split("; ")
        .filter(|s| !s.is_empty())
        .count();
    let most = o.ranks.iter().copied().max().unwrap_or(1);
    if o.vendor == Vendor::Nvidia && has("bandwidth") && gpus < 2 {
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

    if has("micro") {
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

    if has("overhead") {
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

    if has("bandwidth") {
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

    if has("apps") {
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
