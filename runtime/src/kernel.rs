//! Kernels: MirrorCL keeps the arguments; each device has its own vendor kernel whose
//! arguments only that device's issuer sets, just before it enqueues, and only those
//! that changed since its last launch.

use crate::cl::*;
use crate::device::Device;
use crate::memory::Buffer;
use crate::object::{impl_handle, Header};
use crate::program::Program;
use crate::vendor::{query_bytes, V};
use crate::ClResult;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An argument as the application set it.
#[derive(Clone)]
pub enum ArgValue {
    Mem(Option<Arc<Buffer>>),
    Local(usize),
    Bytes(Vec<u8>),
}

/// An argument as a device's vendor kernel has it.
#[derive(Clone, PartialEq, Eq)]
pub enum VendorArg {
    Mem(V),
    Local(usize),
    Bytes(Vec<u8>),
}

#[derive(Clone, Copy, Debug)]
pub struct ArgInfo {
    pub address: cl_kernel_arg_address_qualifier,
    /// Declared `const` (or `__constant`): the kernel only reads it.
    pub read_only: bool,
}

struct DeviceKernel {
    vk: V,
    /// What the vendor kernel's arguments are set to now.
    set: Mutex<Vec<Option<VendorArg>>>,
    limits: WorkGroupLimits,
}

/// The work-group facts every launch is checked against, asked once per device.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkGroupLimits {
    /// `CL_KERNEL_WORK_GROUP_SIZE`.
    pub max: usize,
    /// `CL_KERNEL_COMPILE_WORK_GROUP_SIZE` (`reqd_work_group_size`; zeros if none).
    pub required: [usize; 3],
}

fn work_group_value<T: Copy + Default>(vk: V, vdev: V, param: cl_kernel_work_group_info) -> T {
    let mut v = T::default();
    if let Ok(f) = vfn!(vk.0, clGetKernelWorkGroupInfo) {
        // SAFETY: out-pointer of size_of::<T>().
        unsafe {
            f(
                vk.0,
                vdev.0,
                param,
                std::mem::size_of::<T>(),
                &mut v as *mut T as *mut c_void,
                std::ptr::null_mut(),
            )
        };
    }
    v
}

#[repr(C)]
pub struct Kernel {
    header: Header,
    pub program: Arc<Program>,
    pub name: String,
    pub num_args: u32,
    /// Per-argument qualifiers, when the vendor reports them.
    pub arg_info: Option<Vec<ArgInfo>>,
    /// One vendor kernel per device the program was built for.
    devices: HashMap<u32, DeviceKernel>,
    /// A vendor kernel per vendor, used only by application threads (argument
    /// validation and queries), never enqueued.
    probes: Vec<(u32, V)>,
    pub args: Mutex<Vec<Option<ArgValue>>>,
    /// Local memory each device's kernel needs before any `__local` argument is set.
    static_local: HashMap<u32, cl_ulong>,
}

impl_handle!(Kernel, Kernel, CL_INVALID_KERNEL);

fn create_vendor_kernel(vp: V, name: &CString) -> ClResult<V> {
    let f = vfn!(vp.0, clCreateKernel)?;
    let mut err = CL_SUCCESS;
    // SAFETY: live vendor program, NUL-terminated name.
    let k = unsafe { f(vp.0, name.as_ptr(), &mut err) };
    crate::check(err)?;
    Ok(V(k))
}

fn release_kernel(k: V) {
    if let Ok(f) = vfn!(k.0, clReleaseKernel) {
        // SAFETY: we own one reference.
        unsafe { f(k.0) };
    }
}

