//! What crosses ranks for a command or a planned step (Table IV.1): the sends and
//! receives that follow device work on one rank and feed device work on another, and
//! the broadcast that makes what the host reads identical on every rank. A failure
//! travels in place of the bytes (`comm::Header`), so it reaches every receiver as that
//! command's error.
//!
//! Every function here is called under the scheduler lock, in schedule order, on every
//! rank alike; the caller takes each message's tag from `Node::tag_with` in that order,
//! so that both ends agree.

use crate::cl::*;
use crate::cluster::node::{node, Direction, Transfer, What};
use crate::native::{VContext, VDevice, VMem, VQueue};
use crate::objects::context::new_stream;
use crate::objects::event::Event;
use crate::ClResult;
use std::alloc::Layout;
use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Transfers between ranks move in pieces, so that reading one piece from a device,
/// sending another and writing a third to a device overlap, and a transfer of any size
/// stages through a few blocks only. A piece is at most this large (`MIRRORCL_PIECE_MIB`,
/// rank 0's value, set when the devices are exchanged); no message exceeds 1 GiB.
/// Never below `WHOLE` (`set_piece_max` clamps), so `piece_size`'s clamp is well formed.
/// By default the largest piece that stages through page-locked blocks (the largest
/// of `LARGE_CLASSES`): on two H200 ranks a 1 GiB copy moved at 8.7-9.1 GB/s in 4 MiB
/// pieces against 5.4-6.4 in pageable 16 MiB ones (raw MPI 5.8-6.5).
pub const PIECE_DEFAULT: usize = LARGE_MIN << (LARGE_CLASSES - 1);
static PIECE_MAX: AtomicUsize = AtomicUsize::new(PIECE_DEFAULT);

pub fn set_piece_max(bytes: usize) {
    PIECE_MAX.store(bytes.clamp(WHOLE, 1 << 30), Ordering::Relaxed);
}

/// Transfers up to this size move whole: below it, the cost of a piece's hand-offs
/// outweighs the overlap.
const WHOLE: usize = 1 << 20;

/// The piece size of a transfer of `len` bytes: about sixteen pieces, so that the
/// first read and the last write (which nothing overlaps) are a small part of the
/// whole, between `WHOLE` and the largest piece. Both ends compute it from the same
/// length and the same agreed largest piece.
pub fn piece_size(len: usize) -> usize {
    (len / 16)
        .next_power_of_two()
        .clamp(WHOLE, PIECE_MAX.load(Ordering::Relaxed))
}

/// How many staging blocks one transfer may use at once on each side.
pub const WINDOW: usize = 4;

/// The pieces of `len` bytes starting at `offset`: at least one, even when empty (both
/// ends must exchange a message). Every rank computes the same pieces for a step.
pub fn pieces(offset: usize, len: usize) -> Vec<std::ops::Range<usize>> {
    let piece = piece_size(len);
    let mut out = Vec::with_capacity(len.div_ceil(piece).max(1));
    let mut at = offset;
    loop {
        let n = (offset + len - at).min(piece);
        out.push(at..at + n);
        at += n;
        if at >= offset + len {
            return out;
        }
    }
}

/// Staging blocks kept for reuse: fresh pages cost a fault each on first touch, on both
/// the vendor's copy and MPI's (measured here: a 1 GiB send from fresh memory takes 10x
/// as long as from touched memory).
static POOL: parking_lot::Mutex<Pool> = parking_lot::Mutex::new(Pool {
    blocks: Vec::new(),
    bytes: 0,
});
const POOL_LIMIT: usize = 256 << 20;

/// The pooled blocks by size (powers of two, so few sizes), and their bytes in all:
/// taking and giving back cost the same with tens of thousands pooled (a program far
/// ahead of its ranks' transfers pools thousands of 4 KiB blocks; a search and a sum over
/// all of them per block took the progress and issuer threads microseconds each).
struct Pool {
    blocks: Vec<(usize, Vec<usize>)>,
    bytes: usize,
}

impl Pool {
    fn take(&mut self, size: usize) -> Option<usize> {
        let (_, free) = self.blocks.iter_mut().find(|(s, _)| *s == size)?;
        let ptr = free.pop()?;
        self.bytes -= size;
        Some(ptr)
    }

    /// Keeps the block if the pool has room for it.
    fn give(&mut self, size: usize, ptr: usize) -> bool {
        if self.bytes + size > POOL_LIMIT {
            return false;
        }
        self.bytes += size;
        match self.blocks.iter_mut().find(|(s, _)| *s == size) {
            Some((_, free)) => free.push(ptr),
            None => self.blocks.push((size, vec![ptr])),
        }
        true
    }
}

