//! Events.

use super::*;

reference_counted!(
    /// A vendor event.
    VEvent,
    clRetainEvent,
    clReleaseEvent
);

/// What a vendor calls when an event completes.
pub type EventNotify = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

impl VEvent {
    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`.
    pub fn status(&self) -> ClResult<cl_int> {
        let f = entry!(self, clGetEventInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe {
            f(
                self.raw(),
                CL_EVENT_COMMAND_EXECUTION_STATUS,
                size,
                value,
                ret,
            )
        })
    }

    /// Blocks in the vendor until the event is done.
    pub fn wait(&self) -> ClResult<()> {
        let f = entry!(self, clWaitForEvents)?;
        let raw = self.raw();
        // SAFETY: one live event.
        crate::check(unsafe { f(1, &raw) })
    }

    pub fn profiling_info(&self, param: cl_profiling_info) -> ClResult<cl_ulong> {
        let f = entry!(self, clGetEventProfilingInfo)?;
        // SAFETY: an out-pointer of the answer's size.
        query_value(|size, value, ret| unsafe { f(self.raw(), param, size, value, ret) })
    }

    /// Asks the vendor to call `notify(…, data)` once the event completes.
    ///
    /// # Safety
    /// `data` stays valid until `notify` runs, and `notify` may run on any thread.
    pub unsafe fn on_complete(&self, notify: EventNotify, data: *mut c_void) -> ClResult<()> {
        let f = entry!(self, clSetEventCallback)?;
        // SAFETY: a live event; `data` per the contract.
        crate::check(unsafe { f(self.raw(), CL_COMPLETE, Some(notify), data) })
    }

    /// Completes a user event.
    pub fn set_user_status(&self, status: cl_int) -> ClResult<()> {
        let f = entry!(self, clSetUserEventStatus)?;
        // SAFETY: a live user event.
        crate::check(unsafe { f(self.raw(), status) })
    }
}
