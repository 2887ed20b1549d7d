//! Replicas that behave as one program: the same random numbers on every rank, one copy
//! of the output, one writer of each file, and hybrid programs that seed before they
//! initialise MPI.

use mirrorcl_tests::{check_cluster, run_cluster, run_cluster_as, target_dir, Mpi, Way};

/// Seeded from the clock and the pid: without rank 0's seeds everywhere, another rank's
/// device would compute on other input and this rank's check would fail.
#[test]
fn clock_seeded_program_is_right_on_every_rank() {
    for (ranks, devs) in [(2, 1), (4, 1), (3, 2)] {
        check_cluster("cluster_replica", ranks, devs, &[]);
    }
}

/// A file the program appends one line to gets exactly one line, from rank 0.
#[test]
fn an_appended_file_gets_one_line() {
    let dir = target_dir().join("ctests").join("replica-files");
    std::fs::create_dir_all(&dir).expect("directory");
    let path = dir.join(format!("appended-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().expect("UTF-8").to_string();
    let out = check_cluster("cluster_replica", 3, 1, &[("REPLICA_FILE", &p)]);
    let text = std::fs::read_to_string(&path).expect("rank 0 wrote the file");
    let _ = std::fs::remove_file(&path);
    assert_eq!(text.lines().count(), 1, "{text:?}\n{}", out.report());
    let first = out.lines_with("hello from the program")[0][0].clone();
    let input = first.rsplit(' ').next().expect("input");
    assert!(
        text.contains(input),
        "the line is rank 0's: {text:?} vs {first:?}"
    );

    // MIRRORCL_FILES=all: every rank writes its own line.
    let out = check_cluster(
        "cluster_replica",
        3,
        1,
        &[("REPLICA_FILE", &p), ("MIRRORCL_FILES", "all")],
    );
    let text = std::fs::read_to_string(&path).expect("the ranks wrote the file");
    let _ = std::fs::remove_file(&path);
    assert_eq!(text.lines().count(), 3, "{text:?}\n{}", out.report());
}

/// By default only rank 0's output reaches the terminal; `MIRRORCL_OUTPUT=all` lets
/// every rank's through, each line prefixed with its rank.
#[test]
fn one_copy_of_the_output() {
    let out = run_cluster("cluster_replica", 3, 1, &[("MIRRORCL_OUTPUT", "root")])
        .expect("run cluster_replica");
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.report());
    let hellos = out.lines_with("hello from the program");
    assert_eq!(hellos[0].len(), 1, "{}", out.report());
    assert!(
        hellos[1..].iter().all(|h| h.is_empty()),
        "ranks 1 and 2 print nothing\n{}",
        out.report()
    );
    let out = run_cluster("cluster_replica", 3, 1, &[("MIRRORCL_OUTPUT", "all")])
        .expect("run cluster_replica");
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.report());
    for r in 0..3 {
        let prefixed = out.lines_with(&format!("[rank {r}] PASS cluster_replica"));
        assert_eq!(prefixed[r].len(), 1, "rank {r}\n{}", out.report());
    }
}

/// A hybrid program that seeds rand() before MPI_Init_thread: MirrorCL initialises MPI
/// for the seed, and the program's own MPI_Init_thread and MPI_Finalize leave it alone.
#[test]
fn hybrid_program_seeding_before_mpi_init() {
    for (ranks, devs) in [(1, 2), (3, 1)] {
        let out = run_cluster_as(
            "cluster_hybrid",
            Way::Mpi,
            ranks,
            devs,
            &[("HYBRID_SEED_FIRST", "1")],
        )
        .expect("run the hybrid program");
        assert!(out.passed(), "{}", out.report());
    }
}

/// `MIRRORCL_VERIFY=1`: rank-dependent input is caught at the next synchronisation
/// point, every rank names the first call that differs and the job ends.
#[test]
fn verify_catches_a_divergent_program() {
    // A kernel argument that differs first (harmless where the kernel runs elsewhere)
    // does not hide the harmful write after it.
    for mode in ["", "arg"] {
        verify_names_the_write(mode);
    }
}

fn verify_names_the_write(mode: &str) {
    let env = [("MIRRORCL_VERIFY", "1"), ("DIVERGE", mode)];
    let out = run_cluster("cluster_diverge", 3, 1, &env).expect("run cluster_diverge");
    assert!(
        out.status.is_some_and(|s| !s.success()),
        "the job must fail\n{}",
        out.report()
    );
    let stderr = out.all_stderr();
    for needle in [
        "the replicas diverged (MIRRORCL_VERIFY)",
        "clEnqueueWriteBuffer (data)",
        "ranks [1]",
        "ranks [2]",
    ] {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}\n{}",
            out.report()
        );
    }
}

