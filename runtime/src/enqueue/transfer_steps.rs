//! Step 3: the transfer steps the scheduler plans for a command, so that the ranges it
//! reads are valid where it runs. Each step is this rank's part of Table IV.1
//! (`docs/scheduler.md`): [`plan`] decides the part and takes the tags of every message
//! it exchanges; [`transfer`] runs it: nothing, a vendor copy, read or write here
//! (`transfer_queue`), or the pieces of a cross-rank transfer, one function per
//! direction.
//!
//! Runs under the scheduler lock, in schedule order, on every rank alike, so the two
//! ranks of a pair plan the same steps in the same order and agree on their tags.

use super::root_arc;
use super::transfer_queue::{local_copy, local_transfer, Way};
use crate::cl::*;
use crate::cluster::node::What;
use crate::enqueue::remote::{self, HostSpan};
use crate::native::staging::{self, Staging};
use crate::objects::context::{new_stream, Context};
use crate::objects::device::Device;
use crate::objects::event::Event;
use crate::objects::memory::{Buffer, SentRead};
use crate::observe::stats::{add, COUNTERS};
use crate::ClResult;
use mirrorcl_scheduler::{Location, Mode, Step};
use std::ops::Range;
use std::sync::Arc;

/// Submits one planned transfer step; returns its stream and event. What this rank does
/// follows Table IV.1 (`docs/scheduler.md`): a local copy, a read and a send, a receive
/// and a write, or nothing (an event that is complete at once).
pub(super) fn transfer(
    ctx: &Arc<Context>,
    buffers: &[(Arc<Buffer>, Range<usize>, Mode)],
    step: &Step,
    deps: Vec<Arc<Event>>,
) -> (u64, Arc<Event>) {
    let (stream, event, _) = transfer_landing(ctx, buffers, step, deps);
    (stream, event)
}

/// The bytes a step received from another rank in one piece, in host memory until the
/// step's write and whatever else takes them from there are done: a copy out of the
/// received range may write its destination straight from them (`submit`).
pub(super) struct Landed {
    pub block: Arc<Staging>,
    /// The receive: done once the bytes are in `block`.
    pub received: Arc<Event>,
    pub buffer: mirrorcl_scheduler::BufferId,
    /// In the root buffer.
    pub range: Range<u64>,
}

/// `transfer`, and where the bytes of a one-piece receive landed.
pub(super) fn transfer_landing(
    ctx: &Arc<Context>,
    buffers: &[(Arc<Buffer>, Range<usize>, Mode)],
    step: &Step,
    deps: Vec<Arc<Event>>,
) -> (u64, Arc<Event>, Option<Landed>) {
    let mut landed = None;
    let offset = step.range.start as usize;
    let len = (step.range.end - step.range.start) as usize;
    let root = buffers
        .iter()
        .find(|(b, _, _)| b.id == step.buffer)
        .map(|(b, _, _)| root_arc(b))
        .expect("steps are planned for the command's own buffers");
    if let Location::Device(d) = step.to {
        root.wrote_on(d);
    }
    let pieces = root.transfer_pieces(offset, len);
    tracing::trace!(
        "step: buffer {} {:?} {:?} -> {:?}",
        step.buffer,
        step.range,
        step.from,
        step.to
    );
    let bytes = StepBytes {
        ctx,
        root: &root,
        step,
        offset,
        len,
        pieces: &pieces,
        stamp: crate::cluster::history::stamp(),
    };
    let copy = |rc| (CL_COMMAND_COPY_BUFFER, rc);
    let read = |rc| (CL_COMMAND_READ_BUFFER, rc);
    let result = match plan(ctx, step, pieces.len()) {
        Part::Nothing => {
            let (stream, event) = nothing(ctx);
            return (stream, event, None);
        }
        Part::Copy { src, dst } => {
            add(&COUNTERS.local_copies, 1);
            local_copy(ctx, &src, &dst, &root, offset, len, deps).map_err(copy)
        }
        Part::WriteFromHostCopy { dst } => {
            write_from_host_copy(&bytes, &dst, deps).map_err(|rc| (CL_COMMAND_WRITE_BUFFER, rc))
        }
        Part::ReadIntoHostCopy { src } => read_into_host_copy(&bytes, &src, deps).map_err(read),
        Part::SendToDevice { src, to, tags } => {
            // The destination's instance is the other rank's to order: ordered here
            // after its accesses (bookkeeping on this rank), the read another rank
            // waits for was held until the previous copy's bookkeeping completed, after
            // the issuer's other completions (IV.7.2 at 4 ranks on H200: some 20 µs an
            // iteration on every rank's path).
            let mut deps = deps;
            deps.truncate(step.source_deps);
            send_to_device(&bytes, &src, to, tags, deps).map_err(copy)
        }
        Part::ReceiveIntoDevice { dst, from, tags } => {
            receive_into_device(&bytes, &dst, from, tags, deps, &mut landed).map_err(copy)
        }
        Part::ShareHostCopy { src, firsts } => {
            share_host_copy(&bytes, &src, firsts, deps).map_err(read)
        }
        Part::ReceiveHostCopy {
            from,
            tags,
            forward,
        } => receive_host_copy(&bytes, from, tags, forward, deps).map_err(read),
    };
    match result {
        Ok(e) => (e.stream, e, landed),
        Err((command_type, rc)) => {
            let (stream, event) = failed(ctx, command_type, rc);
            (stream, event, None)
        }
    }
}

