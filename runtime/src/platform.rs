//! The one MirrorCL platform: initialised on the first API call (never at load time,
//! since `mpirun` itself inherits `LD_PRELOAD`).

use crate::cl::*;
use crate::config::Config;
use crate::device::Device;
use crate::object::{Handle, Header};
use crate::vendor::{load_vendors, Vendor, V};
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
pub const PLATFORM_EXTENSIONS: &str = "cl_khr_icd";
pub const ICD_SUFFIX: &str = "MCL";

#[repr(C)]
pub struct Platform {
    header: Header,
    pub config: Config,
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
        crate::issuer::init_tracing();
        let config = Config::load().unwrap_or_else(|why| {
            eprintln!("MirrorCL: configuration error: {why}; using defaults");
            Config::default()
        });
        let vendors = load_vendors(&config, OWN_MARKER);
        let mut platform = Platform {
            header: Header::new(),
            config,
            vendors,
            devices: Vec::new(),
            rank: 0,
            size: 1,
            next_device_index: AtomicU32::new(0),
        };
        platform.devices = platform.discover_devices();
        tracing::debug!(
            "MirrorCL: {} vendor platform(s), {} device(s)",
            platform.vendors.len(),
            platform.devices.len()
        );
        platform
    }

    fn discover_devices(&self) -> Vec<Arc<Device>> {
        let mask = self.config.device_type_mask().unwrap_or(CL_DEVICE_TYPE_ALL);
        let mut devices = Vec::new();
        for vendor in &self.vendors {
            let Ok(get) = vfn!(vendor.platform.0, clGetDeviceIDs) else {
                continue;
            };
            let mut n: cl_uint = 0;
            // SAFETY: standard two-call query on a live vendor platform.
            if unsafe { get(vendor.platform.0, mask, 0, std::ptr::null_mut(), &mut n) }
                != CL_SUCCESS
            {
                continue;
            }
            let mut ids = vec![std::ptr::null_mut(); n as usize];
            // SAFETY: buffer of n entries.
            if unsafe {
                get(
                    vendor.platform.0,
                    mask,
                    n,
                    ids.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            } != CL_SUCCESS
            {
                continue;
            }
            if self.config.devices.max_devices > 0 {
                ids.truncate(self.config.devices.max_devices);
            }
            for id in ids {
                let index = self.next_device_index.fetch_add(1, Ordering::Relaxed);
                match Device::capture(
                    index,
                    self.rank,
                    vendor.index,
                    self.group_for(vendor.index, index),
                    V(id),
                    None,
                    Vec::new(),
                ) {
                    Ok(mut device) => {
                        let has_default = devices
                            .iter()
                            .any(|d: &Arc<Device>| d.device_type() & CL_DEVICE_TYPE_DEFAULT != 0);
                        if has_default {
                            device.clear_default_type();
                        }
                        let device = Arc::new(device);
                        Device::into_handle(device.clone());
                        devices.push(device);
                    }
                    Err(rc) => tracing::warn!("skipping a device of {}: error {rc}", vendor.name),
                }
            }
        }
        devices
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

    pub fn vendor(&self, index: u32) -> &Vendor {
        &self.vendors[index as usize]
    }
}
