//! An `opencl3` client: a Rust OpenCL program as a user would write it, run against
//! MirrorCL through the ICD loader (`tests/tests/opencl3_client.rs` starts it).
//!
//! Across every device of the platform: one context, a queue per device, a saxpy split
//! in slices, a chain of kernels that hands one buffer from device to device through
//! events, a fill, a copy and a map; every result compared bit-exactly with the CPU.
//! Prints `PASS opencl3_client` and exits 0 when every check held.

use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MAP_READ, CL_MEM_COPY_HOST_PTR, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_event, cl_float, cl_uint, CL_BLOCKING, CL_NON_BLOCKING};
use std::ffi::c_void;
use std::ptr;

const SOURCE: &str = r#"
__kernel void saxpy(__global float* y, __global const float* x, float a, uint offset) {
    size_t i = get_global_id(0) + offset;
    y[i] = fma(a, x[i], y[i]);
}
__kernel void bump(__global uint* v, uint by) {
    size_t i = get_global_id(0);
    v[i] = v[i] * 3u + by;
}
"#;

fn fail(msg: String) -> ! {
    eprintln!("FAIL opencl3_client: {msg}");
    std::process::exit(1);
}

fn check<T, E: std::fmt::Debug>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| fail(format!("{what}: {e:?}")))
}

