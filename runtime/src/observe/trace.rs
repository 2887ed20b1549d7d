//! The instrument: `MIRRORCL_TRACE=DIR` writes one trace per rank, `DIR/rank-<r>.json`, in
//! the Chrome trace-event JSON format (Perfetto, `chrome://tracing`): API calls,
//! scheduling, each issuer's vendor commands, completions, sends and receives between
//! ranks, and the application's waits. `mirrorcl trace DIR` merges the ranks' files
//! ([`merge`]) into one, one process per rank, on a common clock.
//!
//! Off, every hook is one relaxed atomic load ([`begin`] returns 0, or [`on`] is false,
//! and the call site skips the rest). On, each thread
//! appends to its own buffer (a single writer, no lock per event: the buffer is
//! published to the writer at exit by an atomic length), bounded at [`CAP`] events per
//! thread (the file notes what was dropped); the files are written at exit (an `atexit`
//! handler that runs after MPI was finalised) and when a program that owns MPI
//! finalises it.
//!
//! Time is the host's `CLOCK_MONOTONIC` in nanoseconds. Every rank notes its clock right
//! after a barrier at start-up ([`sync_point`]); the merge keeps the clock of ranks on one
//! host as it is (one clock: exact) and aligns the hosts at that point (within the
//! barrier's exit skew, see `docs/benchmarks.md`).

use crate::observe::now_ns;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Unknown until the node starts (the first API calls are timed meanwhile, in case
/// tracing turns out to be on), then off or on for good.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Events kept per thread; later ones are counted and dropped.
pub const CAP: usize = 1 << 18;
/// Events per block of a thread's buffer (allocated as the thread needs them).
const BLOCK: usize = 4096;
const BLOCKS: usize = CAP / BLOCK;

/// Whether tracing is on.
#[inline]
pub fn on() -> bool {
    STATE.load(Ordering::Relaxed) == ON
}

/// The start of a span: now, or 0 when tracing is off.
#[inline]
pub fn begin() -> u64 {
    if on() {
        now_ns()
    } else {
        0
    }
}

/// An argument's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    U(u64),
    I(i64),
    S(&'static str),
}

impl From<u64> for Val {
    fn from(v: u64) -> Val {
        Val::U(v)
    }
}
impl From<usize> for Val {
    fn from(v: usize) -> Val {
        Val::U(v as u64)
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::U(v as u64)
    }
}
impl From<i32> for Val {
    fn from(v: i32) -> Val {
        Val::I(v as i64)
    }
}
impl From<&'static str> for Val {
    fn from(v: &'static str) -> Val {
        Val::S(v)
    }
}

