//! Programs: one vendor program per vendor context of the program's context. Builds are
//! forwarded to each vendor for the devices asked for, and answered per device.

use crate::cl::*;
use crate::cluster::wire;
use crate::native::{VDevice, VKernel, VProgram};
use crate::objects::context::Context;
use crate::objects::device::Device;
use crate::objects::handle::{impl_handle, Destructors, Header};
use crate::ClResult;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Added to a second build of the source, made only when a kernel's vendor does not
/// report argument qualifiers without it (the scheduler uses them to tell buffers a
/// kernel only reads). The application's own build gets its options unchanged: NVIDIA
/// fails some builds that carry this option.
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
    pub vendor: Vec<(u32, VProgram)>,
    pub build: Mutex<BuildInfo>,
    /// Build results of other ranks' devices, as their owners reported them.
    remote: Mutex<HashMap<u32, RemoteBuild>>,
    /// `CL_PROGRAM_KERNEL_NAMES` as the lowest rank with an executable reported it.
    shared_kernel_names: Mutex<Option<String>>,
    /// Kernel objects created from this program (building then is CL_INVALID_OPERATION).
    pub kernels: AtomicU32,
    /// Per vendor-context group, the source built again with `ARG_INFO_OPTION` (none if
    /// that build failed), made the first time a kernel needs it.
    arg_info_builds: Mutex<HashMap<u32, Option<VProgram>>>,
    /// `clSetProgramReleaseCallback`.
    pub release_callbacks: Destructors,
}

impl_handle!(Program, Program, CL_INVALID_PROGRAM);

