//! The C-library and MPI functions MirrorCL stands in for, so that N replicas of a host
//! program behave as one (`mirrorcl_runtime::cluster::replica` has the rules): `fopen` (files
//! written by rank 0 only), `srand`/`srandom`/`srand48` (rank 0's seed everywhere) and
//! `rand`/`random`/`lrand48`/`mrand48`/`drand48` (vendors' calls kept off the
//! application's streams), and
//! `MPI_Init`/`MPI_Init_thread`/`MPI_Finalize` for a hybrid program seeded before it
//! initialised MPI itself (MirrorCL then owns MPI; the program's calls leave it alone),
//! and `pthread_create`, which names the program's threads so that each has its own
//! tags and history on every rank (`mirrorcl_runtime::cluster::host_threads`).
//! Each finds the real function with `dlsym(RTLD_NEXT)`.

use mirrorcl_runtime::cluster::replica;
use std::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Output as `MIRRORCL_OUTPUT` says, before `main` runs (the environment only: MPI is
/// initialised on the first OpenCL call).
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    crate::guard((), || {
        refuse_other_mpi();
        replica::at_load();
    });
}

/// Ends the process, with one line naming both, when the program has loaded an MPI of
/// the other family than the one this library was built for: calls would reach the wrong
/// library with the wrong types (a crash at best). Before `main`, so nothing has run yet.
fn refuse_other_mpi() {
    let Some(line) = mirrorcl_runtime::cluster::node::family::mismatch() else {
        return;
    };
    // Every rank ends; rank 0 (or a process started without a launcher) says why.
    if replica::launcher_rank().is_none_or(|r| r == 0) {
        let line = format!("{line}\n");
        // SAFETY: writing a live buffer to this process's standard error.
        unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
    // SAFETY: ends the process before anything of it (MPI included) has started.
    unsafe { libc::_exit(1) };
}

/// The next definition of `name` after this library's, looked up once.
fn next(cache: &AtomicUsize, name: &CStr) -> usize {
    let f = cache.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // SAFETY: a NUL-terminated symbol name; RTLD_NEXT searches the libraries after ours.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(f, Ordering::Release);
    f
}

macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static CACHE: AtomicUsize = AtomicUsize::new(0);
        let f = next(&CACHE, $name);
        if f == 0 {
            None
        } else {
            // SAFETY: the symbol has this C signature (the C library's or MPI's).
            Some(unsafe { std::mem::transmute::<usize, $ty>(f) })
        }
    }};
}

type Fopen = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;
type Freopen =
    unsafe extern "C" fn(*const c_char, *const c_char, *mut libc::FILE) -> *mut libc::FILE;

/// The path the program's `fopen` really opens on this rank.
unsafe fn path_for(path: *const c_char, mode: *const c_char) -> *const c_char {
    if path.is_null() || mode.is_null() {
        return path;
    }
    // SAFETY: the caller's NUL-terminated strings.
    let (p, m) = unsafe { (CStr::from_ptr(path), CStr::from_ptr(mode)) };
    if replica::redirect_open(p.to_bytes(), m.to_bytes()) {
        c"/dev/null".as_ptr()
    } else {
        path
    }
}

entry! {
    interpose fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE
        = std::ptr::null_mut(); {
        match real!(c"fopen", Fopen) {
            // SAFETY: forwarded with the caller's arguments (or /dev/null for the path).
            Some(f) => unsafe { f(path_for(path, mode), mode) },
            None => std::ptr::null_mut(),
        }
    }
}

entry! {
    interpose fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE
        = std::ptr::null_mut(); {
        match real!(c"fopen64", Fopen) {
            // SAFETY: as in fopen.
            Some(f) => unsafe { f(path_for(path, mode), mode) },
            None => std::ptr::null_mut(),
        }
    }
}

entry! {
    interpose fn freopen(
        path: *const c_char,
        mode: *const c_char,
        stream: *mut libc::FILE,
    ) -> *mut libc::FILE = std::ptr::null_mut(); {
        match real!(c"freopen", Freopen) {
            // SAFETY: as in fopen.
            Some(f) => unsafe { f(path_for(path, mode), mode, stream) },
            None => std::ptr::null_mut(),
        }
    }
}

/// The random stream of vendor calls (see `replica::inside_mirrorcl`): seeded and drawn
/// by what vendors call while inside MirrorCL, so the application's streams are the
/// same on every rank whatever the vendors do (NVIDIA seeds during builds).
static VENDOR_STREAM: parking_lot::Mutex<u64> = parking_lot::Mutex::new(0x853c_49e6_748f_ea9b);

fn vendor_seed(seed: u64) {
    *VENDOR_STREAM.lock() = seed ^ 0x853c_49e6_748f_ea9b;
}

