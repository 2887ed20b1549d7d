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
//! - **as a cluster**: every rank runs its own scheduler on the command stream, each step
//!   becomes per-rank actions after Table IV.1 (local copy, send, receive, nothing; a step
//!   to the host is a broadcast, since the host copy is replicated), every message takes
//!   its tag from a counter per pair of ranks, sends and receives must pair up exactly,
//!   the ranks' action lists must run to completion in order, and the ranks' actions run
//!   asynchronously on per-rank memories (work of other ranks is bookkeeping only and
//!   counts as done at once). Twice: once with every rank given every command (the plans
//!   must be identical), once with the queueing optimisation, where a rank leaves out the
//!   device commands of other ranks that touch only buffers attached to other ranks'
//!   devices (the plans then differ in which commands they hold, but a command two ranks
//!   both scheduled must have given both the same steps).
//!
//! Scenarios also attach buffers to devices (`clAttachBufferToDevice`): the runtime makes
//! the device current with a command there reading the whole buffer, on a fresh stream,
//! then calls `Scheduler::attach`.
//!
//! And they mark accesses pass-through (`Access::pass_through`, a copy's source): such a
//! read may run in place on another device (`Scheduler::read_elsewhere`, which every
//! execution follows), and its pass-through step leaves its destination invalid. The
//! executions land such a step in its destination's instance, or, as the runtime does,
//! in a block only the command reads (`common::Memory`).

mod common;

use common::{
    owner, random_topological_order, reads, reference, writes, Item, Kind, Memory, RankPlan,
    Reference, Rng, Role, World,
};
use mirrorcl_scheduler::{
    Access, BufferId, DeviceDesc, Location, Mode, Placement, Scheduler, SchedulerStats, Step,
    StreamId, ValidSet, Variant,
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
    /// An attach operation: this command, at a device on a fresh stream, reads the whole
    /// of its one buffer; right after it is scheduled, the buffer is attached to the
    /// device. (Never left out by the queueing optimisation.)
    attach: bool,
}

impl Command {
    /// The attach operation of `buffer` (of `size` bytes) to `device`, as the `ci`th
    /// command of a scenario.
    fn attach(ci: usize, buffer: usize, size: u64, device: u32) -> Command {
        Command {
            at: Location::Device(device),
            stream: attach_stream(ci),
            accesses: vec![(buffer, 0..size, Mode::Read)],
            attach: true,
        }
    }
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
    /// One access in this many, by command and buffer, is marked pass-through (0: none);
    /// see `World::pass_through`.
    pass_through_every: usize,
    seed: u64,
}

impl World for Scenario {
    fn ranks(&self) -> u32 {
        self.ranks
    }
    fn devices(&self) -> &[DeviceDesc] {
        &self.devices
    }
    fn buffers(&self) -> &[(u64, bool)] {
        &self.buffers
    }
    fn commands(&self) -> usize {
        self.commands.len()
    }
    fn at(&self, ci: usize) -> Location {
        self.commands[ci].at
    }
    fn accesses(&self, ci: usize) -> &common::Accesses {
        &self.commands[ci].accesses
    }
    fn pass_through(&self, ci: usize, i: usize) -> bool {
        let cmd = &self.commands[ci];
        let b = cmd.accesses[i].0;
        // Chosen by command and buffer, alike on every rank, writes too (which must ignore
        // it); never an attach operation's read, which must leave the device current.
        let every = self.pass_through_every;
        !cmd.attach && every != 0 && (ci + 2 * b) % every == every / 2
    }
}

fn dev_stream(d: u32, k: u32) -> StreamId {
    1000 + 10 * u64::from(d) + u64::from(k)
}

const FRESH_STREAMS: u64 = 1 << 32;

/// The fresh stream of the attach operation that is the `ci`th command.
fn attach_stream(ci: usize) -> StreamId {
    (1 << 40) + ci as u64
}

/// (location, stream, accesses, kind: an attach operation when below the scenario's
/// attach threshold)
type RawCommand = (u8, u8, Vec<(u8, u8, u8, u8)>, u8);

fn raw_command() -> impl Strategy<Value = RawCommand> {
    (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), 0u8..3), 0..=3),
        any::<u8>(),
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
        // How often a command is an attach operation: never, sometimes, often.
        prop_oneof![Just(0u8), Just(24u8), Just(88u8)],
        // How many accesses are marked pass-through: none, a quarter, all.
        prop_oneof![Just(0usize), Just(4), Just(1)],
    )
        .prop_map(|(ranks, buffers, raw, policy, seed, attach_below, every)| {
            let mut devices = Vec::new();
            let mut streams = Vec::new();
            for (owner, (groups, devs)) in ranks.iter().enumerate() {
                for &(g, s) in devs {
                    devices.push(DeviceDesc {
                        owner: owner as u32,
                        group: g % groups,
                        // Half the vendor contexts keep disjoint bytes apart (NVIDIA).
                        ranges_apart: (g % groups).is_multiple_of(2),
                    });
                    streams.push(s);
                }
            }
            let ndev = devices.len();
            let commands = raw
                .into_iter()
                .enumerate()
                .map(|(ci, (loc, stream, accs, kind))| {
                    if kind < attach_below {
                        let b = usize::from(stream) % buffers.len();
                        let d = usize::from(loc) % ndev;
                        return Command::attach(ci, b, buffers[b].0, d as u32);
                    }
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
                        attach: false,
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
                pass_through_every: every,
                seed,
            }
        })
}

// ---------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------