/// Up to four named arguments, kept without allocating.
pub type Args = [Option<(&'static str, Val)>; 4];

/// `args![("peer", 1u32), ...]`.
#[macro_export]
macro_rules! trace_args {
    () => {
        [None, None, None, None]
    };
    ($a:expr) => {
        [Some(($a.0, $a.1.into())), None, None, None]
    };
    ($a:expr, $b:expr) => {
        [
            Some(($a.0, $a.1.into())),
            Some(($b.0, $b.1.into())),
            None,
            None,
        ]
    };
    ($a:expr, $b:expr, $c:expr) => {
        [
            Some(($a.0, $a.1.into())),
            Some(($b.0, $b.1.into())),
            Some(($c.0, $c.1.into())),
            None,
        ]
    };
    ($a:expr, $b:expr, $c:expr, $d:expr) => {
        [
            Some(($a.0, $a.1.into())),
            Some(($b.0, $b.1.into())),
            Some(($c.0, $c.1.into())),
            Some(($d.0, $d.1.into())),
        ]
    };
}

/// One trace event (`ph` as the format spells it: `X` span, `i` instant, `b`/`e` async
/// begin/end, `s`/`f` flow start/end).
#[derive(Clone, Copy, Debug)]
struct Record {
    ph: u8,
    cat: &'static str,
    name: &'static str,
    ts: u64,
    dur: u64,
    id: u64,
    args: Args,
}

/// One thread's events: written only by that thread, read by the writer at exit up to
/// the published length.
struct ThreadBuf {
    tid: u64,
    name: Option<String>,
    /// The thread made API calls (an application thread).
    api: AtomicBool,
    blocks: [AtomicPtr<Record>; BLOCKS],
    len: AtomicUsize,
    dropped: AtomicU64,
}

impl ThreadBuf {
    fn new(tid: u64, name: Option<String>) -> ThreadBuf {
        ThreadBuf {
            tid,
            name,
            api: AtomicBool::new(false),
            blocks: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            len: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Appends an event. Only the owning thread calls this.
    fn push(&self, r: Record) {
        let i = self.len.load(Ordering::Relaxed);
        if i >= CAP {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let slot = &self.blocks[i / BLOCK];
        let mut block = slot.load(Ordering::Relaxed);
        if block.is_null() {
            // Lives as long as the process (read at exit, possibly after this thread
            // ended).
            let mut v = std::mem::ManuallyDrop::new(Vec::<Record>::with_capacity(BLOCK));
            block = v.as_mut_ptr();
            slot.store(block, Ordering::Release);
        }
        // SAFETY: the block holds BLOCK records and `i % BLOCK` is in range; only this
        // thread writes, and readers read index `i` only after the release store of a
        // length above it.
        unsafe { block.add(i % BLOCK).write(r) };
        self.len.store(i + 1, Ordering::Release);
    }

    /// The events published so far.
    fn events(&self) -> Vec<Record> {
        let n = self.len.load(Ordering::Acquire);
        (0..n)
            .map(|i| {
                let block = self.blocks[i / BLOCK].load(Ordering::Acquire);
                // SAFETY: index `i` is below the published length, so its block exists
                // and the record was written before that length was stored (release).
                unsafe { block.add(i % BLOCK).read() }
            })
            .collect()
    }

    /// How the trace names this thread.
    fn label(&self) -> String {
        match self.name.as_deref() {
            Some("main") => "application (main)".into(),
            Some("mirrorcl-progress") => "MPI progress".into(),
            Some(n) if n.starts_with("mirrorcl-issuer-") => {
                format!(
                    "issuer, device {}",
                    n.trim_start_matches("mirrorcl-issuer-")
                )
            }
            Some(n) if self.api.load(Ordering::Relaxed) => format!("application ({n})"),
            Some(n) => n.to_string(),
            None if self.api.load(Ordering::Relaxed) => "application".into(),
            None => "vendor thread".into(),
        }
    }

    /// Order in the viewer: application, issuers, progress, others.
    fn sort_index(&self) -> u64 {
        let n = self.name.as_deref().unwrap_or("");
        if self.api.load(Ordering::Relaxed) {
            0
        } else if let Some(device) = n.strip_prefix("mirrorcl-issuer-") {
            10 + device.parse::<u64>().unwrap_or(0)
        } else if n == "mirrorcl-progress" {
            5
        } else {
            1000
        }
    }
}

static THREADS: Mutex<Vec<Arc<ThreadBuf>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: std::cell::OnceCell<Arc<ThreadBuf>> = const { std::cell::OnceCell::new() };
}

fn this_thread() -> Arc<ThreadBuf> {
    let tid = crate::observe::os_id() as u64;
    let name = std::thread::current().name().map(str::to_string);
    let buf = Arc::new(ThreadBuf::new(tid, name));
    THREADS.lock().push(buf.clone());
    buf
}

fn push(r: Record, api: bool) {
    // A thread being torn down has no buffer any more: its late events are lost.
    let _ = MINE.try_with(|cell| {
        let buf = cell.get_or_init(this_thread);
        if api && !buf.api.load(Ordering::Relaxed) {
            buf.api.store(true, Ordering::Relaxed);
        }
        buf.push(r)
    });
}

/// Where the files go and this rank's place.
struct Setup {
    dir: PathBuf,
    place: OnceLock<(u32, u32, String)>,
    /// The clock right after the start-up barrier (0: none, a rank alone).
    sync_ns: AtomicU64,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

/// Turns tracing on (`dir` not empty) or off for good; from the node's start-up, before
/// MPI starts.
pub fn init(dir: &str) {
    if dir.is_empty() {
        STATE.store(OFF, Ordering::Relaxed);
        return;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        crate::diag!("MirrorCL: MIRRORCL_TRACE={dir}: {e}; not tracing");
        STATE.store(OFF, Ordering::Relaxed);
        return;
    }
    let fresh = SETUP
        .set(Setup {
            dir: PathBuf::from(dir),
            place: OnceLock::new(),
            sync_ns: AtomicU64::new(0),
        })
        .is_ok();
    STATE.store(ON, Ordering::Relaxed);
    if fresh {
        // Registered before the node's own handler, so it runs after it: the progress
        // thread has stopped and MPI is finalised by then.
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(write_at_exit) };
    }
}

/// This rank's place, for the file's name and the merge.
pub fn place(rank: u32, size: u32, host: &str) {
    if let Some(s) = SETUP.get() {
        let _ = s.place.set((rank, size, host.to_string()));
    }
}

/// Notes the clock at a point every rank passes together (right after a barrier).
pub fn sync_point() {
    if let Some(s) = SETUP.get() {
        s.sync_ns.store(now_ns(), Ordering::Relaxed);
    }
}

/// An OpenCL API call, timed from its entry to its return (drop).
pub struct ApiSpan {
    name: &'static str,
    start: u64,
}

impl ApiSpan {
    /// Timed unless tracing is known to be off: off, one relaxed load and a store of
    /// the name; the rest is out of line.
    #[inline(always)]
    pub fn begin(name: &'static str) -> ApiSpan {
        let start = if STATE.load(Ordering::Relaxed) == OFF {
            0
        } else {
            api_start()
        };
        ApiSpan { name, start }
    }
}

#[cold]
#[inline(never)]
fn api_start() -> u64 {
    now_ns()
}

impl Drop for ApiSpan {
    #[inline(always)]
    fn drop(&mut self) {
        if self.start != 0 {
            api_end(self.name, self.start);
        }
    }
}

#[cold]
#[inline(never)]
fn api_end(name: &'static str, start: u64) {
    if on() {
        span_on("api", name, start, trace_args![], true);
    }
}

#[cold]
fn span_on(cat: &'static str, name: &'static str, start: u64, args: Args, api: bool) {
    let now = now_ns();
    push(
        Record {
            ph: b'X',
            cat,
            name,
            ts: start,
            dur: now.saturating_sub(start),
            id: 0,
            args,
        },
        api,
    );
}

/// A span from `start` (from [`begin`]; 0: not traced) to now.
#[inline]
pub fn span(cat: &'static str, name: &'static str, start: u64, args: Args) {
    if start != 0 {
        span_on(cat, name, start, args, false);
    }
}

/// A point in time.
#[inline]
pub fn instant(cat: &'static str, name: &'static str, args: Args) {
    if on() {
        event_on(b'i', cat, name, 0, args);
    }
}

#[cold]
fn event_on(ph: u8, cat: &'static str, name: &'static str, id: u64, args: Args) {
    push(
        Record {
            ph,
            cat,
            name,
            ts: now_ns(),
            dur: 0,
            id,
            args,
        },
        false,
    );
}

/// The id both ends of a message share: sender, receiver and the pair's tag.
pub fn message_id(sender: u32, receiver: u32, tag: u64) -> u64 {
    (tag & ((1 << 40) - 1)) | (sender as u64 & 0x3ff) << 40 | (receiver as u64 & 0x3ff) << 50
}

/// A send or receive from its posting (`start`, from [`begin`]) to now, with its flow
/// arrow: a send starts the arrow at its posting, a receive ends it at its completion.
/// `id` from [`message_id`].
pub fn message(send: bool, start: u64, id: u64, args: Args) {
    if start == 0 {
        return;
    }
    // The async slices of the two ends differ by one bit: their ids are global.
    let async_id = id | (send as u64) << 62;
    let name = if send { "send" } else { "receive" };
    let now = now_ns();
    let mut r = Record {
        ph: b'b',
        cat: "transfer",
        name,
        ts: start,
        dur: 0,
        id: async_id,
        args,
    };
    push(r, false);
    r.ph = b'e';
    r.ts = now;
    r.args = trace_args![];
    push(r, false);
    let flow = Record {
        ph: if send { b's' } else { b'f' },
        cat: "message",
        name: "message",
        ts: if send { start } else { now },
        dur: 0,
        id,
        args: trace_args![],
    };
    // A flow event binds to the slice around it on its thread: a tiny one of its own.
    push(
        Record {
            ph: b'X',
            cat: "transfer",
            name: if send { "send posted" } else { "received" },
            ts: flow.ts,
            dur: 1,
            id: 0,
            args: trace_args![],
        },
        false,
    );
    push(flow, false);
}

fn json_args(args: &Args) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in args.iter().flatten() {
        m.insert(
            k.to_string(),
            match v {
                Val::U(u) => json!(u),
                Val::I(i) => json!(i),
                Val::S(s) => json!(s),
            },
        );
    }
    Value::Object(m)
}

fn us(ns: i128) -> f64 {
    ns as f64 / 1000.0
}

/// This rank's trace as the format's JSON object: times in µs from `origin` (the
/// earliest event), the clock's origin and the sync point in `otherData`.
fn document(
    rank: u32,
    size: u32,
    host: &str,
    sync_ns: u64,
    threads: &[(u64, String, u64, Vec<Record>, u64)],
) -> Value {
    let origin = threads
        .iter()
        .flat_map(|t| t.3.iter().map(|r| r.ts))
        .chain((sync_ns != 0).then_some(sync_ns))
        .min()
        .unwrap_or(0);
    let pid = rank;
    let mut events = vec![
        json!({"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
               "args": {"name": format!("rank {rank} ({host})")}}),
        json!({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index",
               "args": {"sort_index": rank}}),
    ];
    let mut dropped_total = 0;
    for (tid, label, sort, records, dropped) in threads {
        events.push(
            json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": label}}),
        );
        events.push(
            json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                           "args": {"sort_index": sort}}),
        );
        for r in records {
            let mut e = json!({
                "ph": (r.ph as char).to_string(),
                "cat": r.cat,
                "name": r.name,
                "pid": pid,
                "tid": tid,
                "ts": us(r.ts as i128 - origin as i128),
            });
            let m = e.as_object_mut().expect("an object");
            match r.ph {
                b'X' => {
                    m.insert("dur".into(), json!(us(r.dur as i128)));
                }
                b'i' => {
                    m.insert("s".into(), json!("t"));
                }
                b'f' => {
                    m.insert("bp".into(), json!("e"));
                }
                _ => {}
            }
            if matches!(r.ph, b'b' | b'e' | b's' | b'f') {
                m.insert("id".into(), json!(format!("0x{:x}", r.id)));
            }
            if r.args.iter().any(Option::is_some) {
                m.insert("args".into(), json_args(&r.args));
            }
            events.push(e);
        }
        if *dropped > 0 {
            dropped_total += dropped;
            let last = records.last().map_or(0, |r| r.ts);
            events.push(json!({
                "ph": "i", "s": "t", "cat": "trace", "pid": pid, "tid": tid,
                "name": format!("trace buffer full ({CAP} events): {dropped} later events of this thread dropped"),
                "ts": us(last as i128 - origin as i128),
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "mirrorcl_rank": rank,
            "mirrorcl_size": size,
            "mirrorcl_host": host,
            "mirrorcl_clock": "CLOCK_MONOTONIC",
            "mirrorcl_origin_ns": origin,
            "mirrorcl_sync_ns": sync_ns,
            "mirrorcl_dropped_events": dropped_total,
            "mirrorcl_cap_per_thread": CAP,
        }
    })
}

/// Writes this rank's file (again, with everything so far, if called twice).
pub fn write_now() {
    let Some(setup) = SETUP.get() else { return };
    let (rank, size, host) =
        setup
            .place
            .get()
            .cloned()
            .unwrap_or((std::process::id(), 0, String::new()));
    let threads: Vec<_> = THREADS
        .lock()
        .iter()
        .map(|t| {
            (
                t.tid,
                t.label(),
                t.sort_index(),
                t.events(),
                t.dropped.load(Ordering::Relaxed),
            )
        })
        .collect();
    let doc = document(
        rank,
        size,
        &host,
        setup.sync_ns.load(Ordering::Relaxed),
        &threads,
    );
    let path = setup.dir.join(format!("rank-{rank}.json"));
    let tmp = setup.dir.join(format!(".rank-{rank}.json.tmp"));
    let written = serde_json::to_vec(&doc)
        .map_err(|e| e.to_string())
        .and_then(|bytes| std::fs::write(&tmp, bytes).map_err(|e| e.to_string()))
        .and_then(|()| std::fs::rename(&tmp, &path).map_err(|e| e.to_string()));
    if let Err(e) = written {
        crate::diag!("MirrorCL: cannot write the trace {}: {e}", path.display());
    }
}

extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(write_now);
}

/// One rank's file as the merge reads it.
struct RankFile {
    rank: u64,
    host: String,
    origin_ns: u64,
    sync_ns: u64,
    events: Vec<Value>,
}

fn read_rank(path: &Path) -> Result<RankFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let other = &doc["otherData"];
    let field = |k: &str| {
        other[k]
            .as_u64()
            .ok_or_else(|| format!("{}: no otherData.{k}", path.display()))
    };
    let (rank, origin_ns, sync_ns) = (
        field("mirrorcl_rank")?,
        field("mirrorcl_origin_ns")?,
        field("mirrorcl_sync_ns")?,
    );
    let host = other["mirrorcl_host"].as_str().unwrap_or("").to_string();
    let events = match doc["traceEvents"].take() {
        Value::Array(a) => a,
        _ => return Err(format!("{}: no traceEvents", path.display())),
    };
    Ok(RankFile {
        rank,
        host,
        origin_ns,
        sync_ns,
        events,
    })
}

/// Merges the rank files of `dir` (`rank-<r>.json`) into one trace on a common clock:
/// ranks of one host keep their shared clock; each host is aligned on its lowest rank's
/// sync point. Times start at 0.
pub fn merge(dir: &Path) -> Result<Value, String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("rank-") && name.ends_with(".json") {
            files.push(read_rank(&path)?);
        }
    }
    if files.is_empty() {
        return Err(format!("{}: no rank-<r>.json files", dir.display()));
    }
    files.sort_by_key(|f| f.rank);
    // Per host, the sync point of its lowest rank.
    let mut lead: Vec<(String, u64)> = Vec::new();
    for f in &files {
        if !lead.iter().any(|(h, _)| *h == f.host) {
            lead.push((f.host.clone(), f.sync_ns));
        }
    }
    // Each event's time on the common clock, in ns from the sync point.
    let shift = |f: &RankFile| -> i128 {
        let sync = lead.iter().find(|(h, _)| *h == f.host).map_or(0, |l| l.1);
        f.origin_ns as i128 - sync as i128
    };
    let mut min_ns = i128::MAX;
    for f in &files {
        for e in &f.events {
            if let Some(ts) = e["ts"].as_f64() {
                min_ns = min_ns.min((ts * 1000.0).round() as i128 + shift(f));
            }
        }
    }
    if min_ns == i128::MAX {
        min_ns = 0;
    }
    let mut out = Vec::new();
    let mut ranks = Vec::new();
    for f in files {
        let s = shift(&f);
        ranks.push(json!({"rank": f.rank, "host": f.host, "sync_ns": f.sync_ns}));
        for mut e in f.events {
            if let Some(ts) = e["ts"].as_f64() {
                let ns = (ts * 1000.0).round() as i128 + s - min_ns;
                e["ts"] = json!(us(ns));
            }
            e["pid"] = json!(f.rank);
            out.push(e);
        }
    }
    Ok(json!({
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {"mirrorcl_ranks": ranks, "mirrorcl_clock": "per host CLOCK_MONOTONIC, hosts aligned at the start-up barrier"},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ph: u8, name: &'static str, ts: u64, dur: u64) -> Record {
        Record {
            ph,
            cat: "api",
            name,
            ts,
            dur,
            id: 7,
            args: trace_args![("peer", 1u32), ("what", "x")],
        }
    }

    #[test]
    fn a_thread_buffer_keeps_its_events_in_order_and_drops_past_the_cap() {
        let buf = ThreadBuf::new(1, None);
        for i in 0..(CAP + 10) as u64 {
            buf.push(rec(b'X', "clFinish", i, 1));
        }
        let got = buf.events();
        assert_eq!(got.len(), CAP);
        assert!(got.iter().enumerate().all(|(i, r)| r.ts == i as u64));
        assert_eq!(buf.dropped.load(Ordering::Relaxed), 10);
        let doc = document(0, 1, "h", 0, &[(1, "t".into(), 0, got, 10)]);
        let note = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"].as_str().unwrap_or("").contains("10 later events"));
        assert!(note, "the file says events were dropped");
        assert_eq!(doc["otherData"]["mirrorcl_dropped_events"], 10);
    }

    #[test]
    fn a_document_has_named_threads_and_relative_times() {
        let records = vec![
            rec(b'X', "clFinish", 5_000, 2_500),
            rec(b'f', "m", 9_000, 0),
        ];
        let doc = document(
            3,
            4,
            "node",
            6_000,
            &[(42, "issuer, device 0".into(), 10, records, 0)],
        );
        let ev = doc["traceEvents"].as_array().unwrap();
        let x = ev.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(x["ts"], 0.0);
        assert_eq!(x["dur"], 2.5);
        assert_eq!(x["pid"], 3);
        assert_eq!(x["args"]["peer"], 1);
        assert_eq!(x["args"]["what"], "x");
        let f = ev.iter().find(|e| e["ph"] == "f").unwrap();
        assert_eq!(f["bp"], "e");
        assert_eq!(f["id"], "0x7");
        assert!(ev.iter().any(|e| e["name"] == "thread_name"
            && e["args"]["name"] == "issuer, device 0"
            && e["tid"] == 42));
        assert!(ev.iter().any(|e| e["args"]["name"] == "rank 3 (node)"));
        assert_eq!(doc["otherData"]["mirrorcl_origin_ns"], 5_000);
        assert_eq!(doc["otherData"]["mirrorcl_sync_ns"], 6_000);
    }

    fn write(dir: &Path, rank: u32, host: &str, sync: u64, ts: u64) {
        let doc = document(
            rank,
            3,
            host,
            sync,
            &[(1, "a".into(), 0, vec![rec(b'X', "clFinish", ts, 10)], 0)],
        );
        std::fs::write(dir.join(format!("rank-{rank}.json")), doc.to_string()).unwrap();
    }

    #[test]
    fn the_merge_keeps_one_hosts_clock_and_aligns_hosts_at_the_sync_point() {
        let dir = std::env::temp_dir().join(format!("mirrorcl-trace-merge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Ranks 0 and 1 share host a (one clock); rank 2's clock on host b reads 1 s more
        // at the sync point. Each calls clFinish 2 µs after its own sync point, except
        // rank 1 (5 µs after rank 0's, on the same clock).
        write(&dir, 0, "a", 100_000, 102_000);
        write(&dir, 1, "a", 100_700, 105_000);
        write(&dir, 2, "b", 1_000_100_000, 1_000_102_000);
        std::fs::write(dir.join("notes.txt"), "not a rank file").unwrap();
        let merged = merge(&dir).unwrap();
        let ev = merged["traceEvents"].as_array().unwrap();
        let finish = |pid: u64| {
            ev.iter()
                .find(|e| e["pid"] == pid && e["name"] == "clFinish")
                .and_then(|e| e["ts"].as_f64())
                .unwrap()
        };
        assert_eq!(finish(0), 0.0);
        assert_eq!(finish(1), 3.0);
        assert_eq!(finish(2), 0.0);
        assert!(ev.iter().any(|e| e["args"]["name"] == "rank 2 (b)"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(merge(&dir).is_err());
    }

    #[test]
    fn message_ids_match_across_ends_and_differ_by_pair() {
        assert_eq!(message_id(0, 1, 5), message_id(0, 1, 5));
        assert_ne!(message_id(0, 1, 5), message_id(1, 0, 5));
        assert_ne!(message_id(0, 1, 5), message_id(0, 1, 6));
    }
}