impl Program {
    fn wrap(
        context: Arc<Context>,
        devices: Vec<Arc<Device>>,
        source: Option<String>,
        vendor: Vec<(u32, VProgram)>,
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
            arg_info_builds: Mutex::new(HashMap::new()),
            release_callbacks: Destructors::default(),
        })
    }

    pub fn with_source(context: Arc<Context>, source: String) -> ClResult<Arc<Program>> {
        let c = CString::new(source.clone()).map_err(|_| CL_INVALID_VALUE)?;
        let mut vendor = Vec::new();
        for vc in &context.vendor_contexts {
            // On an error, the programs made so far are released with `vendor`.
            vendor.push((vc.group, vc.vctx.create_program_with_source(&c)?));
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
            let vdevs: Vec<&VDevice> = picked
                .iter()
                .filter_map(|&i| devices[i].vdev.as_ref())
                .collect();
            let bins: Vec<&[u8]> = picked.iter().map(|&i| binaries[i]).collect();
            let mut st = vec![CL_SUCCESS; picked.len()];
            let made = vc.vctx.create_program_with_binary(&vdevs, &bins, &mut st);
            for (k, &i) in picked.iter().enumerate() {
                if let Some(s) = status.get_mut(i) {
                    *s = st[k];
                }
            }
            match made {
                Ok(p) => vendor.push((vc.group, p)),
                Err(err) => {
                    // Not returned yet: in a cluster the other ranks wait for this result.
                    result = Err(err);
                    break;
                }
            }
        }
        let program = Program::wrap(context, devices, None, vendor);
        program.share_creation(result, status)?;
        Ok(program)
    }

    /// After `clCreateProgramWithBinary`, every rank learns each device's status and
    /// binary type from its owner, and returns the first failure in rank order.
    fn share_creation(&self, result: ClResult<()>, status: &mut [cl_int]) -> ClResult<()> {
        let node = crate::cluster::node::node();
        if !node.is_cluster() {
            return result;
        }
        let mine = wire::ProgramCreation {
            result: result.err().unwrap_or(CL_SUCCESS),
            devices: (self.devices.iter().enumerate())
                .filter(|(_, d)| d.local())
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

    pub fn vendor_program(&self, vendor: u32) -> Option<&VProgram> {
        self.vendor
            .iter()
            .find(|(v, _)| *v == vendor)
            .map(|(_, p)| p)
    }

    /// Kernel `name` from this program's source built again with `ARG_INFO_OPTION` for
    /// the devices of vendor-context group `vendor` it is built for: for the argument
    /// qualifiers of a vendor that reports them only with that option. None for a
    /// program without source or a build that fails.
    pub fn arg_info_kernel(&self, vendor: u32, name: &CStr) -> Option<VKernel> {
        let mut builds = self.arg_info_builds.lock();
        let program = builds
            .entry(vendor)
            .or_insert_with(|| self.build_for_arg_info(vendor));
        program.as_ref()?.create_kernel(name).ok()
    }

    fn build_for_arg_info(&self, vendor: u32) -> Option<VProgram> {
        let source = CString::new(self.source.as_deref()?).ok()?;
        let options = format!("{}{ARG_INFO_OPTION}", self.build.lock().options);
        let options = CString::new(options).ok()?;
        let vdevs: Vec<&VDevice> = self
            .devices
            .iter()
            .filter(|d| d.group == vendor && self.is_built_for(d))
            .filter_map(|d| d.vdev.as_ref())
            .collect();
        if vdevs.is_empty() {
            return None;
        }
        let vctx = &self.context.vendor_context_of(vendor).ok()?.vctx;
        let program = vctx.create_program_with_source(&source).ok()?;
        program.build(&vdevs, &options).ok()?;
        Some(program)
    }

    /// The devices of `list` (or all of the program's) grouped per vendor program.
    fn per_vendor<'a>(
        &'a self,
        list: &'a [Arc<Device>],
    ) -> Vec<(u32, &'a VProgram, Vec<&'a VDevice>)> {
        let list = if list.is_empty() { &self.devices } else { list };
        self.vendor
            .iter()
            .filter_map(|(vendor, vp)| {
                let vdevs: Vec<&VDevice> = list
                    .iter()
                    .filter(|d| d.group == *vendor)
                    .filter_map(|d| d.vdev.as_ref())
                    .collect();
                (!vdevs.is_empty()).then_some((*vendor, vp, vdevs))
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

    /// `list` and the program's devices descending from one in it (empty = all of the
    /// program's). A vendor builds one executable for a device and its sub-devices (PoCL
    /// answers a sub-device's build queries from its parent's build and runs the parent's
    /// kernels on it; the CTS `device_partition` suite builds for the parent only and runs
    /// on the sub-devices), so a build or compile for a device covers its sub-devices in
    /// the program, with their own vendor status and log, in every vendor-context layout.
    fn with_sub_devices(&self, list: &[Arc<Device>]) -> Vec<Arc<Device>> {
        let mut out = list.to_vec();
        if list.is_empty() {
            return out;
        }
        for d in &self.devices {
            let mut up = d.parent.as_ref();
            while let Some(p) = up {
                if list.iter().any(|l| l.index == p.index) {
                    if !out.iter().any(|o| o.index == d.index) {
                        out.push(d.clone());
                    }
                    break;
                }
                up = p.parent.as_ref();
            }
        }
        out
    }

    /// `clBuildProgram` for `devices` (empty = all of the program's).
    pub fn build(&self, devices: &[Arc<Device>], options: &str) -> ClResult<()> {
        let opts = CString::new(options).map_err(|_| CL_INVALID_BUILD_OPTIONS)?;
        let devices = &self.with_sub_devices(devices)[..];
        self.note_attempt(options, devices);
        let mut result = Ok(());
        for (_, vp, vdevs) in self.per_vendor(devices) {
            if let Err(rc) = vp.build(&vdevs, &opts) {
                if result.is_ok() {
                    result = Err(rc);
                }
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
        let opts = CString::new(options).map_err(|_| CL_INVALID_COMPILER_OPTIONS)?;
        let devices = &self.with_sub_devices(devices)[..];
        self.note_attempt(options, devices);
        let mut result = Ok(());
        for (vendor, vp, vdevs) in self.per_vendor(devices) {
            let mut vheaders = Vec::new();
            for (h, name) in headers {
                let hp = h.vendor_program(vendor).ok_or(CL_INVALID_OPERATION)?;
                vheaders.push((hp, name.as_c_str()));
            }
            if let Err(rc) = vp.compile(&vdevs, &opts, &vheaders) {
                if result.is_ok() {
                    result = Err(rc);
                }
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
            let vdevs: Vec<&VDevice> = devices
                .iter()
                .filter(|d| d.group == vc.group)
                .filter_map(|d| d.vdev.as_ref())
                .collect();
            if vdevs.is_empty() {
                continue;
            }
            let mut vinputs = Vec::new();
            for p in inputs {
                vinputs.push(p.vendor_program(vc.group).ok_or(CL_INVALID_OPERATION)?);
            }
            let (p, err) = vc.vctx.link_program(&vdevs, &opts, &vinputs);
            let Some(p) = p else {
                // Not returned yet: the other ranks wait for this rank's results.
                if result.is_ok() {
                    result = Err(if err == CL_SUCCESS {
                        CL_LINK_PROGRAM_FAILURE
                    } else {
                        err
                    });
                }
                continue;
            };
            if err != CL_SUCCESS && result.is_ok() {
                result = Err(err);
            }
            vendor.push((vc.group, p));
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
        let vdev = device.vdev.as_ref().ok_or(CL_INVALID_DEVICE)?;
        vp.build_info(vdev, param)
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
        if !device.local() {
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
        if !device.local() {
            return self.remote(device).log;
        }
        let log = |d: &Device| {
            self.build_info(d, CL_PROGRAM_BUILD_LOG)
                .map(|b| crate::c_string(&b))
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
        if !device.local() {
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
        let (_, vp) = self.vendor.first().ok_or(CL_INVALID_PROGRAM_EXECUTABLE)?;
        vp.info(param)
    }

    /// The binary of each of the program's devices, in the program's device order. In a
    /// cluster this is a collective: each device's owner provides its binary.
    pub fn binaries(&self) -> ClResult<Vec<Vec<u8>>> {
        let node = crate::cluster::node::node();
        let local = self.local_binaries();
        if !node.is_cluster() {
            return local;
        }
        let mine = wire::Binaries(local.map(|bins| {
            (self.devices.iter().zip(bins))
                .filter(|(d, _)| d.local())
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
        for (vendor, vp) in &self.vendor {
            // Only a vendor program with an executable has binaries (PoCL 3.1 answers
            // CL_INVALID_PROGRAM for one built for none of its devices: the program may be
            // built for another rank's devices only).
            let built = self
                .devices
                .iter()
                .any(|d| d.group == *vendor && d.local() && self.is_built_for(d));
            if !built {
                continue;
            }
            let mut binaries = vp.binaries()?;
            for (i, d) in self.devices.iter().enumerate() {
                if d.group != *vendor {
                    continue;
                }
                let Some(vdev) = &d.vdev else { continue };
                if let Some((_, b)) = binaries.iter_mut().find(|(id, _)| *id == vdev.raw()) {
                    out[i] = std::mem::take(b);
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
            .map(|b| crate::c_string(&b))
    }

    /// After a build, compile or link attempted on this rank's devices of `list` (empty:
    /// all of the program's), every rank reports its devices' results to every other:
    /// each rank then answers build queries for every device as its owner does, and
    /// every rank returns the same code, the first failure in rank order.
    fn share_results(&self, list: &[Arc<Device>], result: ClResult<()>) -> ClResult<()> {
        let node = crate::cluster::node::node();
        if !node.is_cluster() {
            return result;
        }
        let list = if list.is_empty() { &self.devices } else { list };
        let mine: Vec<&Arc<Device>> = list.iter().filter(|d| d.local()).collect();
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
                    .map(|b| crate::c_string(&b))
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

impl Drop for Program {
    fn drop(&mut self) {
        // The vendor programs go before the application's release callbacks run.
        self.vendor.clear();
        let handle = self as *mut Program as usize;
        self.release_callbacks.run(handle);
    }
}
