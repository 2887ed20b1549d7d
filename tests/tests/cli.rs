//! The `mirrorcl` command: `run` (the mpirun line built for the user), `devices` (the
//! cluster's device table) and `doctor` (what a machine lacks, and how to fix it).

use mirrorcl_tests::{compile, mpi_session_dir, target_dir, Way};
use std::process::{Command, Output};

fn mirrorcl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let exe = target_dir().join("release").join("mirrorcl");
    assert!(
        exe.is_file(),
        "{} missing: cargo build --release",
        exe.display()
    );
    let session = mpi_session_dir().expect("a session directory");
    let mut cmd = Command::new(&exe);
    cmd.args(args)
        .env("OMPI_MCA_orte_tmpdir_base", &session)
        .env_remove("LD_PRELOAD")
        .env_remove("OCL_ICD_VENDORS")
        .env("POCL_KERNEL_CACHE", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run mirrorcl");
    let _ = std::fs::remove_dir_all(&session);
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `mirrorcl run`: one copy of the program's output, the job's exit status.
#[test]
fn run_prints_one_copy_of_the_output() {
    let bin = compile("cluster_replica", Way::Preload).expect("compile");
    let out = mirrorcl(
        &["run", "-n", "3", "--", bin.to_str().unwrap()],
        &[("POCL_DEVICES", "pthread")],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(
        stdout.matches("hello from the program").count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("PASS cluster_replica").count(),
        1,
        "{stdout}"
    );
    // The line it runs: preload, oversubscription on this 2-core machine.
    let dry = mirrorcl(&["run", "-n", "3", "--dry-run", "--", "/bin/true"], &[]);
    let line = text(&dry.stdout);
    assert!(line.contains("-np 3"), "{line}");
    assert!(line.contains("LD_PRELOAD="), "{line}");
    assert!(line.contains("libmirrorcl.so"), "{line}");
    // Mistakes name the cause.
    let bad = mirrorcl(&["run", "--", "/bin/true"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("-n N is required"));
    let bad = mirrorcl(&["run", "-n", "2", "--", "./no-such-program"], &[]);
    assert!(
        text(&bad.stderr).contains("no such program"),
        "{}",
        text(&bad.stderr)
    );
}

/// `mirrorcl devices -n 2`: every device of every rank, with its owner.
#[test]
fn devices_lists_the_cluster() {
    let out = mirrorcl(
        &["devices", "-n", "2"],
        &[("POCL_DEVICES", "pthread pthread")],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("2 rank(s), 4 device(s)"), "{stdout}");
    let owners: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("Portable Computing Language"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(owners, vec!["0", "0", "1", "1"], "{stdout}");
}

/// `mirrorcl doctor`: ready here; a broken vendor entry is named with its fix.
#[test]
fn doctor_checks_the_machine() {
    let out = mirrorcl(&["doctor"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for needle in [
        "Portable Computing Language",
        "libOpenCL.so.1 loads",
        "thread level Multiple",
        "ready",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
    let dir = target_dir().join("ctests").join("broken-vendors");
    std::fs::create_dir_all(&dir).expect("directory");
    std::fs::write(dir.join("broken.icd"), "libno-such-opencl.so.1\n").expect("icd");
    let out = mirrorcl(
        &["doctor"],
        &[
            ("MIRRORCL_VENDORS", dir.to_str().unwrap()),
            ("MIRRORCL_DOCTOR_SKIP_MPI", "1"),
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("PROBLEM"), "{stdout}");
    assert!(stdout.contains("broken.icd"), "{stdout}");
    assert!(stdout.contains("libno-such-opencl.so.1"), "{stdout}");
    assert!(stdout.contains("fix:"), "{stdout}");
}
