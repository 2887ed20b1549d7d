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

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::ptr;
use std::time::Instant;

use clap::Parser;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_NAME, CL_DEVICE_TYPE_ALL};
use opencl3::error_codes::CL_SUCCESS;
use opencl3::event::{CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_READ_WRITE, CL_MEM_SIZE};
use opencl3::platform::{get_platforms, Platform};
use opencl3::program::Program;
use opencl3::types::{
    cl_bool, cl_command_queue, cl_context, cl_device_id, cl_device_info, cl_event, cl_event_info,
    cl_int, cl_kernel, cl_map_flags, cl_mem, cl_mem_flags, cl_mem_info, cl_uint, CL_BLOCKING,
};

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

// ---------------------------------------------------------------------------
// Arguments

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
struct Args {
    /// Native platform: the first whose name contains NAME
    #[arg(long, value_name = "NAME", default_value = DEFAULT_NATIVE)]
    native: String,
    /// Platform measured as MirrorCL: named exactly NAME, else the first containing NAME ("Portable": an A/A run, the method's noise)
    #[arg(long, value_name = "NAME", default_value = MIRRORCL_PLATFORM)]
    mirror: String,
    /// Measure only the native platform (no MirrorCL needed)
    #[arg(long)]
    native_only: bool,
    /// Timed samples per figure and platform (--quick: 500)
    #[arg(long, value_name = "N", default_value = "5000", default_value_if("quick", "true", "500"),
          value_parser = positive)]
    iters: usize,
    /// Warm-up iterations per figure and platform (--quick: 20)
    #[arg(
        long,
        value_name = "N",
        default_value = "200",
        default_value_if("quick", "true", "20")
    )]
    warmup: usize,
    /// Timed bursts per platform (--quick: 5)
    #[arg(long, value_name = "N", default_value = "30", default_value_if("quick", "true", "5"),
          value_parser = positive)]
    bursts: usize,
    /// Smoke run: --iters and --warmup divided by 10, 5 bursts (explicit values still win)
    #[arg(long)]
    quick: bool,
    /// Kernel enqueues per burst
    #[arg(long, value_name = "N", default_value = "10000", value_parser = positive)]
    burst_size: usize,
    /// Samples per figure in one block; blocks alternate native/MirrorCL, then MirrorCL/native, ...
    #[arg(long, value_name = "N", default_value = "5", value_parser = positive)]
    batch: usize,
    /// Untimed iterations of each figure before each block
    #[arg(long, value_name = "N", default_value = "2")]
    rewarm: usize,
    /// Also write the figures as JSON to PATH
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
    /// Give up (exit 3) if the whole run takes longer, e.g. a platform that never completes a command (0: never)
    #[arg(long = "timeout", value_name = "SECS", default_value = "900")]
    timeout_s: u64,
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("not a positive number: {s}")),
    }
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
type SetKernelArg = unsafe extern "C" fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int;
type EnqueueCopyBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type EnqueueMapBuffer = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    cl_bool,
    cl_map_flags,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
    *mut cl_int,
) -> *mut c_void;
type EnqueueUnmapMemObject = unsafe extern "C" fn(
    cl_command_queue,
    cl_mem,
    *mut c_void,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type CreateBuffer =
    unsafe extern "C" fn(cl_context, cl_mem_flags, usize, *mut c_void, *mut cl_int) -> cl_mem;
type ReleaseMemObject = unsafe extern "C" fn(cl_mem) -> cl_int;
type EnqueueMarkerWithWaitList =
    unsafe extern "C" fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
type WaitForEvents = unsafe extern "C" fn(cl_uint, *const cl_event) -> cl_int;
type ReleaseEvent = unsafe extern "C" fn(cl_event) -> cl_int;
type GetDeviceInfo =
    unsafe extern "C" fn(cl_device_id, cl_device_info, usize, *mut c_void, *mut usize) -> cl_int;
type GetMemObjectInfo =
    unsafe extern "C" fn(cl_mem, cl_mem_info, usize, *mut c_void, *mut usize) -> cl_int;
type GetEventInfo =
    unsafe extern "C" fn(cl_event, cl_event_info, usize, *mut c_void, *mut usize) -> cl_int;

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
    set_kernel_arg: SetKernelArg,
    enqueue_copy_buffer: EnqueueCopyBuffer,
    enqueue_map_buffer: EnqueueMapBuffer,
    enqueue_unmap_mem_object: EnqueueUnmapMemObject,
    create_buffer: CreateBuffer,
    release_mem_object: ReleaseMemObject,
    enqueue_marker_with_wait_list: EnqueueMarkerWithWaitList,
    wait_for_events: WaitForEvents,
    release_event: ReleaseEvent,
    get_device_info: GetDeviceInfo,
    get_mem_object_info: GetMemObjectInfo,
    /// Self-check only (a marker's status).
    get_event_info: GetEventInfo,
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
        // signatures declared above (each symbol is transmuted to the type
        // of the field it fills).
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
                set_kernel_arg: std::mem::transmute::<*mut c_void, SetKernelArg>(sym(
                    "clSetKernelArg",
                )?),
                enqueue_copy_buffer: std::mem::transmute::<*mut c_void, EnqueueCopyBuffer>(sym(
                    "clEnqueueCopyBuffer",
                )?),
                enqueue_map_buffer: std::mem::transmute::<*mut c_void, EnqueueMapBuffer>(sym(
                    "clEnqueueMapBuffer",
                )?),
                enqueue_unmap_mem_object: std::mem::transmute::<*mut c_void, EnqueueUnmapMemObject>(
                    sym("clEnqueueUnmapMemObject")?,
                ),
                create_buffer: std::mem::transmute::<*mut c_void, CreateBuffer>(sym(
                    "clCreateBuffer",
                )?),
                release_mem_object: std::mem::transmute::<*mut c_void, ReleaseMemObject>(sym(
                    "clReleaseMemObject",
                )?),
                enqueue_marker_with_wait_list: std::mem::transmute::<
                    *mut c_void,
                    EnqueueMarkerWithWaitList,
                >(sym(
                    "clEnqueueMarkerWithWaitList",
                )?),
                wait_for_events: std::mem::transmute::<*mut c_void, WaitForEvents>(sym(
                    "clWaitForEvents",
                )?),
                release_event: std::mem::transmute::<*mut c_void, ReleaseEvent>(sym(
                    "clReleaseEvent",
                )?),
                get_device_info: std::mem::transmute::<*mut c_void, GetDeviceInfo>(sym(
                    "clGetDeviceInfo",
                )?),
                get_mem_object_info: std::mem::transmute::<*mut c_void, GetMemObjectInfo>(sym(
                    "clGetMemObjectInfo",
                )?),
                get_event_info: std::mem::transmute::<*mut c_void, GetEventInfo>(sym(
                    "clGetEventInfo",
                )?),
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
    /// µs per clSetKernelArg (one int), averaged over CALLS_PER_SAMPLE calls.
    set_arg: Vec<f64>,
    /// µs per 16-byte clEnqueueCopyBuffer + clFinish.
    copy: Vec<f64>,
    /// µs per blocking 16-byte map (read|write) + unmap + clFinish.
    map: Vec<f64>,
    /// µs per clCreateBuffer (4 KiB) + clReleaseMemObject.
    create: Vec<f64>,
    /// µs per marker + clWaitForEvents + clReleaseEvent.
    marker: Vec<f64>,
    /// µs per clGetDeviceInfo(CL_DEVICE_NAME), averaged as set_arg.
    device_info: Vec<f64>,
    /// µs per clGetMemObjectInfo(CL_MEM_SIZE), averaged as set_arg.
    mem_info: Vec<f64>,
}

