//! The launcher's line: Open MPI's `mpirun`, Hydra's `mpiexec` (MPICH, Intel MPI,
//! MVAPICH) or Slurm's `srun`, for the MPI this MirrorCL was built for.

use clap::{Args, ValueEnum};
use mirrorcl_runtime::cluster::node::family::Family;
use mirrorcl_runtime::observe::config::Config;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `run` and `devices` need to start ranks.
#[derive(Args)]
pub struct Launch {
    /// Ranks to start (mpirun's `-np N` is accepted too; under srun, default: the
    /// allocation's tasks)
    #[arg(short = 'n', long = "ranks", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub ranks: Option<u32>,
    /// Ranks per host (mpirun --map-by ppr:P:node, mpiexec -ppn P, srun
    /// --ntasks-per-node=P)
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u32).range(1..))]
    pub per_host: Option<u32>,
    /// Cluster configuration, passed to every rank as MIRRORCL_CONFIG
    #[arg(long, value_name = "F.toml")]
    pub config: Option<PathBuf>,
    /// Hostfile: the hosts of the ranks (mpirun --hostfile, mpiexec -f; implies the MPI's
    /// own launcher)
    #[arg(long, value_name = "F")]
    pub hostfile: Option<PathBuf>,
    /// Who starts the ranks (default: srun inside a Slurm allocation, else the launcher of
    /// the MPI this MirrorCL was built for: mpirun for Open MPI, mpiexec for MPICH)
    #[arg(long, value_enum)]
    pub launcher: Option<Launcher>,
    /// libmirrorcl.so to preload (default: $MIRRORCL_LIB, beside this program, ../lib)
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
}

/// The programs that start ranks.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Launcher {
    /// Open MPI's mpirun
    Mpirun,
    /// Hydra's mpiexec: MPICH and the MPIs derived from it
    Mpiexec,
    /// Slurm's srun
    Srun,
}

impl Launcher {
    fn name(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpirun",
            Launcher::Mpiexec => "mpiexec",
            Launcher::Srun => "srun",
        }
    }

    /// The launcher of an MPI family.
    fn of(family: Family) -> Launcher {
        match family {
            Family::OpenMpi => Launcher::Mpirun,
            Family::Mpich => Launcher::Mpiexec,
        }
    }
}

/// The launcher `run` uses, and why: `--launcher`, else the MPI's own for a hostfile, else
/// srun inside a Slurm allocation where srun is at hand, else the MPI's own.
pub fn choose_launcher(explicit: Option<Launcher>, hostfile: bool) -> (Launcher, String) {
    if let Some(l) = explicit {
        return (l, format!("--launcher {}", l.name()));
    }
    let own = Launcher::of(Family::BUILT_FOR);
    if hostfile {
        return (own, "--hostfile names the hosts".into());
    }
    match std::env::var("SLURM_JOB_ID").ok().filter(|j| !j.is_empty()) {
        Some(job) if on_path("srun").is_some() => {
            (Launcher::Srun, format!("inside Slurm allocation {job}"))
        }
        Some(job) => (
            own,
            format!("SLURM_JOB_ID={job} is set, but srun is not on PATH"),
        ),
        None => (own, "no Slurm allocation".into()),
    }
}

/// The MPI plugin the user gave srun in `SLURM_MPI_TYPE` (srun reads it itself).
pub fn users_srun_mpi() -> Option<String> {
    std::env::var("SLURM_MPI_TYPE")
        .ok()
        .filter(|t| !t.is_empty())
}

/// srun's plugin when the user names none: Open MPI 4 (built with PMIx, as Debian's is)
/// needs PMIx for a direct launch; MPICH's PMI client speaks to Slurm's PMI-2 plugin.
pub fn srun_mpi() -> &'static str {
    match Family::BUILT_FOR {
        Family::OpenMpi => "pmix",
        Family::Mpich => "pmi2",
    }
}

/// A launcher program found on PATH, with what its `--version` says.
pub struct MpiLauncher {
    pub path: PathBuf,
    pub family: Option<Family>,
    /// The version, on one line: "mpirun (Open MPI) 4.1.4", "Hydra 4.0.2".
    pub version: String,
}

