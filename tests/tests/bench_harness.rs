//! The benchmark harness (`benches/run.sh`, `mirrorcl-bench`): a quick run of every part
//! on 1 and 2 local ranks produces the figures, the CSV, the plots and the summary, and
//! `--publish-only` puts that summary into a documentation file between its markers.
//! (Speed is not asserted: the figures are the benchmark's business.)

use mirrorcl_tests::{target_dir, workspace_root};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn bench(args: &[&str], bin_dir: &Path) -> std::process::Output {
    let exe = target_dir().join("release").join("mirrorcl-bench");
    assert!(
        exe.is_file(),
        "{} missing: cargo build --release",
        exe.display()
    );
    Command::new(&exe)
        .current_dir(workspace_root())
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--lib")
        .arg(target_dir().join("release").join("libmirrorcl.so"))
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("OCL_ICD_VENDORS")
        .output()
        .expect("run mirrorcl-bench")
}

#[test]
fn a_quick_run_of_every_part_writes_figures_plots_and_a_summary() {
    let dir = tempfile_dir("mirrorcl-bench-test");
    let bin = dir.join("bin");
    let built = Command::new("bash")
        .arg(workspace_root().join("benches/build-programs.sh"))
        .arg(&bin)
        .status()
        .expect("build the benchmark programs");
    assert!(built.success(), "benches/build-programs.sh failed");
    let out = dir.join("out");
    let run = bench(
        &[
            "--quick",
            "--ranks",
            "1,2",
            "--iters",
            "10",
            "--max-bytes",
            "1M",
            "--label",
            "test",
            "--out",
            out.to_str().unwrap(),
        ],
        &bin,
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "mirrorcl-bench failed:\n{stderr}");

    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    // The microbenchmark: every variant, MPI and the vendor's one process at 1 and 2
    // ranks (devices), n^2 copies each.
    let micro = results["micro"].as_array().unwrap();
    assert_eq!(micro.len(), 10, "{micro:?}");
    assert!(
        micro
            .iter()
            .any(|r| r["ranks"] == 2 && r["variant"] == "vendor"),
        "{micro:?}"
    );
    for r in micro {
        assert!(r["us_per_iteration"].as_f64().unwrap() > 0.0, "{r}");
    }
    let full2 = micro
        .iter()
        .find(|r| r["ranks"] == 2 && r["variant"] == "full")
        .unwrap();
    // Rank 0 schedules only the copies that involve its device (and leaves the rest out).
    assert!(full2["rank0"]["commands_not_enqueued"].as_u64().unwrap() > 0);
    // Bandwidth: 4 KiB to 1 MiB by factors of 4, MirrorCL and raw MPI at every size.
    let bw = results["bandwidth"].as_array().unwrap();
    assert_eq!(bw.len(), 5, "{bw:?}");
    for size in bw {
        assert!(
            size["series"]["MirrorCL, 2 ranks"]["gbytes_per_s"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        assert!(
            size["series"]["raw MPI, host memory"]["gbytes_per_s"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    // Applications: the native baseline and MirrorCL on 1 and 2 ranks, each checked.
    let apps = results["apps"].as_array().unwrap();
    for app in [
        "blackscholes",
        "binomialoption",
        "cp",
        "nbody",
        "matrixmul",
        "ep",
    ] {
        for (mode, devices) in [("native", 1), ("mirrorcl", 1), ("mirrorcl", 2)] {
            assert!(
                apps.iter().any(|r| r["app"] == app
                    && r["mode"] == mode
                    && r["devices"] == devices
                    && r["total_s"].as_f64().unwrap() > 0.0),
                "{app} {mode} {devices}: {apps:?}"
            );
        }
    }
    // binomialoption also with one host thread per device, natively and on 1 and 2
    // ranks, each compared with the same run's single host thread.
    for (mode, devices) in [("native", 1), ("mirrorcl", 1), ("mirrorcl", 2)] {
        for threaded in [false, true] {
            assert_eq!(
                apps.iter()
                    .filter(|r| r["app"] == "binomialoption"
                        && r["mode"] == mode
                        && r["devices"] == devices
                        && r["threaded"] == threaded)
                    .count(),
                1,
                "binomialoption {mode} {devices} threaded={threaded}: {apps:?}"
            );
        }
    }
    assert!(
        apps.iter()
            .all(|r| r["threaded"] == false || r["app"] == "binomialoption"),
        "{apps:?}"
    );
    let threaded = results["apps_threaded"].as_array().unwrap();
    assert_eq!(
        threaded.len(),
        4,
        "native 1 and 2 devices, 1 and 2 ranks: {threaded:?}"
    );
    for (mode, devices) in [
        ("native", 1),
        ("native", 2),
        ("mirrorcl", 1),
        ("mirrorcl", 2),
    ] {
        let c = threaded
            .iter()
            .find(|c| c["app"] == "binomialoption" && c["mode"] == mode && c["devices"] == devices)
            .unwrap_or_else(|| panic!("{mode} {devices}: {threaded:?}"));
        let single = c["single_threaded_s_per_rep"].as_f64().unwrap();
        let thr = c["threaded_s_per_rep"].as_f64().unwrap();
        let ratio = c["threaded_over_single_threaded"].as_f64().unwrap();
        assert!(single > 0.0 && thr > 0.0, "{c}");
        assert!((ratio - thr / single).abs() < 1e-9, "{c}");
    }
    // The stencil: MirrorCL attached and not, the hand-written twin (mpirun, the vendor's
    // platform) and the vendor's one process, at 1 and 2 ranks, each checked; ratios to
    // the twin of the same rank count.
    let stencil = results["stencil"].as_array().unwrap();
    assert_eq!(stencil.len(), 8, "{stencil:?}");
    for ranks in [1, 2] {
        let get = |variant: &str| {
            stencil
                .iter()
                .find(|r| r["ranks"] == ranks && r["variant"] == variant)
                .unwrap_or_else(|| panic!("stencil {ranks} {variant}: {stencil:?}"))
        };
        let twin = get("mpi")["median_us_per_step"].as_f64().unwrap();
        assert!(twin > 0.0, "{stencil:?}");
        for variant in ["attach", "no-attach", "vendor"] {
            let r = get(variant);
            let median = r["median_us_per_step"].as_f64().unwrap();
            assert!(
                median > 0.0 && r["steps"] == 20 && r["size"] == "256",
                "{r}"
            );
            let ratio = r["over_mpi"].as_f64().unwrap();
            assert!((ratio - median / twin).abs() < 1e-9, "{r}");
        }
    }
    // Cost per command: every family, with MirrorCL's and the native figures.
    let families = results["overhead"]["families"].as_object().unwrap();
    for f in [
        "kernel",
        "transfer",
        "memory objects",
        "synchronisation",
        "queries",
    ] {
        assert!(families.contains_key(f), "{f}: {families:?}");
    }
    for f in [
        "micro.csv",
        "bandwidth.csv",
        "apps.csv",
        "overhead.csv",
        "stencil.csv",
        "micro.svg",
        "bandwidth.svg",
        "apps.svg",
        "overhead.svg",
    ] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(text.lines().count() > 2, "{f}:\n{text}");
        if f.ends_with(".svg") {
            assert!(text.contains("<svg") && text.contains("<text"), "{f}");
        }
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for heading in [
        "#### The IV.7.2 microbenchmark",
        "#### Cost per command",
        "#### Copy bandwidth",
        "#### Applications: strong scaling",
        "#### Stencil: time per step against the hand-written MPI + OpenCL twin",
        "| 2 | 256² | 20 | hand-written MPI + OpenCL |",
        "Goal, per-step time at most 1.5× the hand-written twin",
        "Goal, latency within 2×",
        "One host thread per device (`APP_THREADS=1`",
        "| binomialoption | 4096 | MirrorCL, 2 rank(s), a host thread per device |",
    ] {
        assert!(summary.contains(heading), "{heading}:\n{summary}");
    }
    // The comparison: one line per run, its ratio the threaded time over the other.
    let compared: Vec<&str> = summary
        .lines()
        .skip_while(|l| !l.starts_with("One host thread per device"))
        .filter(|l| l.starts_with("| binomialoption |"))
        .collect();
    assert_eq!(compared.len(), 4, "{summary}");
    assert!(compared.iter().all(|l| l.ends_with("× |")), "{compared:?}");
    let csv = std::fs::read_to_string(out.join("apps.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",threaded"), "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("binomialoption,mirrorcl,2,") && l.ends_with(",true")),
        "{csv}"
    );

    // Publishing twice replaces the label's section instead of adding another.
    let docs = dir.join("docs").join("benchmarks.md");
    std::fs::create_dir_all(docs.parent().unwrap()).unwrap();
    std::fs::write(&docs, "# Benchmarks\n\nkept\n").unwrap();
    for _ in 0..2 {
        let publish = bench(
            &[
                "--publish-only",
                "--label",
                "test",
                "--out",
                out.to_str().unwrap(),
                "--docs",
                docs.to_str().unwrap(),
            ],
            &bin,
        );
        assert!(
            publish.status.success(),
            "{}",
            String::from_utf8_lossy(&publish.stderr)
        );
    }
    let text = std::fs::read_to_string(&docs).unwrap();
    assert!(text.starts_with("# Benchmarks\n\nkept\n"), "{text}");
    assert_eq!(
        text.matches("<!-- mirrorcl-bench test begin -->").count(),
        1
    );
    assert!(text.contains("#### Copy bandwidth"));
    assert!(docs.parent().unwrap().join("bench/test/apps.svg").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
