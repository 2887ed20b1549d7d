//! Programs: one vendor program per vendor context of the program's context. Builds are
//! forwarded to each vendor for the devices asked for, and answered per device.

use crate::cl::*;
use crate::context::Context;
use crate::device::Device;
use crate::object::{impl_handle, Destructors, Header};
use crate::vendor::{query_bytes, V};
use crate::wire;
use crate::ClResult;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Added to every build so kernels can report argument qualifiers, which the scheduler
/// uses to tell buffers a kernel only reads.
const ARG_INFO_OPTION: &str = " -cl-kernel-arg-info";

/// What a device's owner reported of a build.
#[derive(Clone, Debug, Default)]
struct RemoteBuild {
    status: cl_build_status,
    log: String,
    binary_type: cl_program_binary_type,
}

#[derive(Default)]
pub struct BuildInfo {
    pub options: String,
    /// Whether a build, compile or link has been attempted for each device.
    pub attempted: Vec<u32>,
}

#[repr(C)]
pub struct Program {
    header: Header,
    pub context: Arc<Context>,
    /// The devices the program is for (all of the context's, unless created from
    /// binaries or linked for a subset).
    pub devices: Vec<Arc<Device>>,
    pub source: Option<String>,
    /// (vendor context group, vendor program).
    pub vendor: Vec<(u32, V)>,
    pub build: Mutex<BuildInfo>,
    /// Build results of other ranks' devices, as their owners reported them.
    remote: Mutex<HashMap<u32, RemoteBuild>>,
    /// `CL_PROGRAM_KERNEL_NAMES` as the lowest rank with an executable reported it.
    shared_kernel_names: Mutex<Option<String>>,
    /// Kernel objects created from this program (building then is CL_INVALID_OPERATION).
    pub kernels: AtomicU32,
    /// `clSetProgramReleaseCallback`.
    pub release_callbacks: Destructors,
}

impl_handle!(Program, Program, CL_INVALID_PROGRAM);

impl Program {
    fn wrap(
        context: Arc<Context>,
        devices: Vec<Arc<Device>>,
        source: Option<String>,
        vendor: Vec<(u32, V)>,
    ) -> Arc<Program> {
        Arc::new(Program {
            header: Header::new(),
            context,
            devices,
            source,
            vendor,
            build: Mutex::new(BuildInfo::default()),
            remote: Mutex::new(HashMap::new()),
            shared_kernel_names: Mutex::new(None),
            kernels: AtomicU32::new(0),
            release_callbacks: Destructors::default(),
        })
    }

    pub fn with_source(context: Arc<Context>, source: String) -> ClResult<Arc<Program>> {
        let c = CString::new(source.clone()).map_err(|_| CL_INVALID_VALUE)?;
        let mut vendor = Vec::new();
        for vc in &context.vendor_contexts {
            let f = vfn!(vc.vctx.0, clCreateProgramWithSource)?;
            let mut err = CL_SUCCESS;
            let mut ptr = c.as_ptr();
            // SAFETY: one NUL-terminated string.
            let p = unsafe { f(vc.vctx.0, 1, &mut ptr, std::ptr::null(), &mut err) };
            if err != CL_SUCCESS {
                release_all(&vendor);
                return Err(err);
            }
            vendor.push((vc.group, V(p)));
        }
        let devices = context.devices.clone();
        Ok(Program::wrap(context, devices, Some(source), vendor))
    }

