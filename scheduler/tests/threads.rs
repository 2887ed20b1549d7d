//! Host programs with several threads on N ranks: every rank runs the whole host
//! program, but its threads interleave their calls differently on each rank.
//!
//! Random scenarios: N ranks owning the devices, T host threads, each with its own
//! command stream over its own buffers and over its own slice of one shared buffer (as
//! sub-buffers are: a window on the parent's bytes, scheduled as a range of the parent),
//! on devices of any rank and on the host copy (maps, reads), each thread on its own
//! queues; then the main thread, after joining them, on any byte of any buffer. Each
//! rank feeds the streams to one `Scheduler` in a random interleaving of its own
//! (program order kept within a thread), names buffers and tokens per thread (as the
//! runtime does, by slot), and takes the tag of every message from [`Tags`] with the
//! thread's slot, at both ends. Checked:
//! - each thread's plan (its items in order: steps, streams, dependencies) is the same
//!   on every rank, a thread's items wait only for its own, the steps per buffer and
//!   thread are the same, and so are every buffer's final valid sets;
//! - every send meets exactly one receive with the same (sender, receiver, tag), for the
//!   same step (buffer and range);
//! - each thread's actions on each rank run to completion in order, with buffered and
//!   with rendezvous sends;
//! - executed asynchronously on per-rank byte-level memories (`common::run_cluster`:
//!   dependencies and stream order only), every command reads, and every valid location
//!   ends with, the bytes of one device running the threads' streams one after another.
//!
//! And that this can fail: tags from one counter per pair of ranks, whatever the slot
//! (`one_counter_per_pair_is_caught`); steps of several threads on one stream
//! (`a_step_stream_shared_by_threads_deadlocks`); and hazards kept per buffer instance
//! rather than per byte range, as the scheduler once did
//! (`sub_buffers_of_two_threads_do_not_wait_for_each_other`).

mod common;

use common::{
    check_matching, check_progress_of, reference, Item, Kind, Memory, RankPlan, Rng, World,
};
use mirrorcl_scheduler::tags::{Tags, SLOT_SHIFT};
use mirrorcl_scheduler::{
    Access, BufferId, DeviceDesc, Location, Mode, Scheduler, Step, StreamId, ValidSet,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Range;

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

/// Where the runtime runs a transfer step. Always on a stream of the thread that needed
/// it: a stream two threads share would be ordered differently on each rank.
#[derive(Clone, Copy, Debug)]
enum StepStreams {
    /// A new stream per step.
    Fresh,
    /// The thread's first queue on the destination device (the source device for a
    /// step to the host).
    ThreadDevice,
    /// The stream of the command that needed the step.
    Command,
    /// One stream for every step, whichever thread needed it. Wrong, never generated:
    /// see `a_step_stream_shared_by_threads_deadlocks`.
    Shared,
}

#[derive(Clone, Debug)]
struct Command {
    at: Location,
    stream: StreamId,
    /// (buffer index, range, mode)
    accesses: Vec<(usize, Range<u64>, Mode)>,
}

#[derive(Clone, Debug)]
struct Thread {
    /// Its slot: 1 + its creation order (slot 0 is the main thread's).
    slot: usize,
    /// Its own buffers (indices into the scenario's buffers).
    buffers: Vec<usize>,
    /// Its range of the shared buffer.
    slice: Range<u64>,
    /// Its commands, in program order (indices into the scenario's commands).
    commands: Vec<usize>,
}

/// The shared buffer, created by the main thread before the others start.
const SHARED: usize = 0;

#[derive(Clone, Debug)]
struct Scenario {
    ranks: u32,
    devices: Vec<DeviceDesc>,
    /// (size, initially valid at the host; else undefined); `SHARED` first.
    buffers: Vec<(u64, bool)>,
    threads: Vec<Thread>,
    /// The main thread (slot 0), once it has joined the others: it creates the shared
    /// buffer before they start, and runs these commands after they all ended.
    main: Thread,
    /// Thread by thread, each in program order, the main thread's last: the reference
    /// runs them so.
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
        let b = self.commands[ci].accesses[i].0;
        // Chosen by command and buffer, alike on every rank, writes too (which must ignore
        // it).
        let every = self.pass_through_every;
        every != 0 && (ci + 2 * b) % every == every / 2
    }
}

