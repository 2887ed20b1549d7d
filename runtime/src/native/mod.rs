//! Vendor platforms: found from ICD files, `dlopen`ed with `RTLD_LOCAL`, and called only
//! through each vendor object's own dispatch table, never through libOpenCL (which would
//! find MirrorCL again). The objects they hand out are typed in `objects`.

mod objects;
pub mod staging;
pub mod threads;
pub use objects::*;

use crate::cl::*;
use crate::observe::config::Config;
use crate::ClResult;
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// One vendor platform.
pub struct Vendor {
    pub index: u32,
    pub library: PathBuf,
    pub platform: VPlatform,
    pub name: String,
    pub version: String,
    /// The threads its library started while it was loaded and listed its platforms
    /// (see `threads`).
    pub started_threads: Vec<libc::pid_t>,
}

/// Runs a size-then-value OpenCL query and returns the bytes.
pub fn query_bytes(
    mut f: impl FnMut(usize, *mut c_void, *mut usize) -> cl_int,
) -> ClResult<Vec<u8>> {
    let mut size = 0usize;
    crate::check(f(0, std::ptr::null_mut(), &mut size))?;
    let mut bytes = vec![0u8; size];
    if size > 0 {
        crate::check(f(
            size,
            bytes.as_mut_ptr() as *mut c_void,
            std::ptr::null_mut(),
        ))?;
    }
    Ok(bytes)
}

type IcdGetPlatformIds = unsafe extern "C" fn(cl_uint, *mut cl_platform_id, *mut cl_uint) -> cl_int;
type GetExtensionFunctionAddress = unsafe extern "C" fn(*const libc::c_char) -> *mut c_void;

/// The ICD library paths named by the configured vendors directory or file.
pub fn icd_libraries(config: &Config) -> Vec<(PathBuf, String)> {
    let source = Path::new(&config.devices.vendors);
    let mut files: Vec<PathBuf> = if source.is_dir() {
        std::fs::read_dir(source)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "icd"))
                    .collect()
            })
            .unwrap_or_default()
    } else if source.is_file() {
        vec![source.to_path_buf()]
    } else {
        Vec::new()
    };
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let lib = std::fs::read_to_string(&f).ok()?.trim().to_string();
            (!lib.is_empty()).then_some((f, lib))
        })
        .collect()
}

/// Loads every configured vendor platform except MirrorCL itself. Problems with one
/// vendor are logged and that vendor skipped.
pub fn load_vendors(config: &Config, own_marker: &CStr) -> Vec<Vendor> {
    let mut vendors = Vec::new();
    for (icd, lib) in icd_libraries(config) {
        let before = threads::current();
        match load_library(&lib, own_marker) {
            Ok(Some(platforms)) => {
                let started_threads = threads::started_since(&before);
                for platform in platforms {
                    let name = platform.info_string(CL_PLATFORM_NAME).unwrap_or_default();
                    let version = platform
                        .info_string(CL_PLATFORM_VERSION)
                        .unwrap_or_default();
                    let wanted = config.devices.platforms.is_empty()
                        || config
                            .devices
                            .platforms
                            .iter()
                            .any(|p| name.contains(p.as_str()));
                    if wanted {
                        vendors.push(Vendor {
                            index: vendors.len() as u32,
                            library: PathBuf::from(&lib),
                            platform,
                            name,
                            version,
                            started_threads: started_threads.clone(),
                        });
                    }
                }
            }
            Ok(None) => {}
            Err(why) => tracing::warn!("skipping vendor {} ({lib}): {why}", icd.display()),
        }
    }
    vendors
}

/// Opens one ICD library and lists its platforms; `None` when it is MirrorCL itself.
pub fn load_library(lib: &str, own_marker: &CStr) -> Result<Option<Vec<VPlatform>>, String> {
    let path = CString::new(lib).map_err(|_| "path contains NUL".to_string())?;
    // SAFETY: dlopen with a valid C string; RTLD_LOCAL keeps the vendor's symbols out of
    // the global namespace so they never interpose on the application's OpenCL calls.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string or NULL.
        let err = unsafe { libc::dlerror() };
        let msg = if err.is_null() {
            "dlopen failed".to_string()
        } else {
            // SAFETY: non-NULL dlerror result is a valid C string.
            unsafe { CStr::from_ptr(err) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(msg);
    }
    // SAFETY: handle is a live dlopen handle; symbol names are valid C strings.
    let is_self = !unsafe { libc::dlsym(handle, own_marker.as_ptr()) }.is_null();
    if is_self {
        return Ok(None);
    }
    // SAFETY: as above.
    let mut sym = unsafe { libc::dlsym(handle, c"clIcdGetPlatformIDsKHR".as_ptr()) };
    if sym.is_null() {
        // SAFETY: as above.
        let gefa = unsafe { libc::dlsym(handle, c"clGetExtensionFunctionAddress".as_ptr()) };
        if !gefa.is_null() {
            // SAFETY: the symbol has the standard clGetExtensionFunctionAddress type.
            let gefa: GetExtensionFunctionAddress = unsafe { std::mem::transmute(gefa) };
            // SAFETY: valid C string argument.
            sym = unsafe { gefa(c"clIcdGetPlatformIDsKHR".as_ptr()) };
        }
    }
    if sym.is_null() {
        return Err("no clIcdGetPlatformIDsKHR: not an ICD".into());
    }
    // SAFETY: cl_khr_icd defines this signature.
    let get: IcdGetPlatformIds = unsafe { std::mem::transmute(sym) };
    let mut n: cl_uint = 0;
    // SAFETY: standard two-call query.
    let rc = unsafe { get(0, std::ptr::null_mut(), &mut n) };
    if rc != CL_SUCCESS || n == 0 {
        return Err(format!(
            "clIcdGetPlatformIDsKHR returned {rc} with {n} platforms"
        ));
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: buffer of n entries.
    crate::check(unsafe { get(n, ids.as_mut_ptr(), std::ptr::null_mut()) })
        .map_err(|rc| format!("clIcdGetPlatformIDsKHR returned {rc}"))?;
    // The library stays loaded for the life of the process: vendors keep threads.
    Ok(Some(
        ids.into_iter()
            // SAFETY: platforms the vendor just listed.
            .filter_map(|id| unsafe { VPlatform::from_raw(id) })
            .collect(),
    ))
}
