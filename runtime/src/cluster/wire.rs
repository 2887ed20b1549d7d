//! The messages ranks exchange at agreed points of the call sequence (device
//! descriptions, owners' answers, build results, binaries, kernel facts, event statuses,
//! verification digests and call lists, statistics, seeds), and their encoding.
//!
//! A message is a 7-byte header, then its body in postcard (a compact serde format:
//! varint integers, length-prefixed sequences):
//!
//! | bytes | field                                  |
//! |-------|----------------------------------------|
//! | 0..4  | `MAGIC`                                |
//! | 4..6  | `VERSION`, little-endian               |
//! | 6     | the message's `Kind`                   |
//!
//! The header catches what used to decode as garbage: another build's format (version),
//! bytes that are no wire message at all (magic), and ranks in different collectives
//! (kind). Decoding checks every length against what is left, so a damaged length fails
//! instead of allocating what it claims.
//!
//! **Version rule:** bump `VERSION` whenever a message type changes (a field added,
//! removed, reordered or retyped, a variant added) or a `Kind` id changes. The
//! `format_fingerprint` test fails until then: update its value along with the bump.

use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

pub const MAGIC: [u8; 4] = *b"MCLw";
pub const VERSION: u16 = 9;
const HEADER: usize = 7;

/// Which message a collective exchanges: each collective sends one kind only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Devices = 1,
    DeviceQuery = 2,
    SubDevices = 3,
    ProgramCreation = 4,
    Binaries = 5,
    BuildResults = 6,
    KernelFacts = 7,
    EventStatuses = 8,
    VerifyDigest = 9,
    VerifyCalls = 10,
    Statistics = 11,
    Seed = 12,
    History = 13,
}

impl Kind {
    const ALL: [Kind; 13] = [
        Kind::Devices,
        Kind::DeviceQuery,
        Kind::SubDevices,
        Kind::ProgramCreation,
        Kind::Binaries,
        Kind::BuildResults,
        Kind::KernelFacts,
        Kind::EventStatuses,
        Kind::VerifyDigest,
        Kind::VerifyCalls,
        Kind::Statistics,
        Kind::Seed,
        Kind::History,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Devices => "device list",
            Kind::DeviceQuery => "device query answer",
            Kind::SubDevices => "sub-device",
            Kind::ProgramCreation => "program creation",
            Kind::Binaries => "program binaries",
            Kind::BuildResults => "build results",
            Kind::KernelFacts => "kernel facts",
            Kind::EventStatuses => "clWaitForEvents status",
            Kind::VerifyDigest => "verification digest",
            Kind::VerifyCalls => "verification call list",
            Kind::Statistics => "statistics",
            Kind::Seed => "seed",
            Kind::History => "call history",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type that travels as one kind of message.
pub trait Message: Serialize + DeserializeOwned {
    const KIND: Kind;
}

/// What was wrong with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Fewer bytes than a header.
    Short(usize),
    Magic([u8; 4]),
    Version(u16),
    /// The header names another kind (the raw id).
    OtherKind(u8),
    Body(postcard::Error),
    /// Bytes left over after the body.
    Trailing(usize),
}

/// A message that did not decode: which kind was expected, who sent it, what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub kind: Kind,
    pub sender: u32,
    pub problem: Problem,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "the {} message from rank {} ", self.kind, self.sender)?;
        match &self.problem {
            Problem::Short(n) => write!(f, "is {n} bytes long, shorter than its header"),
            Problem::Magic(m) => write!(
                f,
                "is no MirrorCL wire message (starts with {m:02x?}): the ranks are in \
                 different collectives"
            ),
            Problem::Version(v) => write!(
                f,
                "has wire format version {v}, this rank's is {VERSION}: the ranks run \
                 different MirrorCL builds"
            ),
            Problem::OtherKind(k) => {
                let other = Kind::ALL.iter().find(|x| **x as u8 == *k);
                match other {
                    Some(o) => write!(f, "is a {o} message")?,
                    None => write!(f, "has unknown kind {k}")?,
                }
                f.write_str(": the ranks are in different collectives")
            }
            Problem::Body(e) => write!(f, "does not decode: {e}"),
            Problem::Trailing(n) => write!(f, "has {n} bytes after its end"),
        }
    }
}

