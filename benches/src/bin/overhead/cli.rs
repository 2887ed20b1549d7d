//! The command line: what is measured how many times, which platforms, where the
//! JSON goes, and when to give up.

use clap::Parser;

use crate::{DEFAULT_NATIVE, MIRRORCL_PLATFORM};

/// Measures MirrorCL's per-command cost against the native platform it wraps.
///
/// Per OpenCL API family (kernel, transfer, memory objects, synchronisation,
/// queries), as the ratio MirrorCL/native taken in the same process. Both
/// platforms must be visible through the ICD loader in this process
/// (benches/run-overhead.sh arranges that).
///
/// figures (family: what is timed):
///   kernel:          kernel (global size 1) enqueue + clFinish [goal <= 1.2x];
///                    burst of --burst-size enqueues + one clFinish, per
///                    command [goal: throughput >= 0.8x], and the enqueue
///                    calls alone; clSetKernelArg of one int, per call
///   transfer:        16 B blocking write [goal <= 1.2x]; 16 B blocking read
///                    [goal <= 1.2x]; 16 B clEnqueueCopyBuffer + clFinish;
///                    16 B blocking clEnqueueMapBuffer (read|write) +
///                    clEnqueueUnmapMemObject + clFinish
///   memory objects:  clCreateBuffer (4 KiB, no host pointer) +
///                    clReleaseMemObject
///   synchronisation: clEnqueueMarkerWithWaitList + clWaitForEvents +
///                    clReleaseEvent
///   queries:         clGetDeviceInfo(CL_DEVICE_NAME), clGetMemObjectInfo
///                    (CL_MEM_SIZE), per call
/// Figures without a goal are reported only. Calls well under a microsecond
/// (clSetKernelArg, the queries) are timed 100 at a time. Every operation is
/// checked on each platform before and after measuring; a wrong result is an
/// error (exit 1), not a figure.
#[derive(Parser)]
#[command(name = "mirrorcl-overhead", verbatim_doc_comment)]
#[command(
    after_help = "exit status: 0 measured (goals are reported, not enforced), \
                        1 OpenCL error, 2 a platform is missing or the arguments are \
                        wrong, 3 timed out."
)]
// The last of a repeated option wins: scripts put their defaults before the user's.
#[command(args_override_self = true)]
pub struct Args {
    /// Native platform: the first whose name contains NAME
    #[arg(long, value_name = "NAME", default_value = DEFAULT_NATIVE)]
    pub native: String,
    /// Platform measured as MirrorCL: named exactly NAME, else the first containing NAME ("Portable": an A/A run, the method's noise)
    #[arg(long, value_name = "NAME", default_value = MIRRORCL_PLATFORM)]
    pub mirror: String,
    /// Measure only the native platform (no MirrorCL needed)
    #[arg(long)]
    pub native_only: bool,
    /// Timed samples per figure and platform (--quick: 500)
    #[arg(long, value_name = "N", default_value = "5000", default_value_if("quick", "true", "500"),
          value_parser = positive)]
    pub iters: usize,
    /// Warm-up iterations per figure and platform (--quick: 20)
    #[arg(
        long,
        value_name = "N",
        default_value = "200",
        default_value_if("quick", "true", "20")
    )]
    pub warmup: usize,
    /// Timed bursts per platform (--quick: 5)
    #[arg(long, value_name = "N", default_value = "30", default_value_if("quick", "true", "5"),
          value_parser = positive)]
    pub bursts: usize,
    /// Smoke run: --iters and --warmup divided by 10, 5 bursts (explicit values still win)
    #[arg(long)]
    pub quick: bool,
    /// Kernel enqueues per burst
    #[arg(long, value_name = "N", default_value = "10000", value_parser = positive)]
    pub burst_size: usize,
    /// Samples per figure in one block; blocks alternate native/MirrorCL, then MirrorCL/native, ...
    #[arg(long, value_name = "N", default_value = "5", value_parser = positive)]
    pub batch: usize,
    /// Untimed iterations of each figure before each block
    #[arg(long, value_name = "N", default_value = "2")]
    pub rewarm: usize,
    /// Also write the figures as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// Give up (exit 3) if the whole run takes longer, e.g. a platform that never completes a command (0: never)
    #[arg(long = "timeout", value_name = "SECS", default_value = "900")]
    pub timeout_s: u64,
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("not a positive number: {s}")),
    }
}
