//! Platform and device entry points.

use crate::info::{array, Info, InfoQuery};
use crate::{c_str, platform};
use mirrorcl_runtime::cl::*;
use mirrorcl_runtime::objects::device::Device;
use mirrorcl_runtime::objects::handle::Handle;
use mirrorcl_runtime::objects::platform::{self as rt, Platform};
use mirrorcl_runtime::ClResult;
use std::ffi::c_void;
use std::sync::Arc;

fn platform_ids(
    num_entries: cl_uint,
    platforms: *mut cl_platform_id,
    num_platforms: *mut cl_uint,
) -> ClResult<()> {
    // CL_INVALID_VALUE if num_entries is 0 and platforms is not NULL, or if both
    // platforms and num_platforms are NULL.
    if (num_entries == 0 && !platforms.is_null())
        || (platforms.is_null() && num_platforms.is_null())
    {
        return Err(CL_INVALID_VALUE);
    }
    if mirrorcl_runtime::cluster::node::opencl_call_inside_mpi_start() {
        if !num_platforms.is_null() {
            // SAFETY: valid out-pointer.
            unsafe { *num_platforms = 0 };
        }
        return Err(CL_PLATFORM_NOT_FOUND_KHR);
    }
    let p = platform();
    if !platforms.is_null() {
        // SAFETY: at least one writable entry (num_entries > 0).
        unsafe { *platforms = p.handle() };
    }
    if !num_platforms.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *num_platforms = 1 };
    }
    Ok(())
}

entry! {
    /// Argument errors come before platform initialisation.
    lazy fn clGetPlatformIDs(
        num_entries: cl_uint,
        platforms: *mut cl_platform_id,
        num_platforms: *mut cl_uint,
    ) -> cl_int {
        platform_ids(num_entries, platforms, num_platforms)
    }
}

entry! {
    /// The ICD loader's way in (cl_khr_icd).
    lazy fn clIcdGetPlatformIDsKHR(
        num_entries: cl_uint,
        platforms: *mut cl_platform_id,
        num_platforms: *mut cl_uint,
    ) -> cl_int {
        platform_ids(num_entries, platforms, num_platforms)
    }
}

pub(crate) struct PlatformInfo;

impl InfoQuery for PlatformInfo {
    type Handles = (cl_platform_id,);
    type Object = ();
    #[inline]
    fn object((platform_id,): (cl_platform_id,)) -> ClResult<()> {
        Platform::check(platform_id).map(|_| ())
    }
    #[inline]
    fn answer(_: &(), param: cl_platform_info) -> ClResult<Info> {
        Ok(match param {
            CL_PLATFORM_PROFILE => Info::text(rt::PLATFORM_PROFILE),
            CL_PLATFORM_VERSION => Info::text(rt::PLATFORM_VERSION),
            CL_PLATFORM_NAME => Info::text(rt::PLATFORM_NAME),
            CL_PLATFORM_VENDOR => Info::text(rt::PLATFORM_VENDOR),
            CL_PLATFORM_EXTENSIONS => Info::text(rt::PLATFORM_EXTENSIONS),
            CL_PLATFORM_ICD_SUFFIX_KHR => Info::text(rt::ICD_SUFFIX),
            _ => return Err(CL_INVALID_VALUE),
        })
    }
}

entry! {
    info fn clGetPlatformInfo(platform_id: cl_platform_id; cl_platform_info) => PlatformInfo;
}

const KNOWN_TYPES: cl_device_type = CL_DEVICE_TYPE_DEFAULT
    | CL_DEVICE_TYPE_CPU
    | CL_DEVICE_TYPE_GPU
    | CL_DEVICE_TYPE_ACCELERATOR
    | CL_DEVICE_TYPE_CUSTOM;

