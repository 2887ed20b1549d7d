//! `mirrorcl-overhead`: MirrorCL's cost per command against the native
//! OpenCL platform it wraps, both measured in the same process.
//!
//! Both platforms are reached through the ICD loader (ocl-icd), exactly as an
//! application would reach them. Setup (context, queue, program, kernel,
//! buffer) goes through `opencl3`; the measured calls themselves
//! (`clEnqueueNDRangeKernel`, `clEnqueueWriteBuffer`, `clEnqueueReadBuffer`,
//! `clFinish`) are looked up in the loader with `dlsym` and called with a null
//! event pointer, so no event object is created or released in the timed path
//! (the `opencl3` wrappers always request one).
//!
//! Figures, for each platform on its first device (one context, one in-order
//! queue):
//! 1. trivial kernel (global size 1) enqueue + `clFinish` round trip,
//! 2. 16-byte blocking `clEnqueueWriteBuffer`,
//! 3. 16-byte blocking `clEnqueueReadBuffer`,
//! 4. a burst of N non-blocking kernel enqueues followed by one `clFinish`,
//!    reported per command and as throughput.
//!
//! Native and MirrorCL blocks are interleaved finely (a few round trips of
//! each figure, or one burst, per block; A/B, then B/A, ...) so that machine
//! noise hits both equally. Coarse blocks (hundreds of samples) gave A/A
//! ratios of up to 1.5x on a 2-vCPU VM; blocks of 5 keep an A/A run
//! (`--mirror "Portable"`: the native platform against itself) within about
//! ±6% for round trips and ±7% for bursts there.

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::ptr;
use std::time::Instant;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::error_codes::CL_SUCCESS;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::{get_platforms, Platform};
use opencl3::program::Program;
use opencl3::types::{
    cl_bool, cl_command_queue, cl_event, cl_int, cl_kernel, cl_mem, cl_uint, CL_BLOCKING,
};

const MIRRORCL_PLATFORM: &str = "MirrorCL";
const DEFAULT_NATIVE: &str = "Portable Computing Language";
const KERNEL_SRC: &str = "__kernel void k(__global int* a) {}";
const XFER_BYTES: usize = 16;
/// Goal: a MirrorCL round trip costs at most this many times the native one.
const ROUND_TRIP_GOAL: f64 = 1.2;
/// Goal: MirrorCL's burst throughput is at least this fraction of native.
const BURST_GOAL: f64 = 0.8;

const USAGE: &str = "\
usage: mirrorcl-overhead [options]

Measures MirrorCL's per-command cost against the native platform it wraps.
Both platforms must be visible through the ICD loader in this process
(benches/run-overhead.sh arranges that).

