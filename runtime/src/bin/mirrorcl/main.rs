//! `mirrorcl`: run a program on a MirrorCL cluster (`run -n N -- ./app args`), show the
//! cluster's devices (`devices`), check a machine (`doctor`), merge the ranks' traces of
//! `MIRRORCL_TRACE` into one file (`trace DIR`); `mirrorcl --help`.
//!
//! `run` builds the launcher's line (`launch`). Inside a Slurm allocation (`SLURM_JOB_ID`
//! set, `srun` on PATH) that is `srun` with the MPI's plugin (`--mpi=pmix` for Open MPI,
//! `--mpi=pmi2` for MPICH), the library preloaded in the ranks only
//! (`--export=ALL,LD_PRELOAD=…`: srun hands its whole environment to the ranks). Elsewhere
//! it is the launcher of the MPI this MirrorCL was built for: Open MPI's `mpirun` (`-x`)
//! or Hydra's `mpiexec` (`-genv`, `-genvlist`), with the library preloaded and every
//! `MIRRORCL_*` and `POCL_*` variable and the loader's (`LD_LIBRARY_PATH`,
//! `OCL_ICD_VENDORS`, `OCL_ICD_FILENAMES`) passed on (what remote hosts of a hostfile
//! need), `--oversubscribe` for Open MPI when the ranks outnumber this machine's cores
//! (without a hostfile), and the variables Open MPI wants when run as root.

mod doctor;
mod launch;

use clap::{Args, Parser, Subcommand};
use launch::{launch_command, run_launcher, show, Launch};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    Doctor(doctor::DoctorArgs),
    /// Merge the ranks' traces of a `MIRRORCL_TRACE=DIR` run (DIR/rank-<r>.json) into one
    /// Chrome trace-event file (Perfetto, chrome://tracing): one process per rank, on a
    /// common clock
    Trace(TraceArgs),
    /// Rank 0 prints the device table (what `devices -n N` runs on every rank)
    #[command(name = "__device-table", hide = true)]
    DeviceTable,
    /// The MPI library's version, with the library to check preloaded (what `doctor`
    /// runs: a library built for another MPI ends this process saying so)
    #[command(name = "__mpi-version", hide = true)]
    MpiVersion,
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

fn main() -> ExitCode {
    let result = match Cli::parse_from(command_line()).command {
        Cmd::Run(o) => run(o),
        Cmd::Devices(o) => devices(o),
        Cmd::Doctor(o) => doctor::doctor(o),
        Cmd::MpiVersion => {
            println!(
                "{}",
                mirrorcl_runtime::cluster::node::family::library_version()
            );
            Ok(ExitCode::SUCCESS)
        }
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
