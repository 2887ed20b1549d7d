//! Starting the measured programs: natively (the vendor's platform alone, through the
//! ICD loader) or under MirrorCL (the MPI's launcher with the library preloaded), each
//! with a deadline, and describing the machine that produced the figures.

use mirrorcl_tests::Mpi;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The vendor platform that MirrorCL wraps and that the native runs use directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Vendor {
    Pocl,
    Nvidia,
}

impl Vendor {
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Pocl => "pocl",
            Vendor::Nvidia => "nvidia",
        }
    }

    /// A substring of the vendor's platform name (`MIRRORCL_PLATFORMS`, and the overhead
    /// benchmark's `--native`).
    pub fn platform_match(self) -> &'static str {
        match self {
            Vendor::Pocl => "Portable",
            Vendor::Nvidia => "NVIDIA",
        }
    }

    /// What names the vendor's library in an `.icd` file.
    fn icd_match(self) -> &'static str {
        match self {
            Vendor::Pocl => "pocl",
            Vendor::Nvidia => "nvidia",
        }
    }

    /// Environment that gives one process `devices` devices of this vendor, natively.
    pub fn native_devices(self, devices: usize) -> Vec<(String, String)> {
        match self {
            Vendor::Pocl => vec![("POCL_DEVICES".into(), vec!["pthread"; devices].join(" "))],
            Vendor::Nvidia => vec![(
                "CUDA_VISIBLE_DEVICES".into(),
                (0..devices)
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            )],
        }
    }

    /// Environment that gives each of `ranks` processes on this host one device: PoCL
    /// makes one device per process; GPUs are split by node-local rank (by MirrorCL, and
    /// by the hand-written MPI programs), so `ranks` of them are made visible.
    pub fn device_per_rank(self, ranks: usize) -> Vec<(String, String)> {
        match self {
            Vendor::Pocl => self.native_devices(1),
            Vendor::Nvidia => self.native_devices(ranks),
        }
    }
}

/// Where the programs and the library are, and how to run them.
pub struct Runner {
    pub vendor: Vendor,
    /// The MPI the library and the hand-written twins were built for, whose launcher
    /// starts both.
    pub mpi: Mpi,
    pub bin_dir: PathBuf,
    pub lib: PathBuf,
    pub timeout: Duration,
    /// A vendors directory holding only the vendor's `.icd` (native runs).
    pub native_vendors: PathBuf,
    /// Where each run's output is kept.
    pub logs: PathBuf,
    counter: std::cell::Cell<usize>,
}

/// What a finished run printed.
pub struct Output {
    pub stdout: String,
}

impl Runner {
    pub fn new(
        vendor: Vendor,
        mpi: Mpi,
        bin_dir: PathBuf,
        lib: PathBuf,
        timeout: Duration,
        out: &Path,
    ) -> Result<Runner, String> {
        let native_vendors = out.join("vendors-native");
        let logs = out.join("logs");
        for d in [&native_vendors, &logs] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let icd = find_icd(vendor)?;
        std::fs::copy(&icd, native_vendors.join(icd.file_name().expect("a file")))
            .map_err(|e| format!("{}: {e}", icd.display()))?;
        if !lib.is_file() {
            return Err(format!("{}: MirrorCL's library not found", lib.display()));
        }
        Ok(Runner {
            vendor,
            mpi,
            bin_dir,
            lib: lib.canonicalize().map_err(|e| e.to_string())?,
            timeout,
            native_vendors,
            logs,
            counter: std::cell::Cell::new(0),
        })
    }

