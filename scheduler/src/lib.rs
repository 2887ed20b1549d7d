//! MirrorCL's command scheduler: pure, deterministic logic with no FFI, MPI or OpenCL.
//!
//! Every rank feeds its scheduler the same command stream (invariant 1 of the design), so
//! every rank computes the same valid sets and the same consistency plan (Table IV.1 of the
//! SnuCL-D thesis). The runtime maps each planned [`Step`] onto what this rank must do: a
//! local copy, a send, a receive, or nothing.
//!
//! Two things are decided here for each command:
//! - **Consistency**: before a command runs at a location, the byte ranges it reads that
//!   are not valid there are brought in by transfer steps, from a source chosen by a rule
//!   that depends only on the command stream (never on which rank evaluates it).
//! - **Conflict ordering**: a command depends on the last writer of every byte range of
//!   every location instance it touches, and a writer also on the readers since. Tokens
//!   on the same in-order stream are left out, since the stream orders them already.
//!
//! `docs/scheduler.md` states the rules, what the runtime must guarantee in return, and
//! what `tests/simulate.rs` and, for several host threads, `tests/threads.rs` prove.

pub mod relay;
pub mod sim;
pub mod tags;
mod validity;

pub use validity::{ValidSet, ValidityMap};

use rustc_hash::FxHashMap as HashMap;
use smallvec::{smallvec, SmallVec};
use std::ops::Range;

/// Where a buffer's bytes can live. `Host` is the host copy, replicated on every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    Host,
    /// A device by its cluster-wide index.
    Device(u32),
}

/// What the scheduler needs to know of a device to choose transfer sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceDesc {
    /// The rank owning the actual device.
    pub owner: u32,
    /// Devices of one owner with equal `group` copy between each other directly (same
    /// vendor context); others go through the host copy.
    pub group: u32,
    /// Its vendor runs commands on disjoint bytes of one buffer concurrently, ordering
    /// only what it is told to (NVIDIA): accesses there conflict per byte range unless
    /// one goes through a sub-buffer or image. Elsewhere a device instance conflicts
    /// whole within a host thread: PoCL orders the commands on one buffer itself, in the
    /// order they reach it, and a command issued ahead of an earlier one it did not wait
    /// for then waited for it inside PoCL, while the earlier one waited (through a bridge)
    /// for work that needed the later one: a deadlock.
    pub ranges_apart: bool,
}

pub type BufferId = u64;
/// An in-order execution stream (a vendor queue). Commands on one stream need no
/// dependencies between each other.
pub type StreamId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    /// Overwrites every byte of the range without reading it.
    Write,
    ReadWrite,
}

impl Mode {
    fn reads(self) -> bool {
        matches!(self, Mode::Read | Mode::ReadWrite)
    }
    fn writes(self) -> bool {
        matches!(self, Mode::Write | Mode::ReadWrite)
    }
}

/// One buffer range a command touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub buffer: BufferId,
    pub range: Range<u64>,
    pub mode: Mode,
    /// Reaches the bytes through a vendor object that aliases the device instance (a
    /// sub-buffer, an image): it then conflicts there with the same host thread's
    /// accesses of any bytes (see `Tok`).
    pub aliased: bool,
    /// A read whose bytes serve this command alone (a copy's source): where they are not
    /// valid at the command's device, a device of its vendor context that holds them all
    /// is read in place ([`Scheduler::read_elsewhere`]), and a step from another rank's
    /// device that brings them whole is marked [`Step::pass_through`] (for an attached
    /// buffer, whose bytes elsewhere are never reused, too). Ignored for writes.
    pub pass_through: bool,
}

impl Access {
    /// Whether it is a pass-through read (the flag means nothing for a write).
    fn passes_through(&self) -> bool {
        self.pass_through && self.mode == Mode::Read
    }
}

/// A planned data movement: make `range` of `buffer` at `to` equal to that at `from`.
#[derive(Clone, Debug)]
pub struct Step {
    pub buffer: BufferId,
    pub range: Range<u64>,
    pub from: Location,
    pub to: Location,
    /// The bytes are for the one command that needs them at `to` (an access marked
    /// [`Access::pass_through`]): `to` does not become valid, so the runtime may hand
    /// them to the command without writing `to`'s instance. Their write hazard there is
    /// recorded all the same.
    pub pass_through: bool,
    /// How many of the dependencies the step is submitted with come from its source's
    /// instance (the writes it reads after); the rest order it after the accesses of its
    /// destination's instance. A rank that only sends the bytes to another rank's
    /// device needs the first alone: what the destination's owner writes there is that
    /// rank's to order, and on the sender those accesses are bookkeeping.
    pub source_deps: usize,
}

/// The plan the ranks agree on: `source_deps` counts this rank's own dependencies (a
/// command left out here records nothing), so it is not part of it.
impl PartialEq for Step {
    fn eq(&self, other: &Self) -> bool {
        (
            self.buffer,
            &self.range,
            self.from,
            self.to,
            self.pass_through,
        ) == (
            other.buffer,
            &other.range,
            other.from,
            other.to,
            other.pass_through,
        )
    }
}

impl Eq for Step {}

/// Which ranks perform an access to a location's instance, as far as reader bookkeeping
/// must tell them apart: `None` for every rank that holds the instance, `Some(r)` for
/// rank `r` alone. Only a step from the host copy to a device is of the second kind: the
/// host copy is replicated on every rank, but only the device's owner reads it for the
/// step. Every other access to an instance is performed by every rank holding it.
type Scope = Option<u32>;

/// A route's hops (`Scheduler::route`): one, or two through the host copy.
type Hops = SmallVec<[(Location, Location); 2]>;

/// The steps planned for one access: mostly one or two.
type Steps = SmallVec<[Step; 2]>;

/// Pending accesses to one location's instance of a buffer.
#[derive(Clone, Debug)]
struct Hazards<T> {
    last_write: Option<(StreamId, T)>,
    /// Readers since the last write, the newest per stream and scope. An older reader may
    /// only be forgotten for a newer one that runs on the same ranks: on a rank that does
    /// not run the newer one (work of another rank is bookkeeping here and completes at
    /// once), waiting for it would not wait for the older one.
    /// Inline for the few of most instances: a segment made anew (split off by a copy
    /// of a ghost row, every iteration of a solver) then allocates nothing.
    reads: SmallVec<[(StreamId, Scope, T); 2]>,
    /// Where each (stream, scope) is in `reads`, once there are more than
    /// [`LINEAR_READS`]: steps mostly come on fresh streams, so a source read by a step
    /// per rank collects one reader per rank, and a linear search made recording each
    /// O(ranks) (found by `mirrorcl-sim`). Below that a search is cheaper than hashing,
    /// and a segment made anew (a write over part of a buffer, as a solver's ghost rows
    /// every iteration) allocates no table.
    index: HashMap<(StreamId, Scope), usize>,
    /// How many readers gather before the completed ones are forgotten
    /// ([`PRUNE_READS_AT`], then twice as many as remained).
    prune_at: usize,
}

