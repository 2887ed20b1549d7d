//! Harness for the MirrorCL integration suite.
//!
//! The real tests are OpenCL 1.2 C host programs in `tests/c/*.c` (sharing
//! `tests/c/check.h`).  Each program prints `PASS <program>` as its last line
//! and exits 0 when every check held; any failed check prints
//! `file:line: CHECK FAILED: <call>` with the expected and actual values.
//!
//! This crate compiles them with the system C compiler and runs them in one
//! of four [`Way`]s, with PoCL exposing 1 or 3 CPU devices
//! (`POCL_DEVICES="pthread ..."`):
//!
//! * [`Way::Native`]: linked with `-lOpenCL`, the system ICD loader finds
//!   PoCL.  Validates that the programs themselves are correct OpenCL.
//! * [`Way::Preload`]: linked with `-lOpenCL`, run with
//!   `LD_PRELOAD=libmirrorcl.so`.
//! * [`Way::Loader`]: linked with `-lOpenCL`, run with `OCL_ICD_VENDORS`
//!   naming a directory that holds only `mirrorcl.icd`.
//! * [`Way::Direct`]: linked against `libmirrorcl.so` itself, no loader.
//!
//! The MirrorCL ways set `MIRRORCL_EXPECT=1`, which makes the programs
//! require a single platform named "MirrorCL" and enables the checks that
//! only MirrorCL is held to (released handles, PoCL deviations).
//!
//! Environment understood by the harness:
//! * `MIRRORCL_LIB`: path of the library (default
//!   `<workspace>/target/release/libmirrorcl.so`, or under `CARGO_TARGET_DIR`).
//! * `MIRRORCL_TEST_TIMEOUT`: per-run timeout in seconds (default 120).
//! * `CC`: the C compiler (default `cc`).
//! * `MIRRORCL_BUILD_MPI`: the MPI of cluster runs, `openmpi` (default) or `mpich` (Hydra's
//!   `mpiexec`, `mpicc.mpich`; with `CARGO_TARGET_DIR=target/mpich`, where
//!   `MIRRORCL_BUILD_MPI=mpich bash .ci/setup` builds the library).

mod launcher;
pub use launcher::{mpi, Mpi};

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How a C program reaches an OpenCL implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Way {
    /// System ICD loader, vendor platforms (PoCL): no MirrorCL.
    Native,
    /// System ICD loader linked, `LD_PRELOAD=libmirrorcl.so`.
    Preload,
    /// System ICD loader with `OCL_ICD_VENDORS=<dir with mirrorcl.icd>/`.
    Loader,
    /// Linked against `libmirrorcl.so` directly.
    Direct,
    /// A hybrid MPI + OpenCL program: built with `mpicc` and the ICD loader, run under
    /// `mpirun` with `LD_PRELOAD=libmirrorcl.so` (see [`run_cluster`]).
    Mpi,
}

impl Way {
    pub const ALL: [Way; 4] = [Way::Native, Way::Preload, Way::Loader, Way::Direct];

    pub fn name(self) -> &'static str {
        match self {
            Way::Native => "native",
            Way::Preload => "preload",
            Way::Loader => "loader",
            Way::Direct => "direct",
            Way::Mpi => "mpi",
        }
    }

    /// Whether this way runs the program against MirrorCL.
    pub fn is_mirrorcl(self) -> bool {
        self != Way::Native
    }
}

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// The directory holding the C programs and `check.h`.
pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("c")
}

/// The PoCL kernel caches of one run, under the target directory: one directory per
/// rank, and no two runs at once use the same ones. Without a cache each rank of
/// each run compiles every kernel again (a 4-rank stencil: 11 s of CPU against 1.1 s);
/// one cache for several processes at once is not safe (PoCL removes a compiled
/// program's file before it writes it again, and another process's `clLinkProgram` then
/// finds none).
struct PoclCaches {
    dir: PathBuf,
    /// Locked while the run lasts.
    _held: std::fs::File,
}

