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
use crate::native::staging::Staging;
use crate::objects::context::new_stream;
use crate::objects::event::Event;
use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

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
    use crate::native::staging::{pieces, WHOLE};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    // Cross-rank transfers in pieces over the in-process communicator: two ranks
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
