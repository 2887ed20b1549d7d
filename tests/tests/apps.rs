//! The applications of the benchmark harness (`benches/apps`, Table IV.5 of the thesis)
//! at test sizes: natively on PoCL and under `mpirun` with MirrorCL, every rank checking
//! its results against a CPU reference (bit-exact where the arithmetic allows, else
//! within the tolerance each program states).

use mirrorcl_tests::{check_cluster, check_program_with, Way};

const APPS: &[(&str, &str)] = &[
    ("blackscholes", "16K"),
    ("binomialoption", "4K"),
    ("cp", "128"),
    ("nbody", "1024"),
    ("matrixmul", "256"),
    ("ep", "1M"),
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