    /// `clCreateProgramWithBinary`: `binaries[i]` is for `devices[i]`; `status` gets the
    /// per-device result.
    pub fn with_binaries(
        context: Arc<Context>,
        devices: Vec<Arc<Device>>,
        binaries: &[&[u8]],
        status: &mut [cl_int],
    ) -> ClResult<Arc<Program>> {
        let mut vendor = Vec::new();
        let mut result = Ok(());
        for vc in &context.vendor_contexts {
            let picked: Vec<usize> = (0..devices.len())
                .filter(|&i| devices[i].group == vc.group)
                .collect();
            if picked.is_empty() {
                continue;
            }
            let vdevs: Vec<cl_device_id> = picked.iter().map(|&i| devices[i].vdev.0).collect();
            let lens: Vec<usize> = picked.iter().map(|&i| binaries[i].len()).collect();
            let mut ptrs: Vec<*const u8> = picked.iter().map(|&i| binaries[i].as_ptr()).collect();
            let mut st = vec![CL_SUCCESS; picked.len()];
            let f = vfn!(vc.vctx.0, clCreateProgramWithBinary)?;
            let mut err = CL_SUCCESS;
            // SAFETY: arrays of picked.len() entries each.
            let p = unsafe {
                f(
                    vc.vctx.0,
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    lens.as_ptr(),
                    ptrs.as_mut_ptr(),
                    st.as_mut_ptr(),
                    &mut err,
                )
            };
            for (k, &i) in picked.iter().enumerate() {
                if let Some(s) = status.get_mut(i) {
                    *s = st[k];
                }
            }
            if err != CL_SUCCESS {
                // Not returned yet: in a cluster the other ranks wait for this result.
                result = Err(err);
                break;
            }
            vendor.push((vc.group, V(p)));
        }
        let program = Program::wrap(context, devices, None, vendor);
        program.share_creation(result, status)?;
        Ok(program)
    }

    /// After `clCreateProgramWithBinary`, every rank learns each device's status and
    /// binary type from its owner, and returns the first failure in rank order.
    fn share_creation(&self, result: ClResult<()>, status: &mut [cl_int]) -> ClResult<()> {
        let node = crate::node::node();
        if !node.is_cluster() {
            return result;
        }
        let mine = wire::ProgramCreation {
            result: result.err().unwrap_or(CL_SUCCESS),
            devices: (self.devices.iter().enumerate())
                .filter(|(_, d)| d.local)
                .map(|(i, d)| wire::CreatedBinary {
                    index: d.index,
                    status: status.get(i).copied().unwrap_or(CL_SUCCESS),
                    binary_type: if result.is_ok() {
                        self.binary_type(d)
                    } else {
                        0
                    },
                })
                .collect(),
        };
        let mut merged = Ok(());
        for (r, rank) in node.exchange(&mine).into_iter().enumerate() {
            if rank.result != CL_SUCCESS && merged.is_ok() {
                merged = Err(rank.result);
            }
            for created in rank.devices {
                let (index, st, binary_type) = (created.index, created.status, created.binary_type);
                if let Some(i) = self.devices.iter().position(|d| d.index == index) {
                    if let Some(s) = status.get_mut(i) {
                        *s = st;
                    }
                }
                if r as u32 != node.rank {
                    self.remote.lock().insert(
                        index,
                        RemoteBuild {
                            status: CL_BUILD_NONE,
                            log: String::new(),
                            binary_type,
                        },
                    );
                }
            }
        }
        merged
    }

    pub fn vendor_program(&self, vendor: u32) -> Option<V> {
        self.vendor
            .iter()
            .find(|(v, _)| *v == vendor)
            .map(|(_, p)| *p)
    }

    /// The devices of `list` (or all of the program's) grouped per vendor program.
    fn per_vendor(&self, list: &[Arc<Device>]) -> Vec<(u32, V, Vec<cl_device_id>)> {
        let list = if list.is_empty() { &self.devices } else { list };
        self.vendor
            .iter()
            .filter_map(|&(vendor, vp)| {
                let vdevs: Vec<cl_device_id> = list
                    .iter()
                    .filter(|d| d.group == vendor)
                    .map(|d| d.vdev.0)
                    .collect();
                (!vdevs.is_empty()).then_some((vendor, vp, vdevs))
            })
            .collect()
    }