struct Target {
    label: &'static str,
    platform_name: String,
    platform_version: String,
    platform_vendor: String,
    device_name: String,
    device_version: String,
    driver_version: String,
    device_id: cl_device_id,
    /// Bytes clGetDeviceInfo(CL_DEVICE_NAME) returns (with the NUL).
    device_name_size: usize,
    // Field order is drop order: queue objects before the context.
    kernel: Kernel,
    /// `s`: argument 0 is `buffer2`; the measured clSetKernelArg sets 1.
    setarg_kernel: Kernel,
    _program: Program,
    buffer: Buffer<u8>,
    /// Destination of the copy, and the buffer that is mapped.
    buffer2: Buffer<u8>,
    queue: CommandQueue,
    context: Context,
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
        let setarg_kernel = Kernel::create(&program, "s").map_err(ctx("clCreateKernel"))?;
        // SAFETY: no host pointer.
        let buffer = unsafe {
            Buffer::<u8>::create(&context, CL_MEM_READ_WRITE, XFER_BYTES, ptr::null_mut())
        }
        .map_err(ctx("clCreateBuffer"))?;
        // SAFETY: no host pointer.
        let buffer2 = unsafe {
            Buffer::<u8>::create(&context, CL_MEM_READ_WRITE, XFER_BYTES, ptr::null_mut())
        }
        .map_err(ctx("clCreateBuffer"))?;
        let mem = buffer.get();
        // SAFETY: argument 0 is a __global pointer; a cl_mem is passed.
        unsafe { kernel.set_arg(0, &mem) }.map_err(ctx("clSetKernelArg"))?;
        let mem2 = buffer2.get();
        // SAFETY: argument 0 of `s` is a __global pointer; a cl_mem is passed.
        unsafe { setarg_kernel.set_arg(0, &mem2) }.map_err(ctx("clSetKernelArg"))?;
        let initial: cl_int = 0;
        // SAFETY: argument 1 of `s` is an int; an int is passed.
        unsafe { setarg_kernel.set_arg(1, &initial) }.map_err(ctx("clSetKernelArg"))?;
        let mut device_name_size = 0usize;
        // SAFETY: a size query (no value pointer) on a valid device.
        let status = unsafe {
            (api.get_device_info)(
                device_id,
                CL_DEVICE_NAME,
                0,
                ptr::null_mut(),
                &mut device_name_size,
            )
        };
        check(status, "clGetDeviceInfo(CL_DEVICE_NAME, size)")
            .map_err(|e| format!("{platform_name}: {e}"))?;

