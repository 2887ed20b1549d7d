//! `mirrorcl-overhead`: MirrorCL's cost per command against the native
//! OpenCL platform it wraps, both measured in the same process.
//!
//! Both platforms are reached through the ICD loader (ocl-icd), exactly as an
//! application would reach them. Setup (context, queue, program, kernels,
//! buffers) goes through `opencl3`; the measured calls themselves are looked
//! up in the loader with `dlsym` and called through typed function pointers,
//! with a null event pointer wherever the figure does not need an event, so
//! no event object is created or released in those timed paths (the
//! `opencl3` wrappers always request one).
//!
//! Figures, for each platform on its first device (one context, one in-order
//! queue), grouped by OpenCL API family; the first four carry the goals:
//! - kernel:
//!   1. trivial kernel (global size 1) enqueue + `clFinish` round trip,
//!   4. a burst of N non-blocking kernel enqueues followed by one `clFinish`,
//!      reported per command and as throughput (and the enqueue calls alone),
//!   - `clSetKernelArg` of one scalar argument, per call;
//! - transfer:
//!   2. 16-byte blocking `clEnqueueWriteBuffer`,
//!   3. 16-byte blocking `clEnqueueReadBuffer`,
//!   - 16-byte `clEnqueueCopyBuffer` between two buffers + `clFinish`,
//!   - blocking 16-byte `clEnqueueMapBuffer` (read|write) +
//!     `clEnqueueUnmapMemObject` + `clFinish`;
//! - memory objects: `clCreateBuffer` (4 KiB, no host pointer) +
//!   `clReleaseMemObject`;
//! - synchronisation: `clEnqueueMarkerWithWaitList` + `clWaitForEvents` +
//!   `clReleaseEvent`;
//! - queries: `clGetDeviceInfo(CL_DEVICE_NAME)` and
//!   `clGetMemObjectInfo(CL_MEM_SIZE)`, per call.
//!
//! Calls that take well under a microsecond (`clSetKernelArg`, the queries)
//! are timed [`CALLS_PER_SAMPLE`] at a time, so that the clock's own cost
//! does not swamp them; their figures are per call.
//!
//! Every operation is checked once on each platform before measuring and
//! again after (a write read back, a copy read back, a map that sees and
//! changes the buffer, a scalar argument a kernel writes out, a new buffer's
//! size, a marker's status, the device's name): a platform that "works" only
//! by doing nothing is an error, not a figure.
//!
//! Native and MirrorCL blocks are interleaved finely (a few round trips of
//! each figure, or one burst, per block; A/B, then B/A, ...) so that machine
//! noise hits both equally. Coarse blocks (hundreds of samples) gave A/A
//! ratios of up to 1.5x on a 2-vCPU VM; blocks of 5 keep an A/A run
//! (`--mirror "Portable"`: the native platform against itself) within about
//! ±6% for round trips and ±7% for bursts there. The run has two phases:
//! first the four figures with goals (round-trip blocks, then bursts), taken
//! exactly as before the other families were added, then blocks of the other
//! families' figures, interleaved the same way.
//!
//! Modules: [`cli`] (the arguments), [`api`] (the entry points taken from the
//! loader), [`target`] (one platform: setup, self-check, samples), one per API
//! family of measured operations ([`kernel`], [`transfer`], [`memory`],
//! [`sync`], [`queries`]), [`blocks`] (warm-ups, blocks and bursts, A/B
//! order), [`stats`] and [`figures`](mod@figures) (what is reported),
//! [`report`] (standard output) and [`json`] (`--json`); this file holds the
//! constants, the run's phases and the watchdogs.

mod api;
mod blocks;
mod cli;
mod figures;
mod json;
mod kernel;
mod memory;
mod queries;
mod report;
mod stats;
mod sync;
mod target;
mod transfer;

use std::process::ExitCode;

use clap::Parser;

use opencl3::platform::get_platforms;

use api::Api;
use blocks::in_order;
use cli::Args;
use figures::figures;
use json::write_json;
use report::print_report;
use target::{info, Target};

const MIRRORCL_PLATFORM: &str = "MirrorCL";
const DEFAULT_NATIVE: &str = "Portable Computing Language";
/// `k`: the trivial kernel that is enqueued; `s`: the kernel whose scalar
/// argument `v` `clSetKernelArg` sets (the self-check runs it once).
const KERNEL_SRC: &str = "__kernel void k(__global int* a) {}\n\
                          __kernel void s(__global int* a, int v) { a[0] = v; }";
const XFER_BYTES: usize = 16;
/// Size of the buffer `clCreateBuffer` creates and releases.
const CREATE_BYTES: usize = 4096;
/// Sub-microsecond calls (`clSetKernelArg`, the queries) are timed this many
/// at a time; their figures are per call. A native query takes about 5 ns on
/// a 2-vCPU VM, where reading the clock twice costs tens of ns: 100 calls
/// keep the clock's share of a per-call figure to a few per cent. (The help
/// text of [`Args`] repeats the number.)
const CALLS_PER_SAMPLE: usize = 100;
/// Goal: a MirrorCL round trip costs at most this many times the native one.
const ROUND_TRIP_GOAL: f64 = 1.2;
/// Goal: MirrorCL's burst throughput is at least this fraction of native.
const BURST_GOAL: f64 = 0.8;

