//! The replicas' output through wrappers and programs that manage their own
//! descriptors: `MIRRORCL_OUTPUT` holds when the program is started through a command
//! that execs it (`env`, `stdbuf`, a bash script), and MirrorCL's own reports reach
//! each rank's original standard error whatever the program did to its descriptors.

use mirrorcl_tests::{run_cluster_wrapped, target_dir, ClusterOutput, Way};

/// No wrapper, two that exec the program, and a bash script that does (bash has its
/// own getenv and setenv, which lose the environment before bash has started).
const WRAPPERS: [&[&str]; 4] = [
    &[],
    &["env", "OUTPUT_WRAPPED=1"],
    &["stdbuf", "-oL"],
    &["bash", "-c", "exec \"$0\" \"$@\""],
];

fn run(wrapper: &[&str], env: &[(&str, &str)]) -> ClusterOutput {
    let out = run_cluster_wrapped("cluster_output", Way::Preload, wrapper, 2, 1, env)
        .expect("run cluster_output");
    assert!(
        out.status.is_some_and(|s| s.success()),
        "wrapper {wrapper:?}: the job must pass\n{}",
        out.report()
    );
    out
}

/// `MIRRORCL_OUTPUT=all` through a wrapper: no rank dies of SIGPIPE, and each rank's
/// lines, standard output and error and a child process's, arrive once, prefixed once.
#[test]
fn all_mode_through_wrappers() {
    for wrapper in WRAPPERS {
        let out = run(wrapper, &[("MIRRORCL_OUTPUT", "all")]);
        for (r, (stdout, stderr)) in out.outputs.iter().enumerate() {
            let count = |text: &str, line: &str| text.lines().filter(|l| *l == line).count();
            let pass = format!("[rank {r}] PASS cluster_output");
            let err = format!("[rank {r}] a line on standard error");
            let child = format!("[rank {r}] a line from a child process");
            assert_eq!(count(stdout, &pass), 1, "{wrapper:?}\n{}", out.report());
            assert_eq!(count(stdout, &child), 1, "{wrapper:?}\n{}", out.report());
            assert_eq!(count(stderr, &err), 1, "{wrapper:?}\n{}", out.report());
            assert!(
                stdout.lines().chain(stderr.lines()).all(|l| {
                    l.strip_prefix(&format!("[rank {r}] "))
                        .is_some_and(|rest| !rest.starts_with("[rank"))
                }),
                "{wrapper:?}: every line of rank {r} prefixed once\n{}",
                out.report()
            );
        }
    }
}

/// `MIRRORCL_OUTPUT=root` through a wrapper: rank 0's output as it is, nothing from
/// rank 1.
#[test]
fn root_mode_through_wrappers() {
    for wrapper in WRAPPERS {
        let out = run(wrapper, &[("MIRRORCL_OUTPUT", "root")]);
        let (out0, err0) = &out.outputs[0];
        assert!(
            out0.lines().any(|l| l == "PASS cluster_output")
                && out0.lines().any(|l| l == "a line from a child process")
                && err0.lines().any(|l| l == "a line on standard error"),
            "{wrapper:?}: rank 0's output\n{}",
            out.report()
        );
        let (out1, err1) = &out.outputs[1];
        assert!(
            out1.trim().is_empty() && err1.trim().is_empty(),
            "{wrapper:?}: rank 1 prints nothing\n{}",
            out.report()
        );
    }
}

/// The program points its standard error at a file after it started (as pytest's
/// capture does); MirrorCL's report (a configuration error) still reaches every rank's
/// original standard error, in every output mode and through a wrapper, and the
/// program's file holds the program's lines only.
#[test]
fn reports_reach_the_original_stderr() {
    let dir = target_dir().join("ctests").join("output-files");
    std::fs::create_dir_all(&dir).expect("directory");
    for mode in ["root", "all", "raw"] {
        for wrapper in WRAPPERS {
            let path = dir.join(format!("own-stderr-{}-{mode}.txt", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let p = path.to_str().expect("UTF-8");
            let out = run(
                wrapper,
                &[
                    ("MIRRORCL_OUTPUT", mode),
                    ("OWN_STDERR", p),
                    ("MIRRORCL_CONFIG", "/nonexistent/mirrorcl.toml"),
                ],
            );
            let own = std::fs::read_to_string(&path).unwrap_or_default();
            let _ = std::fs::remove_file(&path);
            let report = "MirrorCL: configuration error: MIRRORCL_CONFIG=/nonexistent";
            for (r, (_, stderr)) in out.outputs.iter().enumerate() {
                assert_eq!(
                    stderr.matches(report).count(),
                    1,
                    "{mode} {wrapper:?}: rank {r}'s report on its standard error\n{}",
                    out.report()
                );
            }
            assert!(
                !own.contains("MirrorCL") && own.matches("own standard error").count() == 2,
                "{mode} {wrapper:?}: the program's file: {own:?}\n{}",
                out.report()
            );
        }
    }
}

/// The same for the report that ends a job, a divergence (`MIRRORCL_VERIFY`), in the
/// default mode: rank 0's original standard error has it, the program's file does not.
#[test]
fn a_divergence_report_reaches_the_original_stderr() {
    let dir = target_dir().join("ctests").join("output-files");
    std::fs::create_dir_all(&dir).expect("directory");
    let path = dir.join(format!("own-stderr-{}-diverge.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().expect("UTF-8");
    let out = run_cluster_wrapped(
        "cluster_output",
        Way::Preload,
        &[],
        2,
        1,
        &[
            ("MIRRORCL_OUTPUT", "root"),
            ("OWN_STDERR", p),
            ("OUTPUT_DIVERGE", "1"),
            ("MIRRORCL_VERIFY", "1"),
        ],
    )
    .expect("run cluster_output");
    let own = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.is_some_and(|s| !s.success()),
        "the job must fail\n{}",
        out.report()
    );
    assert!(
        out.outputs[0]
            .1
            .contains("the replicas diverged (MIRRORCL_VERIFY)"),
        "rank 0's report on its standard error\n{}",
        out.report()
    );
    assert!(!own.contains("MirrorCL"), "the program's file: {own:?}");
}
