//! Buffers. A buffer has an instance on each device that used it (a vendor buffer,
//! created on first use) and a host copy (the scheduler's `Location::Host`); which of
//! them hold the newest bytes is the scheduler's business. A sub-buffer is a window on
//! its parent: its instances are vendor sub-buffers of the parent's instances and its
//! bytes are tracked as a range of the parent. An image is a buffer with an
//! [`Image`] description (`crate::objects::image`); a 1D image buffer is a window on its buffer
//! like a sub-buffer.

use crate::cl::*;
use crate::native::VMem;
use crate::objects::context::Context;
use crate::objects::device::Device;
use crate::objects::handle::{impl_handle, Destructors, Header};
use crate::objects::image::Image;
use crate::ClResult;
use mirrorcl_scheduler::{BufferId, Location};
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::alloc::Layout;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// Host copy alignment: a page, so vendors can use it for DMA.
const HOST_ALIGN: usize = 4096;

struct HostCopy {
    ptr: *mut u8,
    /// Set when MirrorCL allocated it (not `CL_MEM_USE_HOST_PTR` memory).
    owned: Option<Layout>,
}

// SAFETY: the memory is owned by its buffer (or the application's, lent for the
// buffer's life), and the commands touching it are ordered by the scheduler.
unsafe impl Send for HostCopy {}
// SAFETY: as above.
unsafe impl Sync for HostCopy {}

/// The application's image at `ptr`, with its pitches, in the host copy's layout.
fn pack(image: &Image, ptr: *const u8, (row, slice): (usize, usize)) -> Vec<u8> {
    let mut out = vec![0u8; image.host_bytes()];
    let [w, h, d] = image.extent();
    let row_bytes = w * image.element_size;
    for z in 0..d {
        for y in 0..h {
            // A 1D array's layers (its y) lie a slice pitch apart.
            let from = if image.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY {
                y * slice
            } else {
                z * slice + y * row
            };
            let to = image.host_offset([0, y, z]);
            // SAFETY: the application guarantees its image's rows at its pitches
            // (validated); `out` holds the packed image.
            let src = unsafe { std::slice::from_raw_parts(ptr.add(from), row_bytes) };
            out[to..to + row_bytes].copy_from_slice(src);
        }
    }
    out
}

/// One outstanding `clEnqueueMapBuffer`.
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub ptr: usize,
    pub offset: usize,
    pub size: usize,
    pub writes: bool,
}

#[repr(C)]
pub struct Buffer {
    header: Header,
    pub context: Arc<Context>,
    pub flags: cl_mem_flags,
    pub size: usize,
    /// The application's host pointer (`CL_MEM_USE_HOST_PTR`), for CL_MEM_HOST_PTR.
    pub host_ptr: usize,
    pub parent: Option<Arc<Buffer>>,
    /// Offset in the parent (sub-buffers).
    pub origin: usize,
    /// The scheduler's id of the root buffer.
    pub id: BufferId,
    /// Per device, the vendor buffer; shared with the commands using it (which also
    /// keep this buffer alive). The first one made, the only one of most buffers, is
    /// read without a lock (`instance` runs for every buffer of every command).
    first_instance: OnceLock<(u32, Arc<VMem>)>,
    instances: Mutex<HashMap<u32, Arc<VMem>>>,
    host: Mutex<Option<HostCopy>>,
    pub maps: Mutex<Vec<Mapping>>,
    pub map_count: AtomicU32,
    pub destructors: Destructors,
    /// Set for an image: its shape, and the host copy's layout.
    pub image: Option<Image>,
    /// Recent accesses by host threads (a root buffer's), to tell races (`races`).
    pub races: crate::objects::races::Accesses,
    /// A root buffer's reads for other ranks (`SentReads`).
    pub sent_read: Mutex<SentReads>,
    /// Some read of it ever fed a send (`note_sent_read`): until then a write need not
    /// look at `sent_read` (a lock, on every command that writes the buffer).
    sent_read_ever: AtomicBool,
}