impl std::error::Error for WireError {}

/// `m` with its header.
pub fn encode<M: Message>(m: &M) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(M::KIND as u8);
    // Serialising into a Vec fails only for sequences of unknown length, which no
    // message has; should one, the bare header fails to decode on every rank.
    postcard::to_extend(m, out).unwrap_or_else(|_| header_only::<M>())
}

fn header_only<M: Message>() -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(M::KIND as u8);
    out
}

/// The message `sender` sent, checked from header to last byte.
pub fn decode<M: Message>(bytes: &[u8], sender: u32) -> Result<M, WireError> {
    let fail = |problem| WireError {
        kind: M::KIND,
        sender,
        problem,
    };
    let (head, body) = bytes
        .split_at_checked(HEADER)
        .ok_or_else(|| fail(Problem::Short(bytes.len())))?;
    let magic = [head[0], head[1], head[2], head[3]];
    if magic != MAGIC {
        return Err(fail(Problem::Magic(magic)));
    }
    let version = u16::from_le_bytes([head[4], head[5]]);
    if version != VERSION {
        return Err(fail(Problem::Version(version)));
    }
    if head[6] != M::KIND as u8 {
        return Err(fail(Problem::OtherKind(head[6])));
    }
    let (m, rest) = postcard::take_from_bytes(body).map_err(|e| fail(Problem::Body(e)))?;
    if !rest.is_empty() {
        return Err(fail(Problem::Trailing(rest.len())));
    }
    Ok(m)
}

/// Every rank's message from what a collective gathered, in rank order.
pub fn decode_all<M: Message>(all: &[Vec<u8>]) -> Result<Vec<M>, WireError> {
    all.iter()
        .enumerate()
        .map(|(r, b)| decode(b, r as u32))
        .collect()
}

/// Bytes that encode as one block rather than element by element (same encoding as a
/// `Vec<u8>`, faster for large ones such as binaries).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl Visitor<'_> for BytesVisitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        d.deserialize_byte_buf(BytesVisitor)
    }
}

/// A vendor's answer to a query: its bytes, or its error code.
pub type Answer = Result<Vec<u8>, i32>;

/// Everything a virtual device of another rank's device answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDescription {
    pub owner: u32,
    pub owner_group: u32,
    pub host: String,
    pub vendor_name: String,
    /// Captured query answers, by parameter.
    pub info: Vec<(u32, Vec<u8>)>,
}

/// A rank's devices, at start-up. Settings every rank must share ride along (rank 0's
/// hold).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankDevices {
    pub piece_bytes: u64,
    pub devices: Vec<DeviceDescription>,
}

impl Message for RankDevices {
    const KIND: Kind = Kind::Devices;
}

/// The owner's answer to a device query MirrorCL does not capture; `None` from the other
/// ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerAnswer(pub Option<Answer>);

impl Message for OwnerAnswer {
    const KIND: Kind = Kind::DeviceQuery;
}

/// The owner's `clCreateSubDevices`: how many, and the sub-devices when it created them,
/// or its error; `None` from the other ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubDevices(pub Option<Result<(u32, Vec<DeviceDescription>), i32>>);

impl Message for SubDevices {
    const KIND: Kind = Kind::SubDevices;
}

/// After `clCreateProgramWithBinary`: a rank's result and its devices' outcomes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCreation {
    pub result: i32,
    pub devices: Vec<CreatedBinary>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedBinary {
    pub index: u32,
    pub status: i32,
    pub binary_type: u32,
}

impl Message for ProgramCreation {
    const KIND: Kind = Kind::ProgramCreation;
}

/// The binaries of a rank's devices, by device index, or its error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binaries(pub Result<Vec<(u32, Bytes)>, i32>);

impl Message for Binaries {
    const KIND: Kind = Kind::Binaries;
}

/// After a build, compile or link: a rank's result, its devices' outcomes, and the
/// program's kernel names if one of them has an executable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildResults {
    pub result: i32,
    pub devices: Vec<DeviceBuild>,
    pub kernel_names: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBuild {
    pub index: u32,
    pub status: i32,
    pub log: String,
    pub binary_type: u32,
}