/// How many readers an instance's hazards keep before they index them.
const LINEAR_READS: usize = 8;

/// How many readers an instance's hazards keep before they forget the completed ones
/// (`Scheduler::with_done`). Only a write forgets readers otherwise, and where nothing
/// this rank schedules writes an instance again, one reader per transfer out of it
/// gathered for as long as the program ran: a kernel another rank runs is left out here
/// (`left_out`), so the all-to-all's and the attached stencil's sources, read by a step
/// on a fresh stream every iteration, collected a reader (and kept its event) per
/// iteration on every rank but their owner, and a write's dependencies grew with them.
const PRUNE_READS_AT: usize = 32;

impl<T> Default for Hazards<T> {
    fn default() -> Self {
        Hazards {
            last_write: None,
            reads: SmallVec::new(),
            index: HashMap::default(),
            prune_at: PRUNE_READS_AT,
        }
    }
}

impl<T: Clone> Hazards<T> {
    fn deps_for(&self, mode: Mode, stream: StreamId, out: &mut Vec<T>) {
        self.deps_where(mode, stream, out, |_| true);
    }

    /// [`Hazards::deps_for`], of the tokens `keep` accepts.
    fn deps_where(
        &self,
        mode: Mode,
        stream: StreamId,
        out: &mut Vec<T>,
        keep: impl Fn(&T) -> bool,
    ) {
        if let Some((s, t)) = &self.last_write {
            if *s != stream && keep(t) {
                out.push(t.clone());
            }
        }
        if mode.writes() {
            for (s, _, t) in &self.reads {
                if *s != stream && keep(t) {
                    out.push(t.clone());
                }
            }
        }
    }

    fn record(
        &mut self,
        mode: Mode,
        stream: StreamId,
        scope: Scope,
        token: &T,
        done: &impl Fn(&T) -> bool,
    ) {
        if mode.writes() {
            self.last_write = Some((stream, token.clone()));
            self.reads.clear();
            self.index.clear();
            self.prune_at = PRUNE_READS_AT;
            return;
        }
        if self.reads.len() >= self.prune_at {
            self.forget_done_reads(done);
        }
        let key = (stream, scope);
        let found = if self.reads.len() > LINEAR_READS {
            self.index.get(&key).copied()
        } else {
            (self.reads.iter()).position(|(s, sc, _)| (*s, *sc) == key)
        };
        if let Some(i) = found {
            self.reads[i].2 = token.clone();
            return;
        }
        if self.reads.len() == LINEAR_READS {
            self.index_reads();
        }
        if self.reads.len() >= LINEAR_READS {
            self.index.insert(key, self.reads.len());
        }
        self.reads.push((stream, scope, token.clone()));
    }

    /// Forgets the readers whose tokens are done: a later write waits for nothing there.
    fn forget_done_reads(&mut self, done: &impl Fn(&T) -> bool) {
        self.reads.retain(|(_, _, t)| !done(t));
        self.index.clear();
        if self.reads.len() > LINEAR_READS {
            self.index_reads();
        }
        // Amortized: each reader is looked at a bounded number of times.
        self.prune_at = PRUNE_READS_AT.max(2 * self.reads.len());
    }

    /// Indexes every reader by (stream, scope), into an empty index.
    fn index_reads(&mut self) {
        let indexed = (self.reads.iter().enumerate()).map(|(i, (s, sc, _))| ((*s, *sc), i));
        self.index.extend(indexed);
    }
}

/// Pending accesses to one location's instance of a buffer, per byte range: accesses to
/// disjoint ranges never wait for each other. Host threads that each use their own
/// sub-buffer of one buffer are interleaved differently on each rank; were they ordered
/// per instance, one rank's send could wait for a receive that waits, on the other rank,
/// for that send (found by `tests/threads.rs`).
#[derive(Clone, Debug)]
struct RangeHazards<T> {
    /// Disjoint segments in order; `hazards[i]` holds the hazards of every byte of
    /// `ranges[i]`. Bytes never accessed have none. A write replaces the segments it
    /// covers by one. Mostly a single segment (buffers accessed whole); the ranges apart
    /// keep the search through many (one per sub-buffer) in cache.
    ranges: Vec<Range<u64>>,
    hazards: Vec<Hazards<T>>,
    /// The streams of the accesses recorded since a write last covered every segment.
    streams: Streams,
}

/// Which streams an instance's recorded accesses were on: a superset of those its
/// hazards still hold (forgetting done readers leaves it as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Streams {
    None,
    One(StreamId),
    Several,
}

impl<T> Default for RangeHazards<T> {
    fn default() -> Self {
        RangeHazards {
            ranges: Vec::new(),
            hazards: Vec::new(),
            streams: Streams::None,
        }
    }
}

impl<T: Clone> RangeHazards<T> {
    /// Whether an access on `stream` conflicts with nothing recorded here, whatever its
    /// bytes and whoever made it: every recorded access was on that stream, which orders
    /// them. A solver's kernels find so at every launch between its exchanges, and skip
    /// the walk through the segments.
    fn only_on(&self, stream: StreamId) -> bool {
        match self.streams {
            Streams::None => true,
            Streams::One(s) => s == stream,
            Streams::Several => false,
        }
    }

    /// Notes an access on `stream`; `replaces_all`: a write covering every segment,
    /// whose hazards are then the only ones.
    fn note_stream(&mut self, stream: StreamId, replaces_all: bool) {
        self.streams = if replaces_all || self.only_on(stream) {
            Streams::One(stream)
        } else {
            Streams::Several
        };
    }

    /// The index of the first segment ending after `at`.
    fn first_after(&self, at: u64) -> usize {
        match self.ranges.as_slice() {
            [only] => usize::from(only.end <= at),
            ranges => ranges.partition_point(|r| r.end <= at),
        }
    }

    /// The segments overlapping `range`.
    fn overlapping(&self, range: &Range<u64>) -> impl Iterator<Item = &Hazards<T>> {
        let i = self.first_after(range.start);
        let n = (self.ranges[i..].iter())
            .take_while(|r| r.start < range.end)
            .count();
        self.hazards[i..i + n].iter()
    }

    fn deps_for(&self, range: &Range<u64>, mode: Mode, stream: StreamId, out: &mut Vec<T>) {
        for h in self.overlapping(range) {
            h.deps_for(mode, stream, out);
        }
    }

    /// Splits the segment holding `at`, if it starts before it.
    fn split_at(&mut self, at: u64) {
        let i = self.first_after(at);
        if let Some(r) = self.ranges.get_mut(i) {
            if r.start < at {
                let tail = at..r.end;
                r.end = at;
                self.ranges.insert(i + 1, tail);
                self.hazards.insert(i + 1, self.hazards[i].clone());
            }
        }
    }

