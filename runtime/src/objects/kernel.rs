//! Kernels: MirrorCL keeps the arguments; each device has its own vendor kernel whose
//! arguments only that device's issuer sets, just before it enqueues, and only those
//! that changed since its last launch.

use crate::cl::*;
use crate::cluster::wire;
use crate::native::{VDevice, VKernel, VMem, VSampler};
use crate::objects::device::Device;
use crate::objects::handle::{impl_handle, Header};
use crate::objects::memory::Buffer;
use crate::objects::program::Program;
use crate::objects::sampler::Sampler;
use crate::ClResult;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// A by-value argument's bytes, as the kernel, its launches and the vendor kernels'
/// record of what they were set to hold them: inline up to [`ArgBytes::INLINE`] bytes (a
/// solver sets its scalars before every launch; each was an allocation and, with every
/// copy, an atomic operation), shared beyond.
#[derive(Clone)]
pub enum ArgBytes {
    Inline {
        len: u8,
        bytes: [u8; ArgBytes::INLINE],
    },
    Shared(Arc<[u8]>),
}

impl ArgBytes {
    /// A `double2` or a small struct; more would make every argument larger to move.
    pub const INLINE: usize = 16;
}

impl From<&[u8]> for ArgBytes {
    fn from(b: &[u8]) -> ArgBytes {
        if b.len() <= ArgBytes::INLINE {
            let mut bytes = [0u8; ArgBytes::INLINE];
            bytes[..b.len()].copy_from_slice(b);
            ArgBytes::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            ArgBytes::Shared(b.into())
        }
    }
}

impl std::ops::Deref for ArgBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ArgBytes::Inline { len, bytes } => &bytes[..*len as usize],
            ArgBytes::Shared(b) => b,
        }
    }
}

impl PartialEq for ArgBytes {
    fn eq(&self, other: &ArgBytes) -> bool {
        **self == **other
    }
}

/// An argument as the application set it, as a launch takes it.
#[derive(Clone)]
pub enum ArgValue {
    Mem(Option<Arc<Buffer>>),
    Sampler(Arc<Sampler>),
    Local(usize),
    Bytes(ArgBytes),
}

/// An argument as a kernel keeps it: a buffer argument does not keep its buffer alive
/// (OpenCL does not retain it: releasing the buffer deletes it and runs its destructor
/// callbacks); a launch holds it from then on.
#[derive(Clone)]
enum KeptArg {
    Mem(Option<Weak<Buffer>>),
    Sampler(Arc<Sampler>),
    Local(usize),
    Bytes(ArgBytes),
}

impl KeptArg {
    fn keep(value: ArgValue) -> KeptArg {
        match value {
            ArgValue::Mem(b) => KeptArg::Mem(b.as_ref().map(Arc::downgrade)),
            ArgValue::Sampler(s) => KeptArg::Sampler(s),
            ArgValue::Local(n) => KeptArg::Local(n),
            ArgValue::Bytes(b) => KeptArg::Bytes(b),
        }
    }

    /// The value for a launch; `CL_INVALID_MEM_OBJECT` for a buffer deleted since.
    fn value(&self) -> ClResult<ArgValue> {
        Ok(match self {
            KeptArg::Mem(None) => ArgValue::Mem(None),
            KeptArg::Mem(Some(b)) => ArgValue::Mem(Some(b.upgrade().ok_or(CL_INVALID_MEM_OBJECT)?)),
            KeptArg::Sampler(s) => ArgValue::Sampler(s.clone()),
            KeptArg::Local(n) => ArgValue::Local(*n),
            KeptArg::Bytes(b) => ArgValue::Bytes(b.clone()),
        })
    }
}

/// An argument as a device's vendor kernel is to have it.
#[derive(Clone)]
pub enum VendorArg {
    /// A vendor buffer (shared with the buffer it belongs to), or NULL.
    Mem(Option<Arc<VMem>>),
    /// The vendor sampler of the device's vendor context.
    Sampler(Arc<VSampler>),
    Local(usize),
    Bytes(ArgBytes),
}