/// This rank's part in one step (Table IV.1), with the tags of the messages it exchanges:
/// one per piece with each peer, in piece order.
enum Part {
    /// The step does not involve this rank.
    Nothing,
    /// Between two devices of this rank: a vendor copy.
    Copy { src: Arc<Device>, dst: Arc<Device> },
    /// From the host copy to a device of this rank: a vendor write.
    WriteFromHostCopy { dst: Arc<Device> },
    /// From a device to the host copy in a cluster of one: a vendor read.
    ReadIntoHostCopy { src: Arc<Device> },
    /// From a device of this rank to another rank's: read each piece and send it.
    SendToDevice {
        src: Arc<Device>,
        to: u32,
        tags: Range<u64>,
    },
    /// From another rank's device to one of this rank: receive each piece and write it.
    ReceiveIntoDevice {
        dst: Arc<Device>,
        from: u32,
        tags: Range<u64>,
    },
    /// From a device of this rank to the host copy, which every rank holds: read each
    /// piece into this rank's and send it to the ranks the relay names (each with the
    /// tag of the first piece).
    ShareHostCopy {
        src: Arc<Device>,
        firsts: Vec<(u32, u64)>,
    },
    /// From another rank's device to the host copy: receive each piece into this rank's
    /// from the rank the relay names, and pass it on to those it names in turn.
    ReceiveHostCopy {
        from: u32,
        tags: Range<u64>,
        forward: Vec<(u32, u64)>,
    },
}

