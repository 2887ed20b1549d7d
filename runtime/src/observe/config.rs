//! Configuration: a TOML file (`MIRRORCL_CONFIG`, presets in `cluster-configs/`) with
//! environment variables taking precedence.

use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub devices: DeviceSelection,
    pub runtime: RuntimeSettings,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceSelection {
    /// A directory of `.icd` files, or one `.icd` file (`MIRRORCL_VENDORS`).
    pub vendors: String,
    /// Substrings of vendor platform names to use; empty = all (`MIRRORCL_PLATFORMS`,
    /// comma-separated).
    pub platforms: Vec<String>,
    /// Device types to use: "cpu", "gpu", "accelerator", "custom" or "all"
    /// (`MIRRORCL_DEVICE_TYPES`, comma-separated).
    pub types: Vec<String>,
    /// Each rank owns at most this many devices of each vendor platform; 0 = no limit
    /// (`MIRRORCL_MAX_DEVICES`).
    pub max_devices: usize,
    /// Whether ranks sharing a host each use all of its CPU devices ("per-rank", the
    /// default: every rank has its own CPU device) or split them like GPUs ("split")
    /// (`MIRRORCL_CPU_DEVICES`). GPUs and accelerators are always split by node-local
    /// rank, so each is owned by exactly one rank.
    pub cpu: CpuSharing,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuSharing {
    #[default]
    PerRank,
    Split,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeSettings {
    /// How long a hand-off spins before the thread parks, in microseconds
    /// (`MIRRORCL_SPIN_US`).
    pub spin_us: u64,
    /// The threads a vendor of CPU devices starts (PoCL's workers) run under
    /// `SCHED_BATCH`, so that one woken by an enqueue does not take the enqueuing
    /// thread's core (`MIRRORCL_VENDOR_BATCH=0` leaves them as started). See
    /// `vendor::threads`.
    pub batch_cpu_vendor_threads: bool,
    /// The largest piece a transfer between ranks moves in, in MiB (`MIRRORCL_PIECE_MIB`,
    /// 1-1024; default 4): smaller pieces overlap reading, sending and writing more
    /// finely, larger ones pay fewer hand-offs; above 4 MiB they stage through pageable
    /// memory, which NVIDIA copies through a bounce buffer of its own. Rank 0's value
    /// holds for the whole cluster.
    pub piece_mib: u64,
    /// The deadline of every blocking wait, in seconds; 0 = none
    /// (`MIRRORCL_WAIT_TIMEOUT`).
    pub wait_timeout_s: u64,
    /// How many commands a queue of a cluster may have in flight before an enqueue
    /// waits for its oldest; 0 = no bound (`MIRRORCL_AHEAD`). See `Queue::keep_pace`.
    pub ahead: u64,
    /// One vendor context per device instead of per vendor platform
    /// (`MIRRORCL_CONTEXT_PER_DEVICE=1`): data then moves between any two devices
    /// through the host copy, as between vendors.
    pub context_per_device: bool,
    /// Whether to run as a cluster over MPI: "auto" (when started by an MPI launcher or
    /// when the program initialised MPI itself) or "off" (`MIRRORCL_MPI`).
    pub mpi: MpiMode,
    /// Rank 0 prints the cluster's device table (id, owner rank, host, vendor, type,
    /// name) to standard error at start-up (`MIRRORCL_SHOW_DEVICES=1`).
    pub show_devices: bool,
    /// Which of the thesis' variants runs (`MIRRORCL_VARIANT`): `decentralization`
    /// (`clAttachBufferToDevice` ignored, every command enqueued), `attach` (attach
    /// honoured, every command enqueued) or `full` (attach and the queueing
    /// optimisation, the default).
    pub variant: Variant,
    /// `MIRRORCL_STATS`: empty for none, `1` for a table at exit, else a JSON file path.
    pub stats: String,
    /// `MIRRORCL_TRACE`: a directory each rank writes its trace to (`rank-<r>.json`,
    /// Chrome trace-event JSON; `mirrorcl trace DIR` merges them); empty for none.
    pub trace: String,
    /// `MIRRORCL_RECORD`: a path `FILE`; every rank writes the stream its schedulers see
    /// to `FILE.<rank>` (`record.rs`, for `mirrorcl-sim --replay`); empty for none.
    pub record: String,
    /// Compare what every replica feeds the runtime at synchronisation points
    /// (`MIRRORCL_VERIFY=1`).
    pub verify: bool,
    /// Which commands the thread that enqueues them issues itself, when its device's
    /// issuer thread has nothing before it (`MIRRORCL_CALLER_ISSUES`): "auto" ("waited"
    /// for devices whose work does not run on the host's cores, "idle" for CPU
    /// devices), "waited", "idle" or "off" (see [`CallerIssues`]).
    pub caller_issues: CallerIssues,
    /// Every device's issuer holds a command until its vendor can wait on all it waits
    /// for, as for every vendor but PoCL (`MIRRORCL_HOLD_ALL=1`): where PoCL shares the
    /// host's cores with its own workers, commands wait in the vendor instead. For
    /// tests of the GPUs' way of issuing on CPU devices.
    pub hold_all: bool,
    /// This rank's host identity (`MIRRORCL_HOST`, per rank, never from the file): ranks
    /// with the same identity split that host's devices among themselves. Empty: the
    /// hostname, with MPI's shared-memory grouping. Set it where hostnames do not tell
    /// hosts apart (containers) or to make several "hosts" on one machine for tests.
    #[serde(skip)]
    pub host: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    Decentralization,
    Attach,
    #[default]
    Full,
}

/// Which commands the enqueuing thread issues itself when the device's issuer thread has
/// nothing before it; always, besides, a command that does not block where the issuer
/// thread would have to be woken for it (it cannot spin).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallerIssues {
    /// `Waited` for GPUs and accelerators, `Idle` for CPU devices.
    #[default]
    Auto,
    /// A command the thread will wait for: a blocking read or write, or the first
    /// command after it waited for the device. Other commands go to the issuer thread,
    /// whose vendor calls then overlap with the enqueuing.
    Waited,
    /// Every command that does not block, while the program has not named host
    /// threads. For a CPU device, whose work takes the host's cores anyway: a hand-off
    /// to another thread costs a core's time and often a wake-up there.
    Idle,
    /// None beyond the rule for an issuer thread that cannot spin.
    Off,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MpiMode {
    #[default]
    Auto,
    Off,
}

impl Default for DeviceSelection {
    fn default() -> Self {
        DeviceSelection {
            vendors: "/etc/OpenCL/vendors".into(),
            platforms: Vec::new(),
            types: vec!["all".into()],
            max_devices: 0,
            cpu: CpuSharing::PerRank,
        }
    }
}

/// The largest piece a transfer between ranks moves in (`MIRRORCL_PIECE_MIB`), by
/// default: the largest page-locked staging block (`native::staging`).
pub const PIECE_DEFAULT: usize = 4 << 20;

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            spin_us: 150,
            batch_cpu_vendor_threads: true,
            piece_mib: (PIECE_DEFAULT >> 20) as u64,
            wait_timeout_s: 600,
            ahead: 1024,
            context_per_device: false,
            mpi: MpiMode::Auto,
            show_devices: false,
            variant: Variant::Full,
            stats: String::new(),
            trace: String::new(),
            record: String::new(),
            verify: false,
            caller_issues: CallerIssues::Auto,
            hold_all: false,
            host: String::new(),
        }
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// This process's configuration, read once (on the first API call; a configuration
/// error is reported then, and the defaults used).
pub fn get() -> &'static Config {
    static CONFIG: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
    CONFIG.get_or_init(|| {
        Config::load().unwrap_or_else(|why| {
            crate::diag!("MirrorCL: configuration error: {why}; using defaults");
            Config::default()
        })
    })
}

