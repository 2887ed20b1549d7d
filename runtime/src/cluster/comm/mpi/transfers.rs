//! One transfer as MPI requests: how its header and bytes are posted (packed with the
//! header, framed, or as messages of their own), and its completion.

use super::*;

pub(super) struct Active {
    pub(super) requests: Vec<ffi::MPI_Request>,
    /// The header sent or received, followed by the bytes of a packed transfer or of a
    /// framed receive.
    pub(super) staged: Vec<u8>,
    /// A receive whose bytes arrive in `staged` after the header (one message with it,
    /// or framed), copied into place once all arrived and the header was checked.
    pub(super) packed: bool,
    /// A larger receive whose header is awaited: its bytes are received only once the
    /// header shows they are the ones planned (a longer message truncated into a
    /// shorter buffer is not safe in every MPI).
    pub(super) awaiting_header: bool,
    /// A framed receive whose header (its first request) is not checked yet: checked as
    /// soon as it is in, so that a sender whose plan differs is reported rather than
    /// waited for.
    pub(super) header_unchecked: bool,
    /// The sender's status, from a header already checked.
    pub(super) sender_status: i32,
    /// Whether one of the requests failed.
    pub(super) failed: bool,
    pub(super) transfer: Option<Transfer>,
    pub(super) since: Instant,
    /// When it was posted, for the trace (0: not traced).
    pub(super) traced: u64,
}

/// Messages up to this size travel eagerly: Open MPI's shared-memory transport sends
/// larger ones by rendezvous, which took 15-20 µs between two ranks' progress threads
/// (a stencil's 8 KiB ghost row) where an eager message took about 3. Its 4 KiB eager
/// limit counts its own headers: a ping-pong of 4,040 bytes took 0.4 µs, of 4,050 and
/// more 2.3 µs (Open MPI 4.1, `btl_vader_eager_limit` 4096), so a frame of 4 KiB went
/// by rendezvous too.
const FRAME: usize = (4 << 10) - 64;

/// Transfers up to this size travel as one message, header and bytes (copied through
/// `Active::staged`): a second message per small transfer cost the IV.7.2
/// microbenchmark a fifth of its iteration on two GPUs.
const PACKED_MAX: usize = FRAME - 32;

/// A packed receive has room for a message this long: one longer than planned (the
/// replicas diverged) arrives whole, for its header to say so, rather than truncated.
const PACKED_ROOM: usize = 16 << 10;

/// Transfers up to this size move their bytes in `FRAME`s, eagerly; larger ones in
/// chunks of up to `CHUNK` (a 64 KiB copy between two H100 ranks took 72 µs in 4 KiB
/// frames, 49 in one message).
const FRAMED_MAX: usize = 16 << 10;

/// The size of the messages carrying a transfer's bytes after its header.
fn chunk_for(len: usize) -> usize {
    if len <= FRAMED_MAX {
        FRAME
    } else {
        CHUNK
    }
}

/// Blocks that receives of up to `FRAMED_MAX` bytes land in, kept by the progress thread
/// for the next receives: allocating and zeroing a fresh 16 KiB block took 10-15 µs
/// (page faults), one receive posted in a progress turn held the send of the bytes a
/// peer waited for that long, and IV.7.2 posts a receive per cross-rank copy. A
/// recycled block holds the bytes of an earlier message: only what MPI writes into it
/// is read, as the header says.
#[derive(Default)]
pub(super) struct ReceiveBlocks {
    /// Free blocks by length (a packed receive's, or a framed one's).
    free: Vec<(usize, Vec<Vec<u8>>)>,
}

/// How many free blocks of one length are kept (16 KiB each for packed receives).
const BLOCKS_KEPT: usize = 256;

impl ReceiveBlocks {
    /// A block of `len` bytes, recycled when one is free.
    fn take(&mut self, len: usize) -> Vec<u8> {
        (self.free.iter_mut())
            .find(|(l, _)| *l == len)
            .and_then(|(_, blocks)| blocks.pop())
            .unwrap_or_else(|| vec![0u8; len])
    }