/// A buffer's id, as the runtime names buffers: the creating thread's slot in the top
/// bits, then its own count (`host_threads::next_id`).
fn buffer_id(scn: &Scenario, b: usize) -> BufferId {
    if b == SHARED {
        return 1;
    }
    let t = scn.threads.iter().find(|t| t.buffers.contains(&b)).unwrap();
    let n = t.buffers.iter().position(|&x| x == b).unwrap() as u64 + 1;
    (t.slot as u64) << SLOT_SHIFT | n
}

/// Queue `k` of thread `slot` on device `d`.
fn queue(slot: usize, d: u32, k: u8) -> StreamId {
    (slot as u64) << 20 | u64::from(d) << 4 | u64::from(k)
}

/// The fresh stream of a host command (the runtime gives each its own).
fn host_stream(ci: usize) -> StreamId {
    1 << 48 | ci as u64
}

/// The fresh stream of the step with `token`.
fn step_stream(token: u64) -> StreamId {
    2 << 48 | token
}

/// (location, queue, accesses: (window, start, length, mode))
type RawCommand = (u8, u8, Vec<(u8, u8, u8, u8)>);
/// (own buffers, slice length, commands)
type RawThread = (Vec<(u64, bool)>, u64, Vec<RawCommand>);

fn raw_commands(max: usize) -> impl Strategy<Value = Vec<RawCommand>> {
    let command = (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), 0u8..3), 0..=3),
    );
    prop::collection::vec(command, 0..=max)
}

fn raw_thread() -> impl Strategy<Value = RawThread> {
    (
        prop::collection::vec((1u64..=24, any::<bool>()), 0..=2),
        1u64..=12,
        raw_commands(16),
    )
}

