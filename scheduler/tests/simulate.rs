//! Simulation tests of the scheduler: random command streams are planned, the plans are
//! executed on a byte-level model of every location instance, and the bytes every
//! command reads (and the bytes left at every valid location) are compared with one
//! location executing the same commands in order.
//!
//! Three executions of each plan are checked:
//! - **in order** (submission order) on one process holding every location;
//! - **asynchronously**: a random topological order of the items, where an item waits
//!   only for its returned dependencies and for the earlier items of its stream. Every
//!   location instance is a separate array, so a missing dependency shows up as a wrong
//!   byte read or left behind;
//! - **as a cluster**: every rank runs its own scheduler on the same command stream (the
//!   plans must be identical), each step becomes per-rank actions after Table IV.1 (local
//!   copy, send, receive, nothing; a step to the host is a broadcast, since the host copy
//!   is replicated), sends and receives must pair up exactly, the ranks' action lists must
//!   run to completion in order, and the ranks' actions run asynchronously on per-rank
//!   memories (work of other ranks is bookkeeping only and counts as done at once).

use mirrorcl_scheduler::{
    Access, BufferId, DeviceDesc, Location, Mode, Scheduler, SchedulerStats, Step, StreamId,
    ValidSet,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

/// Where the runtime runs a transfer step; the scheduler must be correct for any choice.
#[derive(Clone, Copy, Debug)]
enum StepStreams {
    /// A new stream per step (no stream ordering at all).
    Fresh,
    /// The first stream of the destination device, or of the source device for a step to
    /// the host.
    Destination,
    /// The stream of the command that needed the step.
    Command,
    /// A random device stream, or a fresh one.
    Random,
}

#[derive(Clone, Debug)]
struct Command {
    at: Location,
    stream: StreamId,
    /// (buffer index, range, mode)
    accesses: Vec<(usize, Range<u64>, Mode)>,
}

#[derive(Clone, Debug)]
struct Scenario {
    ranks: u32,
    devices: Vec<DeviceDesc>,
    /// Streams per device (1 or 2).
    streams: Vec<u32>,
    /// (size, initially valid at the host; else undefined)
    buffers: Vec<(u64, bool)>,
    commands: Vec<Command>,
    policy: StepStreams,
    seed: u64,
}

fn dev_stream(d: u32, k: u32) -> StreamId {
    1000 + 10 * u64::from(d) + u64::from(k)
}

const FRESH_STREAMS: u64 = 1 << 32;

type RawCommand = (u8, u8, Vec<(u8, u8, u8, u8)>);

fn raw_command() -> impl Strategy<Value = RawCommand> {
    (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), 0u8..3), 1..=3),
    )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        // Per rank: the number of groups, then per device (raw group, streams).
        prop::collection::vec(
            (
                1u32..=2,
                prop::collection::vec((any::<u32>(), 1u32..=2), 1..=3),
            ),
            1..=4,
        ),
        // Few buffers more often than many, so that commands conflict more often.
        prop_oneof![
            2 => prop::collection::vec((1u64..=64, any::<bool>()), 1..=2),
            1 => prop::collection::vec((1u64..=64, any::<bool>()), 1..=4),
        ],
        prop::collection::vec(raw_command(), 0..=24),
        0u8..4,
        any::<u64>(),
    )
        .prop_map(|(ranks, buffers, raw, policy, seed)| {
            let mut devices = Vec::new();
            let mut streams = Vec::new();
            for (owner, (groups, devs)) in ranks.iter().enumerate() {
                for &(g, s) in devs {
                    devices.push(DeviceDesc {
                        owner: owner as u32,
                        group: g % groups,
                    });
                    streams.push(s);
                }
            }
            let ndev = devices.len();
            let commands = raw
                .into_iter()
                .map(|(loc, stream, accs)| {
                    // A quarter of the commands are map-like host accesses, enqueued on
                    // some device's queue.
                    let (at, dev, k) = if loc % 4 == 0 {
                        let d = usize::from(stream) % ndev;
                        (Location::Host, d, u32::from(stream / 16))
                    } else {
                        let d = usize::from(loc >> 2) % ndev;
                        (Location::Device(d as u32), d, u32::from(stream))
                    };
                    let stream = dev_stream(dev as u32, k % streams[dev]);
                    let accesses = accs
                        .into_iter()
                        .map(|(b, a, l, m)| {
                            let b = usize::from(b) % buffers.len();
                            let size = buffers[b].0;
                            let range = if l >= 192 {
                                0..size
                            } else {
                                let start = u64::from(a) % size;
                                let len = u64::from(l) % (size - start + 1);
                                start..start + len
                            };
                            let mode = [Mode::Read, Mode::Write, Mode::ReadWrite][usize::from(m)];
                            (b, range, mode)
                        })
                        .collect();
                    Command {
                        at,
                        stream,
                        accesses,
                    }
                })
                .collect();
            let policy = [
                StepStreams::Fresh,
                StepStreams::Destination,
                StepStreams::Command,
                StepStreams::Random,
            ][usize::from(policy)];
            Scenario {
                ranks: ranks.len() as u32,
                devices,
                streams,
                buffers,
                commands,
                policy,
                seed,
            }
        })
}

// ---------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------

/// splitmix64: a tiny deterministic generator for orders and stream picks.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn reads(m: Mode) -> bool {
    matches!(m, Mode::Read | Mode::ReadWrite)
}

fn writes(m: Mode) -> bool {
    matches!(m, Mode::Write | Mode::ReadWrite)
}

/// The byte a command writes: unique per (command, buffer, offset).
fn written(cmd: usize, buf: usize, off: u64) -> u64 {
    (1 << 40) | ((cmd as u64) << 16) | ((buf as u64) << 8) | off
}

