//! What the simulation tests share (`simulate.rs`, `threads.rs`): planned items, the
//! reference execution, byte-level memories of every location instance, and the cluster
//! model: what each rank does for each item after Table IV.1, how its messages pair up,
//! and an asynchronous execution of every rank's actions.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use mirrorcl_scheduler::{DeviceDesc, Location, Mode, Step, StreamId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

/// One command's accesses: (buffer index, range, mode).
pub type Accesses = [(usize, Range<u64>, Mode)];

/// What the shared checks need of a scenario.
pub trait World {
    fn ranks(&self) -> u32;
    fn devices(&self) -> &[DeviceDesc];
    /// Per buffer: (size, initially valid at the host; else undefined).
    fn buffers(&self) -> &[(u64, bool)];
    /// How many commands there are; the reference runs them in index order.
    fn commands(&self) -> usize;
    /// Where command `ci` runs.
    fn at(&self, ci: usize) -> Location;
    fn accesses(&self, ci: usize) -> &Accesses;
    /// Whether access `i` of command `ci` is marked pass-through (`Access::pass_through`,
    /// which only reads heed).
    fn pass_through(&self, ci: usize, i: usize) -> bool;
}

// ---------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------

/// splitmix64: a tiny deterministic generator for orders and stream picks.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A device of `owner`'s vendor context `group` that conflicts whole within a thread
/// (PoCL's rule: `DeviceDesc::ranges_apart` off).
pub fn device(owner: u32, group: u32) -> DeviceDesc {
    DeviceDesc {
        owner,
        group,
        ranges_apart: false,
    }
}

pub fn reads(m: Mode) -> bool {
    matches!(m, Mode::Read | Mode::ReadWrite)
}

pub fn writes(m: Mode) -> bool {
    matches!(m, Mode::Write | Mode::ReadWrite)
}

/// The byte a command writes: unique per (command, buffer, offset).
pub fn written(cmd: usize, buf: usize, off: u64) -> u64 {
    (1 << 40) | ((cmd as u64) << 16) | ((buf as u64) << 8) | off
}

/// What a block a pass-through step lands in holds before it lands (see `Memory`).
pub fn unlanded(rank: u32, ci: usize, buf: usize, off: u64) -> u64 {
    (4 << 40) | (u64::from(rank) << 32) | ((ci as u64) << 16) | ((buf as u64) << 8) | off
}

/// The initial host bytes of a buffer created with host data.
pub fn initial(buf: usize, off: u64) -> u64 {
    (2 << 40) | ((buf as u64) << 8) | off
}

/// What an instance holds before anything is copied or written to it: unique per
/// instance, so that reading bytes that were never made valid there is always caught.
pub fn poison(rank: u32, loc: Location, buf: usize, off: u64) -> u64 {
    let l = match loc {
        Location::Host => 0,
        Location::Device(d) => u64::from(d) + 1,
    };
    (3 << 40) | (u64::from(rank) << 32) | (l << 16) | ((buf as u64) << 8) | off
}

/// The rank owning a location's instance; `None` for the host copy (every rank's).
pub fn owner(w: &impl World, loc: Location) -> Option<u32> {
    match loc {
        Location::Host => None,
        Location::Device(d) => Some(w.devices()[d as usize].owner),
    }
}

// ---------------------------------------------------------------------------------------
// Planned items
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A transfer step, planned for command `cmd`.
    Step { step: Step, buf: usize, cmd: usize },
    /// Command `ci`; `elsewhere`: what `Scheduler::read_elsewhere` gave right after it
    /// was scheduled (accesses read in place on another device, by index).
    Cmd {
        ci: usize,
        elsewhere: Vec<(usize, u32)>,
    },
}

/// A command or step as a scheduler planned it: its token, stream and dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub token: u64,
    pub stream: StreamId,
    pub deps: Vec<u64>,
    pub kind: Kind,
}