impl Kernel {
    pub fn new(program: Arc<Program>, name: &str) -> ClResult<Arc<Kernel>> {
        let cname = CString::new(name).map_err(|_| CL_INVALID_VALUE)?;
        let mut probes = Vec::new();
        let mut devices = HashMap::default();
        let cleanup = |probes: &[(u32, V)], devices: &HashMap<u32, DeviceKernel>| {
            probes.iter().for_each(|(_, k)| release_kernel(*k));
            devices.values().for_each(|d| release_kernel(d.vk));
        };
        for &(vendor, vp) in &program.vendor {
            let built: Vec<&Arc<Device>> = program
                .devices
                .iter()
                .filter(|d| d.group == vendor && program.is_built_for(d))
                .collect();
            if built.is_empty() {
                continue;
            }
            match create_vendor_kernel(vp, &cname) {
                Ok(k) => probes.push((vendor, k)),
                Err(e) => {
                    cleanup(&probes, &devices);
                    return Err(e);
                }
            }
            for d in built {
                match create_vendor_kernel(vp, &cname) {
                    Ok(vk) => {
                        devices.insert(
                            d.index,
                            DeviceKernel {
                                vk,
                                set: Mutex::new(Vec::new()),
                                limits: WorkGroupLimits {
                                    max: work_group_value(vk, d.vdev, CL_KERNEL_WORK_GROUP_SIZE),
                                    required: work_group_value(
                                        vk,
                                        d.vdev,
                                        CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                    ),
                                },
                            },
                        );
                    }
                    Err(e) => {
                        cleanup(&probes, &devices);
                        return Err(e);
                    }
                }
            }
        }
        let Some(&(_, probe)) = probes.first() else {
            return Err(CL_INVALID_PROGRAM_EXECUTABLE);
        };
        let num_args: cl_uint = kernel_info_value(probe, CL_KERNEL_NUM_ARGS).unwrap_or(0);
        let arg_info = (0..num_args)
            .map(|i| {
                let address = arg_info_value(probe, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER)?;
                let qualifier: cl_kernel_arg_type_qualifier =
                    arg_info_value(probe, i, CL_KERNEL_ARG_TYPE_QUALIFIER).unwrap_or(0);
                Some(ArgInfo {
                    address,
                    read_only: address == CL_KERNEL_ARG_ADDRESS_CONSTANT
                        || qualifier & CL_KERNEL_ARG_TYPE_CONST != 0,
                })
            })
            .collect::<Option<Vec<_>>>();
        let static_local = program
            .devices
            .iter()
            .filter_map(|d| {
                let dk = devices.get(&d.index)?;
                let f = vfn!(dk.vk.0, clGetKernelWorkGroupInfo).ok()?;
                let mut v: cl_ulong = 0;
                // SAFETY: out-pointer of the documented size; a fresh kernel, no args set.
                let rc = unsafe {
                    f(
                        dk.vk.0,
                        d.vdev.0,
                        CL_KERNEL_LOCAL_MEM_SIZE,
                        std::mem::size_of::<cl_ulong>(),
                        &mut v as *mut cl_ulong as *mut c_void,
                        std::ptr::null_mut(),
                    )
                };
                (rc == CL_SUCCESS).then_some((d.index, v))
            })
            .collect();
        program.kernels.fetch_add(1, Ordering::AcqRel);
        Ok(Arc::new(Kernel {
            header: Header::new(),
            program,
            name: name.to_string(),
            num_args,
            arg_info,
            devices,
            probes,
            args: Mutex::new(vec![None; num_args as usize]),
            static_local,
        }))
    }

    /// `CL_KERNEL_LOCAL_MEM_SIZE` as the specification defines it: the kernel's own
    /// local memory plus the `__local` arguments set now (some vendors leave the
    /// arguments out).
    pub fn local_mem_size(&self, device: &Device) -> Option<cl_ulong> {
        let base = *self.static_local.get(&device.index)?;
        let args: usize = self
            .args
            .lock()
            .iter()
            .map(|a| match a {
                Some(ArgValue::Local(n)) => *n,
                _ => 0,
            })
            .sum();
        Some(base + args as cl_ulong)
    }

    /// A vendor kernel for queries on `device`'s vendor.
    pub fn probe(&self, vendor: u32) -> Option<V> {
        self.probes
            .iter()
            .find(|(v, _)| *v == vendor)
            .map(|(_, k)| *k)
    }

