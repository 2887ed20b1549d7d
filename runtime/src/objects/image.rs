//! Images (OpenCL 1.2 §5.3): what MirrorCL knows of an image's shape, and how its bytes
//! are laid out in the host copy.
//!
//! An image is a [`Buffer`](crate::objects::memory::Buffer) with an [`Image`] description: the
//! scheduler tracks its host copy's bytes like a buffer's, and every command that touches
//! an image touches all of it (a region of an image is not a range of bytes), so its
//! valid copies are always whole. A transfer moves the image in pieces that are each one
//! vendor region (whole slices, or rows of one slice), read and written with the host
//! copy's pitches.
//!
//! Coordinates: the API's origins and regions (a 1D image array's second coordinate is
//! its layer) map to a layout of rows and slices (a 1D array's layers are slices), where
//! a byte offset is `x * element_size + y * row_pitch + z * slice_pitch`.

use crate::cl::*;
use crate::objects::context::Context;
use crate::ClResult;
use std::ops::Range;

/// `clGetSupportedImageFormats`: the formats every device of the context supports for
/// these access flags and this type, the same on every rank. Each rank asks its vendor
/// contexts (each answers for its devices); in a cluster the ranks then exchange their
/// lists (a collective the first time per flags, type and host thread) and keep the formats on all.
pub fn supported_formats(
    ctx: &Context,
    flags: cl_mem_flags,
    image_type: cl_mem_object_type,
) -> ClResult<Vec<cl_image_format>> {
    let access = match flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY) {
        0 => CL_MEM_READ_WRITE,
        a => a,
    };
    let key = (access, image_type, crate::cluster::host_threads::slot());
    if let Some(known) = ctx.image_formats.lock().get(&key) {
        return Ok(known.clone());
    }
    let pairs = |list: &[cl_image_format]| -> Vec<u8> {
        list.iter()
            .flat_map(|f| {
                let mut b = f.image_channel_order.to_le_bytes().to_vec();
                b.extend_from_slice(&f.image_channel_data_type.to_le_bytes());
                b
            })
            .collect()
    };
    let mut mine: Option<FormatList> = None;
    for vc in &ctx.vendor_contexts {
        let theirs = vc.vctx.supported_image_formats(access, image_type);
        mine = Some(intersect(mine, theirs));
    }
    let node = crate::cluster::node::node();
    let formats = if node.is_cluster() {
        let answer = crate::cluster::wire::OwnerAnswer(mine.map(|m| m.map(|l| pairs(&l))));
        let mut agreed: Option<FormatList> = None;
        for rank in node.exchange(&answer) {
            let Some(theirs) = rank.0 else { continue };
            let theirs = theirs.map(|bytes| {
                bytes
                    .chunks_exact(8)
                    .map(|c| cl_image_format {
                        image_channel_order: u32::from_le_bytes(c[..4].try_into().expect("4")),
                        image_channel_data_type: u32::from_le_bytes(c[4..].try_into().expect("4")),
                    })
                    .collect::<Vec<_>>()
            });
            agreed = Some(intersect(agreed, theirs));
        }
        agreed
    } else {
        mine
    };
    let formats = formats.unwrap_or(Ok(Vec::new()))?;
    ctx.image_formats.lock().insert(key, formats.clone());
    Ok(formats)
}

type FormatList = ClResult<Vec<cl_image_format>>;

/// The formats of `so_far` (in its order) that `more` lists too; the first error wins.
fn intersect(so_far: Option<FormatList>, more: FormatList) -> FormatList {
    match (so_far, more) {
        (None, more) => more,
        (Some(Ok(list)), Ok(more)) => Ok(list
            .into_iter()
            .filter(|f| more.iter().any(|g| same_format(f, g)))
            .collect()),
        (Some(Err(rc)), _) | (_, Err(rc)) => Err(rc),
    }
}

pub fn same_format(a: &cl_image_format, b: &cl_image_format) -> bool {
    a.image_channel_order == b.image_channel_order
        && a.image_channel_data_type == b.image_channel_data_type
}