    fn record(
        &mut self,
        range: &Range<u64>,
        mode: Mode,
        stream: StreamId,
        scope: Scope,
        token: &T,
        done: &impl Fn(&T) -> bool,
    ) {
        let covers_all = (self.ranges.first()).is_none_or(|f| range.start <= f.start)
            && (self.ranges.last()).is_none_or(|l| l.end <= range.end);
        self.note_stream(stream, mode.writes() && covers_all);
        let i = self.first_after(range.start);
        // The common case: a segment that is exactly the range.
        if self.ranges.get(i) == Some(range) {
            return self.hazards[i].record(mode, stream, scope, token, done);
        }
        // No segment straddles the range's ends when it covers them all.
        if !covers_all {
            self.split_at(range.start);
            self.split_at(range.end);
        }
        if mode.writes() {
            let mut h = Hazards::default();
            h.record(mode, stream, scope, token, done);
            if covers_all {
                // A whole buffer written after parts of it (a solver's ghost rows).
                self.ranges.clear();
                self.hazards.clear();
                self.ranges.push(range.clone());
                self.hazards.push(h);
            } else {
                let i = self.first_after(range.start);
                let j = self.ranges.partition_point(|r| r.start < range.end);
                self.ranges.splice(i..j, [range.clone()]);
                self.hazards.splice(i..j, [h]);
            }
            return;
        }
        let i = self.first_after(range.start);
        // Bytes never accessed get their own (empty) segments first.
        let mut at = range.start;
        let mut k = i;
        while at < range.end {
            match self.ranges.get(k) {
                Some(r) if r.start == at => at = r.end,
                next => {
                    let end = next.map_or(range.end, |r| r.start.min(range.end));
                    self.ranges.insert(k, at..end);
                    self.hazards.insert(k, Hazards::default());
                    at = end;
                }
            }
            k += 1;
        }
        for h in &mut self.hazards[i..k] {
            h.record(mode, stream, scope, token, done);
        }
    }
}

impl<X: Clone> RangeHazards<Tok<X>> {
    /// The dependencies of an access of `range` at `at` by host thread `thread`
    /// (`aliased`: through a sub-buffer or image): on the accesses of the same bytes; on
    /// a device, also on the same thread's accesses of any bytes of the instance where
    /// either goes through an aliasing object (see the text of `Tok`).
    #[allow(clippy::too_many_arguments)]
    fn deps_at(
        &self,
        at: Location,
        thread: u32,
        aliased: bool,
        range: &Range<u64>,
        mode: Mode,
        stream: StreamId,
        out: &mut Vec<Tok<X>>,
    ) {
        if self.only_on(stream) {
            return;
        }
        if at == Location::Host {
            return self.deps_for(range, mode, stream, out);
        }
        for (r, h) in self.ranges.iter().zip(&self.hazards) {
            if r.start < range.end && range.start < r.end {
                h.deps_for(mode, stream, out);
            } else {
                h.deps_where(mode, stream, out, |t| t.1 == thread && (aliased || t.2));
            }
        }
    }
}

/// Which earlier accesses of an instance an access conflicts with (`RangeHazards::deps_at`).
/// In host memory, those of the same bytes: disjoint ranges are independent, which keeps
/// host threads that each use their own slice of one buffer apart (`tests/threads.rs`).
/// On a device, where either access goes through a vendor object aliasing the instance
/// (a sub-buffer, an image), also those of the same host thread to any bytes: steps go
/// through the buffer's vendor instance and commands through its vendor sub-buffers, and
/// OpenCL leaves concurrent access to a buffer and its sub-buffers undefined (§5.2.1;
/// NVIDIA loses a kernel's writes to one slice while a step writes another). Two accesses
/// of disjoint bytes through the instance itself stay apart: a halo exchange reads a
/// block's boundary row while the neighbour's row lands in its ghost row, and ordering
/// the two made every step of a stencil wait for the neighbour's previous step too.
/// Across threads a device instance conflicts per byte range only: ordering whole
/// instances there would order two threads' steps differently on each rank, and a send
/// could wait for a receive that waits, on the other rank, for that send.
/// A recorded access: the scheduler's own number for it, so that a list of dependencies
/// names it once however many segments hold it, the host thread that made it, whether
/// it went through an aliasing object, and the runtime's token.
type Tok<T> = (u64, u32, bool, T);

/// The tokens of `deps`, each once, in order of first appearance; leaves `deps` empty
/// (a scratch vector, reused).
fn unique<T>(deps: &mut Vec<Tok<T>>) -> Vec<T> {
    unique_split(deps, 0).0
}

/// [`unique`], and how many of the tokens kept first appear among `deps[..split]`
/// (they come first).
fn unique_split<T>(deps: &mut Vec<Tok<T>>, split: usize) -> (Vec<T>, usize) {
    if deps.is_empty() {
        return (Vec::new(), 0);
    }
    let mut before = 0;
    if deps.len() > 16 {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut i = 0;
        deps.retain(|(n, _, _, _)| {
            let first = seen.insert(*n);
            before += usize::from(first && i < split);
            i += 1;
            first
        });
    } else {
        // Mostly a few: a linear search beats hashing them.
        let mut kept = 0;
        for i in 0..deps.len() {
            if !deps[..kept].iter().any(|(n, _, _, _)| *n == deps[i].0) {
                deps.swap(kept, i);
                kept += 1;
                before += usize::from(i < split);
            }
        }
        deps.truncate(kept);
    }
    (deps.drain(..).map(|(_, _, _, t)| t).collect(), before)
}

/// Adds to `deps` what an access at `loc` conflicts with among the accesses recorded
/// at that instance of its buffer (`whole`: it conflicts with the same thread's
/// accesses of any bytes there, see `Tok`).
fn instance_deps<T: Clone>(
    state: &BufferState<T>,
    loc: Location,
    thread: u32,
    whole: bool,
    access: &Access,
    stream: StreamId,
    deps: &mut Vec<Tok<T>>,
) {
    if let Some(h) = state.hazards.get(&loc) {
        h.deps_at(loc, thread, whole, &access.range, access.mode, stream, deps);
    }
}

/// The hazards of a buffer's instances, by location, sorted: a buffer has a few (its
/// devices and the host copy), looked up on every access, where hashing cost more than
/// the search.
#[derive(Clone, Debug)]
struct Instances<T>(SmallVec<[(Location, RangeHazards<T>); 2]>);

impl<T> Default for Instances<T> {
    fn default() -> Self {
        Instances(SmallVec::new())
    }
}

impl<T> Instances<T> {
    fn get(&self, loc: &Location) -> Option<&RangeHazards<T>> {
        // A search through the few is cheaper than a binary one.
        self.0.iter().find(|(l, _)| l == loc).map(|(_, h)| h)
    }

    /// The instance's hazards, none yet for a location not accessed before.
    fn entry(&mut self, loc: Location) -> &mut RangeHazards<T> {
        let i = match self.0.iter().position(|(l, _)| *l == loc) {
            Some(i) => i,
            None => {
                let i = self.0.partition_point(|(l, _)| *l < loc);
                self.0.insert(i, (loc, RangeHazards::default()));
                i
            }
        };
        &mut self.0[i].1
    }
}

#[derive(Clone, Debug)]
struct BufferState<T> {
    validity: ValidityMap,
    hazards: Instances<Tok<T>>,
    /// `clAttachBufferToDevice`: this device always holds the newest bytes; the valid
    /// set is no longer tracked.
    attached: Option<u32>,
}