    fn note_attempt(&self, options: &str, list: &[Arc<Device>]) {
        let mut b = self.build.lock();
        b.options = options.to_string();
        let list = if list.is_empty() { &self.devices } else { list };
        for d in list {
            if !b.attempted.contains(&d.index) {
                b.attempted.push(d.index);
            }
        }
    }

    /// `clBuildProgram` for `devices` (empty = all of the program's).
    pub fn build(&self, devices: &[Arc<Device>], options: &str) -> ClResult<()> {
        let opts = CString::new(format!("{options}{ARG_INFO_OPTION}"))
            .map_err(|_| CL_INVALID_BUILD_OPTIONS)?;
        self.note_attempt(options, devices);
        let mut result = Ok(());
        for (_, vp, vdevs) in self.per_vendor(devices) {
            let f = vfn!(vp.0, clBuildProgram)?;
            // SAFETY: live vendor program and devices of its context.
            let rc = unsafe {
                f(
                    vp.0,
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    opts.as_ptr(),
                    None,
                    std::ptr::null_mut(),
                )
            };
            if rc != CL_SUCCESS && result.is_ok() {
                result = Err(rc);
            }
        }
        let result = match result {
            Err(CL_BUILD_PROGRAM_FAILURE) if has_unknown_option(options) => {
                Err(CL_INVALID_BUILD_OPTIONS)
            }
            other => other,
        };
        self.share_results(devices, result)
    }

    /// `clCompileProgram`; `headers` are (program, include name) pairs.
    pub fn compile(
        &self,
        devices: &[Arc<Device>],
        options: &str,
        headers: &[(Arc<Program>, CString)],
    ) -> ClResult<()> {
        let opts = CString::new(format!("{options}{ARG_INFO_OPTION}"))
            .map_err(|_| CL_INVALID_COMPILER_OPTIONS)?;
        self.note_attempt(options, devices);
        let mut result = Ok(());
        for (vendor, vp, vdevs) in self.per_vendor(devices) {
            let mut hprogs = Vec::new();
            let mut hnames = Vec::new();
            for (h, name) in headers {
                hprogs.push(h.vendor_program(vendor).ok_or(CL_INVALID_OPERATION)?.0);
                hnames.push(name.as_ptr());
            }
            let f = vfn!(vp.0, clCompileProgram)?;
            // SAFETY: arrays of matching lengths; live vendor objects of one context.
            let rc = unsafe {
                f(
                    vp.0,
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    opts.as_ptr(),
                    hprogs.len() as cl_uint,
                    if hprogs.is_empty() {
                        std::ptr::null()
                    } else {
                        hprogs.as_ptr()
                    },
                    if hnames.is_empty() {
                        std::ptr::null_mut()
                    } else {
                        hnames.as_mut_ptr()
                    },
                    None,
                    std::ptr::null_mut(),
                )
            };
            if rc != CL_SUCCESS && result.is_ok() {
                result = Err(rc);
            }
        }
        let result = match result {
            Err(CL_COMPILE_PROGRAM_FAILURE) if has_unknown_option(options) => {
                Err(CL_INVALID_COMPILER_OPTIONS)
            }
            other => other,
        };
        self.share_results(devices, result)
    }

