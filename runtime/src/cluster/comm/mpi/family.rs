//! Which MPI this library was built for, and whether a process has loaded another one.
//!
//! MPIs come in two binary families: Open MPI (handles are pointers) and MPICH with the
//! MPIs derived from it (Intel MPI, MVAPICH, Cray MPICH: handles are integers, one ABI).
//! A library built for one cannot work in a process that also loaded the other: the two
//! define the same `MPI_*` symbols with different types, and whichever comes first in
//! the lookup order answers both the program's calls and MirrorCL's.

use mpi::ffi;
use std::ffi::{c_char, c_int, CStr};

/// An MPI binary family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    OpenMpi,
    Mpich,
}

impl Family {
    /// The family of the MPI headers this crate was compiled against: MPICH's handles
    /// are `int`, Open MPI's are pointers.
    pub const BUILT_FOR: Family =
        if std::mem::size_of::<ffi::MPI_Comm>() == std::mem::size_of::<c_int>() {
            Family::Mpich
        } else {
            Family::OpenMpi
        };

    pub fn name(self) -> &'static str {
        match self {
            Family::OpenMpi => "Open MPI",
            Family::Mpich => "MPICH",
        }
    }

    /// A function that only this family's library defines (a function: a data symbol may
    /// be copied into the executable, which dladdr would then name).
    fn marker(self) -> &'static CStr {
        match self {
            Family::OpenMpi => c"ompi_mpi_init",
            Family::Mpich => c"MPIR_Err_create_code",
        }
    }

    fn other(self) -> Family {
        match self {
            Family::OpenMpi => Family::Mpich,
            Family::Mpich => Family::OpenMpi,
        }
    }

    /// The family a launcher's `--version` text belongs to, if it says.
    pub fn of_launcher_version(text: &str) -> Option<Family> {
        if text.contains("Open MPI") || text.contains("OpenRTE") {
            Some(Family::OpenMpi)
        } else if text.contains("HYDRA") || text.contains("Intel(R) MPI") {
            Some(Family::Mpich)
        } else {
            None
        }
    }

    /// The file of this process's loaded library that defines this family's marker.
    fn loaded_from(self) -> Option<String> {
        // SAFETY: a NUL-terminated name looked up in the global scope.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.marker().as_ptr()) };
        if sym.is_null() {
            return None;
        }
        // SAFETY: `info` is written by dladdr; its file name is a C string owned by the
        // dynamic linker, valid while the library stays loaded.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(sym, &mut info) == 0 || info.dli_fname.is_null() {
                return Some("an unnamed library".into());
            }
            Some(
                CStr::from_ptr(info.dli_fname)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }
}

/// The MPI library's own description of itself (`MPI_Get_library_version`, which MPI
/// allows before `MPI_Init`), on one line: "Open MPI v4.1.4", "MPICH Version: 4.0.2".
pub fn library_version() -> String {
    // Larger than MPI_MAX_LIBRARY_VERSION_STRING of both families (MPICH: 8192).
    let mut text = vec![0 as c_char; 16384];
    let mut len: c_int = 0;
    // SAFETY: the buffer is at least MPI_MAX_LIBRARY_VERSION_STRING long; `len` is
    // written by the call.
    let rc = unsafe { ffi::MPI_Get_library_version(text.as_mut_ptr(), &mut len) };
    if rc != 0 {
        return format!("{} (version unknown)", Family::BUILT_FOR.name());
    }
    // SAFETY: MPI wrote a NUL-terminated string into the buffer.
    let text = unsafe { CStr::from_ptr(text.as_ptr()) }.to_string_lossy();
    let first = text.lines().next().unwrap_or_default();
    let first = first.split(", package").next().unwrap_or(first);
    first.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line naming both MPIs when this process has loaded the other family's library
/// beside the one MirrorCL was built for (a hybrid program linked against another MPI).
pub fn mismatch() -> Option<String> {
    let ours = Family::BUILT_FOR;
    let theirs = ours.other();
    let their_file = theirs.loaded_from()?;
    let our_file = ours
        .loaded_from()
        .unwrap_or_else(|| "its MPI library".into());
    Some(format!(
        "MirrorCL: this libmirrorcl.so was built for {} ({our_file}), but the program \
         loaded {} ({their_file}); build MirrorCL against the program's MPI (README: \
         \"Site MPI\")",
        ours.name(),
        theirs.name()
    ))
}

/// Whether the calling thread is inside a call of this process's MPI library (a frame of
/// its code is on the stack): MPICH's `MPI_Init` looks for OpenCL devices through hwloc,
/// and the program's own `MPI_Init` then reaches MirrorCL before MPI is up. Walks this
/// thread's stack once; meant for the platform's first call only.
pub fn inside_mpi_call() -> bool {
    // SAFETY: a NUL-terminated name looked up in the global scope.
    let init = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PMPI_Init".as_ptr()) };
    let Some(mpi_base) = object_base(init) else {
        return false;
    };
    let mut frames = [std::ptr::null_mut(); 128];
    // SAFETY: `frames` has room for the count given.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), frames.len() as c_int) };
    frames[..n.max(0) as usize]
        .iter()
        .any(|&f| object_base(f) == Some(mpi_base))
}

/// The load address of the object that holds `addr`.
fn object_base(addr: *const libc::c_void) -> Option<usize> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: `info` is written by dladdr, which only reads the dynamic linker's tables.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        (libc::dladdr(addr, &mut info) != 0).then_some(info.dli_fbase as usize)
    }
}
