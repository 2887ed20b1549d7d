//! An in-process communicator: N ranks as threads of one process, for unit tests of what
//! crosses between ranks. Collectives meet at a shared slot table; transfers are matched
//! by (sender, receiver, tag) like MPI's, whichever end is posted first, and copied when
//! both are there.

use super::{describe, Communicator, Direction, Place, Transfer};
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
        let (key, other) = match t.direction {
            Direction::Send => ((me, t.peer, t.tag), Direction::Recv),
            Direction::Recv => ((t.peer, me, t.tag), Direction::Send),
        };
        let matched = {
            let mut m = self.shared.transfers.lock();
            let queue = m.waiting.entry(key).or_default();
            match queue.front() {
                Some((q, _)) if q.direction == other => queue.pop_front().map(|(q, _)| q),
                _ => {
                    queue.push_back((t, Instant::now()));
                    return;
                }
            }
        };
        let Some(peer) = matched else { return };
        let (send, recv) = match t.direction {
            Direction::Send => (t, peer),
            Direction::Recv => (peer, t),
        };
        // As MPI: a receive takes a message no longer than its buffer.
        let ok = send.len <= recv.len;
        if ok && send.len > 0 {
            // SAFETY: both posters keep their `len` bytes at `ptr` valid until `done`
            // (the `Transfer` contract), and a send buffer and a receive buffer of two
            // transfers do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(send.ptr as *const u8, recv.ptr as *mut u8, send.len)
            };
        }
        (send.done)(ok);
        (recv.done)(ok);
    }

    fn pending_report(&self) -> Vec<String> {
        let me = self.place.rank;
        let m = self.shared.transfers.lock();
        m.waiting
            .iter()
            .flat_map(|(&(from, to, _), q)| q.iter().map(move |e| (from, to, e)))
            .filter(|(from, to, (t, _))| match t.direction {
                Direction::Send => *from == me,
                Direction::Recv => *to == me,
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
    use crate::comm::What;
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
        }
    }

    /// Posts a transfer of `buf` and returns where its outcome arrives.
    fn post(
        c: &Local,
        direction: Direction,
        peer: u32,
        tag: u64,
        buf: &mut [u8],
    ) -> mpsc::Receiver<bool> {
        let (tx, rx) = mpsc::channel();
        c.transfer(Transfer {
            direction,
            peer,
            tag,
            ptr: buf.as_mut_ptr() as usize,
            len: buf.len(),
            what: what(),
            done: Box::new(move |ok| {
                let _ = tx.send(ok);
            }),
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
    fn an_unmatched_transfer_is_pending_and_a_short_receive_fails() {
        let results = on_ranks(2, |c| {
            let me = c.place().rank;
            let mut buf = vec![me as u8; 8];
            let rx = post(&c, Direction::Recv, 1 - me, 99, &mut buf);
            c.all_gather(&[]);
            let report = c.pending_report();
            c.all_gather(&[]);
            let mut small = vec![0u8; if me == 0 { 4 } else { 8 }];
            let dir = if me == 0 {
                Direction::Recv
            } else {
                Direction::Send
            };
            let short = post(&c, dir, 1 - me, 7, &mut small);
            let short_ok = short.recv().unwrap();
            // Complete the first pair so both buffers are released.
            let mut out = vec![0u8; 8];
            let sent = post(&c, Direction::Send, 1 - me, 99, &mut out);
            (report, short_ok, rx.recv().unwrap() && sent.recv().unwrap())
        });
        for got in results {
            let (report, short_ok, ok) = got.expect("no rank panicked");
            assert_eq!(report.len(), 1, "{report:?}");
            assert!(report[0].starts_with("receive of bytes 0..0 of buffer #1 from rank"));
            assert!(!short_ok);
            assert!(ok);
        }
    }
}
