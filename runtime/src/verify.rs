//! Divergence detection (`MIRRORCL_VERIFY=1`): every replica must feed the runtime the
//! same calls with the same data (design invariant 1). With verification on, each rank
//! keeps a digest of what it was fed (the calls that change state, the bytes of
//! host-to-device writes and `COPY_HOST_PTR` data, scalar kernel arguments, sizes and
//! offsets; never handles or addresses, which differ between ranks, and never queries,
//! which a program may repeat a different number of times while it polls), and the ranks
//! compare digests at synchronisation points (`clFinish`, `clWaitForEvents`, blocking
//! reads and maps). On a mismatch every rank stops with the first call that differs and
//! the ranks that disagree.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// One call as verification records it.
#[derive(Clone, Copy)]
struct Call {
    index: u64,
    name: &'static str,
    hash: u64,
}

struct State {
    calls: u64,
    digest: u64,
    /// The calls since the last agreed check.
    recent: Vec<Call>,
}

static STATE: Mutex<State> = Mutex::new(State {
    calls: 0,
    digest: 0,
    recent: Vec::new(),
});

/// 0: not decided yet, 1: off, 2: on.
static ENABLED: AtomicU8 = AtomicU8::new(0);

#[inline]
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        0 => {
            let on = crate::platform::platform().config.runtime.verify;
            ENABLED.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        v => v == 2,
    }
}

/// A fast 64-bit hash of bytes (8 at a time), for digests, not for security.
pub fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ b as u64).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 31)
}

/// Records one call and the data it was fed.
pub fn note(name: &'static str, parts: &[&[u8]]) {
    if !enabled() {
        return;
    }
    let mut h = hash_bytes(0, name.as_bytes());
    for p in parts {
        h = hash_bytes(h, p);
    }
    let mut st = STATE.lock();
    st.calls += 1;
    st.digest = hash_bytes(st.digest, &h.to_le_bytes());
    let index = st.calls;
    st.recent.push(Call {
        index,
        name,
        hash: h,
    });
}

/// A synchronisation point: every rank compares its digest with every other's. A
/// collective when verification is on (every replica reaches the same points).
pub fn check(point: &'static str) {
    if !enabled() {
        return;
    }
    let node = crate::node::node();
    if !node.is_cluster() {
        return;
    }
    let (calls, digest, recent) = {
        let st = STATE.lock();
        (st.calls, st.digest, st.recent.clone())
    };
    let mut mine = calls.to_le_bytes().to_vec();
    mine.extend_from_slice(&digest.to_le_bytes());
    let all = node.all_gather(&mine);
    if all.iter().all(|b| *b == all[0]) {
        STATE.lock().recent.clear();
        return;
    }
    // Find the first call that differs: every rank shares its calls since the last
    // agreed check.
    let mut w = Vec::new();
    for c in &recent {
        w.extend_from_slice(&c.index.to_le_bytes());
        w.extend_from_slice(&c.hash.to_le_bytes());
        w.extend_from_slice(&(c.name.len() as u64).to_le_bytes());
        w.extend_from_slice(c.name.as_bytes());
    }
    let lists: Vec<Vec<(u64, u64, String)>> =
        node.all_gather(&w).iter().map(|b| decode(b)).collect();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut report = format!(
        "MirrorCL: rank {}: the replicas diverged (MIRRORCL_VERIFY), found at {point}.",
        node.rank
    );
    for i in 0..longest {
        let at: Vec<Option<&(u64, u64, String)>> = lists.iter().map(|l| l.get(i)).collect();
        if at.iter().all(|c| c.map(|c| c.1) == at[0].map(|c| c.1)) {
            continue;
        }
        // Group the ranks by what they called there.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (r, c) in at.iter().enumerate() {
            let what = match c {
                Some((index, hash, name)) => format!("call #{index} {name} (digest {hash:016x})"),
                None => "no further call".to_string(),
            };
            match groups.iter_mut().find(|(w, _)| *w == what) {
                Some((_, ranks)) => ranks.push(r),
                None => groups.push((what, vec![r])),
            }
        }
        report.push_str(" The first call that differs:");
        for (what, ranks) in groups {
            report.push_str(&format!("\n  ranks {ranks:?}: {what}"));
        }
        break;
    }
    crate::diag!("{report}\nMirrorCL: a replica fed the runtime other calls or data (rank-dependent input, unseeded randomness, host threads?); aborting the job.");
    node.abort();
}

fn decode(b: &[u8]) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    let u = |at: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(b.get(*at..*at + 8)?.try_into().ok()?);
        *at += 8;
        Some(v)
    };
    while let (Some(index), Some(hash), Some(len)) = (u(&mut at), u(&mut at), u(&mut at)) {
        let name = b
            .get(at..at + len as usize)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        at += len as usize;
        out.push((index, hash, name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_depends_on_every_byte_and_the_length() {
        let a = hash_bytes(0, b"0123456789abcdef");
        assert_ne!(a, hash_bytes(0, b"0123456789abcdeg"));
        assert_ne!(a, hash_bytes(0, b"0123456789abcdef\0"));
        assert_ne!(hash_bytes(0, b""), hash_bytes(1, b""));
        assert_eq!(a, hash_bytes(0, b"0123456789abcdef"));
    }

    #[test]
    fn calls_round_trip() {
        let mut w = Vec::new();
        for (i, h, n) in [(1u64, 7u64, "clFinish"), (2, 9, "clEnqueueWriteBuffer")] {
            w.extend_from_slice(&i.to_le_bytes());
            w.extend_from_slice(&h.to_le_bytes());
            w.extend_from_slice(&(n.len() as u64).to_le_bytes());
            w.extend_from_slice(n.as_bytes());
        }
        let d = decode(&w);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1], (2, 9, "clEnqueueWriteBuffer".to_string()));
    }
}