/// Counters of what the scheduler decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    pub commands: u64,
    pub steps: u64,
    pub step_bytes: u64,
}

/// The thesis' three variants (Section IV.7.3): `Decentralization` alone, with
/// `clAttachBufferToDevice` honoured (`Attach`), and with the queueing optimisation on
/// top (`Full`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    Decentralization,
    Attach,
    #[default]
    Full,
}

/// A command as the queueing decision ([`left_out`]) sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The device of the command's queue.
    pub device: DeviceDesc,
    /// Runs on the host copy (maps, unmaps, markers), on every rank.
    pub at_host: bool,
    /// Fills host memory (a read): every rank receives its bytes.
    pub fills_host: bool,
}

/// The queueing optimisation (thesis IV.6, Table IV.2, and further): `rank` of `ranks`
/// need not enqueue a command when it runs on another rank's device, is not a read
/// (whose bytes every rank must receive), and every buffer it touches is attached to a
/// device of another rank that is not in another vendor group of the command's rank;
/// `attached` gives, per buffer the command touches, the device it is attached to
/// (`None`: not attached, or to a device the context does not know). Then no step of
/// the command involves this rank (an attached buffer's steps go directly between its
/// device and the command's, both elsewhere), and it changes nothing this rank tracks
/// (attached buffers have no valid set; the hazards of other ranks' device instances
/// only order work this rank never runs). Commands that touch no buffer (kernels with
/// only values) qualify too. Every rank the command involves still schedules it, in the
/// same order, so the ranks of each pair agree on their tags. Only in the `Full`
/// variant, and never in a cluster of one.
///
/// The one place this is decided: the runtime (`enqueue/submit.rs`) and the simulator
/// (`mirrorcl-sim`) both call it.
pub fn left_out(
    variant: Variant,
    rank: u32,
    ranks: u32,
    cmd: &Placement,
    attached: impl IntoIterator<Item = Option<DeviceDesc>>,
) -> bool {
    if cmd.device.owner == rank || cmd.at_host || cmd.fills_host {
        return false;
    }
    if variant != Variant::Full || ranks == 1 {
        return false;
    }
    attached.into_iter().all(|a| {
        a.is_some_and(|a| {
            // Between two groups of one rank the bytes stage through the host copy,
            // which is a broadcast every rank takes part in.
            a.owner != rank && (a.owner != cmd.device.owner || a.group == cmd.device.group)
        })
    })
}

/// The scheduler of one context. `T` is the runtime's completion token (an event).
#[derive(Debug)]
pub struct Scheduler<T> {
    /// Indexed by device index (dense, from 0): looked up for every access.
    devices: Vec<Option<DeviceDesc>>,
    buffers: HashMap<BufferId, BufferState<T>>,
    next_buffer: BufferId,
    /// The number of the next recorded access (`Tok`).
    next_access: u64,
    /// Where `schedule` gathers a command's dependencies (kept for its allocation).
    scratch: Vec<Tok<T>>,
    /// The host thread whose command is scheduled next (`set_thread`).
    thread: u32,
    /// Of the last scheduled command: the accesses read in place on another device
    /// (`read_elsewhere`).
    elsewhere: Vec<(usize, u32)>,
    /// Whether a token's work is done (`with_done`): done readers are forgotten.
    done: fn(&T) -> bool,
    pub stats: SchedulerStats,
}

impl<T: Clone> Default for Scheduler<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Scheduler<T> {
    pub fn new() -> Self {
        Scheduler {
            devices: Vec::new(),
            buffers: HashMap::default(),
            next_buffer: 1,
            next_access: 0,
            scratch: Vec::new(),
            thread: 0,
            elsewhere: Vec::new(),
            done: |_| false,
            stats: SchedulerStats::default(),
        }
    }

    /// A scheduler that forgets the readers of an instance whose tokens `done` finds
    /// done, once many have gathered ([`PRUNE_READS_AT`]).
    pub fn with_done(done: fn(&T) -> bool) -> Self {
        Scheduler {
            done,
            ..Self::new()
        }
    }

    /// The host thread whose commands come next (the runtime's slot; 0 by default).
    pub fn set_thread(&mut self, thread: u32) {
        self.thread = thread;
    }

    pub fn add_device(&mut self, index: u32, desc: DeviceDesc) {
        let i = index as usize;
        if self.devices.len() <= i {
            self.devices.resize(i + 1, None);
        }
        self.devices[i] = Some(desc);
    }

    /// Registers a buffer of `size` bytes whose newest bytes are at `initial` (the host
    /// copy for host data), or nowhere when its contents are undefined.
    pub fn create_buffer(&mut self, size: u64, initial: Option<Location>) -> BufferId {
        let id = self.next_buffer;
        self.next_buffer += 1;
        self.create_buffer_as(id, size, initial);
        id
    }

    /// [`Scheduler::create_buffer`] under an id the caller chose (unused in this
    /// scheduler): the runtime names buffers per host thread, so that every rank gives
    /// a buffer the same id however its threads interleave.
    pub fn create_buffer_as(&mut self, id: BufferId, size: u64, initial: Option<Location>) {
        let set = initial.map(ValidSet::only).unwrap_or_default();
        self.buffers.insert(
            id,
            BufferState {
                validity: ValidityMap::new(size, set),
                hazards: Instances::default(),
                attached: None,
            },
        );
    }

    /// Attaches `buffer` to `device` (`clAttachBufferToDevice`): from now on the device
    /// always holds its newest bytes. The runtime first makes the device's copy current
    /// (a command at the device reading the whole buffer). Afterwards a command elsewhere
    /// that reads the buffer gets the bytes from the device, every time, and one that
    /// writes it sends the written bytes back to the device right after it; the valid
    /// set is not tracked, so the plan for an attached buffer depends only on where the
    /// command runs.
    pub fn attach(&mut self, buffer: BufferId, device: u32) {
        if let Some(state) = self.buffers.get_mut(&buffer) {
            state.attached = Some(device);
        }
    }

    /// The device `buffer` is attached to, if any.
    pub fn attached(&self, buffer: BufferId) -> Option<u32> {
        self.buffers.get(&buffer).and_then(|b| b.attached)
    }

    /// [`left_out`] for a command touching `buffers`, with their attachments as this
    /// scheduler knows them.
    pub fn leaves_out(
        &self,
        variant: Variant,
        rank: u32,
        ranks: u32,
        cmd: &Placement,
        buffers: impl IntoIterator<Item = BufferId>,
    ) -> bool {
        left_out(
            variant,
            rank,
            ranks,
            cmd,
            buffers
                .into_iter()
                .map(|b| self.attached(b).and_then(|a| self.device(a))),
        )
    }

    /// The description of device `index`, if it was added.
    pub fn device(&self, index: u32) -> Option<DeviceDesc> {
        self.devices.get(index as usize).copied().flatten()
    }