fn main() {
    let platforms = check("clGetPlatformIDs", get_platforms());
    if std::env::var_os("MIRRORCL_EXPECT").is_some() {
        let names: Vec<String> = platforms
            .iter()
            .map(|p| p.name().unwrap_or_default())
            .collect();
        if names != ["MirrorCL"] {
            fail(format!(
                "expected exactly the MirrorCL platform, got {names:?}"
            ));
        }
    }
    let platform = platforms
        .first()
        .unwrap_or_else(|| fail("no platform".into()));
    let ids = check("clGetDeviceIDs", platform.get_devices(CL_DEVICE_TYPE_ALL));
    let devices: Vec<Device> = ids.iter().map(|&d| Device::new(d)).collect();
    if let Ok(want) = std::env::var("CTEST_EXPECT_DEVICES") {
        if want.parse::<usize>().ok() != Some(devices.len()) {
            fail(format!("expected {want} devices, found {}", devices.len()));
        }
    }
    for (i, d) in devices.iter().enumerate() {
        println!("device {i}: {}", d.name().unwrap_or_default());
    }
    let context = check(
        "clCreateContext",
        Context::from_devices(&ids, &[], None, ptr::null_mut()),
    );
    let queues: Vec<CommandQueue> = ids
        .iter()
        .map(|&d| {
            // SAFETY: a valid context and one of its devices.
            check("clCreateCommandQueue", unsafe {
                CommandQueue::create(&context, d, CL_QUEUE_PROFILING_ENABLE)
            })
        })
        .collect();
    let program = Program::create_and_build_from_source(&context, SOURCE, "")
        .unwrap_or_else(|log| fail(format!("build failed: {log}")));
    let saxpy = check("clCreateKernel saxpy", Kernel::create(&program, "saxpy"));
    let bump = check("clCreateKernel bump", Kernel::create(&program, "bump"));

    // saxpy over every device, each on its slice of shared buffers.
    const N: usize = 1 << 16;
    let mut x: Vec<cl_float> = (0..N).map(|i| (i % 97) as f32 * 0.25 - 3.0).collect();
    let mut y: Vec<cl_float> = (0..N).map(|i| (i % 31) as f32 * 1.5 + 0.125).collect();
    let a: cl_float = 1.75;
    let expected: Vec<cl_float> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
    // SAFETY: host pointers of N floats, copied at creation.
    let xb = check("clCreateBuffer x", unsafe {
        Buffer::<cl_float>::create(
            &context,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            N,
            x.as_mut_ptr() as *mut c_void,
        )
    });
    // SAFETY: as above.
    let yb = check("clCreateBuffer y", unsafe {
        Buffer::<cl_float>::create(
            &context,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            N,
            y.as_mut_ptr() as *mut c_void,
        )
    });
    let per = N / devices.len();
    let mut events = Vec::new();
    for (d, q) in queues.iter().enumerate() {
        let offset = (d * per) as cl_uint;
        let count = if d + 1 == devices.len() {
            N - d * per
        } else {
            per
        };
        // SAFETY: arguments match the kernel's signature; sizes within the buffers.
        let ev = check("clEnqueueNDRangeKernel saxpy", unsafe {
            ExecuteKernel::new(&saxpy)
                .set_arg(&yb)
                .set_arg(&xb)
                .set_arg(&a)
                .set_arg(&offset)
                .set_global_work_size(count)
                .enqueue_nd_range(q)
        });
        events.push(ev);
    }
    let waits: Vec<cl_event> = events.iter().map(|e| e.get()).collect();
    let mut got = vec![0f32; N];
    // SAFETY: N floats of host memory; waits are events of this context.
    check("clEnqueueReadBuffer y", unsafe {
        queues[0].enqueue_read_buffer(&yb, CL_BLOCKING, 0, &mut got, &waits)
    });
    if let Some(i) = (0..N).find(|&i| got[i].to_bits() != expected[i].to_bits()) {
        fail(format!("saxpy[{i}] = {} expected {}", got[i], expected[i]));
    }
    for e in &events {
        let start = check("profiling start", e.profiling_command_start());
        let end = check("profiling end", e.profiling_command_end());
        if end < start {
            fail(format!("profiling end {end} before start {start}"));
        }
    }
    println!("saxpy: {N} elements on {} devices ok", devices.len());

    // A chain: one buffer bumped on device 0, 1, 2, 0, ... ordered only by events.
    let mut v: Vec<u32> = (0..N as u32).collect();
    // SAFETY: host pointer of N uints, copied at creation.
    let vb = check("clCreateBuffer v", unsafe {
        Buffer::<u32>::create(
            &context,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            N,
            v.as_mut_ptr() as *mut c_void,
        )
    });
    let rounds = 3 * devices.len() + 1;
    let mut last = None;
    for r in 0..rounds {
        let q = &queues[r % queues.len()];
        let by = r as cl_uint + 1;
        let mut exec = ExecuteKernel::new(&bump);
        // SAFETY: arguments match the kernel's signature.
        unsafe { exec.set_arg(&vb).set_arg(&by) }.set_global_work_size(N);
        if let Some(prev) = &last {
            exec.set_wait_event(prev);
        }
        // SAFETY: arguments set above.
        last = Some(check("clEnqueueNDRangeKernel bump", unsafe {
            exec.enqueue_nd_range(q)
        }));
    }
    for r in 0..rounds {
        for e in v.iter_mut() {
            *e = e.wrapping_mul(3).wrapping_add(r as u32 + 1);
        }
    }
    let last = last.expect("at least one round");
    let last_ev = last.get();
    let mut gotv = vec![0u32; N];
    let reader = &queues[queues.len() - 1];
    // SAFETY: N uints of host memory.
    check("clEnqueueReadBuffer v", unsafe {
        reader.enqueue_read_buffer(&vb, CL_BLOCKING, 0, &mut gotv, &[last_ev])
    });
    if let Some(i) = (0..N).find(|&i| gotv[i] != v[i]) {
        fail(format!("chain[{i}] = {} expected {}", gotv[i], v[i]));
    }
    println!("chain: {rounds} kernels over {} devices ok", devices.len());

    // Fill on the last device, copy on the first, map on the middle one.
    // SAFETY: no host pointer.
    let mut fb = check("clCreateBuffer f", unsafe {
        Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, N, ptr::null_mut())
    });
    // SAFETY: as above.
    let mut cb = check("clCreateBuffer c", unsafe {
        Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, N, ptr::null_mut())
    });
    let pattern = [0xC0FFEEu32];
    // SAFETY: a one-element pattern; the range is the whole buffer.
    let fill = check("clEnqueueFillBuffer", unsafe {
        queues[queues.len() - 1].enqueue_fill_buffer(&mut fb, &pattern, 0, N * 4, &[])
    });
    // SAFETY: same-size buffers, distinct objects.
    let copy = check("clEnqueueCopyBuffer", unsafe {
        queues[0].enqueue_copy_buffer(&fb, &mut cb, 0, 0, N * 4, &[fill.get()])
    });
    let mid = &queues[queues.len() / 2];
    let mut mapped: *mut c_void = ptr::null_mut();
    // SAFETY: a read map of the whole buffer, unmapped below.
    check("clEnqueueMapBuffer", unsafe {
        mid.enqueue_map_buffer(
            &cb,
            CL_BLOCKING,
            CL_MAP_READ,
            0,
            N * 4,
            &mut mapped,
            &[copy.get()],
        )
    });
    // SAFETY: the map returned N uints of readable memory.
    let view = unsafe { std::slice::from_raw_parts(mapped as *const u32, N) };
    if let Some(i) = (0..N).find(|&i| view[i] != pattern[0]) {
        fail(format!(
            "fill+copy[{i}] = {:#x} expected {:#x}",
            view[i], pattern[0]
        ));
    }
    // SAFETY: the pointer returned by the map above.
    let unmap = check("clEnqueueUnmapMemObject", unsafe {
        mid.enqueue_unmap_mem_object(cb.get(), mapped, &[])
    });
    check("clWaitForEvents", unmap.wait());
    // A non-blocking write then a finish on every queue.
    let ones = vec![1u32; N];
    // SAFETY: N uints of host memory kept alive until the finish below.
    check("clEnqueueWriteBuffer", unsafe {
        queues[0].enqueue_write_buffer(&mut cb, CL_NON_BLOCKING, 0, &ones, &[])
    });
    for q in &queues {
        check("clFinish", q.finish());
    }
    let mut back = vec![0u32; N];
    // SAFETY: N uints of host memory.
    check("clEnqueueReadBuffer c", unsafe {
        queues[queues.len() - 1].enqueue_read_buffer(&cb, CL_BLOCKING, 0, &mut back, &[])
    });
    if back != ones {
        fail("write then read on another device differs".into());
    }
    println!("fill, copy, map, write: ok");
    println!("PASS opencl3_client");
}
