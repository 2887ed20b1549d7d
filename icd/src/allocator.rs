//! The library's allocator: mimalloc, whose heaps are per thread and whose frees from
//! other threads are lock-free pushes (see the workspace manifest for why). The
//! program's own `malloc` is untouched.
//!
//! Through mimalloc's plain entry points wherever the alignment allows: the `mimalloc`
//! crate sends every allocation through the aligned ones, which cost the enqueuing
//! thread a fifth more instructions per allocation.

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// What every block of mimalloc's is aligned to at least, up to its size
/// (`MI_MAX_ALIGN_SIZE`; size classes are multiples of the word below it).
const PLAIN_ALIGN: usize = 16;

struct MiMalloc;

#[global_allocator]
static ALLOCATOR: MiMalloc = MiMalloc;

/// Whether a plain allocation of `size` bytes satisfies `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// A block for `layout` from mimalloc's `plain` entry point where `plain` allows,
/// otherwise from its `aligned` one.
///
/// # Safety
/// As for `GlobalAlloc::alloc`.
unsafe fn allocate(
    layout: Layout,
    plain_fn: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_fn: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: mimalloc's allocation functions take any size and alignment.
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_fn(layout.size()) as *mut u8
        } else {
            aligned_fn(layout.size(), layout.align()) as *mut u8
        }
    }
}

// SAFETY: every block comes from mimalloc with at least the layout's alignment (the
// plain entry points only where `plain` says their blocks have it), and goes back to it.
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract, passed on.
        unsafe { allocate(layout, mi_malloc, mi_malloc_aligned) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract, passed on.
        unsafe { allocate(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract).
        unsafe { mi_free(ptr as *mut c_void) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract);
        // the alignment is kept as the new size requires.
        unsafe {
            if plain(layout.align(), new_size) {
                mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_asked_for() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 15, 16, 17, 100, 5000] {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: non-zero sizes; freed with the layout they were made with.
                unsafe {
                    let p = ALLOCATOR.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} / {align}"
                    );
                    let q = ALLOCATOR.realloc(p, layout, size * 3);
                    assert!(
                        !q.is_null() && (q as usize).is_multiple_of(align),
                        "{size} / {align}"
                    );
                    ALLOCATOR.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = ALLOCATOR.alloc_zeroed(layout);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    ALLOCATOR.dealloc(z, layout);
                }
            }
        }
    }
}
