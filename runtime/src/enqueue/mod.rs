//! From a validated enqueue call to vendor commands. Arguments reaching this module are
//! already validated. A command passes through its files in this order:
//!
//! 1. `buffer_commands`, `image_commands`, `host_commands`, `kernel_command`: one builder per
//!    `clEnqueue*` call turns its arguments into a [`Command`] (the buffer ranges it
//!    touches and how) and its [`Work`] (the vendor call, or nothing to run), and submits
//!    them.
//! 2. `submit`: every rank plans the command with the context's scheduler (transfers
//!    first, conflicts ordered), then routes it: the owner of the queue's device issues
//!    it, a read's bytes reach every rank, elsewhere it is bookkeeping.
//! 3. `transfer_steps`: each transfer step the scheduler plans, as this rank's part of
//!    it (Table IV.1), with all the tags of its messages taken in one place;
//!    `transfer_queue`: the vendor reads, writes and copies those steps make here.
//! 4. `issue`: a vendor command goes to its device's issuer thread, where its
//!    dependencies become a vendor wait list.

mod buffer_commands;
mod host_commands;
mod image_commands;
mod issue;
mod kernel_command;
pub mod remote;
mod submit;
mod transfer_queue;
mod transfer_steps;

pub use buffer_commands::{
    copy_buffer, copy_rect, fill_buffer, finish_blocking, rect_span, rw_buffer, rw_rect, Rect,
};
pub use host_commands::{map_buffer, marker, migrate, unmap};
pub use image_commands::{
    copy_image, copy_image_buffer, fill_image, host_pitches, map_image, rw_image,
};
pub use issue::VendorWork;
pub use kernel_command::ndrange;
pub use submit::{attach, submit, Command, Work};

use crate::objects::memory::Buffer;
use std::sync::Arc;

/// The root buffer of `b` (itself unless a sub-buffer): what the scheduler tracks.
fn root_arc(b: &Arc<Buffer>) -> Arc<Buffer> {
    b.parent.clone().unwrap_or_else(|| b.clone())
}

/// `root_arc` of a reference the caller gives up: a root buffer's moves, not cloned.
fn into_root(b: Arc<Buffer>) -> Arc<Buffer> {
    match &b.parent {
        Some(parent) => parent.clone(),
        None => b,
    }
}
