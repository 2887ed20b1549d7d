//! The cluster layer: this rank's place among the others and everything that crosses
//! between them (the communicator, the wire format, the node), the host program's
//! threads as every rank names them, the history and divergence checks that keep the
//! replicas in step, and the replica's face to the outside world. It knows nothing of
//! OpenCL objects.

pub mod comm;
pub mod history;
pub mod host_threads;
pub mod node;
pub mod record;
pub mod replica;
pub mod statistics;
pub mod thread_state;
pub mod verify;
pub mod wire;