fn set_at(segments: &[(Range<u64>, ValidSet)], off: u64) -> &ValidSet {
    &segments
        .iter()
        .find(|(r, _)| r.contains(&off))
        .expect("validity segments cover the buffer")
        .1
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
            let alike = |d: u32| (desc(d).owner, desc(d).group) == (target.owner, target.group);
            if let Some(d) = devices.iter().find(|&&d| alike(d)) {
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

/// Whether `route` is one hop between devices of two ranks: a pass-through read's bytes
/// come so by a pass-through step.
fn one_hop_across_ranks(scn: &Scenario, route: &[(Location, Location)]) -> bool {
    match route {
        [(from, to)] => matches!(
            (owner(scn, *from), owner(scn, *to)),
            (Some(f), Some(t)) if f != t
        ),
        _ => false,
    }
}

/// The device a pass-through read at `at` of bytes valid at `sets` (per byte), some of
/// them not at `at`, reads in place: the lowest-numbered other device of `at`'s vendor
/// context (owner and group) that holds every defined byte.
fn in_place_source(scn: &Scenario, at: Location, sets: &[(u64, ValidSet)]) -> Option<u32> {
    let Location::Device(t) = at else {
        return None;
    };
    let context = |d: u32| (scn.devices[d as usize].owner, scn.devices[d as usize].group);
    (0..scn.devices.len() as u32).find(|&d| {
        d != t
            && context(d) == context(t)
            && (sets.iter()).all(|(_, set)| set.is_empty() || set.contains(Location::Device(d)))
    })
}

// ---------------------------------------------------------------------------------------
// Planning: running the scheduler over the command stream
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
struct Planned {
    /// In plan order: a command's steps before it, the command, the steps that send its
    /// written bytes back to attached devices.
    items: Vec<Item>,
    stats: SchedulerStats,
    final_validity: Vec<Vec<(Range<u64>, ValidSet)>>,
    /// Per buffer, the device it is attached to at the end.
    final_attached: Vec<Option<u32>>,
}

impl Planned {
    /// Each item's predecessors by index: its dependencies and the previous item on its
    /// stream.
    fn preds(&self) -> Vec<Vec<usize>> {
        common::preds(&self.items)
    }

    /// Per scheduled command, the steps planned for it, in order.
    fn steps_by_command(&self) -> BTreeMap<usize, Vec<&Step>> {
        let mut by: BTreeMap<usize, Vec<&Step>> = BTreeMap::new();
        for it in &self.items {
            match &it.kind {
                Kind::Cmd { ci, .. } => {
                    by.entry(*ci).or_default();
                }
                Kind::Step { step, cmd, .. } => by.entry(*cmd).or_default().push(step),
            }
        }
        by
    }

    /// Per scheduled command, what `Scheduler::read_elsewhere` gave right after it.
    fn elsewhere_by_command(&self) -> BTreeMap<usize, &[(usize, u32)]> {
        (self.items.iter())
            .filter_map(|it| match &it.kind {
                Kind::Cmd { ci, elsewhere } => Some((*ci, elsewhere.as_slice())),
                Kind::Step { .. } => None,
            })
            .collect()
    }
}

/// Which commands a rank's scheduler is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feed {
    /// Every command.
    All,
    /// Every command but those this rank leaves out (the queueing optimisation).
    Rank(u32, LeaveOut),
}

/// The queueing optimisation: which commands of other ranks a rank leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeaveOut {
    /// A command at another rank's device every buffer of which is attached to another
    /// rank's device. Wrong: when the attached device and the command's device belong to
    /// one rank but to different groups, the bytes move through the host copy, which is a
    /// broadcast every rank must receive. See the test
    /// `leaving_out_a_command_that_stages_through_the_host_copy_loses_a_broadcast`.
    AnyAttached,
    /// The same, but every attached device must also be alike to the command's device
    /// (same owner and group; the device itself included) or of another rank than the
    /// command's: then no step of the command goes through the host copy. The proptest
    /// uses this rule.
    NoHostHop,
}

/// Whether `rank` leaves out `cmd` by `rule`. Attach operations and host commands are
/// never left out. `attached` is the state before the command.
fn left_out(
    scn: &Scenario,
    cmd: &Command,
    attached: &[Option<u32>],
    rank: u32,
    rule: LeaveOut,
) -> bool {
    let Location::Device(d) = cmd.at else {
        return false;
    };
    let at = scn.devices[d as usize];
    if cmd.attach || at.owner == rank {
        return false;
    }
    match rule {
        // The rule the runtime and the simulator use.
        LeaveOut::NoHostHop => mirrorcl_scheduler::left_out(
            Variant::Full,
            rank,
            scn.ranks,
            &Placement {
                device: at,
                at_host: false,
                fills_host: false,
            },
            (cmd.accesses.iter()).map(|(b, _, _)| attached[*b].map(|a| scn.devices[a as usize])),
        ),
        LeaveOut::AnyAttached => cmd
            .accesses
            .iter()
            .all(|(b, _, _)| attached[*b].is_some_and(|a| scn.devices[a as usize].owner != rank)),
    }
}

/// Per byte, its hops in order: (from, to, `Step::pass_through`).
type Hops = HashMap<(usize, u64), Vec<(Location, Location, bool)>>;

/// The per-byte hops of `steps`, in order; checks the ranges.
fn hops_of(scn: &Scenario, ci: usize, steps: &[Item]) -> Result<Hops, String> {
    let mut hops = Hops::new();
    for it in steps {
        let Kind::Step { step, buf, .. } = &it.kind else {
            unreachable!()
        };
        if step.range.is_empty() || step.range.end > scn.buffers[*buf].0 {
            return Err(format!("command {ci}: bad step range {step:?}"));
        }
        for off in step.range.clone() {
            hops.entry((*buf, off))
                .or_default()
                .push((step.from, step.to, step.pass_through));
        }
    }
    Ok(hops)
}

fn compare_hops(
    ci: usize,
    cmd: &Command,
    what: &str,
    mut actual: Hops,
    mut expected: Hops,
) -> Result<(), String> {
    expected.retain(|_, h| !h.is_empty());
    if actual == expected {
        return Ok(());
    }
    let mut keys: Vec<(usize, u64)> = actual.keys().chain(expected.keys()).copied().collect();
    keys.sort();
    for k in keys {
        let a = actual.remove(&k).unwrap_or_default();
        let e = expected.remove(&k).unwrap_or_default();
        if a != e {
            return Err(format!(
                "command {ci} {cmd:?}: {what}: buffer {} byte {}: hops {a:?}, expected {e:?}",
                k.0, k.1
            ));
        }
    }
    unreachable!()
}

