//! The applications of the benchmark harness (`benches/apps`, Table IV.5 of the thesis)
//! at test sizes: natively on PoCL and under `mpirun` with MirrorCL, every rank checking
//! its results against a CPU reference (bit-exact where the arithmetic allows, else
//! within the tolerance each program states).

use mirrorcl_tests::{check_cluster, check_program_with, run_program_with, Way};

const APPS: &[(&str, &str)] = &[
    ("blackscholes", "16K"),
    ("binomialoption", "4K"),
    ("cp", "128"),
    ("nbody", "1024"),
    ("matrixmul", "256"),
    ("ep", "1M"),
    ("cg", "64"),
    ("stencil", "64"),
];

#[test]
fn applications_natively_on_three_devices() {
    for (app, size) in APPS {
        check_program_with(app, Way::Native, 3, &[("APP_SIZE", size)]);
    }
}

#[test]
fn applications_on_two_ranks_with_attached_buffers() {
    for (app, size) in APPS {
        check_cluster(app, 2, 1, &[("APP_SIZE", size)]);
    }
}

#[test]
fn applications_on_three_ranks_without_attach() {
    for (app, size) in APPS {
        check_cluster(app, 3, 1, &[("APP_SIZE", size), ("APP_ATTACH", "0")]);
    }
}

/// `APP_CHECK=sample`: the applications with independent outputs check a sample of
/// them (binomialoption at 16K, since 4K options are fewer than a sample takes
/// and are all checked), nbody and ep still check all and say so; an unknown value
/// is fatal.
#[test]
fn applications_natively_with_a_sampled_check() {
    for (app, size) in APPS {
        let size = if *app == "binomialoption" {
            "16K"
        } else {
            size
        };
        let env = [("APP_SIZE", size), ("APP_CHECK", "sample")];
        let out = run_program_with(app, Way::Native, 3, &env)
            .unwrap_or_else(|e| panic!("{app} (native, 3 devices, APP_CHECK=sample): {e}"));
        assert!(out.passed(), "{}", out.report());
        let expect = match *app {
            "nbody" | "ep" | "cg" | "stencil" => "APP_CHECK=sample has no effect",
            _ => "values (sampled)",
        };
        assert!(
            out.stdout.contains(expect),
            "{app}: no \"{expect}\" in the output\n{}",
            out.report()
        );
        println!(
            "{app} (native, 3 devices, APP_CHECK=sample): PASS in {:.2} s",
            out.elapsed.as_secs_f64()
        );
    }
    let out = run_program_with(
        "blackscholes",
        Way::Native,
        1,
        &[("APP_SIZE", "16K"), ("APP_CHECK", "some")],
    )
    .expect("blackscholes with APP_CHECK=some runs");
    assert!(
        !out.passed() && out.stderr.contains("APP_CHECK=some: unknown value"),
        "APP_CHECK=some is not refused\n{}",
        out.report()
    );
}

/// binomialoption with one host thread per device (`APP_THREADS=1`, AMD's
/// BinomialOptionMultiGPU: each thread maps, unmaps, runs its kernel and polls its
/// events on its own queue, all threads at once): natively, on one rank with two
/// devices (two threads in one MirrorCL process) and on two ranks (each rank runs both
/// threads, interleaved its own way), every rank checking all options.
#[test]
fn binomialoption_with_one_host_thread_per_device() {
    const MODE: &str = "one host thread per device (APP_THREADS=1)";
    let env = [("APP_SIZE", "4K"), ("APP_THREADS", "1"), ("APP_REPS", "2")];
    let out = run_program_with("binomialoption", Way::Native, 2, &env)
        .expect("binomialoption (native, 2 devices, APP_THREADS=1) runs");
    assert!(
        out.passed() && out.stdout.contains(MODE),
        "{}",
        out.report()
    );
    for (ranks, devices) in [(1, 2), (2, 1)] {
        let out = check_cluster("binomialoption", ranks, devices, &env);
        for (rank, (stdout, _)) in out.outputs.iter().enumerate() {
            assert!(
                stdout.contains(MODE),
                "rank {rank} of {ranks}: not threaded\n{}",
                out.report()
            );
        }
    }
}

/// The stencil's ghost-row exchange where it differs: one MirrorCL process driving two
/// devices, two ranks of two devices each (copies within a rank and between ranks), an
/// odd number of steps (the result in the second buffer) and one step (no copy reading
/// a buffer again); every rank checks the whole grid bit-exactly.
#[test]
fn stencil_within_and_across_ranks() {
    for (ranks, devices, steps) in [(1, 2, "100"), (2, 2, "7"), (2, 2, "1")] {
        for attach in ["1", "0"] {
            let env = [
                ("APP_SIZE", "64"),
                ("APP_STEPS", steps),
                ("APP_ATTACH", attach),
            ];
            let out = check_cluster("stencil", ranks, devices, &env);
            for (rank, (stdout, _)) in out.outputs.iter().enumerate() {
                assert!(
                    stdout.contains("values bit-exact")
                        && stdout.contains(&format!("steps={steps} step_us=")),
                    "rank {rank} of {ranks}: no check or STEP line\n{}",
                    out.report()
                );
            }
        }
    }
}