/// Command `ci` of the thread in `slot`, from `raw`; its accesses fall in `windows`
/// (buffer, the bytes of it the thread may touch).
fn command(
    ci: usize,
    slot: usize,
    (loc, k, accs): RawCommand,
    windows: &[(usize, Range<u64>)],
    ndev: usize,
) -> Command {
    // A quarter of the commands run on the host copy.
    let (at, stream) = if loc % 4 == 0 {
        (Location::Host, host_stream(ci))
    } else {
        let d = (usize::from(loc >> 2) % ndev) as u32;
        (Location::Device(d), queue(slot, d, k % 2))
    };
    let accesses = (accs.into_iter())
        .map(|(w, a, l, m)| {
            let (buf, window) = windows[usize::from(w) % windows.len()].clone();
            let size = window.end - window.start;
            let range = if l >= 192 {
                window
            } else {
                let start = u64::from(a) % size;
                let len = u64::from(l) % (size - start + 1);
                window.start + start..window.start + start + len
            };
            let mode = [Mode::Read, Mode::Write, Mode::ReadWrite][usize::from(m)];
            (buf, range, mode)
        })
        .collect();
    Command {
        at,
        stream,
        accesses,
    }
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        // Per rank: the number of groups, then per device its raw group.
        prop::collection::vec(
            (1u32..=2, prop::collection::vec(any::<u32>(), 1..=2)),
            1..=4,
        ),
        prop::collection::vec(raw_thread(), 1..=4),
        raw_commands(4),
        any::<bool>(),
        0u8..3,
        any::<u64>(),
        // How many accesses are marked pass-through: none, a quarter, all.
        prop_oneof![Just(0usize), Just(4), Just(1)],
    )
        .prop_map(
            |(ranks, raw_threads, raw_main, shared_host, policy, seed, every)| {
                let mut devices = Vec::new();
                for (owner, (groups, devs)) in ranks.iter().enumerate() {
                    for g in devs {
                        devices.push(DeviceDesc {
                            owner: owner as u32,
                            group: g % groups,
                            // Some vendor contexts keep disjoint bytes apart (NVIDIA).
                            ranges_apart: (g % groups).is_multiple_of(2),
                        });
                    }
                }
                let ndev = devices.len();
                let shared_size: u64 = raw_threads.iter().map(|(_, len, _)| len).sum();
                let mut buffers = vec![(shared_size, shared_host)];
                let mut threads = Vec::new();
                let mut commands = Vec::new();
                let mut slice_start = 0;
                for (t, (own, len, raw)) in raw_threads.into_iter().enumerate() {
                    let slot = t + 1;
                    let own: Vec<usize> = (own.into_iter())
                        .map(|b| {
                            buffers.push(b);
                            buffers.len() - 1
                        })
                        .collect();
                    let slice = slice_start..slice_start + len;
                    slice_start += len;
                    // Its slice of the shared buffer (as a sub-buffer), and its own buffers.
                    let windows: Vec<(usize, Range<u64>)> =
                        std::iter::once((SHARED, slice.clone()))
                            .chain(own.iter().map(|&b| (b, 0..buffers[b].0)))
                            .collect();
                    let mut mine = Vec::new();
                    for raw in raw {
                        mine.push(commands.len());
                        commands.push(command(commands.len(), slot, raw, &windows, ndev));
                    }
                    threads.push(Thread {
                        slot,
                        buffers: own,
                        slice,
                        commands: mine,
                    });
                }
                // After joining the threads, the main thread may touch any byte of any buffer.
                let windows: Vec<(usize, Range<u64>)> = (buffers.iter().enumerate())
                    .map(|(b, &(size, _))| (b, 0..size))
                    .collect();
                let mut mine = Vec::new();
                for raw in raw_main {
                    mine.push(commands.len());
                    commands.push(command(commands.len(), 0, raw, &windows, ndev));
                }
                let main = Thread {
                    slot: 0,
                    buffers: Vec::new(),
                    slice: 0..shared_size,
                    commands: mine,
                };
                let policy = [
                    StepStreams::Fresh,
                    StepStreams::ThreadDevice,
                    StepStreams::Command,
                ][usize::from(policy)];
                Scenario {
                    ranks: ranks.len() as u32,
                    devices,
                    buffers,
                    threads,
                    main,
                    commands,
                    policy,
                    pass_through_every: every,
                    seed,
                }
            },
        )
}

/// A random interleaving of the threads: per event, whose it is. A thread's events are
/// its start (creating its buffers), then its commands.
fn interleaving(scn: &Scenario, rng: &mut Rng) -> Vec<usize> {
    let mut left: Vec<usize> = scn.threads.iter().map(|t| 1 + t.commands.len()).collect();
    let mut order = Vec::new();
    loop {
        let live: Vec<usize> = (0..left.len()).filter(|&t| left[t] > 0).collect();
        if live.is_empty() {
            return order;
        }
        let t = live[rng.below(live.len())];
        left[t] -= 1;
        order.push(t);
    }
}

// ---------------------------------------------------------------------------------------
// Planning on one rank
// ---------------------------------------------------------------------------------------

struct Planned {
    /// In this rank's order.
    items: Vec<Item>,
    final_validity: Vec<Vec<(Range<u64>, ValidSet)>>,
}

/// The thread whose item carries `token` (tokens are named per thread, by slot).
fn slot_of(token: u64) -> usize {
    (token >> 32) as usize
}

/// One rank's scheduler, and what it planned so far.
struct Planner<'s> {
    scn: &'s Scenario,
    s: Scheduler<u64>,
    ids: Vec<BufferId>,
    items: Vec<Item>,
}

