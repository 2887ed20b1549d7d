//! Event entry points.

use crate::info::{array, Info, InfoQuery};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::context::Context;
use mirrorcl_runtime::objects::event::{self, Event};
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

entry! {
    fn clWaitForEvents(num_events: cl_uint, event_list: *const cl_event) -> cl_int {
        if num_events == 0 || event_list.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        let events = array(event_list, num_events as usize)
            .iter()
            .map(|&e| Event::from_handle(e))
            .collect::<Result<Vec<_>, _>>()?;
        // CL_INVALID_CONTEXT if events in event_list do not belong to the same context.
        if events
            .iter()
            .any(|e| !Arc::ptr_eq(&e.context, &events[0].context))
        {
            return Err(CL_INVALID_CONTEXT);
        }
        mirrorcl_runtime::cluster::verify::check("clWaitForEvents");
        event::wait_all(&events)
    }
}

pub(crate) struct EventInfo;

impl InfoQuery for EventInfo {
    type Handles = (cl_event,);
    type Object = Arc<Event>;
    #[inline]
    fn object((ev,): (cl_event,)) -> ClResult<Arc<Event>> {
        Event::from_handle(ev)
    }
    #[inline]
    fn answer(e: &Arc<Event>, param: cl_event_info) -> ClResult<Info> {
        Ok(match param {
            CL_EVENT_COMMAND_QUEUE => {
                Info::value::<cl_command_queue>(e.queue_handle as cl_command_queue)
            }
            CL_EVENT_CONTEXT => Info::value(e.context.handle()),
            CL_EVENT_COMMAND_TYPE => Info::value::<cl_command_type>(e.command_type),
            CL_EVENT_COMMAND_EXECUTION_STATUS => Info::value::<cl_int>(event::polled_status(e)),
            CL_EVENT_REFERENCE_COUNT => Info::value::<cl_uint>(e.header().count()),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetEventInfo(ev: cl_event; cl_event_info) => EventInfo;
}

entry! {
    fn clCreateUserEvent(context: cl_context) -> cl_event, errcode_ret {
        let ctx = Context::from_handle(context)?;
        Ok(Event::into_handle(event::user_event(ctx)))
    }
}

entry! {
    fn clSetUserEventStatus(ev: cl_event, execution_status: cl_int) -> cl_int {
        event::set_user_status(&Event::from_handle(ev)?, execution_status)
    }
}

entry! {
    fn clRetainEvent(ev: cl_event) -> cl_int {
        Event::retain_handle(ev)
    }
}

entry! {
    fn clReleaseEvent(ev: cl_event) -> cl_int {
        Event::release_handle(ev).map(|_| ())
    }
}

entry! {
    fn clSetEventCallback(
        ev: cl_event,
        command_exec_callback_type: cl_int,
        pfn_notify: Option<unsafe extern "C" fn(cl_event, cl_int, *mut c_void)>,
        user_data: *mut c_void,
    ) -> cl_int {
        let e = Event::from_handle(ev)?;
        let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
        if !matches!(
            command_exec_callback_type,
            CL_SUBMITTED | CL_RUNNING | CL_COMPLETE
        ) {
            return Err(CL_INVALID_VALUE);
        }
        e.add_user_callback(command_exec_callback_type, f, user_data);
        Ok(())
    }
}

pub(crate) struct EventProfilingInfo;

impl InfoQuery for EventProfilingInfo {
    type Handles = (cl_event,);
    type Object = Arc<Event>;
    #[inline]
    fn object((ev,): (cl_event,)) -> ClResult<Arc<Event>> {
        Event::from_handle(ev)
    }
    #[inline]
    fn answer(e: &Arc<Event>, param: cl_profiling_info) -> ClResult<Info> {
        e.profiling_info(param).map(Info::value::<cl_ulong>)
    }
}

entry! {
    info fn clGetEventProfilingInfo(ev: cl_event; cl_profiling_info) => EventProfilingInfo;
}