/// A page-aligned block of host memory that stages bytes between a device and the
/// network. Not initialised: every byte is written (by a vendor read or a receive)
/// before it is read. Page-locked where the device's vendor context has one free
/// (`Pinned`).
pub struct Staging {
    ptr: *mut u8,
    layout: Layout,
    /// The page-locked block it is, to go back to its pool: the pool and the size
    /// class.
    pinned: Option<(Arc<Pinned>, usize)>,
}

// SAFETY: the block is owned; accesses are ordered by the events that use it.
unsafe impl Send for Staging {}
// SAFETY: as above.
unsafe impl Sync for Staging {}

impl Staging {
    pub fn new(len: usize) -> ClResult<Arc<Staging>> {
        let size = len.max(1).next_power_of_two().max(4096);
        let layout = Layout::from_size_align(size, 4096).map_err(|_| CL_OUT_OF_HOST_MEMORY)?;
        if let Some(ptr) = POOL.lock().take(size) {
            return Ok(Arc::new(Staging {
                ptr: ptr as *mut u8,
                layout,
                pinned: None,
            }));
        }
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(CL_OUT_OF_HOST_MEMORY);
        }
        Ok(Arc::new(Staging {
            ptr,
            layout,
            pinned: None,
        }))
    }

    /// A block for `len` bytes that `pinned`'s device reads into or writes from:
    /// page-locked when one is to be had, else as `new`.
    pub fn near(len: usize, pinned: &Arc<Pinned>) -> ClResult<Arc<Staging>> {
        match pinned.take(len) {
            Some(block) => Ok(Arc::new(block)),
            None => Staging::new(len),
        }
    }

    pub fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some((pool, class)) = self.pinned.take() {
            pool.classes[class].lock().free.push(self.ptr as usize);
            return;
        }
        if POOL.lock().give(self.layout.size(), self.ptr as usize) {
            return;
        }
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Page-locked block sizes for small pieces: a piece stages through the smallest that
/// holds it (a stencil's 8 KiB ghost row took a 64 KiB block before the 16 KiB class).
/// They are cut from chunks mapped `SMALL_CHUNK` at a time.
const SMALL_CLASSES: [usize; 3] = [4 << 10, 16 << 10, 64 << 10];
/// Making and mapping page-locked memory costs NVIDIA 1.3-1.9 ms on an H100, during
/// which its other commands in the context stall: a stencil enqueued 100 steps ahead,
/// mapping 1 MiB at a time, stopped five times in its first twenty steps. So seldom,
/// and mostly while the program starts.
const SMALL_CHUNK: usize = 4 << 20;
/// Page-locked memory one device may hold per small class (16 MiB).
const SMALL_CHUNKS: usize = 4;
/// Larger pieces up to 4 MiB stage through blocks of their own, a power of two from 128
/// KiB: pageable staging made NVIDIA copy each piece through its own bounce buffer (1-64
/// MiB copies between two H100 ranks went from 26-80% of raw MPI's bandwidth to 48-94%).
/// A transfer cycles through `WINDOW` blocks on each side. Larger pieces stay pageable:
/// with 16 MiB blocks a 256 MiB copy fell from 76% to 37%, its blocks not yet back when
/// the next copy was planned, so that it made new ones, 16 MiB at a time.
const LARGE_MIN: usize = 128 << 10;
/// Page-locked memory one device may hold per large class.
const LARGE_BUDGET: usize = 32 << 20;
/// Large classes: 128 KiB to 4 MiB.
const LARGE_CLASSES: usize = 6;

/// The block size of class `class` (small classes first, then large ones).
fn class_size(class: usize) -> usize {
    match SMALL_CLASSES.get(class) {
        Some(&size) => size,
        None => LARGE_MIN << (class - SMALL_CLASSES.len()),
    }
}

/// The class of the smallest block holding `len` bytes.
fn class_of(len: usize) -> Option<usize> {
    if let Some(class) = SMALL_CLASSES.iter().position(|&size| len <= size) {
        return Some(class);
    }
    let class = SMALL_CLASSES.len() + len.next_power_of_two().trailing_zeros() as usize
        - LARGE_MIN.trailing_zeros() as usize;
    (class < SMALL_CLASSES.len() + LARGE_CLASSES).then_some(class)
}

/// How a class's memory is mapped: the bytes of one mapping, and how many it may have.
fn class_chunks(class: usize) -> (usize, usize) {
    if class < SMALL_CLASSES.len() {
        (SMALL_CHUNK, SMALL_CHUNKS)
    } else {
        let size = class_size(class);
        (size, (LARGE_BUDGET / size).min(2 * WINDOW))
    }
}