/// What a vendor kernel's argument is set to now.
#[derive(Clone)]
enum SetArg {
    Local(usize),
    Bytes(ArgBytes),
    /// A vendor buffer (or NULL) by identity. The weak reference keeps its allocation,
    /// so no other buffer can have its address while it is remembered, yet never keeps
    /// the vendor buffer itself alive.
    Mem(Option<Weak<VMem>>),
}

impl SetArg {
    fn of(arg: &VendorArg) -> Option<SetArg> {
        match arg {
            VendorArg::Mem(m) => Some(SetArg::Mem(m.as_ref().map(Arc::downgrade))),
            VendorArg::Sampler(_) => None,
            VendorArg::Local(size) => Some(SetArg::Local(*size)),
            VendorArg::Bytes(b) => Some(SetArg::Bytes(b.clone())),
        }
    }

    /// Whether the vendor kernel's argument already is `arg`.
    fn is(&self, arg: &VendorArg) -> bool {
        match (self, arg) {
            (SetArg::Local(a), VendorArg::Local(b)) => a == b,
            (SetArg::Bytes(a), VendorArg::Bytes(b)) => a == b,
            (SetArg::Mem(None), VendorArg::Mem(None)) => true,
            (SetArg::Mem(Some(w)), VendorArg::Mem(Some(m))) => {
                std::ptr::eq(w.as_ptr(), Arc::as_ptr(m))
            }
            _ => false,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ArgInfo {
    pub address: cl_kernel_arg_address_qualifier,
    /// Declared `const` (or `__constant`, or a `read_only` image): the kernel only
    /// reads it.
    pub read_only: bool,
    /// A `sampler_t`.
    pub sampler: bool,
}

struct DeviceKernel {
    vk: VKernel,
    /// What the vendor kernel's arguments are set to now.
    set: Mutex<Vec<Option<SetArg>>>,
}

/// The work-group facts every launch is checked against, asked once per device.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkGroupLimits {
    /// `CL_KERNEL_COMPILE_WORK_GROUP_SIZE` (`reqd_work_group_size`; zeros if none).
    pub required: [usize; 3],
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
    probes: Vec<(u32, VKernel)>,
    args: Mutex<Vec<Option<KeptArg>>>,
    /// What the vendors said of the kernel, the same on every rank.
    pub facts: KernelFacts,
    /// The rank whose vendor answers for the kernel (the lowest rank with an
    /// executable): it described the kernel and, in a cluster, answers `vendor_check`.
    describer: u32,
    /// In a cluster, the describer's answers to `vendor_check` so far, by (argument,
    /// size, NULL value): each is asked once per kernel.
    answers: Mutex<HashMap<(u32, usize, bool), cl_int>>,
    /// Per argument, the last of `answers` for it (`LastAnswer`), read without the lock:
    /// a solver sets its scalars before every launch.
    last_answers: Vec<std::sync::atomic::AtomicU64>,
    /// By device index, what every launch there is checked against: found once here,
    /// not in the maps of facts at each launch.
    launch: Vec<Option<LaunchFacts>>,
}

/// What a launch on one device is checked against (`Kernel::launch`).
#[derive(Clone, Copy, Debug)]
struct LaunchFacts {
    limits: Option<WorkGroupLimits>,
    /// The kernel's own local memory there, as its vendor reports it.
    own_local_mem: Option<cl_ulong>,
    /// `CL_DEVICE_LOCAL_MEM_SIZE`.
    device_local_mem: cl_ulong,
}

impl_handle!(Kernel, Kernel, CL_INVALID_KERNEL);

/// A query's answer: the bytes, or the error the vendor gave.
pub type Answer = Result<Vec<u8>, cl_int>;

/// One cached answer to `Kernel::vendor_check` in a word: valid (bit 63), NULL value
/// (bit 62), size (bits 32-61), the answer (bits 0-31). Sizes from 2^30 on stay in
/// the map alone.
struct LastAnswer;

impl LastAnswer {
    const VALID: u64 = 1 << 63;
    const NULL: u64 = 1 << 62;
    const SIZES: usize = 1 << 30;

    fn word(size: usize, null: bool) -> u64 {
        Self::VALID | if null { Self::NULL } else { 0 } | (size as u64) << 32
    }

    fn read(slot: &std::sync::atomic::AtomicU64, size: usize, null: bool) -> Option<cl_int> {
        let w = slot.load(Ordering::Relaxed);
        (size < Self::SIZES && w & !0xffff_ffff == Self::word(size, null))
            .then_some(w as u32 as cl_int)
    }

    fn write(slot: &std::sync::atomic::AtomicU64, size: usize, null: bool, rc: cl_int) {
        if size < Self::SIZES {
            slot.store(Self::word(size, null) | rc as u32 as u64, Ordering::Relaxed);
        }
    }
}

/// The argument queries every kernel answers from its facts (`clGetKernelArgInfo`).
pub const ARG_QUERIES: [cl_kernel_arg_info; 5] = [
    CL_KERNEL_ARG_ADDRESS_QUALIFIER,
    CL_KERNEL_ARG_ACCESS_QUALIFIER,
    CL_KERNEL_ARG_TYPE_NAME,
    CL_KERNEL_ARG_TYPE_QUALIFIER,
    CL_KERNEL_ARG_NAME,
];

/// The per-device queries every kernel answers from its facts
/// (`clGetKernelWorkGroupInfo`).
pub const WORK_GROUP_QUERIES: [cl_kernel_work_group_info; 5] = [
    CL_KERNEL_WORK_GROUP_SIZE,
    CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
    CL_KERNEL_LOCAL_MEM_SIZE,
    CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
    CL_KERNEL_PRIVATE_MEM_SIZE,
];

/// What the vendors say of a kernel, captured when it is created: the same on every
/// rank (the lowest rank with an executable describes the kernel, each device's owner
/// its work-group facts), so validation and queries agree everywhere.
#[derive(Clone, Debug, Default)]
pub struct KernelFacts {
    pub num_args: u32,
    pub attributes: Option<Vec<u8>>,
    /// Per argument, the answers to `ARG_QUERIES`.
    pub args: Vec<Vec<Answer>>,
    /// Per device index, the answers to `WORK_GROUP_QUERIES` (before any argument).
    pub work_group: HashMap<u32, Vec<Answer>>,
}

/// A kernel's own local memory on device `device` in its `facts`, as its vendor reports it.
fn own_local_mem(facts: &KernelFacts, device: u32) -> Option<cl_ulong> {
    let answer = facts.work_group_answer(device, CL_KERNEL_LOCAL_MEM_SIZE)?;
    answer.as_ref().ok()?;
    Some(value_of(Some(answer)))
}

fn value_of<T: Copy + Default>(a: Option<&Answer>) -> T {
    match a {
        Some(Ok(b)) if b.len() >= std::mem::size_of::<T>() => {
            // SAFETY: size checked; T is plain data.
            unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
        }
        _ => T::default(),
    }
}

impl KernelFacts {
    /// The kernel-wide facts from one vendor kernel.
    fn describe(probe: &VKernel) -> KernelFacts {
        let num_args: cl_uint = probe.info_value(CL_KERNEL_NUM_ARGS).unwrap_or(0);
        let attributes = probe.info(CL_KERNEL_ATTRIBUTES).ok();
        let args = (0..num_args)
            .map(|i| {
                ARG_QUERIES
                    .iter()
                    .map(|&param| probe.arg_info(i, param))
                    .collect()
            })
            .collect();
        KernelFacts {
            num_args,
            attributes,
            args,
            work_group: HashMap::default(),
        }
    }

    /// Where the vendor gave no argument qualifiers (it reports them only for builds
    /// with `-cl-kernel-arg-info`, which the application's build may lack), takes them
    /// from the source built again with that option, when that build succeeds.
    fn complete_arg_info(&mut self, program: &Program, vendor: u32, name: &CStr) {
        let complete = self.args.iter().all(|arg| arg.iter().all(Result::is_ok));
        if complete {
            return;
        }
        if let Some(k) = program.arg_info_kernel(vendor, name) {
            let again = KernelFacts::describe(&k);
            if again.num_args == self.num_args {
                self.args = again.args;
            }
        }
    }

    fn device_answers(vk: &VKernel, vdev: &VDevice) -> Vec<Answer> {
        WORK_GROUP_QUERIES
            .iter()
            .map(|&param| vk.work_group_info(vdev, param))
            .collect()
    }

    /// A device's answer to one of `WORK_GROUP_QUERIES`.
    pub fn work_group_answer(
        &self,
        device: u32,
        param: cl_kernel_work_group_info,
    ) -> Option<&Answer> {
        let i = WORK_GROUP_QUERIES.iter().position(|&p| p == param)?;
        self.work_group.get(&device).and_then(|a| a.get(i))
    }

    /// An argument's answer to one of `ARG_QUERIES`.
    pub fn arg_answer(&self, index: u32, param: cl_kernel_arg_info) -> Option<&Answer> {
        let i = ARG_QUERIES.iter().position(|&p| p == param)?;
        self.args.get(index as usize).and_then(|a| a.get(i))
    }

    fn limits(&self, device: u32) -> Option<WorkGroupLimits> {
        self.work_group.get(&device)?;
        Some(WorkGroupLimits {
            required: value_of(self.work_group_answer(device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE)),
        })
    }

    fn arg_info(&self) -> Option<Vec<ArgInfo>> {
        (0..self.num_args)
            .map(|i| {
                let address = match self.arg_answer(i, CL_KERNEL_ARG_ADDRESS_QUALIFIER) {
                    Some(Ok(_)) => value_of(self.arg_answer(i, CL_KERNEL_ARG_ADDRESS_QUALIFIER)),
                    _ => return None,
                };
                let qualifier: cl_kernel_arg_type_qualifier =
                    value_of(self.arg_answer(i, CL_KERNEL_ARG_TYPE_QUALIFIER));
                let access: cl_kernel_arg_access_qualifier =
                    value_of(self.arg_answer(i, CL_KERNEL_ARG_ACCESS_QUALIFIER));
                let type_name = match self.arg_answer(i, CL_KERNEL_ARG_TYPE_NAME) {
                    Some(Ok(b)) => crate::c_string(b),
                    _ => String::new(),
                };
                Some(ArgInfo {
                    address,
                    // A `read_only` image is only read.
                    read_only: address == CL_KERNEL_ARG_ADDRESS_CONSTANT
                        || qualifier & CL_KERNEL_ARG_TYPE_CONST != 0
                        || access == CL_KERNEL_ARG_ACCESS_READ_ONLY,
                    sampler: type_name == "sampler_t",
                })
            })
            .collect()
    }

    fn into_wire(self) -> wire::KernelDescription {
        let mut work_group: Vec<_> = self.work_group.into_iter().collect();
        work_group.sort_unstable_by_key(|(d, _)| *d);
        wire::KernelDescription {
            num_args: self.num_args,
            attributes: self.attributes,
            args: self.args,
            // No longer read: `clSetKernelArg` asks the describer (`Kernel::vendor_check`).
            work_group,
        }
    }
}

type LocalKernels = (Vec<(u32, VKernel)>, HashMap<u32, DeviceKernel>);

/// The vendor kernels of this rank's devices the program is built for: one per device
/// and one probe per vendor program.
fn create_local(program: &Program, name: &CString) -> ClResult<LocalKernels> {
    let mut probes = Vec::new();
    let mut devices: HashMap<u32, DeviceKernel> = HashMap::default();
    for (vendor, vp) in &program.vendor {
        let vendor = *vendor;
        let built: Vec<&Arc<Device>> = program
            .devices
            .iter()
            .filter(|d| d.group == vendor && program.is_built_for(d))
            .collect();
        if built.is_empty() {
            continue;
        }
        // On an error, what was made so far is released as it goes out of scope.
        probes.push((vendor, vp.create_kernel(name)?));
        for d in built {
            devices.insert(
                d.index,
                DeviceKernel {
                    vk: vp.create_kernel(name)?,
                    set: Mutex::new(Vec::new()),
                },
            );
        }
    }
    Ok((probes, devices))
}

impl Kernel {
    /// `clCreateKernel`. In a cluster this is a collective: every rank learns the
    /// kernel's facts and every device's work-group facts from their owners, and every
    /// rank returns what the lowest rank with an executable got.
    pub fn new(program: Arc<Program>, name: &str) -> ClResult<Arc<Kernel>> {
        let cname = CString::new(name).map_err(|_| CL_INVALID_VALUE)?;
        let local = create_local(&program, &cname);
        let has_executable = program
            .devices
            .iter()
            .any(|d| d.local() && program.is_built_for(d));
        // Only the lowest rank with an executable describes the kernel (the others'
        // descriptions would be discarded): it alone asks the vendor for the arguments
        // and builds again for their qualifiers where needed.
        let describer = program
            .devices
            .iter()
            .filter(|d| program.is_built_for(d))
            .map(|d| d.owner)
            .min();
        let describes = describer == Some(crate::cluster::node::node().rank);
        let mut mine: Option<Result<KernelFacts, cl_int>> = None;
        if has_executable {
            mine = Some(match &local {
                Ok((probes, devices)) => {
                    let mut facts = KernelFacts::default();
                    if let (true, Some((vendor, probe))) = (describes, probes.first()) {
                        facts = KernelFacts::describe(probe);
                        facts.complete_arg_info(&program, *vendor, &cname);
                    }
                    for d in &program.devices {
                        if let (Some(dk), Some(vdev)) = (devices.get(&d.index), &d.vdev) {
                            facts
                                .work_group
                                .insert(d.index, KernelFacts::device_answers(&dk.vk, vdev));
                        }
                    }
                    Ok(facts)
                }
                Err(rc) => Err(*rc),
            });
        }
        let facts = share_facts(mine);
        let (probes, devices) = match (facts.is_ok(), local) {
            (true, Ok(l)) => l,
            // The vendor kernels made here are released as they go.
            (_, Ok(_)) => return Err(facts.err().unwrap_or(CL_INVALID_PROGRAM_EXECUTABLE)),
            (_, Err(rc)) => return Err(facts.err().unwrap_or(rc)),
        };
        let facts = facts?;
        program.kernels.fetch_add(1, Ordering::AcqRel);
        let num_args = facts.num_args;
        let mut launch = Vec::new();
        for d in &program.devices {
            let i = d.index as usize;
            if launch.len() <= i {
                launch.resize(i + 1, None);
            }
            launch[i] = Some(LaunchFacts {
                // A device with a vendor kernel here has limits, if only the defaults.
                limits: (facts.limits(d.index)).or_else(|| {
                    devices
                        .contains_key(&d.index)
                        .then(WorkGroupLimits::default)
                }),
                own_local_mem: own_local_mem(&facts, d.index),
                device_local_mem: d.info_value(CL_DEVICE_LOCAL_MEM_SIZE),
            });
        }
        Ok(Arc::new(Kernel {
            header: Header::new(),
            program,
            name: name.to_string(),
            num_args: facts.num_args,
            arg_info: facts.arg_info(),
            devices,
            probes,
            args: Mutex::new(vec![None; facts.num_args as usize]),
            facts,
            // A kernel exists only where some rank has an executable.
            describer: describer.unwrap_or_default(),
            answers: Mutex::new(HashMap::default()),
            last_answers: (0..num_args).map(|_| Default::default()).collect(),
            launch,
        }))
    }

    /// `CL_KERNEL_LOCAL_MEM_SIZE` as the specification defines it: the kernel's own
    /// local memory plus the `__local` arguments set now (some vendors leave the
    /// arguments out).
    pub fn local_mem_size(&self, device: &Device) -> Option<cl_ulong> {
        let base = self.launch_facts(device)?.own_local_mem?;
        let args: usize = self
            .args
            .lock()
            .iter()
            .map(|a| match a {
                Some(KeptArg::Local(n)) => *n,
                _ => 0,
            })
            .sum();
        Some(base + args as cl_ulong)
    }

    /// Whether a launch with `args`, its snapshot of the arguments, needs more local
    /// memory on `device` (the kernel's own and its `__local` arguments) than the device
    /// has, as far as its vendor told.
    pub fn launch_exceeds_local_mem(&self, device: &Device, args: &[ArgValue]) -> bool {
        let Some(facts) = self.launch_facts(device) else {
            return false;
        };
        let Some(base) = facts.own_local_mem else {
            return false;
        };
        let have = facts.device_local_mem;
        let local: usize = (args.iter())
            .map(|a| match a {
                ArgValue::Local(n) => *n,
                _ => 0,
            })
            .sum();
        have > 0 && base + local as cl_ulong > have
    }

    fn launch_facts(&self, device: &Device) -> Option<&LaunchFacts> {
        self.launch.get(device.index as usize)?.as_ref()
    }

    /// `clSetKernelArg`, once the value is validated.
    pub fn set_arg(&self, index: u32, value: ArgValue) {
        if let Some(slot) = self.args.lock().get_mut(index as usize) {
            *slot = Some(KeptArg::keep(value));
        }
    }

    /// Every argument, for a launch: `CL_INVALID_KERNEL_ARGS` if one is not set,
    /// `CL_INVALID_MEM_OBJECT` if a buffer argument was deleted since it was set.
    pub fn launch_args(&self) -> ClResult<Vec<ArgValue>> {
        self.args
            .lock()
            .iter()
            .map(|a| a.as_ref().ok_or(CL_INVALID_KERNEL_ARGS)?.value())
            .collect()
    }

    /// Lets this rank's vendors check an argument on their probe kernels (never
    /// enqueued): the first refusal.
    fn probe(&self, index: u32, size: usize, value: *const c_void) -> ClResult<()> {
        for (_, probe) in &self.probes {
            // SAFETY: forwarded as the application gave it (`size` readable bytes, or
            // NULL); probes are never enqueued and only set here, from clSetKernelArg,
            // which OpenCL 1.2 §A.2 forbids running on one kernel from two threads at once.
            unsafe { probe.set_arg(index, size, value) }?;
        }
        Ok(())
    }

    /// The vendor's answer to an argument MirrorCL does not interpret itself (a by-value
    /// value, a `__local` size): alone, this rank's vendors'. In a cluster, every rank
    /// returns the describer's (only ranks with an executable could ask a vendor, and
    /// vendors differ), a collective. Asked once per argument, size and NULL-ness when
    /// `cached` (a by-value or `__local` argument, whose answer does not depend on the
    /// bytes), else every time. Every rank takes the same path: the cache fills in call
    /// order.
    pub fn vendor_check(
        &self,
        index: u32,
        size: usize,
        value: *const c_void,
        cached: bool,
    ) -> ClResult<()> {
        let key = (index, size, value.is_null());
        let last = self.last_answers.get(index as usize);
        if let Some(rc) = cached
            .then(|| {
                last.and_then(|l| LastAnswer::read(l, size, value.is_null()))
                    .or_else(|| self.answers.lock().get(&key).copied())
            })
            .flatten()
        {
            return crate::check(rc);
        }
        let node = crate::cluster::node::node();
        let rc = if !node.is_cluster() {
            self.probe(index, size, value).err().unwrap_or(CL_SUCCESS)
        } else {
            let mine = (node.rank == self.describer)
                .then(|| self.probe(index, size, value).map(|()| Vec::new()));
            node.exchange(&wire::OwnerAnswer(mine))
                .into_iter()
                .find_map(|a| a.0)
                .map_or(CL_INVALID_PROGRAM_EXECUTABLE, |a| {
                    a.err().unwrap_or(CL_SUCCESS)
                })
        };
        if cached {
            self.answers.lock().insert(key, rc);
            if let Some(l) = last {
                LastAnswer::write(l, size, value.is_null(), rc);
            }
        }
        crate::check(rc)
    }

    pub fn limits(&self, device: &Device) -> Option<WorkGroupLimits> {
        match self.launch_facts(device) {
            Some(f) => f.limits,
            None => self.facts.limits(device.index),
        }
    }

    /// Sets `args` on device `device`'s vendor kernel where they differ from what it has
    /// (a solver launching one kernel per device with the same buffers sets only its
    /// scalars again). Runs on the device's issuer thread.
    pub fn apply_args(&self, device: u32, args: &[VendorArg]) -> ClResult<&VKernel> {
        let dk = self
            .devices
            .get(&device)
            .ok_or(CL_INVALID_PROGRAM_EXECUTABLE)?;
        let mut set = dk.set.lock();
        set.resize(args.len(), None);
        for (i, arg) in args.iter().enumerate() {
            if set[i].as_ref().is_some_and(|s| s.is(arg)) {
                continue;
            }
            let index = i as cl_uint;
            // SAFETY: only this device's issuer sets its kernel's arguments.
            let rc = unsafe {
                match arg {
                    VendorArg::Mem(m) => dk.vk.set_arg_mem(index, m.as_deref()),
                    VendorArg::Sampler(sampler) => dk.vk.set_arg_sampler(index, sampler),
                    VendorArg::Local(size) => dk.vk.set_arg(index, *size, std::ptr::null()),
                    // Bytes validated by the probe kernel when the application set them.
                    VendorArg::Bytes(b) => {
                        dk.vk.set_arg(index, b.len(), b.as_ptr() as *const c_void)
                    }
                }
            };
            if let Err(rc) = rc {
                set[i] = None;
                return Err(rc);
            }
            set[i] = SetArg::of(arg);
        }
        Ok(&dk.vk)
    }
}

/// Every rank's facts: the kernel's from the lowest rank that has an executable (its
/// error, if it failed), each device's work-group facts from its owner.
fn share_facts(mine: Option<Result<KernelFacts, cl_int>>) -> Result<KernelFacts, cl_int> {
    let node = crate::cluster::node::node();
    if !node.is_cluster() {
        return mine.unwrap_or(Err(CL_INVALID_PROGRAM_EXECUTABLE));
    }
    let mine = wire::KernelFactsShare(mine.map(|f| f.map(KernelFacts::into_wire)));
    let mut chosen: Option<Result<KernelFacts, cl_int>> = None;
    let mut work_group = HashMap::default();
    for rank in node.exchange(&mine) {
        let Some(facts) = rank.0 else { continue };
        let facts = match facts {
            Ok(f) => f,
            Err(rc) => {
                chosen.get_or_insert(Err(rc));
                continue;
            }
        };
        work_group.extend(facts.work_group);
        chosen.get_or_insert(Ok(KernelFacts {
            num_args: facts.num_args,
            attributes: facts.attributes,
            args: facts.args,
            work_group: HashMap::default(),
        }));
    }
    let mut facts = chosen.unwrap_or(Err(CL_INVALID_PROGRAM_EXECUTABLE))?;
    facts.work_group = work_group;
    Ok(facts)
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.program.kernels.fetch_sub(1, Ordering::AcqRel);
        // The vendor kernels go before their vendor programs (the program is a field).
        self.probes.clear();
        self.devices.clear();
    }
}
