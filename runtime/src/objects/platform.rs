//! The one MirrorCL platform: initialised on the first API call (never at load time,
//! since `mpirun` itself inherits `LD_PRELOAD`).

use crate::cl::*;
use crate::cluster::wire;
use crate::native::{load_vendors, VDevice, Vendor};
use crate::objects::device::Device;
use crate::objects::handle::{Handle, Header};
use crate::observe::config::{Config, CpuSharing};
use crate::ClResult;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// The symbol the ICD layer exports so that vendor discovery recognises MirrorCL's own
/// library among the ICD files and skips it.
pub const OWN_MARKER: &CStr = c"mirrorcl_icd_marker";

pub const PLATFORM_NAME: &str = "MirrorCL";
pub const PLATFORM_VENDOR: &str = "MirrorCL developers";
pub const PLATFORM_VERSION: &str = "OpenCL 1.2 MirrorCL 0.1";
pub const PLATFORM_PROFILE: &str = "FULL_PROFILE";
pub const PLATFORM_EXTENSIONS: &str = "cl_khr_icd cl_mirrorcl_attach_buffer";
pub const ICD_SUFFIX: &str = "MCL";

#[repr(C)]
pub struct Platform {
    header: Header,
    pub config: &'static Config,
    pub vendors: Vec<Vendor>,
    /// The platform's devices in cluster order (root devices only).
    pub devices: Vec<Arc<Device>>,
    /// This process's rank and the cluster size.
    pub rank: u32,
    pub size: u32,
    next_device_index: AtomicU32,
}

static PLATFORM: OnceLock<Platform> = OnceLock::new();

/// The platform, initialised on first use.
pub fn platform() -> &'static Platform {
    PLATFORM.get_or_init(Platform::init)
}

impl Platform {
    fn init() -> Platform {
        crate::observe::init_logging();
        let config = crate::observe::config::get();
        let node = crate::cluster::node::node();
        let vendors = load_vendors(config, OWN_MARKER);
        let mut platform = Platform {
            header: Header::new(),
            config,
            vendors,
            devices: Vec::new(),
            rank: node.rank,
            size: node.size,
            next_device_index: AtomicU32::new(0),
        };
        platform.devices = platform.discover_devices();
        if !platform.config.runtime.stats.is_empty() {
            crate::observe::stats::turn_on();
            // After the node's own handler: handlers run last registered first, so the
            // figures are gathered before MPI is finalised.
            // SAFETY: registering a plain extern "C" function.
            unsafe { libc::atexit(report_stats_at_exit) };
        }
        if platform.config.runtime.show_devices && platform.rank == 0 {
            crate::observe::diag::diag(&platform.device_table());
        }
        tracing::debug!(
            "MirrorCL: {} vendor platform(s), {} device(s)",
            platform.vendors.len(),
            platform.devices.len()
        );
        platform
    }

    /// Finds this rank's devices, then exchanges descriptions with the other ranks:
    /// every rank ends up with the same list, rank by rank, with the same indexes.
    fn discover_devices(&self) -> Vec<Arc<Device>> {
        let node = crate::cluster::node::node();
        let mut mine = Vec::new();
        for (vendor, vdev) in self.owned_vendor_devices(node) {
            let v = &self.vendors[vendor as usize];
            match Device::capture(
                0,
                self.rank,
                &node.host,
                &v.name,
                vendor,
                self.group_for(vendor, mine.len() as u32),
                vdev,
                None,
                Vec::new(),
            ) {
                Ok(device) => mine.push(device),
                Err(rc) => tracing::warn!("skipping a device of {}: error {rc}", v.name),
            }
        }
        let all = node.exchange(&wire::RankDevices {
            // Settings every rank must share ride along; rank 0's hold.
            piece_bytes: self.config.runtime.piece_mib << 20,
            devices: mine.iter().map(Device::describe).collect(),
        });
        let mut devices: Vec<Device> = Vec::new();
        let mut mine = mine.into_iter();
        for (r, rank) in all.into_iter().enumerate() {
            if r == 0 {
                crate::native::staging::set_piece_max(rank.piece_bytes as usize);
            }
            for desc in rank.devices {
                let index = devices.len() as u32;
                let device = if r as u32 == self.rank {
                    let mut d = mine.next().expect("as many as described");
                    d.index = index;
                    d.group = self.group_for(d.vendor, index);
                    d.owner_group = d.group;
                    d
                } else {
                    let mut d = Device::from_description(index, desc);
                    if d.owner_group & 0x8000_0000 != 0 {
                        // A group per device on the owner (context_per_device).
                        d.owner_group = 0x8000_0000 | index;
                    }
                    d
                };
                devices.push(device);
            }
        }
        self.next_device_index
            .store(devices.len() as u32, Ordering::Relaxed);
        // Each vendor marks its own first device as the default: keep one for the whole
        // platform.
        let mut seen_default = false;
        devices
            .into_iter()
            .map(|mut d| {
                if d.device_type() & CL_DEVICE_TYPE_DEFAULT != 0 {
                    if seen_default {
                        d.clear_default_type();
                    }
                    seen_default = true;
                }
                let d = Arc::new(d);
                Device::into_handle(d.clone());
                d
            })
            .collect()
    }