/// Runs one scheduler over the scenario. `rotate` changes the order devices are
/// registered in, which must not matter; `feed` says which commands it is given. Checks
/// everything that can be checked at scheduling time: the source rule, no redundant or
/// undefined transfers, the fixed routes of attached buffers (from the device before a
/// read, back to it after a write), the valid sets after each command, dependencies
/// pointing backwards, the statistics.
fn plan(scn: &Scenario, rotate: usize, feed: Feed) -> Result<Planned, String> {
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
    let mut attached: Vec<Option<u32>> = vec![None; scn.buffers.len()];
    let all_streams: Vec<StreamId> = (0..n)
        .flat_map(|d| (0..scn.streams[d]).map(move |k| dev_stream(d as u32, k)))
        .collect();

    let mut items: Vec<Item> = Vec::new();
    let mut tokens = 1u64..;
    let mut next_fresh = FRESH_STREAMS;
    let mut rng = Rng(scn.seed ^ 0x5EED);
    let mut step_bytes = 0u64;
    let mut scheduled = 0u64;

    for (ci, cmd) in scn.commands.iter().enumerate() {
        if let Feed::Rank(rank, rule) = feed {
            if left_out(scn, cmd, &attached, rank, rule) {
                continue;
            }
        }
        scheduled += 1;
        let before: Vec<Vec<(Range<u64>, ValidSet)>> = ids
            .iter()
            .zip(&scn.buffers)
            .map(|(&id, &(size, _))| s.validity(id, 0..size))
            .collect();
        let accesses: Vec<Access> = (cmd.accesses.iter().enumerate())
            .map(|(i, (b, r, m))| Access {
                buffer: ids[*b],
                range: r.clone(),
                mode: *m,
                // A third of the accesses go through a sub-buffer (alike on every rank).
                aliased: (ci + b).is_multiple_of(3),
                pass_through: scn.pass_through(ci, i),
            })
            .collect();
        let token = tokens.next().expect("endless");
        let mut steps: Vec<Item> = Vec::new();
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
            steps.push(Item {
                token: t,
                stream,
                deps,
                kind: Kind::Step {
                    step: step.clone(),
                    buf: buf_index(step.buffer),
                    cmd: ci,
                },
            });
            (stream, t)
        });
        // Only valid until the next `schedule`.
        let elsewhere = s.read_elsewhere().to_vec();
        // The steps after the command (write-backs to attached devices) start with the
        // first one waiting for the command; they go after it in the plan.
        let split = steps
            .iter()
            .position(|it| it.deps.contains(&token))
            .unwrap_or(steps.len());
        let after = steps.split_off(split);
        let (hops_before, hops_after) = (hops_of(scn, ci, &steps)?, hops_of(scn, ci, &after)?);
        for it in steps.iter().chain(&after) {
            let Kind::Step { step, .. } = &it.kind else {
                unreachable!()
            };
            step_bytes += step.range.end - step.range.start;
        }
        items.extend(steps);
        items.push(Item {
            token,
            stream: cmd.stream,
            deps,
            kind: Kind::Cmd {
                ci,
                elsewhere: elsewhere.clone(),
            },
        });
        items.extend(after);

        // Before the command, access by access: every byte it reads of a buffer that is
        // not attached, that is defined and not valid at `at` (as the earlier accesses
        // left the valid sets) comes by the route the source rule names; every byte it
        // reads of an attached buffer comes from the device by the route for bytes valid
        // there alone, once per reading access, unless `at` is that device. A
        // pass-through read reads in place instead on a device alike to `at` (same
        // owner and group) holding every defined byte of its range, where there is one
        // (no hop; an attached buffer's device holds them all); else, when its whole range comes by one hop from another rank's
        // device, that hop is a pass-through step and leaves the valid sets alone, so a
        // later access brings those bytes again. After the command: every byte it writes
        // of an attached buffer goes back to the device the same way, once per writing
        // access. No other byte moves.
        let mut expected_before = Hops::new();
        let mut expected_after = Hops::new();
        let mut expected_elsewhere = Vec::new();
        // The valid sets the command's reads changed, per byte.
        let mut valid: HashMap<(usize, u64), ValidSet> = HashMap::new();
        for (i, (b, r, m)) in cmd.accesses.iter().enumerate() {
            let pass = scn.pass_through(ci, i) && *m == Mode::Read;
            match attached[*b] {
                None if reads(*m) && !r.is_empty() => {
                    let sets: Vec<(u64, ValidSet)> = (r.clone())
                        .map(|off| {
                            let set = valid.get(&(*b, off));
                            (off, set.unwrap_or_else(|| set_at(&before[*b], off)).clone())
                        })
                        .collect();
                    let missing: Vec<(u64, &ValidSet)> = (sets.iter())
                        .filter(|(_, set)| !set.is_empty() && !set.contains(cmd.at))
                        .map(|(off, set)| (*off, set))
                        .collect();
                    if missing.is_empty() {
                        continue;
                    }
                    if let Some(d) = in_place_source(scn, cmd.at, &sets).filter(|_| pass) {
                        expected_elsewhere.push((i, d));
                        continue;
                    }
                    let routes: Vec<_> = (missing.iter())
                        .map(|&(off, set)| (off, set, expected_route(scn, set, cmd.at)))
                        .collect();
                    let through = pass
                        && missing.len() == sets.len()
                        && routes.iter().all(|(_, _, route)| *route == routes[0].2)
                        && one_hop_across_ranks(scn, &routes[0].2);
                    for (off, set, route) in routes {
                        let hops = route.iter().map(|&(from, to)| (from, to, through));
                        expected_before.entry((*b, off)).or_default().extend(hops);
                        if !through {
                            let now = (set.locations().iter().copied())
                                .chain(route.iter().map(|&(_, to)| to))
                                .collect();
                            valid.insert((*b, off), now);
                        }
                    }
                }
                None => {}
                Some(a) if Location::Device(a) == cmd.at => {}
                Some(a) => {
                    let from = Location::Device(a);
                    let hops = |from, to, pass| {
                        let route = expected_route(scn, &ValidSet::only(from), to);
                        let through = pass && one_hop_across_ranks(scn, &route);
                        (route.into_iter())
                            .map(|(f, t)| (f, t, through))
                            .collect::<Vec<_>>()
                    };
                    let context = |d: u32| {
                        let desc = scn.devices[d as usize];
                        (desc.owner, desc.group)
                    };
                    let alike = matches!(cmd.at, Location::Device(t) if context(t) == context(a));
                    if pass && alike && !r.is_empty() {
                        // Its device holds the newest bytes: read in place there.
                        expected_elsewhere.push((i, a));
                    } else if reads(*m) {
                        let route = hops(from, cmd.at, pass);
                        for off in r.clone() {
                            expected_before.entry((*b, off)).or_default().extend(&route);
                        }
                    }
                    if writes(*m) {
                        let route = hops(cmd.at, from, false);
                        for off in r.clone() {
                            expected_after.entry((*b, off)).or_default().extend(&route);
                        }
                    }
                }
            }
        }
        compare_hops(ci, cmd, "before", hops_before, expected_before)?;
        compare_hops(ci, cmd, "after", hops_after, expected_after)?;
        if elsewhere != expected_elsewhere {
            return Err(format!(
                "command {ci} {cmd:?}: read elsewhere {elsewhere:?}, expected \
                 {expected_elsewhere:?}"
            ));
        }

        // Valid sets after the command, for buffers that are not attached (the valid sets
        // of attached buffers are not tracked): as its reads left them, `at` alone where it
        // wrote, the others as before; and empty exactly where no command wrote yet.
        for (b, r, m) in &cmd.accesses {
            if writes(*m) {
                for off in r.clone() {
                    defined[*b][off as usize] = true;
                    valid.insert((*b, off), ValidSet::only(cmd.at));
                }
            }
        }
        for (b, &(size, _)) in scn.buffers.iter().enumerate() {
            if attached[b].is_some() {
                continue;
            }
            let segs = s.validity(ids[b], 0..size);
            for off in 0..size {
                let got = set_at(&segs, off);
                let want = valid
                    .get(&(b, off))
                    .unwrap_or_else(|| set_at(&before[b], off));
                if got != want {
                    return Err(format!(
                        "command {ci} {cmd:?}: buffer {b} byte {off} valid at {got:?}, \
                         expected {want:?}"
                    ));
                }
                if got.is_empty() == defined[b][off as usize] {
                    return Err(format!(
                        "command {ci}: buffer {b} byte {off}: valid set {got:?} but defined={}",
                        defined[b][off as usize]
                    ));
                }
            }
        }

        if cmd.attach {
            let (b, _, _) = cmd.accesses[0];
            let Location::Device(d) = cmd.at else {
                unreachable!("attach operations run at a device")
            };
            s.attach(ids[b], d);
            attached[b] = Some(d);
        }
        for (b, &id) in ids.iter().enumerate() {
            if s.attached(id) != attached[b] {
                return Err(format!(
                    "after command {ci}: buffer {b} attached to {:?}, expected {:?}",
                    s.attached(id),
                    attached[b]
                ));
            }
        }
    }

    // Dependencies only name items earlier in the plan (so no cycle is possible).
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
        commands: scheduled,
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
        final_attached: attached,
    })
}