impl Message for BuildResults {
    const KIND: Kind = Kind::BuildResults;
}

/// A rank's facts of a kernel being created: `None` without an executable, its error if
/// creating it failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFactsShare(pub Option<Result<KernelDescription, i32>>);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDescription {
    pub num_args: u32,
    pub attributes: Option<Vec<u8>>,
    /// Per argument, the answers to the argument queries.
    pub args: Vec<Vec<Answer>>,
    /// Per device index of this rank, the answers to the work-group queries.
    pub work_group: Vec<(u32, Vec<Answer>)>,
}

impl Message for KernelFactsShare {
    const KIND: Kind = Kind::KernelFacts;
}

/// After `clWaitForEvents`: the statuses of the waited-for commands this rank owns, as
/// (index in the wait list, status).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventStatuses(pub Vec<(u32, i32)>);

impl Message for EventStatuses {
    const KIND: Kind = Kind::EventStatuses;
}

/// At a verification point: how many calls this rank recorded, and their digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyDigest {
    pub calls: u64,
    pub digest: u64,
    /// The digest of the argument values, kept apart (see `verify`).
    pub values: u64,
}

impl Message for VerifyDigest {
    const KIND: Kind = Kind::VerifyDigest;
}

/// After digests that differ: the calls this rank recorded since the last agreed check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyCalls(pub Vec<RecordedCall>);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The call's number in this rank's run, from 1.
    pub index: u64,
    pub hash: u64,
    pub name: String,
    /// An argument value rather than a call or its data (reported after those).
    pub value: bool,
}

impl Message for VerifyCalls {
    const KIND: Kind = Kind::VerifyCalls;
}

/// A rank's last entries of its call history (`history`), for the report of the first
/// one that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentHistory(pub Vec<HistoryEntry>);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The entry's number in this rank's run, from 1.
    pub index: u64,
    pub hash: u64,
    /// The chained digest after this entry.
    pub chain: u64,
    pub what: String,
}

impl Message for RecentHistory {
    const KIND: Kind = Kind::History;
}

/// At exit: this rank's statistics, in the order of `stats::Figures::NAMES` (a counter
/// added, removed or moved there changes the format too: `format_fingerprint` hashes the
/// names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statistics(pub Vec<u64>);

impl Message for Statistics {
    const KIND: Kind = Kind::Statistics;
}

/// A seed the program gave `srand`, `srandom` or `srand48` (every rank takes rank 0's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seed(pub u64);

impl Message for Seed {
    const KIND: Kind = Kind::Seed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Records the largest allocation each thread asks for, so tests can show that a
    /// length field does not allocate what it claims.
    struct Largest;

    thread_local! {
        static LARGEST: Cell<usize> = const { Cell::new(0) };
    }

    fn note(size: usize) {
        let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
    }

    // SAFETY: forwards every call to the system allocator unchanged.
    unsafe impl GlobalAlloc for Largest {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note(layout.size());
            // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `alloc` above with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            note(new_size);
            // SAFETY: `ptr` came from this allocator with `layout`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Largest = Largest;

    /// The largest allocation `f` made on this thread.
    fn largest_allocation(f: impl FnOnce()) -> usize {
        LARGEST.with(|c| c.set(0));
        f();
        LARGEST.with(|c| c.get())
    }

    fn description(owner: u32) -> DeviceDescription {
        DeviceDescription {
            owner,
            owner_group: 0x8000_0001,
            host: "node7".into(),
            vendor_name: "Portable Computing Language".into(),
            info: vec![
                (0x1000, vec![4, 0, 0, 0, 0, 0, 0, 0]),
                (0x102b, b"cpu\0".to_vec()),
            ],
        }
    }

    fn build_results() -> BuildResults {
        BuildResults {
            result: -11,
            devices: vec![DeviceBuild {
                index: 3,
                status: -2,
                log: "error: expected ';'".into(),
                binary_type: 0,
            }],
            kernel_names: Some("add;scale".into()),
        }
    }