impl MpiLauncher {
    /// `program` on PATH and its `--version`.
    pub fn probe(program: &str) -> Option<MpiLauncher> {
        let path = on_path(program)?;
        let text = Command::new(&path)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&[o.stdout, o.stderr].concat()).into_owned())
            .unwrap_or_default();
        let family = Family::of_launcher_version(&text);
        let version = match family {
            Some(Family::Mpich) if text.contains("HYDRA") => {
                let v = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("Version:"))
                    .map_or("", str::trim);
                format!("Hydra {v}")
            }
            _ => text.lines().next().unwrap_or_default().trim().to_string(),
        };
        Some(MpiLauncher {
            path,
            family,
            version,
        })
    }

    /// The first launcher on PATH of `family`: the plain names first, then Debian's names
    /// for an MPI installed beside another.
    pub fn find(family: Family) -> Result<MpiLauncher, String> {
        let names: &[&str] = match family {
            Family::OpenMpi => &["mpirun", "mpiexec", "mpirun.openmpi", "mpiexec.openmpi"],
            Family::Mpich => &[
                "mpiexec",
                "mpirun",
                "mpiexec.hydra",
                "mpiexec.mpich",
                "mpirun.mpich",
            ],
        };
        let found: Vec<MpiLauncher> = names.iter().filter_map(|n| Self::probe(n)).collect();
        let others = found
            .iter()
            .map(|l| format!("{} ({})", l.path.display(), l.version))
            .collect::<Vec<_>>()
            .join(", ");
        found
            .into_iter()
            .find(|l| l.family == Some(family))
            .ok_or_else(|| {
                let install = match family {
                    Family::OpenMpi => "Debian/Ubuntu: apt-get install openmpi-bin",
                    Family::Mpich => "Debian/Ubuntu: apt-get install mpich",
                };
                format!(
                    "this MirrorCL was built for {}, and no {} launcher is on PATH{}: put the \
                     site MPI's bin directory on PATH ({install}), or build MirrorCL for the \
                     MPI you have (README: \"Site MPI\")",
                    family.name(),
                    family.name(),
                    if others.is_empty() {
                        String::new()
                    } else {
                        format!(" (found {others})")
                    }
                )
            })
    }
}