/// The platform's devices of `device_type`, or the specification's error.
pub(crate) fn devices_of_type(device_type: cl_device_type) -> ClResult<Vec<Arc<Device>>> {
    if device_type != CL_DEVICE_TYPE_ALL && (device_type == 0 || device_type & !KNOWN_TYPES != 0) {
        return Err(CL_INVALID_DEVICE_TYPE);
    }
    let p = platform();
    let mut found: Vec<Arc<Device>> = p
        .devices
        .iter()
        .filter(|d| device_type == CL_DEVICE_TYPE_ALL || d.device_type() & device_type != 0)
        .cloned()
        .collect();
    // CL_DEVICE_TYPE_DEFAULT alone names one device: the default one, else the first.
    if device_type == CL_DEVICE_TYPE_DEFAULT && found.is_empty() {
        found.extend(p.devices.first().cloned());
    }
    if found.is_empty() {
        return Err(CL_DEVICE_NOT_FOUND);
    }
    Ok(found)
}

entry! {
    fn clGetDeviceIDs(
        platform_id: cl_platform_id,
        device_type: cl_device_type,
        num_entries: cl_uint,
        devices: *mut cl_device_id,
        num_devices: *mut cl_uint,
    ) -> cl_int {
        Platform::check(platform_id)?;
        let found = devices_of_type(device_type)?;
        if (num_entries == 0 && !devices.is_null()) || (devices.is_null() && num_devices.is_null())
        {
            return Err(CL_INVALID_VALUE);
        }
        if !devices.is_null() {
            for (i, d) in found.iter().take(num_entries as usize).enumerate() {
                // SAFETY: num_entries writable entries.
                unsafe { *devices.add(i) = d.handle() };
            }
        }
        if !num_devices.is_null() {
            // SAFETY: valid out-pointer.
            unsafe { *num_devices = found.len() as cl_uint };
        }
        Ok(())
    }
}

pub(crate) struct DeviceInfo;

impl InfoQuery for DeviceInfo {
    type Handles = (cl_device_id,);
    type Object = Arc<Device>;
    #[inline]
    fn object((device,): (cl_device_id,)) -> ClResult<Arc<Device>> {
        Device::from_handle(device)
    }
    #[inline]
    fn answer(d: &Arc<Device>, param: cl_device_info) -> ClResult<Info> {
        Ok(match param {
            CL_DEVICE_PLATFORM => Info::value(platform().handle()),
            CL_DEVICE_REFERENCE_COUNT => {
                Info::value::<cl_uint>(if d.is_root() { 1 } else { d.header().count() })
            }
            _ => match d.info(param) {
                Some(bytes) => Info::bytes(bytes.to_vec()),
                None if !mirrorcl_runtime::objects::device::DEVICE_INFO_1_2.contains(&param) => {
                    // Newer queries and vendor extensions: the owner's vendor answers.
                    Info::bytes(d.owner_query(param)?)
                }
                None => return Err(CL_INVALID_VALUE),
            },
        })
    }
}

entry! {
    info fn clGetDeviceInfo(device: cl_device_id; cl_device_info) => DeviceInfo;
}

entry! {
    fn clCreateSubDevices(
        in_device: cl_device_id,
        properties: *const cl_device_partition_property,
        num_devices: cl_uint,
        out_devices: *mut cl_device_id,
        num_devices_ret: *mut cl_uint,
    ) -> cl_int {
        create_sub_devices(in_device, properties, num_devices, out_devices, num_devices_ret)
    }
}

/// `CL_DEVICE_PARTITION_EQUALLY` by all of the device's compute units is no partition
/// (one sub-device, the device again): `CL_DEVICE_PARTITION_FAILED`, the device cannot
/// be partitioned further that way; by more units than it has,
/// `CL_INVALID_DEVICE_PARTITION_COUNT`. PoCL creates the one sub-device, and answers
/// `CL_INVALID_VALUE` to the second; the CTS (`api` `negative_create_sub_devices`) expects these errors.
fn equally_whole(parent: &Device, props: &[cl_device_partition_property]) -> ClResult<()> {
    if props.len() < 3 || props[0] != CL_DEVICE_PARTITION_EQUALLY {
        return Ok(());
    }
    let supported = parent
        .info(CL_DEVICE_PARTITION_PROPERTIES)
        .unwrap_or_default()
        .chunks_exact(size_of::<cl_device_partition_property>())
        .any(|c| {
            cl_device_partition_property::from_ne_bytes(c.try_into().expect("chunk"))
                == CL_DEVICE_PARTITION_EQUALLY
        });
    let units =
        parent.info_value::<cl_uint>(CL_DEVICE_MAX_COMPUTE_UNITS) as cl_device_partition_property;
    match props[1] {
        n if !supported || n < units => Ok(()),
        n if n == units => Err(CL_DEVICE_PARTITION_FAILED),
        _ => Err(CL_INVALID_DEVICE_PARTITION_COUNT),
    }
}