/// The initial host bytes of a buffer created with host data.
fn initial(buf: usize, off: u64) -> u64 {
    (2 << 40) | ((buf as u64) << 8) | off
}

/// What an instance holds before anything is copied or written to it: unique per
/// instance, so that reading bytes that were never made valid there is always caught.
fn poison(rank: u32, loc: Location, buf: usize, off: u64) -> u64 {
    let l = match loc {
        Location::Host => 0,
        Location::Device(d) => u64::from(d) + 1,
    };
    (3 << 40) | (u64::from(rank) << 32) | (l << 16) | ((buf as u64) << 8) | off
}

fn set_at(segments: &[(Range<u64>, ValidSet)], off: u64) -> &ValidSet {
    &segments
        .iter()
        .find(|(r, _)| r.contains(&off))
        .expect("validity segments cover the buffer")
        .1
}

fn owner(scn: &Scenario, loc: Location) -> Option<u32> {
    match loc {
        Location::Host => None,
        Location::Device(d) => Some(scn.devices[d as usize].owner),
    }
}

/// The source rule, restated from the documentation (docs/scheduler.md): the hops that
/// bring bytes valid at `set` to `to`.
fn expected_route(scn: &Scenario, set: &ValidSet, to: Location) -> Vec<(Location, Location)> {
    let devices: Vec<u32> = set
        .locations()
        .iter()
        .filter_map(|l| match l {
            Location::Device(d) => Some(*d),
            Location::Host => None,
        })
        .collect();
    let desc = |d: u32| scn.devices[d as usize];
    match to {
        Location::Host => vec![(Location::Device(devices[0]), Location::Host)],
        Location::Device(t) => {
            let target = desc(t);
            if let Some(d) = devices.iter().find(|&&d| desc(d) == target) {
                vec![(Location::Device(*d), to)]
            } else if set.contains(Location::Host) {
                vec![(Location::Host, to)]
            } else if let Some(d) = devices.iter().find(|&&d| desc(d).owner == target.owner) {
                vec![(Location::Device(*d), Location::Host), (Location::Host, to)]
            } else {
                vec![(Location::Device(devices[0]), to)]
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Planning: running the scheduler over the command stream
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A transfer step; `tag` is its index among all steps (the message tag).
    Step {
        step: Step,
        buf: usize,
        tag: u64,
    },
    Cmd(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    token: u64,
    stream: StreamId,
    deps: Vec<u64>,
    kind: Kind,
}

#[derive(Debug, PartialEq, Eq)]
struct Planned {
    items: Vec<Item>,
    stats: SchedulerStats,
    final_validity: Vec<Vec<(Range<u64>, ValidSet)>>,
}

impl Planned {
    /// Each item's predecessors by index: its dependencies and the previous item on its
    /// stream.
    fn preds(&self) -> Vec<Vec<usize>> {
        let index: HashMap<u64, usize> = self
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.token, i))
            .collect();
        let mut last_on_stream: HashMap<StreamId, usize> = HashMap::new();
        self.items
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let mut p: Vec<usize> = it.deps.iter().map(|t| index[t]).collect();
                if let Some(prev) = last_on_stream.insert(it.stream, i) {
                    p.push(prev);
                }
                p
            })
            .collect()
    }
}