/// The channel orders and types of OpenCL 1.2 (and the packed types' fixed sizes).
#[allow(non_upper_case_globals)] // the headers' CL_Rx, CL_RGx, CL_RGBx
fn channels(order: cl_channel_order) -> Option<usize> {
    Some(match order {
        CL_R | CL_A | CL_Rx | CL_INTENSITY | CL_LUMINANCE => 1,
        CL_RG | CL_RA | CL_RGx => 2,
        CL_RGB | CL_RGBx => 3,
        CL_RGBA | CL_BGRA | CL_ARGB => 4,
        _ => return None,
    })
}

fn channel_size(data_type: cl_channel_type) -> Option<usize> {
    Some(match data_type {
        CL_SNORM_INT8 | CL_UNORM_INT8 | CL_SIGNED_INT8 | CL_UNSIGNED_INT8 => 1,
        CL_SNORM_INT16 | CL_UNORM_INT16 | CL_SIGNED_INT16 | CL_UNSIGNED_INT16 | CL_HALF_FLOAT => 2,
        CL_SIGNED_INT32 | CL_UNSIGNED_INT32 | CL_FLOAT => 4,
        _ => return None,
    })
}

/// The size of one element of `format`; `CL_INVALID_IMAGE_FORMAT_DESCRIPTOR` for an
/// order, a type or a pairing OpenCL 1.2 (§5.3.1.1) does not define.
#[allow(non_upper_case_globals)]
pub fn element_size(format: &cl_image_format) -> ClResult<usize> {
    let (order, data_type) = (format.image_channel_order, format.image_channel_data_type);
    let n = channels(order).ok_or(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)?;
    let packed = match data_type {
        CL_UNORM_SHORT_565 | CL_UNORM_SHORT_555 => Some(2),
        CL_UNORM_INT_101010 => Some(4),
        _ => None,
    };
    let allowed = match order {
        CL_INTENSITY | CL_LUMINANCE => matches!(
            data_type,
            CL_UNORM_INT8
                | CL_UNORM_INT16
                | CL_SNORM_INT8
                | CL_SNORM_INT16
                | CL_HALF_FLOAT
                | CL_FLOAT
        ),
        CL_RGB | CL_RGBx => packed.is_some(),
        CL_BGRA | CL_ARGB => matches!(
            data_type,
            CL_UNORM_INT8 | CL_SNORM_INT8 | CL_SIGNED_INT8 | CL_UNSIGNED_INT8
        ),
        _ => packed.is_none(),
    };
    if !allowed {
        return Err(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
    }
    match packed {
        Some(size) => Ok(size),
        None => Ok(n * channel_size(data_type).ok_or(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)?),
    }
}

/// An image's shape and its host copy's layout. The same on every rank.
#[derive(Clone, Copy, Debug)]
pub struct Image {
    pub format: cl_image_format,
    pub image_type: cl_mem_object_type,
    pub width: usize,
    /// 1 where the type has no height (and likewise below).
    pub height: usize,
    pub depth: usize,
    pub array_size: usize,
    pub element_size: usize,
    /// The host copy's pitches: the application's for `CL_MEM_USE_HOST_PTR`, else packed.
    /// A 1D array's slice pitch is the distance between its layers.
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

impl Image {
    /// Validates `desc` against `format` (§5.3.1.2) and lays the host copy out with the
    /// application's pitches when it lends or copies its memory (`with_host_ptr`).
    /// `CL_INVALID_IMAGE_DESCRIPTOR` for a type or size fields 1.2 does not allow,
    /// `CL_INVALID_IMAGE_SIZE` for a zero size, `CL_INVALID_IMAGE_DESCRIPTOR` for pitches
    /// given without a host pointer, `CL_INVALID_IMAGE_DESCRIPTOR` for pitches too small
    /// or not a multiple of the element size.
    pub fn describe(
        format: &cl_image_format,
        desc: &cl_image_desc,
        with_host_ptr: bool,
    ) -> ClResult<Image> {
        let element_size = element_size(format)?;
        let (width, height, depth, array_size) = match desc.image_type {
            CL_MEM_OBJECT_IMAGE1D | CL_MEM_OBJECT_IMAGE1D_BUFFER => (desc.image_width, 1, 1, 1),
            CL_MEM_OBJECT_IMAGE1D_ARRAY => (desc.image_width, 1, 1, desc.image_array_size),
            CL_MEM_OBJECT_IMAGE2D => (desc.image_width, desc.image_height, 1, 1),
            CL_MEM_OBJECT_IMAGE2D_ARRAY => (
                desc.image_width,
                desc.image_height,
                1,
                desc.image_array_size,
            ),
            CL_MEM_OBJECT_IMAGE3D => (desc.image_width, desc.image_height, desc.image_depth, 1),
            _ => return Err(CL_INVALID_IMAGE_DESCRIPTOR),
        };
        if width == 0 || height == 0 || depth == 0 || array_size == 0 {
            return Err(CL_INVALID_IMAGE_SIZE);
        }
        if desc.num_mip_levels != 0 || desc.num_samples != 0 {
            return Err(CL_INVALID_IMAGE_DESCRIPTOR);
        }
        let has_buffer = !desc.buffer.is_null();
        if has_buffer != (desc.image_type == CL_MEM_OBJECT_IMAGE1D_BUFFER) {
            return Err(CL_INVALID_IMAGE_DESCRIPTOR);
        }
        let packed_row = width
            .checked_mul(element_size)
            .ok_or(CL_INVALID_IMAGE_SIZE)?;
        // A 1D image buffer lies packed in its buffer: a pitch given for it (the
        // conformance suite gives the row's size; vendors accept it) is not used.
        let from_buffer = desc.image_type == CL_MEM_OBJECT_IMAGE1D_BUFFER;
        if !with_host_ptr
            && !from_buffer
            && (desc.image_row_pitch != 0 || desc.image_slice_pitch != 0)
        {
            return Err(CL_INVALID_IMAGE_DESCRIPTOR);
        }
        let row_pitch = match desc.image_row_pitch {
            _ if from_buffer => packed_row,
            0 => packed_row,
            p if p < packed_row || p % element_size != 0 => {
                return Err(CL_INVALID_IMAGE_DESCRIPTOR)
            }
            p => p,
        };
        let (slices, rows) = match desc.image_type {
            CL_MEM_OBJECT_IMAGE1D_ARRAY => (array_size, 1),
            CL_MEM_OBJECT_IMAGE2D_ARRAY => (array_size, height),
            _ => (depth, height),
        };
        let packed_slice = row_pitch.checked_mul(rows).ok_or(CL_INVALID_IMAGE_SIZE)?;
        let has_slices = matches!(
            desc.image_type,
            CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE1D_ARRAY
        );
        let slice_pitch = match desc.image_slice_pitch {
            0 => packed_slice,
            p if !has_slices || p < packed_slice || p % row_pitch != 0 => {
                return Err(CL_INVALID_IMAGE_DESCRIPTOR)
            }
            p => p,
        };
        slice_pitch
            .checked_mul(slices)
            .ok_or(CL_INVALID_IMAGE_SIZE)?;
        Ok(Image {
            format: *format,
            image_type: desc.image_type,
            width,
            height,
            depth,
            array_size,
            element_size,
            row_pitch,
            slice_pitch,
        })
    }

    /// The same image with the host copy packed (for `CL_MEM_COPY_HOST_PTR`, whose
    /// pitches only say how to read the application's memory).
    pub fn packed(&self) -> Image {
        let row_pitch = self.width * self.element_size;
        let rows = if self.is_1d_array() { 1 } else { self.height };
        Image {
            row_pitch,
            slice_pitch: row_pitch * rows,
            ..*self
        }
    }

    fn is_1d_array(&self) -> bool {
        self.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY
    }

    /// The size in the API's coordinates: what an origin plus a region may reach.
    pub fn extent(&self) -> [usize; 3] {
        match self.image_type {
            CL_MEM_OBJECT_IMAGE1D_ARRAY => [self.width, self.array_size, 1],
            CL_MEM_OBJECT_IMAGE2D_ARRAY => [self.width, self.height, self.array_size],
            _ => [self.width, self.height, self.depth],
        }
    }

    /// API coordinates to the layout's rows and slices, and back (the same swap).
    fn layout(&self, v: [usize; 3]) -> [usize; 3] {
        if self.is_1d_array() {
            [v[0], v[2], v[1]]
        } else {
            v
        }
    }

    /// The host copy's size: every slice at its pitch.
    pub fn host_bytes(&self) -> usize {
        self.slice_pitch * self.layout(self.extent())[2]
    }

    /// Where the API coordinates `origin` lie in the host copy.
    pub fn host_offset(&self, origin: [usize; 3]) -> usize {
        let [x, y, z] = self.layout(origin);
        x * self.element_size + y * self.row_pitch + z * self.slice_pitch
    }

    /// `CL_INVALID_VALUE` unless `origin` and `region` lie inside the image, with the
    /// unused coordinates of its type 0 (origin) and 1 (region) (§5.3.3).
    pub fn check_region(&self, origin: [usize; 3], region: [usize; 3]) -> ClResult<()> {
        let extent = self.extent();
        for i in 0..3 {
            let end = origin[i].checked_add(region[i]).ok_or(CL_INVALID_VALUE)?;
            if region[i] == 0 || end > extent[i] {
                return Err(CL_INVALID_VALUE);
            }
        }
        Ok(())
    }

    /// Whether `origin`/`region` is the whole image.
    pub fn covers(&self, origin: [usize; 3], region: [usize; 3]) -> bool {
        origin == [0; 3] && region == self.extent()
    }

    /// The pitches the vendor is given for host memory laid out like the host copy:
    /// 1D and 2D images take no slice pitch.
    pub fn host_pitches(&self) -> (usize, usize) {
        let has_slices = matches!(
            self.image_type,
            CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE1D_ARRAY
        );
        (
            self.row_pitch,
            if has_slices { self.slice_pitch } else { 0 },
        )
    }

    /// The byte ranges of the host copy a transfer moves one at a time: each one vendor
    /// region (see [`Image::region_of`]), whole slices where a slice fits in `max`
    /// bytes, else rows of one slice (at least one row).
    pub fn pieces(&self, max: usize) -> Vec<Range<usize>> {
        let [w, h, d] = self.layout(self.extent());
        let row = w * self.element_size;
        let end_of = |z: usize, y: usize| z * self.slice_pitch + y * self.row_pitch + row;
        let mut out = Vec::new();
        if h * self.row_pitch <= max {
            let per = (max / self.slice_pitch).max(1);
            let mut z = 0;
            while z < d {
                let last = (z + per).min(d) - 1;
                out.push(z * self.slice_pitch..end_of(last, h - 1));
                z = last + 1;
            }
        } else {
            let per = (max / self.row_pitch).max(1);
            for z in 0..d {
                let mut y = 0;
                while y < h {
                    let last = (y + per).min(h) - 1;
                    out.push(z * self.slice_pitch + y * self.row_pitch..end_of(z, last));
                    y = last + 1;
                }
            }
        }
        out
    }

    /// The API origin and region of a piece from [`Image::pieces`] (or of the whole
    /// image's bytes).
    pub fn region_of(&self, piece: &Range<usize>) -> ([usize; 3], [usize; 3]) {
        let [w, h, _] = self.layout(self.extent());
        let at = |offset: usize| {
            let z = offset / self.slice_pitch;
            (z, (offset - z * self.slice_pitch) / self.row_pitch)
        };
        let (z0, y0) = at(piece.start);
        let (z1, y1) = at(piece.end - 1);
        let (origin, region) = if z1 > z0 {
            ([0, 0, z0], [w, h, z1 - z0 + 1])
        } else {
            ([0, y0, z0], [w, y1 - y0 + 1, 1])
        };
        (self.layout(origin), self.layout(region))
    }

    /// The description a vendor image is created with: the shape alone (the vendor lays
    /// out its own memory), with `buffer` for a 1D image buffer.
    pub fn vendor_desc(&self, buffer: cl_mem) -> cl_image_desc {
        let extent = self.extent();
        cl_image_desc {
            image_type: self.image_type,
            image_width: self.width,
            image_height: if matches!(
                self.image_type,
                CL_MEM_OBJECT_IMAGE2D | CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE3D
            ) {
                self.height
            } else {
                0
            },
            image_depth: if self.image_type == CL_MEM_OBJECT_IMAGE3D {
                extent[2]
            } else {
                0
            },
            image_array_size: if self.is_1d_array()
                || self.image_type == CL_MEM_OBJECT_IMAGE2D_ARRAY
            {
                self.array_size
            } else {
                0
            },
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer,
        }
    }

    /// Bytes of a region of elements, packed.
    pub fn region_bytes(&self, region: [usize; 3]) -> usize {
        region[0] * region[1] * region[2] * self.element_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(image_type: cl_mem_object_type, w: usize, h: usize, d: usize, a: usize) -> Image {
        let format = cl_image_format {
            image_channel_order: CL_RGBA,
            image_channel_data_type: CL_UNSIGNED_INT8,
        };
        let desc = cl_image_desc {
            image_type,
            image_width: w,
            image_height: h,
            image_depth: d,
            image_array_size: a,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: std::ptr::null_mut(),
        };
        Image::describe(&format, &desc, false).unwrap()
    }

    /// Every element lies in exactly one piece, and each piece is one region.
    fn check_pieces(img: &Image, max: usize) {
        let pieces = img.pieces(max);
        let extent = img.extent();
        let mut seen = vec![0u8; extent.iter().product()];
        for p in &pieces {
            assert!(p.len() <= max.max(img.width * img.element_size), "{p:?}");
            let (origin, region) = img.region_of(p);
            img.check_region(origin, region).unwrap();
            assert_eq!(img.host_offset(origin), p.start);
            for z in 0..region[2] {
                for y in 0..region[1] {
                    for x in 0..region[0] {
                        let (x, y, z) = (origin[0] + x, origin[1] + y, origin[2] + z);
                        seen[(z * extent[1] + y) * extent[0] + x] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{:?}", img.image_type);
        let (o, r) = img.region_of(&(0..img.host_bytes()));
        assert!(img.covers(o, r));
    }

    #[test]
    fn pieces_cover_every_element_once() {
        for max in [4, 64, 100, 4096, 1 << 20] {
            check_pieces(&image(CL_MEM_OBJECT_IMAGE1D, 37, 0, 0, 0), max);
            check_pieces(&image(CL_MEM_OBJECT_IMAGE1D_ARRAY, 5, 0, 0, 7), max);
            check_pieces(&image(CL_MEM_OBJECT_IMAGE2D, 9, 11, 0, 0), max);
            check_pieces(&image(CL_MEM_OBJECT_IMAGE2D_ARRAY, 3, 4, 0, 5), max);
            check_pieces(&image(CL_MEM_OBJECT_IMAGE3D, 6, 5, 4, 0), max);
        }
    }

    #[test]
    fn formats_and_descriptors_are_checked() {
        let f = |o, t| cl_image_format {
            image_channel_order: o,
            image_channel_data_type: t,
        };
        assert_eq!(element_size(&f(CL_RGBA, CL_FLOAT)), Ok(16));
        assert_eq!(element_size(&f(CL_RGB, CL_UNORM_SHORT_565)), Ok(2));
        assert_eq!(element_size(&f(CL_R, CL_UNSIGNED_INT32)), Ok(4));
        for bad in [
            f(CL_RGB, CL_FLOAT),
            f(CL_BGRA, CL_FLOAT),
            f(CL_INTENSITY, CL_UNSIGNED_INT8),
            f(CL_RGBA, CL_UNORM_INT_101010),
            f(0, CL_FLOAT),
            f(CL_RGBA, 0),
        ] {
            assert_eq!(element_size(&bad), Err(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR));
        }
        let img = image(CL_MEM_OBJECT_IMAGE1D_ARRAY, 5, 0, 0, 7);
        assert_eq!(img.extent(), [5, 7, 1]);
        assert_eq!(img.host_offset([2, 3, 0]), 3 * 20 + 8);
        assert_eq!(
            img.check_region([0, 6, 0], [5, 2, 1]),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(
            img.check_region([0, 0, 0], [5, 7, 0]),
            Err(CL_INVALID_VALUE)
        );
    }
}