    pub fn release_buffer(&mut self, id: BufferId) {
        self.buffers.remove(&id);
    }

    /// The valid sets of `range` of `buffer`, for queries and tests.
    pub fn validity(&self, buffer: BufferId, range: Range<u64>) -> Vec<(Range<u64>, ValidSet)> {
        self.buffers
            .get(&buffer)
            .map(|b| b.validity.segments_in(range).to_vec())
            .unwrap_or_default()
    }

    /// Whether an access at `at` conflicts with the same thread's accesses of any bytes
    /// of the instance whatever it goes through (`DeviceDesc::ranges_apart`).
    fn whole_instance(&self, at: Location) -> bool {
        match at {
            Location::Host => false,
            Location::Device(d) => !self.desc(d).ranges_apart,
        }
    }

    /// Whether devices `a` and `b` share a vendor context (owner and group): they copy
    /// between each other directly.
    fn same_context(&self, a: u32, b: u32) -> bool {
        let (a, b) = (self.desc(a), self.desc(b));
        (a.owner, a.group) == (b.owner, b.group)
    }

    fn desc(&self, d: u32) -> DeviceDesc {
        self.device(d).unwrap_or(DeviceDesc {
            owner: u32::MAX,
            group: u32::MAX,
            ranges_apart: false,
        })
    }

    /// The transfer route that brings a segment valid at `set` to `to`: one or two hops.
    fn route(&self, set: &ValidSet, to: Location) -> Hops {
        let devices = || {
            set.locations().iter().filter_map(|l| match l {
                Location::Device(d) => Some(*d),
                Location::Host => None,
            })
        };
        match to {
            Location::Host => devices()
                .next()
                .map(|d| smallvec![(Location::Device(d), Location::Host)])
                .unwrap_or_default(),
            Location::Device(t) => {
                let target = self.desc(t);
                // A device of the target's vendor context copies to it directly.
                if let Some(d) = devices().find(|&d| self.same_context(d, t)) {
                    return smallvec![(Location::Device(d), to)];
                }
                if set.contains(Location::Host) {
                    return smallvec![(Location::Host, to)];
                }
                if let Some(d) = devices().find(|d| self.desc(*d).owner == target.owner) {
                    return smallvec![(Location::Device(d), Location::Host), (Location::Host, to)];
                }
                devices()
                    .next()
                    .map(|d| smallvec![(Location::Device(d), to)])
                    .unwrap_or_default()
            }
        }
    }

    /// Plans one command executing at `at` on `stream`, touching `accesses`.
    ///
    /// For each transfer step needed first, `submit_step` is called with the step and the
    /// tokens it must wait for; it submits the step and returns the step's stream and
    /// token. Returns the tokens the command itself must wait for, each once. Unknown
    /// buffers are ignored (the runtime validates handles before scheduling).
    ///
    /// What the runtime must guarantee (docs/scheduler.md): a stream, `stream` or one a
    /// step was put on, is in order on every rank, so a token completes only after every
    /// earlier item of its stream that this rank runs, even on a virtual device's stream
    /// (host commands and receives queued there). The tokens of work this rank does not
    /// run (another rank's device, a transfer between other ranks) may complete at once.
    pub fn schedule(
        &mut self,
        at: Location,
        stream: StreamId,
        accesses: &[Access],
        token: &T,
        mut submit_step: impl FnMut(&Step, Vec<T>) -> (StreamId, T),
    ) -> Vec<T> {
        self.stats.commands += 1;
        self.elsewhere.clear();
        let mut deps = std::mem::take(&mut self.scratch);
        let whole_at = self.whole_instance(at);
        let whole = |s: &Self, loc| {
            if loc == at {
                whole_at
            } else {
                s.whole_instance(loc)
            }
        };
        for (i, access) in accesses.iter().enumerate() {
            if access.range.is_empty() {
                continue;
            }
            // Unknown buffers are ignored (see above).
            let Some(state) = self.buffers.get(&access.buffer) else {
                continue;
            };
            // Whether anything must come first: mostly not (a solver's kernels read
            // what their device holds), and then one look-up of the buffer serves all.
            let attached = state.attached;
            let brings = access.mode.reads()
                && match attached {
                    Some(a) => Location::Device(a) != at,
                    None => !state.validity.nothing_to_bring(&access.range, at),
                };
            if !brings {
                let whole = access.aliased || whole_at;
                instance_deps(state, at, self.thread, whole, access, stream, &mut deps);
                continue;
            }
            let pass_through = access.passes_through();
            let mut loc = at;
            match (self.in_place_source(access, at), attached) {
                (Some(d), _) => {
                    self.elsewhere.push((i, d));
                    loc = Location::Device(d);
                }
                (None, Some(a)) => self.move_range(
                    access.buffer,
                    access.range.clone(),
                    Location::Device(a),
                    at,
                    pass_through,
                    &mut submit_step,
                ),
                (None, None) => self.bring_valid(
                    access.buffer,
                    access.range.clone(),
                    at,
                    pass_through,
                    &mut submit_step,
                ),
            }
            if let Some(state) = self.buffers.get(&access.buffer) {
                let whole = access.aliased || whole(self, loc);
                instance_deps(state, loc, self.thread, whole, access, stream, &mut deps);
            }
        }
        // The command's token as an access records it (`Tok`): made as first needed,
        // mostly one of the two (a token's clone is an atomic operation).
        let (next_access, thread) = (self.next_access, self.thread);
        let (mut own, mut own_aliased) = (None, None);
        self.next_access += 1;
        let done = self.done;
        let done = |t: &Tok<T>| done(&t.3);
        // Written bytes of attached buffers go back to their device after the command.
        let mut write_backs: Vec<(BufferId, Range<u64>, u32)> = Vec::new();
        for (i, access) in accesses.iter().enumerate() {
            if access.range.is_empty() {
                continue;
            }
            let loc = self.read_location(i, at);
            let whole = whole(self, loc);
            let Some(state) = self.buffers.get_mut(&access.buffer) else {
                continue;
            };
            if access.mode.writes() {
                match state.attached {
                    None => state.validity.set_only(access.range.clone(), at),
                    Some(a) if Location::Device(a) != at => {
                        write_backs.push((access.buffer, access.range.clone(), a));
                    }
                    Some(_) => {}
                }
            }
            state.hazards.entry(loc).record(
                &access.range,
                access.mode,
                stream,
                None,
                if access.aliased || whole {
                    own_aliased.get_or_insert_with(|| (next_access, thread, true, token.clone()))
                } else {
                    own.get_or_insert_with(|| (next_access, thread, false, token.clone()))
                },
                &done,
            );
        }
        for (buffer, range, a) in write_backs {
            self.move_range(
                buffer,
                range,
                at,
                Location::Device(a),
                false,
                &mut submit_step,
            );
        }
        let deps_once = unique(&mut deps);
        self.scratch = deps;
        deps_once
    }

    /// The accesses of the last [`Scheduler::schedule`] that read another device's
    /// instance in place ([`Access::pass_through`]), each with that device: the runtime
    /// runs the command on that instance for them.
    pub fn read_elsewhere(&self) -> &[(usize, u32)] {
        &self.elsewhere
    }

