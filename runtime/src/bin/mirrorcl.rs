//! `mirrorcl`: run a program on a MirrorCL cluster (`run -n N -- ./app args`), show the
//! cluster's devices (`devices`), check a machine (`doctor`), merge the ranks' traces of
//! `MIRRORCL_TRACE` into one file (`trace DIR`); `mirrorcl --help`.
//!
//! `run` builds the launcher's line. Inside a Slurm allocation (`SLURM_JOB_ID` set,
//! `srun` on PATH) that is `srun --mpi=pmix` (OpenMPI's direct launch through Slurm's
//! PMIx plugin), with the library preloaded in the ranks only (`--export=ALL,LD_PRELOAD=…`:
//! srun hands its whole environment to the ranks). Elsewhere it is `mpirun`: the library
//! preloaded, every `MIRRORCL_*` and `POCL_*` variable and the loader's (`LD_LIBRARY_PATH`,
//! `OCL_ICD_VENDORS`, `OCL_ICD_FILENAMES`) passed on with `-x` (what remote hosts of a
//! hostfile need), `--oversubscribe` when the ranks outnumber this machine's cores
//! (without a hostfile), and the variables OpenMPI wants when run as root.

use clap::{Args, Parser, Subcommand, ValueEnum};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::observe::config::Config;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Runs OpenCL programs on a MirrorCL cluster, shows the cluster's devices, checks a machine.
#[derive(Parser)]
#[command(name = "mirrorcl", arg_required_else_help = true)]
// The last of a repeated option wins, as in `mpirun`.
#[command(args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a program on N ranks (`srun` in a Slurm allocation, else `mpirun`) with
    /// libmirrorcl.so preloaded
    Run(RunArgs),
    /// The cluster's devices: id, owner rank, host, vendor, type, memory
    Devices(Launch),
    /// Check this machine: vendor ICDs, ICD loader, the library, the launcher, MPI and its
    /// thread level
    Doctor(DoctorArgs),
    /// Merge the ranks' traces of a `MIRRORCL_TRACE=DIR` run (DIR/rank-<r>.json) into one
    /// Chrome trace-event file (Perfetto, chrome://tracing): one process per rank, on a
    /// common clock
    Trace(TraceArgs),
    /// Rank 0 prints the device table (what `devices -n N` runs on every rank)
    #[command(name = "__device-table", hide = true)]
    DeviceTable,
}

#[derive(Args)]
struct TraceArgs {
    /// The directory MIRRORCL_TRACE named
    dir: PathBuf,
    /// Where to write the merged trace (default: DIR/trace.json)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `mirrorcl trace DIR [-o FILE]`.
fn trace(o: TraceArgs) -> Result<ExitCode, String> {
    let merged = mirrorcl_runtime::observe::trace::merge(&o.dir)?;
    let out = o.output.unwrap_or_else(|| o.dir.join("trace.json"));
    let events = merged["traceEvents"].as_array().map_or(0, Vec::len);
    let ranks = merged["otherData"]["mirrorcl_ranks"]
        .as_array()
        .map_or(0, Vec::len);
    let bytes = serde_json::to_vec(&merged).map_err(|e| e.to_string())?;
    std::fs::write(&out, bytes).map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "mirrorcl trace: {ranks} rank(s), {events} events -> {} (open in https://ui.perfetto.dev or chrome://tracing)",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What `run` and `devices` need to start ranks.
#[derive(Args)]
struct Launch {
    /// Ranks to start (mpirun's `-np N` is accepted too; under srun, default: the
    /// allocation's tasks)
    #[arg(short = 'n', long = "ranks", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    ranks: Option<u32>,
    /// Cluster configuration, passed to every rank as MIRRORCL_CONFIG
    #[arg(long, value_name = "F.toml")]
    config: Option<PathBuf>,
    /// mpirun hostfile: the hosts of the ranks (implies `--launcher mpirun`)
    #[arg(long, value_name = "F")]
    hostfile: Option<PathBuf>,
    /// Who starts the ranks (default: srun inside a Slurm allocation, else mpirun)
    #[arg(long, value_enum)]
    launcher: Option<Launcher>,
    /// libmirrorcl.so to preload (default: $MIRRORCL_LIB, beside this program, ../lib)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
}

/// The programs that start ranks.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Launcher {
    Mpirun,
    Srun,
}

impl Launcher {
    fn name(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpirun",
            Launcher::Srun => "srun",
        }
    }
}

