//! An in-process communicator: N ranks as threads of one process, for unit tests of what
//! crosses between ranks. Collectives meet at a shared slot table; transfers are matched
//! by (sender, receiver, tag) like MPI's, whichever end is posted first, and copied when
//! both are there.

use super::{arrival, describe, divergence_report, Arrival, Communicator, Direction, Header};
use super::{Place, Transfer};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// One rank of an in-process group.
pub struct Local {
    place: Place,
    shared: Arc<Shared>,
}

struct Shared {
    gather: Mutex<Gather>,
    gathered: Condvar,
    transfers: Mutex<Matching>,
}

struct Gather {
    /// Completed collectives so far.
    round: u64,
    slots: Vec<Option<Vec<u8>>>,
    /// The last round's result, kept until every rank has arrived for the next one.
    last: Arc<Vec<Vec<u8>>>,
}

/// (sender, receiver, tag) of a message.
type Key = (u32, u32, u64);

#[derive(Default)]
struct Matching {
    waiting: HashMap<Key, VecDeque<(Transfer, Instant)>>,
}

impl Local {
    /// `n` connected ranks, in rank order; each goes to its own thread.
    pub fn group(n: u32) -> Vec<Local> {
        let shared = Arc::new(Shared {
            gather: Mutex::new(Gather {
                round: 0,
                slots: vec![None; n as usize],
                last: Arc::new(Vec::new()),
            }),
            gathered: Condvar::new(),
            transfers: Mutex::new(Matching::default()),
        });
        (0..n)
            .map(|rank| Local {
                place: Place {
                    rank,
                    size: n,
                    local_rank: rank,
                    local_size: n,
                    host: "localhost".into(),
                },
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Communicator for Local {
    fn place(&self) -> &Place {
        &self.place
    }

    fn can_communicate(&self) -> bool {
        true
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let mut g = self.shared.gather.lock();
        let round = g.round;
        g.slots[self.place.rank as usize] = Some(mine.to_vec());
        if g.slots.iter().all(Option::is_some) {
            g.last = Arc::new(
                g.slots
                    .iter_mut()
                    .map(|s| s.take().unwrap_or_default())
                    .collect(),
            );
            g.round += 1;
            self.shared.gathered.notify_all();
        } else {
            while g.round == round {
                self.shared.gathered.wait(&mut g);
            }
        }
        g.last.as_ref().clone()
    }

    fn transfer(&self, t: Transfer) {
        let me = self.place.rank;
        let sending = t.direction == Direction::Send;
        let key = if sending {
            (me, t.peer, t.tag)
        } else {
            (t.peer, me, t.tag)
        };
        let matched = {
            let mut m = self.shared.transfers.lock();
            let queue = m.waiting.entry(key).or_default();
            match queue.front() {
                Some((q, _)) if (q.direction == Direction::Send) != sending => {
                    queue.pop_front().map(|(q, _)| q)
                }
                _ => {
                    queue.push_back((t, Instant::now()));
                    return;
                }
            }
        };
        let Some(peer) = matched else { return };
        let (send, recv) = if sending { (t, peer) } else { (peer, t) };
        // As MPI: a receive takes a message no longer than its buffer; a failed send
        // carries no bytes, a discarding receive takes none.
        let bytes = if send.status >= 0 { send.len } else { 0 };
        let room = if recv.direction == Direction::Discard {
            0
        } else {
            recv.len
        };
        let ok = bytes <= room;
        if ok && bytes > 0 {
            // SAFETY: both posters keep their `len` bytes at `ptr` valid until `done`
            // (the `Transfer` contract), and a send buffer and a receive buffer of two
            // transfers do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(send.ptr as *const u8, recv.ptr as *mut u8, bytes)
            };
        }
        let status = match arrival(&recv, &Header::of(&send), ok) {
            Arrival::Status(s) => s,
            Arrival::Diverged(text) => {
                crate::diag!("{}", divergence_report(send.peer, recv.peer, &text, None));
                self.abort()
            }
        };
        (send.done)(0);
        (recv.done)(status);
    }

    fn pending_report(&self) -> Vec<String> {
        let me = self.place.rank;
        let m = self.shared.transfers.lock();
        m.waiting
            .iter()
            .flat_map(|(&(from, to, _), q)| q.iter().map(move |e| (from, to, e)))
            .filter(|(from, to, (t, _))| match t.direction {
                Direction::Send => *from == me,
                Direction::Recv | Direction::Discard => *to == me,
            })
            .map(|(_, _, (t, since))| describe(t.direction, t.peer, &t.what, since.elapsed()))
            .collect()
    }

    /// Ends the test thread of this rank (there is no C boundary here).
    fn abort(&self) -> ! {
        panic!("rank {} aborted the in-process job", self.place.rank)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::comm::What;
    use crate::cluster::history::Stamp;
    use std::sync::mpsc;

    /// Runs `f` on every rank of an `n`-rank group, each on its own thread; their
    /// results in rank order.
    pub fn on_ranks<T: Send + 'static>(
        n: u32,
        f: impl Fn(Local) -> T + Send + Sync + 'static,
    ) -> Vec<std::thread::Result<T>> {
        let f = Arc::new(f);
        let threads: Vec<_> = Local::group(n)
            .into_iter()
            .map(|c| {
                let f = f.clone();
                std::thread::spawn(move || f(c))
            })
            .collect();
        threads.into_iter().map(|t| t.join()).collect()
    }

    #[test]
    fn all_gather_of_different_sizes_among_one_to_four_ranks() {
        for n in 1..=4u32 {
            let results = on_ranks(n, |c| {
                let r = c.place().rank as usize;
                // Several rounds back to back: a fast rank must not see a slow one's
                // earlier round.
                (0..20)
                    .map(|round| c.all_gather(&vec![r as u8; r * 1000 + round]))
                    .collect::<Vec<_>>()
            });
            for got in results {
                let got = got.expect("no rank panicked");
                for (round, all) in got.iter().enumerate() {
                    let want: Vec<Vec<u8>> = (0..n as usize)
                        .map(|r| vec![r as u8; r * 1000 + round])
                        .collect();
                    assert_eq!(all, &want, "{n} ranks, round {round}");
                }
            }
        }
    }

    fn what() -> What {
        What {
            command: "test",
            buffer: 1,
            offset: 0,
            len: 0,
            stamp: Stamp::default(),
        }
    }

    /// Posts a transfer of `buf` (planned at `stamp`, failed with `status` if a send)
    /// and returns where its outcome arrives.
    fn post_as(
        c: &Local,
        direction: Direction,
        peer: u32,
        tag: u64,
        buf: &mut [u8],
        stamp: Stamp,
        status: i32,
    ) -> mpsc::Receiver<i32> {
        let (tx, rx) = mpsc::channel();
        c.transfer(Transfer {
            direction,
            peer,
            tag,
            ptr: buf.as_mut_ptr() as usize,
            len: buf.len(),
            what: What { stamp, ..what() },
            status,
            done: Box::new(move |status| {
                let _ = tx.send(status);
            }),
        });
        rx
    }

    /// [`post_as`] of a transfer that succeeds, planned alike everywhere: whether it did.
    fn post(
        c: &Local,
        direction: Direction,
        peer: u32,
        tag: u64,
        buf: &mut [u8],
    ) -> mpsc::Receiver<bool> {
        let outcome = post_as(c, direction, peer, tag, buf, Stamp::default(), 0);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            if let Ok(status) = outcome.recv() {
                let _ = tx.send(status == 0);
            }
        });
        rx
    }

    #[test]
    fn sends_meet_receives_by_tag_in_any_posting_order() {
        // Each rank sends every peer one message per tag. Odd ranks post their receives
        // first, even ones their sends; rank 0 goes through the tags backwards.
        let results = on_ranks(3, |c| {
            let me = c.place().rank;
            let len = |from: u32, tag: u64| 100 * (tag as usize + 1) + from as usize;
            let fill = |from: u32, tag: u64| (from * 16 + tag as u32) as u8;
            let mut posts = Vec::new();
            for p in (0..3).filter(|&p| p != me) {
                for tag in 0..6 {
                    posts.push((Direction::Send, p, tag, vec![fill(me, tag); len(me, tag)]));
                    posts.push((Direction::Recv, p, tag, vec![0u8; len(p, tag)]));
                }
            }
            let first = [Direction::Send, Direction::Recv][me as usize % 2];
            posts.sort_by_key(|(d, _, tag, _)| (*d != first, if me == 0 { 5 - tag } else { *tag }));
            let outcomes: Vec<_> = (posts.iter_mut())
                .map(|(d, p, tag, buf)| post(&c, *d, *p, *tag, buf))
                .collect();
            // The buffers live until every outcome is in.
            let all_ok = outcomes.iter().all(|rx| rx.recv() == Ok(true));
            let right = (posts.iter())
                .filter(|(d, ..)| *d == Direction::Recv)
                .all(|(_, p, tag, buf)| buf.iter().all(|&b| b == fill(*p, *tag)));
            all_ok && right && c.pending_report().is_empty()
        });
        assert!(results.into_iter().all(|r| r.expect("no rank panicked")));
    }

    #[test]
    fn an_unmatched_transfer_is_pending_until_its_peer_posts() {
        let results = on_ranks(2, |c| {
            let me = c.place().rank;
            let mut buf = vec![me as u8; 8];
            let rx = post(&c, Direction::Recv, 1 - me, 99, &mut buf);
            c.all_gather(&[]);
            let report = c.pending_report();
            c.all_gather(&[]);
            let mut out = vec![0u8; 8];
            let sent = post(&c, Direction::Send, 1 - me, 99, &mut out);
            (report, rx.recv().unwrap() && sent.recv().unwrap())
        });
        for got in results {
            let (report, ok) = got.expect("no rank panicked");
            assert_eq!(report.len(), 1, "{report:?}");
            assert!(report[0].starts_with("receive of bytes 0..0 of buffer #1 from rank"));
            assert!(ok);
        }
    }

    #[test]
    fn a_failed_send_reaches_its_receiver_and_a_discard_completes_its_sender() {
        let results = on_ranks(2, |c| {
            let me = c.place().rank;
            let mut buf = vec![7u8; 64];
            let mut next = vec![9u8; 64];
            let stamp = Stamp::default();
            if me == 0 {
                // Tag 1: failed before it could read; tag 2: a discarded message; tag 3:
                // the next transfer between the pair, which must carry its own bytes.
                let failed = post_as(&c, Direction::Send, 1, 1, &mut buf, stamp, -4);
                let dropped = post_as(&c, Direction::Send, 1, 2, &mut buf, stamp, 0);
                let after = post_as(&c, Direction::Send, 1, 3, &mut next, stamp, 0);
                let statuses = [failed.recv(), dropped.recv(), after.recv()];
                (statuses.map(|s| s.unwrap()), buf, next)
            } else {
                let mut other = vec![0u8; 64];
                let mut after_buf = vec![0u8; 64];
                let failed = post_as(&c, Direction::Recv, 0, 1, &mut buf, stamp, 0);
                let dropped = post_as(&c, Direction::Discard, 0, 2, &mut other, stamp, 0);
                let after = post_as(&c, Direction::Recv, 0, 3, &mut after_buf, stamp, 0);
                let statuses = [failed.recv(), dropped.recv(), after.recv()];
                (statuses.map(|s| s.unwrap()), other, after_buf)
            }
        });
        let (sent, _, _) = results[0].as_ref().expect("rank 0 finished");
        assert_eq!(*sent, [0, 0, 0], "every send completes");
        let (got, other, after) = results[1].as_ref().expect("rank 1 finished");
        assert_eq!(got[0], -4, "the receive fails with the sender's failure");
        assert_eq!(got[1], -5, "a discarded receive fails here");
        assert!(other.iter().all(|&b| b == 0), "a discard takes no bytes");
        assert_eq!(got[2], 0, "the next transfer succeeds");
        assert!(after.iter().all(|&b| b == 9), "with its own bytes");
    }

    #[test]
    fn a_message_planned_elsewhere_in_the_call_sequence_ends_the_job() {
        for (stamps, lens) in [
            // Another point of the call sequence.
            ([(3, 0xa), (4, 0xb)], [16, 16]),
            // The same point, other bytes (a buffer of another size).
            ([(3, 0xa), (3, 0xa)], [16, 24]),
        ] {
            let results = on_ranks(2, move |c| {
                let me = c.place().rank as usize;
                let (entries, digest) = stamps[me];
                let stamp = Stamp { entries, digest };
                let mut buf = vec![1u8; lens[me]];
                let dir = [Direction::Send, Direction::Recv][me];
                post_as(&c, dir, 1 - me as u32, 5, &mut buf, stamp, 0).recv()
            });
            let aborted = results.iter().filter(|r| r.is_err()).count();
            assert_eq!(aborted, 1, "the rank that matched the pair aborts the job");
        }
    }
}