    pub fn program(&self, name: &str) -> Result<PathBuf, String> {
        let p = self.bin_dir.join(name);
        if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{}: not built (benches/run.sh builds the programs)",
                p.display()
            ))
        }
    }

    /// `ranks` processes of `program` under MirrorCL, every rank's output prefixed.
    pub fn mirrorcl(
        &self,
        ranks: usize,
        program: &str,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Output, String> {
        let own = [
            ("LD_PRELOAD".to_string(), self.lib.display().to_string()),
            ("MIRRORCL_OUTPUT".to_string(), "all".to_string()),
            (
                "MIRRORCL_PLATFORMS".to_string(),
                self.vendor.platform_match().to_string(),
            ),
        ];
        self.launch(
            ranks,
            program,
            args,
            &own,
            env,
            &format!("mirrorcl-{ranks}"),
        )
    }

    /// `ranks` processes of an MPI program on the vendor's platform directly.
    pub fn native_mpi(
        &self,
        ranks: usize,
        program: &str,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Output, String> {
        let own = [
            (
                "OCL_ICD_VENDORS".to_string(),
                format!("{}/", self.native_vendors.display()),
            ),
            (
                "CTEST_PLATFORM".to_string(),
                self.vendor.platform_match().to_string(),
            ),
        ];
        self.launch(ranks, program, args, &own, env, &format!("mpi-{ranks}"))
    }

    /// One process of `program` on the vendor's platform directly, with `devices` devices.
    pub fn native(
        &self,
        devices: usize,
        program: &str,
        env: &[(String, String)],
    ) -> Result<Output, String> {
        self.native_within(devices, program, env, self.timeout)
    }

    /// [`Runner::native`] with its own deadline (capped by the run's): a comparison the
    /// vendor may take many minutes over (NVIDIA's one process with several GPUs).
    pub fn native_within(
        &self,
        devices: usize,
        program: &str,
        env: &[(String, String)],
        deadline: Duration,
    ) -> Result<Output, String> {
        let mut cmd = Command::new(self.program(program)?);
        cmd.env(
            "OCL_ICD_VENDORS",
            format!("{}/", self.native_vendors.display()),
        )
        .env("POCL_KERNEL_CACHE", "0")
        // The loader may list more platforms than OCL_ICD_VENDORS names.
        .env("CTEST_PLATFORM", self.vendor.platform_match())
        .env_remove("LD_PRELOAD");
        for (k, v) in self.vendor.native_devices(devices).iter().chain(env.iter()) {
            cmd.env(k, v);
        }
        let label = format!("{program}-native-{devices}");
        self.finish(cmd, &label, deadline.min(self.timeout))
    }

    /// `ranks` processes of `program`, each with one device: the way's own variables,
    /// then the caller's (which win).
    fn launch(
        &self,
        ranks: usize,
        program: &str,
        args: &[&str],
        own: &[(String, String)],
        env: &[(String, String)],
        label: &str,
    ) -> Result<Output, String> {
        let mut cmd = Command::new(self.mpi.launcher());
        cmd.args(self.mpi.placement_args());
        let common = [("POCL_KERNEL_CACHE".to_string(), "0".to_string())];
        let per_rank = self.vendor.device_per_rank(ranks);
        let vars: Vec<(String, String)> = own
            .iter()
            .chain(&common)
            .chain(&per_rank)
            .chain(env)
            .cloned()
            .collect();
        let argv: Vec<String> = std::iter::once(self.program(program)?.display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .collect();
        cmd.args(self.mpi.context_args(ranks as u32, &vars, &argv));
        self.mpi.allow_root(&mut cmd);
        cmd.env_remove("LD_PRELOAD");
        self.finish(cmd, &format!("{program}-{label}"), self.timeout)
    }

    /// Runs `cmd` to its end or its deadline; its output is kept in the logs.
    fn finish(&self, mut cmd: Command, label: &str, timeout: Duration) -> Result<Output, String> {
        let n = self.counter.get() + 1;
        self.counter.set(n);
        let log = self.logs.join(format!("{n:03}-{label}.log"));
        let shown = format!("{cmd:?}");
        let start = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{label}: cannot start: {e}"))?;
        // Readers on their own threads, so a full pipe never stalls the program.
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let out_t = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err_t = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break Some(status);
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = out_t.join().unwrap_or_default();
        let stderr = err_t.join().unwrap_or_default();
        let _ = std::fs::write(
            &log,
            format!("$ {shown}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n"),
        );
        match status {
            Some(s) if s.success() => Ok(Output { stdout }),
            Some(s) => Err(format!(
                "{label} failed ({s}); log {}:\n{}",
                log.display(),
                tail(&format!("{stdout}\n{stderr}"), 15)
            )),
            None => Err(format!(
                "{label} did not finish within {} s; log {}",
                timeout.as_secs(),
                log.display()
            )),
        }
    }
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// The registered `.icd` file of `vendor` (`OCL_ICD_VENDORS` or /etc/OpenCL/vendors).
fn find_icd(vendor: Vendor) -> Result<PathBuf, String> {
    let dir =
        std::env::var("MIRRORCL_BENCH_VENDORS").unwrap_or_else(|_| "/etc/OpenCL/vendors".into());
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "icd")
            && std::fs::read_to_string(&p)
                .map(|s| s.to_ascii_lowercase().contains(vendor.icd_match()))
                .unwrap_or(false)
        {
            return Ok(p);
        }
    }
    Err(format!(
        "no .icd file for {} in {dir} (register the vendor's ICD first)",
        vendor.name()
    ))
}

/// Every line a given rank printed, prefix removed (`MIRRORCL_OUTPUT=all`); lines
/// without a prefix (native MPI programs) count for every rank that printed them.
pub fn rank_lines(stdout: &str, rank: usize) -> Vec<&str> {
    let prefix = format!("[rank {rank}] ");
    stdout
        .lines()
        .filter_map(|l| {
            if let Some(rest) = l.strip_prefix(&prefix) {
                Some(rest)
            } else if l.starts_with("[rank ") {
                None
            } else {
                Some(l)
            }
        })
        .collect()
}

/// Fails unless `ranks` ranks printed `PASS <program>` (each checked its results).
/// The figures a run wrote with `MIRRORCL_STATS=path`, if it wrote them.
pub fn read_stats(path: &std::path::Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn require_pass(out: &Output, program: &str, ranks: usize) -> Result<(), String> {
    let want = format!("PASS {program}");
    let passed = out
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(&want))
        .count();
    if passed == ranks {
        Ok(())
    } else {
        Err(format!(
            "{program}: {passed} of {ranks} rank(s) printed \"{want}\""
        ))
    }
}

/// `key=value` fields of the first line (of rank 0) that starts with `tag`.
pub fn fields_of<'a>(lines: &[&'a str], tag: &str) -> Vec<BTreeMap<&'a str, &'a str>> {
    lines
        .iter()
        .filter(|l| l.starts_with(tag))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect()
        })
        .collect()
}

