//! `mirrorcl-sim`: MirrorCL's scheduler for N virtual ranks, with no MPI and no devices.
//!
//! The scheduler is pure (`docs/scheduler.md`): every rank feeds its own scheduler the
//! same command stream and derives from the plan what it must do itself (Table IV.1).
//! So one rank of a cluster of any size can be reproduced by running a scheduler over
//! the stream, deciding the queueing optimisation as the runtime does
//! ([`crate::left_out`]) and counting this rank's part of every command and
//! step the way `runtime/src/stats.rs` counts it. [`simulate`] does that for every rank.
//!
//! The stream comes from a built-in workload ([`Workload`]: the thesis' IV.7.2
//! microbenchmark as `tests/c/cluster_alltoall.c` issues it, a halo exchange as
//! `tests/c/cluster_stencil.c` does it) or from a file a real run recorded
//! (`MIRRORCL_RECORD`, format in [`record`]).

pub mod model;
pub mod record;
pub mod workloads;

use crate::{Access, DeviceDesc, Location, Placement, Scheduler, Step, Variant};
use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;
use std::time::Instant;

pub use workloads::Workload;

/// Where a command runs, as the runtime decides it (`Command::at_host`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// On its queue's device.
    Device,
    /// On the host copy (maps, unmaps, markers, migrations to the host).
    Host,
}

/// What a command runs where it runs (`enqueue::submit::Work`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A vendor command on the device's issuer (kernels, copies, reads, writes, fills).
    Vendor,
    /// Nothing to run: done when its dependencies are.
    Host,
}

/// One command as the runtime's `submit` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The OpenCL command type (`CL_COMMAND_*`), for the reader's benefit.
    pub command_type: u32,
    /// Context-wide index of the queue's device.
    pub device: u32,
    pub at: At,
    /// The queue's stream (ignored for commands at the host: each gets a new one).
    pub stream: u64,
    pub work: Work,
    /// A read: the bytes of host memory it fills, which every rank receives.
    pub fills_host: Option<u64>,
    pub blocking: bool,
    /// For a blocking command or one at the host: the devices of the commands of its
    /// wait list that ran on a device (their owners send each of those a status).
    pub waits: Vec<u32>,
    /// Root-buffer ranges (buffer ids as the stream names them).
    pub accesses: Vec<Access>,
}

/// One item of the stream the scheduler of one context sees, in enqueue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Device {
        index: u32,
        desc: DeviceDesc,
    },
    Buffer {
        id: u64,
        size: u64,
        initial: Option<Location>,
    },
    Attach {
        buffer: u64,
        device: u32,
    },
    Release {
        buffer: u64,
    },
    Command(Command),
    HostWrote {
        buffer: u64,
        range: Range<u64>,
    },
}

/// One rank's figures, named and counted as `MIRRORCL_STATS` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub commands_created: u64,
    pub commands_not_enqueued: u64,
    pub commands_scheduled: u64,
    pub commands_issued: u64,
    pub local_copies: u64,
    pub sends: u64,
    pub receives: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Wall clock of this rank's `schedule` calls for commands (as the runtime times it).
    pub scheduling_ns: u64,
    /// Device reads and writes this rank's issuers run for its steps' messages (a piece
    /// read before it is sent, written after it arrives; Table IV.1), which
    /// `MIRRORCL_STATS` counts in no figure. With `commands_issued` and `local_copies`:
    /// everything this rank's issuers run ([`Figures::issuer_work`]).
    pub step_device_ops: u64,
}

impl Figures {
    /// The counts, without the time (which no two runs share).
    pub fn counts(&self) -> [u64; 9] {
        [
            self.commands_created,
            self.commands_not_enqueued,
            self.commands_scheduled,
            self.commands_issued,
            self.local_copies,
            self.sends,
            self.receives,
            self.bytes_sent,
            self.bytes_received,
        ]
    }

    pub const COUNT_NAMES: [&'static str; 9] = [
        "commands_created",
        "commands_not_enqueued",
        "commands_scheduled",
        "commands_issued",
        "local_copies",
        "sends",
        "receives",
        "bytes_sent",
        "bytes_received",
    ];

    /// What this rank's issuers run: its devices' commands, its local copies, and the
    /// device reads and writes of its steps' messages.
    pub fn issuer_work(&self) -> u64 {
        self.commands_issued + self.local_copies + self.step_device_ops
    }

