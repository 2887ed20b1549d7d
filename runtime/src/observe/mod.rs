//! Observability, the bottom layer: configuration, the trace, the statistics and the
//! diagnostics every other layer writes to. It knows nothing of ranks or OpenCL.

pub mod config;
pub mod stats;
pub mod trace;