/// Page-locked staging blocks of one device in one vendor context: mapped
/// `CL_MEM_ALLOC_HOST_PTR` buffers, kept mapped and cut into blocks. A vendor moves
/// bytes to and from page-locked memory directly; from pageable memory NVIDIA copies
/// through its own bounce buffer and reports the read done about 10 µs later (16 bytes
/// on an H100: done 2 µs after the enqueue returns instead of 10-14). Made on first
/// use, on the calling thread, through a queue of its own; released with the last
/// block.
pub struct Pinned {
    vctx: VContext,
    vdev: VDevice,
    queue: parking_lot::Mutex<Option<VQueue>>,
    classes: [parking_lot::Mutex<PinnedClass>; SMALL_CLASSES.len() + LARGE_CLASSES],
}

#[derive(Default)]
struct PinnedClass {
    free: Vec<usize>,
    /// The mapped buffers the blocks are cut from.
    chunks: Vec<VMem>,
    /// The vendor could not make one: pageable staging from then on.
    refused: bool,
    /// Chunks being mapped now, by threads that let go of the lock meanwhile.
    mapping: usize,
}

impl Pinned {
    pub fn new(vctx: VContext, vdev: VDevice) -> Arc<Pinned> {
        Arc::new(Pinned {
            vctx,
            vdev,
            queue: parking_lot::Mutex::new(None),
            classes: Default::default(),
        })
    }

    /// A free block of the smallest class that holds `len` bytes, from a new chunk if
    /// none is free and the class is under its limit; None otherwise, or when the
    /// vendor cannot make one (the caller stages through pageable memory).
    fn take(self: &Arc<Self>, len: usize) -> Option<Staging> {
        let class = class_of(len)?;
        let size = class_size(class);
        let chunks = class_chunks(class).1;
        let ptr = {
            let mut c = self.classes[class].lock();
            if c.free.is_empty()
                && c.chunks.len() + c.mapping < chunks
                && !c.refused
                && !crate::objects::event::in_callback()
            {
                // A blocking map waits for the vendor's threads, so it is made with no
                // lock held that those threads may take. Not this class's: they give
                // blocks back to it as they complete commands (`Staging`'s drop); four
                // ranks on two cores (the Slurm job) hung so, the map waiting for a
                // worker that waited for the lock. Nor a scheduler lock, which the
                // application's callbacks take when they enqueue: planning a transfer,
                // the chunk is mapped once the thread lets go of it, and this block
                // stages through pageable memory. Nor from an application's event
                // callback, which may run on one of the vendor's threads.
                c.mapping += 1;
                drop(c);
                let pinned = self.clone();
                crate::objects::event::run_unlocked(move || pinned.map_chunk_into(class));
                c = self.classes[class].lock();
            }
            c.free.pop()?
        };
        Some(Staging {
            ptr: ptr as *mut u8,
            layout: Layout::from_size_align(size, 4096).ok()?,
            pinned: Some((self.clone(), class)),
        })
    }

    /// Maps the first chunk of every small class now: a context that spans ranks, as it
    /// is made. Otherwise its first small transfers map them, 2.6 ms on an H200 on the
    /// enqueuing thread, while NVIDIA stalls the context's other commands (a kernel's
    /// launch took 2.3 ms meanwhile); a loop of 100 iterations of IV.7.2 paid 26 µs an
    /// iteration for it. 12 MiB of page-locked memory per device.
    pub fn prepare_small(self: &Arc<Self>) {
        for size in SMALL_CLASSES {
            // A block taken and given back: its class's first chunk stays mapped.
            drop(self.take(size));
        }
    }

    /// Maps a chunk for `class` (counted in its `mapping`) and cuts it into its blocks.
    fn map_chunk_into(&self, class: usize) {
        let (bytes, size) = (class_chunks(class).0, class_size(class));
        let mapped = self.map_chunk(bytes);
        let mut c = self.classes[class].lock();
        c.mapping -= 1;
        match mapped {
            Ok((mem, base)) => {
                c.free
                    .extend((0..bytes / size).rev().map(|i| base + i * size));
                c.chunks.push(mem);
            }
            Err(rc) => {
                tracing::debug!("no page-locked staging ({rc}); pageable instead");
                c.refused = true;
            }
        }
    }

    fn map_chunk(&self, bytes: usize) -> ClResult<(VMem, usize)> {
        let mem = (self.vctx).create_buffer(CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes)?;
        let mut queue = self.queue.lock();
        if queue.is_none() {
            *queue = Some(self.vctx.create_queue(&self.vdev, 0)?);
        }
        let ptr = queue.as_ref().expect("made above").map_whole(&mem, bytes)?;
        Ok((mem, ptr as usize))
    }
}

/// The host memory a read fills: contiguous, or a rectangle of host rows.
#[derive(Clone, Copy, Debug)]
pub enum HostSpan {
    Contiguous {
        ptr: usize,
        len: usize,
    },
    Rect {
        ptr: usize,
        origin: [usize; 3],
        region: [usize; 3],
        row_pitch: usize,
        slice_pitch: usize,
    },
}