impl Planner<'_> {
    /// Schedules command `ci` of `thread`, whose items so far number `count`.
    fn command(&mut self, thread: &Thread, count: &mut u64, ci: usize) -> Result<(), String> {
        let (scn, ids) = (self.scn, &self.ids);
        let cmd = &scn.commands[ci];
        let mut token = || {
            *count += 1;
            (thread.slot as u64) << 32 | *count
        };
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
        let own = token();
        let mut steps: Vec<Item> = Vec::new();
        self.s.set_thread(thread.slot as u32);
        let deps = self
            .s
            .schedule(cmd.at, cmd.stream, &accesses, &own, |step, deps| {
                let t = token();
                let stream = match scn.policy {
                    StepStreams::Fresh => step_stream(t),
                    StepStreams::ThreadDevice => match (step.from, step.to) {
                        (_, Location::Device(d)) | (Location::Device(d), Location::Host) => {
                            queue(thread.slot, d, 0)
                        }
                        (Location::Host, Location::Host) => unreachable!("host to host step"),
                    },
                    StepStreams::Command => cmd.stream,
                    StepStreams::Shared => step_stream(0),
                };
                let buf = ids.iter().position(|&x| x == step.buffer);
                steps.push(Item {
                    token: t,
                    stream,
                    deps,
                    kind: Kind::Step {
                        step: step.clone(),
                        buf: buf.expect("a known buffer"),
                        cmd: ci,
                    },
                });
                (stream, t)
            });
        // Only valid until the next `schedule`.
        let elsewhere = self.s.read_elsewhere().to_vec();
        for it in &steps {
            let (step, buf) = common::step_of(it);
            let bytes = match buf {
                SHARED => &thread.slice,
                _ => &(0..scn.buffers[buf].0),
            };
            if step.range.is_empty() || step.range.start < bytes.start || step.range.end > bytes.end
            {
                return Err(format!(
                    "command {ci}: step {step:?} outside its thread's bytes"
                ));
            }
        }
        self.items.extend(steps);
        self.items.push(Item {
            token: own,
            stream: cmd.stream,
            deps,
            kind: Kind::Cmd { ci, elsewhere },
        });
        Ok(())
    }
}

/// Runs one rank's scheduler over the threads' streams in the interleaving `order` (per
/// event, its thread), then over the main thread's. Tokens are named per thread,
/// (slot, count), as the runtime names everything every rank must agree on. `rank`
/// changes the order devices are registered in, which must not matter.
fn plan(scn: &Scenario, rank: u32, order: &[usize]) -> Result<Planned, String> {
    let mut s: Scheduler<u64> = Scheduler::new();
    let n = scn.devices.len();
    for i in 0..n {
        let d = (i + rank as usize) % n;
        s.add_device(d as u32, scn.devices[d]);
    }
    let (size, host) = scn.buffers[SHARED];
    s.create_buffer_as(buffer_id(scn, SHARED), size, host.then_some(Location::Host));
    let ids: Vec<BufferId> = (0..scn.buffers.len()).map(|b| buffer_id(scn, b)).collect();
    let mut p = Planner {
        scn,
        s,
        ids,
        items: Vec::new(),
    };
    let mut next: Vec<usize> = vec![0; scn.threads.len()];
    let mut counts: Vec<u64> = vec![0; scn.threads.len()];
    for &t in order {
        let thread = &scn.threads[t];
        let e = next[t];
        next[t] += 1;
        if e == 0 {
            for &b in &thread.buffers {
                let (size, host) = scn.buffers[b];
                p.s.create_buffer_as(p.ids[b], size, host.then_some(Location::Host));
            }
            continue;
        }
        p.command(thread, &mut counts[t], thread.commands[e - 1])?;
    }
    let mut count = 0;
    for &ci in &scn.main.commands {
        p.command(&scn.main, &mut count, ci)?;
    }
    let final_validity = (p.ids.iter().zip(&scn.buffers))
        .map(|(&id, &(size, _))| p.s.validity(id, 0..size))
        .collect();
    Ok(Planned {
        items: p.items,
        final_validity,
    })
}

// ---------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------

/// How a rank takes the tag of an item's message with a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TagRule {
    /// Per (slot of the item's thread, peer): the runtime's `Node::tags_with`.
    PerSlot,
    /// Per peer alone, whatever the thread: wrong when threads interleave differently.
    PerPair,
}

