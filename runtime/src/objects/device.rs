//! Devices: every device of the platform has a cluster-wide index and an owner rank. An
//! actual device (owned here) wraps a vendor device and has one issuer thread; its
//! description is captured once at start-up so that every query is answered the same way
//! wherever it is asked (the shape a virtual device needs).

use crate::cl::*;
use crate::cluster::wire;
use crate::native::VDevice;
use crate::objects::handle::{impl_handle, Header};
use crate::objects::issuer::Issuer;
use crate::observe::config::CallerIssues;
use crate::ClResult;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// The `group` of every virtual device: no vendor context of this rank has it.
pub const VIRTUAL_GROUP: u32 = u32::MAX;

/// Device queries captured at start-up: every OpenCL 1.2 `cl_device_info`.
pub const DEVICE_INFO_1_2: std::ops::RangeInclusive<cl_device_info> = 0x1000..=0x1049;

/// Extensions that need nothing from the host API beyond what MirrorCL forwards.
const PASS_THROUGH_EXTENSIONS: &[&str] = &[
    "cl_khr_fp64",
    "cl_khr_fp16",
    "cl_khr_global_int32_base_atomics",
    "cl_khr_global_int32_extended_atomics",
    "cl_khr_local_int32_base_atomics",
    "cl_khr_local_int32_extended_atomics",
    "cl_khr_int64_base_atomics",
    "cl_khr_int64_extended_atomics",
    "cl_khr_byte_addressable_store",
    "cl_khr_3d_image_writes",
    "cl_nv_pragma_unroll",
    "cl_nv_compiler_options",
];

#[repr(C)]
pub struct Device {
    header: Header,
    /// Cluster-wide index; the scheduler's `Location::Device` uses it.
    pub index: u32,
    /// The rank owning the actual device.
    pub owner: u32,
    /// The owner's host name and the vendor platform's name, for device tables.
    pub host: String,
    pub vendor_name: String,
    /// NVIDIA keeps commands on disjoint bytes of one buffer apart; PoCL orders them
    /// itself (`DeviceDesc::ranges_apart`). Known alike on every rank; read per command.
    ranges_apart: bool,
    /// Index of the vendor platform in `Platform::vendors`.
    pub vendor: u32,
    /// Devices with equal groups share one vendor context in a MirrorCL context (and
    /// copy between each other directly): the vendor's index, or a group per device
    /// with `context_per_device`.
    pub group: u32,
    /// The group on the owner (`group` there): what the scheduler compares, the same
    /// on every rank. A virtual device's `group` is `VIRTUAL_GROUP`, which no vendor
    /// context here has.
    pub owner_group: u32,
    /// The vendor device (none for a virtual device).
    pub vdev: Option<VDevice>,
    pub parent: Option<Arc<Device>>,
    /// The partition properties this sub-device was created with.
    pub partition: Vec<cl_device_partition_property>,
    info: HashMap<cl_device_info, Vec<u8>>,
    issuer: OnceLock<Issuer>,
}

impl_handle!(Device, Device, CL_INVALID_DEVICE);

fn as_bytes<T: Copy>(v: T) -> Vec<u8> {
    let mut out = vec![0u8; std::mem::size_of::<T>()];
    // SAFETY: `out` has exactly size_of::<T>() bytes; T is plain data.
    unsafe { std::ptr::write_unaligned(out.as_mut_ptr() as *mut T, v) };
    out
}

fn from_bytes<T: Copy + Default>(b: Option<&Vec<u8>>) -> T {
    match b {
        // SAFETY: size checked; T is plain data.
        Some(b) if b.len() >= std::mem::size_of::<T>() => unsafe {
            std::ptr::read_unaligned(b.as_ptr() as *const T)
        },
        _ => T::default(),
    }
}