/// Runs one scheduler over the scenario. `rotate` changes the order devices are
/// registered in, which must not matter. Checks everything that can be checked at
/// scheduling time: the source rule, no redundant or undefined transfers, the valid sets
/// after each command, dependencies pointing backwards, the statistics.
fn plan(scn: &Scenario, rotate: usize) -> Result<Planned, String> {
    let mut s: Scheduler<u64> = Scheduler::new();
    let n = scn.devices.len();
    for i in 0..n {
        let d = (i + rotate) % n;
        s.add_device(d as u32, scn.devices[d]);
    }
    let ids: Vec<BufferId> = scn
        .buffers
        .iter()
        .map(|&(size, host)| s.create_buffer(size, host.then_some(Location::Host)))
        .collect();
    let buf_index = |id: BufferId| ids.iter().position(|&x| x == id).expect("known buffer");
    let mut defined: Vec<Vec<bool>> = scn
        .buffers
        .iter()
        .map(|&(size, host)| vec![host; size as usize])
        .collect();
    let all_streams: Vec<StreamId> = (0..n)
        .flat_map(|d| (0..scn.streams[d]).map(move |k| dev_stream(d as u32, k)))
        .collect();

    let mut items: Vec<Item> = Vec::new();
    let mut tokens = 1u64..;
    let mut next_fresh = FRESH_STREAMS;
    let mut tag = 0u64;
    let mut rng = Rng(scn.seed ^ 0x5EED);
    let mut step_bytes = 0u64;

    for (ci, cmd) in scn.commands.iter().enumerate() {
        let before: Vec<Vec<(Range<u64>, ValidSet)>> = ids
            .iter()
            .zip(&scn.buffers)
            .map(|(&id, &(size, _))| s.validity(id, 0..size))
            .collect();
        let accesses: Vec<Access> = cmd
            .accesses
            .iter()
            .map(|(b, r, m)| Access {
                buffer: ids[*b],
                range: r.clone(),
                mode: *m,
            })
            .collect();
        let token = tokens.next().expect("endless");
        let first_step = items.len();
        let deps = s.schedule(cmd.at, cmd.stream, &accesses, &token, |step, deps| {
            let stream = match scn.policy {
                StepStreams::Fresh => {
                    next_fresh += 1;
                    next_fresh
                }
                StepStreams::Destination => match (step.from, step.to) {
                    (_, Location::Device(d)) | (Location::Device(d), Location::Host) => {
                        dev_stream(d, 0)
                    }
                    (Location::Host, Location::Host) => u64::MAX,
                },
                StepStreams::Command => cmd.stream,
                StepStreams::Random => {
                    let k = rng.below(all_streams.len() + 1);
                    if k == all_streams.len() {
                        next_fresh += 1;
                        next_fresh
                    } else {
                        all_streams[k]
                    }
                }
            };
            let t = tokens.next().expect("endless");
            items.push(Item {
                token: t,
                stream,
                deps,
                kind: Kind::Step {
                    step: step.clone(),
                    buf: buf_index(step.buffer),
                    tag,
                },
            });
            tag += 1;
            (stream, t)
        });
        items.push(Item {
            token,
            stream: cmd.stream,
            deps,
            kind: Kind::Cmd(ci),
        });

        // The hops that delivered each byte, in step order.
        let mut hops: HashMap<(usize, u64), Vec<(Location, Location)>> = HashMap::new();
        for it in &items[first_step..items.len() - 1] {
            let Kind::Step { step, buf, .. } = &it.kind else {
                unreachable!()
            };
            step_bytes += step.range.end - step.range.start;
            if step.range.is_empty() || step.range.end > scn.buffers[*buf].0 {
                return Err(format!("command {ci}: bad step range {step:?}"));
            }
            for off in step.range.clone() {
                hops.entry((*buf, off))
                    .or_default()
                    .push((step.from, step.to));
            }
        }
        // Every byte the command reads that is defined and not valid at `at` comes by the
        // route the source rule names; no other byte moves.
        let mut read_bytes: HashSet<(usize, u64)> = HashSet::new();
        for (b, r, m) in &cmd.accesses {
            if reads(*m) {
                read_bytes.extend(r.clone().map(|off| (*b, off)));
            }
        }
        for (b, &(size, _)) in scn.buffers.iter().enumerate() {
            for off in 0..size {
                let set = set_at(&before[b], off);
                let expected =
                    if read_bytes.contains(&(b, off)) && !set.is_empty() && !set.contains(cmd.at) {
                        expected_route(scn, set, cmd.at)
                    } else {
                        Vec::new()
                    };
                let actual = hops.remove(&(b, off)).unwrap_or_default();
                if actual != expected {
                    return Err(format!(
                        "command {ci} {cmd:?}: buffer {b} byte {off} valid at {set:?}: \
                         hops {actual:?}, expected {expected:?}"
                    ));
                }
            }
        }
        // Valid sets after the command.
        for (b, r, m) in &cmd.accesses {
            if writes(*m) {
                for off in r.clone() {
                    defined[*b][off as usize] = true;
                }
            }
        }
        for (b, r, m) in &cmd.accesses {
            let after = s.validity(ids[*b], r.clone());
            for (seg, set) in &after {
                if seg.is_empty() {
                    continue;
                }
                if writes(*m) && *set != ValidSet::only(cmd.at) {
                    return Err(format!(
                        "command {ci}: after writing {seg:?} of buffer {b} at {:?} it is \
                         valid at {set:?}",
                        cmd.at
                    ));
                }
                if reads(*m) && !set.is_empty() && !set.contains(cmd.at) {
                    return Err(format!(
                        "command {ci}: after reading {seg:?} of buffer {b} at {:?} it is \
                         valid at {set:?}",
                        cmd.at
                    ));
                }
            }
        }
        for (b, &(size, _)) in scn.buffers.iter().enumerate() {
            let segs = s.validity(ids[b], 0..size);
            for off in 0..size {
                if set_at(&segs, off).is_empty() == defined[b][off as usize] {
                    return Err(format!(
                        "command {ci}: buffer {b} byte {off}: valid set {:?} but defined={}",
                        set_at(&segs, off),
                        defined[b][off as usize]
                    ));
                }
            }
        }
    }

    // Dependencies only name items submitted earlier (so no cycle is possible).
    let mut seen = HashSet::new();
    for it in &items {
        for d in &it.deps {
            if !seen.contains(d) {
                return Err(format!("{it:?} depends on a later or unknown token {d}"));
            }
        }
        seen.insert(it.token);
    }
    let steps = items
        .iter()
        .filter(|i| matches!(i.kind, Kind::Step { .. }))
        .count() as u64;
    let expected_stats = SchedulerStats {
        commands: scn.commands.len() as u64,
        steps,
        step_bytes,
    };
    if s.stats != expected_stats {
        return Err(format!("stats {:?}, expected {expected_stats:?}", s.stats));
    }
    let final_validity = ids
        .iter()
        .zip(&scn.buffers)
        .map(|(&id, &(size, _))| s.validity(id, 0..size))
        .collect();
    Ok(Planned {
        items,
        stats: s.stats,
        final_validity,
    })
}

// ---------------------------------------------------------------------------------------
// The reference: one location executing every command in order
// ---------------------------------------------------------------------------------------

struct Reference {
    /// Per command: every byte it reads and what it must see (None: undefined).
    reads: Vec<Vec<(usize, u64, Option<u64>)>>,
    /// Per buffer: the final bytes.
    bytes: Vec<Vec<Option<u64>>>,
}

fn reference(scn: &Scenario) -> Reference {
    let mut bytes: Vec<Vec<Option<u64>>> = scn
        .buffers
        .iter()
        .enumerate()
        .map(|(b, &(size, host))| (0..size).map(|o| host.then(|| initial(b, o))).collect())
        .collect();
    let mut all_reads = Vec::new();
    for (ci, cmd) in scn.commands.iter().enumerate() {
        // A command reads everything it reads before writing anything.
        let mut seen = Vec::new();
        for (b, r, m) in &cmd.accesses {
            if reads(*m) {
                seen.extend(r.clone().map(|off| (*b, off, bytes[*b][off as usize])));
            }
        }
        for (b, r, m) in &cmd.accesses {
            if writes(*m) {
                for off in r.clone() {
                    bytes[*b][off as usize] = Some(written(ci, *b, off));
                }
            }
        }
        all_reads.push(seen);
    }
    Reference {
        reads: all_reads,
        bytes,
    }
}