    fn kernel_facts() -> KernelFactsShare {
        KernelFactsShare(Some(Ok(KernelDescription {
            num_args: 2,
            attributes: Some(b"\0".to_vec()),
            args: vec![vec![Ok(vec![1, 2]), Err(-19)], vec![Ok(Vec::new())]],
            work_group: vec![(0, vec![Ok(vec![0; 8]), Err(-30)])],
        })))
    }

    /// One encoded sample of every kind, in `Kind` order.
    fn samples() -> Vec<Vec<u8>> {
        vec![
            encode(&RankDevices {
                piece_bytes: 64 << 20,
                devices: vec![description(0), description(1)],
            }),
            encode(&OwnerAnswer(Some(Ok(vec![7; 3])))),
            encode(&SubDevices(Some(Ok((2, vec![description(1)]))))),
            encode(&ProgramCreation {
                result: 0,
                devices: vec![CreatedBinary {
                    index: 1,
                    status: 0,
                    binary_type: 4,
                }],
            }),
            encode(&Binaries(Ok(vec![(
                0,
                Bytes(vec![0x7f, b'E', b'L', b'F']),
            )]))),
            encode(&build_results()),
            encode(&kernel_facts()),
            encode(&EventStatuses(vec![(0, 0), (3, -5)])),
            encode(&VerifyDigest {
                calls: 12,
                digest: 0x9e37_79b9_7f4a_7c15,
                values: 0,
            }),
            encode(&verify_calls()),
            encode(&statistics()),
            encode(&Seed(1_700_000_000)),
            encode(&RecentHistory(vec![HistoryEntry {
                index: 9,
                hash: 3,
                chain: u64::MAX,
                what: "create buffer #2 of 64 bytes".into(),
            }])),
        ]
    }

    fn verify_calls() -> VerifyCalls {
        VerifyCalls(vec![
            RecordedCall {
                index: 5,
                hash: 7,
                name: "clFinish".into(),
                value: false,
            },
            RecordedCall {
                index: 6,
                hash: u64::MAX,
                name: "clSetKernelArg".into(),
                value: true,
            },
        ])
    }

    /// One value per counter, each different.
    fn statistics() -> Statistics {
        let n = crate::observe::stats::Figures::NAMES.len() as u64;
        // The shift wraps as a release build's does (the format fingerprint holds these values).
        Statistics((1..=n).map(|i| i.wrapping_shl(4 * i as u32)).collect())
    }

    fn round_trip<M: Message + PartialEq + fmt::Debug>(m: M) {
        assert_eq!(decode::<M>(&encode(&m), 0), Ok(m));
    }

    #[test]
    fn every_kind_round_trips() {
        round_trip(RankDevices {
            piece_bytes: 1 << 40,
            devices: vec![description(0), description(3)],
        });
        round_trip(RankDevices {
            piece_bytes: 0,
            devices: Vec::new(),
        });
        round_trip(OwnerAnswer(None));
        round_trip(OwnerAnswer(Some(Ok(b"OpenCL C 1.2".to_vec()))));
        round_trip(OwnerAnswer(Some(Err(-30))));
        round_trip(SubDevices(None));
        round_trip(SubDevices(Some(Ok((4, Vec::new())))));
        round_trip(SubDevices(Some(Ok((1, vec![description(2)])))));
        round_trip(SubDevices(Some(Err(-18))));
        round_trip(ProgramCreation {
            result: -42,
            devices: vec![CreatedBinary {
                index: 9,
                status: -42,
                binary_type: 0,
            }],
        });
        round_trip(Binaries(Ok(vec![
            (0, Bytes(vec![1; 100_000])),
            (5, Bytes::default()),
        ])));
        round_trip(Binaries(Err(-45)));
        round_trip(build_results());
        round_trip(BuildResults {
            result: 0,
            devices: Vec::new(),
            kernel_names: None,
        });
        round_trip(kernel_facts());
        round_trip(KernelFactsShare(None));
        round_trip(KernelFactsShare(Some(Err(-46))));
        round_trip(EventStatuses(Vec::new()));
        round_trip(EventStatuses(vec![(u32::MAX, i32::MIN), (1, 0), (2, -14)]));
        round_trip(VerifyDigest {
            calls: 0,
            digest: 0,
            values: 0,
        });
        round_trip(VerifyDigest {
            calls: u64::MAX,
            digest: 0x0123_4567_89ab_cdef,
            values: 0,
        });
        round_trip(verify_calls());
        round_trip(VerifyCalls(Vec::new()));
        round_trip(statistics());
        round_trip(Statistics(vec![u64::MAX; 3]));
        round_trip(Seed(0));
        round_trip(Seed(u64::MAX));
    }

