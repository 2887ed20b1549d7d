//! One platform under test: its first device's context, in-order queue,
//! program, kernels and buffers, set up through `opencl3`; the check of every
//! measured operation's result, before and after measuring; and the samples.
//! The measured operations are in one module per API family (kernel, transfer,
//! memory, sync, queries).

use std::ptr;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_NAME, CL_DEVICE_TYPE_ALL};
use opencl3::event::{CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::Platform;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, cl_int};

use crate::api::{check, Api};
use crate::{CREATE_BYTES, KERNEL_SRC, XFER_BYTES};

#[derive(Default)]
pub struct Samples {
    /// µs per kernel enqueue + clFinish.
    pub kernel_rt: Vec<f64>,
    /// µs per blocking 16-byte write.
    pub write: Vec<f64>,
    /// µs per blocking 16-byte read.
    pub read: Vec<f64>,
    /// µs per command over a whole burst (enqueues + final clFinish).
    pub burst: Vec<f64>,
    /// µs per command for the enqueue calls alone (before the clFinish).
    pub burst_enqueue: Vec<f64>,
    /// µs per clSetKernelArg (one int), averaged over CALLS_PER_SAMPLE calls.
    pub set_arg: Vec<f64>,
    /// µs per 16-byte clEnqueueCopyBuffer + clFinish.
    pub copy: Vec<f64>,
    /// µs per blocking 16-byte map (read|write) + unmap + clFinish.
    pub map: Vec<f64>,
    /// µs per clCreateBuffer (4 KiB) + clReleaseMemObject.
    pub create: Vec<f64>,
    /// µs per marker + clWaitForEvents + clReleaseEvent.
    pub marker: Vec<f64>,
    /// µs per clGetDeviceInfo(CL_DEVICE_NAME), averaged as set_arg.
    pub device_info: Vec<f64>,
    /// µs per clGetMemObjectInfo(CL_MEM_SIZE), averaged as set_arg.
    pub mem_info: Vec<f64>,
}

pub struct Target {
    pub label: &'static str,
    pub platform_name: String,
    pub platform_version: String,
    pub platform_vendor: String,
    pub device_name: String,
    pub device_version: String,
    pub driver_version: String,
    pub device_id: cl_device_id,
    /// Bytes clGetDeviceInfo(CL_DEVICE_NAME) returns (with the NUL).
    pub device_name_size: usize,
    // Field order is drop order: queue objects before the context.
    pub kernel: Kernel,
    /// `s`: argument 0 is `buffer2`; the measured clSetKernelArg sets 1.
    pub setarg_kernel: Kernel,
    _program: Program,
    pub buffer: Buffer<u8>,
    /// Destination of the copy, and the buffer that is mapped.
    pub buffer2: Buffer<u8>,
    pub queue: CommandQueue,
    pub context: Context,
    pub samples: Samples,
}

pub fn info<E: std::fmt::Display>(r: Result<String, E>) -> String {
    match r {
        Ok(s) => s.trim_end_matches('\0').trim().to_string(),
        Err(e) => format!("<{e}>"),
    }
}

impl Target {
    pub fn new(label: &'static str, platform: &Platform, api: &Api) -> Result<Self, String> {
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
    pub fn self_check(&self, api: &Api) -> Result<(), String> {
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

    pub fn finish(&self, api: &Api) -> Result<(), String> {
        // SAFETY: valid queue.
        check(unsafe { (api.finish)(self.queue.get()) }, "clFinish")
    }
}