/// Decides this rank's part in a step of `pieces` pieces, and takes the tags of all its
/// messages: here only, before anything can fail, so that this rank and its peer advance
/// their pair's counter alike (the peer's part takes as many for the same step).
fn plan(ctx: &Arc<Context>, step: &Step, pieces: usize) -> Part {
    let node = crate::cluster::node::node();
    let device_of = |l: Location| match l {
        Location::Device(d) => Some(
            ctx.device_by_index(d)
                .expect("the scheduler only plans the context's devices")
                .clone(),
        ),
        Location::Host => None,
    };
    match (device_of(step.from), device_of(step.to)) {
        (Some(s), Some(d)) if s.owner != d.owner && s.local() => Part::SendToDevice {
            to: d.owner,
            tags: node.tags_with(d.owner, pieces),
            src: s,
        },
        (Some(s), Some(d)) if s.owner != d.owner && d.local() => Part::ReceiveIntoDevice {
            from: s.owner,
            tags: node.tags_with(s.owner, pieces),
            dst: d,
        },
        (Some(s), Some(d)) if s.owner == d.owner && s.local() => Part::Copy { src: s, dst: d },
        (Some(_), Some(_)) => Part::Nothing,
        (None, Some(d)) if d.local() => Part::WriteFromHostCopy { dst: d },
        (None, Some(_)) => Part::Nothing,
        (Some(s), None) if s.local() && !node.is_cluster() => Part::ReadIntoHostCopy { src: s },
        (Some(s), None) => {
            let len = step.range.end - step.range.start;
            let relay = remote::relay(s.owner, len, pieces);
            match relay.from {
                None => Part::ShareHostCopy {
                    src: s,
                    firsts: relay.to,
                },
                Some((from, tags)) => Part::ReceiveHostCopy {
                    from,
                    tags,
                    forward: relay.to,
                },
            }
        }
        (None, None) => unreachable!("the host copy never transfers to itself"),
    }
}

/// The bytes a step moves: a range of its root buffer, in pieces.
struct StepBytes<'a> {
    ctx: &'a Arc<Context>,
    root: &'a Arc<Buffer>,
    step: &'a Step,
    offset: usize,
    len: usize,
    pieces: &'a [Range<usize>],
    /// Where this rank stood when it planned the step: its messages carry it.
    stamp: crate::cluster::history::Stamp,
}

impl StepBytes<'_> {
    /// What a piece's message is for, for the deadline diagnostic.
    fn what(&self, piece: &Range<usize>) -> What {
        What {
            command: "a planned transfer",
            buffer: self.step.buffer,
            offset: piece.start as u64,
            len: piece.len() as u64,
            stamp: self.stamp,
        }
    }

    /// Pieces `from..` fail on this sending rank with `rc`: each peer gets the failure
    /// in place of the bytes (`tag_of(peer, i)` gives piece i's tag).
    fn fail_sends(&self, from: usize, peers: &[(u32, u64)], rc: cl_int) -> cl_int {
        for (i, piece) in self.pieces.iter().enumerate().skip(from) {
            let tags = peers.iter().map(|&(peer, first)| (peer, first + i as u64));
            remote::send_failure(tags, rc, piece.len(), self.what(piece));
        }
        rc
    }

    /// Pieces `from..` fail on this receiving rank with `rc`: their messages are
    /// consumed and dropped, so that the sender completes.
    fn fail_receives(&self, from: usize, peer: u32, first: u64, rc: cl_int) -> cl_int {
        for (i, piece) in self.pieces.iter().enumerate().skip(from) {
            remote::discard(peer, first + i as u64, piece.len(), self.what(piece));
        }
        rc
    }

    /// The staging blocks one side of a transfer between devices cycles its pieces
    /// through, page-locked for `device` where it can.
    fn staging_blocks(&self, device: &Device) -> ClResult<Vec<Arc<Staging>>> {
        // An image's pieces are whole rows, which may exceed the usual piece size.
        let size = self.pieces.iter().map(Range::len).max().unwrap_or(0);
        (0..staging::WINDOW.min(self.pieces.len()))
            .map(|_| staging_near(self.ctx, device, size))
            .collect()
    }
}

/// A staging block of `len` bytes that `device` reads into or writes from: page-locked
/// where its vendor context has a pool.
fn staging_near(ctx: &Context, device: &Device, len: usize) -> ClResult<Arc<Staging>> {
    match ctx.pinned(device) {
        Some(p) => Staging::near(len, p),
        None => Staging::new(len),
    }
}

/// Writes the step's range of the host copy to a device of this rank.
fn write_from_host_copy(
    bytes: &StepBytes,
    dst: &Arc<Device>,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let (offset, len) = (bytes.offset, bytes.len);
    add(&COUNTERS.local_copies, 1);
    let host = bytes.root.host_copy()? as usize;
    local_transfer(
        bytes.ctx,
        dst,
        bytes.root,
        Way::Write,
        offset,
        len,
        host + offset,
        deps,
    )
}