impl Config {
    /// Reads the file named by `MIRRORCL_CONFIG` (if any), then applies the environment.
    /// Errors name the file and the problem; the caller reports them once.
    pub fn load() -> Result<Config, String> {
        let mut config = match std::env::var("MIRRORCL_CONFIG") {
            Ok(path) if !path.is_empty() => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("MIRRORCL_CONFIG={path}: {e}"))?;
                toml::from_str(&text).map_err(|e| format!("MIRRORCL_CONFIG={path}: {e}"))?
            }
            _ => Config::default(),
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if let Some(v) = env("MIRRORCL_VENDORS") {
            config.devices.vendors = v;
        }
        if let Some(v) = env("MIRRORCL_PLATFORMS") {
            config.devices.platforms = list(&v);
        }
        if let Some(v) = env("MIRRORCL_DEVICE_TYPES") {
            config.devices.types = list(&v);
        }
        let number = |name: &str| -> Result<Option<u64>, String> {
            env(name)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("{name}={v}: not a number"))
                })
                .transpose()
        };
        if let Some(v) = number("MIRRORCL_MAX_DEVICES")? {
            config.devices.max_devices = v as usize;
        }
        if let Some(v) = number("MIRRORCL_SPIN_US")? {
            config.runtime.spin_us = v;
        }
        if let Some(v) = number("MIRRORCL_PIECE_MIB")? {
            config.runtime.piece_mib = v;
        }
        if !(1..=1024).contains(&config.runtime.piece_mib) {
            return Err(format!(
                "MIRRORCL_PIECE_MIB={}: use 1 to 1024",
                config.runtime.piece_mib
            ));
        }
        if let Some(v) = number("MIRRORCL_AHEAD")? {
            config.runtime.ahead = v;
        }
        if let Some(v) = number("MIRRORCL_WAIT_TIMEOUT")? {
            config.runtime.wait_timeout_s = v;
        }
        if let Some(v) = env("MIRRORCL_CONTEXT_PER_DEVICE") {
            config.runtime.context_per_device = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = env("MIRRORCL_VENDOR_BATCH") {
            config.runtime.batch_cpu_vendor_threads = !matches!(v.as_str(), "0" | "false" | "no");
        }
        if let Some(v) = env("MIRRORCL_HOLD_ALL") {
            config.runtime.hold_all = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = env("MIRRORCL_SHOW_DEVICES") {
            config.runtime.show_devices = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = env("MIRRORCL_VARIANT") {
            config.runtime.variant = match v.as_str() {
                "decentralization" => Variant::Decentralization,
                "attach" => Variant::Attach,
                "full" => Variant::Full,
                _ => {
                    return Err(format!(
                        "MIRRORCL_VARIANT={v}: use decentralization, attach or full"
                    ))
                }
            };
        }
        if let Some(v) = env("MIRRORCL_VERIFY") {
            config.runtime.verify = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = env("MIRRORCL_HOST") {
            config.runtime.host = v;
        }
        if let Some(v) = env("MIRRORCL_STATS") {
            config.runtime.stats = v;
        }
        if let Some(v) = env("MIRRORCL_TRACE") {
            config.runtime.trace = v;
        }
        if let Some(v) = env("MIRRORCL_RECORD") {
            config.runtime.record = v;
        }
        if let Some(v) = env("MIRRORCL_CPU_DEVICES") {
            config.devices.cpu = match v.as_str() {
                "per-rank" => CpuSharing::PerRank,
                "split" => CpuSharing::Split,
                _ => return Err(format!("MIRRORCL_CPU_DEVICES={v}: use per-rank or split")),
            };
        }
        if let Some(v) = env("MIRRORCL_CALLER_ISSUES") {
            config.runtime.caller_issues = match v.as_str() {
                "auto" => CallerIssues::Auto,
                "waited" => CallerIssues::Waited,
                "idle" => CallerIssues::Idle,
                "off" | "0" => CallerIssues::Off,
                _ => {
                    return Err(format!(
                        "MIRRORCL_CALLER_ISSUES={v}: use auto, waited, idle or off"
                    ))
                }
            };
        }
        if let Some(v) = env("MIRRORCL_MPI") {
            config.runtime.mpi = match v.as_str() {
                "auto" => MpiMode::Auto,
                "off" | "0" => MpiMode::Off,
                _ => return Err(format!("MIRRORCL_MPI={v}: use auto or off")),
            };
        }
        config.device_type_mask()?;
        Ok(config)
    }

    /// Reads and checks one configuration file (no environment applied).
    pub fn load_file(path: &std::path::Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let config: Config =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        config.device_type_mask()?;
        Ok(config)
    }

    /// The selected device types as a `cl_device_type` mask.
    pub fn device_type_mask(&self) -> Result<u64, String> {
        use crate::cl::*;
        let mut mask = 0;
        for t in &self.devices.types {
            mask |= match t.to_ascii_lowercase().as_str() {
                "cpu" => CL_DEVICE_TYPE_CPU,
                "gpu" => CL_DEVICE_TYPE_GPU,
                "accelerator" => CL_DEVICE_TYPE_ACCELERATOR,
                "custom" => CL_DEVICE_TYPE_CUSTOM,
                "all" => CL_DEVICE_TYPE_ALL,
                other => {
                    return Err(format!(
                        "unknown device type {other:?} (use cpu, gpu, accelerator, custom or all)"
                    ))
                }
            };
        }
        Ok(if mask == 0 { CL_DEVICE_TYPE_ALL } else { mask })
    }

    pub fn spin(&self) -> Duration {
        Duration::from_micros(self.runtime.spin_us)
    }

    pub fn wait_timeout(&self) -> Option<Duration> {
        (self.runtime.wait_timeout_s > 0).then(|| Duration::from_secs(self.runtime.wait_timeout_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../cluster-configs");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                let config: Config =
                    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                config.device_type_mask().unwrap();
            }
        }
    }
}
