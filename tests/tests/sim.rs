//! `mirrorcl-sim` against real runs: the simulator's per-rank counts (commands created,
//! not enqueued, scheduled, issued; local copies; messages and bytes sent and received)
//! must equal what `MIRRORCL_STATS` reports for the same program under `mpirun`, rank by
//! rank. Scheduling time is not compared (no two runs share it).

use mirrorcl_scheduler::Variant;
use mirrorcl_sim::{simulate, variant_name, Figures, Workload};
use mirrorcl_tests::{check_cluster, target_dir};
use serde_json::Value;

/// Every rank's figures of a real run of `prog` (one PoCL device per rank).
fn real(prog: &str, ranks: u32, env: &[(&str, &str)]) -> Vec<Value> {
    let dir = target_dir().join("ctests").join("stats");
    std::fs::create_dir_all(&dir).expect("stats directory");
    let path = dir.join(format!("sim-{prog}-{ranks}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let path_text = path.to_str().expect("UTF-8 path").to_string();
    let mut all_env = env.to_vec();
    all_env.push(("MIRRORCL_STATS", &path_text));
    check_cluster(prog, ranks, 1, &all_env);
    let text = std::fs::read_to_string(&path).expect("rank 0 wrote the statistics");
    let _ = std::fs::remove_file(&path);
    let report: Value = serde_json::from_str(&text).expect("JSON");
    report["ranks"]
        .as_array()
        .expect("per-rank figures")
        .clone()
}

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
    let real = real(prog, ranks, &env);
    let sim = simulate(ranks, variant, 2, None, &|out| workload.emit(ranks, 1, out));
    compare(&format!("{prog}, {ranks} ranks, {v}"), &real, &sim);
}

/// The IV.7.2 microbenchmark at 2 and 3 ranks, with the queueing optimisation.
#[test]
fn all_to_all_counts_equal_the_real_runs() {
    for ranks in [2, 3] {
        check(
            "cluster_alltoall",
            Workload::AllToAll { iters: 5 },
            ranks,
            Variant::Full,
            &[("CLUSTER_ITERS", "5")],
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

/// `MIRRORCL_RECORD` in a real 2-rank run (two devices per rank, attached buffers, a
/// blocking read that learns a wait list's statuses): every rank records the same
/// stream, and replaying rank 0's at 2 ranks gives every rank's real counts.
#[test]
fn a_recorded_run_replays_to_its_counts() {
    let dir = target_dir().join("ctests").join("record");
    std::fs::create_dir_all(&dir).expect("record directory");
    let base = dir.join(format!("attach-{}", std::process::id()));
    let base_text = base.to_str().expect("UTF-8 path").to_string();
    let stats = dir.join(format!("attach-{}.json", std::process::id()));
    let stats_text = stats.to_str().expect("UTF-8 path").to_string();
    check_cluster(
        "cluster_attach",
        2,
        2,
        &[
            ("MIRRORCL_RECORD", &base_text),
            ("MIRRORCL_STATS", &stats_text),
        ],
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("statistics")).expect("JSON");
    let real = report["ranks"]
        .as_array()
        .expect("per-rank figures")
        .clone();
    let files: Vec<String> = (0..2)
        .map(|r| {
            std::fs::read_to_string(format!("{base_text}.{r}"))
                .unwrap_or_else(|e| panic!("rank {r} recorded nothing: {e}"))
        })
        .collect();
    let body = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("ranks "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        body(&files[0]),
        body(&files[1]),
        "every rank sees one stream"
    );
    let rec = mirrorcl_sim::record::parse(&files[0]).expect("the recording parses");
    assert_eq!((rec.ranks, rec.rank), (2, 0));
    assert!(rec.items.len() > 200, "{} items recorded", rec.items.len());
    let workload = Workload::Replay(rec);
    let sim = simulate(2, Variant::Full, 2, None, &|out| workload.emit(2, 1, out));
    compare("cluster_attach replayed at 2 ranks", &real, &sim);
    for r in 0..2 {
        let _ = std::fs::remove_file(format!("{base_text}.{r}"));
    }
    let _ = std::fs::remove_file(&stats);
}