    pub fn probes(&self) -> impl Iterator<Item = V> + '_ {
        self.probes.iter().map(|(_, k)| *k)
    }

    pub fn any_probe(&self) -> V {
        self.probes[0].1
    }

    pub fn limits(&self, device: &Device) -> Option<WorkGroupLimits> {
        self.devices.get(&device.index).map(|d| d.limits)
    }

    pub fn vendor_kernel(&self, device: &Device) -> Option<V> {
        self.devices.get(&device.index).map(|d| d.vk)
    }

    /// Sets `args` on the device's vendor kernel where they differ from what it has.
    /// Runs on the device's issuer thread.
    pub fn apply_args(&self, device: &Device, args: &[VendorArg]) -> ClResult<V> {
        let dk = self
            .devices
            .get(&device.index)
            .ok_or(CL_INVALID_PROGRAM_EXECUTABLE)?;
        let mut set = dk.set.lock();
        set.resize(args.len(), None);
        let f = vfn!(dk.vk.0, clSetKernelArg)?;
        for (i, arg) in args.iter().enumerate() {
            // A vendor buffer may be freed and its address reused by a new one, so
            // buffers are always set again; values and local sizes only when changed.
            if !matches!(arg, VendorArg::Mem(_)) && set[i].as_ref() == Some(arg) {
                continue;
            }
            let rc = match arg {
                VendorArg::Mem(m) => {
                    let value: cl_mem = m.0;
                    // SAFETY: a cl_mem value of the right size.
                    unsafe {
                        f(
                            dk.vk.0,
                            i as cl_uint,
                            std::mem::size_of::<cl_mem>(),
                            if m.0.is_null() {
                                std::ptr::null()
                            } else {
                                &value as *const cl_mem as *const c_void
                            },
                        )
                    }
                }
                // SAFETY: a local-memory size with a NULL value.
                VendorArg::Local(size) => unsafe {
                    f(dk.vk.0, i as cl_uint, *size, std::ptr::null())
                },
                // SAFETY: bytes validated by the probe kernel when the application set them.
                VendorArg::Bytes(b) => unsafe {
                    f(dk.vk.0, i as cl_uint, b.len(), b.as_ptr() as *const c_void)
                },
            };
            if rc != CL_SUCCESS {
                set[i] = None;
                return Err(rc);
            }
            set[i] = Some(arg.clone());
        }
        Ok(dk.vk)
    }
}

/// A fixed-size kernel query.
pub fn kernel_info_value<T: Copy + Default>(k: V, param: cl_kernel_info) -> Option<T> {
    let f = vfn!(k.0, clGetKernelInfo).ok()?;
    let mut v = T::default();
    // SAFETY: out-pointer of size_of::<T>().
    let rc = unsafe {
        f(
            k.0,
            param,
            std::mem::size_of::<T>(),
            &mut v as *mut T as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    (rc == CL_SUCCESS).then_some(v)
}

fn arg_info_value<T: Copy + Default>(k: V, index: u32, param: cl_kernel_arg_info) -> Option<T> {
    let f = vfn!(k.0, clGetKernelArgInfo).ok()?;
    let mut v = T::default();
    // SAFETY: out-pointer of size_of::<T>().
    let rc = unsafe {
        f(
            k.0,
            index,
            param,
            std::mem::size_of::<T>(),
            &mut v as *mut T as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    (rc == CL_SUCCESS).then_some(v)
}

/// A variable-size kernel query forwarded to a vendor kernel.
pub fn kernel_query(
    k: V,
    f: impl Fn(V, usize, *mut c_void, *mut usize) -> cl_int,
) -> ClResult<Vec<u8>> {
    query_bytes(|size, value, ret| f(k, size, value, ret))
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.program.kernels.fetch_sub(1, Ordering::AcqRel);
        self.probes.iter().for_each(|(_, k)| release_kernel(*k));
        self.devices.values().for_each(|d| release_kernel(d.vk));
    }
}
