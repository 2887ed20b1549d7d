//! What the calling thread is in the middle of: an application's event callback, or a
//! scheduler's lock, under which some work must not run (it waits until the thread lets
//! go of every such lock).

thread_local! {
    /// How deep this thread is in application event callbacks.
    static IN_CALLBACK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// How many scheduler locks this thread holds (`Scheduling`), and `HELD` when
    /// something waits for it to hold none.
    static SCHEDULING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// What waits for this thread to let go of them (`run_unlocked`), in order.
    static HELD_BACK: std::cell::RefCell<Vec<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// While it lives, this thread holds a context's scheduler lock (`Context::lock_scheduler`,
/// whose guard drops this after the lock): what must not run under it waits until the
/// thread holds none (`run_unlocked`). It keeps a pointer to this thread's
/// `SCHEDULING`: one thread-local look-up a command, not two.
pub struct Scheduling(Option<*const std::cell::Cell<u32>>);

/// `SCHEDULING`'s flag: something waits in `HELD_BACK`.
const HELD: u32 = 1 << 31;

impl Scheduling {
    pub fn begin() -> Scheduling {
        let count = SCHEDULING.try_with(|s| {
            s.set(s.get() + 1);
            s as *const std::cell::Cell<u32>
        });
        Scheduling(count.ok())
    }
}

impl Drop for Scheduling {
    fn drop(&mut self) {
        let Some(count) = self.0 else {
            return;
        };
        // SAFETY: a thread-local `Cell` without a destructor lives as long as its thread,
        // and this guard never leaves the thread (a raw pointer is not `Send`).
        let count = unsafe { &*count };
        let left = count.get() - 1;
        if left & !HELD != 0 {
            return count.set(left);
        }
        count.set(0);
        if left & HELD == 0 {
            return;
        }
        // A callback run here may hold back more (it may plan commands itself).
        loop {
            let due = HELD_BACK
                .try_with(|h| std::mem::take(&mut *h.borrow_mut()))
                .unwrap_or_default();
            if due.is_empty() {
                return;
            }
            for f in due {
                f();
            }
        }
    }
}

/// Runs `f` now, or once this thread lets go of its scheduler locks (`Scheduling`):
/// - the application's event callbacks. A callback may enqueue, which takes that lock,
///   and the lock is not reentrant: run under it, the callback would wait for itself (a
///   command planned while an event whose callback enqueues was found done, as a
///   transfer's bridge asks its vendor, left the program hanging for good);
/// - blocking vendor calls, which wait for the vendor's threads, which may be in such
///   callbacks, waiting for the lock (`Pinned::take` mapping page-locked staging).
pub fn run_unlocked(f: impl FnOnce() + 'static) {
    let held = SCHEDULING
        .try_with(|s| {
            let scheduling = s.get() & !HELD != 0;
            if scheduling {
                s.set(s.get() | HELD);
            }
            scheduling
        })
        .unwrap_or(false);
    if !held {
        return f();
    }
    let mut f = Some(Box::new(f) as Box<dyn FnOnce()>);
    let _ = HELD_BACK.try_with(|h| h.borrow_mut().push(f.take().expect("once")));
    // The thread is going away: nothing could run it later.
    if let Some(f) = f {
        f();
    }
}

/// Whether this thread is running an application event callback.
pub fn in_callback() -> bool {
    IN_CALLBACK.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// While it lives, this thread runs an application event callback.
pub struct InCallback(());

impl InCallback {
    pub fn enter() -> InCallback {
        IN_CALLBACK.with(|d| d.set(d.get() + 1));
        InCallback(())
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        IN_CALLBACK.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An application callback due while the thread holds a scheduler lock runs once it
    /// holds none, in order, and one that plans (holds the lock itself) and makes more
    /// due sees those run after it.
    #[test]
    fn callbacks_wait_for_the_scheduler_lock_to_go() {
        use std::cell::RefCell;
        use std::rc::Rc;
        let ran = Rc::new(RefCell::new(Vec::new()));
        let note = |tag: &'static str| {
            let ran = ran.clone();
            move || ran.borrow_mut().push(tag)
        };
        run_unlocked(note("free"));
        assert_eq!(*ran.borrow(), ["free"], "no lock held: at once");
        {
            let _outer = Scheduling::begin();
            run_unlocked(note("a"));
            {
                let _inner = Scheduling::begin();
                run_unlocked(note("b"));
            }
            assert_eq!(*ran.borrow(), ["free"], "a lock still held: not yet");
            let (ran2, later) = (ran.clone(), note("d"));
            run_unlocked(move || {
                let _planning = Scheduling::begin();
                run_unlocked(later);
                ran2.borrow_mut().push("c");
            });
        }
        assert_eq!(*ran.borrow(), ["free", "a", "b", "c", "d"]);
    }
}