    /// `clLinkProgram`: a new program from compiled `inputs`.
    pub fn link(
        context: Arc<Context>,
        devices: Vec<Arc<Device>>,
        options: &str,
        inputs: &[Arc<Program>],
    ) -> ClResult<Arc<Program>> {
        let opts = CString::new(options).map_err(|_| CL_INVALID_LINKER_OPTIONS)?;
        let devices = if devices.is_empty() {
            context.devices.clone()
        } else {
            devices
        };
        let mut vendor = Vec::new();
        let mut result = Ok(());
        for vc in &context.vendor_contexts {
            let vdevs: Vec<cl_device_id> = devices
                .iter()
                .filter(|d| d.group == vc.group)
                .map(|d| d.vdev.0)
                .collect();
            if vdevs.is_empty() {
                continue;
            }
            let mut vinputs = Vec::new();
            for p in inputs {
                vinputs.push(p.vendor_program(vc.group).ok_or(CL_INVALID_OPERATION)?.0);
            }
            let f = vfn!(vc.vctx.0, clLinkProgram)?;
            let mut err = CL_SUCCESS;
            // SAFETY: arrays of matching lengths; live vendor objects of one context.
            let p = unsafe {
                f(
                    vc.vctx.0,
                    vdevs.len() as cl_uint,
                    vdevs.as_ptr(),
                    opts.as_ptr(),
                    vinputs.len() as cl_uint,
                    vinputs.as_ptr(),
                    None,
                    std::ptr::null_mut(),
                    &mut err,
                )
            };
            if p.is_null() {
                // Not returned yet: the other ranks wait for this rank's results.
                if result.is_ok() {
                    result = Err(if err == CL_SUCCESS {
                        CL_LINK_PROGRAM_FAILURE
                    } else {
                        err
                    });
                }
                continue;
            }
            if err != CL_SUCCESS && result.is_ok() {
                result = Err(err);
            }
            vendor.push((vc.group, V(p)));
        }
        let program = Program::wrap(context, devices, None, vendor);
        program.note_attempt(options, &[]);
        let result = program.share_results(&[], result);
        match result {
            // A failed link still returns a program whose log tells why (§5.6.3.3).
            Err(CL_LINK_PROGRAM_FAILURE) | Ok(()) => Ok(program),
            Err(e) => Err(e),
        }
    }