/// The launcher `run` uses, and why: `--launcher`, else mpirun for a hostfile, else srun
/// inside a Slurm allocation where srun is at hand, else mpirun.
fn choose_launcher(explicit: Option<Launcher>, hostfile: bool) -> (Launcher, String) {
    if let Some(l) = explicit {
        return (l, format!("--launcher {}", l.name()));
    }
    if hostfile {
        return (Launcher::Mpirun, "--hostfile names the hosts".into());
    }
    match std::env::var("SLURM_JOB_ID").ok().filter(|j| !j.is_empty()) {
        Some(job) if on_path("srun").is_some() => {
            (Launcher::Srun, format!("inside Slurm allocation {job}"))
        }
        Some(job) => (
            Launcher::Mpirun,
            format!("SLURM_JOB_ID={job} is set, but srun is not on PATH"),
        ),
        None => (Launcher::Mpirun, "no Slurm allocation".into()),
    }
}

/// The MPI plugin the user gave srun in `SLURM_MPI_TYPE` (srun reads it itself).
fn users_srun_mpi() -> Option<String> {
    std::env::var("SLURM_MPI_TYPE")
        .ok()
        .filter(|t| !t.is_empty())
}

/// srun's plugin when the user names none: OpenMPI 4 (built with PMIx, as Debian's is)
/// needs PMIx for a direct launch.
const SRUN_MPI: &str = "pmix";

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    launch: Launch,
    /// Whose standard output is shown: rank 0's, every rank's prefixed, or raw
    #[arg(long, value_parser = ["root", "all", "raw"])]
    output: Option<String>,
    /// Print the launcher's command instead of running it
    #[arg(long)]
    dry_run: bool,
    /// The program and its arguments, after `--`, passed on untouched
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

#[derive(Args)]
struct DoctorArgs {
    /// libmirrorcl.so to check (default: $MIRRORCL_LIB, beside this program, ../lib)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
}

/// The command line, with mpirun's `-np` spelled `-n` before `--` (clap's short options
/// are one letter); what follows `--` is the program's own.
fn command_line() -> Vec<OsString> {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let program = args.iter().position(|a| a == "--").unwrap_or(args.len());
    for a in args[..program].iter_mut().filter(|a| *a == "-np") {
        *a = "-n".into();
    }
    args
}

