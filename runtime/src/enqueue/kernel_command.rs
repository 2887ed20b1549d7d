//! Step 1, for kernels: `clEnqueueNDRangeKernel` (and `clEnqueueTask`), whose buffer
//! arguments become the command's accesses.

use super::buffer_commands::device_instance;
use super::issue::wait_ptr;
use super::submit::{submit, Command, Work};
use crate::cl::*;
use crate::event::Event;
use crate::kernel::{ArgValue, Kernel, VendorArg};
use crate::queue::Queue;
use crate::vendor::V;
use crate::ClResult;
use mirrorcl_scheduler::Mode;
use std::sync::Arc;

/// `clEnqueueNDRangeKernel` after validation. `args` is the snapshot of the kernel's
/// arguments at enqueue time.
#[allow(clippy::too_many_arguments)]
pub fn ndrange(
    queue: &Arc<Queue>,
    kernel: &Arc<Kernel>,
    command_type: cl_command_type,
    dims: u32,
    offset: Option<[usize; 3]>,
    global: [usize; 3],
    local: Option<[usize; 3]>,
    args: Vec<ArgValue>,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let mut accesses = Vec::new();
    let mut vendor_args = Vec::with_capacity(args.len());
    let mut instance_failure = None;
    for (i, arg) in args.iter().enumerate() {
        vendor_args.push(match arg {
            ArgValue::Mem(Some(b)) => {
                let read_only = b.flags & CL_MEM_READ_ONLY != 0
                    || kernel
                        .arg_info
                        .as_ref()
                        .is_some_and(|info| info[i].read_only);
                accesses.push((
                    b.clone(),
                    0..b.size,
                    if read_only {
                        Mode::Read
                    } else {
                        Mode::ReadWrite
                    },
                ));
                VendorArg::Mem(device_instance(queue, b).unwrap_or_else(|rc| {
                    instance_failure.get_or_insert(rc);
                    V::NULL
                }))
            }
            ArgValue::Mem(None) => VendorArg::Mem(V::NULL),
            ArgValue::Local(n) => VendorArg::Local(*n),
            ArgValue::Bytes(b) => VendorArg::Bytes(b.clone()),
        });
    }
    let k = kernel.clone();
    let device = queue.device.clone();
    submit(
        Command {
            queue: queue.clone(),
            command_type,
            wait_list,
            accesses,
            at_host: false,
            blocking: false,
            fills_host: None,
        },
        Work::Vendor(Box::new(move |q, waits, out| {
            if let Some(rc) = instance_failure {
                return Err(rc);
            }
            let vk = k.apply_args(&device, &vendor_args)?;
            let f = vfn!(q.0, clEnqueueNDRangeKernel)?;
            let off = offset.as_ref().map_or(std::ptr::null(), |o| o.as_ptr());
            let loc = local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr());
            // SAFETY: validated dimensions and sizes; arguments set above.
            crate::check(unsafe {
                f(
                    q.0,
                    vk.0,
                    dims,
                    off,
                    global.as_ptr(),
                    loc,
                    waits.len() as cl_uint,
                    wait_ptr(waits),
                    out,
                )
            })?;
            Ok(())
        })),
    )
}