    /// `self - earlier`, figure by figure.
    pub fn since(&self, earlier: &Figures) -> Figures {
        let mut out = Figures::default();
        let (a, b) = (self.counts(), earlier.counts());
        let d: Vec<u64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        out.commands_created = d[0];
        out.commands_not_enqueued = d[1];
        out.commands_scheduled = d[2];
        out.commands_issued = d[3];
        out.local_copies = d[4];
        out.sends = d[5];
        out.receives = d[6];
        out.bytes_sent = d[7];
        out.bytes_received = d[8];
        out.scheduling_ns = self.scheduling_ns - earlier.scheduling_ns;
        out.step_device_ops = self.step_device_ops - earlier.step_device_ops;
        out
    }
}

/// The largest piece of a transfer between ranks (the runtime's default
/// `MIRRORCL_PIECE_MIB`, 4).
pub const PIECE_MAX: u64 = 4 << 20;

/// How many messages a transfer of `len` bytes between two ranks is made of
/// (`remote::pieces`: about sixteen pieces of 1 to 4 MiB, at least one).
pub fn pieces(len: u64) -> u64 {
    let piece = (len / 16).next_power_of_two().clamp(1 << 20, PIECE_MAX);
    len.div_ceil(piece).max(1)
}

/// One virtual rank: a scheduler per context over the stream, and this rank's figures.
pub struct Rank {
    pub rank: u32,
    pub ranks: u32,
    pub variant: Variant,
    contexts: HashMap<u64, Context>,
    pub figures: Figures,
    scratch: Vec<Access>,
}

#[derive(Default)]
struct Context {
    sched: Scheduler<u32>,
    /// Buffer ids of the stream to the scheduler's.
    ids: HashMap<u64, u64>,
    /// Sizes by the scheduler's ids.
    sizes: HashMap<u64, u64>,
    next_token: u32,
    next_stream: u64,
}

impl Context {
    fn new_stream(&mut self) -> u64 {
        // Above any queue stream a recorded run uses.
        self.next_stream += 1;
        (1 << 62) + self.next_stream
    }
}

/// This rank's messages when `owner` shares `len` bytes, in `pieces` messages per hop,
/// down the relay (`crate::relay`); whether this rank receives them (is not the owner).
fn count_relay(f: &mut Figures, owner: u32, ranks: u32, rank: u32, len: u64, pieces: u64) -> bool {
    let relay = crate::relay::host_copy_relay(owner, ranks, rank, len);
    let to = relay.to.len() as u64;
    f.sends += pieces * to;
    f.bytes_sent += len * to;
    if relay.from.is_some() {
        f.receives += pieces;
        f.bytes_received += len;
    }
    relay.from.is_some()
}

/// This rank's part in a planned step (Table IV.1), counted as the runtime counts it
/// (`enqueue/transfer_steps.rs`).
fn count_step(f: &mut Figures, sched: &Scheduler<u32>, rank: u32, ranks: u32, step: &Step) {
    let owner = |l: Location| match l {
        Location::Device(d) => Some(sched.device(d).map_or(u32::MAX, |d| d.owner)),
        Location::Host => None,
    };
    let len = step.range.end - step.range.start;
    let n = pieces(len);
    match (owner(step.from), owner(step.to)) {
        (Some(s), Some(d)) if s != d && s == rank => {
            f.sends += n;
            f.bytes_sent += len;
            f.step_device_ops += n;
        }
        (Some(s), Some(d)) if s != d && d == rank => {
            f.receives += n;
            f.bytes_received += len;
            f.step_device_ops += n;
        }
        (Some(s), Some(_)) if s == rank => f.local_copies += 1,
        (None, Some(d)) if d == rank => f.local_copies += 1,
        (Some(s), None) if s == rank && ranks == 1 => f.local_copies += 1,
        (Some(s), None) => {
            // Down the relay: the owner reads, every rank receives from one and passes
            // the pieces on to the ranks after it.
            // The owner reads each piece from its device.
            let receives = count_relay(f, s, ranks, rank, len, n);
            if !receives {
                f.step_device_ops += n;
            }
        }
        _ => {}
    }
}