/// The next 64 random bits of the vendors' stream (splitmix64).
fn vendor_draw() -> u64 {
    let mut state = VENDOR_STREAM.lock();
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seeding function: the application's seed is rank 0's on every rank; a vendor's
/// seeds the vendors' stream only.
macro_rules! seeding {
    ($name:ident, $cname:literal, $seed_ty:ty) => {
        entry! {
            interpose fn $name(seed: $seed_ty) {
                if replica::inside_mirrorcl() {
                    vendor_seed(seed as u64);
                    return;
                }
                let seed = replica::common_seed(seed as u64) as $seed_ty;
                if let Some(f) = real!($cname, unsafe extern "C" fn($seed_ty)) {
                    // SAFETY: the C library's seeding function.
                    unsafe { f(seed) };
                }
            }
        }
    };
}

seeding!(srand, c"srand", c_uint);
seeding!(srandom, c"srandom", c_uint);
seeding!(srand48, c"srand48", c_long);

/// A drawing function: the application's draws come from the C library, a vendor's
/// from the vendors' stream (`$vendor` turns 64 random bits into the function's range).
macro_rules! drawing {
    ($name:ident, $cname:literal -> $ret:ty = $fallback:expr, $vendor:expr) => {
        entry! {
            interpose fn $name() -> $ret = $fallback; {
                if replica::inside_mirrorcl() {
                    return $vendor(vendor_draw());
                }
                match real!($cname, unsafe extern "C" fn() -> $ret) {
                    // SAFETY: the C library's drawing function.
                    Some(f) => unsafe { f() },
                    None => $fallback,
                }
            }
        }
    };
}

// glibc's ranges: rand and random [0, 2^31), lrand48 [0, 2^31), mrand48 [-2^31, 2^31),
// drand48 [0, 1).
drawing!(rand, c"rand" -> c_int = 0, |b: u64| (b >> 33) as c_int);
drawing!(random, c"random" -> c_long = 0, |b: u64| (b >> 33) as c_long);
drawing!(lrand48, c"lrand48" -> c_long = 0, |b: u64| (b >> 33) as c_long);
drawing!(mrand48, c"mrand48" -> c_long = 0, |b: u64| (b >> 32) as u32 as i32 as c_long);
drawing!(drand48, c"drand48" -> f64 = 0.0, |b: u64| (b >> 11) as f64 / (1u64 << 53) as f64);

type MpiInitThread = unsafe extern "C" fn(*mut c_int, *mut c_void, c_int, *mut c_int) -> c_int;

entry! {
    interpose fn MPI_Init_thread(
        argc: *mut c_int,
        argv: *mut c_void,
        required: c_int,
        provided: *mut c_int,
    ) -> c_int = 1; {
        if mirrorcl_runtime::cluster::node::owns_mpi() {
            if !provided.is_null() {
                // SAFETY: the caller's out-pointer; MirrorCL initialised
                // MPI_THREAD_MULTIPLE.
                unsafe { *provided = mirrorcl_runtime::cluster::node::thread_multiple() };
            }
            return 0;
        }
        match real!(c"MPI_Init_thread", MpiInitThread) {
            // SAFETY: forwarded as given.
            Some(f) => unsafe { f(argc, argv, required, provided) },
            None => 1,
        }
    }
}

entry! {
    interpose fn MPI_Init(argc: *mut c_int, argv: *mut c_void) -> c_int = 1; {
        if mirrorcl_runtime::cluster::node::owns_mpi() {
            return 0;
        }
        match real!(c"MPI_Init", unsafe extern "C" fn(*mut c_int, *mut c_void) -> c_int) {
            // SAFETY: forwarded as given.
            Some(f) => unsafe { f(argc, argv) },
            None => 1,
        }
    }
}

entry! {
    /// MirrorCL finalises the MPI it initialised at exit, after its own last transfers.
    interpose fn MPI_Finalize() -> c_int = 1; {
        if mirrorcl_runtime::cluster::node::owns_mpi() {
            return 0;
        }
        mirrorcl_runtime::cluster::node::before_program_finalizes();
        match real!(c"MPI_Finalize", unsafe extern "C" fn() -> c_int) {
            // SAFETY: MPI's own finalisation.
            Some(f) => unsafe { f() },
            None => 1,
        }
    }
}

entry! {
    interpose fn pthread_create(
        thread: *mut libc::pthread_t,
        attr: *const libc::pthread_attr_t,
        routine: mirrorcl_runtime::cluster::host_threads::StartRoutine,
        arg: *mut c_void,
    ) -> c_int = libc::EAGAIN; {
        match real!(c"pthread_create", mirrorcl_runtime::cluster::host_threads::PthreadCreate) {
            // SAFETY: forwarded as given, the new thread named on the way.
            Some(f) => unsafe {
                mirrorcl_runtime::cluster::host_threads::create(f, thread, attr, routine, arg)
            },
            None => libc::EAGAIN,
        }
    }
}
