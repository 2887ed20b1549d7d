//! Divergence detection (`MIRRORCL_VERIFY=1`): every replica must feed the runtime the
//! same calls with the same data (design invariant 1). With verification on, each rank
//! keeps a digest of what it was fed (the calls that change state, the bytes of
//! host-to-device writes and `COPY_HOST_PTR` data, scalar kernel arguments, sizes and
//! offsets; never handles or addresses, which differ between ranks, and never queries,
//! which a program may repeat a different number of times while it polls), and the ranks
//! compare digests at synchronisation points (`clFinish`, `clWaitForEvents`, blocking
//! reads and maps). On a mismatch every rank stops with the first call that differs and
//! the ranks that disagree.
//!
//! Argument values ([`note_value`]: the bytes of by-value kernel arguments) are checked
//! too, but reported after any other difference: a rank may compute an argument of a
//! kernel that runs on another rank's device differently without harm, while a
//! difference in the calls or the host data changes results (the harmful one is the
//! one to name first).

use crate::cluster::wire::{RecordedCall, VerifyCalls, VerifyDigest};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// One call as verification records it.
#[derive(Clone, Copy)]
struct Call {
    index: u64,
    name: &'static str,
    hash: u64,
    value: bool,
}

struct State {
    /// Calls and data, and their digest; argument values have their own.
    calls: u64,
    digest: u64,
    values: u64,
    /// Argument values were found to differ (and reported): no longer compared.
    values_reported: bool,
    /// The calls since the last agreed check.
    recent: Vec<Call>,
}

/// One state per host-thread slot (`host_threads`): a thread's calls are in the same
/// order on every rank, the interleaving of threads is not.
static STATES: [Mutex<State>; crate::cluster::host_threads::SLOTS] = [const {
    Mutex::new(State {
        calls: 0,
        digest: 0,
        values: 0,
        values_reported: false,
        recent: Vec::new(),
    })
};
    crate::cluster::host_threads::SLOTS];

fn state() -> &'static Mutex<State> {
    &STATES[crate::cluster::host_threads::slot()]
}

/// 0: not decided yet, 1: off, 2: on.
static ENABLED: AtomicU8 = AtomicU8::new(0);

#[inline]
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        0 => {
            let on = crate::observe::config::get().runtime.verify;
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
    record(name, parts, false);
}

/// Records an argument value (see the module's note on the order of reports).
pub fn note_value(name: &'static str, parts: &[&[u8]]) {
    record(name, parts, true);
}

fn record(name: &'static str, parts: &[&[u8]], value: bool) {
    if !enabled() {
        return;
    }
    let mut h = hash_bytes(0, name.as_bytes());
    for p in parts {
        h = hash_bytes(h, p);
    }
    let mut st = state().lock();
    if value {
        st.values = hash_bytes(st.values, &h.to_le_bytes());
    } else {
        st.calls += 1;
        st.digest = hash_bytes(st.digest, &h.to_le_bytes());
    }
    let index = st.calls;
    st.recent.push(Call {
        index,
        name,
        hash: h,
        value,
    });
}

/// A synchronisation point: every rank compares its digest with every other's. A
/// collective when verification is on (every replica reaches the same points).
pub fn check(point: &'static str) {
    if !enabled() {
        return;
    }
    let node = crate::cluster::node::node();
    if !node.is_cluster() {
        return;
    }
    let (calls, digest, values, values_reported, recent) = {
        let st = state().lock();
        let (c, d, v, r) = (st.calls, st.digest, st.values, st.values_reported);
        (c, d, v, r, st.recent.clone())
    };
    let all = node.exchange(&VerifyDigest {
        calls,
        digest,
        values,
    });
    let calls_agree = (all.iter()).all(|d| (d.calls, d.digest) == (all[0].calls, all[0].digest));
    let values_agree = values_reported || all.iter().all(|d| d.values == all[0].values);
    if calls_agree && values_agree {
        state().lock().recent.clear();
        return;
    }
    // Find the first call that differs: every rank shares its calls since the last
    // agreed check.
    let mine = VerifyCalls(
        (recent.iter())
            .map(|c| RecordedCall {
                index: c.index,
                hash: c.hash,
                name: c.name.to_string(),
                value: c.value,
            })
            .collect(),
    );
    let lists: Vec<Vec<RecordedCall>> = node.exchange(&mine).into_iter().map(|l| l.0).collect();
    if calls_agree {
        // Only argument values differ: said once, and the check goes on.
        crate::diag!(
            "MirrorCL: rank {}: MIRRORCL_VERIFY, at {point}:{}; checking the calls and data \
             goes on.",
            node.rank,
            first_difference(&lists)
        );
        let mut st = state().lock();
        st.values_reported = true;
        st.recent.clear();
        return;
    }
    let report = format!(
        "MirrorCL: rank {}: the replicas diverged (MIRRORCL_VERIFY), found at {point}.{}",
        node.rank,
        first_difference(&lists)
    );
    crate::diag!("{report}\nMirrorCL: a replica fed the runtime other calls or data (rank-dependent input, unseeded randomness, host threads?); aborting the job.");
    node.abort();
}