options:
  --native NAME      native platform: first whose name contains NAME
                     (default: \"Portable Computing Language\")
  --native-only      measure only the native platform (no MirrorCL needed)
  --mirror NAME      platform measured as MirrorCL: the one named exactly
                     NAME, else the first whose name contains NAME (default
                     \"MirrorCL\"; `--mirror \"Portable\"` gives an A/A run of
                     the native platform against itself: the method's noise)
  --iters N          timed round trips per figure and platform (default 5000)
  --warmup N         warm-up iterations per figure and platform (default 200)
  --bursts N         timed bursts per platform (default 30)
  --burst-size N     kernel enqueues per burst (default 10000)
  --batch N          round trips per figure in one block (default 5); blocks
                     alternate native/MirrorCL, then MirrorCL/native, ...
  --rewarm N         untimed iterations of each figure before each block
                     (default 2)
  --json PATH        also write the figures as JSON to PATH
  --timeout SECS     give up (exit 3) if the whole run takes longer, e.g. a
                     platform that never completes a command (default 900;
                     0: never)
  -h, --help         this text

exit status: 0 measured (goals are reported, not enforced), 1 OpenCL error,
2 a platform is missing or the arguments are wrong, 3 timed out.";

// ---------------------------------------------------------------------------
// Arguments

struct Args {
    native: String,
    mirror: String,
    native_only: bool,
    iters: usize,
    warmup: usize,
    bursts: usize,
    burst_size: usize,
    batch: usize,
    rewarm: usize,
    json: Option<String>,
    timeout_s: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        native: DEFAULT_NATIVE.to_string(),
        mirror: MIRRORCL_PLATFORM.to_string(),
        native_only: false,
        iters: 5000,
        warmup: 200,
        bursts: 30,
        burst_size: 10_000,
        batch: 5,
        rewarm: 2,
        json: None,
        timeout_s: 900,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (key, inline) = match arg.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |name: &str, v: String| -> Result<usize, String> {
            v.parse::<usize>()
                .map_err(|_| format!("{name}: not a number: {v}"))
        };
        match key.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--native" => args.native = value("--native")?,
            "--mirror" => args.mirror = value("--mirror")?,
            "--native-only" => args.native_only = true,
            "--iters" => args.iters = number("--iters", value("--iters")?)?,
            "--warmup" => args.warmup = number("--warmup", value("--warmup")?)?,
            "--bursts" => args.bursts = number("--bursts", value("--bursts")?)?,
            "--burst-size" => args.burst_size = number("--burst-size", value("--burst-size")?)?,
            "--batch" => args.batch = number("--batch", value("--batch")?)?,
            "--rewarm" => args.rewarm = number("--rewarm", value("--rewarm")?)?,
            "--json" => args.json = Some(value("--json")?),
            "--timeout" => args.timeout_s = number("--timeout", value("--timeout")?)? as u64,
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    if args.iters == 0 || args.bursts == 0 || args.burst_size == 0 || args.batch == 0 {
        return Err("--iters, --bursts, --burst-size and --batch must be positive".into());
    }
    Ok(args)
}

// ---------------------------------------------------------------------------
// The measured entry points, taken from the ICD loader itself.

type EnqueueNdRangeKernel = unsafe extern "C" fn(
    cl_command_queue,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type EnqueueRwBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_bool,
    usize,
    usize,
    *mut c_void,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type Finish = unsafe extern "C" fn(cl_command_queue) -> cl_int;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

struct Api {
    enqueue_nd_range_kernel: EnqueueNdRangeKernel,
    enqueue_write_buffer: EnqueueRwBuffer,
    enqueue_read_buffer: EnqueueRwBuffer,
    finish: Finish,
}

impl Api {
    /// Opens the same loader `opencl3` (cl3, "dynamic") opens: the entries of
    /// `OPENCL_DYLIB_PATH` first, then `libOpenCL.so.1`. dlopen of an already
    /// loaded library returns the same handle, so this is one loader.
    fn load() -> Result<Self, String> {
        let mut candidates: Vec<String> = std::env::var("OPENCL_DYLIB_PATH")
            .map(|v| v.split(';').map(str::to_string).collect())
            .unwrap_or_default();
        candidates.push("libOpenCL.so.1".to_string());
        let handle = candidates
            .iter()
            .filter_map(|name| CString::new(name.as_str()).ok())
            // SAFETY: dlopen with a NUL-terminated name.
            .map(|name| unsafe { dlopen(name.as_ptr(), RTLD_NOW) })
            .find(|h| !h.is_null())
            .ok_or("cannot dlopen the OpenCL ICD loader (libOpenCL.so.1)")?;
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let c = CString::new(name).expect("symbol name");
            // SAFETY: a live dlopen handle and a NUL-terminated symbol name.
            let p = unsafe { dlsym(handle, c.as_ptr()) };
            if p.is_null() {
                Err(format!("{name} not found in the OpenCL ICD loader"))
            } else {
                Ok(p)
            }
        };
        // SAFETY: these are the OpenCL 1.2 C entry points with exactly the
        // signatures declared above.
        unsafe {
            Ok(Self {
                enqueue_nd_range_kernel: std::mem::transmute::<*mut c_void, EnqueueNdRangeKernel>(
                    sym("clEnqueueNDRangeKernel")?,
                ),
                enqueue_write_buffer: std::mem::transmute::<*mut c_void, EnqueueRwBuffer>(sym(
                    "clEnqueueWriteBuffer",
                )?),
                enqueue_read_buffer: std::mem::transmute::<*mut c_void, EnqueueRwBuffer>(sym(
                    "clEnqueueReadBuffer",
                )?),
                finish: std::mem::transmute::<*mut c_void, Finish>(sym("clFinish")?),
            })
        }
    }
}

fn check(status: cl_int, what: &str) -> Result<(), String> {
    if status == CL_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {status}"))
    }
}

// ---------------------------------------------------------------------------
// One platform under test

#[derive(Default)]
struct Samples {
    /// µs per kernel enqueue + clFinish.
    kernel_rt: Vec<f64>,
    /// µs per blocking 16-byte write.
    write: Vec<f64>,
    /// µs per blocking 16-byte read.
    read: Vec<f64>,
    /// µs per command over a whole burst (enqueues + final clFinish).
    burst: Vec<f64>,
    /// µs per command for the enqueue calls alone (before the clFinish).
    burst_enqueue: Vec<f64>,
}

struct Target {
    label: &'static str,
    platform_name: String,
    platform_version: String,
    platform_vendor: String,
    device_name: String,
    device_version: String,
    driver_version: String,
    // Field order is drop order: queue objects before the context.
    kernel: Kernel,
    _program: Program,
    buffer: Buffer<u8>,
    queue: CommandQueue,
    _context: Context,
    samples: Samples,
}

fn info<E: std::fmt::Display>(r: Result<String, E>) -> String {
    match r {
        Ok(s) => s.trim_end_matches('\0').trim().to_string(),
        Err(e) => format!("<{e}>"),
    }
}

impl Target {
    fn new(label: &'static str, platform: &Platform, api: &Api) -> Result<Self, String> {
        let platform_name = info(platform.name());
        let ctx = |what: &str| {
            let platform_name = platform_name.clone();
            let what = what.to_string();
            move |e: opencl3::error_codes::ClError| format!("{platform_name}: {what}: {e}")
        };
        let devices = platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .map_err(ctx("clGetDeviceIDs"))?;
        let device_id = *devices
            .first()
            .ok_or_else(|| format!("{platform_name}: no devices"))?;
        let device = Device::new(device_id);
        let context = Context::from_device(&device).map_err(ctx("clCreateContext"))?;
        // SAFETY: device_id is a device of this context. In-order, no profiling.
        let queue = unsafe { CommandQueue::create(&context, device_id, 0) }
            .map_err(ctx("clCreateCommandQueue"))?;
        let program = Program::create_and_build_from_source(&context, KERNEL_SRC, "")
            .map_err(|e| format!("{platform_name}: building the kernel: {e}"))?;
        let kernel = Kernel::create(&program, "k").map_err(ctx("clCreateKernel"))?;
        // SAFETY: no host pointer.
        let buffer = unsafe {
            Buffer::<u8>::create(&context, CL_MEM_READ_WRITE, XFER_BYTES, ptr::null_mut())
        }
        .map_err(ctx("clCreateBuffer"))?;
        let mem = buffer.get();
        // SAFETY: argument 0 is a __global pointer; a cl_mem is passed.
        unsafe { kernel.set_arg(0, &mem) }.map_err(ctx("clSetKernelArg"))?;

        let target = Self {
            label,
            platform_version: info(platform.version()),
            platform_vendor: info(platform.vendor()),
            device_name: info(device.name()),
            device_version: info(device.version()),
            driver_version: info(device.driver_version()),
            platform_name,
            kernel,
            _program: program,
            buffer,
            queue,
            _context: context,
            samples: Samples::default(),
        };
        target.self_check(api)?;
        Ok(target)
    }

    /// One write/read-back and one kernel, so that a platform that "works"
    /// only by doing nothing does not get measured.
    fn self_check(&self, api: &Api) -> Result<(), String> {
        let mut data: [u8; XFER_BYTES] = std::array::from_fn(|i| (i as u8) * 7 + 3);
        let mut back = [0u8; XFER_BYTES];
        self.write(api, &mut data)?;
        self.kernel_round_trip(api)?;
        self.read(api, &mut back)?;
        if back != data {
            return Err(format!(
                "{}: read back {back:?} after writing {data:?}",
                self.platform_name
            ));
        }
        Ok(())
    }

    fn enqueue_kernel(&self, api: &Api) -> Result<(), String> {
        let global = [1usize];
        // SAFETY: valid queue/kernel with its argument set; no events.
        let status = unsafe {
            (api.enqueue_nd_range_kernel)(
                self.queue.get(),
                self.kernel.get(),
                1,
                ptr::null(),
                global.as_ptr(),
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueNDRangeKernel")
    }

    fn finish(&self, api: &Api) -> Result<(), String> {
        // SAFETY: valid queue.
        check(unsafe { (api.finish)(self.queue.get()) }, "clFinish")
    }

    fn kernel_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        self.enqueue_kernel(api)?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    fn write(&self, api: &Api, data: &mut [u8; XFER_BYTES]) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: blocking write of XFER_BYTES from a live host array.
        let status = unsafe {
            (api.enqueue_write_buffer)(
                self.queue.get(),
                self.buffer.get(),
                CL_BLOCKING,
                0,
                XFER_BYTES,
                data.as_mut_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        let us = t.elapsed().as_secs_f64() * 1e6;
        check(status, "clEnqueueWriteBuffer")?;
        Ok(us)
    }

    fn read(&self, api: &Api, data: &mut [u8; XFER_BYTES]) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: blocking read of XFER_BYTES into a live host array.
        let status = unsafe {
            (api.enqueue_read_buffer)(
                self.queue.get(),
                self.buffer.get(),
                CL_BLOCKING,
                0,
                XFER_BYTES,
                data.as_mut_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        let us = t.elapsed().as_secs_f64() * 1e6;
        check(status, "clEnqueueReadBuffer")?;
        Ok(us)
    }

    /// Returns (µs per command over the whole burst, µs per enqueue call).
    fn burst(&self, api: &Api, size: usize) -> Result<(f64, f64), String> {
        self.finish(api)?;
        let t = Instant::now();
        for _ in 0..size {
            self.enqueue_kernel(api)?;
        }
        let enqueued = t.elapsed();
        self.finish(api)?;
        let total = t.elapsed();
        let n = size as f64;
        Ok((
            total.as_secs_f64() * 1e6 / n,
            enqueued.as_secs_f64() * 1e6 / n,
        ))
    }

    fn warm_up(&self, api: &Api, iters: usize, burst_size: usize) -> Result<(), String> {
        let mut data = [0u8; XFER_BYTES];
        for _ in 0..iters {
            self.kernel_round_trip(api)?;
            self.write(api, &mut data)?;
            self.read(api, &mut data)?;
        }
        if burst_size > 0 {
            self.burst(api, burst_size)?;
        }
        Ok(())
    }

    /// One measurement block: `iters` samples of each round trip, after
    /// `rewarm` untimed ones (the other platform ran since this one last did).
    fn block(&mut self, api: &Api, rewarm: usize, iters: usize) -> Result<(), String> {
        self.warm_up(api, rewarm, 0)?;
        let mut data = [0u8; XFER_BYTES];
        for _ in 0..iters {
            let us = self.kernel_round_trip(api)?;
            self.samples.kernel_rt.push(us);
        }
        for _ in 0..iters {
            let us = self.write(api, &mut data)?;
            self.samples.write.push(us);
        }
        for _ in 0..iters {
            let us = self.read(api, &mut data)?;
            self.samples.read.push(us);
        }
        Ok(())
    }

    /// One timed burst, after one untimed round trip.
    fn timed_burst(&mut self, api: &Api, burst_size: usize) -> Result<(), String> {
        self.kernel_round_trip(api)?;
        let (per_cmd, per_enqueue) = self.burst(api, burst_size)?;
        self.samples.burst.push(per_cmd);
        self.samples.burst_enqueue.push(per_enqueue);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Statistics and report

#[derive(Clone, Copy)]
struct Stat {
    median: f64,
    p90: f64,
    /// JSON only: the rest of the distribution (round trips are often
    /// bimodal on a busy host, which the median alone hides).
    p10: f64,
    p25: f64,
    p75: f64,
    p99: f64,
    min: f64,
    mean: f64,
    n: usize,
}

fn stat(samples: &[f64]) -> Stat {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Stat {
            median: f64::NAN,
            p90: f64::NAN,
            p10: f64::NAN,
            p25: f64::NAN,
            p75: f64::NAN,
            p99: f64::NAN,
            min: f64::NAN,
            mean: f64::NAN,
            n,
        };
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    // Nearest-rank percentiles.
    let pct = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Stat {
        median,
        p90: pct(0.9),
        p10: pct(0.1),
        p25: pct(0.25),
        p75: pct(0.75),
        p99: pct(0.99),
        min: v[0],
        mean: v.iter().sum::<f64>() / n as f64,
        n,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Lower is better; ratio = MirrorCL / native, goal ratio ≤ ROUND_TRIP_GOAL.
    RoundTrip,
    /// Higher throughput is better; ratio = MirrorCL / native throughput.
    Burst,
    /// Reported, no goal.
    Info,
}

struct Figure {
    key: &'static str,
    name: String,
    kind: Kind,
    native: Stat,
    mirror: Option<Stat>,
}

impl Figure {
    fn ratio(&self) -> Option<f64> {
        let m = self.mirror?;
        Some(match self.kind {
            Kind::RoundTrip | Kind::Info => m.median / self.native.median,
            Kind::Burst => self.native.median / m.median,
        })
    }
    fn goal(&self) -> Option<(&'static str, f64)> {
        match self.kind {
            Kind::RoundTrip => Some(("<=", ROUND_TRIP_GOAL)),
            Kind::Burst => Some((">=", BURST_GOAL)),
            Kind::Info => None,
        }
    }
    fn met(&self) -> Option<bool> {
        let r = self.ratio()?;
        match self.kind {
            Kind::RoundTrip => Some(r <= ROUND_TRIP_GOAL),
            Kind::Burst => Some(r >= BURST_GOAL),
            Kind::Info => None,
        }
    }
}

/// Picks one figure's samples out of a platform's [`Samples`].
type Pick = fn(&Samples) -> &[f64];

fn figures(native: &Samples, mirror: Option<&Samples>, burst_size: usize) -> Vec<Figure> {
    let pick: [(&'static str, String, Kind, Pick); 5] = [
        (
            "kernel_round_trip",
            "kernel enqueue + clFinish".into(),
            Kind::RoundTrip,
            |s| &s.kernel_rt,
        ),
        (
            "write_16b",
            "16 B blocking write".into(),
            Kind::RoundTrip,
            |s| &s.write,
        ),
        (
            "read_16b",
            "16 B blocking read".into(),
            Kind::RoundTrip,
            |s| &s.read,
        ),
        (
            "burst_per_command",
            format!("burst of {burst_size}, per command"),
            Kind::Burst,
            |s| &s.burst,
        ),
        (
            "burst_enqueue_per_call",
            "  (enqueue call alone)".into(),
            Kind::Info,
            |s| &s.burst_enqueue,
        ),
    ];
    pick.into_iter()
        .map(|(key, name, kind, f)| Figure {
            key,
            name,
            kind,
            native: stat(f(native)),
            mirror: mirror.map(|m| stat(f(m))),
        })
        .collect()
}

fn cpu_model() -> (String, usize) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let threads = text
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count();
    (model, threads)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn print_report(args: &Args, native: &Target, mirror: Option<&Target>, figs: &[Figure]) {
    let (cpu, threads) = cpu_model();
    println!();
    println!(
        "machine : {cpu} ({threads} hardware threads), Linux {}",
        kernel_release()
    );
    for t in std::iter::once(native).chain(mirror) {
        println!(
            "{:<8}: platform \"{}\" ({}; {}); device \"{}\" ({}; driver {})",
            t.label,
            t.platform_name,
            t.platform_version,
            t.platform_vendor,
            t.device_name,
            t.device_version,
            t.driver_version
        );
    }
    println!(
        "samples : {} round trips per figure in blocks of {} (+{} untimed), {} bursts of {} per platform, {} warm-up iterations; platforms alternate A/B, B/A per block and per burst",
        args.iters, args.batch, args.rewarm, args.bursts, args.burst_size, args.warmup
    );
    println!("units   : µs per command; median (p90)");
    println!();
    let dash = "-";
    println!(
        "{:<28} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
        "figure", "native µs", "MirrorCL µs", "ratio", "goal", "met?"
    );
    println!("{}", "-".repeat(28 + 20 + 20 + 8 + 7 + 4 + 5 * 3));
    let cell = |s: Stat| format!("{:.2} ({:.2})", s.median, s.p90);
    for f in figs {
        println!(
            "{:<28} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
            f.name,
            cell(f.native),
            f.mirror.map_or_else(|| dash.to_string(), cell),
            f.ratio()
                .map_or_else(|| dash.to_string(), |r| { format!("{r:.3}x") }),
            f.goal()
                .map_or_else(|| dash.to_string(), |(op, g)| format!("{op}{g}x")),
            f.met().map_or_else(
                || dash.to_string(),
                |m| (if m { "yes" } else { "NO" }).to_string()
            ),
        );
    }
    if let Some(b) = figs.iter().find(|f| f.kind == Kind::Burst) {
        let tput = |s: Stat| 1e6 / s.median;
        print!(
            "\nburst throughput: native {:.0} commands/s",
            tput(b.native)
        );
        match b.mirror {
            Some(m) => println!(
                ", MirrorCL {:.0} commands/s ({:.3}x of native)",
                tput(m),
                tput(m) / tput(b.native)
            ),
            None => println!(),
        }
    }
    println!(
        "ratio: MirrorCL/native median time for round trips; MirrorCL/native throughput for the burst."
    );
    if mirror.is_none() {
        println!("(--native-only: MirrorCL not measured)");
    }
}

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

fn write_json(
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
        "  \"parameters\": {{\"iters\": {}, \"warmup\": {}, \"bursts\": {}, \"burst_size\": {}, \"batch\": {}, \"rewarm\": {}, \"transfer_bytes\": {XFER_BYTES}}},",
        args.iters, args.warmup, args.bursts, args.burst_size, args.batch, args.rewarm
    );
    s.push_str("  \"figures\": {\n");
    for (i, f) in figs.iter().enumerate() {
        let kind = match f.kind {
            Kind::RoundTrip => "round_trip",
            Kind::Burst => "burst",
            Kind::Info => "info",
        };
        let mut entry = format!(
            "    {}: {{\"description\": {}, \"kind\": \"{kind}\", \"native\": {}, \"mirrorcl\": {}, \"ratio\": {}",
            json_str(f.key),
            json_str(f.name.trim()),
            json_stat(f.native),
            f.mirror.map_or_else(|| "null".to_string(), json_stat),
            f.ratio().map_or_else(|| "null".to_string(), json_num),
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
    s.push_str("  }\n}\n");
    std::fs::write(path, s).map_err(|e| format!("writing {path}: {e}"))
}

// ---------------------------------------------------------------------------

/// The platforms in the order they run in step `step`: A/B, B/A, A/B, ...
fn in_order<'a>(
    native: &'a mut Target,
    mirror: Option<&'a mut Target>,
    step: usize,
) -> Vec<&'a mut Target> {
    let mut order: Vec<&mut Target> = std::iter::once(native).chain(mirror).collect();
    if step % 2 == 1 {
        order.reverse();
    }
    order
}

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
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mirrorcl-overhead: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
