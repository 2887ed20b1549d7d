//! `--json PATH`: the same figures as JSON, with the whole distribution of each
//! (benches/run.sh's harness and benches/trace-off-cost.sh read it).

use std::fmt::Write as _;

use crate::cli::Args;
use crate::figures::{family_summaries, Figure, Kind};
use crate::report::{cpu_model, kernel_release};
use crate::stats::Stat;
use crate::target::Target;
use crate::{CALLS_PER_SAMPLE, CREATE_BYTES, XFER_BYTES};

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "null".into()
    }
}

fn json_stat(s: Stat) -> String {
    format!(
        "{{\"median_us\": {}, \"p90_us\": {}, \"min_us\": {}, \"p10_us\": {}, \"p25_us\": {}, \"p75_us\": {}, \"p99_us\": {}, \"mean_us\": {}, \"samples\": {}}}",
        json_num(s.median),
        json_num(s.p90),
        json_num(s.min),
        json_num(s.p10),
        json_num(s.p25),
        json_num(s.p75),
        json_num(s.p99),
        json_num(s.mean),
        s.n
    )
}

fn json_target(t: &Target) -> String {
    format!(
        "{{\"platform\": {}, \"platform_version\": {}, \"platform_vendor\": {}, \"device\": {}, \"device_version\": {}, \"driver_version\": {}}}",
        json_str(&t.platform_name),
        json_str(&t.platform_version),
        json_str(&t.platform_vendor),
        json_str(&t.device_name),
        json_str(&t.device_version),
        json_str(&t.driver_version)
    )
}

pub fn write_json(
    path: &str,
    args: &Args,
    native: &Target,
    mirror: Option<&Target>,
    figs: &[Figure],
) -> Result<(), String> {
    let (cpu, threads) = cpu_model();
    let mut s = String::from("{\n");
    let _ = writeln!(
        s,
        "  \"machine\": {{\"cpu\": {}, \"hardware_threads\": {threads}, \"kernel\": {}}},",
        json_str(&cpu),
        json_str(&kernel_release())
    );
    let _ = writeln!(s, "  \"native\": {},", json_target(native));
    let _ = writeln!(
        s,
        "  \"mirrorcl\": {},",
        mirror.map_or_else(|| "null".to_string(), json_target)
    );
    let _ = writeln!(
        s,
        "  \"parameters\": {{\"iters\": {}, \"warmup\": {}, \"bursts\": {}, \"burst_size\": {}, \"batch\": {}, \"rewarm\": {}, \"transfer_bytes\": {XFER_BYTES}, \"create_bytes\": {CREATE_BYTES}, \"calls_per_sample\": {CALLS_PER_SAMPLE}, \"quick\": {}}},",
        args.iters, args.warmup, args.bursts, args.burst_size, args.batch, args.rewarm, args.quick
    );
    s.push_str("  \"figures\": {\n");
    for (i, f) in figs.iter().enumerate() {
        let mut entry = format!(
            "    {}: {{\"name\": {}, \"family\": {}, \"description\": {}, \"kind\": \"{}\", \"calls_per_sample\": {}, \"native\": {}, \"mirrorcl\": {}, \"ratio\": {}, \"ratio_of\": \"{}\"",
            json_str(f.key),
            json_str(f.key),
            json_str(f.family),
            json_str(f.name.trim()),
            f.kind.json(),
            f.calls_per_sample,
            json_stat(f.native),
            f.mirror.map_or_else(|| "null".to_string(), json_stat),
            f.ratio().map_or_else(|| "null".to_string(), json_num),
            if f.kind == Kind::Burst {
                "throughput"
            } else {
                "median_time"
            },
        );
        if f.kind == Kind::Burst {
            let _ = write!(
                entry,
                ", \"native_commands_per_s\": {}, \"mirrorcl_commands_per_s\": {}",
                json_num(1e6 / f.native.median),
                f.mirror
                    .map_or_else(|| "null".to_string(), |m| json_num(1e6 / m.median))
            );
        }
        if let Some((op, g)) = f.goal() {
            let _ = write!(entry, ", \"goal\": \"{op}{g}\"");
        }
        let _ = write!(
            entry,
            ", \"met\": {}}}",
            f.met()
                .map_or_else(|| "null".to_string(), |m| m.to_string())
        );
        s.push_str(&entry);
        s.push_str(if i + 1 < figs.len() { ",\n" } else { "\n" });
    }
    s.push_str("  },\n");
    // Per family: its figures and the geometric mean of their MirrorCL /
    // native median-time ratios (see family_summaries).
    s.push_str("  \"families\": {\n");
    let fams = family_summaries(figs);
    for (i, fam) in fams.iter().enumerate() {
        let list = |keys: &[&str]| {
            keys.iter()
                .map(|k| json_str(k))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = write!(
            s,
            "    {}: {{\"figures\": [{}], \"geomean_of\": [{}], \"time_ratio_geomean\": {}}}",
            json_str(fam.family),
            list(&fam.keys),
            list(&fam.mean_keys),
            fam.time_ratio_geomean
                .map_or_else(|| "null".to_string(), json_num)
        );
        s.push_str(if i + 1 < fams.len() { ",\n" } else { "\n" });
    }
    s.push_str("  }\n}\n");
    std::fs::write(path, s).map_err(|e| format!("writing {path}: {e}"))
}
