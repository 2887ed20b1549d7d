//! The node layer: this rank's place in the cluster and everything that crosses to other
//! ranks, through a `Communicator` (MPI in a job, `Solo` without a launcher).
//!
//! Tags come from a counter per pair of ranks and host-thread slot that both ranks
//! advance at the same points of that thread's command stream, so both ends of a
//! transfer agree without asking each other.

use crate::cluster::comm::mpi::Mpi;
use crate::cluster::comm::{Communicator, Place, Solo};
use crate::cluster::history::{self, Stamp};
use crate::cluster::wire::{self, Message, RecentHistory};
use crate::observe::config::{Config, MpiMode};
use mirrorcl_scheduler::tags::Tags;
use parking_lot::Mutex;
use std::sync::OnceLock;

pub use crate::cluster::comm::mpi::{family, owns_mpi, thread_multiple};
pub use crate::cluster::comm::{Direction, Transfer, What};

pub struct Node {
    pub rank: u32,
    pub size: u32,
    /// This rank among the ranks of its host, and how many share the host.
    pub local_rank: u32,
    pub local_size: u32,
    pub host: String,
    comm: Box<dyn Communicator>,
    /// Per host-thread slot and peer rank, the tag of the next message with it.
    tags: Mutex<Tags>,
    /// Where this rank stands in its call sequence, as collectives compare it
    /// (`history::stamp`; fixed in unit tests, whose in-process ranks share one history).
    stamp: fn() -> Stamp,
    /// How long a collective of a host thread waits for its messages
    /// (`MIRRORCL_WAIT_TIMEOUT`).
    deadline: Option<std::time::Duration>,
}

static NODE: OnceLock<Node> = OnceLock::new();

/// Whether this process is one rank of several, without setting the node up.
pub fn is_cluster_now() -> bool {
    NODE.get().is_some_and(|n| n.size > 1)
}

/// Whether an OpenCL call on this thread comes from inside MPI before the node is up: an
/// MPI that looks for OpenCL devices in `MPI_Init` (MPICH, through hwloc's OpenCL
/// plugin), whether MirrorCL or the program called it. Setting the node up there would
/// start MPI inside its own start; such a call finds no platform instead.
pub fn opencl_call_inside_mpi_start() -> bool {
    NODE.get().is_none() && family::inside_mpi_call()
}

/// This rank's node, set up on first use: by the platform, or before it where a
/// replica needs the others first (a seed agreed at `srand`).
pub fn node() -> &'static Node {
    NODE.get_or_init(|| Node::init(crate::observe::config::get()))
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer of the given length.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return "localhost".into();
    }
    crate::c_string(&buf)
}

impl Node {
    fn init(config: &Config) -> Node {
        crate::observe::trace::init(&config.runtime.trace);
        let node = Node::start(config);
        crate::observe::trace::place(node.rank, node.size, &node.host);
        node
    }