    /// The vendor devices this rank owns: ranks sharing a host split its GPUs and
    /// accelerators by node-local rank (each is owned by exactly one rank); CPU devices
    /// are each rank's own unless the configuration splits them too. A rank may own
    /// none (more ranks than devices on its host): it runs the program all the same.
    fn owned_vendor_devices(&self, node: &crate::cluster::node::Node) -> Vec<(u32, VDevice)> {
        let mask = self.config.device_type_mask().unwrap_or(CL_DEVICE_TYPE_ALL);
        let (mut cpus, mut others) = (0u32, 0u32);
        let mut owned = Vec::new();
        for vendor in &self.vendors {
            // A CPU vendor starts its compute threads when it is loaded or when its devices
            // are first listed.
            let before = crate::native::threads::current();
            let Ok(ids) = vendor.platform.devices(mask) else {
                continue;
            };
            let is_cpu: Vec<bool> = (ids.iter())
                .map(|id| {
                    id.info_value::<cl_device_type>(CL_DEVICE_TYPE)
                        .is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0)
                })
                .collect();
            if self.config.runtime.batch_cpu_vendor_threads
                && !is_cpu.is_empty()
                && is_cpu.iter().all(|&cpu| cpu)
            {
                let mut started = crate::native::threads::started_since(&before);
                started.extend_from_slice(&vendor.started_threads);
                crate::native::threads::make_batch(&vendor.name, &started);
            }
            // MIRRORCL_MAX_DEVICES limits what this rank owns of each vendor platform,
            // after the split: on a 4-GPU host, 2 ranks with a limit of 1 own a GPU each.
            let limit = match self.config.devices.max_devices {
                0 => usize::MAX,
                n => n,
            };
            let mut mine = 0;
            for (id, is_cpu) in ids.into_iter().zip(is_cpu) {
                let counter = if is_cpu { &mut cpus } else { &mut others };
                let j = *counter;
                *counter += 1;
                let shared = is_cpu && self.config.devices.cpu == CpuSharing::PerRank;
                if (shared || j % node.local_size == node.local_rank) && mine < limit {
                    owned.push((vendor.index, id));
                    mine += 1;
                }
            }
        }
        owned
    }

    /// The vendor-context group of a device (see `Device::group`).
    pub fn group_for(&self, vendor: u32, index: u32) -> u32 {
        if self.config.runtime.context_per_device {
            0x8000_0000 | index
        } else {
            vendor
        }
    }

    /// A fresh cluster-wide device index (for sub-devices).
    pub fn new_device_index(&self) -> u32 {
        self.next_device_index.fetch_add(1, Ordering::Relaxed)
    }

    pub fn handle(&self) -> *mut c_void {
        self as *const Platform as *mut c_void
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Checks a platform handle: NULL selects MirrorCL (the specification leaves NULL's
    /// meaning to the implementation); anything else must be MirrorCL's own handle.
    pub fn check(handle: *mut c_void) -> ClResult<&'static Platform> {
        let p = platform();
        if handle.is_null() || handle == p.handle() {
            Ok(p)
        } else {
            Err(CL_INVALID_PLATFORM)
        }
    }

    /// The cluster's devices, one line each: what `MIRRORCL_SHOW_DEVICES=1` prints.
    pub fn device_table(&self) -> String {
        let mut t = format!(
            "MirrorCL: {} rank(s), {} device(s)\n  {:>3}  {:>4}  {:<12} {:<28} {:<5} {:>9} {:>4}  name\n",
            self.size,
            self.devices.len(),
            "id",
            "rank",
            "host",
            "vendor",
            "type",
            "memory",
            "CUs"
        );
        for d in &self.devices {
            let t_ = d.device_type();
            let kind = if t_ & CL_DEVICE_TYPE_GPU != 0 {
                "GPU"
            } else if t_ & CL_DEVICE_TYPE_CPU != 0 {
                "CPU"
            } else if t_ & CL_DEVICE_TYPE_ACCELERATOR != 0 {
                "ACC"
            } else {
                "other"
            };
            let mem: cl_ulong = d.info_value(CL_DEVICE_GLOBAL_MEM_SIZE);
            t.push_str(&format!(
                "  {:>3}  {:>4}  {:<12} {:<28} {:<5} {:>6} MiB {:>4}  {}\n",
                d.index,
                d.owner,
                d.host,
                d.vendor_name,
                kind,
                mem >> 20,
                d.info_value::<cl_uint>(CL_DEVICE_MAX_COMPUTE_UNITS),
                d.name()
            ));
        }
        t
    }

    /// This rank's own devices.
    pub fn local_devices(&self) -> impl Iterator<Item = &Arc<Device>> {
        self.devices.iter().filter(|d| d.local())
    }

    pub fn vendor(&self, index: u32) -> &Vendor {
        &self.vendors[index as usize]
    }
}

extern "C" fn report_stats_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(p) = PLATFORM.get() {
            crate::cluster::statistics::report_at_exit(&p.config.runtime.stats);
        }
    });
}
