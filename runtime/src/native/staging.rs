//! Host memory that transfers between ranks stage through: a transfer moves in pieces
//! (their sizes agreed by every rank), each piece through a block, page-locked where
//! the vendor can make it so.

use crate::cl::*;
use crate::native::{VContext, VDevice, VMem, VQueue};
use crate::ClResult;
use std::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Transfers between ranks move in pieces, so that reading one piece from a device,
/// sending another and writing a third to a device overlap, and a transfer of any size
/// stages through a few blocks only. A piece is at most this large (`MIRRORCL_PIECE_MIB`,
/// rank 0's value, set when the devices are exchanged); no message exceeds 1 GiB.
/// Never below `WHOLE` (`set_piece_max` clamps), so `piece_size`'s clamp is well formed.
/// By default the largest piece that stages through page-locked blocks (the largest
/// of `LARGE_CLASSES`): on two H200 ranks a 1 GiB copy moved at 8.7-9.1 GB/s in 4 MiB
/// pieces against 5.4-6.4 in pageable 16 MiB ones (raw MPI 5.8-6.5).
pub const PIECE_DEFAULT: usize = crate::observe::config::PIECE_DEFAULT;
const _: () = assert!(PIECE_DEFAULT == LARGE_MIN << (LARGE_CLASSES - 1));
static PIECE_MAX: AtomicUsize = AtomicUsize::new(PIECE_DEFAULT);

pub fn set_piece_max(bytes: usize) {
    PIECE_MAX.store(bytes.clamp(WHOLE, 1 << 30), Ordering::Relaxed);
}

/// Transfers up to this size move whole: below it, the cost of a piece's hand-offs
/// outweighs the overlap.
pub(crate) const WHOLE: usize = 1 << 20;

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
                && !crate::cluster::thread_state::in_callback()
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
                crate::cluster::thread_state::run_unlocked(move || pinned.map_chunk_into(class));
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