/// The first call of the ranks' lists that differs, with the ranks grouped by what they
/// called there; empty if the lists agree. A difference in the calls or their data comes
/// first; one in argument values only if there is no other.
fn first_difference(lists: &[Vec<RecordedCall>]) -> String {
    let of = |value: bool| -> Vec<Vec<RecordedCall>> {
        (lists.iter())
            .map(|l| l.iter().filter(|c| c.value == value).cloned().collect())
            .collect()
    };
    let harmful = first_difference_in(&of(false));
    if !harmful.is_empty() {
        return harmful;
    }
    let values = first_difference_in(&of(true));
    if values.is_empty() {
        return values;
    }
    format!(
        "{values}\n  (only a by-value kernel argument differs: harmless if the kernel runs on \
         another rank's device)"
    )
}

fn first_difference_in(lists: &[Vec<RecordedCall>]) -> String {
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        let at: Vec<Option<&RecordedCall>> = lists.iter().map(|l| l.get(i)).collect();
        if at
            .iter()
            .all(|c| c.map(|c| c.hash) == at[0].map(|c| c.hash))
        {
            continue;
        }
        // Group the ranks by what they called there.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (r, c) in at.iter().enumerate() {
            let what = match c {
                Some(RecordedCall {
                    index, hash, name, ..
                }) => {
                    format!("call #{index} {name} (digest {hash:016x})")
                }
                None => "no further call".to_string(),
            };
            match groups.iter_mut().find(|(w, _)| *w == what) {
                Some((_, ranks)) => ranks.push(r),
                None => groups.push((what, vec![r])),
            }
        }
        let mut text = String::from(" The first call that differs:");
        for (what, ranks) in groups {
            text.push_str(&format!("\n  ranks {ranks:?}: {what}"));
        }
        return text;
    }
    String::new()
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
    fn the_first_difference_groups_the_ranks() {
        let call = |index, hash, name: &str| RecordedCall {
            index,
            hash,
            name: name.into(),
            value: false,
        };
        let same = vec![call(5, 1, "clFinish"), call(6, 2, "clSetKernelArg")];
        let mut other = same.clone();
        other[1] = call(6, 0xab, "clSetKernelArg");
        let lists = vec![same.clone(), other, same[..1].to_vec(), same.clone()];
        assert_eq!(
            first_difference(&lists),
            " The first call that differs:\n  ranks [0, 3]: call #6 clSetKernelArg (digest \
             0000000000000002)\n  ranks [1]: call #6 clSetKernelArg (digest \
             00000000000000ab)\n  ranks [2]: no further call"
        );
        assert_eq!(first_difference(&[same.clone(), same.clone()]), "");
        // A differing argument value comes after a differing call, even an earlier one.
        let value = |index, hash| RecordedCall {
            value: true,
            ..call(index, hash, "clSetKernelArg")
        };
        let a = vec![value(1, 1), call(2, 5, "clEnqueueWriteBuffer (data)")];
        let b = vec![value(1, 2), call(2, 6, "clEnqueueWriteBuffer (data)")];
        let report = first_difference(&[a.clone(), b]);
        assert!(
            report.contains("call #2 clEnqueueWriteBuffer (data)"),
            "{report}"
        );
        let c = vec![value(1, 2), a[1].clone()];
        let report = first_difference(&[a, c]);
        assert!(report.contains("call #1 clSetKernelArg"), "{report}");
        assert!(
            report.contains("only a by-value kernel argument differs"),
            "{report}"
        );
    }
}