pub fn step_of(item: &Item) -> (&Step, usize) {
    match &item.kind {
        Kind::Step { step, buf, .. } => (step, *buf),
        Kind::Cmd { .. } => panic!("not a step"),
    }
}

/// Per command, the (buffer, range) of the pass-through steps planned for it.
pub fn pass_through_steps(items: &[Item]) -> HashMap<usize, Vec<(usize, Range<u64>)>> {
    let mut by: HashMap<usize, Vec<(usize, Range<u64>)>> = HashMap::new();
    for item in items {
        if let Kind::Step { step, buf, cmd } = &item.kind {
            if step.pass_through {
                by.entry(*cmd).or_default().push((*buf, step.range.clone()));
            }
        }
    }
    by
}

/// Each item's predecessors by index: its dependencies and the previous item on its
/// stream.
pub fn preds(items: &[Item]) -> Vec<Vec<usize>> {
    let index: HashMap<u64, usize> = (items.iter().enumerate())
        .map(|(i, it)| (it.token, i))
        .collect();
    let mut last_on_stream: HashMap<StreamId, usize> = HashMap::new();
    (items.iter().enumerate())
        .map(|(i, it)| {
            let mut p: Vec<usize> = it.deps.iter().map(|t| index[t]).collect();
            if let Some(prev) = last_on_stream.insert(it.stream, i) {
                p.push(prev);
            }
            p
        })
        .collect()
}