fn text(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// What MirrorCL itself answers for a captured device, replacing the vendor's answers:
/// OpenCL 1.2, only the extensions that need nothing from the host API, no
/// native or built-in kernels, and its own parent and partition.
fn mirrorcl_answers(
    info: &mut HashMap<cl_device_info, Vec<u8>>,
    parent: Option<&Arc<Device>>,
    partition: &[cl_device_partition_property],
) {
    let string = |info: &HashMap<cl_device_info, Vec<u8>>, p| {
        info.get(&p).map(|b| crate::c_string(b)).unwrap_or_default()
    };
    info.insert(
        CL_DEVICE_PARENT_DEVICE,
        as_bytes(
            parent
                .as_ref()
                .map_or(std::ptr::null_mut(), |p| p.handle_ptr()),
        ),
    );
    let version = string(info, CL_DEVICE_VERSION);
    let vendor_part = version
        .strip_prefix("OpenCL ")
        .and_then(|v| v.split_once(' '))
        .map_or(version.as_str(), |(_, rest)| rest);
    info.insert(
        CL_DEVICE_VERSION,
        text(&format!("OpenCL 1.2 {vendor_part}")),
    );
    let c_version = string(info, CL_DEVICE_OPENCL_C_VERSION);
    if !c_version.starts_with("OpenCL C 1.") {
        info.insert(CL_DEVICE_OPENCL_C_VERSION, text("OpenCL C 1.2 "));
    }
    let mut extensions: Vec<&str> = vec!["cl_khr_icd"];
    let vendor_ext = string(info, CL_DEVICE_EXTENSIONS);
    extensions.extend(
        vendor_ext
            .split_whitespace()
            .filter(|e| PASS_THROUGH_EXTENSIONS.contains(e)),
    );
    info.insert(CL_DEVICE_EXTENSIONS, text(&extensions.join(" ")));
    let caps: cl_device_exec_capabilities = from_bytes(info.get(&CL_DEVICE_EXECUTION_CAPABILITIES));
    info.insert(
        CL_DEVICE_EXECUTION_CAPABILITIES,
        as_bytes(caps & !CL_EXEC_NATIVE_KERNEL),
    );
    info.insert(CL_DEVICE_BUILT_IN_KERNELS, text(""));
    if !partition.is_empty() {
        let mut p = partition.to_vec();
        p.push(0);
        let bytes: Vec<u8> = p.iter().flat_map(|x| x.to_ne_bytes()).collect();
        info.insert(CL_DEVICE_PARTITION_TYPE, bytes);
    }
}

/// Whether a vendor keeps commands on disjoint bytes of one buffer apart.
fn ranges_apart(vendor_name: &str) -> bool {
    vendor_name.contains("NVIDIA")
}

impl Device {
    /// Captures an actual vendor device. Queries whose answers are MirrorCL handles or
    /// live counts (platform, reference count) are answered by the ICD layer.
    #[allow(clippy::too_many_arguments)]
    pub fn capture(
        index: u32,
        owner: u32,
        host: &str,
        vendor_name: &str,
        vendor: u32,
        group: u32,
        vdev: VDevice,
        parent: Option<Arc<Device>>,
        partition: Vec<cl_device_partition_property>,
    ) -> ClResult<Device> {
        let mut info = HashMap::new();
        for param in DEVICE_INFO_1_2 {
            if let Ok(bytes) = vdev.info(param) {
                info.insert(param, bytes);
            }
        }
        mirrorcl_answers(&mut info, parent.as_ref(), &partition);
        Ok(Device {
            header: Header::new(),
            index,
            owner,
            host: host.to_string(),
            vendor_name: vendor_name.to_string(),
            ranges_apart: ranges_apart(vendor_name),
            vendor,
            group,
            owner_group: group,
            vdev: Some(vdev),
            parent,
            partition,
            info,
            issuer: OnceLock::new(),
        })
    }

    /// This device's description for the other ranks: everything a virtual device of it
    /// answers.
    pub fn describe(&self) -> wire::DeviceDescription {
        let mut info: Vec<_> = self.info.iter().map(|(&p, v)| (p, v.clone())).collect();
        info.sort_unstable_by_key(|&(p, _)| p);
        wire::DeviceDescription {
            owner: self.owner,
            owner_group: self.owner_group,
            host: self.host.clone(),
            vendor_name: self.vendor_name.clone(),
            info,
        }
    }

    /// A virtual device from another rank's description. Its vendor index and handle
    /// are meaningless here: nothing is ever issued to it on this rank.
    pub fn from_description(index: u32, d: wire::DeviceDescription) -> Device {
        Device {
            header: Header::new(),
            index,
            owner: d.owner,
            host: d.host,
            ranges_apart: ranges_apart(&d.vendor_name),
            vendor_name: d.vendor_name,
            vendor: u32::MAX,
            group: VIRTUAL_GROUP,
            owner_group: d.owner_group,
            vdev: None,
            parent: None,
            partition: Vec::new(),
            info: d.info.into_iter().collect(),
            issuer: OnceLock::new(),
        }
    }

    /// A query MirrorCL does not capture (newer than 1.2, or a vendor extension's),
    /// answered by the owner's vendor. In a cluster this is a collective, so every rank
    /// returns the owner's answer, bytes or error.
    pub fn owner_query(&self, param: cl_device_info) -> ClResult<Vec<u8>> {
        let local = match &self.vdev {
            Some(vdev) => vdev.info(param),
            None => Err(CL_INVALID_VALUE),
        };
        let node = crate::cluster::node::node();
        if !node.is_cluster() {
            return local;
        }
        let mine = wire::OwnerAnswer(self.local().then_some(local));
        // The owner always answers (its device is local there).
        (node.exchange(&mine).into_iter().nth(self.owner as usize))
            .and_then(|m| m.0)
            .unwrap_or(Err(CL_INVALID_DEVICE))
    }

    /// The owner's part of `clCreateSubDevices`: partitions the vendor device and
    /// captures the sub-devices (or only counts them when `create` is false).
    fn partition_here(
        parent: &Arc<Device>,
        props: &[cl_device_partition_property],
        partition: &[cl_device_partition_property],
        create: bool,
    ) -> ClResult<(u32, Vec<Device>)> {
        let vdev = parent.vdev.as_ref().ok_or(CL_INVALID_DEVICE)?;
        if !create {
            return Ok((vdev.count_sub_devices(props)?, Vec::new()));
        }
        let subs = vdev
            .create_sub_devices(props)?
            .into_iter()
            .map(|v| {
                Device::capture(
                    0,
                    parent.owner,
                    &parent.host,
                    &parent.vendor_name,
                    parent.vendor,
                    parent.group,
                    v,
                    Some(parent.clone()),
                    partition.to_vec(),
                )
            })
            .collect::<ClResult<Vec<_>>>()?;
        Ok((subs.len() as u32, subs))
    }

    /// `clCreateSubDevices` (`props` zero-terminated): the owner partitions its actual
    /// device and every rank learns the result from it, so sub-device indexes and
    /// answers agree everywhere. Only counts when `create` is false.
    pub fn create_sub_devices(
        parent: &Arc<Device>,
        props: &[cl_device_partition_property],
        create: bool,
    ) -> ClResult<(u32, Vec<Arc<Device>>)> {
        let platform = crate::objects::platform::platform();
        let node = crate::cluster::node::node();
        let partition: Vec<_> = props[..props.len() - 1].to_vec();
        let mut local: ClResult<(u32, Vec<Device>)> = Err(CL_INVALID_DEVICE);
        if parent.local() {
            local = Device::partition_here(parent, props, &partition, create);
        }
        let (n, descriptions, actual) = if node.is_cluster() {
            let mine = wire::SubDevices(parent.local().then(|| {
                local
                    .as_ref()
                    .map(|(n, subs)| (*n, subs.iter().map(Device::describe).collect()))
                    .map_err(|rc| *rc)
            }));
            // The owner always answers (its device is local there).
            let (n, descs) = (node.exchange(&mine).into_iter().nth(parent.owner as usize))
                .and_then(|m| m.0)
                .unwrap_or(Err(CL_INVALID_DEVICE))?;
            (n, descs, local.ok().map(|(_, s)| s).unwrap_or_default())
        } else {
            let (n, subs) = local?;
            (n, Vec::new(), subs)
        };
        if !create {
            return Ok((n, Vec::new()));
        }
        let mut actual = actual.into_iter();
        let mut descriptions = descriptions.into_iter();
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let index = platform.new_device_index();
            let mut d = if parent.local() {
                actual.next().ok_or(CL_DEVICE_PARTITION_FAILED)?
            } else {
                let desc = descriptions.next().ok_or(CL_DEVICE_PARTITION_FAILED)?;
                let mut d = Device::from_description(index, desc);
                d.info
                    .insert(CL_DEVICE_PARENT_DEVICE, as_bytes(parent.handle_ptr()));
                d.parent = Some(parent.clone());
                d.partition = partition.clone();
                d
            };
            d.index = index;
            if parent.local() {
                d.group = platform.group_for(parent.vendor, index);
                d.owner_group = d.group;
            } else if d.owner_group & 0x8000_0000 != 0 {
                // The owner gives every device its own group (context_per_device).
                d.owner_group = 0x8000_0000 | index;
            }
            out.push(Arc::new(d));
        }
        Ok((n, out))
    }

    /// Leaves `CL_DEVICE_TYPE_DEFAULT` to one device of the platform: each vendor
    /// marks its own first device as the default.
    pub fn clear_default_type(&mut self) {
        let t: cl_device_type = self.info_value(CL_DEVICE_TYPE);
        self.info
            .insert(CL_DEVICE_TYPE, as_bytes(t & !CL_DEVICE_TYPE_DEFAULT));
    }

    pub fn handle_ptr(&self) -> *mut c_void {
        self as *const Device as *mut c_void
    }

    /// The captured answer to a device query, if it is one MirrorCL answers.
    pub fn info(&self, param: cl_device_info) -> Option<&[u8]> {
        self.info.get(&param).map(|v| v.as_slice())
    }

    pub fn info_value<T: Copy + Default>(&self, param: cl_device_info) -> T {
        from_bytes(self.info.get(&param))
    }

    /// Owned by this rank (an actual device, with its vendor device); otherwise a
    /// virtual device, never driven here.
    #[inline]
    pub fn local(&self) -> bool {
        self.vdev.is_some()
    }

    pub fn name(&self) -> String {
        self.info(CL_DEVICE_NAME)
            .map(crate::c_string)
            .unwrap_or_default()
    }

    pub fn device_type(&self) -> cl_device_type {
        self.info_value(CL_DEVICE_TYPE)
    }

    /// Base address alignment in bytes (the query answers in bits).
    pub fn base_align(&self) -> u64 {
        (self.info_value::<cl_uint>(CL_DEVICE_MEM_BASE_ADDR_ALIGN) as u64 / 8).max(1)
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// The device as every rank's scheduler sees it.
    pub fn scheduled(&self) -> mirrorcl_scheduler::DeviceDesc {
        mirrorcl_scheduler::DeviceDesc {
            owner: self.owner,
            group: self.owner_group,
            ranges_apart: self.ranges_apart,
        }
    }

    /// Whether its issuer holds a command whose dependencies the vendor cannot wait on
    /// yet, rather than issuing it behind a bridge (a vendor user event): every vendor
    /// but PoCL, which runs a command waiting on a user event in its own worker.
    pub fn holds_for_the_vendor(&self) -> bool {
        crate::objects::platform::platform().config.runtime.hold_all
            || !self.vendor_name.contains("Portable Computing Language")
    }

    /// The issuer thread of this actual device, started on first use.
    pub fn issuer(&self) -> &Issuer {
        self.issuer.get_or_init(|| {
            // On PoCL, four devices on two cores: a conjugate-gradient solver took 2.7×
            // native with `Waited` and 1.5× with `Idle`; one device, kernel + clFinish 53–57
            // µs against 36–37. On an H100, `Idle` would issue a burst of kernels one by
            // one on the application thread, each with its own vendor event.
            let policy = match crate::objects::platform::platform()
                .config
                .runtime
                .caller_issues
            {
                CallerIssues::Auto if self.device_type() & CL_DEVICE_TYPE_CPU != 0 => {
                    CallerIssues::Idle
                }
                CallerIssues::Auto => CallerIssues::Waited,
                chosen => chosen,
            };
            Issuer::spawn(
                format!("mirrorcl-issuer-{}", self.index),
                self.holds_for_the_vendor(),
                policy,
            )
        })
    }
}