/// A root buffer's one-piece device reads that fed sends.
#[derive(Default)]
pub struct SentReads {
    /// The newest, which a later send of the same bytes may share
    /// (`enqueue::transfer_steps::send_to_device`) until something that writes that
    /// device's instance is scheduled (`Buffer::wrote_on`).
    pub current: Option<SentRead>,
    /// Where the newest was taken (device, range in the root), kept across writes: a
    /// program that sends those bytes once sends them again after the next write (an
    /// all-to-all each iteration), so a small local copy of them reads them ahead for
    /// the sends (`enqueue::transfer_steps::read_for_predicted_sends`). Forgotten when
    /// such a read goes unsent: the local copies of a program that stopped sending go
    /// back to one device copy each.
    pub last: Option<(u32, Range<usize>)>,
}

impl SentReads {
    /// `read` fed a send: later sends of its bytes may share it.
    pub fn note(&mut self, read: SentRead) {
        self.last = Some((read.device, read.range.clone()));
        self.current = Some(read);
    }
}

/// A device read of a buffer range into a staging block, whose bytes went to another rank.
pub struct SentRead {
    pub device: u32,
    /// In the root buffer.
    pub range: Range<usize>,
    pub read: Arc<crate::objects::event::Event>,
    /// Alive while a send of it is: afterwards the block may hold other bytes.
    pub block: std::sync::Weak<crate::native::staging::Staging>,
    /// Read ahead for sends that have not shared it yet.
    pub unsent: bool,
}

impl_handle!(Buffer, Mem, CL_INVALID_MEM_OBJECT);

/// Host copies from this size on are mapped from the kernel, not taken from the
/// allocator: their pages are committed as they are touched and go back to the system
/// when the buffer goes, and a copy that does not fit the address space fails here
/// (mimalloc would carve it out of a reservation made earlier).
const MAPPED_FROM: usize = 256 << 10;

fn alloc_host(size: usize) -> ClResult<HostCopy> {
    let layout =
        Layout::from_size_align(size.max(1), HOST_ALIGN).map_err(|_| CL_INVALID_BUFFER_SIZE)?;
    let ptr = if layout.size() >= MAPPED_FROM {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p as *mut u8
        }
    } else {
        // SAFETY: non-zero size layout.
        unsafe { std::alloc::alloc(layout) }
    };
    if ptr.is_null() {
        return Err(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    }
    Ok(HostCopy {
        ptr,
        owned: Some(layout),
    })
}

/// Frees what `alloc_host` gave.
///
/// # Safety
/// `ptr` came from `alloc_host` with `layout`, and nothing uses it any more.
unsafe fn free_host(ptr: *mut u8, layout: Layout) {
    if layout.size() >= MAPPED_FROM {
        // SAFETY: the whole mapping `alloc_host` made (the caller's promise).
        unsafe { libc::munmap(ptr as *mut c_void, layout.size()) };
    } else {
        // SAFETY: allocated by the allocator with this layout (the caller's promise).
        unsafe { std::alloc::dealloc(ptr, layout) };
    }
}

impl Buffer {
    /// `read` of this root buffer fed a send (`SentReads::note`). Under the scheduler
    /// lock.
    pub fn note_sent_read(&self, read: SentRead) {
        self.sent_read_ever.store(true, Ordering::Relaxed);
        self.sent_read.lock().note(read);
    }

    /// A command or step that writes this root buffer's instance on `device` was
    /// scheduled: a read of it made before no longer serves later sends.
    pub fn wrote_on(&self, device: u32) {
        // Set under the scheduler lock, which the caller holds.
        if !self.sent_read_ever.load(Ordering::Relaxed) {
            return;
        }
        let mut sent = self.sent_read.lock();
        if let Some(s) = sent.current.take_if(|s| s.device == device) {
            if s.unsent {
                sent.last = None;
            }
        }
    }