/// What `rank` does for each item of its plan, with tags by `rule`.
fn rank_plan<'p>(scn: &Scenario, planned: &'p Planned, rank: u32, rule: TagRule) -> RankPlan<'p> {
    let mut tags = Tags::new(scn.ranks);
    let roles = common::roles(scn, &planned.items, rank, |item, peer| {
        let slot = match rule {
            TagRule::PerSlot => slot_of(item.token),
            TagRule::PerPair => 0,
        };
        tags.take(slot, peer, 1).start
    });
    RankPlan {
        items: &planned.items,
        roles,
    }
}

/// A thread's part of a plan: its items in order, with their dependencies on its own
/// items. In host memory hazards are per byte range, so a thread's item waits only for
/// items that touched its bytes; a device instance conflicts whole (vendor sub-buffers
/// and their buffer may not run concurrently), so an item there may also wait for
/// another thread's, in whichever order this rank's threads came: a local ordering,
/// which the completion check below runs with.
fn thread_part(planned: &Planned, slot: usize) -> Vec<Item> {
    (planned.items.iter())
        .filter(|it| slot_of(it.token) == slot)
        .map(|it| Item {
            deps: (it.deps.iter().copied())
                .filter(|&d| slot_of(d) == slot)
                .collect(),
            ..it.clone()
        })
        .collect()
}

/// Per (buffer, thread), the steps planned on it, in order: for a thread's own buffer,
/// every step of the buffer.
fn steps_per_buffer(planned: &Planned) -> BTreeMap<(usize, usize), Vec<(usize, Step)>> {
    let mut by: BTreeMap<(usize, usize), Vec<(usize, Step)>> = BTreeMap::new();
    for it in &planned.items {
        if let Kind::Step { step, buf, cmd } = &it.kind {
            let key = (*buf, slot_of(it.token));
            by.entry(key).or_default().push((*cmd, step.clone()));
        }
    }
    by
}

/// The plans of every rank (rank `r` interleaving the threads as `orders[r]`) agree per
/// thread and per buffer, and end with the same valid sets.
fn check_plans(scn: &Scenario, plans: &[Planned]) -> Result<(), String> {
    let first = &plans[0];
    // In host memory a thread's items wait for its own items only: other threads never
    // touch its bytes.
    for it in &first.items {
        let slot = slot_of(it.token);
        let on_host = match &it.kind {
            Kind::Step { step, .. } => step.from == Location::Host && step.to == Location::Host,
            Kind::Cmd { .. } => false,
        };
        if on_host && slot != 0 && it.deps.iter().any(|&d| slot_of(d) != slot) {
            return Err(format!("thread {slot}'s {it:?} waits for another thread"));
        }
    }
    for (rank, other) in plans.iter().enumerate().skip(1) {
        for thread in scn.threads.iter().chain([&scn.main]) {
            let (a, b) = (
                thread_part(first, thread.slot),
                thread_part(other, thread.slot),
            );
            if a != b {
                return Err(format!(
                    "thread {}: rank 0 planned {a:?}, rank {rank} {b:?}",
                    thread.slot
                ));
            }
        }
        if steps_per_buffer(first) != steps_per_buffer(other) {
            return Err(format!("rank {rank} planned other steps on a buffer"));
        }
        if first.final_validity != other.final_validity {
            return Err(format!("rank {rank} ends with other valid sets"));
        }
    }
    Ok(())
}

