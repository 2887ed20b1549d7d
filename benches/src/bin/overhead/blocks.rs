//! How the measurement interleaves the platforms: warm-ups, blocks of samples
//! of the first phase's figures (the four with goals) and of the second phase's
//! (the other API families), timed bursts, and the A/B, B/A order per step.

use crate::api::Api;
use crate::target::Target;
use crate::{CALLS_PER_SAMPLE, XFER_BYTES};

impl Target {
    /// Untimed iterations of the first phase's figures (the four with
    /// goals).
    pub fn warm_up(&self, api: &Api, iters: usize, burst_size: usize) -> Result<(), String> {
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
    pub fn warm_up_families(&self, api: &Api, iters: usize) -> Result<(), String> {
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
    pub fn block(&mut self, api: &Api, rewarm: usize, iters: usize) -> Result<(), String> {
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
    pub fn family_block(&mut self, api: &Api, rewarm: usize, iters: usize) -> Result<(), String> {
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
    pub fn timed_burst(&mut self, api: &Api, burst_size: usize) -> Result<(), String> {
        self.kernel_round_trip(api)?;
        let (per_cmd, per_enqueue) = self.burst(api, burst_size)?;
        self.samples.burst.push(per_cmd);
        self.samples.burst_enqueue.push(per_enqueue);
        Ok(())
    }
}

/// The platforms in the order they run in step `step`: A/B, B/A, A/B, ...
pub fn in_order<'a>(
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