impl Rank {
    pub fn new(rank: u32, ranks: u32, variant: Variant) -> Self {
        Rank {
            rank,
            ranks,
            variant,
            contexts: HashMap::default(),
            figures: Figures::default(),
            scratch: Vec::new(),
        }
    }

    /// Feeds one item of context `ctx`'s stream to this rank.
    pub fn feed(&mut self, ctx: u64, item: &Item) {
        let (rank, ranks, variant) = (self.rank, self.ranks, self.variant);
        let f = &mut self.figures;
        let c = self.contexts.entry(ctx).or_default();
        match item {
            Item::Device { index, desc } => c.sched.add_device(*index, *desc),
            Item::Buffer { id, size, initial } => {
                let sid = c.sched.create_buffer(*size, *initial);
                c.ids.insert(*id, sid);
                c.sizes.insert(sid, *size);
            }
            Item::Release { buffer } => {
                if let Some(sid) = c.ids.remove(buffer) {
                    c.sched.release_buffer(sid);
                    c.sizes.remove(&sid);
                }
            }
            Item::HostWrote { buffer, range } => {
                if let Some(&sid) = c.ids.get(buffer) {
                    c.sched.host_wrote(sid, range.clone());
                }
            }
            Item::Attach { buffer, device } => {
                // `enqueue::submit::attach`: ignored without attach; otherwise a read of
                // the whole buffer at the device, then the attachment.
                let Some(&sid) = c.ids.get(buffer) else {
                    return;
                };
                if variant == Variant::Decentralization {
                    return;
                }
                let size = c.sizes.get(&sid).copied().unwrap_or(0);
                let access = [Access {
                    buffer: sid,
                    range: 0..size,
                    mode: crate::Mode::Read,
                    aliased: false,
                    pass_through: false,
                }];
                let stream = c.new_stream();
                c.next_token += 1;
                let token = c.next_token;
                Self::plan(
                    c,
                    f,
                    rank,
                    ranks,
                    Location::Device(*device),
                    stream,
                    &access,
                    token,
                );
                c.sched.attach(sid, *device);
            }
            Item::Command(cmd) => self.command(ctx, cmd),
        }
    }

    /// Schedules one command at `at`, counting its steps; returns nothing (the
    /// dependencies only order work).
    #[allow(clippy::too_many_arguments)]
    fn plan(
        c: &mut Context,
        f: &mut Figures,
        rank: u32,
        ranks: u32,
        at: Location,
        stream: u64,
        accesses: &[Access],
        token: u32,
    ) {
        let mut steps: Vec<Step> = Vec::new();
        let mut next_token = c.next_token;
        let mut next_stream = c.next_stream;
        let _deps = c
            .sched
            .schedule(at, stream, accesses, &token, |step, _deps| {
                steps.push(step.clone());
                next_token += 1;
                next_stream += 1;
                ((1 << 62) + next_stream, next_token)
            });
        c.next_token = next_token;
        c.next_stream = next_stream;
        for step in &steps {
            count_step(f, &c.sched, rank, ranks, step);
        }
    }