// ---------------------------------------------------------------------------------------
// One process holding every location
// ---------------------------------------------------------------------------------------

/// Runs the items in `order`; `hand_off`: see `Memory`.
fn run_single(
    scn: &Scenario,
    planned: &Planned,
    refr: &Reference,
    order: &[usize],
    hand_off: bool,
) -> Result<(), String> {
    let mut mem = Memory::new(scn, hand_off);
    let pass_through = common::pass_through_steps(&planned.items);
    for &i in order {
        let item = &planned.items[i];
        match &item.kind {
            Kind::Step { .. } => mem.copy(0, item),
            Kind::Cmd { ci, .. } => {
                let steps = pass_through.get(ci).map_or(&[][..], Vec::as_slice);
                mem.exec(0, item, steps, refr)?;
            }
        }
    }
    mem.check_final(
        &planned.final_validity,
        &planned.final_attached,
        refr,
        |_| vec![0],
    )
}

// ---------------------------------------------------------------------------------------
// The cluster: per-rank actions after Table IV.1 (`common`), tags per pair of ranks
// ---------------------------------------------------------------------------------------

/// What `rank` does for each item of its plan, tags taken per pair of ranks.
fn roles(scn: &Scenario, planned: &Planned, rank: u32) -> Vec<Option<Role>> {
    common::roles_per_pair(scn, &planned.items, rank)
}

/// `plans[rank]` with what `rank` does for each item.
fn rank_plans<'p>(scn: &Scenario, plans: &[&'p Planned]) -> Vec<RankPlan<'p>> {
    (plans.iter().enumerate())
        .map(|(rank, planned)| RankPlan {
            items: &planned.items,
            roles: roles(scn, planned, rank as u32),
        })
        .collect()
}

/// Every send meets exactly one receive (`common::check_matching`).
fn check_matching(scn: &Scenario, plans: &[&Planned]) -> Result<(), String> {
    common::check_matching(&rank_plans(scn, plans))
}

/// Every rank's actions run to completion in order (`common::check_progress`).
fn check_progress(scn: &Scenario, plans: &[&Planned], rendezvous: bool) -> Result<(), String> {
    common::check_progress(&rank_plans(scn, plans), rendezvous)
}

/// Every rank's actions, asynchronously on per-rank memories (`common::run_cluster`),
/// then the bytes left at every valid location. `hand_off`: see `Memory`.
fn run_cluster(
    scn: &Scenario,
    plans: &[&Planned],
    refr: &Reference,
    markers: bool,
    hand_off: bool,
    rng: &mut Rng,
) -> Result<(), String> {
    let mut mem = Memory::new(scn, hand_off);
    common::run_cluster(&rank_plans(scn, plans), &mut mem, refr, markers, rng)?;
    // Every rank's plan ends with the same valid sets and attachments (checked by
    // `check_left_out`), so rank 0's plan speaks for all.
    mem.check_final(
        &plans[0].final_validity,
        &plans[0].final_attached,
        refr,
        |loc| common::holders(scn, loc),
    )
}

// ---------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------