    fn start(config: &Config) -> Node {
        let named = !config.runtime.host.is_empty();
        let host = if named {
            config.runtime.host.clone()
        } else {
            host_name()
        };
        let mpi = match config.runtime.mpi {
            MpiMode::Off => None,
            MpiMode::Auto => Mpi::start(host.clone(), named, config.wait_timeout()),
        };
        match mpi {
            Some(m) => {
                let mut node = Node::over(Box::new(m));
                node.stamp = history::stamp;
                node.deadline = config.wait_timeout();
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(shut_down_at_exit) };
                node
            }
            None => Node::over(Box::new(Solo(Place {
                rank: 0,
                size: 1,
                local_rank: 0,
                local_size: 1,
                host,
            }))),
        }
    }

    /// A node over any communicator (the in-process one in tests).
    pub fn over(comm: Box<dyn Communicator>) -> Node {
        let p = comm.place().clone();
        Node {
            rank: p.rank,
            size: p.size,
            local_rank: p.local_rank,
            local_size: p.local_size,
            host: p.host,
            tags: Mutex::new(Tags::new(p.size)),
            comm,
            stamp: Stamp::default,
            deadline: None,
        }
    }

    /// [`Node::over`] whose collectives compare the stamps `stamp` gives.
    pub fn over_with_stamps(comm: Box<dyn Communicator>, stamp: fn() -> Stamp) -> Node {
        Node {
            stamp,
            ..Node::over(comm)
        }
    }

    /// This node with collectives of host threads bounded by `deadline`.
    pub fn with_deadline(self, deadline: std::time::Duration) -> Node {
        Node {
            deadline: Some(deadline),
            ..self
        }
    }

    pub fn is_cluster(&self) -> bool {
        self.size > 1
    }

    /// Whether collectives can still run (a hybrid program may have finalised MPI).
    pub fn can_communicate(&self) -> bool {
        self.comm.can_communicate()
    }

    /// The tag of the next message between this rank and `peer`, in either direction,
    /// for this host thread. Both ranks of a pair see the thread's commands in the same
    /// order (commands are only left out on ranks they do not involve), so each takes
    /// the same tags for the messages between them without asking, whatever other
    /// ranks or threads exchange. The slot is in the tag's top bits.
    pub fn tag_with(&self, peer: u32) -> u64 {
        self.tags_with(peer, 1).start
    }

    /// The tags of the next `count` messages between this rank and `peer`: what `count`
    /// calls of [`Node::tag_with`] return, taken at once.
    pub fn tags_with(&self, peer: u32, count: usize) -> std::ops::Range<u64> {
        let slot = crate::cluster::host_threads::slot();
        self.tags.lock().take(slot, peer, count as u64)
    }

    /// Every rank's `mine`, in rank order (a collective). The main thread runs MPI's
    /// collective; another host thread, whose collectives interleave with other
    /// threads' differently on each rank, exchanges point-to-point messages under its
    /// own tags.
    pub fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        if crate::cluster::host_threads::slot() == 0 || !self.is_cluster() {
            return self.comm.all_gather(mine);
        }
        self.all_gather_by_messages(mine)
    }

    /// Receives a message without bytes from `peer` under `tag` and returns the status
    /// it carries, within the deadline.
    pub fn message_status(&self, peer: u32, tag: u64, what: What) -> i32 {
        let (done, arrived) = crossbeam_channel::bounded(1);
        self.transfer(Transfer {
            direction: Direction::Recv,
            peer,
            tag,
            ptr: 0,
            len: 0,
            what,
            status: 0,
            done: Box::new(move |status| {
                let _ = done.send(status);
            }),
        });
        let got = match self.deadline {
            Some(d) => arrived.recv_timeout(d).ok(),
            None => arrived.recv().ok(),
        };
        got.unwrap_or_else(|| {
            let mut why = String::new();
            for line in self.pending_report() {
                why.push_str(&format!("\n  still waiting: {line}"));
            }
            crate::diag!(
                "MirrorCL: rank {}: {} from rank {peer} did not arrive (MIRRORCL_WAIT_TIMEOUT){why}\n\
                 MirrorCL: aborting the job.",
                self.rank,
                what.command
            );
            self.abort()
        })
    }

    /// [`Node::all_gather`] as messages: each rank sends its length, then its bytes, to
    /// every other rank.
    fn all_gather_by_messages(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let peers: Vec<u32> = (0..self.size).filter(|&r| r != self.rank).collect();
        let what = What {
            command: "a collective of a host thread",
            buffer: 0,
            offset: 0,
            len: mine.len() as u64,
            stamp: (self.stamp)(),
        };
        let my_len = (mine.len() as u64).to_le_bytes();
        let mut lens = vec![[0u8; 8]; self.size as usize];
        let mut all: Vec<Vec<u8>> = vec![Vec::new(); self.size as usize];
        let tags: Vec<(u64, u64)> = (peers.iter())
            .map(|&p| {
                let t = self.tags_with(p, 2);
                (t.start, t.start + 1)
            })
            .collect();
        let exchange = |sends: Vec<(u32, u64, &[u8])>, recvs: Vec<(u32, u64, *mut u8, usize)>| {
            let (done, finished) = crossbeam_channel::unbounded();
            let count = sends.len() + recvs.len();
            let posts = (sends.into_iter())
                .map(|(peer, tag, b)| (Direction::Send, peer, tag, b.as_ptr() as usize, b.len()))
                .chain(
                    recvs
                        .into_iter()
                        .map(|(peer, tag, p, len)| (Direction::Recv, peer, tag, p as usize, len)),
                );
            for (direction, peer, tag, ptr, len) in posts {
                let done = done.clone();
                self.transfer(Transfer {
                    direction,
                    peer,
                    tag,
                    ptr,
                    len,
                    what: What {
                        len: len as u64,
                        ..what
                    },
                    status: 0,
                    done: Box::new(move |status| {
                        let _ = done.send((peer, status));
                    }),
                });
            }
            let started = std::time::Instant::now();
            for _ in 0..count {
                let next = match self.deadline {
                    Some(d) => finished.recv_deadline(started + d).ok(),
                    None => finished.recv().ok(),
                };
                let why = match next {
                    Some((_, status)) if status >= 0 => continue,
                    Some((peer, status)) => {
                        format!("its message with rank {peer} failed ({status})")
                    }
                    None => {
                        let mut why = format!(
                            "it waited {:.0} s (MIRRORCL_WAIT_TIMEOUT)",
                            started.elapsed().as_secs_f64()
                        );
                        for line in self.pending_report() {
                            why.push_str(&format!("\n  still waiting: {line}"));
                        }
                        why
                    }
                };
                crate::diag!(
                    "MirrorCL: rank {}: a collective of host thread \"{}\" did not complete: \
                     {why}\nMirrorCL: aborting the job.",
                    self.rank,
                    crate::cluster::host_threads::thread_name()
                );
                self.abort()
            }
        };
        // Lengths first, then the bytes into buffers of those lengths.
        {
            let mut len_bufs: Vec<[u8; 8]> = vec![[0u8; 8]; peers.len()];
            let recvs = (peers.iter().zip(&tags).zip(len_bufs.iter_mut()))
                .map(|((&p, &(t, _)), l)| (p, t, l.as_mut_ptr(), 8))
                .collect();
            let sends = (peers.iter().zip(&tags))
                .map(|(&p, &(t, _))| (p, t, &my_len[..]))
                .collect();
            exchange(sends, recvs);
            for (&p, l) in peers.iter().zip(&len_bufs) {
                lens[p as usize] = *l;
            }
        }
        for &p in &peers {
            all[p as usize] = vec![0u8; u64::from_le_bytes(lens[p as usize]) as usize];
        }
        let recvs = (peers.iter().zip(&tags))
            .map(|(&p, &(_, t))| {
                let b = &mut all[p as usize];
                (p, t, b.as_mut_ptr(), b.len())
            })
            .collect();
        let sends = (peers.iter().zip(&tags))
            .map(|(&p, &(_, t))| (p, t, mine))
            .collect();
        exchange(sends, recvs);
        all[self.rank as usize] = mine.to_vec();
        all
    }

    /// Every rank's message, in rank order (a collective). Ranks that reach it at
    /// different points of their call sequences (another stamp), or in different
    /// collectives, or with a message that does not decode (another build, a damaged
    /// one), end the job: every rank decodes the same gathered bytes, so every rank
    /// reports it, with the first call that differs.
    pub fn exchange<M: Message>(&self, mine: &M) -> Vec<M> {
        match self.try_exchange(mine) {
            Ok(all) => all,
            Err(e) => {
                crate::diag!(
                    "MirrorCL: rank {}: {e}\nMirrorCL: the replicas diverged (rank-dependent \
                     input, unseeded randomness, host threads?); aborting the job.",
                    self.rank
                );
                self.abort()
            }
        }
    }

    /// [`Node::exchange`] that leaves a failed collective to the caller (where ending
    /// the job is not an option, at exit). Every rank that gathered the same bytes
    /// fails alike, and then exchanges its recent call history for the report.
    pub fn try_exchange<M: Message>(&self, mine: &M) -> Result<Vec<M>, Parted> {
        let (stamps, all) = self.gather_stamped(mine);
        // Another collective or build reads as such first; then another point.
        let why = match all.and_then(|all| wire::decode_all(&all)) {
            Err(e) => Why::Wire(e),
            Ok(_) if stamps.iter().any(|s| *s != stamps[0]) => Why::Stamps(stamps),
            Ok(all) => return Ok(all),
        };
        let histories = self
            .gather_stamped(&RecentHistory(history::recent()))
            .1
            .and_then(|h| wire::decode_all::<RecentHistory>(&h));
        let detail = match histories {
            Ok(all) => history::first_difference(
                &all.into_iter()
                    .enumerate()
                    .map(|(r, h)| (r as u32, h.0))
                    .collect::<Vec<_>>(),
            ),
            Err(e) => format!("the call histories did not arrive: {e}"),
        };
        Err(Parted { why, detail })
    }

    /// Every rank's stamp and encoded message (a collective); a message too short for a
    /// stamp is a wire error.
    #[allow(clippy::type_complexity)]
    fn gather_stamped<M: Message>(
        &self,
        mine: &M,
    ) -> (Vec<Stamp>, Result<Vec<Vec<u8>>, wire::WireError>) {
        let stamp = (self.stamp)();
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&stamp.entries.to_le_bytes());
        bytes.extend_from_slice(&stamp.digest.to_le_bytes());
        bytes.extend_from_slice(&wire::encode(mine));
        let mut stamps = Vec::new();
        let mut messages = Vec::new();
        for (r, b) in self.all_gather(&bytes).into_iter().enumerate() {
            if b.len() < 16 {
                let problem = wire::Problem::Short(b.len());
                let e = wire::WireError {
                    kind: M::KIND,
                    sender: r as u32,
                    problem,
                };
                return (stamps, Err(e));
            }
            let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
            stamps.push(Stamp {
                entries: word(0),
                digest: word(8),
            });
            messages.push(b[16..].to_vec());
        }
        (stamps, Ok(messages))
    }

    /// Queues a point-to-point transfer.
    pub fn transfer(&self, t: Transfer) {
        use crate::observe::stats::{add, COUNTERS};
        if crate::observe::trace::on() {
            crate::observe::trace::instant(
                "transfer",
                "transfer queued",
                crate::trace_args![
                    ("direction", t.direction.name()),
                    ("peer", t.peer),
                    ("tag", t.tag),
                    ("bytes", t.len)
                ],
            );
        }
        match t.direction {
            Direction::Send => {
                add(&COUNTERS.sends, 1);
                if t.status >= 0 {
                    add(&COUNTERS.bytes_sent, t.len as u64);
                }
            }
            Direction::Recv => {
                add(&COUNTERS.receives, 1);
                add(&COUNTERS.bytes_received, t.len as u64);
            }
            Direction::Discard => add(&COUNTERS.receives, 1),
        }
        self.comm.transfer(t)
    }

    /// What this rank is still waiting for from its peers (for deadline reports).
    pub fn pending_report(&self) -> Vec<String> {
        self.comm.pending_report()
    }

    /// Ends the whole job after a fatal condition was reported.
    pub fn abort(&self) -> ! {
        // A trace of a run that hangs is what shows why (`MIRRORCL_TRACE`).
        crate::observe::trace::write_now();
        self.comm.abort()
    }
}