    /// Keeps a finished receive's block for a later receive of its length.
    pub(super) fn give(&mut self, block: Vec<u8>) {
        let len = block.len();
        // Not a header alone, nor a discard's chunk (up to `CHUNK`).
        if len <= 32 || len > 32 + PACKED_ROOM.max(FRAMED_MAX.div_ceil(FRAME) * FRAME) {
            return;
        }
        match self.free.iter_mut().find(|(l, _)| *l == len) {
            Some((_, blocks)) if blocks.len() < BLOCKS_KEPT => blocks.push(block),
            Some(_) => {}
            None => self.free.push((len, vec![block])),
        }
    }
}

/// Posts a transfer. Up to `PACKED_MAX` bytes: one message, the header then the bytes.
/// Larger: the header, then the bytes in chunks (`chunk_for`), all with its tag
/// (MPI keeps messages of one sender and tag in order); a receive of up to
/// `FRAMED_MAX` posts its frames with the header, a larger one takes the header first
/// and posts the chunks once it is checked (`post_bytes`). Both ends decide from
/// the planned length and exchange as many chunks as it needs; a failed send's chunks
/// are empty (a failed packed send is its header alone).
pub(super) fn post(
    comm: RawComm,
    t: &Transfer,
    blocks: &mut ReceiveBlocks,
) -> Result<Active, c_int> {
    let packed = t.len <= PACKED_MAX;
    // A framed receive posts its frames with its header, into `staged`: eager frames
    // waiting for receives posted a turn after the header cost an 8 KiB row one more
    // progress turn (about 6 µs on an H100 host) per message. Each frame has room for a
    // whole frame, so that none is truncated whatever the sender planned.
    let frames = (t.direction == Direction::Recv && !packed && t.len <= FRAMED_MAX)
        .then(|| t.len.div_ceil(FRAME));
    let mut staged = match (t.direction, frames) {
        (Direction::Send, _) => Header::of(t).as_bytes().to_vec(),
        (_, Some(n)) => blocks.take(32 + n * FRAME),
        (Direction::Recv | Direction::Discard, None) if packed => blocks.take(32 + PACKED_ROOM),
        (Direction::Recv | Direction::Discard, None) => vec![0u8; 32],
    };
    if packed && t.direction == Direction::Send && t.status >= 0 && t.len > 0 {
        // SAFETY: the caller keeps `len` readable bytes at `ptr` (the `Transfer`
        // contract).
        staged.extend_from_slice(unsafe { std::slice::from_raw_parts(t.ptr as *const u8, t.len) });
    }
    let tag = mpi_tag(t.tag);
    // The vector's heap buffer stays put when `Active` moves.
    let staged_ptr = staged.as_mut_ptr();
    let mut requests = Vec::with_capacity(2);
    let mut message = |ptr: *mut u8, n: usize| -> Result<(), c_int> {
        requests.push(post_one(
            comm,
            t.direction == Direction::Send,
            ptr,
            n,
            t.peer,
            tag,
        )?);
        Ok(())
    };
    message(staged_ptr, if frames.is_some() { 32 } else { staged.len() })?;
    for k in 0..frames.unwrap_or(0) {
        // SAFETY: `staged` holds 32 bytes then `frames` frames.
        message(unsafe { staged_ptr.add(32 + k * FRAME) }, FRAME)?;
    }
    if !packed && t.direction == Direction::Send {
        let mut offset = 0usize;
        loop {
            let n = (t.len - offset).min(chunk_for(t.len));
            if t.status >= 0 {
                message((t.ptr + offset) as *mut u8, n)?;
            } else {
                message(staged_ptr, 0)?;
            }
            offset += n;
            if offset >= t.len {
                break;
            }
        }
    }
    Ok(Active {
        requests,
        staged,
        packed: packed || frames.is_some(),
        awaiting_header: !packed && frames.is_none() && t.direction != Direction::Send,
        header_unchecked: frames.is_some(),
        sender_status: 0,
        failed: false,
        transfer: None,
        since: Instant::now(),
        traced: 0,
    })
}

/// Posts one message of `n` bytes at `ptr` to or from `peer`. The caller keeps the
/// bytes valid until the request completes; `n` is at most `CHUNK`.
fn post_one(
    comm: RawComm,
    send: bool,
    ptr: *mut u8,
    n: usize,
    peer: u32,
    tag: c_int,
) -> Result<ffi::MPI_Request, c_int> {
    // SAFETY: a null request handle, filled in by MPI.
    let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
    let ptr = ptr as *mut std::ffi::c_void;
    // SAFETY: the caller keeps `n` bytes at `ptr` valid until the request completes;
    // the count fits a c_int (CHUNK).
    let rc = unsafe {
        if send {
            ffi::MPI_Isend(
                ptr,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                tag,
                comm.0,
                &mut req,
            )
        } else {
            ffi::MPI_Irecv(
                ptr,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                tag,
                comm.0,
                &mut req,
            )
        }
    };
    if rc != 0 {
        return Err(rc);
    }
    Ok(req)
}