/// The plans of ranks that left out commands (`own[rank]`) against the plan of every
/// command (`all`): a command two ranks both scheduled gave both the same steps (the
/// same as with every command given); they end with the same valid sets and attachments;
/// and a command a rank left out gives it nothing to do (no execution, no step with an
/// end there, no broadcast it must receive).
fn check_left_out(scn: &Scenario, all: &Planned, own: &[Planned]) -> Result<(), String> {
    let by_all = all.steps_by_command();
    let by_own: Vec<_> = own.iter().map(Planned::steps_by_command).collect();
    for (a, by_a) in by_own.iter().enumerate() {
        for (b, by_b) in by_own.iter().enumerate().skip(a + 1) {
            for (ci, steps) in by_a {
                if let Some(other) = by_b.get(ci) {
                    if steps != other {
                        return Err(format!(
                            "command {ci} {:?}: rank {a} planned {steps:?}, rank {b} {other:?}",
                            scn.commands[*ci]
                        ));
                    }
                }
            }
        }
    }
    let elsewhere = all.elsewhere_by_command();
    for (rank, (planned, by)) in own.iter().zip(&by_own).enumerate() {
        let rank = rank as u32;
        for (ci, e) in planned.elsewhere_by_command() {
            if elsewhere.get(&ci) != Some(&e) {
                return Err(format!(
                    "command {ci}: rank {rank} read elsewhere {e:?}, with every command {:?}",
                    elsewhere.get(&ci)
                ));
            }
        }
        for (ci, steps) in by {
            if by_all.get(ci) != Some(steps) {
                return Err(format!(
                    "command {ci}: rank {rank} planned {steps:?}, with every command {:?}",
                    by_all.get(ci)
                ));
            }
        }
        if planned.final_validity != all.final_validity
            || planned.final_attached != all.final_attached
        {
            return Err(format!(
                "rank {rank} ends with other valid sets or attachments"
            ));
        }
        let everyone = roles(scn, all, rank);
        for (item, role) in all.items.iter().zip(everyone) {
            let ci = match &item.kind {
                Kind::Cmd { ci, .. } | Kind::Step { cmd: ci, .. } => *ci,
            };
            if role.is_some() && !by.contains_key(&ci) {
                return Err(format!(
                    "rank {rank} left out command {ci} {:?} but has {role:?} for {:?}",
                    scn.commands[ci], item.kind
                ));
            }
        }
    }
    Ok(())
}

/// The checks of a cluster whose rank `r` scheduled `plans[r]`.
fn check_cluster(
    scn: &Scenario,
    plans: &[&Planned],
    refr: &Reference,
    rng: &mut Rng,
) -> Result<(), String> {
    check_matching(scn, plans)?;
    check_progress(scn, plans, false)?;
    check_progress(scn, plans, true)?;
    for (markers, runs) in [(true, 2), (false, 4)] {
        for run in 0..runs {
            let hand_off = run % 2 == 1;
            run_cluster(scn, plans, refr, markers, hand_off, rng)
                .map_err(|e| format!("cluster (markers={markers}, hand_off={hand_off}): {e}"))?;
        }
    }
    Ok(())
}

/// Every rank's plan with the queueing optimisation by `rule` (devices registered in
/// another order on every rank).
fn own_plans(scn: &Scenario, rule: LeaveOut) -> Result<Vec<Planned>, String> {
    (0..scn.ranks)
        .map(|rank| plan(scn, rank as usize, Feed::Rank(rank, rule)))
        .collect()
}

fn check_scenario(scn: &Scenario) -> Result<(), String> {
    let planned = plan(scn, 0, Feed::All)?;
    // Every rank runs its own scheduler on the same stream (and may register devices in
    // another order): the plans must be identical, dependencies included.
    for rank in 1..scn.ranks as usize {
        let other = plan(scn, rank, Feed::All)?;
        if other != planned {
            return Err(format!("rank {rank} planned differently"));
        }
    }
    // With the queueing optimisation, each rank leaves out the commands it need not see.
    let own = own_plans(scn, LeaveOut::NoHostHop).map_err(|e| format!("leaving out: {e}"))?;
    check_left_out(scn, &planned, &own)?;

    let refr = reference(scn);
    let mut rng = Rng(scn.seed);

    let in_order: Vec<usize> = (0..planned.items.len()).collect();
    let preds = planned.preds();
    for hand_off in [false, true] {
        run_single(scn, &planned, &refr, &in_order, hand_off)
            .map_err(|e| format!("in order (hand_off={hand_off}): {e}"))?;
        for _ in 0..2 {
            let order = random_topological_order(&preds, &mut rng);
            run_single(scn, &planned, &refr, &order, hand_off)
                .map_err(|e| format!("async (hand_off={hand_off}): {e}"))?;
        }
    }

    let everywhere: Vec<&Planned> = vec![&planned; scn.ranks as usize];
    check_cluster(scn, &everywhere, &refr, &mut rng)
        .map_err(|e| format!("every command everywhere: {e}"))?;
    let own: Vec<&Planned> = own.iter().collect();
    check_cluster(scn, &own, &refr, &mut rng).map_err(|e| format!("leaving out: {e}"))?;
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
        s.add_device(
            i as u32,
            DeviceDesc {
                owner,
                group,
                ranges_apart: false,
            },
        );
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
        aliased: false,
        pass_through: false,
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
    // The command waits for both steps, each named once; the second step waits for the
    // first (on a device that does not keep disjoint bytes apart, an instance conflicts
    // whole: vendor sub-buffers and their buffer may not be used concurrently).
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
    // bytes at its destination (the host hop also for the step it stages).
    assert!(steps[1].1.contains(&1));
    assert!(steps[2].1.contains(&steps_token(3, 1)));
    // The step from D2 also waits for the earlier steps into D1 (an instance conflicts
    // whole on a device that does not keep disjoint bytes apart).
    assert_eq!(steps[3].1, vec![2, steps_token(3, 0), steps_token(3, 2)]);
    // The command waits for each step into D1.
    let into_d1 = [0, 2, 3, 4].map(|n| steps_token(3, n));
    assert_eq!(deps, into_d1);
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
        devices: vec![common::device(0, 0), common::device(1, 0)],
        streams: vec![1, 1],
        buffers: vec![(8, true)],
        commands: vec![
            Command {
                at: D0,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..8, Mode::ReadWrite)],
                attach: false,
            },
            Command {
                at: D1,
                stream: dev_stream(1, 0),
                accesses: vec![(0, 0..8, Mode::ReadWrite)],
                attach: false,
            },
            Command {
                at: H,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..8, Mode::Read)],
                attach: false,
            },
        ],
        policy: StepStreams::Destination,
        pass_through_every: 0,
        seed: 3,
    };
    let planned = plan(&scn, 0, Feed::All).unwrap();
    assert_eq!(planned, plan(&scn, 1, Feed::All).unwrap());
    let steps: Vec<(Location, Location)> = planned
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            Kind::Step { step, .. } => Some((step.from, step.to)),
            Kind::Cmd { .. } => None,
        })
        .collect();
    assert_eq!(steps, vec![(H, D0), (D0, D1), (D1, H)]);
    check_matching(&scn, &[&planned, &planned]).unwrap();
    check_progress(&scn, &[&planned, &planned], true).unwrap();
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
        attach: false,
    };
    let scn = Scenario {
        ranks: 2,
        devices: vec![common::device(0, 0), common::device(1, 0)],
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
        pass_through_every: 0,
        seed: 1,
    };
    let planned = plan(&scn, 0, Feed::All).unwrap();
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
    for i in 0..200 {
        run_cluster(
            &scn,
            &[&planned, &planned],
            &refr,
            false,
            i % 2 == 1,
            &mut rng,
        )
        .unwrap();
    }
}

