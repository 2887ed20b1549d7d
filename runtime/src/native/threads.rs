//! The compute threads of a CPU vendor (PoCL's workers) run under `SCHED_BATCH`.
//!
//! A CPU device's workers sleep when their queue runs dry, and each enqueue wakes them.
//! On a node with more busy threads than cores, a woken worker then takes the core of
//! the thread that enqueued (Linux preempts on wake-up), and that thread cannot enqueue
//! the next command until the kernel is done: CG on four PoCL devices and two cores had
//! the program's thread preempted four times an iteration through MirrorCL, almost never
//! natively. A `SCHED_BATCH` thread does not preempt on wake-up; it takes a free core, or
//! the next one to fall free, and otherwise shares the cores as before. It changes
//! nothing where cores are free, and nothing of the program's own threads, unless the
//! program starts one on another thread during MirrorCL's start-up (the first OpenCL
//! call), which cannot be told from the vendor's.

/// This process's thread ids now, sorted.
pub fn current() -> Vec<libc::pid_t> {
    let mut ids: Vec<libc::pid_t> = std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// The threads started since `before` (a sorted list from [`current`]). None when
/// `before` could not be read (it holds the caller at least): every thread would look new.
pub fn started_since(before: &[libc::pid_t]) -> Vec<libc::pid_t> {
    if before.is_empty() {
        return Vec::new();
    }
    current()
        .into_iter()
        .filter(|tid| before.binary_search(tid).is_err())
        .collect()
}

/// Puts `threads` of this process, started by `vendor`, under `SCHED_BATCH`; answers
/// how many it moved.
pub fn make_batch(vendor: &str, threads: &[libc::pid_t]) -> usize {
    let mut moved = 0;
    for &tid in threads {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `tid` is a thread of this process (it may have ended since: then the
        // call fails with ESRCH and nothing happens); `param` is a valid block.
        let rc = unsafe { libc::sched_setscheduler(tid, libc::SCHED_BATCH, &param) };
        if rc == 0 {
            moved += 1;
        } else {
            let why = std::io::Error::last_os_error();
            tracing::debug!("{vendor}: thread {tid}: SCHED_BATCH refused: {why}");
        }
    }
    tracing::debug!("{vendor}: {moved} of {} new threads batch", threads.len());
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_started_since_goes_batch() {
        let before = current();
        assert!(before.contains(&crate::observe::os_id()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(crate::observe::os_id()).unwrap();
            done_rx.recv().unwrap();
            // SAFETY: reads the calling thread's policy.
            unsafe { libc::sched_getscheduler(0) }
        });
        let tid = rx.recv().unwrap();
        assert!(started_since(&before).contains(&tid));
        assert_eq!(make_batch("test", &[tid]), 1);
        done_tx.send(()).unwrap();
        assert_eq!(worker.join().unwrap(), libc::SCHED_BATCH, "thread {tid}");
        // SAFETY: reads the calling thread's policy.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
    }
}