// ---------------------------------------------------------------------------------------
// Byte-level memories
// ---------------------------------------------------------------------------------------

/// The instances of every buffer: (rank, location, buffer) → bytes.
struct Memory<'a> {
    scn: &'a Scenario,
    cells: HashMap<(u32, Location, usize), Vec<u64>>,
}

impl<'a> Memory<'a> {
    fn new(scn: &'a Scenario) -> Self {
        Memory {
            scn,
            cells: HashMap::new(),
        }
    }

    fn cell(&mut self, rank: u32, loc: Location, buf: usize) -> &mut Vec<u64> {
        let (size, host) = self.scn.buffers[buf];
        self.cells.entry((rank, loc, buf)).or_insert_with(|| {
            (0..size)
                .map(|o| {
                    if host && loc == Location::Host {
                        initial(buf, o)
                    } else {
                        poison(rank, loc, buf, o)
                    }
                })
                .collect()
        })
    }

    fn read(&mut self, rank: u32, loc: Location, buf: usize, r: Range<u64>) -> Vec<u64> {
        self.cell(rank, loc, buf)[r.start as usize..r.end as usize].to_vec()
    }

    fn write(&mut self, rank: u32, loc: Location, buf: usize, start: u64, data: &[u64]) {
        let s = start as usize;
        self.cell(rank, loc, buf)[s..s + data.len()].copy_from_slice(data);
    }

    fn copy(&mut self, rank: u32, step: &Step, buf: usize) {
        let data = self.read(rank, step.from, buf, step.range.clone());
        self.write(rank, step.to, buf, step.range.start, &data);
    }

    /// Runs command `ci` at its location's instance on `rank`: checks every byte it reads
    /// against the reference, then writes.
    fn exec(&mut self, rank: u32, ci: usize, refr: &Reference) -> Result<(), String> {
        let cmd = &self.scn.commands[ci];
        for &(b, off, expected) in &refr.reads[ci] {
            let got = self.cell(rank, cmd.at, b)[off as usize];
            if let Some(e) = expected {
                if got != e {
                    return Err(format!(
                        "rank {rank}: command {ci} {cmd:?} read byte {off} of buffer {b} \
                         as {got:#x}, expected {e:#x}"
                    ));
                }
            }
        }
        for (b, r, m) in &cmd.accesses {
            if writes(*m) {
                for off in r.clone() {
                    self.cell(rank, cmd.at, *b)[off as usize] = written(ci, *b, off);
                }
            }
        }
        Ok(())
    }