/// A rank that cannot allocate a buffer's host copy (its address space limited, on the
/// owner of the buffer's device) fails the blocking map on every rank alike, promptly,
/// and the runtime stays usable; without the limit the program passes, natively too.
#[test]
fn a_host_copy_that_cannot_be_allocated_fails_the_map_on_every_rank() {
    check_cluster("cluster_hostfail", 2, 1, &[("HOSTFAIL_RANK", "0")]);
    check_cluster("cluster_hostfail", 2, 1, &[]);
    mirrorcl_tests::check_program("cluster_hostfail", Way::Native, 1);
}

/// Without `MIRRORCL_VERIFY`, replicas that diverge in what they exchange (a buffer of
/// another size on one rank; an extra `clWaitForEvents` on one rank where the others
/// poll) are caught at the first message or collective after it, promptly, with the
/// first call that differs on each rank.
#[test]
fn divergence_in_what_ranks_exchange_is_caught_always() {
    for (mode, needles) in [
        (
            "size",
            &[
                "the replicas diverged",
                "create buffer #1 of 4096 bytes",
                "create buffer #1 of 4160 bytes",
            ][..],
        ),
        (
            "wait",
            &[
                "the replicas diverged",
                "clWaitForEvents",
                "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
            ][..],
        ),
    ] {
        let out = run_cluster("cluster_diverge", 2, 1, &[("DIVERGE", mode)])
            .expect("run cluster_diverge");
        assert!(
            out.status.is_some_and(|s| !s.success()) && out.elapsed.as_secs() < 30,
            "{mode}: the job must fail promptly\n{}",
            out.report()
        );
        let stderr = out.all_stderr();
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{mode}: missing {needle:?}\n{}",
                out.report()
            );
        }
    }
}

/// Replicas that agree pass with verification on (the clock-seeded program included:
/// MirrorCL gave every rank rank 0's seed).
#[test]
fn verify_passes_consistent_programs() {
    for prog in ["cluster_replica", "cluster_stencil", "cluster_turns"] {
        check_cluster(prog, 3, 1, &[("MIRRORCL_VERIFY", "1")]);
    }
}

/// A rank that dies mid-run (SIGKILL, with work the others wait for on its device) ends
/// the whole job well within the wait deadline, with a message naming it and a non-zero
/// status: nobody hangs.
#[test]
fn a_dead_rank_ends_the_job() {
    let out = run_cluster(
        "cluster_crash",
        3,
        1,
        &[("CRASH_RANK", "2"), ("MIRRORCL_WAIT_TIMEOUT", "30")],
    )
    .expect("run cluster_crash");
    assert!(
        out.status.is_some_and(|s| !s.success()),
        "the job must fail\n{}",
        out.report()
    );
    assert!(
        out.elapsed.as_secs() < 30,
        "ended after {:?}\n{}",
        out.elapsed,
        out.report()
    );
    // The launcher's message: Open MPI names the rank; Hydra ends the job at once,
    // naming the process, whose last words name its rank.
    let named = match mirrorcl_tests::mpi() {
        Mpi::OpenMpi => {
            out.mpirun_output.contains("rank 2") && out.mpirun_output.contains("signal 9")
        }
        Mpi::Mpich => {
            out.mpirun_output.contains("BAD TERMINATION")
                && out.mpirun_output.contains("EXIT CODE: 9")
                && out.outputs[2].0.contains("rank 2: dying now")
        }
    };
    assert!(named, "the message names the dead rank\n{}", out.report());
}

/// A command the vendor fails on the rank that runs it (injected: the vendor call
/// returns CL_OUT_OF_RESOURCES) fails on every rank alike: clWaitForEvents and the
/// event's status, and a blocking read that waits for it; the runtime stays usable.
#[test]
fn a_vendor_failure_reaches_every_rank() {
    for (ranks, devs) in [(1, 2), (3, 1), (2, 2)] {
        check_cluster(
            "cluster_fail",
            ranks,
            devs,
            &[("MIRRORCL_INJECT_FAILURE", "1:-5"), ("FAIL_EXPECTED", "1")],
        );
    }
    // Without the failure, the same program passes (and it passes natively, too).
    check_cluster("cluster_fail", 2, 1, &[]);
    mirrorcl_tests::check_program("cluster_fail", Way::Native, 2);
}