    /// `clCreateBuffer` after validation.
    pub fn new(
        context: Arc<Context>,
        flags: cl_mem_flags,
        size: usize,
        host_ptr: *mut c_void,
    ) -> ClResult<Arc<Buffer>> {
        if crate::cluster::verify::enabled() {
            let data: &[u8] = if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0 {
                // SAFETY: the application guarantees `size` readable bytes at host_ptr.
                unsafe { std::slice::from_raw_parts(host_ptr as *const u8, size) }
            } else {
                &[]
            };
            crate::cluster::verify::note(
                "clCreateBuffer",
                &[&flags.to_le_bytes(), &size.to_le_bytes(), data],
            );
        }
        let (host, initial) = if flags & CL_MEM_USE_HOST_PTR != 0 {
            let h = HostCopy {
                ptr: host_ptr as *mut u8,
                owned: None,
            };
            (Some(h), Some(Location::Host))
        } else if flags & CL_MEM_COPY_HOST_PTR != 0 {
            let h = alloc_host(size)?;
            // SAFETY: the application guarantees `size` readable bytes at host_ptr; the
            // new allocation has at least `size` bytes.
            unsafe { std::ptr::copy_nonoverlapping(host_ptr as *const u8, h.ptr, size) };
            (Some(h), Some(Location::Host))
        } else {
            (None, None)
        };
        // Named per host thread: the same on every rank however threads interleave.
        let id = crate::cluster::host_threads::next_id();
        (context.scheduler.lock()).create_buffer_as(id, size as u64, initial);
        crate::cluster::record::buffer(context.record_id, id, size as u64, initial);
        if crate::cluster::history::kept() {
            crate::cluster::history::note_buffer(id, size as u64);
        }
        Ok(Arc::new(Buffer {
            header: Header::new(),
            context,
            flags,
            size,
            host_ptr: if flags & CL_MEM_USE_HOST_PTR != 0 {
                host_ptr as usize
            } else {
                0
            },
            parent: None,
            origin: 0,
            id,
            first_instance: OnceLock::new(),
            instances: Mutex::new(HashMap::default()),
            host: Mutex::new(host),
            maps: Mutex::new(Vec::new()),
            map_count: AtomicU32::new(0),
            destructors: Destructors::default(),
            image: None,
            races: Default::default(),
            sent_read: Mutex::new(SentReads::default()),
            sent_read_ever: AtomicBool::new(false),
        }))
    }

    /// `clCreateImage` after validation, `image` with the application's pitches. The
    /// host copy has the image's layout (the application's pitches with
    /// `CL_MEM_USE_HOST_PTR`, packed otherwise); a 1D image buffer is a window on
    /// `buffer`.
    pub fn new_image(
        context: Arc<Context>,
        flags: cl_mem_flags,
        image: Image,
        host_ptr: *mut c_void,
        buffer: Option<Arc<Buffer>>,
    ) -> ClResult<Arc<Buffer>> {
        if let Some(parent) = buffer {
            let mut view = Buffer::new_sub(&parent, flags, 0, image.host_bytes());
            Arc::get_mut(&mut view).expect("not shared yet").image = Some(image);
            return Ok(view);
        }
        // A copied image's host copy is packed: the pitches `image` has from the
        // application only say how to read its memory.
        let packed;
        let (image, host_ptr) = if flags & CL_MEM_COPY_HOST_PTR != 0 {
            let into = image.packed();
            packed = pack(
                &into,
                host_ptr as *const u8,
                (image.row_pitch, image.slice_pitch),
            );
            (into, packed.as_ptr() as *mut c_void)
        } else {
            (image, host_ptr)
        };
        let mut buffer = Buffer::new(context, flags, image.host_bytes(), host_ptr)?;
        Arc::get_mut(&mut buffer).expect("not shared yet").image = Some(image);
        Ok(buffer)
    }

    /// `clCreateSubBuffer` after validation.
    pub fn new_sub(
        parent: &Arc<Buffer>,
        flags: cl_mem_flags,
        origin: usize,
        size: usize,
    ) -> Arc<Buffer> {
        Arc::new(Buffer {
            header: Header::new(),
            context: parent.context.clone(),
            flags,
            size,
            host_ptr: if parent.host_ptr != 0 {
                parent.host_ptr + origin
            } else {
                0
            },
            parent: Some(parent.clone()),
            origin,
            id: parent.id,
            first_instance: OnceLock::new(),
            instances: Mutex::new(HashMap::default()),
            host: Mutex::new(None),
            maps: Mutex::new(Vec::new()),
            map_count: AtomicU32::new(0),
            destructors: Destructors::default(),
            image: None,
            races: Default::default(),
            sent_read: Mutex::new(SentReads::default()),
            sent_read_ever: AtomicBool::new(false),
        })
    }

