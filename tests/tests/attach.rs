//! `clAttachBufferToDevice` and the queueing optimisation under real `mpirun`, in the
//! thesis' three variants (`MIRRORCL_VARIANT`): results must not change, and the
//! statistics (`MIRRORCL_STATS=<file>`, rank 0 writes every rank's figures as JSON) must
//! show what the techniques are for (Tables IV.6 and IV.7 of the thesis).

use mirrorcl_tests::{check_cluster, cluster_figures as figures, figure as get};

const VARIANTS: [&str; 3] = ["decentralization", "attach", "full"];

/// The stencil (ghost cells between ranks) and the thesis microbenchmark (every device's
/// buffer copied into every device's buffer) give the right bytes in every variant.
#[test]
fn stencil_and_all_to_all_in_every_variant() {
    for variant in VARIANTS {
        for (ranks, devs) in [(2, 2), (4, 1)] {
            check_cluster(
                "cluster_stencil",
                ranks,
                devs,
                &[("MIRRORCL_VARIANT", variant), ("CLUSTER_ATTACH", "1")],
            );
            check_cluster(
                "cluster_alltoall",
                ranks,
                devs,
                &[("MIRRORCL_VARIANT", variant), ("CLUSTER_ITERS", "30")],
            );
        }
    }
}

/// Every buffer attached to its device: the commands a rank issues to its own devices
/// stay the same as ranks are added, while the commands it leaves out grow (Table IV.7).
/// Without the queueing optimisation nothing is left out.
#[test]
fn commands_issued_per_rank_stay_the_same_as_ranks_are_added() {
    let mut issued = Vec::new();
    let mut left_out = Vec::new();
    for ranks in [2, 3, 4] {
        let f = figures("cluster_attach", ranks, 2, &[]);
        // Rank 0 owns devices 0 and 1: 50 kernels and one read each, and one more
        // kernel on device 0 at the end.
        issued.push(get(&f[0], "commands_issued"));
        left_out.push(get(&f[0], "commands_not_enqueued"));
        assert_eq!(
            get(&f[1], "commands_created"),
            get(&f[0], "commands_created"),
            "every rank sees every command"
        );
    }
    assert_eq!(
        issued,
        vec![103, 103, 103],
        "issued by rank 0 for 2, 3, 4 ranks"
    );
    assert!(
        left_out.windows(2).all(|w| w[0] < w[1]),
        "left out by rank 0 for 2, 3, 4 ranks: {left_out:?}"
    );
    for variant in ["decentralization", "attach"] {
        let f = figures("cluster_attach", 3, 2, &[("MIRRORCL_VARIANT", variant)]);
        assert!(
            f.iter().all(|r| get(r, "commands_not_enqueued") == 0),
            "{variant}: nothing is left out: {f:?}"
        );
        assert_eq!(get(&f[0], "commands_issued"), 103, "{variant}");
    }
}

/// A buffer attached to a rank's device crosses the network only when another rank
/// needs it: here only the final reads (every rank receives what the host reads), so
/// rank 1 (neither the first nor the last device's owner, which the program's last
/// step involves) sends exactly its two buffers to every other rank, however many
/// iterations ran on them.
#[test]
fn attached_buffers_cross_the_network_only_when_needed() {
    for ranks in [3u64, 4] {
        let f = figures("cluster_attach", ranks as u32, 2, &[]);
        // Each read sends its bytes (and in their header, its status) to every other
        // rank.
        let buffer = 4096 * 4;
        assert_eq!(get(&f[1], "bytes_sent"), 2 * buffer * (ranks - 1), "{f:?}");
        assert_eq!(get(&f[1], "sends"), 2 * (ranks - 1), "{f:?}");
        assert_eq!(
            get(&f[1], "local_copies"),
            2,
            "the two initial uploads: {f:?}"
        );
    }
}

/// The extension is found through the ICD loader (`clGetExtensionFunctionAddressForPlatform`
/// goes to MirrorCL) and with the library linked directly, in a single process.
#[test]
fn extension_through_the_loader_and_direct() {
    use mirrorcl_tests::{check_program, Way};
    check_program("cluster_attach", Way::Loader, 2);
    check_program("cluster_attach", Way::Direct, 2);
    check_program("cluster_attach", Way::Native, 2);
}

/// Attached buffers between two vendor groups of one rank stage through the host copy (a
/// broadcast every rank takes part in): the queueing optimisation must keep those
/// commands on every rank (one vendor context per device makes every device its own
/// group here).
#[test]
fn attached_buffers_between_vendor_groups_of_one_rank() {
    for program in ["cluster_stencil", "cluster_alltoall"] {
        check_cluster(
            program,
            2,
            2,
            &[
                ("MIRRORCL_CONTEXT_PER_DEVICE", "1"),
                ("CLUSTER_ATTACH", "1"),
                ("CLUSTER_ITERS", "20"),
            ],
        );
    }
}