        let target = Self {
            label,
            platform_version: info(platform.version()),
            platform_vendor: info(platform.vendor()),
            device_name: info(device.name()),
            device_version: info(device.version()),
            driver_version: info(device.driver_version()),
            platform_name,
            device_id,
            device_name_size,
            kernel,
            setarg_kernel,
            _program: program,
            buffer,
            buffer2,
            queue,
            context,
            samples: Samples::default(),
        };
        target
            .self_check(api)
            .map_err(|e| format!("{}: self-check: {e}", target.platform_name))?;
        Ok(target)
    }

    /// Every measured operation once, with its result checked, so that a
    /// platform that "works" only by doing nothing does not get measured:
    /// a write read back (with a kernel in between), a copy read back, a map
    /// that sees the copied bytes and whose writes an unmap publishes, a
    /// scalar argument that kernel `s` writes out, a new buffer's size, the
    /// measured buffer's size, a marker's status and the device's name.
    /// Errors name the check; the caller adds the platform.
    fn self_check(&self, api: &Api) -> Result<(), String> {
        // Write, kernel, read back.
        let mut data: [u8; XFER_BYTES] = std::array::from_fn(|i| (i as u8) * 7 + 3);
        let mut back = [0u8; XFER_BYTES];
        self.write(api, &mut data)?;
        self.kernel_round_trip(api)?;
        self.read(api, &mut back)?;
        if back != data {
            return Err(format!("read back {back:?} after writing {data:?}"));
        }
        // Copy buffer -> buffer2, read buffer2 back.
        self.copy_round_trip(api)?;
        let mut back2 = [0u8; XFER_BYTES];
        self.read_mem(api, self.buffer2.get(), &mut back2)?;
        if back2 != data {
            return Err(format!(
                "clEnqueueCopyBuffer: read back {back2:?} from the copy of {data:?}"
            ));
        }
        // Map buffer2: it holds the copy; write through the mapping, unmap,
        // read back.
        let flipped: [u8; XFER_BYTES] = std::array::from_fn(|i| 0xF0 ^ (i as u8));
        let p = self.map(api)?;
        // SAFETY: `p` maps XFER_BYTES of buffer2 for reading and writing
        // (blocking map: the bytes are there), until the unmap below.
        let mapped = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), XFER_BYTES) };
        if *mapped != data {
            let seen = mapped.to_vec();
            self.unmap(api, p)?;
            self.finish(api)?;
            return Err(format!(
                "clEnqueueMapBuffer: mapping shows {seen:?}, the buffer holds {data:?}"
            ));
        }
        mapped.copy_from_slice(&flipped);
        self.unmap(api, p)?;
        self.finish(api)?;
        self.read_mem(api, self.buffer2.get(), &mut back2)?;
        if back2 != flipped {
            return Err(format!(
                "clEnqueueUnmapMemObject: read back {back2:?} after writing {flipped:?} through the mapping"
            ));
        }
        // Scalar argument: `s` writes it to buffer2[0..4].
        let value: cl_int = 0x5EED_C0DE;
        self.set_scalar_arg(api, value)?;
        self.enqueue_setarg_kernel(api)?;
        self.finish(api)?;
        self.read_mem(api, self.buffer2.get(), &mut back2)?;
        let got = cl_int::from_ne_bytes([back2[0], back2[1], back2[2], back2[3]]);
        if got != value {
            return Err(format!(
                "clSetKernelArg: kernel wrote {got:#x}, the argument was {value:#x}"
            ));
        }
        // A new buffer has the size asked for.
        let mem = self.create_buffer(api)?;
        let size = self.mem_size(api, mem);
        let released = self.release_mem(api, mem);
        let size = size?;
        released?;
        if size != CREATE_BYTES {
            return Err(format!(
                "clGetMemObjectInfo(CL_MEM_SIZE) of a new {CREATE_BYTES}-byte buffer: {size}"
            ));
        }
        // The measured query.
        let size = self.mem_size(api, self.buffer.get())?;
        if size != XFER_BYTES {
            return Err(format!(
                "clGetMemObjectInfo(CL_MEM_SIZE) of the {XFER_BYTES}-byte buffer: {size}"
            ));
        }
        // A marker is complete once waited for.
        let ev = self.enqueue_marker(api)?;
        let waited = self.wait(api, ev);
        let mut status: cl_int = -1;
        // SAFETY: a valid event (released below), an int-sized output.
        let queried = check(
            unsafe {
                (api.get_event_info)(
                    ev,
                    CL_EVENT_COMMAND_EXECUTION_STATUS,
                    std::mem::size_of::<cl_int>(),
                    ptr::from_mut(&mut status).cast(),
                    ptr::null_mut(),
                )
            },
            "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
        );
        let released = self.release_event(api, ev);
        waited?;
        queried?;
        released?;
        if status != CL_COMPLETE {
            return Err(format!(
                "marker status {status} after clWaitForEvents (expected CL_COMPLETE)"
            ));
        }
        // The device's name, as clGetDeviceInfo returns it to the timed loop.
        let mut name = vec![0u8; self.device_name_size];
        self.device_name_query(api, &mut name)?;
        let name = String::from_utf8_lossy(&name);
        let name = name.trim_end_matches('\0').trim();
        if name != self.device_name {
            return Err(format!(
                "clGetDeviceInfo(CL_DEVICE_NAME): \"{name}\", opencl3 says \"{}\"",
                self.device_name
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
        // SAFETY: blocking write of XFER_BYTES (the buffer's size) from a
        // live host array.
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
        self.read_mem(api, self.buffer.get(), data)
    }

    /// Blocking read of `mem` (one of this target's XFER_BYTES buffers).
    fn read_mem(&self, api: &Api, mem: cl_mem, data: &mut [u8; XFER_BYTES]) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: blocking read of XFER_BYTES (the size of `mem`, a buffer of
        // this target's context) into a live host array.
        let status = unsafe {
            (api.enqueue_read_buffer)(
                self.queue.get(),
                mem,
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

    // --- kernel: clSetKernelArg

    fn set_scalar_arg(&self, api: &Api, value: cl_int) -> Result<(), String> {
        // SAFETY: argument 1 of `s` is an int; a live int of that size is
        // passed (the implementation copies it).
        let status = unsafe {
            (api.set_kernel_arg)(
                self.setarg_kernel.get(),
                1,
                std::mem::size_of::<cl_int>(),
                ptr::from_ref(&value).cast(),
            )
        };
        check(status, "clSetKernelArg")
    }

    /// `calls` clSetKernelArg calls with different values; µs per call.
    fn set_arg_calls(&self, api: &Api, calls: usize) -> Result<f64, String> {
        let t = Instant::now();
        for i in 0..calls {
            self.set_scalar_arg(api, i as cl_int)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    }

    /// Self-check only: runs `s` once (global size 1).
    fn enqueue_setarg_kernel(&self, api: &Api) -> Result<(), String> {
        let global = [1usize];
        // SAFETY: valid queue/kernel with both arguments set; no events.
        let status = unsafe {
            (api.enqueue_nd_range_kernel)(
                self.queue.get(),
                self.setarg_kernel.get(),
                1,
                ptr::null(),
                global.as_ptr(),
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueNDRangeKernel(s)")
    }

    // --- transfer: copy, map

    /// 16-byte clEnqueueCopyBuffer buffer -> buffer2 + clFinish.
    fn copy_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: two distinct XFER_BYTES buffers of this queue's context,
        // whole-buffer copy; no events.
        let status = unsafe {
            (api.enqueue_copy_buffer)(
                self.queue.get(),
                self.buffer.get(),
                self.buffer2.get(),
                0,
                0,
                XFER_BYTES,
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueCopyBuffer")?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    /// Blocking read|write map of all of buffer2; the caller unmaps.
    fn map(&self, api: &Api) -> Result<*mut c_void, String> {
        let mut status: cl_int = CL_SUCCESS;
        // SAFETY: valid queue and buffer, the whole buffer; no events; the
        // status goes to a live int.
        let p = unsafe {
            (api.enqueue_map_buffer)(
                self.queue.get(),
                self.buffer2.get(),
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                XFER_BYTES,
                0,
                ptr::null(),
                ptr::null_mut(),
                &mut status,
            )
        };
        check(status, "clEnqueueMapBuffer")?;
        if p.is_null() {
            return Err("clEnqueueMapBuffer returned CL_SUCCESS and a null pointer".into());
        }
        Ok(p)
    }

    fn unmap(&self, api: &Api, p: *mut c_void) -> Result<(), String> {
        // SAFETY: `p` is a live mapping of buffer2 from `map`; no events.
        let status = unsafe {
            (api.enqueue_unmap_mem_object)(
                self.queue.get(),
                self.buffer2.get(),
                p,
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(status, "clEnqueueUnmapMemObject")
    }

    /// Blocking map + unmap + clFinish.
    fn map_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let p = self.map(api)?;
        self.unmap(api, p)?;
        self.finish(api)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    // --- memory objects

    fn create_buffer(&self, api: &Api) -> Result<cl_mem, String> {
        let mut status: cl_int = CL_SUCCESS;
        // SAFETY: a valid context, no host pointer; the status goes to a
        // live int.
        let mem = unsafe {
            (api.create_buffer)(
                self.context.get(),
                CL_MEM_READ_WRITE,
                CREATE_BYTES,
                ptr::null_mut(),
                &mut status,
            )
        };
        check(status, "clCreateBuffer")?;
        if mem.is_null() {
            return Err("clCreateBuffer returned CL_SUCCESS and a null buffer".into());
        }
        Ok(mem)
    }

    fn release_mem(&self, api: &Api, mem: cl_mem) -> Result<(), String> {
        // SAFETY: `mem` came from create_buffer and is released once.
        check(
            unsafe { (api.release_mem_object)(mem) },
            "clReleaseMemObject",
        )
    }

    /// clCreateBuffer (4 KiB) + clReleaseMemObject.
    fn create_release(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let mem = self.create_buffer(api)?;
        self.release_mem(api, mem)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    // --- synchronisation

    fn enqueue_marker(&self, api: &Api) -> Result<cl_event, String> {
        let mut ev: cl_event = ptr::null_mut();
        // SAFETY: valid queue, empty wait list, the event goes to a live
        // handle.
        let status = unsafe {
            (api.enqueue_marker_with_wait_list)(self.queue.get(), 0, ptr::null(), &mut ev)
        };
        check(status, "clEnqueueMarkerWithWaitList")?;
        if ev.is_null() {
            return Err("clEnqueueMarkerWithWaitList returned CL_SUCCESS and no event".into());
        }
        Ok(ev)
    }

    fn wait(&self, api: &Api, ev: cl_event) -> Result<(), String> {
        // SAFETY: one valid event.
        check(unsafe { (api.wait_for_events)(1, &ev) }, "clWaitForEvents")
    }

    fn release_event(&self, api: &Api, ev: cl_event) -> Result<(), String> {
        // SAFETY: `ev` came from enqueue_marker and is released once.
        check(unsafe { (api.release_event)(ev) }, "clReleaseEvent")
    }

    /// Marker + clWaitForEvents + clReleaseEvent.
    fn marker_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let ev = self.enqueue_marker(api)?;
        let waited = self.wait(api, ev);
        // Released even when the wait failed.
        self.release_event(api, ev)?;
        waited?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }

    // --- queries

    /// clGetDeviceInfo(CL_DEVICE_NAME) into `name` (device_name_size bytes).
    fn device_name_query(&self, api: &Api, name: &mut [u8]) -> Result<(), String> {
        let mut size = 0usize;
        // SAFETY: valid device; `name` is a live buffer of the length passed.
        let status = unsafe {
            (api.get_device_info)(
                self.device_id,
                CL_DEVICE_NAME,
                name.len(),
                name.as_mut_ptr().cast(),
                &mut size,
            )
        };
        check(status, "clGetDeviceInfo(CL_DEVICE_NAME)")?;
        if size != self.device_name_size {
            return Err(format!(
                "clGetDeviceInfo(CL_DEVICE_NAME) returned {size} bytes, {} before",
                self.device_name_size
            ));
        }
        Ok(())
    }

    /// `calls` clGetDeviceInfo(CL_DEVICE_NAME); µs per call.
    fn device_info_calls(&self, api: &Api, name: &mut [u8], calls: usize) -> Result<f64, String> {
        let t = Instant::now();
        for _ in 0..calls {
            self.device_name_query(api, name)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    }

    fn mem_size(&self, api: &Api, mem: cl_mem) -> Result<usize, String> {
        let mut size = 0usize;
        // SAFETY: a valid buffer; a live usize-sized output (CL_MEM_SIZE is
        // a size_t).
        let status = unsafe {
            (api.get_mem_object_info)(
                mem,
                CL_MEM_SIZE,
                std::mem::size_of::<usize>(),
                ptr::from_mut(&mut size).cast(),
                ptr::null_mut(),
            )
        };
        check(status, "clGetMemObjectInfo(CL_MEM_SIZE)")?;
        Ok(size)
    }

    /// `calls` clGetMemObjectInfo(CL_MEM_SIZE) on the 16-byte buffer; µs per
    /// call. A wrong size is an error.
    fn mem_info_calls(&self, api: &Api, calls: usize) -> Result<f64, String> {
        let mem = self.buffer.get();
        let t = Instant::now();
        for _ in 0..calls {
            let size = self.mem_size(api, mem)?;
            if size != XFER_BYTES {
                return Err(format!(
                    "clGetMemObjectInfo(CL_MEM_SIZE): {size}, expected {XFER_BYTES}"
                ));
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
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

    /// Untimed iterations of the first phase's figures (the four with
    /// goals).
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

    /// Untimed iterations of the second phase's figures (the other API
    /// families).
    fn warm_up_families(&self, api: &Api, iters: usize) -> Result<(), String> {
        let mut name = vec![0u8; self.device_name_size];
        for _ in 0..iters {
            self.set_arg_calls(api, CALLS_PER_SAMPLE)?;
            self.copy_round_trip(api)?;
            self.map_round_trip(api)?;
            self.create_release(api)?;
            self.marker_round_trip(api)?;
            self.device_info_calls(api, &mut name, CALLS_PER_SAMPLE)?;
            self.mem_info_calls(api, CALLS_PER_SAMPLE)?;
        }
        Ok(())
    }

    /// One measurement block of the first phase: `iters` samples of each
    /// round trip, after `rewarm` untimed ones (the other platform ran since
    /// this one last did).
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

    /// One measurement block of the second phase: `iters` samples of each of
    /// the other families' figures, after `rewarm` untimed ones.
    fn family_block(&mut self, api: &Api, rewarm: usize, iters: usize) -> Result<(), String> {
        self.warm_up_families(api, rewarm)?;
        for _ in 0..iters {
            let us = self.set_arg_calls(api, CALLS_PER_SAMPLE)?;
            self.samples.set_arg.push(us);
        }
        for _ in 0..iters {
            let us = self.copy_round_trip(api)?;
            self.samples.copy.push(us);
        }
        for _ in 0..iters {
            let us = self.map_round_trip(api)?;
            self.samples.map.push(us);
        }
        for _ in 0..iters {
            let us = self.create_release(api)?;
            self.samples.create.push(us);
        }
        for _ in 0..iters {
            let us = self.marker_round_trip(api)?;
            self.samples.marker.push(us);
        }
        let mut name = vec![0u8; self.device_name_size];
        for _ in 0..iters {
            let us = self.device_info_calls(api, &mut name, CALLS_PER_SAMPLE)?;
            self.samples.device_info.push(us);
        }
        for _ in 0..iters {
            let us = self.mem_info_calls(api, CALLS_PER_SAMPLE)?;
            self.samples.mem_info.push(us);
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
    /// Reported, no goal: a part of the figure above it (the burst's
    /// enqueue calls alone); left out of the family summaries.
    Info,
    /// Lower is better; ratio = MirrorCL / native; reported, no goal.
    Cost,
}

impl Kind {
    fn json(self) -> &'static str {
        match self {
            Kind::RoundTrip => "round_trip",
            Kind::Burst => "burst",
            Kind::Info => "info",
            Kind::Cost => "cost",
        }
    }
}

/// The OpenCL API families, in report order.
const FAMILIES: [&str; 5] = [
    "kernel",
    "transfer",
    "memory objects",
    "synchronisation",
    "queries",
];

struct Figure {
    key: &'static str,
    family: &'static str,
    name: String,
    kind: Kind,
    /// Calls timed together per sample (the figure is per call).
    calls_per_sample: usize,
    native: Stat,
    mirror: Option<Stat>,
}

impl Figure {
    fn ratio(&self) -> Option<f64> {
        let m = self.mirror?;
        Some(match self.kind {
            Kind::RoundTrip | Kind::Info | Kind::Cost => m.median / self.native.median,
            Kind::Burst => self.native.median / m.median,
        })
    }
    /// MirrorCL / native median time, whatever the kind (for the burst, the
    /// inverse of its throughput ratio).
    fn time_ratio(&self) -> Option<f64> {
        Some(self.mirror?.median / self.native.median)
    }
    fn goal(&self) -> Option<(&'static str, f64)> {
        match self.kind {
            Kind::RoundTrip => Some(("<=", ROUND_TRIP_GOAL)),
            Kind::Burst => Some((">=", BURST_GOAL)),
            Kind::Info | Kind::Cost => None,
        }
    }
    fn met(&self) -> Option<bool> {
        let r = self.ratio()?;
        match self.kind {
            Kind::RoundTrip => Some(r <= ROUND_TRIP_GOAL),
            Kind::Burst => Some(r >= BURST_GOAL),
            Kind::Info | Kind::Cost => None,
        }
    }
}

/// Picks one figure's samples out of a platform's [`Samples`].
type Pick = fn(&Samples) -> &[f64];

fn figures(native: &Samples, mirror: Option<&Samples>, burst_size: usize) -> Vec<Figure> {
    let one = 1;
    let many = CALLS_PER_SAMPLE;
    let pick: [(&'static str, &'static str, String, Kind, usize, Pick); 12] = [
        (
            "kernel_round_trip",
            "kernel",
            "kernel enqueue + clFinish".into(),
            Kind::RoundTrip,
            one,
            |s| &s.kernel_rt,
        ),
        (
            "burst_per_command",
            "kernel",
            format!("burst of {burst_size}, per command"),
            Kind::Burst,
            one,
            |s| &s.burst,
        ),
        (
            "burst_enqueue_per_call",
            "kernel",
            "  (enqueue call alone)".into(),
            Kind::Info,
            one,
            |s| &s.burst_enqueue,
        ),
        (
            "set_kernel_arg",
            "kernel",
            "clSetKernelArg (int), per call".into(),
            Kind::Cost,
            many,
            |s| &s.set_arg,
        ),
        (
            "write_16b",
            "transfer",
            "16 B blocking write".into(),
            Kind::RoundTrip,
            one,
            |s| &s.write,
        ),
        (
            "read_16b",
            "transfer",
            "16 B blocking read".into(),
            Kind::RoundTrip,
            one,
            |s| &s.read,
        ),
        (
            "copy_16b",
            "transfer",
            "16 B copy + clFinish".into(),
            Kind::Cost,
            one,
            |s| &s.copy,
        ),
        (
            "map_unmap_16b",
            "transfer",
            "16 B blocking map + unmap + clFinish".into(),
            Kind::Cost,
            one,
            |s| &s.map,
        ),
        (
            "create_release_buffer_4k",
            "memory objects",
            "clCreateBuffer 4 KiB + release".into(),
            Kind::Cost,
            one,
            |s| &s.create,
        ),
        (
            "marker_wait_release",
            "synchronisation",
            "marker + clWaitForEvents + release".into(),
            Kind::Cost,
            one,
            |s| &s.marker,
        ),
        (
            "device_info_name",
            "queries",
            "clGetDeviceInfo(NAME), per call".into(),
            Kind::Cost,
            many,
            |s| &s.device_info,
        ),
        (
            "mem_object_info_size",
            "queries",
            "clGetMemObjectInfo(SIZE), per call".into(),
            Kind::Cost,
            many,
            |s| &s.mem_info,
        ),
    ];
    pick.into_iter()
        .map(|(key, family, name, kind, calls_per_sample, f)| Figure {
            key,
            family,
            name,
            kind,
            calls_per_sample,
            native: stat(f(native)),
            mirror: mirror.map(|m| stat(f(m))),
        })
        .collect()
}

/// One family's summary: its figures' keys and the geometric mean of their
/// MirrorCL/native median-time ratios (sub-figures, [`Kind::Info`], left
/// out; the burst counts as its time per command).
struct FamilySummary {
    family: &'static str,
    keys: Vec<&'static str>,
    /// The keys the mean is over.
    mean_keys: Vec<&'static str>,
    time_ratio_geomean: Option<f64>,
}

fn family_summaries(figs: &[Figure]) -> Vec<FamilySummary> {
    FAMILIES
        .iter()
        .map(|&family| {
            let members: Vec<&Figure> = figs.iter().filter(|f| f.family == family).collect();
            let in_mean: Vec<&Figure> = members
                .iter()
                .copied()
                .filter(|f| f.kind != Kind::Info)
                .collect();
            let ratios: Option<Vec<f64>> = in_mean.iter().map(|f| f.time_ratio()).collect();
            let time_ratio_geomean = ratios
                .filter(|r| !r.is_empty())
                .map(|r| (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp());
            FamilySummary {
                family,
                keys: members.iter().map(|f| f.key).collect(),
                mean_keys: in_mean.iter().map(|f| f.key).collect(),
                time_ratio_geomean,
            }
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
        "samples : {} per figure in blocks of {} (+{} untimed), {} bursts of {} per platform, {} warm-up iterations; platforms alternate A/B, B/A per block and per burst{}",
        args.iters,
        args.batch,
        args.rewarm,
        args.bursts,
        args.burst_size,
        args.warmup,
        if args.quick { " (--quick)" } else { "" }
    );
    println!(
        "units   : µs per command; median (p90); \"per call\": {CALLS_PER_SAMPLE} calls timed together"
    );
    println!();
    let dash = "-";
    let fw = FAMILIES
        .iter()
        .map(|f| f.chars().count())
        .max()
        .unwrap_or(6);
    let nw = figs
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(6)
        .max(28);
    println!(
        "{:<fw$} | {:<nw$} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
        "family", "figure", "native µs", "MirrorCL µs", "ratio", "goal", "met?"
    );
    println!("{}", "-".repeat(fw + nw + 20 + 20 + 8 + 7 + 4 + 6 * 3));
    // Two decimals as before; more for sub-µs figures (per-call queries).
    let num = |x: f64| {
        let prec = if x < 0.1 {
            4
        } else if x < 1.0 {
            3
        } else {
            2
        };
        format!("{x:.prec$}")
    };
    let cell = |s: Stat| format!("{} ({})", num(s.median), num(s.p90));
    for f in figs {
        println!(
            "{:<fw$} | {:<nw$} | {:>20} | {:>20} | {:>8} | {:>7} | {:>4}",
            f.family,
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
    println!("ratio: MirrorCL/native median time; for the burst, MirrorCL/native throughput.");
    if mirror.is_some() {
        println!(
            "\nper family, geometric mean of MirrorCL/native median time (burst as time per command; the enqueue-alone line left out):"
        );
        for fam in family_summaries(figs) {
            println!(
                "  {:<fw$} {:>8}  (over {})",
                fam.family,
                fam.time_ratio_geomean
                    .map_or_else(|| dash.to_string(), |r| format!("{r:.3}x")),
                fam.mean_keys.join(", ")
            );
        }
    }
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
