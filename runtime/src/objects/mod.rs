//! The OpenCL objects behind the application's handles (platform, devices, contexts,
//! queues, memory objects, programs, kernels, samplers, events), and the issuer threads
//! that run their commands on this rank's actual devices. Events and issuers are one
//! unit: an issuer backs and completes the events of what it issued, and an event asks
//! the issuer that issued it to watch it.

pub mod context;
pub mod device;
pub mod event;
pub mod handle;
pub mod image;
pub mod issuer;
pub mod kernel;
pub mod memory;
pub mod platform;
pub mod program;
pub mod queue;
pub mod races;
pub mod sampler;
pub mod spin;
