//! `mirrorcl doctor`: what this machine lacks for MirrorCL, and how to fix it.

use crate::launch::{choose_launcher, find_lib, srun_mpi, users_srun_mpi, Launcher, MpiLauncher};
use clap::Args;
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::cluster::node::family::{self, Family};
use mirrorcl_runtime::observe::config::Config;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(Args)]
pub struct DoctorArgs {
    /// libmirrorcl.so to check (default: $MIRRORCL_LIB, beside this program, ../lib)
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
}

/// What `doctor` found: each check adds findings, then they are printed with a fix for
/// every problem.
#[derive(Default)]
struct Findings(Vec<Finding>);

/// One finding of `doctor`.
struct Finding {
    ok: bool,
    /// Worth knowing, not a problem: printed, but the machine is ready.
    warning: bool,
    what: String,
    fix: String,
}

pub fn doctor(o: DoctorArgs) -> Result<ExitCode, String> {
    let mut found = Findings::default();
    let config = found.configuration();
    found.vendors(&config);
    found.icd_loader();
    found.mpi();
    found.preload_library(o.lib.as_deref());
    found.launcher();
    Ok(found.report())
}

impl Findings {
    fn note(&mut self, ok: bool, what: String, fix: &str) {
        self.0.push(Finding {
            ok,
            warning: false,
            what,
            fix: fix.to_string(),
        })
    }

    fn warn(&mut self, what: String, fix: String) {
        self.0.push(Finding {
            ok: true,
            warning: true,
            what,
            fix,
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

    /// The library to preload: built for this command's MPI (a process that has both
    /// loaded ends at once, so a child process tries), and loadable as MirrorCL.
    fn preload_library(&mut self, lib: Option<&Path>) {
        let lib = match find_lib(lib) {
            Ok(lib) => lib,
            Err(e) => {
                self.note(
                    false,
                    format!("preload: {e}"),
                    "build or install libmirrorcl.so",
                );
                return;
            }
        };
        let probe = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .arg("__mpi-version")
                .env("LD_PRELOAD", &lib)
                .output()
        });
        let said = probe.as_ref().map_or_else(
            |e| e.to_string(),
            |o| String::from_utf8_lossy(&[o.stdout.as_slice(), &o.stderr].concat()).into_owned(),
        );
        if !probe.is_ok_and(|o| o.status.success()) {
            self.note(
                false,
                format!(
                    "preload: {} does not start: {}",
                    lib.display(),
                    said.lines().last().unwrap_or_default()
                ),
                "use the mirrorcl command of the library's own build (beside it in its target \
                 directory), or pass --lib",
            );
            return;
        }
        let marker = mirrorcl_runtime::objects::platform::OWN_MARKER;
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

    /// Which launcher `run` would use and why: under srun, whether it has the MPI plugin;
    /// else the MPI's own launcher, and a warning when the `mpirun` or `mpiexec` a user
    /// would type belongs to another MPI.
    fn launcher(&mut self) {
        let (launcher, why) = choose_launcher(None, false);
        if launcher == Launcher::Srun {
            self.srun(&why);
            return;
        }
        let built = Family::BUILT_FOR;
        let own = match MpiLauncher::find(built) {
            Ok(own) => {
                self.note(
                    true,
                    format!("launcher: {} ({}): {why}", own.path.display(), own.version),
                    "",
                );
                own
            }
            Err(e) => {
                self.note(false, format!("launcher: {e}"), "see README, \"Site MPI\"");
                return;
            }
        };
        let others: Vec<String> = ["mpirun", "mpiexec"]
            .into_iter()
            .filter_map(|name| {
                let typed = MpiLauncher::probe(name)?;
                let theirs = typed.family.filter(|f| *f != built)?;
                Some(format!(
                    "{name} is {} ({}, {})",
                    typed.path.display(),
                    typed.version,
                    theirs.name()
                ))
            })
            .collect();
        if !others.is_empty() {
            self.warn(
                format!(
                    "MPI mismatch: this MirrorCL is built for {}, but on PATH {}",
                    built.name(),
                    others.join(" and ")
                ),
                format!(
                    "launch with `mirrorcl run` or {}: ranks of another MPI's launcher \
                     cannot join this library's MPI",
                    own.path.display()
                ),
            );
        }
    }

    fn srun(&mut self, why: &str) {
        let mpi = users_srun_mpi().unwrap_or_else(|| srun_mpi().into());
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
            "Open MPI's direct launch needs Slurm's PMIx plugin, MPICH's its PMI-2 plugin \
             (Debian: slurm-wlm-basic-plugins; built --with-pmix elsewhere): set \
             SLURM_MPI_TYPE to a plugin srun --mpi=list names, or pass --launcher mpirun \
             (mpiexec for MPICH)",
        );
    }

    /// The MPI this MirrorCL was built for, and the thread level it needs.
    fn mpi(&mut self) {
        self.note(
            true,
            format!(
                "MPI: built for {} ({})",
                Family::BUILT_FOR.name(),
                family::library_version()
            ),
            "",
        );
        if std::env::var_os("MIRRORCL_DOCTOR_SKIP_MPI").is_none() {
            match mpi::initialize_with_threading(mpi::Threading::Multiple) {
                Some((universe, level)) => {
                    self.note(
                        level == mpi::Threading::Multiple,
                        format!("MPI: thread level {level:?}"),
                        "MirrorCL needs MPI_THREAD_MULTIPLE: use an MPI built with thread support \
                         (Open MPI 4 and MPICH 4 have it)",
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
            if f.warning {
                println!("warning  {}\n         fix: {}", f.what, f.fix);
            } else if f.ok {
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