/// The cluster checks of every rank's plan, tags taken by `rule`.
fn check_cluster(scn: &Scenario, plans: &[Planned], rule: TagRule) -> Result<(), String> {
    let ranks: Vec<RankPlan> = (plans.iter().enumerate())
        .map(|(rank, p)| rank_plan(scn, p, rank as u32, rule))
        .collect();
    check_matching(&ranks)?;
    // Each thread of each rank processes its own actions in order (a rank's threads run
    // concurrently; their interleaving differs between ranks).
    let lists: Vec<(u32, Vec<common::Act>)> = (ranks.iter().enumerate())
        .flat_map(|(rank, plan)| {
            scn.threads.iter().chain([&scn.main]).map(move |t| {
                let mine = (plan.items.iter().zip(&plan.roles))
                    .filter(|(it, _)| slot_of(it.token) == t.slot)
                    .map(|(_, role)| role);
                (rank as u32, common::acts(mine))
            })
        })
        .collect();
    check_progress_of(lists.clone(), false)?;
    check_progress_of(lists, true)?;
    let refr = reference(scn);
    let mut rng = Rng(scn.seed ^ 0xC1u64);
    for (markers, runs) in [(true, 2), (false, 4)] {
        for run in 0..runs {
            // Pass-through steps land in their instance or in a block of their own.
            let hand_off = run % 2 == 1;
            let mut mem = Memory::new(scn, hand_off);
            common::run_cluster(&ranks, &mut mem, &refr, markers, &mut rng)
                .map_err(|e| format!("cluster (markers={markers}, hand_off={hand_off}): {e}"))?;
            // Rank 0's valid sets speak for every rank's (`check_plans`).
            mem.check_final(
                &plans[0].final_validity,
                &vec![None; scn.buffers.len()],
                &refr,
                |loc| common::holders(scn, loc),
            )?;
        }
    }
    Ok(())
}

/// Every rank's plan for its own interleaving (`orders[rank]`).
fn plans(scn: &Scenario, orders: &[Vec<usize>]) -> Result<Vec<Planned>, String> {
    (orders.iter().enumerate())
        .map(|(rank, order)| plan(scn, rank as u32, order))
        .collect()
}

