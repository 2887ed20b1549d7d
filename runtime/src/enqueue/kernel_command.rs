//! Step 1, for kernels: `clEnqueueNDRangeKernel` (and `clEnqueueTask`), whose buffer
//! arguments become the command's accesses.

use super::buffer_commands::device_instance;
use super::submit::{submit, Command, Work};
use crate::cl::*;
use crate::objects::event::Event;
use crate::objects::kernel::{ArgValue, Kernel, VendorArg};
use crate::objects::queue::Queue;
use crate::ClResult;
use mirrorcl_scheduler::Mode;
use std::sync::Arc;

/// `clEnqueueNDRangeKernel` after validation. `args` is the snapshot of the kernel's
/// arguments at enqueue time; `unseen`: the application asked for no event.
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
    unseen: bool,
) -> ClResult<Arc<Event>> {
    let mut accesses = Vec::with_capacity(args.len());
    // Only this rank's devices run it: elsewhere the accesses alone matter.
    let runs_here = queue.device.local();
    let mut vendor_args = Vec::with_capacity(if runs_here { args.len() } else { 0 });
    let mut instance_failure = None;
    // The snapshot's references move into the accesses and vendor arguments (a clone
    // and a drop are an atomic operation each).
    for (i, arg) in args.into_iter().enumerate() {
        let vendor_arg = match arg {
            ArgValue::Mem(Some(b)) => {
                let vendor_arg = runs_here.then(|| match device_instance(queue, &b) {
                    Ok(m) => VendorArg::Mem(Some(m)),
                    Err(rc) => {
                        instance_failure.get_or_insert(rc);
                        VendorArg::Mem(None)
                    }
                });
                let mode = buffer_mode(kernel, &b, i);
                let size = b.size;
                accesses.push((b, 0..size, mode));
                vendor_arg
            }
            // Never set elsewhere: the command does not run there.
            _ if !runs_here => None,
            ArgValue::Mem(None) => Some(VendorArg::Mem(None)),
            ArgValue::Sampler(s) => Some(match s.instance(&queue.device) {
                Ok(v) => VendorArg::Sampler(v),
                Err(rc) => {
                    instance_failure.get_or_insert(rc);
                    VendorArg::Mem(None)
                }
            }),
            ArgValue::Local(n) => Some(VendorArg::Local(n)),
            ArgValue::Bytes(b) => Some(VendorArg::Bytes(b)),
        };
        vendor_args.extend(vendor_arg);
    }
    let k = kernel.clone();
    let device = queue.device.index;
    submit(
        Command {
            queue: queue.clone(),
            command_type,
            wait_list,
            accesses,
            at_host: false,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen,
        },
        Work::Vendor(Box::new(move |q, waits, want| {
            if let Some(rc) = instance_failure {
                return Err(rc);
            }
            let vk = k.apply_args(device, &vendor_args)?;
            let dims = dims as usize;
            q.ndrange(
                vk,
                offset.as_ref().map(|o| &o[..dims]),
                &global[..dims],
                local.as_ref().map(|l| &l[..dims]),
                waits,
                want,
            )
        })),
    )
}

/// How a kernel uses buffer argument `i`, `b`: read only where the buffer or the
/// argument says so.
fn buffer_mode(kernel: &Kernel, b: &crate::objects::memory::Buffer, i: usize) -> Mode {
    let read_only = b.flags & CL_MEM_READ_ONLY != 0
        || (kernel.arg_info.as_ref()).is_some_and(|info| info[i].read_only);
    if read_only {
        Mode::Read
    } else {
        Mode::ReadWrite
    }
}