/// The machine, in words: CPU, cores, the vendor's devices, software versions.
pub fn describe_machine(runner: &Runner) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    m.insert("cpu".into(), model);
    m.insert("cores".into(), cores.to_string());
    m.insert(
        "host".into(),
        std::fs::read_to_string("/etc/hostname")
            .unwrap_or_default()
            .trim()
            .to_string(),
    );
    let devices = Command::new("clinfo")
        .arg("-l")
        .env(
            "OCL_ICD_VENDORS",
            format!("{}/", runner.native_vendors.display()),
        )
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    // Only the vendor's platform and its devices (the loader may list others).
    let mut platform = String::new();
    let mut names = Vec::new();
    let mut ours = false;
    for l in devices.lines() {
        if let Some((_, r)) = l.split_once("Platform #") {
            let name = r.split_once(':').map(|(_, n)| n.trim()).unwrap_or("");
            ours = name.contains(runner.vendor.platform_match());
            if ours && platform.is_empty() {
                platform = name.to_string();
            }
        } else if let (true, Some((_, r))) = (ours, l.split_once("Device #")) {
            names.push(
                r.split_once(':')
                    .map(|(_, n)| n.trim().to_string())
                    .unwrap_or_default(),
            );
        }
    }
    m.insert("vendor_platform".into(), platform);
    m.insert("vendor_devices".into(), names.join("; "));
    let mpi = runner.mpi.version();
    m.insert("mpi".into(), mpi);
    m.insert(
        "date".into(),
        Command::new("date")
            .arg("-u")
            .arg("+%Y-%m-%d %H:%M UTC")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
    );
    m
}