impl HostSpan {
    pub fn len(&self) -> usize {
        match *self {
            HostSpan::Contiguous { len, .. } => len,
            HostSpan::Rect { region, .. } => region[0] * region[1] * region[2],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start addresses of the rectangle's rows, in order.
    fn rows(&self) -> Vec<usize> {
        match *self {
            HostSpan::Contiguous { ptr, .. } => vec![ptr],
            HostSpan::Rect {
                ptr,
                origin,
                region,
                row_pitch,
                slice_pitch,
            } => {
                let mut rows = Vec::with_capacity(region[1] * region[2]);
                for z in 0..region[2] {
                    for y in 0..region[1] {
                        rows.push(
                            ptr + (origin[2] + z) * slice_pitch
                                + (origin[1] + y) * row_pitch
                                + origin[0],
                        );
                    }
                }
                rows
            }
        }
    }

    /// Copies the rectangle into `block` (`pack`) or back out of it.
    fn copy(&self, block: &Staging, pack: bool) {
        let HostSpan::Rect { region, .. } = *self else {
            return;
        };
        for (i, row) in self.rows().into_iter().enumerate() {
            let staged = block.addr() + i * region[0];
            let (from, to) = if pack { (row, staged) } else { (staged, row) };
            // SAFETY: both ranges lie inside memory the command owns (the application's
            // rectangle, validated; the staging block of `len()` bytes).
            unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, region[0]) };
        }
    }
}

/// This rank's messages in passing bytes from their owner to every rank down the relay
/// every rank computes alike (`mirrorcl_scheduler::relay`).
pub struct RelayTags {
    /// The rank this one receives from, with the tags of its pieces (none on the owner).
    pub from: Option<(u32, Range<u64>)>,
    /// The ranks this one passes the bytes on to, each with the tag of the first piece.
    pub to: Vec<(u32, u64)>,
}

/// This rank's part in passing `len` bytes from `owner` to every rank, in `pieces`
/// messages per pair.
pub fn relay(owner: u32, len: u64, pieces: usize) -> RelayTags {
    let n = node();
    let relay = mirrorcl_scheduler::relay::host_copy_relay(owner, n.size, n.rank, len);
    RelayTags {
        from: relay.from.map(|r| (r, n.tags_with(r, pieces))),
        to: (relay.to.iter())
            .map(|&r| (r, n.tags_with(r, pieces).start))
            .collect(),
    }
}