    /// Where access `i` of the command being scheduled at `at` reads or writes.
    fn read_location(&self, i: usize, at: Location) -> Location {
        (self.elsewhere.iter())
            .find(|(a, _)| *a == i)
            .map_or(at, |(_, d)| Location::Device(*d))
    }

    /// For a pass-through read at a device that lacks some of its bytes: another device
    /// of that device's vendor context holding all of them, the first in the valid set
    /// (for an attached buffer, its device).
    fn in_place_source(&self, access: &Access, at: Location) -> Option<u32> {
        if !access.passes_through() {
            return None;
        }
        let Location::Device(t) = at else {
            return None;
        };
        let state = self.buffers.get(&access.buffer)?;
        let alike = |d: u32| d != t && self.same_context(d, t);
        if let Some(a) = state.attached {
            // Its device always holds the newest bytes.
            return alike(a).then_some(a);
        }
        let segments = state.validity.segments_in(access.range.clone());
        let defined: Vec<&ValidSet> = (segments.iter().map(|(_, set)| set))
            .filter(|set| !set.is_empty())
            .collect();
        if defined.iter().all(|set| set.contains(at)) {
            return None;
        }
        defined.first()?.locations().iter().find_map(|&l| match l {
            Location::Device(d) if alike(d) && defined.iter().all(|set| set.contains(l)) => Some(d),
            _ => None,
        })
    }

    /// Records that the host copy of `range` was written directly by the host thread
    /// (an unmap after a write map, say): the host alone holds the newest bytes.
    pub fn host_wrote(&mut self, buffer: BufferId, range: Range<u64>) {
        if let Some(state) = self.buffers.get_mut(&buffer) {
            state.validity.set_only(range, Location::Host);
        }
    }

    /// Plans the steps that make `range` valid at `to`. `pass_through`: the bytes serve
    /// one command; when one step from another rank's device brings them all, it is
    /// marked so (`mark_pass_through`) and `to` does not become valid.
    fn bring_valid(
        &mut self,
        buffer: BufferId,
        range: Range<u64>,
        to: Location,
        pass_through: bool,
        submit_step: &mut impl FnMut(&Step, Vec<T>) -> (StreamId, T),
    ) {
        let Some(state) = self.buffers.get(&buffer) else {
            return;
        };
        if state.validity.nothing_to_bring(&range, to) {
            return;
        }
        let mut steps = Steps::new();
        for (seg, set) in state.validity.segments_in(range.clone()) {
            if set.serves(to) {
                continue;
            }
            for (from, hop_to) in self.route(&set, to) {
                match steps.last_mut() {
                    Some(last)
                        if last.from == from
                            && last.to == hop_to
                            && last.range.end == seg.start =>
                    {
                        last.range.end = seg.end;
                    }
                    _ => steps.push(Step {
                        buffer,
                        range: seg.clone(),
                        from,
                        to: hop_to,
                        pass_through: false,
                        source_deps: 0,
                    }),
                }
            }
        }
        if pass_through {
            self.mark_pass_through(&mut steps, &range);
        }
        // Two-hop routes pushed (s→Host, Host→to) per segment; merging above keeps order
        // per segment, and any s→Host hop precedes its Host→to hop.
        self.submit_steps(buffer, steps, submit_step);
    }

    /// Marks the plan for a pass-through read of `range` pass-through when it is one
    /// step bringing all of it from another rank's device.
    fn mark_pass_through(&self, steps: &mut [Step], range: &Range<u64>) {
        if let [only] = steps {
            let owner = |l: Location| match l {
                Location::Device(d) => Some(self.desc(d).owner),
                Location::Host => None,
            };
            let (from, to) = (owner(only.from), owner(only.to));
            only.pass_through =
                only.range == *range && from.is_some() && to.is_some() && from != to;
        }
    }

    /// Moves `range` of an attached buffer from `from` to `to` by the route the source
    /// rule gives for bytes valid at `from` alone. `pass_through`: as for `bring_valid`
    /// (an attached buffer's bytes elsewhere are never reused anyway).
    fn move_range(
        &mut self,
        buffer: BufferId,
        range: Range<u64>,
        from: Location,
        to: Location,
        pass_through: bool,
        submit_step: &mut impl FnMut(&Step, Vec<T>) -> (StreamId, T),
    ) {
        let mut steps: Steps = self
            .route(&ValidSet::only(from), to)
            .into_iter()
            .map(|(from, to)| Step {
                buffer,
                range: range.clone(),
                from,
                to,
                pass_through: false,
                source_deps: 0,
            })
            .collect();
        if pass_through {
            self.mark_pass_through(&mut steps, &range);
        }
        self.submit_steps(buffer, steps, submit_step);
    }

