//! The `mirrorcl` command: `run` (the mpirun or srun line built for the user), `devices`
//! (the cluster's device table) and `doctor` (what a machine lacks, and how to fix it).

use mirrorcl_tests::{compile, mpi_tmpdir, target_dir, Mpi, Way};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mirrorcl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let exe = target_dir().join("release").join("mirrorcl");
    assert!(
        exe.is_file(),
        "{} missing: cargo build --release",
        exe.display()
    );
    let tmpdir = mpi_tmpdir().expect("an OpenMPI tmpdir");
    let mut cmd = Command::new(&exe);
    cmd.args(args)
        .env("OMPI_MCA_orte_tmpdir_base", &tmpdir)
        .env_remove("LD_PRELOAD")
        .env_remove("OCL_ICD_VENDORS")
        // Outside Slurm unless a test says otherwise, whatever runs the tests.
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_MPI_TYPE")
        .env("POCL_KERNEL_CACHE", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run mirrorcl");
    let _ = std::fs::remove_dir_all(&tmpdir);
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `mirrorcl run`: one copy of the program's output, the job's exit status.
#[test]
fn run_prints_one_copy_of_the_output() {
    let bin = compile("cluster_replica", Way::Preload).expect("compile");
    let out = mirrorcl(
        &["run", "-n", "3", "--", bin.to_str().unwrap()],
        &[("POCL_DEVICES", "pthread")],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(
        stdout.matches("hello from the program").count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("PASS cluster_replica").count(),
        1,
        "{stdout}"
    );
    // The line it runs: preload, and for Open MPI oversubscription on this 2-core machine
    // (Hydra places any number of ranks).
    let dry = mirrorcl(&["run", "-n", "3", "--dry-run", "--", "/bin/true"], &[]);
    let line = text(&dry.stdout);
    assert!(line.contains("libmirrorcl.so"), "{line}");
    match mirrorcl_tests::mpi() {
        Mpi::OpenMpi => {
            assert!(line.contains("-np 3"), "{line}");
            assert!(line.contains("LD_PRELOAD="), "{line}");
            assert!(line.contains("--oversubscribe"), "{line}");
        }
        Mpi::Mpich => {
            assert!(line.contains(" -n 3 "), "{line}");
            assert!(line.contains("-genv LD_PRELOAD /"), "{line}");
        }
    }
    assert!(
        !line.contains("OCL_ICD_VENDORS"),
        "passed only when set: {line}"
    );
    // Mistakes name the cause.
    let bad = mirrorcl(&["run", "--", "/bin/true"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("-n N is required"));
    let bad = mirrorcl(&["run", "-n", "2", "--", "./no-such-program"], &[]);
    assert!(
        text(&bad.stderr).contains("no such program"),
        "{}",
        text(&bad.stderr)
    );
}

/// `mirrorcl devices -n 2`: every device of every rank, with its owner.
#[test]
fn devices_lists_the_cluster() {
    let out = mirrorcl(
        &["devices", "-n", "2"],
        &[("POCL_DEVICES", "pthread pthread")],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("2 rank(s), 4 device(s)"), "{stdout}");
    let owners: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("Portable Computing Language"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(owners, vec!["0", "0", "1", "1"], "{stdout}");
}

/// `mirrorcl doctor`: ready here; a broken vendor entry is named with its fix.
#[test]
fn doctor_checks_the_machine() {
    let out = mirrorcl(&["doctor"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for needle in [
        "Portable Computing Language",
        "libOpenCL.so.1 loads",
        "): no Slurm allocation",
        "thread level Multiple",
        "ready",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
    let dir = target_dir().join("ctests").join("broken-vendors");
    std::fs::create_dir_all(&dir).expect("directory");
    std::fs::write(dir.join("broken.icd"), "libno-such-opencl.so.1\n").expect("icd");
    let out = mirrorcl(
        &["doctor"],
        &[
            ("MIRRORCL_VENDORS", dir.to_str().unwrap()),
            ("MIRRORCL_DOCTOR_SKIP_MPI", "1"),
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("PROBLEM"), "{stdout}");
    assert!(stdout.contains("broken.icd"), "{stdout}");
    assert!(stdout.contains("libno-such-opencl.so.1"), "{stdout}");
    assert!(stdout.contains("fix:"), "{stdout}");
}

/// `run --hostfile F`: what ranks on other hosts need travels with `-x`: the library, the
/// loader's variables when set, `MIRRORCL_*` (the host identity too) and `POCL_*`.
#[test]
fn hostfile_run_passes_what_remote_hosts_need() {
    let dir = target_dir().join("ctests").join("cli-hostfile");
    std::fs::create_dir_all(&dir).expect("directory");
    let hostfile = dir.join("hosts");
    std::fs::write(&hostfile, "localhost slots=4\n").expect("hostfile");
    let hosts = hostfile.to_str().unwrap();
    let env = [
        ("LD_LIBRARY_PATH", "/opt/vendor/lib"),
        ("OCL_ICD_VENDORS", "/opt/vendor/icd/"),
        ("OCL_ICD_FILENAMES", "/opt/vendor/lib/libvendor.so"),
        ("MIRRORCL_HOST", "host-a"),
        ("POCL_DEVICES", "pthread"),
    ];
    let args = [
        "run",
        "-n",
        "4",
        "--hostfile",
        hosts,
        "--dry-run",
        "--",
        "/bin/true",
    ];
    let out = mirrorcl(&args, &env);
    let line = text(&out.stdout);
    assert!(out.status.success(), "{line}\n{}", text(&out.stderr));
    assert!(line.contains("mpirun -np 4 "), "{line}");
    assert!(line.contains(&format!("--hostfile {hosts} ")), "{line}");
    assert!(line.contains("-x LD_PRELOAD=/"), "{line}");
    for (k, _) in env {
        assert!(line.contains(&format!("-x {k} ")), "{k}: {line}");
    }
    // The hosts are the hostfile's: no oversubscription of this machine's cores.
    assert!(!line.contains("--oversubscribe"), "{line}");
    assert!(line.ends_with(" /bin/true\n"), "{line}");
    // A hostfile means mpirun, even inside a Slurm allocation; srun refuses one.
    let slurm = FakeSlurm::new("hostfile");
    let out = mirrorcl(&args, &slurm.env("1234"));
    assert!(
        text(&out.stdout).contains("mpirun -np 4 "),
        "{}",
        text(&out.stdout)
    );
    let mut with_srun = args.to_vec();
    with_srun.splice(1..1, ["--launcher", "srun"]);
    let bad = mirrorcl(&with_srun, &slurm.env("1234"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("--hostfile is for mpirun"),
        "{}",
        text(&bad.stderr)
    );
    let missing = mirrorcl(
        &[
            "run",
            "-n",
            "2",
            "--hostfile",
            "/no/such/hosts",
            "--",
            "/bin/true",
        ],
        &[],
    );
    assert!(
        text(&missing.stderr).contains("no such file"),
        "{}",
        text(&missing.stderr)
    );
}

/// A fake Slurm: an `srun` that lists its MPI plugins, or records its arguments and its
/// own environment and exits 3; `SLURM_JOB_ID` makes an allocation.
struct FakeSlurm {
    bin: PathBuf,
    record: PathBuf,
}

impl FakeSlurm {
    fn new(name: &str) -> FakeSlurm {
        let dir = target_dir()
            .join("ctests")
            .join(format!("fake-slurm-{name}"));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("directory");
        let record = dir.join("srun");
        let script = dir.join("srun.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 if [ \"$1\" = --mpi=list ]; then printf 'MPI plugin types are...\\n\\tpmix\\n\\tnone\\n'; exit 0; fi\n\
                 printf '%s\\n' \"$@\" > {0}.args\n\
                 env > {0}.env\n\
                 exit 3\n",
                record.display()
            ),
        )
        .expect("fake srun");
        // Installed by a child process: a file this process had open for writing could
        // be inherited by another test's fork and fail the exec (ETXTBSY).
        let srun = bin.join("srun");
        let installed = Command::new("install")
            .args(["-m", "0755"])
            .arg(&script)
            .arg(&srun)
            .status()
            .expect("install");
        assert!(installed.success(), "install {}", srun.display());
        FakeSlurm { bin, record }
    }

    /// This fake srun first on PATH, inside allocation `job` (the PATH string is leaked:
    /// a few bytes per test).
    fn env(&self, job: &'static str) -> Vec<(&'static str, &'static str)> {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        vec![
            ("PATH", Box::leak(path.into_boxed_str())),
            ("SLURM_JOB_ID", job),
        ]
    }

    fn recorded(&self, what: &str) -> String {
        std::fs::read_to_string(self.record.with_extension(what)).unwrap_or_default()
    }
}

/// Inside a Slurm allocation `run` uses srun (PMIx), the library preloaded in the ranks
/// only; `--launcher` overrides the choice; `doctor` says which and why.
#[test]
fn slurm_allocation_launches_with_srun() {
    let slurm = FakeSlurm::new("run");
    let srun = slurm.bin.join("srun");
    let srun = srun.to_str().unwrap();
    let dry = ["run", "-n", "4", "--dry-run", "--", "/bin/true"];
    let line = text(&mirrorcl(&dry, &slurm.env("1234")).stdout);
    assert!(
        line.starts_with(&format!("{srun} -n 4 --mpi=pmix --export=ALL,LD_PRELOAD=/")),
        "{line}"
    );
    assert!(line.contains("libmirrorcl.so /bin/true"), "{line}");
    // --launcher mpirun overrides; without an allocation, mpirun; a user's plugin wins.
    let mut forced = dry.to_vec();
    forced.splice(1..1, ["--launcher", "mpirun"]);
    let line = text(&mirrorcl(&forced, &slurm.env("1234")).stdout);
    assert!(line.contains("mpirun -np 4 "), "{line}");
    let mut outside = slurm.env("1234");
    outside.retain(|(k, _)| *k != "SLURM_JOB_ID");
    let line = text(&mirrorcl(&dry, &outside).stdout);
    assert!(line.contains("mpirun -np 4 "), "{line}");
    let mut pmi2 = slurm.env("1234");
    pmi2.push(("SLURM_MPI_TYPE", "pmi2"));
    let line = text(&mirrorcl(&dry, &pmi2).stdout);
    assert!(
        line.starts_with(&format!("{srun} -n 4 --export=ALL,")),
        "{line}"
    );
    // An allocation without srun at hand: mpirun (only mpirun on PATH).
    let only_mpirun = target_dir().join("ctests").join("fake-slurm-none");
    std::fs::create_dir_all(&only_mpirun).expect("directory");
    let link = only_mpirun.join("mpirun");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(which("mpirun"), &link).expect("symlink");
    let path = only_mpirun.to_str().unwrap();
    let line = text(&mirrorcl(&dry, &[("PATH", path), ("SLURM_JOB_ID", "1234")]).stdout);
    assert!(line.starts_with(link.to_str().unwrap()), "{line}");

    // The run itself: srun's exit status, the ranks' settings in --export, and srun
    // itself not preloaded (libm stands for a preload the caller had).
    let mut env = slurm.env("77");
    env.extend([("LD_PRELOAD", "libm.so.6"), ("POCL_DEVICES", "pthread")]);
    let out = mirrorcl(&["run", "--output", "all", "--", "/bin/true"], &env);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let args = slurm.recorded("args");
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.len(), 3, "no -n: the allocation's tasks: {args:?}");
    assert_eq!(args[0], "--mpi=pmix");
    assert!(args[1].starts_with("--export=ALL,LD_PRELOAD=/"), "{args:?}");
    assert!(
        args[1].ends_with("libmirrorcl.so,MIRRORCL_OUTPUT=all"),
        "{args:?}"
    );
    assert_eq!(args[2], "/bin/true");
    let env = slurm.recorded("env");
    assert!(!env.contains("LD_PRELOAD="), "srun preloaded: {env}");
    assert!(env.contains("POCL_DEVICES=pthread"), "{env}");
    assert!(env.contains("SLURM_JOB_ID=77"), "{env}");

    // doctor: the choice and its reason, and whether srun has the plugin.
    let mut env = slurm.env("1234");
    env.push(("MIRRORCL_DOCTOR_SKIP_MPI", "1"));
    let stdout = text(&mirrorcl(&["doctor"], &env).stdout);
    assert!(
        stdout.contains(
            "ok       launcher: srun: inside Slurm allocation 1234 (srun --mpi=pmix, listed by srun --mpi=list)"
        ),
        "{stdout}"
    );
    env.push(("SLURM_MPI_TYPE", "cray_shasta"));
    let out = mirrorcl(&["doctor"], &env);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("PROBLEM  launcher: srun: inside Slurm allocation 1234 (srun --mpi=cray_shasta, which srun --mpi=list does not list)"),
        "{stdout}"
    );
}

fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| Path::new(p).is_file())
        .unwrap_or_else(|| panic!("{program} not on PATH"))
}

/// `run` speaks the launcher of the MPI the library was built for: Open MPI's `mpirun`
/// (`-x`) or Hydra's `mpiexec` (`-genv`, `-genvlist`, `-f`, `-ppn`); the other one is
/// refused, naming both; `doctor` names the MPI and its launcher.
#[test]
fn launcher_of_the_built_mpi() {
    let hosts = target_dir().join("ctests").join("cli-hosts-mpi");
    std::fs::create_dir_all(hosts.parent().unwrap()).expect("directory");
    std::fs::write(&hosts, "localhost\n").expect("hostfile");
    let hosts = hosts.to_str().unwrap();
    let env = [("POCL_DEVICES", "pthread"), ("MIRRORCL_HOST", "a")];
    let dry = |extra: &[&str]| {
        let mut args = vec!["run", "-n", "4", "--per-host", "2"];
        args.extend(extra);
        args.extend(["--dry-run", "--", "/bin/true"]);
        mirrorcl(&args, &env)
    };
    let out = dry(&["--hostfile", hosts]);
    let line = text(&out.stdout);
    assert!(out.status.success(), "{line}{}", text(&out.stderr));
    let (other, ours) = match mirrorcl_tests::mpi() {
        Mpi::OpenMpi => {
            assert!(line.contains("mpirun -np 4 "), "{line}");
            assert!(line.contains(&format!("--hostfile {hosts} ")), "{line}");
            assert!(line.contains("--map-by ppr:2:node "), "{line}");
            assert!(line.contains("-x LD_PRELOAD=/"), "{line}");
            assert!(line.contains("-x MIRRORCL_HOST -x POCL_DEVICES "), "{line}");
            ("mpiexec", "Open MPI")
        }
        Mpi::Mpich => {
            let program = line.split_whitespace().next().unwrap_or_default();
            assert!(
                program.contains("mpiexec") || program.contains("mpirun"),
                "{line}"
            );
            assert!(line.contains(" -n 4 "), "{line}");
            assert!(line.contains(&format!(" -f {hosts} ")), "{line}");
            assert!(line.contains(" -ppn 2 "), "{line}");
            assert!(line.contains(" -genv LD_PRELOAD /"), "{line}");
            let words: Vec<&str> = line.split_whitespace().collect();
            let list = words
                .iter()
                .position(|w| *w == "-genvlist")
                .map(|i| words[i + 1].split(',').collect::<Vec<_>>())
                .unwrap_or_default();
            for k in ["MIRRORCL_HOST", "POCL_DEVICES"] {
                assert!(list.contains(&k), "{k}: {line}");
            }
            ("mpirun", "MPICH")
        }
    };
    assert!(line.ends_with(" /bin/true\n"), "{line}");
    let refused = dry(&["--launcher", other]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains(&format!("this MirrorCL was built for {ours}")),
        "{}",
        text(&refused.stderr)
    );
    let env = [("MIRRORCL_DOCTOR_SKIP_MPI", "1")];
    let stdout = text(&mirrorcl(&["doctor"], &env).stdout);
    assert!(
        stdout.contains(&format!("ok       MPI: built for {ours} (")),
        "{stdout}"
    );
    assert!(stdout.contains("ok       launcher: /"), "{stdout}");
}