/// Reads the step's range from a device into the host copy, in a cluster of one (in a
/// cluster, [`share_host_copy`]).
fn read_into_host_copy(
    bytes: &StepBytes,
    src: &Arc<Device>,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let (offset, len) = (bytes.offset, bytes.len);
    let host = bytes.root.host_copy()? as usize;
    add(&COUNTERS.local_copies, 1);
    local_transfer(
        bytes.ctx,
        src,
        bytes.root,
        Way::Read,
        offset,
        len,
        host + offset,
        deps,
    )
}

/// Reads each piece into a staging block and sends it to the destination's owner; a
/// block is reused once its piece has been sent.
fn send_to_device(
    bytes: &StepBytes,
    src: &Arc<Device>,
    to: u32,
    tags: Range<u64>,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let ctx = bytes.ctx;
    let peer = [(to, tags.start)];
    let mut shared = shared_read(bytes, src);
    let only_read = Way::read_of(bytes.pieces.len());
    let blocks = match &shared {
        Some((_, block)) => vec![block.clone()],
        None => bytes
            .staging_blocks(src)
            .map_err(|rc| bytes.fail_sends(0, &peer, rc))?,
    };
    let all_sent = Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, new_stream());
    let arrive = remote::join(all_sent.clone(), bytes.pieces.len());
    let mut sent: Vec<Arc<Event>> = Vec::new();
    for ((i, piece), tag) in bytes.pieces.iter().enumerate().zip(tags) {
        let block = blocks[i % blocks.len()].clone();
        let mut piece_deps = deps.clone();
        if i >= blocks.len() {
            piece_deps.push(sent[i - blocks.len()].clone());
        }
        let read = match shared.take() {
            Some((read, _)) => read,
            None => {
                let read = local_transfer(
                    ctx,
                    src,
                    bytes.root,
                    only_read,
                    piece.start,
                    piece.len(),
                    block.addr(),
                    piece_deps,
                )
                .map_err(|rc| bytes.fail_sends(i, &peer, rc))?;
                if bytes.pieces.len() == 1 {
                    bytes.root.note_sent_read(SentRead {
                        device: src.index,
                        range: piece.clone(),
                        read: read.clone(),
                        block: Arc::downgrade(&block),
                        unsent: false,
                    });
                }
                read
            }
        };
        let piece_sent = Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, read.stream);
        let span = HostSpan::Contiguous {
            ptr: block.addr(),
            len: piece.len(),
        };
        remote::send_when_done(
            &read,
            piece_sent.clone(),
            vec![(to, tag)],
            span,
            bytes.what(piece),
            Some(block),
        );
        let arrive = arrive.clone();
        piece_sent.on_done(arrive);
        sent.push(piece_sent);
    }
    Ok(all_sent)
}

/// Reads `range` of `root` off `device` into a staging block ahead of the sends that
/// its last sends predict (`SentReads::last`), and notes the read for them to share:
/// an all-to-all's own piece (a small local copy) then lands from the read that feeds
/// the other ranks, where a device copy would be one vendor command more on the
/// device's issuer every iteration. `deps`: the copy's, which the read waits for too.
pub(super) fn read_for_predicted_sends(
    ctx: &Arc<Context>,
    device: &Arc<Device>,
    root: &Arc<Buffer>,
    range: Range<usize>,
    deps: Vec<Arc<Event>>,
) -> Option<(Arc<Event>, Arc<Staging>)> {
    if root.sent_read.lock().last != Some((device.index, range.clone())) {
        return None;
    }
    let block = staging_near(ctx, device, range.len()).ok()?;
    let read = local_transfer(
        ctx,
        device,
        root,
        Way::OnlyRead,
        range.start,
        range.len(),
        block.addr(),
        deps,
    )
    .ok()?;
    // Until the read is done, whatever becomes of the copy.
    read.keep(block.clone());
    // The sends it is for wait on it, as on any read they share.
    read.mark_urgent();
    add(&COUNTERS.reads_ahead, 1);
    root.note_sent_read(SentRead {
        device: device.index,
        range,
        read: read.clone(),
        block: Arc::downgrade(&block),
        unsent: true,
    });
    Some((read, block))
}