/// A buffer attached to rank 1's device and used on rank 0's: every read there brings the
/// bytes from the attached device (every time, the valid set is not consulted), every
/// write sends the written bytes back right after the command, and the valid set stays as
/// it was.
#[test]
fn a_buffer_attached_to_another_ranks_device_moves_from_and_back_to_it() {
    // D0 on rank 0, D1 on rank 1.
    let mut s = sched(&[(0, 0), (1, 0)]);
    let b = s.create_buffer(16, Some(H));
    let step = |range: Range<u64>, from, to| Step {
        buffer: b,
        range,
        from,
        to,
        pass_through: false,
        source_deps: 0,
    };
    let st = steps_token;
    let whole = |mode| [acc(b, 0..16, mode)];
    // Attach: a command at D1 reading the whole buffer, on a fresh stream, then `attach`.
    let (steps, deps) = run(&mut s, D1, 77, &whole(Mode::Read), 1);
    assert_eq!(steps, vec![(step(0..16, H, D1), vec![])]);
    assert_eq!(deps, vec![st(1, 0)]);
    s.attach(b, 1);
    assert_eq!(s.attached(b), Some(1));
    let validity = s.validity(b, 0..16);
    assert_eq!(validity, vec![(0..16, set(&[H, D1]))]);

    // D0 reads: from D1 (not from the valid host copy), after the step that wrote D1.
    let (steps, deps) = run(&mut s, D0, 1, &whole(Mode::Read), 2);
    assert_eq!(steps, vec![(step(0..16, D1, D0), vec![st(1, 0)])]);
    assert_eq!(deps, vec![st(2, 0)]);
    // D0 reads again: again from D1; the step also waits for the earlier accesses to D0.
    let (steps, deps) = run(&mut s, D0, 1, &whole(Mode::Read), 3);
    assert_eq!(
        steps,
        vec![(step(0..16, D1, D0), vec![st(1, 0), st(2, 0), 2])]
    );
    assert_eq!(deps, vec![st(3, 0)]);
    // D0 overwrites 4..8: nothing comes, the written bytes go back to D1 after the command
    // (the step waits for it), and after every earlier access to D1.
    let (steps, deps) = run(&mut s, D0, 1, &[acc(b, 4..8, Mode::Write)], 4);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].0, step(4..8, D0, D1));
    let mut waits = steps[0].1.clone();
    waits.sort();
    assert_eq!(waits, vec![1, 4, st(1, 0), st(2, 0), st(3, 0)]);
    assert_eq!(deps, vec![st(3, 0)]);
    // D0 reads and writes the whole buffer: from D1 first (after the write-back, and
    // after what D1's other bytes and D0's await per range), back to D1 afterwards
    // (after every reader of each of D1's ranges).
    let (steps, deps) = run(&mut s, D0, 1, &whole(Mode::ReadWrite), 5);
    assert_eq!(
        steps,
        vec![
            (
                step(0..16, D1, D0),
                vec![st(1, 0), st(4, 0), st(3, 0), 3, 4]
            ),
            (
                step(0..16, D0, D1),
                vec![5, st(1, 0), 1, st(2, 0), st(3, 0), st(5, 0), st(4, 0)]
            ),
        ]
    );
    assert_eq!(deps, vec![st(5, 0)]);
    // On D1 itself nothing moves; the command waits for the last write-back (which
    // waited for the step reading D1 before it).
    let (steps, deps) = run(&mut s, D1, 2, &whole(Mode::ReadWrite), 6);
    assert!(steps.is_empty());
    assert_eq!(deps, vec![st(5, 1)]);
    assert_eq!(s.validity(b, 0..16), validity);

    // The same as a cluster scenario, with a second buffer attached to D0: rank 0 leaves
    // out the command at D1 that touches only the buffer attached to D1, rank 1 the one
    // at D0 that touches only the buffer attached to D0.
    let s0 = dev_stream(0, 0);
    let cmd = |at, stream, accesses: Vec<(usize, Range<u64>, Mode)>| Command {
        at,
        stream,
        accesses,
        attach: false,
    };
    let scn = Scenario {
        ranks: 2,
        devices: vec![common::device(0, 0), common::device(1, 0)],
        streams: vec![1, 1],
        buffers: vec![(16, true), (8, false)],
        commands: vec![
            Command::attach(0, 0, 16, 1),
            cmd(D0, s0, vec![(0, 0..16, Mode::Read)]),
            cmd(D0, s0, vec![(0, 4..8, Mode::Write)]),
            cmd(D0, s0, vec![(0, 0..16, Mode::ReadWrite)]),
            cmd(D1, dev_stream(1, 0), vec![(0, 0..16, Mode::ReadWrite)]),
            cmd(D0, s0, vec![(1, 0..8, Mode::Write)]),
            Command::attach(6, 1, 8, 0),
            cmd(D0, s0, vec![(1, 2..6, Mode::ReadWrite)]),
            cmd(H, s0, vec![(0, 0..16, Mode::Read), (1, 0..8, Mode::Read)]),
        ],
        policy: StepStreams::Fresh,
        pass_through_every: 0,
        seed: 5,
    };
    let all = plan(&scn, 0, Feed::All).unwrap();
    let hops_of_cmd =
        |planned: &Planned| -> BTreeMap<usize, Vec<(Location, Location, Range<u64>)>> {
            planned
                .steps_by_command()
                .into_iter()
                .map(|(ci, steps)| {
                    let hops = steps
                        .into_iter()
                        .map(|s| (s.from, s.to, s.range.clone()))
                        .collect();
                    (ci, hops)
                })
                .collect()
        };
    let expected: BTreeMap<usize, Vec<(Location, Location, Range<u64>)>> = [
        (0, vec![(H, D1, 0..16)]),
        (1, vec![(D1, D0, 0..16)]),
        (2, vec![(D0, D1, 4..8)]),
        (3, vec![(D1, D0, 0..16), (D0, D1, 0..16)]),
        (4, vec![]),
        (5, vec![]),
        (6, vec![]),
        (7, vec![]),
        (8, vec![(D1, H, 0..16), (D0, H, 0..8)]),
    ]
    .into_iter()
    .collect();
    assert_eq!(hops_of_cmd(&all), expected);
    let own = own_plans(&scn, LeaveOut::NoHostHop).unwrap();
    let kept = |p: &Planned| p.steps_by_command().into_keys().collect::<Vec<_>>();
    assert_eq!(kept(&own[0]), vec![0, 1, 2, 3, 5, 6, 7, 8]);
    assert_eq!(kept(&own[1]), vec![0, 1, 2, 3, 4, 5, 6, 8]);
    // The messages between the two ranks, with their tags, as each rank sees them.
    let messages = |rank: u32| -> Vec<Role> {
        roles(&scn, &own[rank as usize], rank)
            .into_iter()
            .flatten()
            .filter(|r| !matches!(r, Role::Exec(_) | Role::Copy))
            .collect()
    };
    let send = |tag| Role::Send {
        peers: vec![(1, tag)],
        to_host: false,
    };
    assert_eq!(
        messages(0),
        vec![
            Role::Recv { peer: 1, tag: 0 },
            send(1),
            Role::Recv { peer: 1, tag: 2 },
            send(3),
            Role::Recv { peer: 1, tag: 4 },
            Role::Send {
                peers: vec![(1, 5)],
                to_host: true
            },
        ]
    );
    assert_eq!(
        messages(1),
        vec![
            Role::Send {
                peers: vec![(0, 0)],
                to_host: false
            },
            Role::Recv { peer: 0, tag: 1 },
            Role::Send {
                peers: vec![(0, 2)],
                to_host: false
            },
            Role::Recv { peer: 0, tag: 3 },
            Role::Send {
                peers: vec![(0, 4)],
                to_host: true
            },
            Role::Recv { peer: 0, tag: 5 },
        ]
    );
    check_scenario(&scn).unwrap();
}