/// The library to preload: `--lib`, `MIRRORCL_LIB`, next to this executable, or in
/// `../lib` of it (an installed prefix).
pub fn find_lib(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_path_buf()],
        None => {
            let mut c = Vec::new();
            if let Some(p) = std::env::var_os("MIRRORCL_LIB").filter(|v| !v.is_empty()) {
                c.push(PathBuf::from(p));
            }
            if let Ok(exe) = std::env::current_exe() {
                if let Some(dir) = exe.parent() {
                    c.push(dir.join("libmirrorcl.so"));
                    c.push(dir.join("../lib/libmirrorcl.so"));
                }
            }
            c
        }
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            format!(
                "libmirrorcl.so not found (looked at {}). Build it with `cargo build --release -p \
                 mirrorcl`, install it with `icd/install.sh`, or pass --lib PATH.",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The command that starts `program` on `ranks` ranks (srun: the allocation's tasks when
/// not given).
pub fn launch_command(
    o: &Launch,
    output: Option<&str>,
    ranks: Option<u32>,
    program: &[OsString],
) -> Result<Command, String> {
    let config = match &o.config {
        Some(c) => {
            let c = c
                .canonicalize()
                .map_err(|e| format!("--config {}: {e}", c.display()))?;
            Config::load_file(&c).map_err(|e| format!("--config: {e}"))?;
            Some(c)
        }
        None => None,
    };
    let launcher = choose_launcher(o.launcher, o.hostfile.is_some()).0;
    let mut cmd = if launcher == Launcher::Srun {
        srun_command(o, config.as_deref(), output, ranks)?
    } else {
        if launcher != Launcher::of(Family::BUILT_FOR) {
            return Err(format!(
                "--launcher {}: this MirrorCL was built for {}, whose launcher is {} (README: \
                 \"Site MPI\")",
                launcher.name(),
                Family::BUILT_FOR.name(),
                Launcher::of(Family::BUILT_FOR).name()
            ));
        }
        // Checked here, not by clap, so that the message names the spelling users type.
        let ranks = ranks.ok_or("run: -n N is required (mirrorcl run --help)")?;
        let settings = RankSettings::new(o, config.as_deref(), output)?;
        match Family::BUILT_FOR {
            Family::OpenMpi => mpirun_command(o, &settings, ranks)?,
            Family::Mpich => mpiexec_command(o, &settings, ranks)?,
        }
    };
    // The ranks get the library through the launcher; the launcher itself runs without it.
    cmd.env_remove("LD_PRELOAD");
    cmd.args(program);
    Ok(cmd)
}

/// `srun`: srun hands its environment to the ranks (`--export=ALL`), plus the library and
/// this command's own settings, which only the ranks get.
fn srun_command(
    o: &Launch,
    config: Option<&Path>,
    output: Option<&str>,
    ranks: Option<u32>,
) -> Result<Command, String> {
    if o.hostfile.is_some() {
        return Err(
            "--hostfile is for mpirun and mpiexec; under srun the allocation names the hosts"
                .into(),
        );
    }
    let srun = on_path("srun").ok_or(
        "srun not found on PATH: install Slurm's client commands (Debian/Ubuntu: apt-get \
         install slurm-client) or pass --launcher mpirun (mpiexec for MPICH)",
    )?;
    let lib = find_lib(o.lib.as_deref())?;
    let mut cmd = Command::new(srun);
    if let Some(n) = ranks {
        cmd.arg("-n").arg(n.to_string());
    }
    if let Some(p) = o.per_host {
        cmd.arg(format!("--ntasks-per-node={p}"));
    }
    if users_srun_mpi().is_none() {
        cmd.arg(format!("--mpi={}", srun_mpi()));
    }
    let mut export = vec![format!("LD_PRELOAD={}", lib.display())];
    if let Some(c) = config {
        export.push(format!("MIRRORCL_CONFIG={}", c.display()));
    }
    if let Some(out) = output {
        export.push(format!("MIRRORCL_OUTPUT={out}"));
    }
    // srun splits --export at commas; a value with one cannot be passed that way.
    if let Some(bad) = export.iter().find(|e| e.contains(',')) {
        return Err(format!("cannot pass {bad} through srun --export (a comma)"));
    }
    cmd.arg(format!("--export=ALL,{}", export.join(",")));
    Ok(cmd)
}

/// Variables besides `MIRRORCL_*` and `POCL_*` that ranks on other hosts need when set
/// here: where libraries are found, and which vendors the ICD loader reads.
const PASSED_WHEN_SET: [&str; 3] = ["LD_LIBRARY_PATH", "OCL_ICD_VENDORS", "OCL_ICD_FILENAMES"];

/// What every rank gets from an MPI launcher: the library and this command's settings
/// (name, value), and the variables of this environment passed on by name.
struct RankSettings {
    set: Vec<(String, String)>,
    passed: Vec<String>,
}

impl RankSettings {
    fn new(o: &Launch, config: Option<&Path>, output: Option<&str>) -> Result<Self, String> {
        let lib = find_lib(o.lib.as_deref())?;
        let mut set = vec![("LD_PRELOAD".to_string(), lib.display().to_string())];
        if let Some(c) = config {
            set.push(("MIRRORCL_CONFIG".into(), c.display().to_string()));
        }
        if let Some(out) = output {
            set.push(("MIRRORCL_OUTPUT".into(), out.to_string()));
        }
        let mut passed: Vec<String> = PASSED_WHEN_SET
            .iter()
            .filter(|k| std::env::var_os(k).is_some())
            .map(|k| k.to_string())
            .collect();
        let mut ours: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("MIRRORCL_") || k.starts_with("POCL_"))
            .filter(|k| {
                !matches!(
                    k.as_str(),
                    "MIRRORCL_LIB" | "MIRRORCL_CONFIG" | "MIRRORCL_OUTPUT"
                    // A rank's own record of its output set-up (`replica.rs`).
                    | "MIRRORCL_RANK_STDERR"
                )
            })
            .collect();
        ours.sort();
        passed.extend(ours);
        Ok(RankSettings { set, passed })
    }
}

/// Open MPI's `mpirun`: ranks on other hosts see only what `-x` passes on.
fn mpirun_command(o: &Launch, settings: &RankSettings, ranks: u32) -> Result<Command, String> {
    let mpirun = MpiLauncher::find(Family::OpenMpi)?;
    let mut cmd = Command::new(mpirun.path);
    cmd.arg("-np").arg(ranks.to_string());
    match &o.hostfile {
        Some(h) => {
            if !h.is_file() {
                return Err(format!("--hostfile {}: no such file", h.display()));
            }
            cmd.arg("--hostfile").arg(h);
        }
        None if ranks > cores() => {
            cmd.arg("--oversubscribe").args(["--bind-to", "none"]);
        }
        None => {}
    }
    if let Some(p) = o.per_host {
        cmd.args(["--map-by", &format!("ppr:{p}:node")]);
    }
    for (k, v) in &settings.set {
        cmd.arg("-x").arg(format!("{k}={v}"));
    }
    for k in &settings.passed {
        cmd.arg("-x").arg(k);
    }
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    Ok(cmd)
}

/// Hydra's `mpiexec`: `-genv` sets a variable on every rank, `-genvlist` passes this
/// environment's by name (what ranks on other hosts see).
fn mpiexec_command(o: &Launch, settings: &RankSettings, ranks: u32) -> Result<Command, String> {
    let mpiexec = MpiLauncher::find(Family::Mpich)?;
    let mut cmd = Command::new(mpiexec.path);
    cmd.arg("-n").arg(ranks.to_string());
    if let Some(h) = &o.hostfile {
        if !h.is_file() {
            return Err(format!("--hostfile {}: no such file", h.display()));
        }
        cmd.arg("-f").arg(h);
    }
    if let Some(p) = o.per_host {
        cmd.arg("-ppn").arg(p.to_string());
    }
    for (k, v) in &settings.set {
        cmd.arg("-genv").arg(k).arg(v);
    }
    if !settings.passed.is_empty() {
        cmd.arg("-genvlist").arg(settings.passed.join(","));
    }
    Ok(cmd)
}

/// Runs the launcher and exits as it did.
pub fn run_launcher(cmd: &mut Command) -> Result<ExitCode, String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {}: {e}", show_program(cmd)))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

fn show_program(cmd: &Command) -> String {
    cmd.get_program().to_string_lossy().into_owned()
}

/// The command as a user would type it (arguments with spaces quoted).
pub fn show(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(char::is_whitespace) {
            format!("{a:?}")
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}