    fn command(&mut self, ctx: u64, cmd: &Command) {
        let (rank, ranks, variant) = (self.rank, self.ranks, self.variant);
        let f = &mut self.figures;
        let c = self.contexts.entry(ctx).or_default();
        f.commands_created += 1;
        let desc = c.sched.device(cmd.device).unwrap_or(DeviceDesc {
            owner: u32::MAX,
            group: u32::MAX,
            ranges_apart: false,
        });
        // Wait-list statuses (`learn_wait_list_statuses`), before the queueing decision:
        // the owner of each waited command sends its status to every rank that runs this
        // one, which receives it.
        if ranks > 1 && (cmd.blocking || cmd.at == At::Host) {
            let runs_on = (cmd.at == At::Device).then_some(desc.owner);
            for w in &cmd.waits {
                let owner = c.sched.device(*w).map_or(u32::MAX, |d| d.owner);
                if owner == rank {
                    let peers = (0..ranks)
                        .filter(|&r| r != owner && runs_on.is_none_or(|o| o == r))
                        .count() as u64;
                    f.sends += peers;
                } else if runs_on.is_none_or(|r| r == rank) {
                    f.receives += 1;
                }
            }
        }
        let placement = Placement {
            device: desc,
            at_host: cmd.at == At::Host,
            fills_host: cmd.fills_host.is_some(),
        };
        // Reused: every rank walks every command of the stream.
        let mut accesses = std::mem::take(&mut self.scratch);
        accesses.clear();
        accesses.extend(cmd.accesses.iter().map(|a| Access {
            buffer: c.ids.get(&a.buffer).copied().unwrap_or(u64::MAX),
            range: a.range.clone(),
            mode: a.mode,
            aliased: false,
            pass_through: a.pass_through,
        }));
        if c.sched.leaves_out(
            variant,
            rank,
            ranks,
            &placement,
            accesses.iter().map(|a| a.buffer),
        ) {
            f.commands_not_enqueued += 1;
            self.scratch = accesses;
            return;
        }
        f.commands_scheduled += 1;
        let (at, stream) = match cmd.at {
            At::Host => (Location::Host, c.new_stream()),
            At::Device => (Location::Device(cmd.device), cmd.stream),
        };
        c.next_token += 1;
        let token = c.next_token;
        let start = Instant::now();
        Self::plan(c, f, rank, ranks, at, stream, &accesses, token);
        f.scheduling_ns += start.elapsed().as_nanos() as u64;
        // `submit::route`: the owner issues a vendor command; a read's bytes reach every
        // rank down the relay.
        self.scratch = accesses;
        let runs_here = cmd.at == At::Host || desc.owner == rank;
        let shared = cmd.fills_host.filter(|_| ranks > 1);
        if let (Work::Vendor, true) = (cmd.work, runs_here) {
            f.commands_issued += 1;
        }
        // A read's bytes go down the relay from the owner, one message per hop.
        if let (Work::Vendor, Some(len)) = (cmd.work, shared) {
            count_relay(f, desc.owner, ranks, rank, len, 1);
        }
    }
}

/// Produces a stream: calls its argument with each item and its context.
pub type Emit<'a> = dyn Fn(&mut dyn FnMut(u64, &Item)) + Sync + 'a;

/// Runs every rank of `ranks` over the stream `emit` produces (each rank regenerates it:
/// one pass per rank), `threads` ranks at a time; returns every rank's figures. `mark`
/// items (context `u64::MAX`) snapshot the figures: the second vector holds, per rank,
/// its figures at each mark.
pub fn simulate(
    ranks: u32,
    variant: Variant,
    threads: usize,
    only: Option<&[u32]>,
    emit: &Emit<'_>,
) -> Vec<(u32, Figures, Vec<Figures>)> {
    let list: Vec<u32> = only.map_or_else(|| (0..ranks).collect(), |o| o.to_vec());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::with_capacity(list.len()));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(list.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&r) = list.get(i) else { break };
                let mut rank = Rank::new(r, ranks, variant);
                let mut marks = Vec::new();
                emit(&mut |ctx, item| {
                    if ctx == MARK {
                        marks.push(rank.figures);
                    } else {
                        rank.feed(ctx, item)
                    }
                });
                results
                    .lock()
                    .expect("no panics")
                    .push((r, rank.figures, marks));
            });
        }
    });
    let mut out = results.into_inner().expect("no panics");
    out.sort_by_key(|(r, _, _)| *r);
    out
}

/// The context number of a mark: the figures at this point are kept.
pub const MARK: u64 = u64::MAX;

/// Parses a variant's name as `MIRRORCL_VARIANT` spells it.
pub fn parse_variant(s: &str) -> Option<Variant> {
    match s {
        "decentralization" => Some(Variant::Decentralization),
        "attach" => Some(Variant::Attach),
        "full" => Some(Variant::Full),
        _ => None,
    }
}

