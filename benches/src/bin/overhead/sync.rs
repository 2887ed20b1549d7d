//! The synchronisation family's measured operation:
//! `clEnqueueMarkerWithWaitList` + `clWaitForEvents` + `clReleaseEvent`.

use std::ptr;
use std::time::Instant;

use opencl3::types::cl_event;

use crate::api::{check, Api};
use crate::target::Target;

impl Target {
    pub fn enqueue_marker(&self, api: &Api) -> Result<cl_event, String> {
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

    pub fn wait(&self, api: &Api, ev: cl_event) -> Result<(), String> {
        // SAFETY: one valid event.
        check(unsafe { (api.wait_for_events)(1, &ev) }, "clWaitForEvents")
    }

    pub fn release_event(&self, api: &Api, ev: cl_event) -> Result<(), String> {
        // SAFETY: `ev` came from enqueue_marker and is released once.
        check(unsafe { (api.release_event)(ev) }, "clReleaseEvent")
    }

    /// Marker + clWaitForEvents + clReleaseEvent.
    pub fn marker_round_trip(&self, api: &Api) -> Result<f64, String> {
        let t = Instant::now();
        let ev = self.enqueue_marker(api)?;
        let waited = self.wait(api, ev);
        // Released even when the wait failed.
        self.release_event(api, ev)?;
        waited?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }
}