/// The read and block of an earlier one-piece send of the same bytes of `src`, while a
/// send still holds the block: an all-to-all sends each source to every other rank, and
/// reads it once.
fn shared_read(bytes: &StepBytes, src: &Device) -> Option<(Arc<Event>, Arc<Staging>)> {
    let [piece] = bytes.pieces else {
        return None;
    };
    let mut guard = bytes.root.sent_read.lock();
    let s = guard.current.as_mut()?;
    if s.device != src.index || s.range != *piece {
        return None;
    }
    let shared = (s.read.clone(), s.block.upgrade()?);
    s.unsent = false;
    Some(shared)
}

/// Receives each piece into a staging block and writes it to the device; a block is
/// received into again once its previous piece is written.
fn receive_into_device(
    bytes: &StepBytes,
    dst: &Arc<Device>,
    from: u32,
    tags: Range<u64>,
    deps: Vec<Arc<Event>>,
    landed: &mut Option<Landed>,
) -> ClResult<Arc<Event>> {
    let ctx = bytes.ctx;
    let first = tags.start;
    let blocks = bytes
        .staging_blocks(dst)
        .map_err(|rc| bytes.fail_receives(0, from, first, rc))?;
    let mut writes: Vec<Arc<Event>> = Vec::new();
    for ((i, piece), tag) in bytes.pieces.iter().enumerate().zip(tags) {
        let block = blocks[i % blocks.len()].clone();
        let received = Event::new(ctx.clone(), None, CL_COMMAND_COPY_BUFFER, new_stream());
        let span = HostSpan::Contiguous {
            ptr: block.addr(),
            len: piece.len(),
        };
        let free = if i >= blocks.len() {
            vec![writes[i - blocks.len()].clone()]
        } else {
            Vec::new()
        };
        remote::receive_after(
            free,
            received.clone(),
            from,
            tag,
            span,
            bytes.what(piece),
            Some(block.clone()),
        );
        let mut piece_deps = deps.clone();
        if bytes.pieces.len() == 1 {
            *landed = Some(Landed {
                block: block.clone(),
                received: received.clone(),
                buffer: bytes.step.buffer,
                range: bytes.step.range.clone(),
            });
            if bytes.step.pass_through {
                // For the one copy that takes the bytes from the block: no replica.
                return Ok(received);
            }
        }
        piece_deps.push(received);
        let write = local_transfer(
            ctx,
            dst,
            bytes.root,
            Way::Write,
            piece.start,
            piece.len(),
            block.addr(),
            piece_deps,
        )
        .map_err(|rc| bytes.fail_receives(i + 1, from, first, rc))?;
        write.keep(block);
        writes.push(write);
    }
    // The transfer queue is in order: the last write completes last.
    Ok(writes.pop().expect("at least one piece"))
}