    /// At the end, every location of every valid set holds the reference bytes, on every
    /// rank holding an instance of that location (`ranks_of`).
    fn check_final(
        &mut self,
        planned: &Planned,
        refr: &Reference,
        ranks_of: impl Fn(Location) -> Vec<u32>,
    ) -> Result<(), String> {
        for (b, segs) in planned.final_validity.iter().enumerate() {
            for (r, set) in segs {
                for &loc in set.locations() {
                    for rank in ranks_of(loc) {
                        for off in r.clone() {
                            let got = self.cell(rank, loc, b)[off as usize];
                            let want = refr.bytes[b][off as usize];
                            if want != Some(got) {
                                return Err(format!(
                                    "end: buffer {b} byte {off} at {loc:?} on rank {rank} \
                                     is {got:#x}, expected {want:x?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// One process holding every location
// ---------------------------------------------------------------------------------------

/// A random order of `preds.len()` items in which each comes after its predecessors.
fn random_topological_order(preds: &[Vec<usize>], rng: &mut Rng) -> Vec<usize> {
    let n = preds.len();
    let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut succs = vec![Vec::new(); n];
    for (i, p) in preds.iter().enumerate() {
        for &j in p {
            assert!(j < i, "predecessor {j} of {i} is not earlier");
            succs[j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| missing[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let i = ready.swap_remove(rng.below(ready.len()));
        order.push(i);
        for &s in &succs[i] {
            missing[s] -= 1;
            if missing[s] == 0 {
                ready.push(s);
            }
        }
    }
    assert_eq!(order.len(), n, "dependency cycle");
    order
}

fn run_single(
    scn: &Scenario,
    planned: &Planned,
    refr: &Reference,
    order: &[usize],
) -> Result<(), String> {
    let mut mem = Memory::new(scn);
    for &i in order {
        match &planned.items[i].kind {
            Kind::Step { step, buf, .. } => mem.copy(0, step, *buf),
            Kind::Cmd(ci) => mem.exec(0, *ci, refr)?,
        }
    }
    mem.check_final(planned, refr, |_| vec![0])
}

// ---------------------------------------------------------------------------------------
// The cluster: per-rank actions after Table IV.1
// ---------------------------------------------------------------------------------------

/// What one rank does for one item.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    /// Runs the command (device commands on the owner, host commands on every rank).
    Exec(usize),
    /// Copies locally (both ends on this rank, the host copy counting as local).
    Copy,
    /// Reads the source and sends it to `peers`; with `to_host`, also writes the local
    /// host copy (a step to the host is a broadcast by the source's owner).
    Send { peers: Vec<u32>, to_host: bool },
    /// Receives from `peer` into the destination.
    Recv { peer: u32 },
}

fn role(scn: &Scenario, item: &Item, rank: u32) -> Option<Role> {
    match &item.kind {
        Kind::Cmd(ci) => {
            let at = scn.commands[*ci].at;
            match owner(scn, at) {
                None => Some(Role::Exec(*ci)),
                Some(o) => (o == rank).then_some(Role::Exec(*ci)),
            }
        }
        Kind::Step { step, .. } => match (owner(scn, step.from), owner(scn, step.to)) {
            (None, None) => panic!("host to host step {step:?}"),
            // The host copy is replicated: the destination's owner copies locally.
            (None, Some(t)) => (t == rank).then_some(Role::Copy),
            // Read by the owner and broadcast to every rank.
            (Some(f), None) => Some(if f == rank {
                Role::Send {
                    peers: (0..scn.ranks).filter(|&r| r != f).collect(),
                    to_host: true,
                }
            } else {
                Role::Recv { peer: f }
            }),
            (Some(f), Some(t)) if f == t => (f == rank).then_some(Role::Copy),
            (Some(f), Some(t)) => {
                if rank == f {
                    Some(Role::Send {
                        peers: vec![t],
                        to_host: false,
                    })
                } else if rank == t {
                    Some(Role::Recv { peer: f })
                } else {
                    None
                }
            }
        },
    }
}

fn step_of(item: &Item) -> (&Step, usize, u64) {
    match &item.kind {
        Kind::Step { step, buf, tag } => (step, *buf, *tag),
        Kind::Cmd(_) => panic!("not a step"),
    }
}

type Message = (u32, u32, u64); // (from rank, to rank, tag)

/// Every send meets exactly one receive: same tag, same pair of ranks, same size.
fn check_matching(scn: &Scenario, planned: &Planned) -> Result<(), String> {
    let mut sends: BTreeMap<Message, u64> = BTreeMap::new();
    let mut recvs: BTreeMap<Message, u64> = BTreeMap::new();
    for item in &planned.items {
        for rank in 0..scn.ranks {
            match role(scn, item, rank) {
                Some(Role::Send { peers, .. }) => {
                    let (step, _, tag) = step_of(item);
                    for p in peers {
                        let size = step.range.end - step.range.start;
                        if sends.insert((rank, p, tag), size).is_some() {
                            return Err(format!("two sends {rank}→{p} with tag {tag}"));
                        }
                    }
                }
                Some(Role::Recv { peer }) => {
                    let (step, _, tag) = step_of(item);
                    let size = step.range.end - step.range.start;
                    if recvs.insert((peer, rank, tag), size).is_some() {
                        return Err(format!("two receives {peer}→{rank} with tag {tag}"));
                    }
                }
                _ => {}
            }
        }
    }
    if sends != recvs {
        return Err(format!("sends {sends:?} != receives {recvs:?}"));
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Local,
    Send(u32, u64),
    Recv(u32, u64),
}

/// Each rank processes its action list in order; a receive blocks until the matching
/// send was posted; with `rendezvous`, a send also blocks until it was received.
fn check_progress(scn: &Scenario, planned: &Planned, rendezvous: bool) -> Result<(), String> {
    let lists: Vec<Vec<Act>> = (0..scn.ranks)
        .map(|rank| {
            let mut acts = Vec::new();
            for item in &planned.items {
                match role(scn, item, rank) {
                    None => {}
                    Some(Role::Exec(_)) | Some(Role::Copy) => acts.push(Act::Local),
                    Some(Role::Send { peers, .. }) => {
                        let tag = step_of(item).2;
                        acts.extend(peers.into_iter().map(|p| Act::Send(p, tag)));
                    }
                    Some(Role::Recv { peer }) => acts.push(Act::Recv(peer, step_of(item).2)),
                }
            }
            acts
        })
        .collect();
    let mut pc = vec![0usize; lists.len()];
    let mut posted: HashSet<Message> = HashSet::new();
    let mut received: HashSet<Message> = HashSet::new();
    loop {
        let mut progressed = false;
        for rank in 0..lists.len() {
            while let Some(&act) = lists[rank].get(pc[rank]) {
                let me = rank as u32;
                let done = match act {
                    Act::Local => true,
                    Act::Send(p, tag) => {
                        posted.insert((me, p, tag));
                        !rendezvous || received.contains(&(me, p, tag))
                    }
                    Act::Recv(p, tag) => {
                        let ok = posted.contains(&(p, me, tag));
                        if ok {
                            received.insert((p, me, tag));
                        }
                        ok
                    }
                };
                if !done {
                    break;
                }
                pc[rank] += 1;
                progressed = true;
            }
        }
        if pc.iter().zip(&lists).all(|(&p, l)| p == l.len()) {
            return Ok(());
        }
        if !progressed {
            let stuck: Vec<_> = pc
                .iter()
                .zip(&lists)
                .enumerate()
                .map(|(r, (&p, l))| (r, l.get(p).copied()))
                .collect();
            return Err(format!("deadlock (rendezvous={rendezvous}): {stuck:?}"));
        }
    }
}

/// Runs every rank's actions asynchronously on per-rank memories, in a random global
/// interleaving. On a rank, an action waits for its dependencies that this rank runs
/// (others are bookkeeping here and count as done at once, or, with `markers`, complete
/// in their stream's order like a marker), for the previous action of its stream on this
/// rank, and a receive for its message.
fn run_cluster(
    scn: &Scenario,
    planned: &Planned,
    refr: &Reference,
    markers: bool,
    rng: &mut Rng,
) -> Result<(), String> {
    let index: HashMap<u64, usize> = planned
        .items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.token, i))
        .collect();
    struct Task {
        rank: u32,
        item: usize,
        role: Option<Role>,
        preds: Vec<usize>,
    }
    let mut tasks: Vec<Task> = Vec::new();
    for rank in 0..scn.ranks {
        let mut task_of: HashMap<usize, usize> = HashMap::new();
        let mut last_on_stream: HashMap<StreamId, usize> = HashMap::new();
        for (i, item) in planned.items.iter().enumerate() {
            let role = role(scn, item, rank);
            if role.is_none() && !markers {
                continue;
            }
            let mut preds: Vec<usize> = item
                .deps
                .iter()
                .filter_map(|t| task_of.get(&index[t]).copied())
                .collect();
            let id = tasks.len();
            if let Some(prev) = last_on_stream.insert(item.stream, id) {
                preds.push(prev);
            }
            task_of.insert(i, id);
            tasks.push(Task {
                rank,
                item: i,
                role,
                preds,
            });
        }
    }
    let mut mem = Memory::new(scn);
    let mut done = vec![false; tasks.len()];
    let mut messages: HashMap<Message, Vec<u64>> = HashMap::new();
    let mut remaining = tasks.len();
    while remaining > 0 {
        let ready: Vec<usize> = (0..tasks.len())
            .filter(|&t| {
                !done[t]
                    && tasks[t].preds.iter().all(|&p| done[p])
                    && match &tasks[t].role {
                        Some(Role::Recv { peer }) => {
                            let tag = step_of(&planned.items[tasks[t].item]).2;
                            messages.contains_key(&(*peer, tasks[t].rank, tag))
                        }
                        _ => true,
                    }
            })
            .collect();
        if ready.is_empty() {
            return Err(format!("cluster deadlock with {remaining} actions left"));
        }
        let t = ready[rng.below(ready.len())];
        let task = &tasks[t];
        let item = &planned.items[task.item];
        let rank = task.rank;
        match &task.role {
            None => {}
            Some(Role::Exec(ci)) => mem.exec(rank, *ci, refr)?,
            Some(Role::Copy) => {
                let (step, buf, _) = step_of(item);
                mem.copy(rank, step, buf);
            }
            Some(Role::Send { peers, to_host }) => {
                let (step, buf, tag) = step_of(item);
                let data = mem.read(rank, step.from, buf, step.range.clone());
                if *to_host {
                    mem.write(rank, Location::Host, buf, step.range.start, &data);
                }
                for &p in peers {
                    messages.insert((rank, p, tag), data.clone());
                }
            }
            Some(Role::Recv { peer }) => {
                let (step, buf, tag) = step_of(item);
                let data = messages[&(*peer, rank, tag)].clone();
                mem.write(rank, step.to, buf, step.range.start, &data);
            }
        }
        done[t] = true;
        remaining -= 1;
    }
    let ranks = scn.ranks;
    mem.check_final(planned, refr, |loc| match owner(scn, loc) {
        None => (0..ranks).collect(),
        Some(o) => vec![o],
    })
}

// ---------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------

fn check_scenario(scn: &Scenario) -> Result<(), String> {
    let planned = plan(scn, 0)?;
    // Every rank runs its own scheduler on the same stream (and may register devices in
    // another order): the plans must be identical, dependencies included.
    for rank in 1..scn.ranks as usize {
        let other = plan(scn, rank)?;
        if other != planned {
            return Err(format!("rank {rank} planned differently"));
        }
    }
    let refr = reference(scn);
    let mut rng = Rng(scn.seed);

    let in_order: Vec<usize> = (0..planned.items.len()).collect();
    run_single(scn, &planned, &refr, &in_order).map_err(|e| format!("in order: {e}"))?;
    let preds = planned.preds();
    for _ in 0..3 {
        let order = random_topological_order(&preds, &mut rng);
        run_single(scn, &planned, &refr, &order).map_err(|e| format!("async: {e}"))?;
    }

    check_matching(scn, &planned)?;
    check_progress(scn, &planned, false)?;
    check_progress(scn, &planned, true)?;
    for (markers, runs) in [(true, 1), (false, 4)] {
        for _ in 0..runs {
            run_cluster(scn, &planned, &refr, markers, &mut rng)
                .map_err(|e| format!("cluster (markers={markers}): {e}"))?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_command_streams_execute_like_one_device(scn in scenario()) {
        if let Err(e) = check_scenario(&scn) {
            prop_assert!(false, "{}", e);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Focused cases
// ---------------------------------------------------------------------------------------

/// A scheduler over `devices` (owner, group), device indices in order.
fn sched(devices: &[(u32, u32)]) -> Scheduler<u32> {
    let mut s = Scheduler::new();
    for (i, &(owner, group)) in devices.iter().enumerate() {
        s.add_device(i as u32, DeviceDesc { owner, group });
    }
    s
}

/// Schedules one command; steps get tokens from 1000 on, each on its own stream.
/// Returns the steps (with their dependencies) and the command's dependencies.
fn run(
    s: &mut Scheduler<u32>,
    at: Location,
    stream: StreamId,
    accesses: &[Access],
    token: u32,
) -> (Vec<(Step, Vec<u32>)>, Vec<u32>) {
    let mut steps = Vec::new();
    let mut next = 1000 + 10 * token;
    let deps = s.schedule(at, stream, accesses, &token, |step, deps| {
        steps.push((step.clone(), deps));
        next += 1;
        (u64::from(next) << 8, next)
    });
    (steps, deps)
}

fn acc(buffer: BufferId, range: Range<u64>, mode: Mode) -> Access {
    Access {
        buffer,
        range,
        mode,
    }
}

fn hops(steps: &[(Step, Vec<u32>)]) -> Vec<(Location, Location, Range<u64>)> {
    steps
        .iter()
        .map(|(s, _)| (s.from, s.to, s.range.clone()))
        .collect()
}

fn set(locs: &[Location]) -> ValidSet {
    locs.iter().copied().collect()
}

const H: Location = Location::Host;
const D0: Location = Location::Device(0);
const D1: Location = Location::Device(1);
const D2: Location = Location::Device(2);

#[test]
fn empty_and_reversed_ranges_do_nothing() {
    let mut s = sched(&[(0, 0), (0, 0)]);
    let b = s.create_buffer(16, Some(D0));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 9..3;
    let (steps, deps) = run(
        &mut s,
        D1,
        1,
        &[
            acc(b, 4..4, Mode::Read),
            acc(b, 7..7, Mode::Write),
            acc(b, reversed.clone(), Mode::ReadWrite),
        ],
        1,
    );
    assert!(steps.is_empty());
    assert!(deps.is_empty());
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::only(D0))]);
    // Nothing was recorded for them either: a writer on another stream waits for nothing.
    let (steps, deps) = run(&mut s, D1, 2, &[acc(b, 0..16, Mode::Write)], 2);
    assert!(steps.is_empty() && deps.is_empty());
    // An empty query range has no segments.
    assert!(s.validity(b, 5..5).is_empty());
    assert!(s.validity(b, reversed).is_empty());
    s.host_wrote(b, 3..3);
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::only(D1))]);
    assert_eq!(
        s.stats,
        SchedulerStats {
            commands: 2,
            steps: 0,
            step_bytes: 0
        }
    );
}

#[test]
fn overlapping_accesses_in_one_command_move_each_byte_once() {
    let mut s = sched(&[(0, 0)]);
    let b = s.create_buffer(32, Some(H));
    let (steps, deps) = run(
        &mut s,
        D0,
        1,
        &[
            acc(b, 0..8, Mode::Read),
            acc(b, 4..12, Mode::ReadWrite),
            acc(b, 10..16, Mode::Write),
            acc(b, 6..7, Mode::Read),
        ],
        1,
    );
    assert_eq!(hops(&steps), vec![(H, D0, 0..8), (H, D0, 8..12)]);
    // The command waits for both steps; the second step waits for nothing at D0 but the
    // first (it writes the same instance).
    // (A token may be named more than once, once per access.)
    let mut deps = deps;
    deps.dedup();
    assert_eq!(deps, vec![1011, 1012]);
    assert_eq!(steps[1].1, vec![1011]);
    assert_eq!(
        s.validity(b, 0..32),
        vec![
            (0..4, set(&[H, D0])),
            (4..16, ValidSet::only(D0)),
            (16..32, ValidSet::only(H)),
        ]
    );
    // Overlapping writes only: nothing moves.
    let (steps, _) = run(
        &mut s,
        D0,
        1,
        &[acc(b, 16..24, Mode::Write), acc(b, 20..28, Mode::Write)],
        2,
    );
    assert!(steps.is_empty());
    assert_eq!(s.validity(b, 16..32)[0], (16..28, ValidSet::only(D0)));
}

#[test]
fn reading_where_the_bytes_are_valid_moves_nothing() {
    // D0 and D1 alike (same owner and group), D2 another group of the same owner.
    let mut s = sched(&[(0, 0), (0, 0), (0, 1)]);
    let b = s.create_buffer(16, Some(H));
    let read = [acc(b, 0..16, Mode::Read)];
    assert!(run(&mut s, H, 1, &read, 1).0.is_empty());
    assert_eq!(hops(&run(&mut s, D0, 1, &read, 2).0), vec![(H, D0, 0..16)]);
    assert!(run(&mut s, D0, 1, &read, 3).0.is_empty());
    assert!(run(&mut s, H, 1, &read, 4).0.is_empty());
    // A device alike to a valid one copies from it rather than from the host.
    assert_eq!(hops(&run(&mut s, D1, 2, &read, 5).0), vec![(D0, D1, 0..16)]);
    // Another group takes the host copy when it is valid.
    assert_eq!(hops(&run(&mut s, D2, 3, &read, 6).0), vec![(H, D2, 0..16)]);
    assert_eq!(s.validity(b, 0..16), vec![(0..16, set(&[H, D0, D1, D2]))]);
    assert_eq!(s.stats.steps, 3);
    assert_eq!(s.stats.step_bytes, 48);
}

#[test]
fn partial_writes_leave_mixed_validity_and_each_segment_takes_its_route() {
    // D0: rank 0 group 0; D1: rank 0 group 1; D2: rank 1.
    let mut s = sched(&[(0, 0), (0, 1), (1, 0)]);
    let b = s.create_buffer(32, Some(H));
    run(&mut s, D0, 1, &[acc(b, 8..16, Mode::Write)], 1);
    run(&mut s, D2, 2, &[acc(b, 12..20, Mode::Write)], 2);
    assert_eq!(
        s.validity(b, 0..32),
        vec![
            (0..8, ValidSet::only(H)),
            (8..12, ValidSet::only(D0)),
            (12..20, ValidSet::only(D2)),
            (20..32, ValidSet::only(H)),
        ]
    );
    let (steps, deps) = run(&mut s, D1, 3, &[acc(b, 0..32, Mode::Read)], 3);
    assert_eq!(
        hops(&steps),
        vec![
            (H, D1, 0..8),
            // Same rank, other group: through the host copy.
            (D0, H, 8..12),
            (H, D1, 8..12),
            // Another rank: directly (a send and a receive).
            (D2, D1, 12..20),
            (H, D1, 20..32),
        ]
    );
    // Each step waits for the writer of its source, and for earlier accesses to its
    // destination instance (the host hop also for the step it stages).
    assert!(steps[1].1.contains(&1));
    assert!(steps[2].1.contains(&steps_token(3, 1)));
    assert_eq!(steps[3].1, vec![2, steps_token(3, 2)]);
    // The steps into D1 form a chain; the command waits for its last link.
    assert_eq!(deps, vec![steps_token(3, 4)]);
    assert_eq!(
        s.validity(b, 0..32),
        vec![
            (0..8, set(&[H, D1])),
            (8..12, set(&[H, D0, D1])),
            (12..20, set(&[D1, D2])),
            (20..32, set(&[H, D1])),
        ]
    );
}

/// The token `run` gives the `n`th step (from 0) of command `token`.
fn steps_token(token: u32, n: u32) -> u32 {
    1000 + 10 * token + 1 + n
}

#[test]
fn undefined_bytes_never_move() {
    let mut s = sched(&[(0, 0), (1, 0)]);
    let b = s.create_buffer(16, None);
    let read = [acc(b, 0..16, Mode::Read)];
    for (i, at) in [D0, D1, H].into_iter().enumerate() {
        let (steps, deps) = run(&mut s, at, 1, &read, i as u32);
        assert!(steps.is_empty() && deps.is_empty());
    }
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::default())]);
    run(&mut s, D0, 1, &[acc(b, 4..8, Mode::Write)], 10);
    assert_eq!(hops(&run(&mut s, D1, 2, &read, 11).0), vec![(D0, D1, 4..8)]);
    assert_eq!(hops(&run(&mut s, H, 1, &read, 12).0), vec![(D0, H, 4..8)]);
    assert_eq!(
        s.validity(b, 0..16),
        vec![
            (0..4, ValidSet::default()),
            (4..8, set(&[H, D0, D1])),
            (8..16, ValidSet::default()),
        ]
    );
}

#[test]
fn host_wrote_leaves_the_host_copy_alone_valid() {
    let mut s = sched(&[(0, 0)]);
    let b = s.create_buffer(16, Some(H));
    let read = [acc(b, 0..16, Mode::Read)];
    run(&mut s, D0, 1, &read, 1);
    s.host_wrote(b, 4..8);
    assert_eq!(
        s.validity(b, 0..16),
        vec![
            (0..4, set(&[H, D0])),
            (4..8, ValidSet::only(H)),
            (8..16, set(&[H, D0])),
        ]
    );
    assert_eq!(hops(&run(&mut s, D0, 1, &read, 2).0), vec![(H, D0, 4..8)]);
}

#[test]
fn released_buffers_are_ignored() {
    let mut s = sched(&[(0, 0)]);
    let b = s.create_buffer(16, Some(H));
    s.release_buffer(b);
    let (steps, deps) = run(&mut s, D0, 1, &[acc(b, 0..16, Mode::ReadWrite)], 1);
    assert!(steps.is_empty() && deps.is_empty());
    assert!(s.validity(b, 0..16).is_empty());
    // Ids are never reused.
    assert_ne!(s.create_buffer(16, None), b);
}

/// Figure IV.3 of the thesis: C1 on D1 (rank 0) and C2 on D2 (rank 1) both modify M.
/// Scheduled in enqueue order on both ranks, the plans agree: one send meets one
/// receive, and no rank waits for the other.
#[test]
fn thesis_figure_iv3_cannot_deadlock() {
    let scn = Scenario {
        ranks: 2,
        devices: vec![
            DeviceDesc { owner: 0, group: 0 },
            DeviceDesc { owner: 1, group: 0 },
        ],
        streams: vec![1, 1],
        buffers: vec![(8, true)],
        commands: vec![
            Command {
                at: D0,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..8, Mode::ReadWrite)],
            },
            Command {
                at: D1,
                stream: dev_stream(1, 0),
                accesses: vec![(0, 0..8, Mode::ReadWrite)],
            },
            Command {
                at: H,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..8, Mode::Read)],
            },
        ],
        policy: StepStreams::Destination,
        seed: 3,
    };
    let planned = plan(&scn, 0).unwrap();
    assert_eq!(planned, plan(&scn, 1).unwrap());
    let steps: Vec<(Location, Location)> = planned
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            Kind::Step { step, .. } => Some((step.from, step.to)),
            Kind::Cmd(_) => None,
        })
        .collect();
    assert_eq!(steps, vec![(H, D0), (D0, D1), (D1, H)]);
    check_matching(&scn, &planned).unwrap();
    check_progress(&scn, &planned, true).unwrap();
    check_scenario(&scn).unwrap();
}

/// Regression: the host copy is replicated, but a step from it to a device is run only by
/// the device's owner. A host command reading the host copy on a stream, followed on the
/// same stream by such a step to another rank's device, must not drop the host command
/// from the readers a later host writer waits for: on the other ranks the step is
/// bookkeeping that completes at once, so waiting for it would not order the writer after
/// the host command there.
#[test]
fn a_host_reader_is_not_forgotten_for_a_step_of_another_rank() {
    let s0 = dev_stream(0, 0);
    let s1 = dev_stream(1, 0);
    let cmd = |at, stream, mode| Command {
        at,
        stream,
        accesses: vec![(0, 0..4, mode)],
    };
    let scn = Scenario {
        ranks: 2,
        devices: vec![
            DeviceDesc { owner: 0, group: 0 },
            DeviceDesc { owner: 1, group: 0 },
        ],
        streams: vec![1, 1],
        buffers: vec![(4, true)],
        commands: vec![
            // A non-blocking read into host memory on D1's queue: every rank reads its
            // host copy.
            cmd(H, s1, Mode::Read),
            // A kernel on D1 reads the buffer: Host → D1 on D1's stream, rank 1 only.
            cmd(D1, s1, Mode::Read),
            // A kernel on D0 overwrites it; then a read to the host: D0 → Host.
            cmd(D0, s0, Mode::Write),
            cmd(H, s0, Mode::Read),
        ],
        policy: StepStreams::Destination,
        seed: 1,
    };
    let planned = plan(&scn, 0).unwrap();
    let to_host = planned
        .items
        .iter()
        .find(|i| matches!(&i.kind, Kind::Step { step, .. } if step.to == H))
        .unwrap();
    let first_host_read = planned.items[0].token;
    assert!(
        to_host.deps.contains(&first_host_read),
        "{to_host:?} must wait for the first host read"
    );
    let refr = reference(&scn);
    let mut rng = Rng(7);
    for _ in 0..200 {
        run_cluster(&scn, &planned, &refr, false, &mut rng).unwrap();
    }
}