pub fn variant_name(v: Variant) -> &'static str {
    match v {
        Variant::Decentralization => "decentralization",
        Variant::Attach => "attach",
        Variant::Full => "full",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_as_the_runtime_cuts_them() {
        assert_eq!(pieces(0), 1);
        assert_eq!(pieces(16), 1);
        assert_eq!(pieces(1 << 20), 1);
        assert_eq!(pieces((1 << 20) + 1), 2);
        assert_eq!(pieces(64 << 20), 16);
        assert_eq!(pieces(1 << 30), 256);
    }

    /// One steady-state iteration of the microbenchmark at `n` ranks, per rank.
    fn iteration(n: u32, variant: Variant) -> Vec<Figures> {
        let w = Workload::AllToAll { iters: 4 };
        simulate(n, variant, 2, None, &|out| w.emit(n, 1, out))
            .iter()
            .map(|(_, _, marks)| super::model::per_iteration(marks).expect("marks"))
            .collect()
    }

    /// Table IV.7's shape: with the queueing optimisation a rank schedules only the
    /// commands that involve its device (its kernel, the n copies into its buffer, the
    /// n - 1 copies out of it to other ranks); without it, all n^2 + n.
    #[test]
    fn all_to_all_per_rank_counts() {
        for n in [2u32, 5, 9] {
            let n64 = u64::from(n);
            for variant in [Variant::Decentralization, Variant::Attach, Variant::Full] {
                for (r, f) in iteration(n, variant).iter().enumerate() {
                    let what = format!("{n} ranks, {variant:?}, rank {r}: {f:?}");
                    assert_eq!(f.commands_created, n64 * n64 + n64, "{what}");
                    assert_eq!(f.commands_issued, 1 + n64, "{what}");
                    let scheduled = if variant == Variant::Full {
                        2 * n64
                    } else {
                        n64 * n64 + n64
                    };
                    assert_eq!(f.commands_scheduled, scheduled, "{what}");
                    assert_eq!(
                        f.commands_not_enqueued + f.commands_scheduled,
                        f.commands_created,
                        "{what}"
                    );
                    assert_eq!(f.receives, n64 - 1, "{what}");
                    if variant != Variant::Decentralization {
                        // Each source goes from its own device to every other, 16 bytes.
                        assert_eq!(f.sends, n64 - 1, "{what}");
                        assert_eq!(f.bytes_sent, 16 * (n64 - 1), "{what}");
                        // Each send reads its piece from the device, each receive writes it.
                        assert_eq!(f.step_device_ops, 2 * (n64 - 1), "{what}");
                        assert_eq!(f.issuer_work(), 1 + n64 + 2 * (n64 - 1), "{what}");
                    }
                }
            }
        }
    }

    /// Without attach, the valid sets pick the lowest valid device as the source: the
    /// first device to hold a source serves every later copy of it, so rank 0 sends
    /// what the others need of every source it received.
    #[test]
    fn decentralization_sources_come_from_the_lowest_valid_device() {
        let f = iteration(4, Variant::Decentralization);
        let sends: Vec<u64> = f.iter().map(|f| f.sends).collect();
        assert_eq!(
            sends.iter().sum::<u64>(),
            f.iter().map(|f| f.receives).sum()
        );
        assert!(sends[0] > sends[1], "{sends:?}");
    }
}

#[cfg(test)]
mod replay_tests {
    use super::*;

    /// A built-in stream written in the record format, read back and replayed: the same
    /// figures on every rank, at its own rank count and (devices re-assigned) at another.
    #[test]
    fn a_written_stream_replays_to_the_same_figures() {
        let w = Workload::Stencil {
            elements: 4096,
            iters: 4,
        };
        let mut text = String::from("# mirrorcl-record 1\nranks 3 0\n");
        w.emit(3, 1, &mut |ctx, item| {
            if ctx != MARK {
                text.push_str(&record::line(ctx, item));
                text.push('\n');
            }
        });
        let replay = Workload::Replay(record::parse(&text).expect("parses"));
        for variant in [Variant::Decentralization, Variant::Full] {
            let direct = simulate(3, variant, 2, None, &|out| w.emit(3, 1, out));
            let replayed = simulate(3, variant, 2, None, &|out| replay.emit(3, 1, out));
            for ((r, a, _), (_, b, _)) in direct.iter().zip(&replayed) {
                assert_eq!(a.counts(), b.counts(), "rank {r}, {variant:?}");
            }
        }
        // At 5 ranks device i goes to rank i mod 5: ranks 3 and 4 own nothing, issue
        // nothing, and still see every command.
        let five = simulate(5, Variant::Full, 2, None, &|out| replay.emit(5, 1, out));
        let created = five[0].1.commands_created;
        for (r, f, _) in &five {
            assert_eq!(f.commands_created, created, "rank {r}");
            assert_eq!(f.commands_issued == 0, *r >= 3, "rank {r}: {f:?}");
        }
    }
}