    #[test]
    fn bytes_encode_like_a_byte_vector() {
        let v = vec![3u8, 1, 4, 1, 5];
        assert_eq!(
            postcard::to_allocvec(&Bytes(v.clone())).unwrap(),
            postcard::to_allocvec(&v).unwrap()
        );
    }

    #[test]
    fn truncated_messages_fail_at_every_length() {
        for (i, whole) in samples().iter().enumerate() {
            for n in 0..whole.len() {
                let problem = match i + 1 {
                    1 => decode::<RankDevices>(&whole[..n], 2).map(|_| ()),
                    2 => decode::<OwnerAnswer>(&whole[..n], 2).map(|_| ()),
                    3 => decode::<SubDevices>(&whole[..n], 2).map(|_| ()),
                    4 => decode::<ProgramCreation>(&whole[..n], 2).map(|_| ()),
                    5 => decode::<Binaries>(&whole[..n], 2).map(|_| ()),
                    6 => decode::<BuildResults>(&whole[..n], 2).map(|_| ()),
                    7 => decode::<KernelFactsShare>(&whole[..n], 2).map(|_| ()),
                    8 => decode::<EventStatuses>(&whole[..n], 2).map(|_| ()),
                    9 => decode::<VerifyDigest>(&whole[..n], 2).map(|_| ()),
                    10 => decode::<VerifyCalls>(&whole[..n], 2).map(|_| ()),
                    11 => decode::<Statistics>(&whole[..n], 2).map(|_| ()),
                    12 => decode::<Seed>(&whole[..n], 2).map(|_| ()),
                    _ => decode::<RecentHistory>(&whole[..n], 2).map(|_| ()),
                }
                .expect_err("a truncated message fails");
                assert_eq!(problem.sender, 2);
                assert_eq!(problem.kind, Kind::ALL[i]);
                if n < HEADER {
                    assert_eq!(problem.problem, Problem::Short(n));
                } else {
                    assert!(matches!(problem.problem, Problem::Body(_)), "{problem}");
                }
            }
        }
    }

    #[test]
    fn header_mismatches_are_named() {
        let good = encode(&build_results());
        let mut magic = good.clone();
        magic[0] = b'X';
        let mut version = good.clone();
        version[4..6].copy_from_slice(&(VERSION + 1).to_le_bytes());
        let e = decode::<BuildResults>(&magic, 1).unwrap_err();
        assert!(matches!(e.problem, Problem::Magic(_)));
        let e = decode::<BuildResults>(&version, 1).unwrap_err();
        assert_eq!(e.problem, Problem::Version(VERSION + 1));
        assert!(e.to_string().contains("different MirrorCL builds"), "{e}");
        // A collective mixed with another: build results read as kernel facts.
        let e = decode::<KernelFactsShare>(&good, 3).unwrap_err();
        assert_eq!(e.problem, Problem::OtherKind(Kind::BuildResults as u8));
        assert_eq!(
            e.to_string(),
            "the kernel facts message from rank 3 is a build results message: the ranks \
             are in different collectives"
        );
        // Bytes that are no wire message (a raw seed, as the seeds were once exchanged).
        let e = decode::<OwnerAnswer>(&42u64.to_ne_bytes(), 0).unwrap_err();
        assert!(matches!(e.problem, Problem::Magic(_)));
        let mut trailing = good;
        trailing.push(0);
        let e = decode::<BuildResults>(&trailing, 1).unwrap_err();
        assert_eq!(e.problem, Problem::Trailing(1));
    }

