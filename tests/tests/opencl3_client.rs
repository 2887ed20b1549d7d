//! Runs the `opencl3` client (`src/bin/opencl3_client.rs`) against MirrorCL through the
//! ICD loader (opencl3 loads libOpenCL itself, so the loader is its way in), on 1 and 3
//! PoCL devices, and natively against PoCL as a check of the client itself.

use mirrorcl_tests::{mirrorcl_lib, run_timeout, vendors_dir};
use std::process::Command;
use std::time::Instant;

fn run_client(devices: u32, mirrorcl: bool) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opencl3_client"));
    cmd.env("POCL_DEVICES", vec!["pthread"; devices as usize].join(" "))
        .env("CTEST_EXPECT_DEVICES", devices.to_string())
        .env_remove("LD_PRELOAD")
        .env_remove("MIRRORCL_EXPECT")
        .env_remove("OCL_ICD_VENDORS");
    if mirrorcl {
        let dir = vendors_dir(&mirrorcl_lib()).expect("vendors directory");
        cmd.env("OCL_ICD_VENDORS", format!("{}/", dir.display()))
            .env("MIRRORCL_EXPECT", "1");
    }
    let start = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the opencl3 client");
    let timeout = run_timeout();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("client output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "PASS opencl3_client"),
        "opencl3 client ({devices} devices, mirrorcl={mirrorcl}) failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

#[test]
fn loader_1dev() {
    run_client(1, true);
}

#[test]
fn loader_3dev() {
    run_client(3, true);
}

#[test]
fn native_3dev() {
    run_client(3, false);
}