/// The chunks of a larger receive whose header `h` was checked: into the receive's
/// memory, or, for the empty chunks of a failed send or the bytes of a discarded
/// receive, into `a.staged` (one block the size of a chunk, shared by all: what a
/// discard receives is dropped).
pub(super) fn post_bytes(
    comm: RawComm,
    t: &Transfer,
    h: &Header,
    a: &mut Active,
) -> Result<(), c_int> {
    let tag = mpi_tag(t.tag);
    let into_place = t.direction == Direction::Recv && h.status >= 0;
    if !into_place && h.status >= 0 {
        a.staged = vec![0u8; t.len.min(chunk_for(t.len))];
    }
    let mut offset = 0usize;
    loop {
        let n = (t.len - offset).min(chunk_for(t.len));
        let (ptr, count) = match (into_place, h.status >= 0) {
            (true, _) => ((t.ptr + offset) as *mut u8, n),
            (false, true) => (a.staged.as_mut_ptr(), n),
            (false, false) => (a.staged.as_mut_ptr(), 0),
        };
        let req = post_one(comm, false, ptr, count, t.peer, tag)?;
        a.requests.push(req);
        offset += n;
        if offset >= t.len {
            return Ok(());
        }
    }
}

/// Runs a transfer's completion on the progress thread. A panic there (a MirrorCL bug)
/// would end the thread every transfer depends on and leave the job hanging: it ends the
/// job instead, naming the transfer.
pub(super) fn complete(rank: u32, t: Transfer, status: i32) {
    let what = describe(t.direction, t.peer, &t.what, Duration::ZERO);
    let done = t.done;
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(status))).is_err() {
        crate::diag!(
            "MirrorCL: rank {rank}: internal error completing the {what}; aborting the job."
        );
        crate::cluster::node::node().abort();
    }
}

/// A finished send or receive, from its posting to now, in the trace.
pub(super) fn trace_message(rank: u32, t: &Transfer, posted: u64, status: i32) {
    if posted == 0 {
        return;
    }
    let send = t.direction == Direction::Send;
    let (from, to) = if send { (rank, t.peer) } else { (t.peer, rank) };
    crate::observe::trace::message(
        send,
        posted,
        crate::observe::trace::message_id(from, to, t.tag),
        crate::trace_args![
            ("peer", t.peer),
            ("tag", t.tag),
            ("bytes", t.len),
            ("status", status)
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished receive's block serves the next receive of its length, with its bytes
    /// as they were; header-only blocks and discards' chunks are not kept, nor more than
    /// `BLOCKS_KEPT` of one length.
    #[test]
    fn receive_blocks_are_recycled_by_length_and_bounded() {
        let mut blocks = ReceiveBlocks::default();
        let packed = 32 + PACKED_ROOM;
        let mut b = blocks.take(packed);
        assert_eq!(b.len(), packed);
        b[40] = 7;
        let at = b.as_ptr();
        blocks.give(b);
        let framed = blocks.take(32 + 2 * FRAME);
        assert_eq!(framed.len(), 32 + 2 * FRAME);
        assert_ne!(framed.as_ptr(), at, "another length gets its own block");
        let again = blocks.take(packed);
        assert_eq!((again.as_ptr(), again[40]), (at, 7));
        blocks.give(vec![0u8; 32]);
        blocks.give(vec![0u8; 1 << 20]);
        assert!(
            blocks
                .free
                .iter()
                .all(|(l, v)| *l == packed && v.is_empty()),
            "kept: {:?}",
            (blocks.free.iter())
                .map(|(l, v)| (*l, v.len()))
                .collect::<Vec<_>>()
        );
        for _ in 0..BLOCKS_KEPT + 10 {
            blocks.give(vec![0u8; packed]);
        }
        assert_eq!(blocks.free[0].1.len(), BLOCKS_KEPT);
    }
}