/// Why the queueing optimisation must keep commands whose bytes go through the host copy:
/// rank 0 owns D0 (group 0) and D1 (group 1), rank 1 owns D2. A buffer attached to D0 and
/// read on D1 moves D0 → Host → D1, and the first hop is a broadcast to every rank. Rank
/// 1, leaving the command out because it runs on rank 0's device and its buffer is
/// attached to rank 0's device, would never receive it (and its tags with rank 0 would
/// be off by one from then on).
#[test]
fn leaving_out_a_command_that_stages_through_the_host_copy_loses_a_broadcast() {
    let scn = Scenario {
        ranks: 2,
        devices: vec![
            common::device(0, 0),
            common::device(0, 1),
            common::device(1, 0),
        ],
        streams: vec![1, 1, 1],
        buffers: vec![(4, true)],
        commands: vec![
            Command::attach(0, 0, 4, 0),
            Command {
                at: D1,
                stream: dev_stream(1, 0),
                accesses: vec![(0, 0..4, Mode::Read)],
                attach: false,
            },
        ],
        policy: StepStreams::Destination,
        pass_through_every: 0,
        seed: 9,
    };
    let all = plan(&scn, 0, Feed::All).unwrap();
    assert_eq!(
        all.steps_by_command()[&1]
            .iter()
            .map(|s| (s.from, s.to))
            .collect::<Vec<_>>(),
        vec![(D0, H), (H, D1)]
    );
    let naive = own_plans(&scn, LeaveOut::AnyAttached).unwrap();
    assert!(!naive[1].steps_by_command().contains_key(&1));
    let err = check_left_out(&scn, &all, &naive).unwrap_err();
    assert!(err.contains("rank 1 left out command 1"), "{err}");
    let naive: Vec<&Planned> = naive.iter().collect();
    let err = check_matching(&scn, &naive).unwrap_err();
    assert!(err.contains("(0, 1, 0)"), "{err}");
    // Keeping it, every check passes.
    let own = own_plans(&scn, LeaveOut::NoHostHop).unwrap();
    assert!(own[1].steps_by_command().contains_key(&1));
    check_scenario(&scn).unwrap();
}

/// A pass-through read (`Access::pass_through`) of the buffer range `range` of `buffer`.
fn pass_read(buffer: BufferId, range: Range<u64>) -> Access {
    Access {
        pass_through: true,
        ..acc(buffer, range, Mode::Read)
    }
}