    /// A per-device build query answered by the device's vendor.
    pub fn build_info(&self, device: &Device, param: cl_program_build_info) -> ClResult<Vec<u8>> {
        let vp = self.vendor_program(device.group).ok_or(CL_INVALID_DEVICE)?;
        let f = vfn!(vp.0, clGetProgramBuildInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(vp.0, device.vdev.0, param, size, value, ret) }
        })
    }

    /// Whether a build, compile or link was attempted for `device` (before that, the
    /// answers are the specification's defaults, whatever the vendor says).
    fn attempted(&self, device: &Device) -> bool {
        self.build.lock().attempted.contains(&device.index)
    }

    fn remote(&self, device: &Device) -> RemoteBuild {
        self.remote
            .lock()
            .get(&device.index)
            .cloned()
            .unwrap_or_default()
    }

    pub fn build_status(&self, device: &Device) -> cl_build_status {
        if !self.attempted(device) {
            return CL_BUILD_NONE;
        }
        if !device.local {
            return self.remote(device).status;
        }
        self.build_info(device, CL_PROGRAM_BUILD_STATUS)
            .ok()
            .filter(|b| b.len() >= 4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(CL_BUILD_NONE)
    }

    /// The build log of `device`. A vendor that stops at the first failing device leaves
    /// the others' logs empty; they get the log of a device of the same vendor, which
    /// compiled the same source.
    pub fn build_log(&self, device: &Device) -> String {
        if !self.attempted(device) {
            return String::new();
        }
        if !device.local {
            return self.remote(device).log;
        }
        let log = |d: &Device| {
            self.build_info(d, CL_PROGRAM_BUILD_LOG)
                .map(|b| crate::vendor::c_string(&b))
                .unwrap_or_default()
        };
        let own = log(device);
        if !own.trim().is_empty() || self.build_status(device) != CL_BUILD_ERROR {
            return own;
        }
        self.devices
            .iter()
            .filter(|d| d.group == device.group && d.index != device.index)
            .map(|d| log(d))
            .find(|l| !l.trim().is_empty())
            .unwrap_or(own)
    }

    pub fn binary_type(&self, device: &Device) -> cl_program_binary_type {
        if !self.attempted(device) && self.source.is_some() {
            return CL_PROGRAM_BINARY_TYPE_NONE;
        }
        if !device.local {
            return self.remote(device).binary_type;
        }
        self.build_info(device, CL_PROGRAM_BINARY_TYPE)
            .ok()
            .filter(|b| b.len() >= 4)
            .map(|b| u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")))
            .unwrap_or(CL_PROGRAM_BINARY_TYPE_NONE)
    }

    /// True when every device of the program has a successfully built executable.
    pub fn is_built_for(&self, device: &Device) -> bool {
        self.build_status(device) == CL_BUILD_SUCCESS
    }

    /// A program query answered by the first vendor program (kernel names and counts
    /// are the same for every vendor: they come from the same source).
    pub fn vendor_info(&self, param: cl_program_info) -> ClResult<Vec<u8>> {
        let (_, vp) = *self.vendor.first().ok_or(CL_INVALID_PROGRAM_EXECUTABLE)?;
        let f = vfn!(vp.0, clGetProgramInfo)?;
        query_bytes(|size, value, ret| {
            // SAFETY: standard two-call query.
            unsafe { f(vp.0, param, size, value, ret) }
        })
    }

    /// The binary of each of the program's devices, in the program's device order. In a
    /// cluster this is a collective: each device's owner provides its binary.
    pub fn binaries(&self) -> ClResult<Vec<Vec<u8>>> {
        let node = crate::node::node();
        let local = self.local_binaries();
        if !node.is_cluster() {
            return local;
        }
        let mine = wire::Binaries(local.map(|bins| {
            (self.devices.iter().zip(bins))
                .filter(|(d, _)| d.local)
                .map(|(d, b)| (d.index, wire::Bytes(b)))
                .collect()
        }));
        let mut out = vec![Vec::new(); self.devices.len()];
        for rank in node.exchange(&mine) {
            for (index, bytes) in rank.0? {
                if let Some(i) = self.devices.iter().position(|d| d.index == index) {
                    out[i] = bytes.0;
                }
            }
        }
        Ok(out)
    }

    /// The binaries of this rank's devices (empty for the others).
    fn local_binaries(&self) -> ClResult<Vec<Vec<u8>>> {
        let mut out = vec![Vec::new(); self.devices.len()];
        if !self.devices.iter().any(|d| self.is_built_for(d)) {
            // No executable yet: every binary is empty (size 0), as the specification says.
            return Ok(out);
        }
        for &(vendor, vp) in &self.vendor {
            let f = vfn!(vp.0, clGetProgramInfo)?;
            let vdevs_bytes = query_bytes(|size, value, ret| {
                // SAFETY: standard two-call query.
                unsafe { f(vp.0, CL_PROGRAM_DEVICES, size, value, ret) }
            })?;
            let vdevs: Vec<usize> = vdevs_bytes
                .chunks_exact(std::mem::size_of::<usize>())
                .map(|c| usize::from_ne_bytes(c.try_into().expect("chunk size")))
                .collect();
            let sizes_bytes = query_bytes(|size, value, ret| {
                // SAFETY: standard two-call query.
                unsafe { f(vp.0, CL_PROGRAM_BINARY_SIZES, size, value, ret) }
            })?;
            let sizes: Vec<usize> = sizes_bytes
                .chunks_exact(std::mem::size_of::<usize>())
                .map(|c| usize::from_ne_bytes(c.try_into().expect("chunk size")))
                .collect();
            let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0u8; s]).collect();
            let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
            // SAFETY: one buffer of the announced size per vendor device.
            crate::check(unsafe {
                f(
                    vp.0,
                    CL_PROGRAM_BINARIES,
                    ptrs.len() * std::mem::size_of::<*mut u8>(),
                    ptrs.as_mut_ptr() as *mut c_void,
                    std::ptr::null_mut(),
                )
            })?;
            for (i, d) in self.devices.iter().enumerate() {
                if d.group != vendor {
                    continue;
                }
                if let Some(k) = vdevs.iter().position(|&v| v == d.vdev.0 as usize) {
                    out[i] = std::mem::take(&mut bufs[k]);
                }
            }
        }
        Ok(out)
    }

    /// `CL_PROGRAM_KERNEL_NAMES`: the same on every rank (the lowest rank with an
    /// executable reports it in a cluster).
    pub fn kernel_names(&self) -> ClResult<String> {
        if let Some(names) = self.shared_kernel_names.lock().clone() {
            return Ok(names);
        }
        self.vendor_info(CL_PROGRAM_KERNEL_NAMES)
            .map(|b| crate::vendor::c_string(&b))
    }

    /// After a build, compile or link attempted on this rank's devices of `list` (empty:
    /// all of the program's), every rank reports its devices' results to every other:
    /// each rank then answers build queries for every device as its owner does, and
    /// every rank returns the same code, the first failure in rank order.
    fn share_results(&self, list: &[Arc<Device>], result: ClResult<()>) -> ClResult<()> {
        let node = crate::node::node();
        if !node.is_cluster() {
            return result;
        }
        let list = if list.is_empty() { &self.devices } else { list };
        let mine: Vec<&Arc<Device>> = list.iter().filter(|d| d.local).collect();
        let built = mine
            .iter()
            .any(|d| self.build_status(d) == CL_BUILD_SUCCESS);
        let mine = wire::BuildResults {
            result: result.err().unwrap_or(CL_SUCCESS),
            devices: (mine.iter())
                .map(|d| wire::DeviceBuild {
                    index: d.index,
                    status: self.build_status(d),
                    log: self.build_log(d),
                    binary_type: self.binary_type(d),
                })
                .collect(),
            kernel_names: built.then(|| {
                self.vendor_info(CL_PROGRAM_KERNEL_NAMES)
                    .map(|b| crate::vendor::c_string(&b))
                    .unwrap_or_default()
            }),
        };
        let mut merged = Ok(());
        let mut shared_names = None;
        for (r, rank) in node.exchange(&mine).into_iter().enumerate() {
            if rank.result != CL_SUCCESS && merged.is_ok() {
                merged = Err(rank.result);
            }
            let mut remote = self.remote.lock();
            for d in rank.devices {
                if r as u32 != node.rank {
                    remote.insert(
                        d.index,
                        RemoteBuild {
                            status: d.status,
                            log: d.log,
                            binary_type: d.binary_type,
                        },
                    );
                }
            }
            if shared_names.is_none() {
                shared_names = rank.kernel_names;
            }
        }
        *self.shared_kernel_names.lock() = shared_names;
        merged
    }

    pub fn kernel_count(&self) -> u32 {
        self.kernels.load(Ordering::Acquire)
    }
}

