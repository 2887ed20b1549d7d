//! A transfer larger than `i32::MAX` bytes between two ranks (its own test binary, so
//! that it runs alone: it holds several GiB). PoCL allocates at most 2 GiB per buffer,
//! so here the buffer is exactly 2 GiB: 2^31 bytes, one more than an `int` count can
//! say, which MirrorCL moves in 64 MiB pieces through a few staging blocks: from the
//! device of rank 0 to the device of rank 1, then (the whole buffer mapped on rank 1's
//! device) from there into every rank's host copy. The GPU run (`docs/gpu.md`) moves
//! 2 GiB + 64 MiB.

use mirrorcl_tests::check_cluster;

#[test]
fn two_gib_buffer_between_two_ranks() {
    let out = check_cluster(
        "cluster_big",
        2,
        1,
        &[
            ("CLUSTER_BIG_BYTES", "2147483648"),
            ("CLUSTER_BIG_COPY", "0"),
        ],
    );
    for (r, (stdout, _)) in out.outputs.iter().enumerate() {
        assert!(
            !stdout.contains("SKIP"),
            "rank {r} skipped the transfer\n{}",
            out.report()
        );
    }
}