    /// Submits `steps` in order, each after the accesses it conflicts with, and records
    /// them as readers of their source and writers of their destination.
    fn submit_steps(
        &mut self,
        buffer: BufferId,
        steps: Steps,
        submit_step: &mut impl FnMut(&Step, Vec<T>) -> (StreamId, T),
    ) {
        let thread = self.thread;
        let done = self.done;
        let done = |t: &Tok<T>| done(&t.3);
        let mut deps = Vec::new();
        for mut step in steps {
            let scope: Scope = match (step.from, step.to) {
                (Location::Host, Location::Device(d)) => Some(self.desc(d).owner),
                _ => None,
            };
            // Steps go through the instance itself: whole where the device wants it.
            let (from_whole, to_whole) =
                (self.whole_instance(step.from), self.whole_instance(step.to));
            let state = self.buffers.get_mut(&buffer).expect("checked above");
            // Borrowed, not cloned: a source's readers grow with the ranks that read it.
            let range = &step.range;
            if let Some(src) = state.hazards.get(&step.from) {
                src.deps_at(
                    step.from,
                    thread,
                    from_whole,
                    range,
                    Mode::Read,
                    u64::MAX,
                    &mut deps,
                );
            }
            let from_source = deps.len();
            if let Some(dst) = state.hazards.get(&step.to) {
                dst.deps_at(
                    step.to,
                    thread,
                    to_whole,
                    range,
                    Mode::Write,
                    u64::MAX,
                    &mut deps,
                );
            }
            let (step_deps, source_deps) = unique_split(&mut deps, from_source);
            step.source_deps = source_deps;
            let (stream, token) = submit_step(&step, step_deps);
            let n = self.next_access;
            self.next_access += 1;
            self.stats.steps += 1;
            self.stats.step_bytes += range.end - range.start;
            let src = state.hazards.entry(step.from);
            let as_read = (n, self.thread, from_whole, token.clone());
            src.record(range, Mode::Read, stream, scope, &as_read, &done);
            let dst = state.hazards.entry(step.to);
            let as_write = (n, self.thread, to_whole, token);
            dst.record(range, Mode::Write, stream, None, &as_write, &done);
            if state.attached.is_none() && !step.pass_through {
                state.validity.add(step.range.clone(), step.to);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched() -> Scheduler<u32> {
        let mut s = Scheduler::new();
        s.add_device(
            0,
            DeviceDesc {
                owner: 0,
                group: 0,
                ranges_apart: false,
            },
        );
        s.add_device(
            1,
            DeviceDesc {
                owner: 0,
                group: 0,
                ranges_apart: false,
            },
        );
        s.add_device(
            2,
            DeviceDesc {
                owner: 0,
                group: 1,
                ranges_apart: false,
            },
        );
        s
    }

    /// A writer waits for the newest reader of every stream and scope, however many
    /// there are: below `LINEAR_READS` found by a search, above it by the index.
    #[test]
    fn a_writer_waits_for_the_newest_reader_of_each_stream() {
        for streams in [3u64, LINEAR_READS as u64, 3 * LINEAR_READS as u64] {
            let mut h = Hazards::<u32>::default();
            h.record(Mode::Write, 1_000, None, &1, &|_| false);
            for round in 0..3u32 {
                for s in 0..streams {
                    let token = 10_000 * round + s as u32;
                    h.record(Mode::Read, s, None, &token, &|_| false);
                    // The same stream on one rank alone is another reader.
                    h.record(Mode::Read, s, Some(7), &(token + 5_000), &|_| false);
                }
            }
            let mut deps = Vec::new();
            h.deps_for(Mode::Write, 2_000, &mut deps);
            deps.sort_unstable();
            let mut want: Vec<u32> = (0..streams as u32)
                .flat_map(|s| [20_000 + s, 25_000 + s])
                .chain([1])
                .collect();
            want.sort_unstable();
            assert_eq!(deps, want, "{streams} streams");
            // A write forgets them all.
            h.record(Mode::Write, 3_000, None, &2, &|_| false);
            let mut deps = Vec::new();
            h.deps_for(Mode::Write, 4_000, &mut deps);
            assert_eq!(deps, vec![2]);
        }
    }

    /// Readers of an instance nothing here writes again (another rank's kernel left out
    /// here, or bytes only ever read) are forgotten once done, so they do not gather one
    /// per transfer for as long as the program runs; those not done are kept.
    #[test]
    fn done_readers_of_an_instance_never_written_are_forgotten() {
        // Odd tokens stand for work not done yet.
        let done = |t: &u32| t.is_multiple_of(2);
        let mut h = Hazards::<u32>::default();
        for s in 0..10_000u32 {
            // Every step on a fresh stream, as transfer steps are.
            h.record(Mode::Read, s as u64, None, &s, &done);
            // At most twice the readers not done (amortized pruning).
            assert!(h.reads.len() <= PRUNE_READS_AT.max(2 * (s as usize / 2 + 1)) + 1);
        }
        let pending = h.reads.iter().filter(|(_, _, t)| !done(t)).count();
        assert_eq!(pending, 5_000, "every reader not done is kept");
        assert!(h.reads.len() <= 2 * pending + 1);
        let mut deps = Vec::new();
        h.deps_for(Mode::Write, u64::MAX, &mut deps);
        assert!((1..10_000).step_by(2).all(|t| deps.contains(&t)));
        // Re-reading through the index still finds the reader of a stream.
        h.record(Mode::Read, 9_999, None, &20_001, &done);
        assert_eq!(h.reads.iter().filter(|(s, _, _)| *s == 9_999).count(), 1);

        // All done: the readers stay few.
        let mut h = Hazards::<u32>::default();
        for s in 0..10_000u32 {
            h.record(Mode::Read, s as u64, None, &(2 * s), &done);
        }
        assert!(h.reads.len() <= PRUNE_READS_AT + 1, "{}", h.reads.len());
    }

    #[test]
    fn host_data_moves_to_first_user_then_between_devices() {
        let mut s = sched();
        let b = s.create_buffer(64, Some(Location::Host));
        let mut steps = Vec::new();
        let mut next = 100;
        let rw = [Access {
            buffer: b,
            range: 0..64,
            mode: Mode::ReadWrite,
            aliased: false,
            pass_through: false,
        }];
        let mut submit = |st: &Step, _deps: Vec<u32>| {
            steps.push(st.clone());
            next += 1;
            (999, next)
        };
        s.schedule(Location::Device(0), 1, &rw, &1, &mut submit);
        s.schedule(Location::Device(1), 2, &rw, &2, &mut submit);
        s.schedule(Location::Device(2), 3, &rw, &3, &mut submit);
        let hops: Vec<_> = steps.iter().map(|s| (s.from, s.to)).collect();
        assert_eq!(
            hops,
            vec![
                (Location::Host, Location::Device(0)),
                (Location::Device(0), Location::Device(1)),
                (Location::Device(1), Location::Host),
                (Location::Host, Location::Device(2)),
            ]
        );
        assert_eq!(
            s.validity(b, 0..64),
            vec![(0..64, ValidSet::only(Location::Device(2)))]
        );
    }

    #[test]
    fn attached_buffers_move_from_and_back_to_their_device_every_time() {
        let mut s = sched();
        let b = s.create_buffer(32, Some(Location::Host));
        let mut steps = Vec::new();
        let mut submit = |st: &Step, _deps: Vec<u32>| {
            steps.push((st.from, st.to, st.range.clone()));
            (999, 500)
        };
        let at = |d| Location::Device(d);
        let whole = |mode| {
            [Access {
                buffer: b,
                range: 0..32,
                mode,
                aliased: false,
                pass_through: false,
            }]
        };
        // Made current on device 0, then attached.
        s.schedule(at(0), 1, &whole(Mode::Read), &1, &mut submit);
        s.attach(b, 0);
        assert_eq!(s.attached(b), Some(0));
        // On its device: nothing moves.
        s.schedule(at(0), 1, &whole(Mode::ReadWrite), &2, &mut submit);
        // Read elsewhere, twice: the bytes come from device 0 both times.
        s.schedule(at(1), 2, &whole(Mode::Read), &3, &mut submit);
        s.schedule(at(1), 2, &whole(Mode::Read), &4, &mut submit);
        // Written elsewhere (part of it): that part goes back to device 0 afterwards.
        let part = [Access {
            buffer: b,
            range: 8..16,
            mode: Mode::Write,
            aliased: false,
            pass_through: false,
        }];
        s.schedule(at(2), 3, &part, &5, &mut submit);
        assert_eq!(
            steps,
            vec![
                (Location::Host, at(0), 0..32),
                (at(0), at(1), 0..32),
                (at(0), at(1), 0..32),
                (at(2), Location::Host, 8..16),
                (Location::Host, at(0), 8..16),
            ]
        );
    }

    #[test]
    fn an_instance_used_by_one_stream_asks_no_walk_until_another_comes() {
        let mut h = RangeHazards::<(u64, u32, bool, u32)>::default();
        let tok = |n: u32| (n as u64, 0, false, n);
        let done = |_: &(u64, u32, bool, u32)| false;
        let deps = |h: &RangeHazards<_>, range: Range<u64>, mode, stream| {
            let mut out = Vec::new();
            h.deps_at(
                Location::Device(0),
                0,
                false,
                &range,
                mode,
                stream,
                &mut out,
            );
            out.into_iter()
                .map(|t: (u64, u32, bool, u32)| t.3)
                .collect::<Vec<_>>()
        };
        assert!(h.only_on(1));
        h.record(&(0..64), Mode::Write, 1, None, &tok(1), &done);
        h.record(&(0..16), Mode::Read, 1, None, &tok(2), &done);
        assert!(h.only_on(1) && !h.only_on(2));
        assert_eq!(deps(&h, 0..64, Mode::Write, 1), Vec::<u32>::new());
        // A read of part of it by another stream: a writer on the first waits for it.
        h.record(&(48..64), Mode::Read, 2, None, &tok(3), &done);
        assert!(!h.only_on(1));
        assert_eq!(deps(&h, 0..64, Mode::Write, 1), vec![3]);
        // A write of part of it keeps the other stream's reader elsewhere.
        h.record(&(0..16), Mode::Write, 1, None, &tok(4), &done);
        assert!(!h.only_on(1));
        assert_eq!(deps(&h, 16..64, Mode::Write, 1), vec![3]);
        // A write of all of it leaves its own stream alone again.
        h.record(&(0..64), Mode::ReadWrite, 1, None, &tok(5), &done);
        assert!(h.only_on(1));
        assert_eq!(deps(&h, 0..64, Mode::Read, 1), Vec::<u32>::new());
        assert_eq!(deps(&h, 0..64, Mode::Read, 2), vec![5]);
    }

    fn no_steps_expected(_: &Step, _: Vec<u32>) -> (u64, u32) {
        panic!("no transfer expected")
    }

    fn access_to(buffer: BufferId) -> impl Fn(Range<u64>, Mode) -> [Access; 1] {
        move |range, mode| {
            [Access {
                buffer,
                range,
                mode,
                aliased: false,
                pass_through: false,
            }]
        }
    }

    #[test]
    fn accesses_to_disjoint_ranges_do_not_wait_for_each_other() {
        let mut s = sched();
        let b = s.create_buffer(16, None);
        let (acc, no_steps) = (access_to(b), no_steps_expected);
        // In host memory (a device instance conflicts whole: the test below).
        let d = Location::Host;
        // Two writers of halves (two threads' sub-buffers), on their own streams.
        assert!(s
            .schedule(d, 1, &acc(0..8, Mode::Write), &10, no_steps)
            .is_empty());
        assert!(s
            .schedule(d, 2, &acc(8..16, Mode::Write), &11, no_steps)
            .is_empty());
        // A reader of a half waits for its writer only; one across both, for both.
        assert_eq!(
            s.schedule(d, 3, &acc(8..12, Mode::Read), &12, no_steps),
            vec![11]
        );
        assert_eq!(
            s.schedule(d, 3, &acc(4..12, Mode::Read), &13, no_steps),
            vec![10, 11]
        );
        // A writer of the whole waits for the readers since, each once, and the writers.
        let mut deps = s.schedule(d, 4, &acc(0..16, Mode::Write), &14, no_steps);
        deps.sort();
        assert_eq!(deps, vec![10, 11, 13]);
        // Afterwards one segment again: a reader of any part waits for that writer.
        assert_eq!(
            s.schedule(d, 5, &acc(2..3, Mode::Read), &15, no_steps),
            vec![14]
        );
    }

    /// On a device, commands reach a buffer's bytes through its vendor instance and its
    /// vendor sub-buffers, which OpenCL does not let run concurrently: where either
    /// access goes through a sub-buffer, disjoint ranges conflict there, within one host
    /// thread; through the instance alone they do not, on a device that keeps them apart
    /// (`ranges_apart`, NVIDIA). Elsewhere (PoCL) they conflict too.
    #[test]
    fn accesses_to_one_device_instance_conflict_whatever_their_ranges_through_aliases() {
        let mut s = Scheduler::new();
        let apart = |ranges_apart| DeviceDesc {
            owner: 0,
            group: 0,
            ranges_apart,
        };
        s.add_device(0, apart(true));
        s.add_device(1, apart(false));
        let b = s.create_buffer(16, None);
        let no_steps = no_steps_expected;
        let acc = |range, mode, aliased| {
            [Access {
                buffer: b,
                range,
                mode,
                aliased,
                pass_through: false,
            }]
        };
        let d = Location::Device(0);
        // Through the instance itself, disjoint bytes stay apart (a boundary row read
        // while a ghost row is written).
        assert!(s
            .schedule(d, 1, &acc(0..8, Mode::Write, false), &10, no_steps)
            .is_empty());
        assert!(s
            .schedule(d, 2, &acc(8..16, Mode::Write, false), &11, no_steps)
            .is_empty());
        assert_eq!(
            s.schedule(d, 3, &acc(0..4, Mode::Read, false), &12, no_steps),
            vec![10]
        );
        assert_eq!(
            s.schedule(d, 4, &acc(12..16, Mode::Read, false), &13, no_steps),
            vec![11]
        );
        // Through a sub-buffer: every earlier access of the same thread.
        assert_eq!(
            s.schedule(d, 5, &acc(4..6, Mode::Write, true), &14, no_steps),
            vec![10, 12, 11, 13]
        );
        // And every later one waits for it.
        assert_eq!(
            s.schedule(d, 6, &acc(8..10, Mode::Read, false), &15, no_steps),
            vec![14, 11]
        );
        // Another host thread's access waits only for those of the same bytes.
        s.set_thread(1);
        assert_eq!(
            s.schedule(d, 7, &acc(12..16, Mode::Write, true), &16, no_steps),
            vec![11, 13]
        );
        // On a device that does not keep them apart, disjoint bytes conflict.
        s.set_thread(0);
        let d1 = Location::Device(1);
        let acc = access_to(s.create_buffer(16, None));
        assert!(s
            .schedule(d1, 8, &acc(0..8, Mode::Write), &17, no_steps)
            .is_empty());
        assert_eq!(
            s.schedule(d1, 9, &acc(8..16, Mode::Read), &18, no_steps),
            vec![17]
        );
    }

    #[test]
    fn writer_waits_for_readers_on_other_streams() {
        let mut s = sched();
        let b = s.create_buffer(16, None);
        let acc = |mode| {
            [Access {
                buffer: b,
                range: 0..16,
                mode,
                aliased: false,
                pass_through: false,
            }]
        };
        let no_steps = |_: &Step, _: Vec<u32>| -> (u64, u32) { panic!("no transfer expected") };
        let d = Location::Device(0);
        assert!(s
            .schedule(d, 1, &acc(Mode::Write), &10, no_steps)
            .is_empty());
        assert_eq!(s.schedule(d, 2, &acc(Mode::Read), &11, no_steps), vec![10]);
        assert_eq!(s.schedule(d, 3, &acc(Mode::Read), &12, no_steps), vec![10]);
        let mut deps = s.schedule(d, 1, &acc(Mode::Write), &13, no_steps);
        deps.sort();
        assert_eq!(deps, vec![11, 12]);
    }
}