fn create_sub_devices(
    in_device: cl_device_id,
    properties: *const cl_device_partition_property,
    num_devices: cl_uint,
    out_devices: *mut cl_device_id,
    num_devices_ret: *mut cl_uint,
) -> ClResult<()> {
    let parent = Device::from_handle(in_device)?;
    if properties.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let mut props = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: a zero-terminated property list.
        let v = unsafe { *properties.add(i) };
        if v == 0 {
            break;
        }
        props.push(v);
        i += 1;
    }
    props.push(0);
    equally_whole(&parent, &props)?;
    let (n, subs) = Device::create_sub_devices(&parent, &props, !out_devices.is_null())?;
    if !out_devices.is_null() && num_devices < n {
        return Err(CL_INVALID_VALUE);
    }
    if !num_devices_ret.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *num_devices_ret = n };
    }
    for (k, dev) in subs.into_iter().enumerate() {
        // SAFETY: num_devices >= n writable entries.
        unsafe { *out_devices.add(k) = Device::into_handle(dev) };
    }
    Ok(())
}

entry! {
    fn clRetainDevice(device: cl_device_id) -> cl_int {
        let d = Device::from_handle(device)?;
        if !d.is_root() {
            d.header().retain();
        }
        Ok(())
    }
}

entry! {
    fn clReleaseDevice(device: cl_device_id) -> cl_int {
        let d = Device::from_handle(device)?;
        if !d.is_root() {
            Device::release_handle(device)?;
        }
        Ok(())
    }
}

fn extension_function(func_name: *const libc::c_char) -> *mut c_void {
    match c_str(func_name) {
        Some(name) => crate::lookup(name.to_bytes()),
        None => std::ptr::null_mut(),
    }
}

entry! {
    /// The ICD loader asks before anything else: no platform (and no MPI) yet.
    lazy fn clGetExtensionFunctionAddress(
        func_name: *const libc::c_char,
    ) -> *mut c_void = std::ptr::null_mut(); {
        extension_function(func_name)
    }
}

entry! {
    fn clGetExtensionFunctionAddressForPlatform(
        platform_id: cl_platform_id,
        func_name: *const libc::c_char,
    ) -> *mut c_void = std::ptr::null_mut(); {
        if Platform::check(platform_id).is_err() {
            return std::ptr::null_mut();
        }
        extension_function(func_name)
    }
}

entry! {
    lazy fn clUnloadCompiler() -> cl_int {
        Ok(())
    }
}

entry! {
    fn clUnloadPlatformCompiler(platform_id: cl_platform_id) -> cl_int {
        Platform::check(platform_id).map(|_| ())
    }
}

entry! {
    fn clGetDeviceAndHostTimer(
        device: cl_device_id,
        device_timestamp: *mut cl_ulong,
        host_timestamp: *mut cl_ulong,
    ) -> cl_int {
        Device::from_handle(device)?;
        // An OpenCL 2.1 query on a 1.2 platform.
        let _ = (device_timestamp, host_timestamp);
        Err(CL_INVALID_OPERATION)
    }
}

entry! {
    fn clGetHostTimer(device: cl_device_id, host_timestamp: *mut cl_ulong) -> cl_int {
        Device::from_handle(device)?;
        let _ = host_timestamp;
        Err(CL_INVALID_OPERATION)
    }
}

/// Devices given as a list argument: each must be valid.
pub(crate) fn device_list(n: cl_uint, list: *const cl_device_id) -> ClResult<Vec<Arc<Device>>> {
    array(list, n as usize)
        .iter()
        .map(|&d| Device::from_handle(d))
        .collect()
}