impl PoclCaches {
    /// The first set no other run holds, this process's or another's.
    fn take() -> Result<PoclCaches, String> {
        let root = target_dir().join("ctests").join("pocl-cache");
        let mut k = 0;
        loop {
            let dir = root.join(format!("run{k}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let lock = dir.join("lock");
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock)
                .map_err(|e| format!("cannot open {}: {e}", lock.display()))?;
            match file.try_lock() {
                Ok(()) => return Ok(PoclCaches { dir, _held: file }),
                Err(std::fs::TryLockError::WouldBlock) => k += 1,
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(format!("cannot lock {}: {e}", lock.display()))
                }
            }
        }
    }

    /// Rank `r`'s cache directory.
    fn rank(&self, r: u32) -> String {
        self.dir.join(format!("rank{r}")).display().to_string()
    }
}

/// The cargo target directory (`CARGO_TARGET_DIR` if set, else `<workspace>/target`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        None => workspace_root().join("target"),
    }
}

/// Where `libmirrorcl.so` is looked for when `MIRRORCL_LIB` is not set.
pub fn default_lib_path() -> PathBuf {
    target_dir().join("release").join("libmirrorcl.so")
}

/// Resolves the library from an explicit override (the value of
/// `MIRRORCL_LIB`) or the default location; errors say how to build it.
pub fn locate_lib(override_path: Option<OsString>) -> Result<PathBuf, String> {
    let (path, origin) = match override_path.filter(|v| !v.is_empty()) {
        Some(p) => (PathBuf::from(p), "MIRRORCL_LIB"),
        None => (default_lib_path(), "the default location"),
    };
    if !path.is_file() {
        return Err(format!(
            "libmirrorcl.so not found at {} ({origin}).\n\
             Build it first with `cargo build --release -p mirrorcl` \
             (or point MIRRORCL_LIB at the library).",
            path.display()
        ));
    }
    path.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", path.display()))
}

