//! Step 1, for commands on the host copy or on the queue's order alone: maps, unmaps,
//! markers and barriers, migrations (whose transfers are the steps the scheduler plans;
//! on a device what remains is a vendor marker).

use super::buffer_commands::{device_instance, finish_blocking};
use super::submit::{submit, Command, Work};
use crate::cl::*;
use crate::objects::event::Event;
use crate::objects::memory::{Buffer, Mapping};
use crate::objects::queue::Queue;
use crate::ClResult;
use mirrorcl_scheduler::Mode;
use std::ffi::c_void;
use std::sync::Arc;

/// `clEnqueueMapBuffer`: the mapped memory is the buffer's host copy (the application's
/// own memory for `CL_MEM_USE_HOST_PTR`), made current unless the map invalidates it.
pub fn map_buffer(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    blocking: bool,
    flags: cl_map_flags,
    offset: usize,
    size: usize,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<(Arc<Event>, *mut c_void)> {
    // Without a host copy the command is still submitted, as on every other rank, and
    // fails (its transfer step fails where the copy is needed), so that every rank sees
    // the same commands and the same failure.
    let host = buffer.host_copy();
    let invalidate = flags & CL_MAP_WRITE_INVALIDATE_REGION != 0;
    let writes = invalidate || flags & CL_MAP_WRITE != 0;
    let event = submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_MAP_BUFFER,
            wait_list,
            accesses: vec![(
                buffer.clone(),
                offset..offset + size,
                if invalidate { Mode::Write } else { Mode::Read },
            )],
            at_host: true,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Host,
    )?;
    let host = match host {
        Ok(host) => host,
        Err(rc) => {
            let status = event.wait();
            return Err(if status < 0 { status } else { rc });
        }
    };
    // SAFETY: offset+size is inside the root buffer, whose host copy has its size.
    let ptr = unsafe { host.add(buffer.origin + offset) } as *mut c_void;
    buffer.add_mapping(Mapping {
        ptr: ptr as usize,
        offset,
        size,
        writes,
    });
    finish_blocking(&event, blocking)?;
    Ok((event, ptr))
}

/// `clEnqueueUnmapMemObject` for a mapping found by the caller.
pub fn unmap(
    queue: &Arc<Queue>,
    buffer: &Arc<Buffer>,
    mapping: Mapping,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    buffer
        .map_count
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    let range = mapping.offset..mapping.offset + mapping.size;
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_UNMAP_MEM_OBJECT,
            wait_list,
            // The host wrote the mapped bytes in place: the host copy is now the newest.
            accesses: if mapping.writes {
                vec![(buffer.clone(), range, Mode::Write)]
            } else {
                Vec::new()
            },
            at_host: true,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        Work::Host,
    )
}

/// `clEnqueueMarkerWithWaitList` / `clEnqueueBarrierWithWaitList`: completes after the
/// listed events, or after every earlier command of the queue when the list is empty.
pub fn marker(
    queue: &Arc<Queue>,
    command_type: cl_command_type,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let waits_on_queue = wait_list.is_empty();
    let deps = if waits_on_queue {
        queue.pending()
    } else {
        wait_list
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type,
            wait_list: deps,
            accesses: Vec::new(),
            at_host: true,
            blocking: false,
            fills_host: None,
            waits_on_queue,
            unseen: false,
        },
        Work::Host,
    )
}

pub fn migrate(
    queue: &Arc<Queue>,
    buffers: Vec<Arc<Buffer>>,
    flags: cl_mem_migration_flags,
    wait_list: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let to_host = flags & CL_MIGRATE_MEM_OBJECT_HOST != 0;
    let mode = if flags & CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED != 0 {
        Mode::Write
    } else {
        Mode::Read
    };
    let instances: ClResult<()> = if to_host {
        Ok(())
    } else {
        buffers
            .iter()
            .try_for_each(|b| device_instance(queue, b).map(|_| ()))
    };
    // The transfers the scheduler plans are the migration; what remains on the device
    // is a marker that orders the queue.
    let work = if to_host {
        Work::Host
    } else {
        Work::Vendor(Box::new(move |q, waits, want| {
            instances?;
            q.marker(waits, want)
        }))
    };
    submit(
        Command {
            queue: queue.clone(),
            command_type: CL_COMMAND_MIGRATE_MEM_OBJECTS,
            wait_list,
            accesses: buffers
                .iter()
                .map(|b| (b.clone(), 0..b.size, mode))
                .collect(),
            at_host: to_host,
            blocking: false,
            fills_host: None,
            waits_on_queue: false,
            unseen: false,
        },
        work,
    )
}
