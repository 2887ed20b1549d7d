//! Cluster mode under real `mpirun`: 1–4 ranks on this machine (oversubscribed), each
//! with 1–3 PoCL CPU devices of its own, `libmirrorcl.so` preloaded. Every rank runs the
//! whole program and checks its results bit-exactly against a CPU reference; a test
//! passes when `mpirun` exits 0 and every rank printed `PASS <program>`.
//!
//! Names are `<program>::ranks<R>_dev<D>`, so `cargo test -p mirrorcl-tests --test
//! cluster stencil` runs one program.

use mirrorcl_tests::{
    check_cluster, check_program, cluster_figures, figure, run_cluster, run_cluster_as, Way,
};

macro_rules! cluster_program {
    ($prog:ident: $($name:ident ($ranks:literal, $devs:literal)),+) => {
        mod $prog {
            use super::*;
            $(
                #[test]
                fn $name() {
                    check_cluster(stringify!($prog), $ranks, $devs, &[]);
                }
            )+
        }
    };
}

cluster_program!(cluster_vecadd: ranks1_dev3 (1, 3), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2), ranks4_dev1 (4, 1), ranks4_dev3 (4, 3));
cluster_program!(cluster_turns: ranks1_dev3 (1, 3), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2), ranks4_dev1 (4, 1), ranks4_dev3 (4, 3));
cluster_program!(cluster_stencil: ranks1_dev3 (1, 3), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2), ranks4_dev1 (4, 1), ranks4_dev3 (4, 3));
cluster_program!(cluster_control: ranks1_dev3 (1, 3), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2), ranks4_dev1 (4, 1), ranks4_dev3 (4, 3));
cluster_program!(cluster_attach: ranks1_dev2 (1, 2), ranks3_dev1 (3, 1));
cluster_program!(cluster_alltoall: ranks1_dev3 (1, 3), ranks3_dev2 (3, 2));
cluster_program!(cluster_copies: ranks1_dev3 (1, 3), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(cluster_images: ranks1_dev2 (1, 2), ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
// The single-process suite, replicated: every rank must see the same answers,
// including the error codes of bad calls.
cluster_program!(vecadd_multi: ranks2_dev3 (2, 3), ranks4_dev1 (4, 1));
cluster_program!(platform_device: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(context: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(buffers: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(program_kernel: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(events: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(errors: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(pingpong: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(vendor_fidelity: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(lifetimes: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(images: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(memory_bounded: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
cluster_program!(wait_paths: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));
// Event callbacks that enqueue, a transfer between ranks among them: each runs at
// another point of the program on every rank, as a host thread of its own.
cluster_program!(callback_enqueues: ranks2_dev1 (2, 1), ranks3_dev2 (3, 2));

/// Event callbacks that enqueue beside a named host thread: race checks and waits paired
/// by command name take the callbacks' commands as their slots' (`CALLBACK_WITH_THREAD`).
#[test]
fn callbacks_enqueue_beside_named_threads() {
    for (ranks, devs) in [(2, 1), (3, 2)] {
        check_cluster(
            "callback_enqueues",
            ranks,
            devs,
            &[("CALLBACK_WITH_THREAD", "1")],
        );
    }
}

/// Build results are the owners': every rank prints the same status, log length and
/// log hash for every device, and the same kernel work-group answers.
#[test]
fn build_failure_is_reported_identically_on_every_rank() {
    for (ranks, devs) in [(2, 2), (3, 1)] {
        let out = check_cluster("cluster_build", ranks, devs, &[]);
        for prefix in ["build-log device", "wg device", "device "] {
            let lines = out.same_lines_on_every_rank(prefix);
            assert_eq!(
                lines.len(),
                (ranks * devs) as usize,
                "one `{prefix}` line per device on rank 0\n{}",
                out.report()
            );
        }
        let logs = out.lines_with("build-log device");
        assert!(
            logs[0]
                .iter()
                .all(|l| l.contains("status -2") && !l.contains("length 0 ")),
            "every device reports CL_BUILD_ERROR with a log: {:?}",
            logs[0]
        );
    }
}

/// `clSetKernelArg` and `clEnqueueNDRangeKernel` give every rank the same answer, the
/// vendor's own, whichever rank owns the one device a program is built for (ranks once
/// diverged there). Every rank checks PoCL's codes (the native run validates them; a
/// by-value size PoCL rounds up may also be refused, as NVIDIA does) and prints one
/// line per call; the lines must be the same on every rank.
#[test]
fn kernel_argument_answers_agree_on_every_rank() {
    check_program("cluster_args", Way::Native, 2);
    for (ranks, devs) in [(1, 2), (2, 1), (3, 1)] {
        let out = check_cluster("cluster_args", ranks, devs, &[]);
        let lines = out.same_lines_on_every_rank("arg ");
        assert!(
            lines.len() > 40 * (ranks * devs) as usize,
            "one `arg` line per call\n{}",
            out.report()
        );
    }
}

/// A program that initialises MPI itself keeps its own MPI: MirrorCL works on a
/// duplicate of its world and leaves finalisation to it.
#[test]
fn hybrid_mpi_program() {
    for (ranks, devs) in [(1, 2), (3, 1)] {
        let out = run_cluster_as("cluster_hybrid", Way::Mpi, ranks, devs, &[])
            .expect("run the hybrid program");
        assert!(out.passed(), "{}", out.report());
    }
}

/// One vendor context per device: data between two devices of one rank also takes the
/// host copy, which is replicated (a broadcast).
#[test]
fn stencil_with_separate_vendor_contexts() {
    check_cluster(
        "cluster_stencil",
        2,
        2,
        &[("MIRRORCL_CONTEXT_PER_DEVICE", "1")],
    );
}

/// The application thread issues only the commands it would wait for itself, as for GPUs
/// (`MIRRORCL_CALLER_ISSUES=waited`; "auto" has it issue every command that does not
/// block on CPU devices): blocking reads whose bytes go to every rank, halo copies after
/// a wait.
#[test]
fn caller_issues_in_a_cluster() {
    for program in ["cluster_stencil", "cluster_alltoall", "cluster_vecadd"] {
        check_cluster(program, 2, 2, &[("MIRRORCL_CALLER_ISSUES", "waited")]);
    }
}

/// A kernel the program asked no event for, launched by its own thread after a wait (as
/// for GPUs: `MIRRORCL_CALLER_ISSUES=waited`), goes to the vendor without a vendor event
/// and is backed later (`issuer::Unbacked`). `wait_paths` awaits such kernels every way,
/// bit-exact on every rank; some need a marker (another device waits for them). Also
/// with jobs held as for GPUs (`MIRRORCL_HOLD_ALL=1`).
#[test]
fn kernels_launched_without_a_vendor_event() {
    let waited = ("MIRRORCL_CALLER_ISSUES", "waited");
    for (ranks, devs) in [(1, 3), (2, 1)] {
        let figures = cluster_figures("wait_paths", ranks, devs, &[waited]);
        let f = &figures[0];
        assert!(
            figure(f, "kernels_unbacked") > 0 && figure(f, "unbacked_by_marker") > 0,
            "{ranks} rank(s): no kernel went without a vendor event, or none was backed by \
             a marker: {f}"
        );
    }
    check_cluster("wait_paths", 3, 2, &[waited, ("MIRRORCL_HOLD_ALL", "1")]);
}

/// The GPUs' way of issuing, on CPU devices (`MIRRORCL_HOLD_ALL=1`, as for every vendor
/// but PoCL; `MIRRORCL_CALLER_ISSUES=waited`, as for GPUs): jobs held until the vendor
/// can wait on what they wait for, and a read that feeds another rank put right behind
/// the command that wrote its bytes, ahead of jobs held on that queue (`issuer.rs`:
/// `Held::hold`). `events` and `buffers` chain commands across both ranks' devices: two
/// reads feeding the other rank, put behind one writer, keep their order there (the
/// later one first hung both).
#[test]
fn issued_as_for_gpus() {
    let env = [
        ("MIRRORCL_HOLD_ALL", "1"),
        ("MIRRORCL_CALLER_ISSUES", "waited"),
    ];
    for (program, ranks, devs) in [
        ("cluster_alltoall", 4, 1),
        ("cluster_alltoall", 3, 2),
        ("cluster_copies", 3, 2),
        ("cluster_stencil", 4, 1),
        ("pingpong", 3, 2),
        ("events", 2, 1),
        ("buffers", 2, 1),
        ("callback_enqueues", 2, 1),
    ] {
        check_cluster(program, ranks, devs, &env);
    }
}

/// An all-to-all issued as for GPUs: each rank's piece from every other rank lands
/// beside the others in its destination, and its own piece comes from the read that fed
/// the other ranks; the writes of those that are ready together go as one vendor write
/// (`issuer.rs`: `Held::landed_after`, `run_merged`; `submit.rs`: `copy_from_sent_read`).
/// Rank 0, whose own piece comes first, reads it ahead for the others. Every rank checks
/// every piece, bit-exact, and the statistics show merged writes and reads ahead.
#[test]
fn landed_writes_merge() {
    let env = [("MIRRORCL_HOLD_ALL", "1"), ("CLUSTER_ITERS", "300")];
    let figures = cluster_figures("cluster_alltoall", 4, 1, &env);
    let merged: Vec<u64> = figures.iter().map(|f| figure(f, "writes_merged")).collect();
    println!("writes merged per rank: {merged:?}");
    assert!(
        merged.iter().sum::<u64>() > 0,
        "no landed writes went together: {merged:?}"
    );
    // Rank 0's own piece comes before its read for the others in its queue: after the
    // first iteration it reads ahead for them (`read_for_predicted_sends`).
    let ahead: Vec<u64> = figures.iter().map(|f| figure(f, "reads_ahead")).collect();
    println!("local copies read ahead per rank: {ahead:?}");
    assert!(ahead[0] > 0, "rank 0 never read ahead: {ahead:?}");
}

/// A program far ahead of its ranks' transfers: IV.7.2 for 1,500 iterations without a
/// bound on the commands in flight (thousands of receives planned, posted 64 at a time
/// and tested a window at a time by the progress thread, `comm/mpi.rs`: `post_waiting`,
/// `turn_window`), and with the default bound (`Queue::keep_pace`). Every rank checks
/// the copies against its own reference.
#[test]
fn far_ahead_of_the_transfers() {
    for ahead in ["0", "64"] {
        // 64: the bound reached every few iterations (the default, 1024, only in long runs).
        let env = [("CLUSTER_ITERS", "1500"), ("MIRRORCL_AHEAD", ahead)];
        check_cluster("cluster_alltoall", 3, 1, &env);
    }
}

/// Ranks sharing a host may split its CPU devices like GPUs: 3 ranks, 3 PoCL devices
/// each on this host, one per rank.
#[test]
fn cpu_devices_split_between_ranks() {
    check_cluster(
        "cluster_vecadd",
        3,
        3,
        &[
            ("MIRRORCL_CPU_DEVICES", "split"),
            ("CTEST_EXPECT_DEVICES", "3"),
        ],
    );
}

/// A wait that cannot complete (a kernel behind a user event nobody sets, read from
/// another rank) ends the job within the deadline with a report naming the command, the
/// owner rank and the buffer, not a hang.
#[test]
fn a_wait_that_cannot_complete_ends_with_a_diagnostic() {
    let out = run_cluster("cluster_timeout", 2, 1, &[("MIRRORCL_WAIT_TIMEOUT", "3")])
        .expect("run cluster_timeout");
    assert!(
        out.status.is_some_and(|s| !s.success()),
        "the job must fail\n{}",
        out.report()
    );
    assert!(out.elapsed.as_secs() < 60, "{}", out.report());
    let stderr = out.all_stderr();
    for needle in [
        "MirrorCL: rank 1 waited",
        "MirrorCL: rank 0 waited",
        "(clEnqueueReadBuffer) on device 1",
        "owned by rank 1",
        "It uses buffer #",
        "MIRRORCL_WAIT_TIMEOUT",
    ] {
        assert!(
            stderr.contains(needle),
            "missing {needle:?} in the ranks' reports\n{}",
            out.report()
        );
    }
    assert!(
        !out.outputs.iter().any(|(o, _)| o.contains("UNEXPECTED")),
        "{}",
        out.report()
    );
}

/// A rank that owns no device (more ranks than devices on its host) is a full member:
/// it runs the program, gets every answer the owners' vendors give (argument checks,
/// build results, bytes read) and checks its results like the others.
#[test]
fn a_rank_without_devices_runs_the_program() {
    let split = [
        ("MIRRORCL_CPU_DEVICES", "split"),
        ("CTEST_EXPECT_DEVICES", "1"),
    ];
    for prog in [
        "program_kernel",
        "errors",
        "cluster_build",
        "cluster_vecadd",
        "vendor_fidelity",
        "images",
        "cluster_args",
    ] {
        check_cluster(prog, 2, 1, &split);
    }
}

/// `MIRRORCL_MAX_DEVICES` limits what each rank owns, after the ranks of a host split
/// its devices: two ranks on a host of two devices with a limit of 1 own one each.
#[test]
fn max_devices_limits_each_rank() {
    check_cluster(
        "vecadd_multi",
        2,
        2,
        &[
            ("MIRRORCL_CPU_DEVICES", "split"),
            ("MIRRORCL_MAX_DEVICES", "1"),
            ("CTEST_EXPECT_DEVICES", "2"),
        ],
    );
}

/// What the host reads reaches every rank down a relay tree: the rank that owns the
/// bytes sends at most two copies of a large read, so no rank's outgoing bytes grow
/// with the rank count, and every rank checks them. `cluster_big` fills a 1 MiB buffer
/// on the first rank's device and reads it back whole (a map) besides point-to-point
/// copies between the first and last ranks; its 4 KiB slices are small reads, which the
/// owner still sends to every rank itself (a few KiB more per rank).
#[test]
fn host_reads_relay_without_growing_any_ranks_sends() {
    let env = [("CLUSTER_BIG_BYTES", "1048576")];
    let most_sent = |ranks: u32| {
        let figures = cluster_figures("cluster_big", ranks, 1, &env);
        let sent: Vec<u64> = figures.iter().map(|f| figure(f, "bytes_sent")).collect();
        let received: Vec<u64> = figures
            .iter()
            .map(|f| figure(f, "bytes_received"))
            .collect();
        println!("{ranks} ranks: bytes sent {sent:?}, received {received:?}");
        *sent.iter().max().expect("ranks")
    };
    let (four, eight) = (most_sent(4), most_sent(8));
    assert!(
        four > 2 << 20,
        "a read of 1 MiB and copies were sent: {four}"
    );
    // Sent by every owner to each rank, the whole reads alone would add 8 MiB.
    assert!(
        eight < four + (256 << 10),
        "the most any rank sends: {four} bytes at 4 ranks, {eight} at 8"
    );
}

/// A host program with one thread per device (AMD's multi-GPU pattern: maps,
/// unmaps, kernels, polled events, a shared output written through sub-buffers) runs
/// on N ranks, bit-exact on every rank, whether its threads take turns or run at once.
/// What MirrorCL cannot name (threads created by a thread other than the main one)
/// must take turns, and interleaving them ends the job at once, naming the rule; two
/// threads racing on one buffer end it naming both calls.
#[test]
fn host_threads_run_on_every_rank() {
    for (ranks, devs) in [(2, 1), (2, 2), (3, 1)] {
        check_cluster("cluster_threads", ranks, devs, &[]);
    }
    let concurrent = [("THREADS_MODE", "concurrent")];
    for way in [Way::Native, Way::Preload] {
        mirrorcl_tests::check_program_with("cluster_threads", way, 3, &concurrent);
    }
    for (ranks, devs) in [(1, 3), (2, 1), (2, 2), (3, 1), (4, 1)] {
        check_cluster("cluster_threads", ranks, devs, &concurrent);
    }
    // Three threads per device share its issuer and its transfers.
    let shared = [("THREADS_MODE", "concurrent"), ("THREADS_PER_DEVICE", "3")];
    check_cluster("cluster_threads", 2, 1, &shared);
    let ends_saying = |mode: &str, ranks: u32, devs: u32, words: &[&str]| {
        let out = run_cluster("cluster_threads", ranks, devs, &[("THREADS_MODE", mode)])
            .expect("mpirun runs");
        assert!(
            !out.status.is_some_and(|s| s.success()),
            "{mode} must end the job\n{}",
            out.report()
        );
        assert!(
            out.elapsed.as_secs() < 60,
            "the job ended at once, not at a deadline\n{}",
            out.report()
        );
        let said = out.all_stderr() + &out.mpirun_output;
        for w in words {
            assert!(
                said.contains(w),
                "{mode}: the report says {w:?}\n{}",
                out.report()
            );
        }
    };
    ends_saying("nested", 2, 2, &["host threads must take turns"]);
    ends_saying(
        "race",
        2,
        1,
        &[
            "host threads race on buffer",
            "clEnqueueNDRangeKernel on host thread",
        ],
    );
}

/// A hybrid program linked against the other MPI family than the library's (both then in
/// one process) ends at start-up, before `main`, with one line naming both MPIs.
#[test]
fn a_program_of_the_other_mpi_ends_at_start() {
    let other = mirrorcl_tests::mpi().other();
    let dir = mirrorcl_tests::target_dir()
        .join("ctests")
        .join("other-mpi");
    std::fs::create_dir_all(&dir).expect("directory");
    let bin = dir.join("cluster_hybrid");
    let built = std::process::Command::new(other.mpicc())
        .args(["-O2", "-std=c11", "-o"])
        .arg(&bin)
        .arg("-I")
        .arg(mirrorcl_tests::c_dir())
        .arg(mirrorcl_tests::c_dir().join("cluster_hybrid.c"))
        .args(["-lOpenCL", "-lm"])
        .status()
        .expect("run the other MPI's compiler");
    assert!(built.success(), "{} failed", other.mpicc());
    let env = [
        (
            "LD_PRELOAD".to_string(),
            mirrorcl_tests::mirrorcl_lib().display().to_string(),
        ),
        ("POCL_DEVICES".to_string(), "pthread".to_string()),
    ];
    let argv = [bin.display().to_string()];
    let tmpdir = mirrorcl_tests::mpi_tmpdir().expect("tmpdir");
    let mut cmd = std::process::Command::new(other.launcher());
    cmd.args(other.placement_args())
        .args(other.context_args(2, &env, &argv))
        .env_remove("LD_PRELOAD");
    other.prepare(&mut cmd, &tmpdir);
    let start = std::time::Instant::now();
    let out = cmd.output().expect("run the other MPI's launcher");
    let _ = std::fs::remove_dir_all(&tmpdir);
    let said = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(start.elapsed().as_secs() < 30, "{said}");
    let lines: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("MirrorCL: this libmirrorcl.so was built for"))
        .collect();
    assert_eq!(lines.len(), 1, "one line, from rank 0: {said}");
    let ours = mirrorcl_tests::mpi().name();
    assert!(lines[0].contains(&format!("built for {ours} (")), "{said}");
    assert!(
        lines[0].contains(&format!("but the program loaded {} (", other.name())),
        "{said}"
    );
    assert!(!said.contains("PASS cluster_hybrid"), "{said}");
}
