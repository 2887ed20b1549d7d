//! MirrorCL's own reports (deadlines, divergence, internal errors): written to this
//! rank's original standard error, whatever the program did to its descriptors since
//! (the replica's output set-up, `cluster::replica`, says where that is).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Where MirrorCL's own reports go: a duplicate of this rank's original standard error
/// (2 until one is made), and that file's identity, checked before each report in case
/// the program closed the descriptor and its number now names another file.
static DIAG_FD: AtomicI32 = AtomicI32::new(2);
static DIAG_DEV: AtomicU64 = AtomicU64::new(0);
static DIAG_INO: AtomicU64 = AtomicU64::new(0);
/// The (device, inode) of what `fd` names, if it is open.
pub(crate) fn identity(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: fstat fills a zeroed stat buffer for any descriptor number.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// Writes one of MirrorCL's own reports to this rank's original standard error, whatever
/// became of the program's (to descriptor 2 if the program closed that duplicate).
pub fn diag(text: &str) {
    let mut fd = DIAG_FD.load(Ordering::Relaxed);
    if fd != 2
        && identity(fd)
            != Some((
                DIAG_DEV.load(Ordering::Relaxed),
                DIAG_INO.load(Ordering::Relaxed),
            ))
    {
        fd = 2;
    }
    write_all(fd, text.as_bytes());
}

/// Writes all of `bytes` to `fd`, giving up at the first error (only system calls: the
/// forwarding process uses it after `fork`).
pub(crate) fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writing a live buffer to a file descriptor number.
        let n = unsafe { libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// `eprintln!` for MirrorCL's reports (see [`diag`]).
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::observe::diag::diag(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Reports go to `fd` (an open duplicate of the original standard error).
pub(crate) fn set_diag(fd: RawFd, (dev, ino): (u64, u64)) {
    DIAG_DEV.store(dev, Ordering::Relaxed);
    DIAG_INO.store(ino, Ordering::Relaxed);
    DIAG_FD.store(fd, Ordering::Relaxed);
}
