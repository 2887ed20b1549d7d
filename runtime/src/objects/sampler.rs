//! Samplers: MirrorCL keeps the modes; each vendor context gets its own vendor sampler,
//! made when a kernel on one of its devices first takes the sampler as an argument.

use crate::cl::*;
use crate::native::VSampler;
use crate::objects::context::Context;
use crate::objects::device::Device;
use crate::objects::handle::{impl_handle, Header};
use crate::ClResult;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

#[repr(C)]
pub struct Sampler {
    header: Header,
    pub context: Arc<Context>,
    pub normalized: cl_bool,
    pub addressing: cl_addressing_mode,
    pub filter: cl_filter_mode,
    /// Per vendor group, the vendor sampler.
    instances: Mutex<HashMap<u32, Arc<VSampler>>>,
}

impl_handle!(Sampler, Sampler, CL_INVALID_SAMPLER);

impl Sampler {
    /// `clCreateSampler`: `CL_INVALID_VALUE` for a mode OpenCL 1.2 does not define
    /// (§5.5.1). Repeating with unnormalized coordinates is left to the vendor, like
    /// every combination it may accept.
    pub fn new(
        context: Arc<Context>,
        normalized: cl_bool,
        addressing: cl_addressing_mode,
        filter: cl_filter_mode,
    ) -> ClResult<Arc<Sampler>> {
        let known_addressing = matches!(
            addressing,
            CL_ADDRESS_NONE
                | CL_ADDRESS_CLAMP_TO_EDGE
                | CL_ADDRESS_CLAMP
                | CL_ADDRESS_REPEAT
                | CL_ADDRESS_MIRRORED_REPEAT
        );
        if !known_addressing
            || !matches!(filter, CL_FILTER_NEAREST | CL_FILTER_LINEAR)
            || normalized > CL_TRUE
        {
            return Err(CL_INVALID_VALUE);
        }
        Ok(Arc::new(Sampler {
            header: Header::new(),
            context,
            normalized,
            addressing,
            filter,
            instances: Mutex::new(HashMap::default()),
        }))
    }

    /// The vendor sampler for `device`'s vendor context, made on first use.
    pub fn instance(&self, device: &Device) -> ClResult<Arc<VSampler>> {
        let mut instances = self.instances.lock();
        if let Some(s) = instances.get(&device.group) {
            return Ok(s.clone());
        }
        let s = Arc::new(self.context.vendor_context(device).vctx.create_sampler(
            self.normalized,
            self.addressing,
            self.filter,
        )?);
        instances.insert(device.group, s.clone());
        Ok(s)
    }

    pub fn retain_count(&self) -> u32 {
        self.header.count()
    }
}
