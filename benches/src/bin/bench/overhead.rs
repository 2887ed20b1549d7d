//! Cost per command against the native platform, per API family: `mirrorcl-overhead`
//! in one process, with the vendor's platform and MirrorCL both registered with the ICD
//! loader (blocks of the two alternate, so machine noise hits both alike).

use crate::run::Runner;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

pub fn run(runner: &Runner, overhead_bin: &Path, quick: bool, out: &Path) -> Result<Value, String> {
    let vendors = out.join("vendors-overhead");
    std::fs::create_dir_all(&vendors).map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(&runner.native_vendors)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        std::fs::copy(e.path(), vendors.join(e.file_name())).map_err(|e| e.to_string())?;
    }
    std::fs::write(
        vendors.join("mirrorcl.icd"),
        format!("{}\n", runner.lib.display()),
    )
    .map_err(|e| e.to_string())?;
    let json = out.join("overhead-raw.json");
    let mut cmd = Command::new(overhead_bin);
    cmd.env("OCL_ICD_VENDORS", format!("{}/", vendors.display()))
        .env_remove("LD_PRELOAD")
        .env("MIRRORCL_PLATFORMS", runner.vendor.platform_match())
        .args(["--native", runner.vendor.platform_match()])
        .arg("--json")
        .arg(&json);
    // One device, as natively: the figures compare one device's command path.
    for (k, v) in runner.vendor.native_devices(1) {
        cmd.env(k, v);
    }
    if quick {
        cmd.arg("--quick");
    }
    eprintln!("  overhead: {cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", overhead_bin.display()))?;
    if !status.success() {
        return Err(format!("mirrorcl-overhead failed ({status})"));
    }
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))
}

/// (family, figure name, native µs, MirrorCL µs, ratio, what the ratio is of, goal, met)
pub type Line = (String, String, f64, f64, f64, String, String, String);

pub fn lines(v: &Value) -> Vec<Line> {
    let mut out: Vec<Line> = v["figures"]
        .as_object()
        .map(|m| {
            m.values()
                .filter_map(|f| {
                    Some((
                        f["family"].as_str()?.to_string(),
                        f["description"]
                            .as_str()
                            .or(f["name"].as_str())?
                            .to_string(),
                        f["native"]["median_us"].as_f64()?,
                        f["mirrorcl"]["median_us"].as_f64()?,
                        f["ratio"].as_f64()?,
                        f["ratio_of"].as_str().unwrap_or("median_time").to_string(),
                        f["goal"].as_str().unwrap_or("–").to_string(),
                        match f["met"].as_bool() {
                            Some(true) => "yes".into(),
                            Some(false) => "**no**".into(),
                            None => "–".into(),
                        },
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    out
}

pub fn csv(v: &Value) -> String {
    let mut t =
        String::from("family,figure,native_median_us,mirrorcl_median_us,ratio,ratio_of,goal,met\n");
    for (fam, name, n, m, r, of, goal, met) in lines(v) {
        t.push_str(&format!(
            "{fam},\"{}\",{n:.3},{m:.3},{r:.3},{of},{goal},{}\n",
            name.replace('"', "'"),
            met.trim_matches('*')
        ));
    }
    t
}

pub fn summary(v: &Value) -> String {
    let mut t = String::from(
        "| family | figure | native µs (median) | MirrorCL µs (median) | ratio | goal | met |\n|---|---|---|---|---|---|---|\n",
    );
    for (fam, name, n, m, r, of, goal, met) in lines(v) {
        let ratio = if of == "throughput" {
            format!("{r:.2}× throughput")
        } else {
            format!("{r:.2}×")
        };
        let us = |v: f64| {
            if v < 1.0 {
                format!("{v:.3}")
            } else {
                format!("{v:.2}")
            }
        };
        t.push_str(&format!(
            "| {fam} | {name} | {} | {} | {ratio} | {goal} | {met} |\n",
            us(n),
            us(m)
        ));
    }
    if let Some(fams) = v["families"].as_object() {
        let g: Vec<String> = fams
            .iter()
            .filter_map(|(k, f)| {
                f["time_ratio_geomean"]
                    .as_f64()
                    .map(|r| format!("{k} {r:.2}×"))
            })
            .collect();
        if !g.is_empty() {
            t.push_str(&format!(
                "\nPer family, geometric mean of the time ratios: {}.\n",
                g.join(", ")
            ));
        }
    }
    t
}