    #[test]
    fn lengths_claiming_more_than_is_there_fail_without_allocating_them() {
        // A binary claiming 2^40 bytes, a device list claiming 2^32-1 devices, a
        // string claiming 2^62 bytes: each body is a few bytes.
        let mut binary = header_only::<Binaries>();
        binary.extend_from_slice(&[0x00, 0x01, 0x00]); // Ok, one entry, index 0
        binary.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]); // len 2^40
        binary.extend_from_slice(b"elf");
        let mut e = None;
        let most = largest_allocation(|| e = decode::<Binaries>(&binary, 1).err());
        assert!(matches!(e.unwrap().problem, Problem::Body(_)));
        assert!(most < 1 << 20, "{most} bytes allocated");

        let mut devices = header_only::<RankDevices>();
        devices.push(0); // piece_bytes
        devices.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let mut e = None;
        let most = largest_allocation(|| e = decode::<RankDevices>(&devices, 1).err());
        assert!(matches!(e.unwrap().problem, Problem::Body(_)));
        // serde pre-allocates at most 1 MiB of a sequence it is told is long.
        assert!(most <= 1 << 20, "{most} bytes allocated");

        let mut log = header_only::<BuildResults>();
        log.extend_from_slice(&[0, 1, 0, 0]); // result, one device, index, status
        log.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
        log.extend_from_slice(b"partial log");
        let mut e = None;
        let most = largest_allocation(|| e = decode::<BuildResults>(&log, 1).err());
        assert!(matches!(e.unwrap().problem, Problem::Body(_)));
        assert!(most <= 1 << 20, "{most} bytes allocated");

        // A varint longer than its type allows.
        let mut bad = header_only::<OwnerAnswer>();
        bad.extend_from_slice(&[0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(decode::<OwnerAnswer>(&bad, 1).is_err());
    }

    #[test]
    fn decode_all_names_the_first_bad_rank() {
        let all = vec![
            encode(&OwnerAnswer(None)),
            encode(&OwnerAnswer(Some(Err(-1)))),
            encode(&build_results()),
        ];
        let e = decode_all::<OwnerAnswer>(&all).unwrap_err();
        assert_eq!((e.kind, e.sender), (Kind::DeviceQuery, 2));
        assert_eq!(decode_all::<OwnerAnswer>(&all[..2]).unwrap().len(), 2);
    }

    #[test]
    fn every_kind_is_told_from_every_other() {
        let all = samples();
        assert_eq!(all.len(), Kind::ALL.len());
        for (i, bytes) in all.iter().enumerate() {
            assert_eq!(bytes[6], Kind::ALL[i] as u8);
            let as_seed = decode::<Seed>(bytes, 0);
            let as_statuses = decode::<EventStatuses>(bytes, 0);
            for (got, kind) in [
                (as_seed.map(|_| ()), Kind::Seed),
                (as_statuses.map(|_| ()), Kind::EventStatuses),
            ] {
                match got {
                    Ok(()) => assert_eq!(Kind::ALL[i], kind),
                    Err(e) => assert_eq!(e.problem, Problem::OtherKind(Kind::ALL[i] as u8)),
                }
            }
        }
    }

    /// Ranks that meet in different collectives (a replica that diverged, or two host
    /// threads whose collectives crossed) are stopped, every one of them, instead of
    /// reading one collective's bytes as the other's.
    #[test]
    fn mixed_collectives_end_the_job_on_every_rank() {
        use crate::cluster::comm::local::tests::on_ranks;
        use crate::cluster::node::Node;
        let results = on_ranks(4, |c| {
            let node = Node::over(Box::new(c));
            match node.rank {
                0 => drop(node.exchange(&VerifyDigest {
                    calls: 3,
                    digest: 4,
                    values: 0,
                })),
                1 => drop(node.exchange(&EventStatuses(vec![(0, -5)]))),
                2 => drop(node.exchange(&Seed(42))),
                _ => drop(node.exchange(&VerifyCalls(Vec::new()))),
            }
        });
        for (rank, got) in results.into_iter().enumerate() {
            let why = got.expect_err("the rank aborted");
            let why = why.downcast_ref::<String>().expect("abort's message");
            assert_eq!(why, &format!("rank {rank} aborted the in-process job"));
        }
        // What the ranks were told: the first rank whose message is of another kind.
        let gathered = vec![
            encode(&VerifyDigest {
                calls: 3,
                digest: 4,
                values: 0,
            }),
            encode(&EventStatuses(vec![(0, -5)])),
        ];
        let e = decode_all::<VerifyDigest>(&gathered).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the verification digest message from rank 1 is a clWaitForEvents status \
             message: the ranks are in different collectives"
        );
        let e = decode_all::<EventStatuses>(&gathered).unwrap_err();
        assert_eq!(
            (e.sender, e.problem),
            (0, Problem::OtherKind(Kind::VerifyDigest as u8))
        );
        // The bytes the collectives exchanged before they had a header: a raw seed, a
        // raw digest pair, raw status records.
        let raw_statuses: Vec<u8> = [0u32.to_le_bytes(), (-5i32).to_le_bytes()].concat();
        for raw in [
            42u64.to_ne_bytes().to_vec(),
            [3u64.to_le_bytes(), 4u64.to_le_bytes()].concat(),
            raw_statuses,
        ] {
            let e = decode::<Seed>(&raw, 1).unwrap_err();
            assert!(matches!(e.problem, Problem::Magic(_)), "{e}");
        }
    }