fn check_scenario(scn: &Scenario) -> Result<(), String> {
    let mut rng = Rng(scn.seed);
    let orders: Vec<Vec<usize>> = (0..scn.ranks)
        .map(|_| interleaving(scn, &mut rng))
        .collect();
    let plans = plans(scn, &orders)?;
    check_plans(scn, &plans)?;
    check_cluster(scn, &plans, TagRule::PerSlot).map_err(|e| format!("orders {orders:?}: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn random_thread_streams_in_random_interleavings_agree_on_every_rank(scn in scenario()) {
        if let Err(e) = check_scenario(&scn) {
            prop_assert!(false, "{}", e);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Focused cases
// ---------------------------------------------------------------------------------------

const H: Location = Location::Host;
const D0: Location = Location::Device(0);
const D1: Location = Location::Device(1);

/// Two threads each write their own buffer on rank 1's device and read it back to the
/// host (a broadcast from rank 1). Rank 0 runs thread 1 first, rank 1 thread 2 first.
fn two_threads_two_orders() -> (Scenario, Vec<Vec<usize>>) {
    let cmd = |thread: usize, at, accesses| Command {
        at,
        stream: match at {
            H => host_stream(thread * 10),
            _ => queue(thread + 1, 1, 0),
        },
        accesses,
    };
    let scn = Scenario {
        ranks: 2,
        devices: vec![common::device(0, 0), common::device(1, 0)],
        buffers: vec![(2, true), (4, false), (4, false)],
        threads: vec![
            Thread {
                slot: 1,
                buffers: vec![1],
                slice: 0..1,
                commands: vec![0, 1],
            },
            Thread {
                slot: 2,
                buffers: vec![2],
                slice: 1..2,
                commands: vec![2, 3],
            },
        ],
        main: Thread {
            slot: 0,
            buffers: vec![],
            slice: 0..2,
            commands: vec![],
        },
        commands: vec![
            cmd(0, D1, vec![(1, 0..4, Mode::Write)]),
            cmd(0, H, vec![(1, 0..4, Mode::Read)]),
            cmd(1, D1, vec![(2, 0..4, Mode::Write)]),
            cmd(1, H, vec![(2, 0..4, Mode::Read)]),
        ],
        policy: StepStreams::Fresh,
        pass_through_every: 0,
        seed: 5,
    };
    (scn, vec![vec![0, 0, 0, 1, 1, 1], vec![1, 1, 1, 0, 0, 0]])
}

#[test]
fn per_slot_tags_pair_up_whatever_the_interleaving() {
    let (scn, orders) = two_threads_two_orders();
    let plans = plans(&scn, &orders).unwrap();
    check_plans(&scn, &plans).unwrap();
    check_cluster(&scn, &plans, TagRule::PerSlot).unwrap();
}

/// The checker catches tags from one counter per pair: rank 1 sends thread 2's bytes
/// under the tag rank 0 expects thread 1's under.
#[test]
fn one_counter_per_pair_is_caught() {
    let (scn, orders) = two_threads_two_orders();
    let plans = plans(&scn, &orders).unwrap();
    let err = check_cluster(&scn, &plans, TagRule::PerPair).unwrap_err();
    assert!(err.contains("sends and receives do not match"), "{err}");
    // With one interleaving on both ranks, one counter per pair is enough.
    let same = vec![orders[0].clone(), orders[0].clone()];
    let plans = self::plans(&scn, &same).unwrap();
    check_cluster(&scn, &plans, TagRule::PerPair).unwrap();
}

/// Steps must run on streams of the thread that needed them. Thread 1 moves its buffer
/// from D0 (rank 0) to D1 (rank 1), thread 2 its own the other way; rank 0 schedules
/// thread 2 first, rank 1 thread 1. On one stream for all steps, each rank's receive
/// comes first and holds back the send the other rank waits for.
#[test]
fn a_step_stream_shared_by_threads_deadlocks() {
    let (mut scn, _) = two_threads_two_orders();
    let cmd = |slot, at, buf, mode| Command {
        at,
        stream: queue(slot, if at == D0 { 0 } else { 1 }, 0),
        accesses: vec![(buf, 0..4, mode)],
    };
    scn.commands = vec![
        cmd(1, D0, 1, Mode::Write),
        cmd(1, D1, 1, Mode::Read),
        cmd(2, D1, 2, Mode::Write),
        cmd(2, D0, 2, Mode::Read),
    ];
    let orders = vec![vec![1, 1, 1, 0, 0, 0], vec![0, 0, 0, 1, 1, 1]];
    for policy in [
        StepStreams::Fresh,
        StepStreams::ThreadDevice,
        StepStreams::Command,
    ] {
        scn.policy = policy;
        let plans = plans(&scn, &orders).unwrap();
        check_plans(&scn, &plans).unwrap();
        check_cluster(&scn, &plans, TagRule::PerSlot).unwrap();
    }
    scn.policy = StepStreams::Shared;
    let plans = plans(&scn, &orders).unwrap();
    let err = check_cluster(&scn, &plans, TagRule::PerSlot).unwrap_err();
    assert!(err.contains("deadlock"), "{err}");
}

/// Two threads each write their own half of the shared buffer (a sub-buffer) on a device
/// of another rank and map it on the host (a broadcast from that rank). Rank 0 runs
/// thread 2 first, rank 1 thread 1. Were hazards kept per buffer instance rather than per
/// byte range, each rank's broadcast would wait for the other's receive into the same
/// host copy: rank 0's send for thread 1 after its receive for thread 2, rank 1's send
/// for thread 2 after its receive for thread 1.
#[test]
fn sub_buffers_of_two_threads_do_not_wait_for_each_other() {
    let (mut scn, _) = two_threads_two_orders();
    let cmd = |slot, at, range: Range<u64>, mode| Command {
        at,
        stream: match at {
            H => host_stream(10 * slot),
            _ => queue(slot, if at == D0 { 0 } else { 1 }, 0),
        },
        accesses: vec![(SHARED, range, mode)],
    };
    scn.commands = vec![
        cmd(1, D0, 0..1, Mode::Write),
        cmd(1, H, 0..1, Mode::Read),
        cmd(2, D1, 1..2, Mode::Write),
        cmd(2, H, 1..2, Mode::Read),
    ];
    let orders = vec![vec![1, 1, 1, 0, 0, 0], vec![0, 0, 0, 1, 1, 1]];
    let plans = plans(&scn, &orders).unwrap();
    check_cluster(&scn, &plans, TagRule::PerSlot).unwrap();
    check_plans(&scn, &plans).unwrap();
}
