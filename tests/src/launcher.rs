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

impl std::str::FromStr for Mpi {
    type Err = String;

    /// `MIRRORCL_BUILD_MPI`'s spelling: `openmpi` or `mpich`.
    fn from_str(s: &str) -> Result<Mpi, String> {
        match s {
            "openmpi" => Ok(Mpi::OpenMpi),
            "mpich" => Ok(Mpi::Mpich),
            _ => Err(format!("{s}: use openmpi or mpich")),
        }
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

    /// What comes before the ranks' contexts: `placement_args`, and every rank's standard
    /// output and error to files under `dir` (`rank_output`).
    pub fn job_args(self, dir: &Path) -> Vec<String> {
        let dir = dir.display();
        let mut args = self.placement_args();
        match self {
            Mpi::OpenMpi => args.extend(["--output-filename".into(), dir.to_string()]),
            Mpi::Mpich => args.extend([
                "-outfile-pattern".into(),
                format!("{dir}/rank.%r.stdout"),
                "-errfile-pattern".into(),
                format!("{dir}/rank.%r.stderr"),
            ]),
        }
        args
    }

    /// Any number of ranks on this machine's cores, unbound (Open MPI refuses more ranks
    /// than cores and binds by default; Hydra does neither).
    pub fn placement_args(self) -> Vec<String> {
        match self {
            Mpi::OpenMpi => vec!["--oversubscribe".into(), "--bind-to".into(), "none".into()],
            Mpi::Mpich => Vec::new(),
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
    /// and a temporary directory of the job's own (`tmpdir`): concurrent jobs race on
    /// creating the shared one.
    pub fn prepare(self, cmd: &mut Command, tmpdir: &Path) {
        self.allow_root(cmd);
        if self == Mpi::OpenMpi {
            cmd.env("OMPI_MCA_orte_tmpdir_base", tmpdir);
        }
    }

    /// Open MPI refuses to run as root unless told twice.
    pub fn allow_root(self, cmd: &mut Command) {
        if self == Mpi::OpenMpi {
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
    }

    /// The MPI's description of itself, on one line, from its launcher: "mpirun (Open MPI)
    /// 4.1.4", "MPICH 4.0.2 (Hydra)".
    pub fn version(self) -> String {
        let text = Command::new(self.launcher())
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        match self {
            Mpi::OpenMpi => text.lines().next().unwrap_or_default().trim().to_string(),
            Mpi::Mpich => {
                let v = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("Version:"))
                    .map_or("", str::trim);
                format!("MPICH {v} (Hydra)")
            }
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
