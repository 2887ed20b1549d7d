//! The exported entry points, one module per API family.

pub mod context;
pub mod enqueue;
pub mod event;
pub mod image;
pub mod memory;
pub mod platform;
pub mod program;
pub mod unsupported;

pub use context::*;
pub use enqueue::*;
pub use event::*;
pub use image::*;
pub use memory::*;
pub use platform::*;
pub use program::*;
pub use unsupported::*;