/// Whether `options` holds a flag that is neither an OpenCL compiler option nor of a
/// family vendors extend (`-cl-…`, `-O…`, `-f…`, `-m…`). Vendors differ on what a bad
/// option makes a build return (NVIDIA: a build failure); with such a flag present, a
/// failed build reports `CL_INVALID_BUILD_OPTIONS` as the specification says.
fn has_unknown_option(options: &str) -> bool {
    let mut tokens = options.split_whitespace();
    while let Some(t) = tokens.next() {
        if !t.starts_with('-') {
            continue;
        }
        let known = match t {
            "-D" | "-I" => {
                tokens.next();
                true
            }
            "-w"
            | "-Werror"
            | "-g"
            | "-x"
            | "-spir-std"
            | "-create-library"
            | "-enable-link-options" => true,
            _ => [
                "-D",
                "-I",
                "-cl-",
                "-O",
                "-f",
                "-m",
                "-W",
                "-x",
                "-spir-std=",
            ]
            .iter()
            .any(|p| t.starts_with(p)),
        };
        if !known {
            return true;
        }
    }
    false
}

fn release_all(list: &[(u32, V)]) {
    for (_, p) in list {
        if let Ok(f) = vfn!(p.0, clReleaseProgram) {
            // SAFETY: we own one reference.
            unsafe { f(p.0) };
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        release_all(&self.vendor);
        let handle = self as *mut Program as usize;
        self.release_callbacks.run(handle);
    }
}
