//! `MIRRORCL_RECORD=FILE`: every rank writes the stream its schedulers see to
//! `FILE.<rank>`, one item a line, for `mirrorcl-sim --replay` (the format, and its
//! reader: `scheduler/src/sim/record.rs`). One call at each place the scheduler is driven: a
//! context's devices (`context.rs`), a buffer's creation (`memory.rs`), a release as the
//! scheduler learns of it (`Context::lock_scheduler`), an attach and every command
//! (`enqueue/submit.rs`). Off unless set; then each item is one unbuffered write, so the
//! file is complete however the program ends.

use mirrorcl_scheduler::{Access, Location};
use parking_lot::Mutex;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The open file, or `None` when recording is off (or the file could not be made).
fn file() -> Option<&'static Mutex<std::fs::File>> {
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    FILE.get_or_init(|| {
        let base = Some(&crate::observe::config::get().runtime.record).filter(|s| !s.is_empty())?;
        let node = crate::cluster::node::node();
        let path = format!("{base}.{}", node.rank);
        match std::fs::File::create(&path) {
            Ok(mut f) => {
                let header = format!("# mirrorcl-record 1\nranks {} {}\n", node.size, node.rank);
                let _ = f.write_all(header.as_bytes());
                Some(Mutex::new(f))
            }
            Err(e) => {
                crate::diag!("MirrorCL: MIRRORCL_RECORD: cannot create {path}: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// Whether recording is on.
pub fn enabled() -> bool {
    file().is_some()
}

fn write(line: std::fmt::Arguments) {
    if let Some(f) = file() {
        let mut text = line.to_string();
        text.push('\n');
        let _ = f.lock().write_all(text.as_bytes());
    }
}

/// A number for a new context (its items carry it).
pub fn next_context() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub fn device(ctx: u64, index: u32, desc: mirrorcl_scheduler::DeviceDesc) {
    let item = mirrorcl_scheduler::sim::Item::Device { index, desc };
    write(format_args!(
        "{}",
        mirrorcl_scheduler::sim::record::line(ctx, &item)
    ));
}

pub fn buffer(ctx: u64, id: u64, size: u64, initial: Option<Location>) {
    let init = match initial {
        None => "none".to_string(),
        Some(Location::Host) => "host".to_string(),
        Some(Location::Device(d)) => format!("device:{d}"),
    };
    write(format_args!("buffer {ctx} {id} {size} {init}"));
}

pub fn attach(ctx: u64, buffer: u64, device: u32) {
    write(format_args!("attach {ctx} {buffer} {device}"));
}

pub fn release(ctx: u64, buffer: u64) {
    write(format_args!("release {ctx} {buffer}"));
}

/// One command as `submit` sees it (see the format's description in
/// `scheduler/src/sim/record.rs`).
#[allow(clippy::too_many_arguments)]
pub fn command(
    ctx: u64,
    command_type: u32,
    device: u32,
    at_host: bool,
    stream: u64,
    vendor: bool,
    fills_host: Option<usize>,
    blocking: bool,
    waits: &[u32],
    accesses: &[Access],
) {
    let waits = if waits.is_empty() {
        "-".to_string()
    } else {
        let w: Vec<String> = waits.iter().map(u32::to_string).collect();
        w.join(",")
    };
    let accesses = if accesses.is_empty() {
        "-".to_string()
    } else {
        let a: Vec<String> = (accesses.iter())
            .map(mirrorcl_scheduler::sim::record::access_field)
            .collect();
        a.join(",")
    };
    write(format_args!(
        "command {ctx} {command_type} {device} {} {stream} {} {} {} {waits} {accesses}",
        if at_host { "host" } else { "device" },
        if vendor { "vendor" } else { "host" },
        fills_host.map_or("-".to_string(), |n| n.to_string()),
        u8::from(blocking),
    ));
}