/// Completes `done` once every one of `count` parts arrived, with the first failure
/// among them, if any.
pub fn join(done: Arc<Event>, count: usize) -> impl Fn(cl_int) + Send + Sync + Clone {
    struct Join {
        done: Arc<Event>,
        left: AtomicI32,
        failure: AtomicI32,
    }
    let j = Arc::new(Join {
        done,
        left: AtomicI32::new(count as i32),
        failure: AtomicI32::new(CL_COMPLETE),
    });
    move |status: cl_int| {
        if status < 0 {
            let _ = (j.failure).compare_exchange(
                CL_COMPLETE,
                status,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        if j.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            j.done.complete(j.failure.load(Ordering::Acquire));
        }
    }
}

/// Once `after` (device work writing `span`) is done, sends the bytes of `span` to
/// `peers` (each with its tag); `done` completes when every send has. A failed `after`
/// sends its failure instead of the bytes (every peer's receive fails with it) and
/// fails `done` with it.
pub fn send_when_done(
    after: &Arc<Event>,
    done: Arc<Event>,
    peers: Vec<(u32, u64)>,
    span: HostSpan,
    what: What,
    keep: Option<Arc<dyn Any + Send + Sync>>,
) {
    if peers.is_empty() {
        let d = done.clone();
        after.on_done(move |status| d.complete(status));
        return;
    }
    after.mark_urgent();
    after.on_done_first(move |status| {
        tracing::trace!("sending {} bytes to {peers:?}", span.len());
        let (ptr, block, status) = match span {
            _ if status < 0 => (0, None, status),
            HostSpan::Contiguous { ptr, .. } => (ptr, None, status),
            HostSpan::Rect { .. } => match Staging::new(span.len()) {
                Ok(b) => {
                    span.copy(&b, true);
                    (b.addr(), Some(b), status)
                }
                Err(rc) => (0, None, rc),
            },
        };
        let status = status.min(CL_COMPLETE);
        let arrive = join(done.clone(), peers.len());
        for (peer, tag) in peers {
            let arrive = arrive.clone();
            let block = block.clone();
            let keep = keep.clone();
            node().transfer(Transfer {
                direction: Direction::Send,
                peer,
                tag,
                ptr,
                len: span.len(),
                what,
                status,
                done: Box::new(move |transport| {
                    drop((block, keep));
                    arrive(if status < 0 { status } else { transport });
                }),
            });
        }
    });
}

/// Sends `rc` in place of `len` bytes to each of `peers`: this rank failed before it
/// could send them, and its peers must neither wait for them nor take stale bytes.
pub fn send_failure(
    peers: impl IntoIterator<Item = (u32, u64)>,
    rc: cl_int,
    len: usize,
    what: What,
) {
    for (peer, tag) in peers {
        node().transfer(Transfer {
            direction: Direction::Send,
            peer,
            tag,
            ptr: 0,
            len,
            what,
            status: rc.min(-1),
            done: Box::new(|_| {}),
        });
    }
}

/// Consumes the message of `len` bytes `peer` sends with `tag` without taking it: this
/// rank failed before it could, and the sender must not wait for it.
pub fn discard(peer: u32, tag: u64, len: usize, what: What) {
    node().transfer(Transfer {
        direction: Direction::Discard,
        peer,
        tag,
        ptr: 0,
        len,
        what,
        status: CL_COMPLETE,
        done: Box::new(|_| {}),
    });
}

/// Once `deps` are done, receives `span` from `peer`; `done` completes on arrival, with
/// the sender's failure if it sent one.
pub fn receive_after(
    deps: Vec<Arc<Event>>,
    done: Arc<Event>,
    peer: u32,
    tag: u64,
    span: HostSpan,
    what: What,
    keep: Option<Arc<dyn Any + Send + Sync>>,
) {
    let post = move || {
        let (ptr, block) = match span {
            HostSpan::Contiguous { ptr, .. } => (ptr, None),
            HostSpan::Rect { .. } => match Staging::new(span.len()) {
                Ok(b) => (b.addr(), Some(b)),
                Err(rc) => {
                    discard(peer, tag, span.len(), what);
                    done.complete(rc);
                    return;
                }
            },
        };
        node().transfer(Transfer {
            direction: Direction::Recv,
            peer,
            tag,
            ptr,
            len: span.len(),
            what,
            status: CL_COMPLETE,
            done: Box::new(move |status| {
                if let (Some(b), true) = (&block, status >= 0) {
                    span.copy(b, false);
                }
                drop(keep);
                done.complete(status);
            }),
        });
    };
    if deps.iter().all(|d| d.is_done()) {
        post();
    } else {
        let gate = Event::new(
            deps[0].context.clone(),
            None,
            CL_COMMAND_MARKER,
            new_stream(),
        );
        gate.complete_after(deps);
        // The receive is posted whatever the dependencies' status: the sender sends.
        gate.on_done(move |_| post());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::comm::local::tests::on_ranks;
    use crate::cluster::history::Stamp;
    use crate::cluster::node::Node;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_piece_stages_through_the_smallest_page_locked_class_that_holds_it() {
        for (len, size) in [
            (1, 4 << 10),
            (4 << 10, 4 << 10),
            ((4 << 10) + 1, 16 << 10),
            (8 << 10, 16 << 10),
            (64 << 10, 64 << 10),
            ((64 << 10) + 1, 128 << 10),
            (4 << 20, 4 << 20),
            ((4 << 20) - 5, 4 << 20),
        ] {
            let class = class_of(len).expect("a class");
            assert_eq!(class_size(class), size, "{len} bytes");
            let (chunk, chunks) = class_chunks(class);
            assert!(
                chunk >= size && chunk % size == 0 && chunks <= 2 * WINDOW,
                "{len} bytes"
            );
        }
        assert_eq!(class_of((4 << 20) + 1), None);
        // Large blocks are mapped one at a time, within the budget and two windows.
        assert_eq!(
            class_chunks(class_of(1 << 20).unwrap()),
            (1 << 20, 2 * WINDOW)
        );
        assert_eq!(
            class_chunks(class_of(4 << 20).unwrap()),
            (4 << 20, 2 * WINDOW)
        );
    }

    #[test]
    fn pieces_cover_the_range_in_order_and_stay_within_bounds() {
        for len in [
            0,
            1,
            4096,
            WHOLE,
            WHOLE + 1,
            16 << 20,
            (1 << 30) + 7,
            3 << 30,
        ] {
            let ps = pieces(100, len);
            assert_eq!(ps[0].start, 100);
            assert_eq!(ps.last().unwrap().end, 100 + len);
            for w in ps.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            let piece = piece_size(len);
            assert!((WHOLE..=PIECE_MAX.load(Ordering::Relaxed)).contains(&piece));
            assert!(ps.iter().all(|p| p.len() <= piece));
            // Whole up to WHOLE; at most sixteen pieces up to sixteen largest pieces.
            if len <= WHOLE {
                assert_eq!(ps.len(), 1, "{len}");
            } else if len <= 16 * PIECE_MAX.load(Ordering::Relaxed) {
                assert!(ps.len() <= 16, "{len}: {}", ps.len());
            }
        }
    }

    // Cross-rank transfers in pieces over the in-process communicator (issue 13): two ranks
    // as threads, without mpirun or devices. Rank 0 sends and rank 1 receives each planned
    // step the way `enqueue::transfer_steps` runs one: both take one tag per piece
    // with `Node::tags_with` when they plan it, and post one message per piece; a
    // failure travels as `send_failure` and `discard` post it (no bytes, the piece's
    // length and tag).

    /// What a device read stands for in these tests (`CL_MEM_OBJECT_ALLOCATION_FAILURE`).
    const READ_FAILED: cl_int = -4;
    /// What a receive buffer holds before anything arrives: a piece left as it was shows.
    const FILL: u8 = 0xee;
    /// Four pieces (three of `WHOLE` bytes, a short last one) and three pieces.
    const FOUR: usize = 3 * WHOLE + 12_345;
    const THREE: usize = 2 * WHOLE + 777;

    /// Bytes that differ from one transfer to the next (xorshift from `seed`), so that one
    /// transfer's bytes arriving in place of another's show.
    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// The first index where `a` and `b` differ (None when equal), not megabytes of bytes.
    fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
        (a.len() != b.len())
            .then_some(a.len().min(b.len()))
            .or_else(|| a.iter().zip(b).position(|(x, y)| x != y))
    }

    /// In which order the two ends post a step's pieces; a round is one rank's posts, and
    /// the other rank posts its next round only after (a collective between rounds).
    #[derive(Clone, Copy, Debug)]
    enum Order {
        SenderFirst,
        ReceiverFirst,
        /// Piece by piece, the ends taking turns at going first.
        Interleaved,
        /// The receiver posts its pieces last to first, before the sender posts any.
        Reversed,
    }

    const ORDERS: [Order; 4] = [
        Order::SenderFirst,
        Order::ReceiverFirst,
        Order::Interleaved,
        Order::Reversed,
    ];

    impl Order {
        /// (rank, pieces it posts) rounds, in order.
        fn rounds(self, n: usize) -> Vec<(u32, Vec<usize>)> {
            let all: Vec<usize> = (0..n).collect();
            match self {
                Order::SenderFirst => vec![(0, all.clone()), (1, all)],
                Order::ReceiverFirst => vec![(1, all.clone()), (0, all)],
                Order::Interleaved => (0..n)
                    .flat_map(|i| [((i % 2) as u32, vec![i]), (1 - (i % 2) as u32, vec![i])])
                    .collect(),
                Order::Reversed => vec![(1, all.iter().rev().copied().collect()), (0, all)],
            }
        }
    }

    /// Where a step fails, as the runtime fails one.
    #[derive(Clone, Copy, Debug)]
    enum Failure {
        None,
        /// The device read of piece i failed: `send_when_done` sends that piece's failure
        /// in place of its bytes; the other pieces carry theirs.
        ReadOf(usize),
        /// Piece i could not be read at all: `fail_sends(i, ..)` sends the failure for it
        /// and every later piece.
        SendsFrom(usize),
        /// The receiver failed before it could take piece i (its write of piece i - 1, or
        /// its staging): `fail_receives(i, ..)` discards it and every later piece.
        DiscardsFrom(usize),
    }

    impl Failure {
        /// What rank 0 sends for piece i: `CL_COMPLETE` (the bytes) or the failure.
        fn sent(self, i: usize) -> cl_int {
            match self {
                Failure::ReadOf(f) if i == f => READ_FAILED,
                Failure::SendsFrom(f) if i >= f => READ_FAILED,
                _ => CL_COMPLETE,
            }
        }

        /// Whether rank 1 takes piece i (else it discards it).
        fn taken(self, i: usize) -> bool {
            !matches!(self, Failure::DiscardsFrom(f) if i >= f)
        }
    }

    #[derive(Clone, Copy, Debug)]
    struct Plan {
        offset: usize,
        len: usize,
        order: Order,
        failure: Failure,
    }

    const STAMP: Stamp = Stamp {
        entries: 7,
        digest: 0x5eed,
    };

    /// The message of one piece, as `transfer_steps` posts it (its `done` does nothing).
    fn message(
        direction: Direction,
        peer: u32,
        tag: u64,
        ptr: usize,
        piece: &Range<usize>,
        stamp: Stamp,
        status: cl_int,
    ) -> Transfer {
        Transfer {
            direction,
            peer,
            tag,
            ptr,
            len: piece.len(),
            what: What {
                command: "a planned transfer",
                buffer: 1,
                offset: piece.start as u64,
                len: piece.len() as u64,
                stamp,
            },
            status,
            done: Box::new(|_| {}),
        }
    }

    /// Posts `t`; false if that ended the job (`Local::abort`: the messages diverged). The
    /// rank goes on to its next collective, else its peer would wait there for ever.
    fn post(node: &Node, t: Transfer) -> bool {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| node.transfer(t))).is_ok()
    }

    /// What one rank saw of a step.
    #[derive(Debug)]
    struct Seen {
        tags: Range<u64>,
        /// Per piece, the status its `done` ran with (None: it did not complete).
        outcomes: Vec<Option<cl_int>>,
        /// Whether posting a piece ended the job (`Local::abort`: the messages diverged).
        aborted: bool,
        /// The receiver's buffer afterwards.
        bytes: Vec<u8>,
    }

    /// Runs `plans` in order between rank 0 (sending the bytes `pattern(k)` of step k) and
    /// rank 1 (receiving into a buffer of `FILL`); what each rank saw of each step.
    fn run(plans: Vec<Plan>) -> Vec<[Seen; 2]> {
        let mut ranks = on_ranks(2, move |c| {
            let node = Node::over(Box::new(c));
            let (me, peer) = (node.rank, 1 - node.rank);
            let mut seen = Vec::new();
            for (k, plan) in plans.iter().enumerate() {
                let ps = pieces(plan.offset, plan.len);
                let tags = node.tags_with(peer, ps.len());
                let size = plan.offset + plan.len;
                let start = if me == 0 {
                    pattern(k as u64, size)
                } else {
                    vec![FILL; size]
                };
                // Leaked: a piece that never completes (a failing test) keeps its pointer
                // in the communicator.
                let buf: &'static mut [u8] = start.leak();
                let base = buf.as_mut_ptr() as usize;
                let (tx, rx) = mpsc::channel();
                let mut aborted = false;
                for (rank, posts) in plan.order.rounds(ps.len()) {
                    for i in posts.into_iter().filter(|_| rank == me) {
                        let (piece, tx) = (ps[i].clone(), tx.clone());
                        let status = if me == 0 { plan.failure.sent(i) } else { 0 };
                        let direction = match me {
                            0 => Direction::Send,
                            _ if plan.failure.taken(i) => Direction::Recv,
                            _ => Direction::Discard,
                        };
                        // As `send_failure` and `discard`: no bytes, the piece's length.
                        let bytes = status == 0 && direction != Direction::Discard;
                        let ptr = if bytes { base + piece.start } else { 0 };
                        let tag = tags.start + i as u64;
                        // One command's steps share their stamp: only the tags keep
                        // one step's messages from meeting another's.
                        let t = message(direction, peer, tag, ptr, &piece, STAMP, status);
                        let t = Transfer {
                            done: Box::new(move |status| {
                                let _ = tx.send((i, status));
                            }),
                            ..t
                        };
                        aborted |= !post(&node, t);
                    }
                    node.all_gather(&[]);
                }
                // Completion comes through `done`; the deadline only keeps a broken test
                // from hanging.
                let deadline = Instant::now() + Duration::from_secs(5);
                let mut outcomes = vec![None; ps.len()];
                while outcomes.iter().any(Option::is_none) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let Ok((i, status)) = rx.recv_timeout(left) else {
                        break;
                    };
                    outcomes[i] = Some(status);
                }
                let bytes = if me == 1 { buf.to_vec() } else { Vec::new() };
                seen.push(Seen {
                    tags,
                    outcomes,
                    aborted,
                    bytes,
                });
            }
            seen
        });
        let received = ranks.pop().expect("rank 1").expect("rank 1 finished");
        let sent = ranks.pop().expect("rank 0").expect("rank 0 finished");
        sent.into_iter()
            .zip(received)
            .map(|(s, r)| [s, r])
            .collect()
    }

    /// Checks one step as both ranks saw it: the same tags, one per piece, following the
    /// previous step's; every piece completed on both ends, the sender's as sent, the
    /// receiver's with the sender's failure or (discarded) `CL_OUT_OF_RESOURCES`; the
    /// receiver holds the step's own bytes exactly where pieces arrived, and nothing
    /// elsewhere.
    fn check(k: usize, plan: &Plan, seen: &[Seen; 2], next_tag: u64) -> u64 {
        let [sent, got] = seen;
        let ps = pieces(plan.offset, plan.len);
        let at = format!("step {k} {plan:?}");
        assert!(!sent.aborted && !got.aborted, "{at}: no rank aborted");
        assert_eq!(sent.tags, got.tags, "{at}: both ends take the same tags");
        assert_eq!(sent.tags, next_tag..next_tag + ps.len() as u64, "{at}");
        assert_eq!(
            sent.outcomes,
            vec![Some(CL_COMPLETE); ps.len()],
            "{at}: sends"
        );
        let want: Vec<_> = (0..ps.len())
            .map(|i| match (plan.failure.sent(i), plan.failure.taken(i)) {
                (_, false) => Some(CL_OUT_OF_RESOURCES),
                (status, true) => Some(status),
            })
            .collect();
        assert_eq!(got.outcomes, want, "{at}: receives");
        let mut expected = vec![FILL; plan.offset + plan.len];
        let source = pattern(k as u64, expected.len());
        for (i, p) in ps.iter().enumerate() {
            if plan.failure.sent(i) == CL_COMPLETE && plan.failure.taken(i) {
                expected[p.clone()].copy_from_slice(&source[p.clone()]);
            }
        }
        assert_eq!(first_difference(&got.bytes, &expected), None, "{at}: bytes");
        sent.tags.end
    }

    fn run_and_check(plans: Vec<Plan>) {
        let seen = run(plans.clone());
        let mut next_tag = 0;
        for (k, (plan, seen)) in plans.iter().zip(&seen).enumerate() {
            next_tag = check(k, plan, seen, next_tag);
        }
    }

    #[test]
    fn a_transfer_in_pieces_arrives_exactly_whatever_order_its_ends_post_pieces_in() {
        assert_eq!(pieces(100, FOUR).len(), 4, "the test needs several pieces");
        // One step per order, back to back between the same pair.
        run_and_check(
            ORDERS
                .iter()
                .map(|&order| Plan {
                    offset: 100,
                    len: FOUR,
                    order,
                    failure: Failure::None,
                })
                .collect(),
        );
    }

    /// Each failure in every posting order, then a clean step between the same pair
    /// (three pieces, the same stamp), which must get its own bytes.
    fn fails_that_transfer_only(failures: [Failure; 2]) {
        for failure in failures {
            for order in ORDERS {
                let plan = |len, failure| Plan {
                    offset: 0,
                    len,
                    order,
                    failure,
                };
                run_and_check(vec![plan(FOUR, failure), plan(THREE, Failure::None)]);
            }
        }
    }

    #[test]
    fn a_failure_on_the_sending_side_mid_transfer_fails_that_transfer_only() {
        // Each piece completes on both ends (none waits for bytes that never come), and
        // the receiver fails with the sender's failure and keeps no bytes of the failed
        // pieces.
        fails_that_transfer_only([Failure::ReadOf(1), Failure::SendsFrom(1)]);
    }

    #[test]
    fn a_failure_on_the_receiving_side_mid_transfer_fails_that_transfer_only() {
        // Discarded pieces complete their sends and leave the receiver's bytes as they
        // were.
        fails_that_transfer_only([Failure::DiscardsFrom(2), Failure::DiscardsFrom(0)]);
    }

    #[test]
    fn ends_that_plan_a_step_in_other_pieces_diverge_where_their_messages_cross_steps() {
        // Ends planning alike take the same tags (`check`, and
        // `node::tests::exchange_and_tags_over_the_in_process_communicator`). Here rank 1
        // is a replica that planned the first command's step over 2 MiB where rank 0
        // planned `FOUR` bytes: it takes two tags where rank 0 took four, so its next
        // command's first message meets rank 0's third piece of the first. The pieces it
        // shares with rank 0 match unseen; the next one carries another command's stamp,
        // and the job ends there instead of taking the wrong bytes.
        let results = on_ranks(2, |c| {
            let node = Node::over(Box::new(c));
            let (me, peer) = (node.rank, 1 - node.rank);
            let lens = [[FOUR, THREE], [2 * WHOLE, THREE]][me as usize];
            let steps: Vec<_> = (lens.iter())
                .map(|&len| (pieces(0, len), node.tags_with(peer, pieces(0, len).len())))
                .collect();
            // The sender posts everything first: the receiver matches, and aborts.
            let mut ended = None;
            for round in 0..2 {
                for (k, (ps, tags)) in steps.iter().enumerate().filter(|_| round == me) {
                    let stamp = Stamp {
                        entries: k as u64 + 1,
                        digest: 0x5eed,
                    };
                    // Leaked: messages left unmatched keep their pointers.
                    let buf: &'static mut [u8] = vec![k as u8; FOUR].leak();
                    for (i, (p, tag)) in ps.iter().zip(tags.clone()).enumerate() {
                        let ptr = buf.as_mut_ptr() as usize + p.start;
                        let dir = [Direction::Send, Direction::Recv][me as usize];
                        let t = message(dir, peer, tag, ptr, p, stamp, CL_COMPLETE);
                        if ended.is_none() && !post(&node, t) {
                            ended = Some((k, i));
                        }
                    }
                }
                node.all_gather(&[]);
            }
            (steps.into_iter().map(|(_, t)| t).collect::<Vec<_>>(), ended)
        });
        let [sent, got] = [&results[0], &results[1]].map(|r| r.as_ref().expect("finished"));
        assert_eq!(sent, &(vec![0..4, 4..7], None));
        assert_eq!(got.0, vec![0..2, 2..5]);
        assert_eq!(
            got.1,
            Some((1, 0)),
            "the second command's first piece ends the job"
        );
    }
}