/// Why a collective failed, and the first call that differs between the ranks.
#[derive(Debug)]
pub struct Parted {
    pub why: Why,
    pub detail: String,
}

/// A message that did not decode, or ranks at different points of their call
/// sequences.
#[derive(Debug)]
pub enum Why {
    Wire(wire::WireError),
    Stamps(Vec<Stamp>),
}

impl std::fmt::Display for Parted {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match &self.why {
            Why::Wire(e) => e.fmt(f)?,
            Why::Stamps(stamps) => {
                f.write_str("the ranks reached one collective at different calls (")?;
                for (r, s) in stamps.iter().enumerate() {
                    let sep = if r > 0 { ", " } else { "" };
                    write!(f, "{sep}rank {r} after {s}")?;
                }
                f.write_str(")")?;
            }
        }
        write!(f, "; {}", self.detail)
    }
}

/// A program that owns MPI is about to finalise it: MirrorCL's transfers in flight
/// finish and its progress thread stops first, since it may not touch MPI after.
pub fn before_program_finalizes() {
    if let Some(node) = NODE.get() {
        node.comm.shut_down();
    }
    // The trace so far (written again, complete, at exit).
    crate::observe::trace::write_now();
}

/// Lets the transfers in flight finish and releases MPI (see `Mpi::shut_down`).
extern "C" fn shut_down_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(node) = NODE.get() {
            node.comm.shut_down();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::comm::local::tests::on_ranks;
    use crate::cluster::wire::{BuildResults, KernelFactsShare, OwnerAnswer, Seed};

    #[test]
    fn exchange_and_tags_over_the_in_process_communicator() {
        let results = on_ranks(3, |c| {
            let node = Node::over(Box::new(c));
            let mine = OwnerAnswer(Some(Err(-(node.rank as i32))));
            let all = node.exchange(&mine);
            let tags = [node.tag_with(2), node.tag_with(2), node.tag_with(0)];
            (node.is_cluster(), all, tags)
        });
        for got in results {
            let (cluster, all, tags) = got.expect("no rank aborted");
            assert!(cluster);
            let want: Vec<_> = (0..3).map(|r| OwnerAnswer(Some(Err(-r)))).collect();
            assert_eq!(all, want);
            assert_eq!(tags, [0, 1, 0]);
        }
    }

    /// Threaded host programs: two host threads per rank exchange in a different order on each rank
    /// (rank-dependent pauses), with collectives and tagged messages; each thread's
    /// exchanges meet their own on every rank.
    #[test]
    fn host_threads_exchange_whatever_their_interleaving() {
        let results = on_ranks(3, |c| {
            let node = Node::over(Box::new(c)).with_deadline(std::time::Duration::from_secs(20));
            let node = &node;
            std::thread::scope(|s| {
                let threads: Vec<_> = (1..=2u64)
                    .map(|slot| {
                        s.spawn(move || {
                            crate::cluster::host_threads::name_this_thread(slot as usize);
                            let mut got = Vec::new();
                            for i in 0..20u64 {
                                // Rank 1 runs thread 1 late, rank 2 thread 2.
                                if (node.rank as u64 + i) % 3 == slot {
                                    std::thread::sleep(std::time::Duration::from_millis(2));
                                }
                                let all =
                                    node.exchange(&Seed(slot * 1000 + i * 10 + node.rank as u64));
                                got.push(all.iter().map(|s| s.0).collect::<Vec<_>>());
                            }
                            (
                                slot,
                                got,
                                node.tag_with(0) >> crate::cluster::host_threads::SLOT_SHIFT,
                            )
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .map(|t| t.join().expect("no panic"))
                    .collect::<Vec<_>>()
            })
        });
        for got in results {
            for (slot, exchanges, tag_slot) in got.expect("no rank aborted") {
                assert_eq!(tag_slot, slot, "a thread's tags carry its slot");
                for (i, all) in exchanges.iter().enumerate() {
                    let want: Vec<u64> = (0..3).map(|r| slot * 1000 + i as u64 * 10 + r).collect();
                    assert_eq!(all, &want, "thread {slot}, exchange {i}");
                }
            }
        }
    }

    #[test]
    fn a_collective_mixed_with_another_ends_the_job_on_every_rank() {
        let results = on_ranks(2, |c| {
            let node = Node::over(Box::new(c));
            if node.rank == 0 {
                node.exchange(&BuildResults {
                    result: 0,
                    devices: Vec::new(),
                    kernel_names: None,
                });
            } else {
                node.exchange(&KernelFactsShare(None));
            }
        });
        for (rank, got) in results.into_iter().enumerate() {
            let why = got.expect_err("the rank aborted");
            let why = why.downcast_ref::<String>().expect("abort's message");
            assert_eq!(why, &format!("rank {rank} aborted the in-process job"));
        }
    }

    thread_local! {
        static TEST_STAMP: std::cell::Cell<Stamp> = const { std::cell::Cell::new(Stamp { entries: 0, digest: 0 }) };
    }

    #[test]
    fn ranks_at_different_calls_end_the_job_at_their_next_collective() {
        let results = on_ranks(3, |c| {
            let node = Node::over_with_stamps(Box::new(c), || TEST_STAMP.with(|s| s.get()));
            let digest = if node.rank == 2 { 0xbad } else { 0x600d };
            TEST_STAMP.with(|s| s.set(Stamp { entries: 9, digest }));
            let agreed = node
                .try_exchange(&Seed(1))
                .map(drop)
                .map_err(|e| e.to_string());
            TEST_STAMP.with(|s| {
                s.set(Stamp {
                    entries: 9,
                    digest: 1,
                })
            });
            let again = node.try_exchange(&Seed(2)).map(drop);
            (agreed, again.is_ok())
        });
        for got in results {
            let (agreed, again) = got.expect("no rank aborted");
            let why = agreed.expect_err("the stamps differ");
            assert!(why.starts_with("the ranks reached one collective at different calls (rank 0 after entry #9 (digest 000000000000600d), rank 1"), "{why}");
            assert!(
                why.contains("rank 2 after entry #9 (digest 0000000000000bad)"),
                "{why}"
            );
            assert!(again, "the same stamps agree");
        }
    }
}