    pub fn root(&self) -> &Buffer {
        self.parent.as_deref().unwrap_or(self)
    }

    /// `offset..offset+len` of this buffer as a range of the root buffer.
    pub fn root_range(&self, offset: usize, len: usize) -> Range<u64> {
        let start = (self.origin + offset) as u64;
        start..start + len as u64
    }

    /// This buffer's vendor instance on `device`, created on first use.
    pub fn instance(&self, device: &Device) -> ClResult<Arc<VMem>> {
        match self.first_instance.get() {
            Some((index, v)) if *index == device.index => return Ok(v.clone()),
            Some(_) => {
                if let Some(v) = self.instances.lock().get(&device.index) {
                    return Ok(v.clone());
                }
            }
            None => {}
        }
        let vctx = &self.context.vendor_context(device).vctx;
        let v = match (&self.image, &self.parent) {
            (Some(image), parent) => {
                // A 1D image buffer is made on its buffer's instance.
                let buffer = parent.as_ref().map(|p| p.instance(device)).transpose()?;
                let desc =
                    image.vendor_desc(buffer.as_ref().map_or(std::ptr::null_mut(), |b| b.raw()));
                vctx.create_image(CL_MEM_READ_WRITE, &image.format, &desc)?
            }
            (None, None) => vctx.create_buffer(CL_MEM_READ_WRITE, self.size)?,
            (None, Some(parent)) => parent.instance(device)?.create_sub_buffer(
                CL_MEM_READ_WRITE,
                self.origin,
                self.size,
            )?,
        };
        // Another thread may have raced us; keep the first instance (this one is
        // released). Made under the map's lock, so only one is ever the first.
        let v = Arc::new(v);
        let mut map = self.instances.lock();
        let (index, first) = (self.first_instance).get_or_init(|| (device.index, v.clone()));
        if *index == device.index {
            return Ok(first.clone());
        }
        Ok(map.entry(device.index).or_insert(v).clone())
    }

    /// The pieces a transfer of `offset..offset+len` of this root moves one at a time:
    /// for an image, each one vendor region of the whole image (its steps always are).
    pub fn transfer_pieces(&self, offset: usize, len: usize) -> Vec<Range<usize>> {
        match &self.image {
            Some(image) if self.parent.is_none() => {
                debug_assert_eq!((offset, len), (0, self.size), "images move whole");
                image.pieces(crate::native::staging::piece_size(len))
            }
            _ => crate::native::staging::pieces(offset, len),
        }
    }

    /// The root's host copy, allocated on first use.
    pub fn host_copy(&self) -> ClResult<*mut u8> {
        let root = self.root();
        let mut host = root.host.lock();
        if host.is_none() {
            *host = Some(alloc_host(root.size)?);
        }
        Ok(host.as_ref().expect("set above").ptr)
    }

    /// Records a map the application has not unmapped yet.
    pub fn add_mapping(&self, mapping: Mapping) {
        self.maps.lock().push(mapping);
        self.map_count.fetch_add(1, Ordering::AcqRel);
    }

    /// `CL_MEM_MAP_COUNT`: maps not yet unmapped.
    pub fn mappings(&self) -> u32 {
        self.map_count.load(Ordering::Acquire)
    }

    pub fn retain_count(&self) -> u32 {
        self.header.count()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // The vendor buffers go before the application's destructor callbacks run.
        self.first_instance.take();
        self.instances.get_mut().clear();
        if self.parent.is_none() {
            // Completions (which drop buffers) may run while the scheduler is locked.
            self.context.forget_buffer(self.id);
        }
        if let Some(HostCopy {
            ptr,
            owned: Some(layout),
        }) = self.host.get_mut().take()
        {
            // SAFETY: allocated by alloc_host with this layout; the buffer is going.
            unsafe { free_host(ptr, layout) };
        }
        let handle = self as *mut Buffer as usize;
        self.destructors.run(handle);
    }
}