/// D0 and D1 share a vendor context, so a copy at D1 reads its source on D0 where it
/// lies, rather than through a replica at D1: no step, D1 stays invalid, and the hazards
/// are D0's, so a later writer at D0 waits for the copy and one at D1 does not.
#[test]
fn a_pass_through_read_reads_in_place_on_a_device_of_the_same_context() {
    let mut s = sched(&[(0, 0), (0, 0), (0, 1)]);
    let b = s.create_buffer(16, None);
    run(&mut s, D0, 1, &[acc(b, 0..16, Mode::Write)], 1);
    let (steps, deps) = run(&mut s, D1, 2, &[pass_read(b, 0..16)], 2);
    assert!(steps.is_empty());
    assert_eq!(s.read_elsewhere(), &[(0, 0)]);
    // After D0's writer, on another stream.
    assert_eq!(deps, vec![1]);
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::only(D0))]);
    // A writer at D0 waits for the copy (and the writer before it); one at D1 does not.
    let (steps, deps) = run(&mut s, D0, 3, &[acc(b, 0..8, Mode::Write)], 3);
    assert!(steps.is_empty() && s.read_elsewhere().is_empty());
    assert_eq!(deps, vec![1, 2]);
    let (steps, deps) = run(&mut s, D1, 4, &[acc(b, 8..16, Mode::Write)], 4);
    assert!(steps.is_empty() && deps.is_empty());
    // Bytes valid at D1 in part, and all on D0: in place again. Another vendor context
    // (D2) is never read in place: its bytes come through the host copy.
    run(&mut s, D0, 3, &[acc(b, 8..16, Mode::Write)], 5);
    run(&mut s, D1, 4, &[acc(b, 0..4, Mode::Read)], 6);
    let (steps, _) = run(&mut s, D1, 4, &[pass_read(b, 0..16)], 7);
    assert!(steps.is_empty());
    assert_eq!(s.read_elsewhere(), &[(0, 0)]);
    let (steps, _) = run(&mut s, D2, 5, &[pass_read(b, 0..16)], 8);
    assert!(s.read_elsewhere().is_empty());
    let staged = [(D0, H, 0..4), (H, D2, 0..4), (D0, H, 4..16), (H, D2, 4..16)];
    assert_eq!(hops(&steps), staged);

    // As a cluster with every read pass-through, rank 1 holding D2.
    let scn = Scenario {
        ranks: 2,
        devices: vec![
            common::device(0, 0),
            common::device(0, 0),
            common::device(1, 0),
        ],
        streams: vec![1, 1, 1],
        buffers: vec![(16, false)],
        commands: vec![
            Command {
                at: D0,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..16, Mode::Write)],
                attach: false,
            },
            Command {
                at: D1,
                stream: dev_stream(1, 0),
                accesses: vec![(0, 4..12, Mode::Read)],
                attach: false,
            },
            Command {
                at: D0,
                stream: dev_stream(0, 0),
                accesses: vec![(0, 0..16, Mode::Write)],
                attach: false,
            },
            Command {
                at: D2,
                stream: dev_stream(2, 0),
                accesses: vec![(0, 0..16, Mode::Read)],
                attach: false,
            },
        ],
        policy: StepStreams::Fresh,
        pass_through_every: 1,
        seed: 11,
    };
    let planned = plan(&scn, 0, Feed::All).unwrap();
    assert_eq!(planned.elsewhere_by_command()[&1], &[(0, 0)]);
    assert!(planned.steps_by_command()[&1].is_empty());
    let into_d2 = &planned.steps_by_command()[&3];
    assert!(into_d2.len() == 1 && into_d2[0].pass_through);
    check_scenario(&scn).unwrap();
}

/// A copy at D1 (rank 1) of bytes valid on D0 (rank 0) alone: they come whole by one
/// step, a pass-through step, and D1 does not become valid, so the next copy brings them
/// again, after the first step (a writer of D1) and the first copy (a reader there). A
/// read that is not pass-through makes D1 valid as ever.
#[test]
fn a_pass_through_read_from_another_rank_leaves_its_destination_invalid() {
    let mut s = sched(&[(0, 0), (1, 0)]);
    let b = s.create_buffer(16, None);
    run(&mut s, D0, 1, &[acc(b, 0..16, Mode::Write)], 1);
    let through = Step {
        buffer: b,
        range: 0..16,
        from: D0,
        to: D1,
        pass_through: true,
        source_deps: 1,
    };
    let (steps, deps) = run(&mut s, D1, 2, &[pass_read(b, 0..16)], 2);
    assert_eq!(steps, vec![(through.clone(), vec![1])]);
    assert_eq!(deps, vec![steps_token(2, 0)]);
    assert!(s.read_elsewhere().is_empty());
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::only(D0))]);
    let (steps, deps) = run(&mut s, D1, 2, &[pass_read(b, 0..16)], 3);
    assert_eq!(steps, vec![(through, vec![1, steps_token(2, 0), 2])]);
    // Only the first comes from the source: the rank that sends the bytes waits for it
    // alone (the other two are accesses of the destination's instance).
    assert_eq!(steps[0].0.source_deps, 1);
    assert_eq!(deps, vec![steps_token(3, 0)]);
    assert_eq!(s.validity(b, 0..16), vec![(0..16, ValidSet::only(D0))]);
    let (steps, _) = run(&mut s, D1, 2, &[acc(b, 0..16, Mode::Read)], 4);
    assert_eq!(steps.len(), 1);
    assert!(!steps[0].0.pass_through);
    assert_eq!(s.validity(b, 0..16), vec![(0..16, set(&[D0, D1]))]);
    // A write marked pass-through is an ordinary write.
    let (steps, _) = run(
        &mut s,
        D1,
        2,
        &[Access {
            mode: Mode::Write,
            ..pass_read(b, 0..8)
        }],
        5,
    );
    assert!(steps.is_empty() && s.read_elsewhere().is_empty());
    assert_eq!(s.validity(b, 0..8), vec![(0..8, ValidSet::only(D1))]);
}

/// A pass-through read whose bytes lie in two places moves as any read: no device holds
/// them all to read in place, and no one step brings them whole.
#[test]
fn a_pass_through_read_of_bytes_in_two_places_moves_as_any_read() {
    // D0, D1 and D2 share a vendor context on rank 0; D3 is rank 1's.
    let mut s = sched(&[(0, 0), (0, 0), (0, 0), (1, 0)]);
    let b = s.create_buffer(16, None);
    run(&mut s, D0, 1, &[acc(b, 0..8, Mode::Write)], 1);
    run(&mut s, D1, 2, &[acc(b, 8..16, Mode::Write)], 2);
    let d3 = Location::Device(3);
    for (at, token) in [(D2, 3), (d3, 4)] {
        let (steps, _) = run(&mut s, at, 3, &[pass_read(b, 0..16)], token);
        assert!(s.read_elsewhere().is_empty());
        assert_eq!(hops(&steps), vec![(D0, at, 0..8), (D1, at, 8..16)]);
        assert!(steps.iter().all(|(step, _)| !step.pass_through));
    }
    assert_eq!(
        s.validity(b, 0..16),
        vec![(0..8, set(&[D0, D2, d3])), (8..16, set(&[D1, D2, d3]))]
    );
}