/// The library to preload: `--lib`, `MIRRORCL_LIB`, next to this executable, or in
/// `../lib` of it (an installed prefix).
fn find_lib(explicit: Option<&Path>) -> Result<PathBuf, String> {
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

fn on_path(program: &str) -> Option<PathBuf> {
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
fn launch_command(
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
    let mut cmd = match choose_launcher(o.launcher, o.hostfile.is_some()).0 {
        Launcher::Srun => srun_command(o, config.as_deref(), output, ranks)?,
        Launcher::Mpirun => {
            // Checked here, not by clap, so that the message names the spelling users type.
            let ranks = ranks.ok_or("run: -n N is required (mirrorcl run --help)")?;
            mpirun_command(o, config.as_deref(), output, ranks)?
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
        return Err("--hostfile is for mpirun; under srun the allocation names the hosts".into());
    }
    let srun = on_path("srun").ok_or(
        "srun not found on PATH: install Slurm's client commands (Debian/Ubuntu: apt-get \
         install slurm-client) or pass --launcher mpirun",
    )?;
    let lib = find_lib(o.lib.as_deref())?;
    let mut cmd = Command::new(srun);
    if let Some(n) = ranks {
        cmd.arg("-n").arg(n.to_string());
    }
    if users_srun_mpi().is_none() {
        cmd.arg(format!("--mpi={SRUN_MPI}"));
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

/// `mpirun`: ranks on other hosts see only what `-x` passes on.
fn mpirun_command(
    o: &Launch,
    config: Option<&Path>,
    output: Option<&str>,
    ranks: u32,
) -> Result<Command, String> {
    let mpirun = on_path("mpirun").ok_or(
        "mpirun not found on PATH: install OpenMPI (Debian/Ubuntu: apt-get install openmpi-bin) \
         or add its bin directory to PATH",
    )?;
    let lib = find_lib(o.lib.as_deref())?;
    let mut cmd = Command::new(mpirun);
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
    cmd.arg("-x").arg(format!("LD_PRELOAD={}", lib.display()));
    if let Some(c) = config {
        cmd.arg("-x")
            .arg(format!("MIRRORCL_CONFIG={}", c.display()));
    }
    if let Some(out) = output {
        cmd.arg("-x").arg(format!("MIRRORCL_OUTPUT={out}"));
    }
    for k in PASSED_WHEN_SET {
        if std::env::var_os(k).is_some() {
            cmd.arg("-x").arg(k);
        }
    }
    let mut passed: Vec<String> = std::env::vars_os()
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
    passed.sort();
    for k in passed {
        cmd.arg("-x").arg(k);
    }
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    Ok(cmd)
}

/// Runs the launcher and exits as it did.
fn run_launcher(cmd: &mut Command) -> Result<ExitCode, String> {
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

fn show(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

fn run(o: RunArgs) -> Result<ExitCode, String> {
    let app_path = Path::new(&o.program[0]);
    if app_path.components().count() > 1 && !app_path.is_file() {
        return Err(format!("{}: no such program", app_path.display()));
    }
    let mut cmd = launch_command(&o.launch, o.output.as_deref(), o.launch.ranks, &o.program)?;
    if o.dry_run {
        println!("{}", show(&cmd));
        return Ok(ExitCode::SUCCESS);
    }
    run_launcher(&mut cmd)
}

fn devices(o: Launch) -> Result<ExitCode, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    match o.ranks {
        Some(ranks) => {
            // The table comes from rank 0; the other ranks take part in the exchange.
            let program = [exe.into(), "__device-table".into()];
            let mut cmd = launch_command(&o, None, Some(ranks), &program)?;
            run_launcher(&mut cmd)
        }
        None => {
            if let Some(c) = &o.config {
                std::env::set_var("MIRRORCL_CONFIG", c);
            }
            device_table()
        }
    }
}

fn device_table() -> Result<ExitCode, String> {
    let p = mirrorcl_runtime::objects::platform::platform();
    if p.rank == 0 {
        print!("{}", p.device_table());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `doctor` found: each check adds findings, then they are printed with a fix for
/// every problem.
#[derive(Default)]
struct Findings(Vec<Finding>);

/// One finding of `doctor`.
struct Finding {
    ok: bool,
    what: String,
    fix: String,
}

fn doctor(o: DoctorArgs) -> Result<ExitCode, String> {
    let mut found = Findings::default();
    let config = found.configuration();
    found.vendors(&config);
    found.icd_loader();
    found.preload_library(o.lib.as_deref());
    found.launcher();
    found.mpi();
    Ok(found.report())
}

impl Findings {
    fn note(&mut self, ok: bool, what: String, fix: &str) {
        self.0.push(Finding {
            ok,
            what,
            fix: fix.to_string(),
        })
    }

    fn configuration(&mut self) -> Config {
        match Config::load() {
            Ok(c) => {
                self.note(true, "configuration: readable".into(), "");
                c
            }
            Err(e) => {
                self.note(
                    false,
                    format!("configuration: {e}"),
                    "fix the MIRRORCL_* variables or the MIRRORCL_CONFIG file",
                );
                Config::default()
            }
        }
    }

    /// Every .icd must name a loadable ICD with platforms and devices.
    fn vendors(&mut self, config: &Config) {
        let icds = mirrorcl_runtime::native::icd_libraries(config);
        if icds.is_empty() {
            self.note(
                false,
                format!("vendors: no .icd file in {}", config.devices.vendors),
                "install a vendor OpenCL platform (Debian: apt-get install pocl-opencl-icd; NVIDIA: \
                 the driver's OpenCL package) or point MIRRORCL_VENDORS at its .icd files",
            );
        }
        let marker = mirrorcl_runtime::objects::platform::OWN_MARKER;
        let mut devices_total = 0;
        for (icd, lib) in &icds {
            match mirrorcl_runtime::native::load_library(lib, marker) {
                Ok(None) => self.note(
                    true,
                    format!(
                        "vendor {}: MirrorCL itself (skipped when driving vendors)",
                        icd.display()
                    ),
                    "",
                ),
                Ok(Some(platforms)) => {
                    for pl in platforms {
                        let name = pl.info_string(CL_PLATFORM_NAME).unwrap_or_default();
                        let n = count_devices(pl);
                        devices_total += n;
                        self.note(
                            n > 0,
                            format!(
                                "vendor {} ({lib}): platform \"{name}\", {n} device(s)",
                                icd.display()
                            ),
                            "the platform loads but shows no device: check the driver (nvidia-smi) or \
                             POCL_DEVICES",
                        );
                    }
                }
                Err(why) => self.note(
                    false,
                    format!(
                        "vendor {} names {lib:?}, which does not load: {why}",
                        icd.display()
                    ),
                    "install the library it names, correct the path in the .icd file, or remove the \
                     stale .icd file",
                ),
            }
        }
        if !icds.is_empty() && devices_total == 0 {
            self.note(
                false,
                "vendors: no device at all".into(),
                "MirrorCL needs at least one vendor device",
            );
        }
    }

    /// The ICD loader, for programs linked against libOpenCL.
    fn icd_loader(&mut self) {
        // SAFETY: dlopen with a valid C string; closed again at once.
        let loader = unsafe {
            libc::dlopen(
                c"libOpenCL.so.1".as_ptr(),
                libc::RTLD_LAZY | libc::RTLD_LOCAL,
            )
        };
        if loader.is_null() {
            self.note(
                false,
                "ICD loader: libOpenCL.so.1 not found".into(),
                "install an ICD loader (Debian: apt-get install ocl-icd-libopencl1)",
            );
        } else {
            self.note(true, "ICD loader: libOpenCL.so.1 loads".into(), "");
        }
        if let Some(v) = std::env::var_os("OCL_ICD_VENDORS") {
            self.note(
                true,
                format!(
                    "ICD loader: OCL_ICD_VENDORS={} (the loader reads only that)",
                    v.to_string_lossy()
                ),
                "",
            );
        }
    }

    /// The library to preload.
    fn preload_library(&mut self, lib: Option<&Path>) {
        let marker = mirrorcl_runtime::objects::platform::OWN_MARKER;
        match find_lib(lib) {
            Ok(lib) => {
                let c = std::ffi::CString::new(lib.as_os_str().to_string_lossy().as_bytes())
                    .unwrap_or_default();
                // SAFETY: dlopen with a valid C string.
                let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
                // SAFETY: as above, on a live handle.
                let marked = !h.is_null() && !unsafe { libc::dlsym(h, marker.as_ptr()) }.is_null();
                self.note(
                    marked,
                    format!(
                        "preload: {} {}",
                        lib.display(),
                        if marked {
                            "loads"
                        } else {
                            "does not load as MirrorCL"
                        }
                    ),
                    "rebuild it (cargo build --release -p mirrorcl) or pass --lib",
                );
            }
            Err(e) => self.note(
                false,
                format!("preload: {e}"),
                "build or install libmirrorcl.so",
            ),
        }
    }

    /// Which launcher `run` would use and why; under srun, whether it has the MPI plugin.
    fn launcher(&mut self) {
        let (launcher, why) = choose_launcher(None, false);
        if launcher == Launcher::Mpirun {
            self.note(true, format!("launcher: mpirun: {why}"), "");
            return;
        }
        let mpi = users_srun_mpi().unwrap_or_else(|| SRUN_MPI.into());
        let list = Command::new("srun")
            .arg("--mpi=list")
            .output()
            .map(|o| String::from_utf8_lossy(&[o.stdout, o.stderr].concat()).into_owned())
            .unwrap_or_default();
        let listed = list.split_whitespace().any(|w| w == mpi);
        self.note(
            listed,
            format!(
                "launcher: srun: {why} (srun --mpi={mpi}{})",
                if listed {
                    ", listed by srun --mpi=list"
                } else {
                    ", which srun --mpi=list does not list"
                }
            ),
            "OpenMPI's direct launch needs Slurm's PMIx plugin (Debian: slurm-wlm-basic-plugins; \
             built --with-pmix elsewhere): set SLURM_MPI_TYPE to a plugin srun --mpi=list names, \
             or pass --launcher mpirun",
        );
    }

    /// mpirun and the thread level MirrorCL needs.
    fn mpi(&mut self) {
        match on_path("mpirun") {
            Some(p) => {
                let version = Command::new(&p)
                    .arg("--version")
                    .output()
                    .ok()
                    .and_then(|o| String::from_utf8(o.stdout).ok())
                    .and_then(|s| s.lines().next().map(str::to_string))
                    .unwrap_or_default();
                self.note(true, format!("MPI: {} ({version})", p.display()), "");
            }
            None => self.note(
                false,
                "MPI: mpirun not found on PATH".into(),
                "install OpenMPI (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev)",
            ),
        }
        if std::env::var_os("MIRRORCL_DOCTOR_SKIP_MPI").is_none() {
            match mpi::initialize_with_threading(mpi::Threading::Multiple) {
                Some((universe, level)) => {
                    self.note(
                        level == mpi::Threading::Multiple,
                        format!("MPI: thread level {level:?}"),
                        "MirrorCL needs MPI_THREAD_MULTIPLE: use an MPI built with thread support \
                         (OpenMPI 4 has it)",
                    );
                    drop(universe);
                }
                None => self.note(true, "MPI: already initialised".into(), ""),
            }
        }
    }

    /// Prints the findings; fails when any is a problem.
    fn report(&self) -> ExitCode {
        let problems = self.0.iter().filter(|f| !f.ok).count();
        for f in &self.0 {
            if f.ok {
                println!("ok       {}", f.what);
            } else {
                println!("PROBLEM  {}\n         fix: {}", f.what, f.fix);
            }
        }
        if problems == 0 {
            println!("mirrorcl doctor: this machine is ready");
            ExitCode::SUCCESS
        } else {
            println!("mirrorcl doctor: {problems} problem(s)");
            ExitCode::from(1)
        }
    }
}

fn count_devices(platform: mirrorcl_runtime::native::VPlatform) -> u32 {
    platform
        .devices(CL_DEVICE_TYPE_ALL)
        .map_or(0, |list| list.len() as u32)
}

fn main() -> ExitCode {
    let result = match Cli::parse_from(command_line()).command {
        Cmd::Run(o) => run(o),
        Cmd::Devices(o) => devices(o),
        Cmd::Doctor(o) => doctor(o),
        Cmd::Trace(o) => trace(o),
        Cmd::DeviceTable => device_table(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mirrorcl: {e}");
            ExitCode::from(2)
        }
    }
}