/// What the run is doing, for the watchdog's message.
static STAGE: std::sync::Mutex<&'static str> = std::sync::Mutex::new("starting");
const ENUMERATING: &str = "in clGetPlatformIDs (ICD loader start-up)";
const ENUMERATION_HINT: &str = "\
hint: the ICD loader queries every ICD's platforms here. An ICD whose dispatch
table points at its own exported cl* symbols gets the loader's same-named
symbols instead (ELF interposition: libOpenCL.so.1 is loaded first) and the
loader then dispatches to itself forever. Link the ICD with -Wl,-Bsymbolic
(build.rs: cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic) or fill its dispatch
table with non-exported functions.";
/// Enumeration that takes longer than this is reported (and given up on) at
/// once, rather than after --timeout.
const ENUMERATION_LIMIT_S: u64 = 60;

fn set_stage(stage: &'static str) {
    *STAGE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = stage;
}

fn run(args: &Args) -> Result<(), (u8, String)> {
    let fail = |e: String| (1u8, e);
    set_stage(ENUMERATING);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let limit = std::time::Duration::from_secs(ENUMERATION_LIMIT_S);
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
            eprintln!(
                "mirrorcl-overhead: error: clGetPlatformIDs has not returned after {ENUMERATION_LIMIT_S} s; giving up\n{ENUMERATION_HINT}"
            );
            std::process::exit(3);
        }
    });
    let platforms = get_platforms();
    let _ = tx.send(());
    let platforms = platforms.map_err(|e| {
        (
            2,
            format!("no OpenCL platforms (clGetPlatformIDs: {e}); is an ICD installed?"),
        )
    })?;
    let names: Vec<String> = platforms.iter().map(|p| info(p.name())).collect();
    eprintln!("platforms: {}", names.join(" | "));

    let native_idx = names
        .iter()
        .position(|n| n != MIRRORCL_PLATFORM && n.contains(&args.native))
        .ok_or_else(|| {
            (
                2,
                format!(
                    "native platform matching \"{}\" not found (have: {})",
                    args.native,
                    names.join(", ")
                ),
            )
        })?;
    let mirror_idx = names
        .iter()
        .position(|n| *n == args.mirror)
        .or_else(|| names.iter().position(|n| n.contains(&args.mirror)));
    if mirror_idx.is_none() && !args.native_only {
        return Err((
            2,
            format!(
                "the \"{}\" platform is not visible (have: {}). \
                 Run through benches/run-overhead.sh, which registers \
                 target/release/libmirrorcl.so with the ICD loader, or pass \
                 --native-only.",
                args.mirror,
                names.join(", ")
            ),
        ));
    }
    let mirror_idx = if args.native_only { None } else { mirror_idx };

    set_stage("setting up contexts, queues and kernels");
    let api = Api::load().map_err(fail)?;
    let mut native = Target::new("native", &platforms[native_idx], &api).map_err(fail)?;
    let mut mirror = mirror_idx
        .map(|i| Target::new("MirrorCL", &platforms[i], &api))
        .transpose()
        .map_err(fail)?;

    set_stage("warming up");
    let warm_burst = args.burst_size.min(1000);
    native
        .warm_up(&api, args.warmup, warm_burst)
        .map_err(fail)?;
    if let Some(m) = mirror.as_mut() {
        m.warm_up(&api, args.warmup, warm_burst).map_err(fail)?;
    }
    set_stage("measuring");
    // Round trips: blocks of `batch` samples, alternating A/B, B/A, ... so
    // that neither platform always runs first and noise hits both alike.
    let blocks = args.iters.div_ceil(args.batch);
    eprintln!(
        "measuring: {blocks} blocks of {} round trips per figure, then {} bursts",
        args.batch, args.bursts
    );
    for block in 0..blocks {
        let iters = args.batch.min(args.iters - block * args.batch);
        for t in in_order(&mut native, mirror.as_mut(), block) {
            t.block(&api, args.rewarm, iters).map_err(fail)?;
        }
    }
    // Bursts: one per platform at a time, alternating the same way.
    for burst in 0..args.bursts {
        for t in in_order(&mut native, mirror.as_mut(), burst) {
            t.timed_burst(&api, args.burst_size).map_err(fail)?;
        }
    }
    // Second phase, the other families' figures, in blocks alternating the
    // same way. A phase of its own so that the four figures with goals are
    // taken by exactly the same sequence of calls as before these were
    // added, and stay comparable with earlier runs.
    set_stage("warming up (other API families)");
    for t in std::iter::once(&native).chain(mirror.as_ref()) {
        t.warm_up_families(&api, args.warmup).map_err(fail)?;
    }
    set_stage("measuring (other API families)");
    eprintln!(
        "measuring: {blocks} blocks of {} samples per figure of the other API families",
        args.batch
    );
    for block in 0..blocks {
        let iters = args.batch.min(args.iters - block * args.batch);
        for t in in_order(&mut native, mirror.as_mut(), block) {
            t.family_block(&api, args.rewarm, iters).map_err(fail)?;
        }
    }

    set_stage("checking results after measuring");
    for t in std::iter::once(&native).chain(mirror.as_ref()) {
        t.self_check(&api).map_err(|e| {
            fail(format!(
                "{}: self-check after measuring: {e}",
                t.platform_name
            ))
        })?;
    }

    let figs = figures(
        &native.samples,
        mirror.as_ref().map(|m| &m.samples),
        args.burst_size,
    );
    print_report(args, &native, mirror.as_ref(), &figs);
    if let Some(path) = &args.json {
        write_json(path, args, &native, mirror.as_ref(), &figs).map_err(fail)?;
        println!("json    : {path}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.timeout_s > 0 {
        let limit = args.timeout_s;
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(limit));
            let stage = *STAGE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            eprintln!(
                "mirrorcl-overhead: error: still running after {limit} s (--timeout), {stage}; giving up"
            );
            if stage == ENUMERATING {
                eprintln!("{ENUMERATION_HINT}");
            }
            std::process::exit(3);
        });
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("mirrorcl-overhead: error: {msg}");
            ExitCode::from(code)
        }
    }
}
