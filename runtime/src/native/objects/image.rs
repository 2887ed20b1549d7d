//! Images and samplers: creation, the formats a context supports, and image commands.

use super::*;

reference_counted!(
    /// A vendor sampler.
    VSampler,
    clRetainSampler,
    clReleaseSampler
);

impl VContext {
    /// An image of `format` and `desc`, without a host pointer.
    pub fn create_image(
        &self,
        flags: cl_mem_flags,
        format: &cl_image_format,
        desc: &cl_image_desc,
    ) -> ClResult<VMem> {
        let f = entry!(self, clCreateImage)?;
        created(
            // SAFETY: a live context, a valid format and description, no host pointer.
            |err| unsafe { f(self.raw(), flags, format, desc, null_mut(), err) },
            VMem,
        )
    }

    /// `clGetSupportedImageFormats`: the formats every device of this context supports
    /// for `flags` and `image_type`.
    pub fn supported_image_formats(
        &self,
        flags: cl_mem_flags,
        image_type: cl_mem_object_type,
    ) -> ClResult<Vec<cl_image_format>> {
        let f = entry!(self, clGetSupportedImageFormats)?;
        let mut n: cl_uint = 0;
        // SAFETY: a live context; the count alone.
        crate::check(unsafe { f(self.raw(), flags, image_type, 0, null_mut(), &mut n) })?;
        let empty = cl_image_format {
            image_channel_order: 0,
            image_channel_data_type: 0,
        };
        let mut formats = vec![empty; n as usize];
        if n > 0 {
            // SAFETY: room for `n` formats.
            crate::check(unsafe {
                f(
                    self.raw(),
                    flags,
                    image_type,
                    n,
                    formats.as_mut_ptr(),
                    null_mut(),
                )
            })?;
        }
        Ok(formats)
    }

    pub fn create_sampler(
        &self,
        normalized: cl_bool,
        addressing: cl_addressing_mode,
        filter: cl_filter_mode,
    ) -> ClResult<VSampler> {
        let f = entry!(self, clCreateSampler)?;
        created(
            // SAFETY: a live context and validated modes.
            |err| unsafe { f(self.raw(), normalized, addressing, filter, err) },
            VSampler,
        )
    }
}

impl VKernel {
    /// Sets a `sampler_t` argument.
    ///
    /// # Safety
    /// As [`VKernel::set_arg`]: no other thread sets this kernel's arguments meanwhile.
    pub unsafe fn set_arg_sampler(&self, index: cl_uint, sampler: &VSampler) -> ClResult<()> {
        let value: cl_sampler = sampler.raw();
        // SAFETY: a cl_sampler value of the right size; exclusivity per the contract.
        unsafe {
            self.set_arg(
                index,
                std::mem::size_of::<cl_sampler>(),
                &value as *const cl_sampler as *const c_void,
            )
        }
    }
}

/// One side of an image command: the image and its origin.
pub struct ImageAt<'a> {
    pub image: &'a VMem,
    pub origin: [usize; 3],
}

impl VQueue {
    /// `clEnqueueWriteImage` (`write`) or `clEnqueueReadImage` of `region` at `at`,
    /// from or into `host` laid out with `pitches` (row, slice).
    ///
    /// # Safety
    /// `host` covers the region at those pitches and stays valid (and, for a write,
    /// unchanged) until the command completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read_write_image(
        &self,
        at: ImageAt,
        write: bool,
        blocking: bool,
        region: &[usize; 3],
        (row_pitch, slice_pitch): (usize, usize),
        host: *mut c_void,
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let (image, origin) = (at.image.raw(), at.origin.as_ptr());
        if write {
            let f = entry!(self, clEnqueueWriteImage)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: a validated region of a live image; `host` per the contract.
                unsafe {
                    f(
                        self.raw(),
                        image,
                        blocking as cl_bool,
                        origin,
                        region.as_ptr(),
                        row_pitch,
                        slice_pitch,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        } else {
            let f = entry!(self, clEnqueueReadImage)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: as above.
                unsafe {
                    f(
                        self.raw(),
                        image,
                        blocking as cl_bool,
                        origin,
                        region.as_ptr(),
                        row_pitch,
                        slice_pitch,
                        host,
                        n,
                        list,
                        out,
                    )
                }
            })
        }
    }

    pub fn copy_image(
        &self,
        src: ImageAt,
        dst: ImageAt,
        region: &[usize; 3],
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueCopyImage)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: validated regions of live images of one context.
            unsafe {
                f(
                    self.raw(),
                    src.image.raw(),
                    dst.image.raw(),
                    src.origin.as_ptr(),
                    dst.origin.as_ptr(),
                    region.as_ptr(),
                    n,
                    list,
                    out,
                )
            }
        })
    }

    /// `clEnqueueFillImage` with a colour of four channels (16 bytes).
    pub fn fill_image(
        &self,
        at: ImageAt,
        color: &[u8; 16],
        region: &[usize; 3],
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        let f = entry!(self, clEnqueueFillImage)?;
        Self::enqueue(waits, want_event, |n, list, out| {
            // SAFETY: a validated region of a live image; the vendor copies the colour.
            unsafe {
                f(
                    self.raw(),
                    at.image.raw(),
                    color.as_ptr() as *const c_void,
                    at.origin.as_ptr(),
                    region.as_ptr(),
                    n,
                    list,
                    out,
                )
            }
        })
    }

    /// `clEnqueueCopyImageToBuffer` (`to_buffer`) or `clEnqueueCopyBufferToImage`.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_image_buffer(
        &self,
        image: ImageAt,
        buffer: &VMem,
        offset: usize,
        to_buffer: bool,
        region: &[usize; 3],
        waits: &[cl_event],
        want_event: bool,
    ) -> ClResult<Option<VEvent>> {
        if to_buffer {
            let f = entry!(self, clEnqueueCopyImageToBuffer)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: a validated region and range of live objects of one context.
                unsafe {
                    f(
                        self.raw(),
                        image.image.raw(),
                        buffer.raw(),
                        image.origin.as_ptr(),
                        region.as_ptr(),
                        offset,
                        n,
                        list,
                        out,
                    )
                }
            })
        } else {
            let f = entry!(self, clEnqueueCopyBufferToImage)?;
            Self::enqueue(waits, want_event, |n, list, out| {
                // SAFETY: as above.
                unsafe {
                    f(
                        self.raw(),
                        buffer.raw(),
                        image.image.raw(),
                        offset,
                        image.origin.as_ptr(),
                        region.as_ptr(),
                        n,
                        list,
                        out,
                    )
                }
            })
        }
    }
}
