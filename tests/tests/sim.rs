//! `mirrorcl-sim` against real runs: the simulator's per-rank counts (commands created,
//! not enqueued, scheduled, issued; local copies; messages and bytes sent and received)
//! must equal what `MIRRORCL_STATS` reports for the same program under `mpirun`, rank by
//! rank. Scheduling time is not compared (no two runs share it).

use mirrorcl_scheduler::sim::{simulate, variant_name, Figures, Workload};
use mirrorcl_scheduler::Variant;
use mirrorcl_tests::{cluster_figures, target_dir};
use serde_json::Value;

fn compare(what: &str, real: &[Value], simulated: &[(u32, Figures, Vec<Figures>)]) {
    assert_eq!(real.len(), simulated.len(), "{what}: rank count");
    for (r, f, _) in simulated {
        for (name, value) in Figures::COUNT_NAMES.iter().zip(f.counts()) {
            assert_eq!(
                real[*r as usize][name].as_u64(),
                Some(value),
                "{what}: rank {r}: {name} (real {}, simulated {f:?})",
                real[*r as usize]
            );
        }
    }
}

fn check(prog: &str, workload: Workload, ranks: u32, variant: Variant, env: &[(&str, &str)]) {
    let v = variant_name(variant);
    let mut env = env.to_vec();
    env.push(("MIRRORCL_VARIANT", v));
    let real = cluster_figures(prog, ranks, 1, &env);
    let sim = simulate(ranks, variant, 2, None, &|out| workload.emit(ranks, 1, out));
    compare(&format!("{prog}, {ranks} ranks, {v}"), &real, &sim);
}

/// The IV.7.2 microbenchmark at 2 and 3 ranks, with the queueing optimisation (without
/// the program's own-piece rounds after it, which the workload does not model).
#[test]
fn all_to_all_counts_equal_the_real_runs() {
    for ranks in [2, 3] {
        check(
            "cluster_alltoall",
            Workload::AllToAll { iters: 5 },
            ranks,
            Variant::Full,
            &[("CLUSTER_ITERS", "5"), ("CLUSTER_LOCAL_ROUNDS", "0")],
        );
    }
}

/// The halo exchange at 3 ranks without attach (valid sets decide the sources: the
/// middle rank's figures differ from the others').
#[test]
fn stencil_counts_equal_the_real_run() {
    check(
        "cluster_stencil",
        Workload::Stencil {
            elements: 64 * 1024,
            iters: 20,
        },
        3,
        Variant::Decentralization,
        &[("CLUSTER_ATTACH", "1")],
    );
}

/// Runs `prog` with `MIRRORCL_RECORD` and statistics; checks every rank recorded the
/// same stream, then that replaying rank 0's at the same rank count gives every rank's
/// real counts.
fn record_and_replay(prog: &str, ranks: u32, devices: u32, env: &[(&str, &str)]) {
    let dir = target_dir().join("ctests").join("record");
    std::fs::create_dir_all(&dir).expect("record directory");
    let base = dir.join(format!("{prog}-{ranks}-{}", std::process::id()));
    let base_text = base.to_str().expect("UTF-8 path").to_string();
    let mut all_env = env.to_vec();
    all_env.push(("MIRRORCL_RECORD", &base_text));
    let real = cluster_figures(prog, ranks, devices, &all_env);
    let files: Vec<String> = (0..ranks)
        .map(|r| {
            std::fs::read_to_string(format!("{base_text}.{r}"))
                .unwrap_or_else(|e| panic!("rank {r} recorded nothing: {e}"))
        })
        .collect();
    // A release reaches the scheduler when the buffer's last command lets go of it,
    // which differs between ranks in time though not in effect (ids are never reused):
    // the other items in order, the releases as a set.
    let body = |t: &str| -> (Vec<String>, Vec<String>) {
        let lines = t.lines().filter(|l| !l.starts_with("ranks "));
        let (mut releases, items): (Vec<String>, Vec<String>) = lines
            .map(str::to_string)
            .partition(|l| l.starts_with("release "));
        releases.sort();
        (items, releases)
    };
    for (r, f) in files.iter().enumerate() {
        assert_eq!(body(f), body(&files[0]), "rank {r} sees rank 0's stream");
    }
    let rec = mirrorcl_scheduler::sim::record::parse(&files[0]).expect("the recording parses");
    assert_eq!((rec.ranks, rec.rank), (ranks, 0));
    let workload = Workload::Replay(rec);
    let sim = simulate(ranks, Variant::Full, 2, None, &|out| {
        workload.emit(ranks, 1, out)
    });
    compare(&format!("{prog} replayed at {ranks} ranks"), &real, &sim);
    for r in 0..ranks {
        let _ = std::fs::remove_file(format!("{base_text}.{r}"));
    }
}

/// `MIRRORCL_RECORD` in a real 2-rank run (two devices per rank, attached buffers, a
/// blocking read that learns a wait list's statuses) replays to its counts.
#[test]
fn a_recorded_run_replays_to_its_counts() {
    record_and_replay("cluster_attach", 2, 2, &[]);
}

/// At 5 ranks a 1 MiB buffer read whole goes down the relay tree (the owner sends to two
/// ranks, which pass it on): the replay counts each rank's sends and receives as the
/// real run made them.
#[test]
fn a_recorded_relay_replays_to_its_counts() {
    record_and_replay("cluster_big", 5, 1, &[("CLUSTER_BIG_BYTES", "1048576")]);
}