    /// The statistics at exit leave a mixed collective to their caller (which reports it
    /// and goes on exiting); the rank still in another collective ends the job.
    #[test]
    fn statistics_mixed_with_another_collective_are_an_error_not_an_abort() {
        use crate::cluster::comm::local::tests::on_ranks;
        use crate::cluster::node::Node;
        let results = on_ranks(2, |c| {
            let node = Node::over(Box::new(c));
            if node.rank == 0 {
                node.try_exchange(&Statistics(vec![1, 2])).map(drop)
            } else {
                node.exchange(&Seed(7));
                Ok(())
            }
        });
        let mut results = results.into_iter();
        let at_exit = results.next().unwrap().expect("rank 0 did not abort");
        let crate::cluster::node::Why::Wire(e) = at_exit.unwrap_err().why else {
            panic!("a wire error")
        };
        assert_eq!((e.kind, e.sender), (Kind::Statistics, 1));
        assert_eq!(e.problem, Problem::OtherKind(Kind::Seed as u8));
        assert!(results.next().unwrap().is_err(), "rank 1 aborted");
    }

    #[test]
    fn the_collectives_of_a_run_in_order() {
        use crate::cluster::comm::local::tests::on_ranks;
        use crate::cluster::node::Node;
        let results = on_ranks(3, |c| {
            let node = Node::over(Box::new(c));
            let r = node.rank;
            let seed = node.exchange(&Seed(1000 + r as u64))[0];
            let statuses = node.exchange(&EventStatuses(vec![(r, -(r as i32))]));
            let digests = node.exchange(&VerifyDigest {
                calls: 10,
                digest: 77,
                values: 0,
            });
            let stats = node.try_exchange(&Statistics(vec![r as u64; 2]));
            (seed, statuses, digests, stats)
        });
        for got in results {
            let (seed, statuses, digests, stats) = got.expect("no rank aborted");
            assert_eq!(seed, Seed(1000));
            let want: Vec<_> = (0..3)
                .map(|r| EventStatuses(vec![(r, -(r as i32))]))
                .collect();
            assert_eq!(statuses, want);
            assert!(digests.iter().all(|d| *d == digests[0]));
            let want: Vec<_> = (0..3).map(|r| Statistics(vec![r; 2])).collect();
            assert_eq!(stats.expect("the stamps agree"), want);
        }
    }

    /// Pins the encoding: a change to any message type (or to the counters a
    /// `Statistics` message carries) changes it. Then bump `VERSION` and put the new value
    /// here.
    #[test]
    fn format_fingerprint() {
        // FNV-1a over the samples (the version is in their headers) and the counters.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let names = crate::observe::stats::Figures::NAMES.join(",");
        for b in samples().concat().into_iter().chain(names.bytes()) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        assert_eq!(
            (VERSION, h),
            (9, 0xd20a_f9ba_51d5_61b9),
            "the wire format changed: bump wire::VERSION and update this fingerprint"
        );
    }
}