/// `libmirrorcl.so` (see [`locate_lib`]); panics with build instructions if missing.
pub fn mirrorcl_lib() -> PathBuf {
    match locate_lib(std::env::var_os("MIRRORCL_LIB")) {
        Ok(p) => p,
        Err(msg) => panic!("{msg}"),
    }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// One lock per output binary, so concurrent tests never compile the same
/// binary twice at once (different binaries compile in parallel).
fn binary_lock(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(path.to_path_buf()).or_default().clone()
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh OpenMPI tmpdir for one `mpirun` job (`OMPI_MCA_orte_tmpdir_base`; remove it
/// after the job): tests run jobs concurrently, and OpenMPI's creation of the shared one
/// races ("mkdir /tmp/ompi.HOST.0: File exists").
pub fn mpi_tmpdir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("mirrorcl-ompi-{}", unique_suffix()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The benchmark applications (`benches/apps/<name>.c`), built like the test programs.
pub fn apps_dir() -> PathBuf {
    workspace_root().join("benches").join("apps")
}

/// The source of `prog`: a test program in `tests/c`, else a benchmark application.
pub fn source_of(prog: &str) -> PathBuf {
    let test = c_dir().join(format!("{prog}.c"));
    if test.is_file() {
        test
    } else {
        apps_dir().join(format!("{prog}.c"))
    }
}

/// The compiler command line (without `-o`) for `prog` in `way`.
fn compile_args(prog: &str, way: Way) -> Result<Vec<OsString>, String> {
    let c = c_dir();
    let mut args: Vec<OsString> = vec![
        "-O2".into(),
        "-Wall".into(),
        "-std=c11".into(),
        "-pthread".into(),
        "-I".into(),
        c.clone().into(),
        source_of(prog).into(),
    ];
    match way {
        Way::Native | Way::Preload | Way::Loader | Way::Mpi => args.push("-lOpenCL".into()),
        Way::Direct => {
            let lib = locate_lib(std::env::var_os("MIRRORCL_LIB"))?;
            let dir = lib.parent().expect("library has a directory");
            let file = lib.file_name().expect("library has a file name");
            let mut l = OsString::from("-l:");
            l.push(file);
            let mut rpath = OsString::from("-Wl,-rpath,");
            rpath.push(dir);
            args.push("-L".into());
            args.push(dir.into());
            args.push(l);
            args.push(rpath);
        }
    }
    args.push("-lm".into());
    Ok(args)
}

/// Compiles `tests/c/<prog>.c` for `way` into `<target>/ctests/<way>/<prog>`
/// and returns the binary.  Reuses the binary when it is newer than the
/// sources and was built with the same command line.
pub fn compile(prog: &str, way: Way) -> Result<PathBuf, String> {
    let cc = if way == Way::Mpi {
        launcher::mpi().mpicc().to_string()
    } else {
        std::env::var("CC")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "cc".into())
    };
    let out_dir = target_dir().join("ctests").join(way.name());
    let bin = out_dir.join(prog);
    let stamp = out_dir.join(format!("{prog}.cmd"));
    let args = compile_args(prog, way)?;
    let cmdline = format!(
        "{cc} {}",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let lock = binary_lock(&bin);
    let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());

    let src = source_of(prog);
    let hdr = c_dir().join("check.h");
    if !src.is_file() {
        return Err(format!("no such C program: {}", src.display()));
    }
    // The applications' shared headers (app.h, stencil.h) count as sources.
    let app_hdrs = std::fs::read_dir(apps_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "h"));
    let newest_src = [mtime(&src), mtime(&hdr)]
        .into_iter()
        .chain(app_hdrs.map(|p| mtime(&p)))
        .flatten()
        .max();
    let fresh = match (mtime(&bin), newest_src) {
        (Some(b), Some(s)) => b >= s,
        _ => false,
    };
    if fresh && std::fs::read_to_string(&stamp).ok().as_deref() == Some(cmdline.as_str()) {
        return Ok(bin);
    }

    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let tmp = out_dir.join(format!(".{prog}.tmp-{}", unique_suffix()));
    let output = Command::new(&cc)
        .args(&args)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "compiling {prog} for {} failed ({}):\n$ {cmdline} -o {}\n{}{}",
            way.name(),
            output.status,
            tmp.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let warnings = String::from_utf8_lossy(&output.stderr);
    if !warnings.trim().is_empty() {
        eprintln!("warnings compiling {prog} ({}):\n{warnings}", way.name());
    }
    // Atomic replacement: a concurrent run of another test process never
    // sees a half-written binary.
    std::fs::rename(&tmp, &bin).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
    std::fs::write(&stamp, &cmdline)
        .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(bin)
}

/// A directory holding only `mirrorcl.icd` (the library's absolute path),
/// for `OCL_ICD_VENDORS`; one per test process and library.
pub fn vendors_dir(lib: &Path) -> Result<PathBuf, String> {
    static DIRS: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let mut map = DIRS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = map.get(lib) {
        return Ok(dir.clone());
    }
    // One directory per library path (stable name, so runs do not pile up);
    // the file is written to a temporary name and renamed, so concurrent
    // test processes never read a partial file.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        lib.hash(&mut h);
        h.finish()
    };
    let dir = target_dir()
        .join("ctests")
        .join(format!("vendors-{key:016x}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let icd = dir.join("mirrorcl.icd");
    let tmp = dir.join(format!(".mirrorcl.icd.{}", unique_suffix()));
    std::fs::write(&tmp, format!("{}\n", lib.display()))
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &icd).map_err(|e| format!("cannot write {}: {e}", icd.display()))?;
    map.insert(lib.to_path_buf(), dir.clone());
    Ok(dir)
}

/// The result of one run of a C program.
#[derive(Debug)]
pub struct RunOutput {
    pub program: String,
    pub way: Way,
    pub devices: u32,
    /// `None` when the run was killed by the harness timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// Environment the harness set (for the failure report).
    pub env: Vec<(String, String)>,
    pub binary: PathBuf,
    /// The MirrorCL library used, with its age when the run started.
    pub library: Option<(PathBuf, Option<Duration>)>,
}

impl RunOutput {
    /// Exit status 0 and a `PASS <program>` line.
    pub fn passed(&self) -> bool {
        let pass_line = format!("PASS {}", self.program);
        self.status.is_some_and(|s| s.success())
            && self.stdout.lines().any(|l| l.trim_end() == pass_line)
    }

    /// The lines that describe failed checks (for short summaries).
    pub fn failed_checks(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .chain(self.stdout.lines())
            .filter(|l| {
                l.contains("CHECK FAILED") || l.starts_with("FATAL") || l.starts_with("FAIL ")
            })
            .collect()
    }

    /// A human-readable report: how it was run, how it ended, all output.
    pub fn report(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        let ending = match self.status {
            None => "KILLED by the harness timeout".to_string(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit status {c}"),
                (None, Some(sig)) => format!(
                    "killed by signal {sig}{}",
                    if s.core_dumped() {
                        " (core dumped)"
                    } else {
                        ""
                    }
                ),
                _ => format!("{s}"),
            },
        };
        let env = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join(" ");
        let library = match &self.library {
            None => String::new(),
            Some((path, age)) => format!(
                "library: {}{}\n",
                path.display(),
                age.map(|a| format!(" (built {} s before the run)", a.as_secs()))
                    .unwrap_or_default()
            ),
        };
        format!(
            "{} ({}, {} device{}) FAILED: {ending} after {:.1} s\n\
             {library}command: {env} {}\n\
             ---- stdout ----\n{}\n---- stderr ----\n{}\n---- end of {} ----",
            self.program,
            self.way.name(),
            self.devices,
            if self.devices == 1 { "" } else { "s" },
            self.elapsed.as_secs_f64(),
            self.binary.display(),
            self.stdout.trim_end(),
            self.stderr.trim_end(),
            self.program
        )
    }
}

/// Per-run timeout (`MIRRORCL_TEST_TIMEOUT` seconds, default 120).
pub fn run_timeout() -> Duration {
    let secs = std::env::var("MIRRORCL_TEST_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(120);
    Duration::from_secs(secs)
}

/// The stacks of every thread of a hung process, via `gdb -batch -p`
/// (best effort: a note when gdb is missing, not permitted or too slow;
/// `MIRRORCL_TEST_NO_GDB=1` skips it).
pub fn thread_stacks(pid: u32) -> String {
    if std::env::var_os("MIRRORCL_TEST_NO_GDB").is_some_and(|v| !v.is_empty() && v != "0") {
        return "(stack capture disabled by MIRRORCL_TEST_NO_GDB)\n".into();
    }
    let child = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-p",
            &pid.to_string(),
            "-ex",
            "thread apply all bt 40",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("(no stacks: cannot run gdb: {e})\n"),
    };
    let mut pipe = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    // Per thread: the two innermost frames, then only frames in the
    // workspace's sources (runtime/, icd/, scheduler/) and main.
    let mut out = String::new();
    for line in text.lines() {
        let keep = match line.strip_prefix('#') {
            None => line.starts_with("Thread "),
            Some(rest) => {
                let n = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .unwrap_or(0);
                !line.contains(" in ?? ()")
                    && (n < 2
                        || [
                            " at runtime/",
                            " at icd/",
                            " at scheduler/",
                            " in main ",
                            " main (",
                        ]
                        .iter()
                        .any(|p| line.contains(p)))
            }
        };
        if keep {
            let line: String = line.chars().take(240).collect();
            out.push_str(&line);
            out.push('\n');
        }
    }
    if out.is_empty() {
        out = "(no stacks: gdb produced no backtrace)\n".into();
    }
    out
}

/// Variables the harness controls; inherited values are removed first.
const CONTROLLED_ENV: &[&str] = &[
    "LD_PRELOAD",
    "OCL_ICD_VENDORS",
    "OCL_ICD_FILENAMES",
    "OPENCL_VENDOR_PATH",
    "OCL_ICD_DEFAULT_PLATFORM",
    "OCL_ICD_PLATFORM_SORT",
    "OPENCL_LAYERS",
    "POCL_DEVICES",
    "MIRRORCL_EXPECT",
    "CTEST_EXPECT_DEVICES",
];

/// Compiles (if needed) and runs `prog` in `way` with `devices` PoCL CPU devices.
pub fn run_program(prog: &str, way: Way, devices: u32) -> Result<RunOutput, String> {
    run_program_with(prog, way, devices, &[])
}

/// [`run_program`] with extra environment variables (e.g. MirrorCL settings).
pub fn run_program_with(
    prog: &str,
    way: Way,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> Result<RunOutput, String> {
    let lib = if way.is_mirrorcl() {
        Some(mirrorcl_lib())
    } else {
        None
    };
    let lib_age = lib
        .as_deref()
        .and_then(mtime)
        .and_then(|m| SystemTime::now().duration_since(m).ok());
    let bin = compile(prog, way)?;
    let mut env: Vec<(String, String)> = vec![
        (
            "POCL_DEVICES".into(),
            vec!["pthread"; devices as usize].join(" "),
        ),
        ("CTEST_EXPECT_DEVICES".into(), devices.to_string()),
    ];
    if let Some(lib) = &lib {
        env.push(("MIRRORCL_EXPECT".into(), "1".into()));
        if std::env::var_os("MIRRORCL_WAIT_TIMEOUT").is_none() {
            // MirrorCL's own deadline for blocking waits: below the harness
            // timeout, so that a hang is reported by MirrorCL itself.
            let t = run_timeout().as_secs().saturating_sub(30).max(10);
            env.push(("MIRRORCL_WAIT_TIMEOUT".into(), t.to_string()));
        }
        match way {
            Way::Preload => env.push(("LD_PRELOAD".into(), lib.display().to_string())),
            Way::Loader => {
                let dir = vendors_dir(lib)?;
                env.push(("OCL_ICD_VENDORS".into(), format!("{}/", dir.display())));
            }
            Way::Direct | Way::Native => {}
            Way::Mpi => return Err("MPI programs run under mpirun: use run_cluster".into()),
        }
    }

    env.extend(
        extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    // A PoCL kernel cache no other run uses while this one lasts (`PoclCaches`).
    let caches = PoclCaches::take()?;
    let mut cmd = Command::new(&bin);
    for var in CONTROLLED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("POCL_CACHE_DIR", caches.rank(0))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(c_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let timeout = run_timeout();
    let mut stacks: Option<String> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= timeout => {
                stacks = Some(thread_stacks(child.id()));
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {}: {e}", bin.display())),
        }
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let mut stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    if status.is_none() {
        stderr.push_str(&format!(
            "\n[harness] killed after the {} s timeout (MIRRORCL_TEST_TIMEOUT)\n",
            timeout.as_secs()
        ));
        if let Some(stacks) = stacks {
            stderr.push_str("[harness] thread stacks at the timeout:\n");
            stderr.push_str(&stacks);
        }
    }
    Ok(RunOutput {
        program: prog.to_string(),
        way,
        devices,
        status,
        stdout,
        stderr,
        elapsed,
        env,
        binary: bin,
        library: lib.map(|l| (l, lib_age)),
    })
}

/// The body of every generated test: run, then assert exit status 0 and the
/// `PASS <program>` line, printing everything on failure.
pub fn check_program(prog: &str, way: Way, devices: u32) {
    check_program_with(prog, way, devices, &[]);
}

/// [`check_program`] with extra environment variables.
pub fn check_program_with(prog: &str, way: Way, devices: u32, extra_env: &[(&str, &str)]) {
    let out = match run_program_with(prog, way, devices, extra_env) {
        Ok(out) => out,
        Err(msg) => panic!("{prog} ({}, {devices} devices): {msg}", way.name()),
    };
    if !out.passed() {
        let checks = out.failed_checks();
        let summary = if checks.is_empty() {
            match out.status {
                None => "the program hung (see the thread stacks above)".to_string(),
                Some(s) => format!("no failed check was printed; the program ended with {s}"),
            }
        } else {
            checks.join("\n  ")
        };
        panic!("{}\n\nsummary:\n  {summary}", out.report());
    }
    println!(
        "{prog} ({}, {devices} devices): PASS in {:.2} s",
        way.name(),
        out.elapsed.as_secs_f64()
    );
}

/// The result of one run of a C program under `mpirun`, one replica per rank.
#[derive(Debug)]
pub struct ClusterOutput {
    pub program: String,
    pub ranks: u32,
    /// PoCL CPU devices per rank.
    pub devices: u32,
    /// `mpirun`'s status; `None` when the harness killed it at its timeout.
    pub status: Option<ExitStatus>,
    /// Each rank's standard output and error, in rank order.
    pub outputs: Vec<(String, String)>,
    /// What `mpirun` itself printed.
    pub mpirun_output: String,
    pub elapsed: Duration,
    pub command: String,
}

impl ClusterOutput {
    /// `mpirun` exited 0 and every rank printed `PASS <program>`.
    pub fn passed(&self) -> bool {
        let pass_line = format!("PASS {}", self.program);
        self.status.is_some_and(|s| s.success())
            && self.outputs.len() == self.ranks as usize
            && self
                .outputs
                .iter()
                .all(|(out, _)| out.lines().any(|l| l.trim_end() == pass_line))
    }

    /// The lines of every rank's standard output that start with `prefix`.
    pub fn lines_with(&self, prefix: &str) -> Vec<Vec<String>> {
        self.outputs
            .iter()
            .map(|(out, _)| {
                out.lines()
                    .filter(|l| l.starts_with(prefix))
                    .map(str::to_string)
                    .collect()
            })
            .collect()
    }

    /// Rank 0's lines that start with `prefix`, after asserting that every rank printed
    /// the same ones.
    pub fn same_lines_on_every_rank(&self, prefix: &str) -> Vec<String> {
        let lines = self.lines_with(prefix);
        for (r, l) in lines.iter().enumerate() {
            assert_eq!(
                l,
                &lines[0],
                "`{prefix}` lines: rank {r} differs from rank 0\n{}",
                self.report()
            );
        }
        lines.into_iter().next().unwrap_or_default()
    }

    /// Everything the ranks printed to standard error.
    pub fn all_stderr(&self) -> String {
        self.outputs
            .iter()
            .map(|(_, e)| e.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn report(&self) -> String {
        let mut text = format!(
            "{} ({} ranks x {} devices) ended with {} after {:.1} s\ncommand: {}\n",
            self.program,
            self.ranks,
            self.devices,
            match self.status {
                None => "KILLED by the harness timeout".to_string(),
                Some(s) => s.to_string(),
            },
            self.elapsed.as_secs_f64(),
            self.command
        );
        for (r, (out, err)) in self.outputs.iter().enumerate() {
            text.push_str(&format!(
                "---- rank {r} stdout ----\n{}\n---- rank {r} stderr ----\n{}\n",
                out.trim_end(),
                err.trim_end()
            ));
        }
        text.push_str(&format!(
            "---- mpirun ----\n{}\n",
            self.mpirun_output.trim_end()
        ));
        text
    }
}

/// Runs `prog` (linked with the ICD loader) under `mpirun -np ranks` with
/// `libmirrorcl.so` preloaded and `devices` PoCL CPU devices per rank: a test cluster
/// on this machine (oversubscribed). Each rank's output is collected separately.
pub fn run_cluster(
    prog: &str,
    ranks: u32,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> Result<ClusterOutput, String> {
    run_cluster_as(prog, Way::Preload, ranks, devices, extra_env)
}

/// [`run_cluster`] for a program built `way` (`Way::Mpi` for hybrid MPI programs).
pub fn run_cluster_as(
    prog: &str,
    way: Way,
    ranks: u32,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> Result<ClusterOutput, String> {
    run_cluster_wrapped(prog, way, &[], ranks, devices, extra_env)
}

/// [`run_cluster_as`] with the program started through `wrapper` (`mpirun … env prog`,
/// `mpirun … stdbuf -oL prog`): a command that execs the program, so the library is
/// loaded twice in each rank.
pub fn run_cluster_wrapped(
    prog: &str,
    way: Way,
    wrapper: &[&str],
    ranks: u32,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> Result<ClusterOutput, String> {
    let bin = compile(prog, way)?;
    let bin = bin.as_path();
    let lib = mirrorcl_lib();
    let out_dir = target_dir()
        .join("ctests")
        .join("mpi-out")
        .join(format!("{prog}-{ranks}x{devices}-{}", unique_suffix()));
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let wait_timeout = run_timeout()
        .as_secs()
        .saturating_sub(30)
        .max(10)
        .to_string();
    let mut env: Vec<(String, String)> = vec![
        ("LD_PRELOAD".into(), lib.display().to_string()),
        (
            "POCL_DEVICES".into(),
            vec!["pthread"; devices as usize].join(" "),
        ),
        ("MIRRORCL_EXPECT".into(), "1".into()),
        ("CTEST_EXPECT_DEVICES".into(), (ranks * devices).to_string()),
        ("MIRRORCL_WAIT_TIMEOUT".into(), wait_timeout),
        // PoCL's kernel cache, a directory per rank (`PoclCaches`).
        ("POCL_KERNEL_CACHE".into(), "1".into()),
        // Every rank's output, unprefixed, to its own file: each rank's checks are read.
        ("MIRRORCL_OUTPUT".into(), "raw".into()),
    ];
    for (k, v) in extra_env {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v.to_string()));
    }
    let caches = PoclCaches::take()?;
    let mpi = launcher::mpi();
    let mut args = mpi.job_args(&out_dir);
    // One application context per rank, the same but for the rank's own PoCL cache
    // (a context's variables hold for it only).
    let argv: Vec<String> = wrapper
        .iter()
        .map(|w| w.to_string())
        .chain([bin.display().to_string()])
        .collect();
    for r in 0..ranks {
        if r > 0 {
            args.push(launcher::Mpi::CONTEXT_SEPARATOR.into());
        }
        let mut rank_env = env.clone();
        rank_env.push(("POCL_CACHE_DIR".to_string(), caches.rank(r)));
        args.extend(mpi.context_args(1, &rank_env, &argv));
    }
    let mut cmd = Command::new(mpi.launcher());
    cmd.args(&args);
    for var in CONTROLLED_ENV {
        cmd.env_remove(var);
    }
    let tmpdir = mpi_tmpdir()?;
    mpi.prepare(&mut cmd, &tmpdir);
    cmd.current_dir(c_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let command = mpi.show(&args);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        format!(
            "cannot run {} (is {} installed?): {e}",
            mpi.launcher(),
            mpi.name()
        )
    })?;
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let readers = [
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out_pipe.read_to_end(&mut buf);
            buf
        }),
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err_pipe.read_to_end(&mut buf);
            buf
        }),
    ];
    let timeout = run_timeout();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for mpirun: {e}")),
        }
    };
    let elapsed = start.elapsed();
    let mpirun_output = readers
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r.join().unwrap_or_default()).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let outputs = (0..ranks)
        .map(|r| {
            let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
            mpi.rank_output(&out_dir, r)
                .map(|(out, err)| (read(out), read(err)))
                .unwrap_or_default()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&out_dir);
    let _ = std::fs::remove_dir_all(&tmpdir);
    Ok(ClusterOutput {
        program: prog.to_string(),
        ranks,
        devices,
        status,
        outputs,
        mpirun_output,
        elapsed,
        command,
    })
}

/// Runs `prog` as a cluster and asserts that every rank passed; returns the output for
/// further checks.
pub fn check_cluster(
    prog: &str,
    ranks: u32,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> ClusterOutput {
    check_cluster_wrapped(prog, &[], ranks, devices, extra_env)
}

/// [`check_cluster`] with the program started through `wrapper`
/// ([`run_cluster_wrapped`]).
pub fn check_cluster_wrapped(
    prog: &str,
    wrapper: &[&str],
    ranks: u32,
    devices: u32,
    extra_env: &[(&str, &str)],
) -> ClusterOutput {
    let out = run_cluster_wrapped(prog, Way::Preload, wrapper, ranks, devices, extra_env)
        .unwrap_or_else(|e| panic!("{prog} ({ranks} ranks x {devices} devices): {e}"));
    assert!(out.passed(), "{}", out.report());
    println!(
        "{prog} ({ranks} ranks x {devices} devices): PASS in {:.2} s",
        out.elapsed.as_secs_f64()
    );
    out
}

/// Runs `prog` as a cluster ([`check_cluster`]) with statistics written to a file
/// (`MIRRORCL_STATS=<file>`, rank 0 writes every rank's figures as JSON); returns every
/// rank's figures.
pub fn cluster_figures(
    prog: &str,
    ranks: u32,
    devices: u32,
    env: &[(&str, &str)],
) -> Vec<serde_json::Value> {
    let dir = target_dir().join("ctests").join("stats");
    std::fs::create_dir_all(&dir).expect("stats directory");
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(
        "{prog}-{ranks}x{devices}-{}-{run}.json",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let path_text = path.to_str().expect("UTF-8 path").to_string();
    let mut all_env: Vec<(&str, &str)> = env.to_vec();
    all_env.push(("MIRRORCL_STATS", &path_text));
    check_cluster(prog, ranks, devices, &all_env);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("rank 0 wrote no statistics to {}: {e}", path.display()));
    let _ = std::fs::remove_file(&path);
    let report: serde_json::Value = serde_json::from_str(&text).expect("statistics are JSON");
    let ranks_figures = report["ranks"]
        .as_array()
        .expect("per-rank figures")
        .clone();
    assert_eq!(ranks_figures.len(), ranks as usize, "{text}");
    // The cluster total is the sum of the ranks' figures.
    for key in ["commands_created", "sends", "bytes_sent"] {
        let sum: u64 = ranks_figures.iter().map(|f| f[key].as_u64().unwrap()).sum();
        assert_eq!(report["total"][key].as_u64(), Some(sum), "{key}: {text}");
    }
    ranks_figures
}

/// One figure of a rank's statistics.
pub fn figure(f: &serde_json::Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no figure {key} in {f}"))
}

/// The C programs of the suite (`tests/c/<name>.c`).
pub const PROGRAMS: &[&str] = &[
    "vecadd_multi",
    "platform_device",
    "context",
    "buffers",
    "program_kernel",
    "events",
    "errors",
    "pingpong",
    "vendor_fidelity",
    "lifetimes",
    "images",
    "threads_one_process",
    "memory_bounded",
    "wait_paths",
    "callback_enqueues",
];

/// The programs written for cluster runs (`tests/tests/cluster.rs`): ordinary
/// multi-device programs whose devices MirrorCL spreads over ranks.
pub const CLUSTER_PROGRAMS: &[&str] = &[
    "cluster_vecadd",
    "cluster_turns",
    "cluster_stencil",
    "cluster_control",
    "cluster_build",
    "cluster_big",
    "cluster_timeout",
    "cluster_hybrid",
    "cluster_attach",
    "cluster_alltoall",
    "cluster_replica",
    "cluster_diverge",
    "cluster_crash",
    "cluster_fail",
    "cluster_hostfail",
    "cluster_images",
    "cluster_args",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_an_error_with_build_instructions() {
        let err = locate_lib(Some("/nonexistent/libmirrorcl.so".into())).unwrap_err();
        assert!(err.contains("cargo build --release -p mirrorcl"), "{err}");
        assert!(err.contains("/nonexistent/libmirrorcl.so"), "{err}");
    }

    #[test]
    fn every_program_has_a_source_file() {
        for prog in PROGRAMS.iter().chain(CLUSTER_PROGRAMS) {
            let src = c_dir().join(format!("{prog}.c"));
            assert!(src.is_file(), "missing {}", src.display());
        }
        assert!(c_dir().join("check.h").is_file());
    }

    #[test]
    fn way_names_are_distinct() {
        let names: std::collections::HashSet<_> = Way::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names.len(), Way::ALL.len());
        assert!(!Way::Native.is_mirrorcl());
        assert!(Way::ALL[1..].iter().all(|w| w.is_mirrorcl()));
    }
}