/// A random order of `preds.len()` items in which each comes after its predecessors.
pub fn random_topological_order(preds: &[Vec<usize>], rng: &mut Rng) -> Vec<usize> {
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

// ---------------------------------------------------------------------------------------
// The reference: one location executing every command in order
// ---------------------------------------------------------------------------------------

/// A byte a command reads: (access index, buffer, offset, what it must see; None:
/// undefined).
pub type ReadByte = (usize, usize, u64, Option<u64>);

pub struct Reference {
    /// Per command: every byte it reads.
    pub reads: Vec<Vec<ReadByte>>,
    /// Per buffer: the final bytes.
    pub bytes: Vec<Vec<Option<u64>>>,
}

pub fn reference(w: &impl World) -> Reference {
    let mut bytes: Vec<Vec<Option<u64>>> = (w.buffers().iter().enumerate())
        .map(|(b, &(size, host))| (0..size).map(|o| host.then(|| initial(b, o))).collect())
        .collect();
    let mut all_reads = Vec::new();
    for ci in 0..w.commands() {
        // A command reads everything it reads before writing anything.
        let mut seen = Vec::new();
        for (i, (b, r, m)) in w.accesses(ci).iter().enumerate() {
            if reads(*m) {
                seen.extend(r.clone().map(|off| (i, *b, off, bytes[*b][off as usize])));
            }
        }
        for (b, r, m) in w.accesses(ci) {
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
///
/// A pass-through step (`Step::pass_through`) may write its destination's instance, or,
/// with `hand_off`, only a block of its own that the command it serves reads instead (as
/// the runtime's copies do): the scheduler must be right for both.
pub struct Memory<'a, W: World> {
    w: &'a W,
    cells: HashMap<(u32, Location, usize), Vec<u64>>,
    hand_off: bool,
    /// (rank, command, buffer) → the bytes pass-through steps landed for the command.
    landed: HashMap<(u32, usize, usize), Vec<u64>>,
}

impl<'a, W: World> Memory<'a, W> {
    pub fn new(w: &'a W, hand_off: bool) -> Self {
        Memory {
            w,
            cells: HashMap::new(),
            hand_off,
            landed: HashMap::new(),
        }
    }

    fn landed_cell(&mut self, rank: u32, ci: usize, buf: usize) -> &mut Vec<u64> {
        let size = self.w.buffers()[buf].0;
        (self.landed.entry((rank, ci, buf)))
            .or_insert_with(|| (0..size).map(|o| unlanded(rank, ci, buf, o)).collect())
    }

    pub fn cell(&mut self, rank: u32, loc: Location, buf: usize) -> &mut Vec<u64> {
        let (size, host) = self.w.buffers()[buf];
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

    pub fn read(&mut self, rank: u32, loc: Location, buf: usize, r: Range<u64>) -> Vec<u64> {
        self.cell(rank, loc, buf)[r.start as usize..r.end as usize].to_vec()
    }

    pub fn write(&mut self, rank: u32, loc: Location, buf: usize, start: u64, data: &[u64]) {
        let s = start as usize;
        self.cell(rank, loc, buf)[s..s + data.len()].copy_from_slice(data);
    }

    /// Lands the bytes of step `item` at its destination on `rank`.
    pub fn land(&mut self, rank: u32, item: &Item, data: &[u64]) {
        let Kind::Step { step, buf, cmd } = &item.kind else {
            panic!("not a step")
        };
        if self.hand_off && step.pass_through {
            let s = step.range.start as usize;
            self.landed_cell(rank, *cmd, *buf)[s..s + data.len()].copy_from_slice(data);
        } else {
            self.write(rank, step.to, *buf, step.range.start, data);
        }
    }

    /// Runs step `item` on `rank`, both ends local.
    pub fn copy(&mut self, rank: u32, item: &Item) {
        let (step, buf) = step_of(item);
        let data = self.read(rank, step.from, buf, step.range.clone());
        self.land(rank, item, &data);
    }

    /// Runs command `item` on `rank`: checks every byte it reads against the reference,
    /// then writes at its location's instance. An access reads where the scheduler said
    /// (`Kind::Cmd::elsewhere`), or else, with `hand_off`, a pass-through read whose
    /// whole range one of the command's pass-through steps (`pass_through`, per
    /// `pass_through_steps`) brings reads that step's block; every other access reads at
    /// the command's location.
    pub fn exec(
        &mut self,
        rank: u32,
        item: &Item,
        pass_through: &[(usize, Range<u64>)],
        refr: &Reference,
    ) -> Result<(), String> {
        let Kind::Cmd { ci, elsewhere } = &item.kind else {
            panic!("not a command")
        };
        let (w, ci) = (self.w, *ci);
        let at = w.at(ci);
        for &(i, b, off, expected) in &refr.reads[ci] {
            let (_, range, mode) = &w.accesses(ci)[i];
            let landed = self.hand_off
                && *mode == Mode::Read
                && w.pass_through(ci, i)
                && pass_through.iter().any(|(pb, r)| (*pb, r) == (b, range));
            let (got, from) = match elsewhere.iter().find(|(a, _)| *a == i) {
                Some(&(_, d)) => {
                    let d = Location::Device(d);
                    (self.cell(rank, d, b)[off as usize], format!("{d:?}"))
                }
                None if landed => (
                    self.landed_cell(rank, ci, b)[off as usize],
                    "its landed block".into(),
                ),
                None => (self.cell(rank, at, b)[off as usize], format!("{at:?}")),
            };
            if let Some(e) = expected {
                if got != e {
                    return Err(format!(
                        "rank {rank}: command {ci} at {at:?} {:?} read byte {off} of buffer \
                         {b} (access {i}, on {from}) as {got:#x}, expected {e:#x}",
                        w.accesses(ci)
                    ));
                }
            }
        }
        for (b, r, m) in w.accesses(ci) {
            if writes(*m) {
                for off in r.clone() {
                    self.cell(rank, at, *b)[off as usize] = written(ci, *b, off);
                }
            }
        }
        Ok(())
    }

    /// At the end, every location of every valid set (`final_validity`, per buffer) of a
    /// buffer that is not attached holds the reference bytes, on every rank holding an
    /// instance of that location (`ranks_of`); so does the device an attached buffer is
    /// attached to (`final_attached`), where the reference bytes are defined.
    pub fn check_final(
        &mut self,
        final_validity: &[Vec<(Range<u64>, mirrorcl_scheduler::ValidSet)>],
        final_attached: &[Option<u32>],
        refr: &Reference,
        ranks_of: impl Fn(Location) -> Vec<u32>,
    ) -> Result<(), String> {
        for (b, segs) in final_validity.iter().enumerate() {
            let holders: Vec<(Range<u64>, Location)> = match final_attached[b] {
                Some(a) => vec![(0..self.w.buffers()[b].0, Location::Device(a))],
                None => segs
                    .iter()
                    .flat_map(|(r, set)| set.locations().iter().map(|&loc| (r.clone(), loc)))
                    .collect(),
            };
            for (r, loc) in holders {
                for rank in ranks_of(loc) {
                    for off in r.clone() {
                        let got = self.cell(rank, loc, b)[off as usize];
                        let want = refr.bytes[b][off as usize];
                        let wrong = match final_attached[b] {
                            Some(_) => want.is_some_and(|w| w != got),
                            None => want != Some(got),
                        };
                        if wrong {
                            return Err(format!(
                                "end: buffer {b} byte {off} at {loc:?} on rank {rank} \
                                 is {got:#x}, expected {want:x?}"
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The cluster: per-rank actions after Table IV.1
// ---------------------------------------------------------------------------------------

/// What one rank does for one item. Every message carries the tag its rank takes for the
/// other rank of the message, in its own plan order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Runs the command (device commands on the owner, host commands on every rank).
    Exec(usize),
    /// Copies locally (both ends on this rank, the host copy counting as local).
    Copy,
    /// Reads the source and sends it to `peers` (each with its tag); with `to_host`, also
    /// writes the local host copy (a step to the host is a broadcast by the source's
    /// owner).
    Send {
        peers: Vec<(u32, u64)>,
        to_host: bool,
    },
    /// Receives from `peer` into the destination.
    Recv { peer: u32, tag: u64 },
}

/// What `rank` does for each of `items` (its plan, in its order); `tag(item, peer)` takes
/// the tag of the item's next message with `peer`.
pub fn roles(
    w: &impl World,
    items: &[Item],
    rank: u32,
    mut tag: impl FnMut(&Item, u32) -> u64,
) -> Vec<Option<Role>> {
    items
        .iter()
        .map(|item| match &item.kind {
            // A read in place happens on a device of the same owner: nothing more to do.
            Kind::Cmd { ci, .. } => match owner(w, w.at(*ci)) {
                None => Some(Role::Exec(*ci)),
                Some(o) => (o == rank).then_some(Role::Exec(*ci)),
            },
            Kind::Step { step, .. } => match (owner(w, step.from), owner(w, step.to)) {
                (None, None) => panic!("host to host step {step:?}"),
                // The host copy is replicated: the destination's owner copies locally.
                (None, Some(t)) => (t == rank).then_some(Role::Copy),
                // Read by the owner and broadcast to every rank.
                (Some(f), None) => Some(if f == rank {
                    Role::Send {
                        peers: (0..w.ranks())
                            .filter(|&r| r != f)
                            .map(|r| (r, tag(item, r)))
                            .collect(),
                        to_host: true,
                    }
                } else {
                    Role::Recv {
                        peer: f,
                        tag: tag(item, f),
                    }
                }),
                (Some(f), Some(t)) if f == t => (f == rank).then_some(Role::Copy),
                (Some(f), Some(t)) => {
                    if rank == f {
                        Some(Role::Send {
                            peers: vec![(t, tag(item, t))],
                            to_host: false,
                        })
                    } else if rank == t {
                        Some(Role::Recv {
                            peer: f,
                            tag: tag(item, f),
                        })
                    } else {
                        None
                    }
                }
            },
        })
        .collect()
}

/// [`roles`] with one tag counter per pair of ranks, as a single host thread takes them.
pub fn roles_per_pair(w: &impl World, items: &[Item], rank: u32) -> Vec<Option<Role>> {
    let mut next_tag = vec![0u64; w.ranks() as usize];
    roles(w, items, rank, |_, peer| {
        let t = &mut next_tag[peer as usize];
        *t += 1;
        *t - 1
    })
}

/// (from rank, to rank, tag)
pub type Message = (u32, u32, u64);

/// One rank's plan with what it does for each item.
pub struct RankPlan<'p> {
    pub items: &'p [Item],
    pub roles: Vec<Option<Role>>,
}

/// Every send meets exactly one receive: same sender, receiver and tag, and the same
/// step (so the same buffer, range and size). `plans[rank]` is what `rank` scheduled.
pub fn check_matching(plans: &[RankPlan]) -> Result<(), String> {
    let mut sends: BTreeMap<Message, &Step> = BTreeMap::new();
    let mut recvs: BTreeMap<Message, &Step> = BTreeMap::new();
    for (rank, plan) in plans.iter().enumerate() {
        let rank = rank as u32;
        for (item, role) in plan.items.iter().zip(&plan.roles) {
            match role {
                Some(Role::Send { peers, .. }) => {
                    for &(p, tag) in peers {
                        if sends.insert((rank, p, tag), step_of(item).0).is_some() {
                            return Err(format!("two sends {rank}→{p} with tag {tag}"));
                        }
                    }
                }
                Some(Role::Recv { peer, tag }) => {
                    let twice = recvs.insert((*peer, rank, *tag), step_of(item).0).is_some();
                    if twice {
                        return Err(format!("two receives {peer}→{rank} with tag {tag}"));
                    }
                }
                _ => {}
            }
        }
    }
    if sends != recvs {
        let unmatched: Vec<_> = sends
            .iter()
            .filter(|(k, v)| recvs.get(k) != Some(v))
            .chain(recvs.iter().filter(|(k, v)| sends.get(k) != Some(v)))
            .collect();
        return Err(format!(
            "sends and receives do not match (sender, receiver, tag): {unmatched:?}"
        ));
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
pub enum Act {
    Local,
    Send(u32, u64),
    Recv(u32, u64),
}

/// The actions of `roles`, in order.
pub fn acts<'r>(roles: impl IntoIterator<Item = &'r Option<Role>>) -> Vec<Act> {
    let mut acts = Vec::new();
    for role in roles.into_iter().flatten() {
        match role {
            Role::Exec(_) | Role::Copy => acts.push(Act::Local),
            Role::Send { peers, .. } => {
                acts.extend(peers.iter().map(|&(p, tag)| Act::Send(p, tag)));
            }
            Role::Recv { peer, tag } => acts.push(Act::Recv(*peer, *tag)),
        }
    }
    acts
}

/// Each rank processes its action list in order; a receive blocks until the matching
/// send was posted; with `rendezvous`, a send also blocks until it was received.
pub fn check_progress(plans: &[RankPlan], rendezvous: bool) -> Result<(), String> {
    let lists = (plans.iter().enumerate())
        .map(|(rank, plan)| (rank as u32, acts(&plan.roles)))
        .collect();
    check_progress_of(lists, rendezvous)
}

/// [`check_progress`] over action lists, each of the rank it names; a rank may have
/// several, each processed in order (one per host thread).
pub fn check_progress_of(lists: Vec<(u32, Vec<Act>)>, rendezvous: bool) -> Result<(), String> {
    let mut pc = vec![0usize; lists.len()];
    let mut posted: HashSet<Message> = HashSet::new();
    let mut received: HashSet<Message> = HashSet::new();
    loop {
        let mut progressed = false;
        for (i, (me, list)) in lists.iter().enumerate() {
            let me = *me;
            while let Some(&act) = list.get(pc[i]) {
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
                pc[i] += 1;
                progressed = true;
            }
        }
        if pc.iter().zip(&lists).all(|(&p, (_, l))| p == l.len()) {
            return Ok(());
        }
        if !progressed {
            let stuck: Vec<_> = (pc.iter().zip(&lists))
                .map(|(&p, (r, l))| (r, l.get(p).copied()))
                .collect();
            return Err(format!("deadlock (rendezvous={rendezvous}): {stuck:?}"));
        }
    }
}

/// Runs every rank's actions (after its own plan, `plans[rank]`) asynchronously on
/// per-rank memories `mem`, in a random global interleaving. On a rank, an action waits
/// for its dependencies that this rank runs (others are bookkeeping here and count as
/// done at once, or, with `markers`, complete in their stream's order like a marker), for
/// the previous action of its stream on this rank, and a receive for its message.
pub fn run_cluster<W: World>(
    plans: &[RankPlan],
    mem: &mut Memory<W>,
    refr: &Reference,
    markers: bool,
    rng: &mut Rng,
) -> Result<(), String> {
    struct Task<'p> {
        rank: u32,
        item: &'p Item,
        role: Option<&'p Role>,
        preds: Vec<usize>,
    }
    let mut tasks: Vec<Task> = Vec::new();
    for (rank, plan) in plans.iter().enumerate() {
        let mut task_of: HashMap<u64, usize> = HashMap::new();
        let mut last_on_stream: HashMap<StreamId, usize> = HashMap::new();
        for (item, role) in plan.items.iter().zip(&plan.roles) {
            if role.is_none() && !markers {
                continue;
            }
            let mut preds: Vec<usize> = (item.deps.iter())
                .filter_map(|t| task_of.get(t).copied())
                .collect();
            let id = tasks.len();
            if let Some(prev) = last_on_stream.insert(item.stream, id) {
                preds.push(prev);
            }
            task_of.insert(item.token, id);
            tasks.push(Task {
                rank: rank as u32,
                item,
                role: role.as_ref(),
                preds,
            });
        }
    }
    let pass_through: Vec<_> = (plans.iter())
        .map(|plan| pass_through_steps(plan.items))
        .collect();
    let mut done = vec![false; tasks.len()];
    let mut messages: HashMap<Message, Vec<u64>> = HashMap::new();
    let mut remaining = tasks.len();
    while remaining > 0 {
        let ready: Vec<usize> = (0..tasks.len())
            .filter(|&t| {
                !done[t]
                    && tasks[t].preds.iter().all(|&p| done[p])
                    && match tasks[t].role {
                        Some(Role::Recv { peer, tag }) => {
                            messages.contains_key(&(*peer, tasks[t].rank, *tag))
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
        let rank = task.rank;
        match task.role {
            None => {}
            Some(Role::Exec(ci)) => {
                let steps = pass_through[rank as usize].get(ci);
                mem.exec(rank, task.item, steps.map_or(&[], Vec::as_slice), refr)?;
            }
            Some(Role::Copy) => mem.copy(rank, task.item),
            Some(Role::Send { peers, to_host }) => {
                let (step, buf) = step_of(task.item);
                let data = mem.read(rank, step.from, buf, step.range.clone());
                if *to_host {
                    mem.write(rank, Location::Host, buf, step.range.start, &data);
                }
                for &(p, tag) in peers {
                    messages.insert((rank, p, tag), data.clone());
                }
            }
            Some(Role::Recv { peer, tag }) => {
                let data = messages[&(*peer, rank, *tag)].clone();
                mem.land(rank, task.item, &data);
            }
        }
        done[t] = true;
        remaining -= 1;
    }
    Ok(())
}

/// The ranks holding an instance of `loc`: its owner, or every rank for the host copy.
pub fn holders(w: &impl World, loc: Location) -> Vec<u32> {
    match owner(w, loc) {
        None => (0..w.ranks()).collect(),
        Some(o) => vec![o],
    }
}
