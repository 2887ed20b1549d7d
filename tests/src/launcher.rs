//! The MPI the suite runs cluster jobs under, and how its launcher is spoken to.
//!
//! `MIRRORCL_BUILD_MPI` names it, as for `.ci/setup`: `openmpi` (the default: Open MPI's
//! `mpirun`) or `mpich` (MPICH's Hydra `mpiexec`, with the library built against MPICH
//! into `target/mpich`, which `CARGO_TARGET_DIR` names for the run).

use std::path::{Path, PathBuf};
use std::process::Command;

/// An MPI and its launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mpi {
    OpenMpi,
    Mpich,
}

/// The MPI this run of the suite uses (`MIRRORCL_BUILD_MPI`).
pub fn mpi() -> Mpi {
    match std::env::var("MIRRORCL_BUILD_MPI").as_deref() {
        Ok("mpich") => Mpi::Mpich,
        _ => Mpi::OpenMpi,
    }
}

impl Mpi {
    pub fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "Open MPI",
            Mpi::Mpich => "MPICH",
        }
    }

    /// The other family.
    pub fn other(self) -> Mpi {
        match self {
            Mpi::OpenMpi => Mpi::Mpich,
            Mpi::Mpich => Mpi::OpenMpi,
        }
    }

    /// The launcher, by the name Debian gives it beside the other MPI.
    pub fn launcher(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpirun",
            Mpi::Mpich => "mpiexec.mpich",
        }
    }

    /// The compiler wrapper of hybrid MPI + OpenCL programs.
    pub fn mpicc(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpicc",
            Mpi::Mpich => "mpicc.mpich",
        }
    }

    /// The variable in which the launcher tells a process its rank (for wrappers).
    pub fn rank_var(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "OMPI_COMM_WORLD_RANK",
            Mpi::Mpich => "PMI_RANK",
        }
    }

    /// What comes before the ranks' contexts: more ranks than cores, no binding, every
    /// rank's standard output and error to files under `dir` (`rank_output`).
    pub fn job_args(self, dir: &Path) -> Vec<String> {
        let dir = dir.display();
        match self {
            Mpi::OpenMpi => vec![
                "--oversubscribe".into(),
                "--bind-to".into(),
                "none".into(),
                "--output-filename".into(),
                dir.to_string(),
            ],
            Mpi::Mpich => vec![
                "-outfile-pattern".into(),
                format!("{dir}/rank.%r.stdout"),
                "-errfile-pattern".into(),
                format!("{dir}/rank.%r.stderr"),
            ],
        }
    }

    /// One application context: `ranks` processes of `argv`, with `env` set for them only.
    pub fn context_args(
        self,
        ranks: u32,
        env: &[(String, String)],
        argv: &[String],
    ) -> Vec<String> {
        let mut args = match self {
            Mpi::OpenMpi => vec!["-np".into(), ranks.to_string()],
            Mpi::Mpich => vec!["-n".into(), ranks.to_string()],
        };
        for (k, v) in env {
            match self {
                Mpi::OpenMpi => args.extend(["-x".into(), format!("{k}={v}")]),
                Mpi::Mpich => args.extend(["-env".into(), k.clone(), v.clone()]),
            }
        }
        args.extend(argv.iter().cloned());
        args
    }

    /// The separator between application contexts (the same for both launchers).
    pub(crate) const CONTEXT_SEPARATOR: &'static str = ":";

    /// Where rank `r`'s standard output and error went (see `job_args`).
    pub fn rank_output(self, dir: &Path, r: u32) -> Option<(PathBuf, PathBuf)> {
        match self {
            // <dir>/<job>/rank.<r>/{stdout,stderr}.
            Mpi::OpenMpi => {
                let jobs = std::fs::read_dir(dir).ok()?;
                let rank = jobs
                    .flatten()
                    .map(|j| j.path().join(format!("rank.{r}")))
                    .find(|p| p.is_dir())?;
                Some((rank.join("stdout"), rank.join("stderr")))
            }
            Mpi::Mpich => Some((
                dir.join(format!("rank.{r}.stdout")),
                dir.join(format!("rank.{r}.stderr")),
            )),
        }
    }

    /// The launcher's own environment for one job: Open MPI wants leave to run as root,
    /// and a session directory of the job's own (`tmpdir`): concurrent jobs race on
    /// creating the shared one.
    pub fn prepare(self, cmd: &mut Command, tmpdir: &Path) {
        if self == Mpi::OpenMpi {
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_orte_tmpdir_base", tmpdir);
        }
    }

    /// The launcher's line as a user would type it.
    pub fn show(self, args: &[String]) -> String {
        let quoted = args.iter().enumerate().map(|(i, a)| {
            let after_x = i > 0 && args[i - 1] == "-x";
            match a.split_once('=') {
                Some((k, v)) if after_x => format!("{k}={v:?}"),
                _ if a.is_empty() || a.contains(char::is_whitespace) => format!("{a:?}"),
                _ => a.clone(),
            }
        });
        std::iter::once(self.launcher().to_string())
            .chain(quoted)
            .collect::<Vec<_>>()
            .join(" ")
    }
}