/// The host copy is replicated: this rank, the owner, reads each piece into its own and
/// sends it to the first ranks of the relay (`mirrorcl_scheduler::relay`), which receive
/// into theirs and pass it on ([`receive_host_copy`]).
fn share_host_copy(
    bytes: &StepBytes,
    src: &Arc<Device>,
    mut firsts: Vec<(u32, u64)>,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let (ctx, root) = (bytes.ctx, bytes.root);
    let host = root
        .host_copy()
        .map_err(|rc| bytes.fail_sends(0, &firsts, rc))? as usize;
    let done = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
    let arrive = remote::join(done.clone(), bytes.pieces.len());
    let only_read = Way::read_of(bytes.pieces.len());
    for (i, piece) in bytes.pieces.iter().enumerate() {
        let span = HostSpan::Contiguous {
            ptr: host + piece.start,
            len: piece.len(),
        };
        let piece_done = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
        let read = local_transfer(
            ctx,
            src,
            root,
            only_read,
            piece.start,
            piece.len(),
            host + piece.start,
            deps.clone(),
        )
        .map_err(|rc| bytes.fail_sends(i, &firsts, rc))?;
        remote::send_when_done(
            &read,
            piece_done.clone(),
            piece_peers(&mut firsts, i, bytes.pieces.len()),
            span,
            bytes.what(piece),
            Some(root.clone()),
        );
        let arrive = arrive.clone();
        piece_done.on_done(arrive);
    }
    Ok(done)
}

/// Every other rank with its tag for piece `i` of `n` (its first tag plus `i`); the last
/// piece takes `firsts` itself.
fn piece_peers(firsts: &mut Vec<(u32, u64)>, i: usize, n: usize) -> Vec<(u32, u64)> {
    let shift = i as u64;
    if i + 1 == n {
        let mut last = std::mem::take(firsts);
        last.iter_mut().for_each(|(_, tag)| *tag += shift);
        last
    } else {
        firsts.iter().map(|&(r, tag)| (r, tag + shift)).collect()
    }
}

/// The other side of [`share_host_copy`]: each piece from the rank before this one in
/// the relay into this rank's host copy, once `deps` (the host copy's earlier readers
/// and writers) are done, then on to the ranks after it (`forward`, each with the tag of
/// the first piece). The step is done here when its pieces have arrived and left.
fn receive_host_copy(
    bytes: &StepBytes,
    from: u32,
    tags: Range<u64>,
    mut forward: Vec<(u32, u64)>,
    deps: Vec<Arc<Event>>,
) -> ClResult<Arc<Event>> {
    let (ctx, root) = (bytes.ctx, bytes.root);
    let host = root.host_copy().map_err(|rc| {
        bytes.fail_sends(0, &forward, rc);
        bytes.fail_receives(0, from, tags.start, rc)
    })? as usize;
    let done = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
    let arrive = remote::join(done.clone(), bytes.pieces.len());
    let n = bytes.pieces.len();
    for (i, (piece, tag)) in bytes.pieces.iter().zip(tags).enumerate() {
        let span = HostSpan::Contiguous {
            ptr: host + piece.start,
            len: piece.len(),
        };
        let received = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
        remote::receive_after(
            deps.clone(),
            received.clone(),
            from,
            tag,
            span,
            bytes.what(piece),
            Some(root.clone()),
        );
        // A rank at the end of the relay is done with a piece when it has arrived.
        let piece_done = if forward.is_empty() {
            received
        } else {
            // A failed arrival is passed on as the failure, without bytes.
            let sent = Event::new(ctx.clone(), None, CL_COMMAND_READ_BUFFER, new_stream());
            remote::send_when_done(
                &received,
                sent.clone(),
                piece_peers(&mut forward, i, n),
                span,
                bytes.what(piece),
                Some(root.clone()),
            );
            sent
        };
        piece_done.on_done(arrive.clone());
    }
    Ok(done)
}

/// A step with no part on this rank: an event complete at once.
fn nothing(ctx: &Arc<Context>) -> (u64, Arc<Event>) {
    let event = Event::new(ctx.clone(), None, CL_COMMAND_MARKER, new_stream());
    event.complete(CL_COMPLETE);
    (event.stream, event)
}

/// A step that failed on this rank before reaching a vendor: an event failed with `rc`.
fn failed(ctx: &Arc<Context>, command_type: cl_command_type, rc: cl_int) -> (u64, Arc<Event>) {
    let event = Event::new(ctx.clone(), None, command_type, new_stream());
    event.complete(rc);
    (event.stream, event)
}
