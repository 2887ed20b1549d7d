//! One issuer thread per actual device: the only thread that enqueues to that device's
//! vendor queues. Commands arrive in schedule order over a channel; after each batch the
//! vendor queues it touched are flushed, so bursts are submitted together.

use crate::vendor::V;
use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// State an issuer job may use: which vendor queues need a flush at the end of the batch.
#[derive(Default)]
pub struct IssuerState {
    dirty: Vec<V>,
}

impl IssuerState {
    pub fn touched(&mut self, queue: V) {
        if !self.dirty.contains(&queue) {
            self.dirty.push(queue);
        }
    }

    /// Flushes the vendor queues touched so far.
    pub fn flush(&mut self) {
        for q in self.dirty.drain(..) {
            if let Ok(f) = vfn!(q.0, clFlush) {
                // SAFETY: a live vendor queue this issuer enqueued to.
                unsafe { f(q.0) };
            }
        }
    }
}

pub type Job = Box<dyn FnOnce(&mut IssuerState) + Send>;

pub struct Issuer {
    tx: Sender<Job>,
}

impl Issuer {
    pub fn spawn(name: String) -> Issuer {
        let (tx, rx) = unbounded::<Job>();
        let spin = crate::platform::platform().config.spin();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(rx, spin))
            .expect("spawning an issuer thread");
        Issuer { tx }
    }

    pub fn send(&self, job: Job) {
        // The issuer only stops when the process exits, so the channel stays open.
        let _ = self.tx.send(job);
    }
}

fn run(rx: Receiver<Job>, spin: Duration) {
    let mut state = IssuerState::default();
    loop {
        let job = match next_job(&rx, spin) {
            Some(job) => job,
            None => return,
        };
        run_job(job, &mut state);
        while let Ok(job) = rx.try_recv() {
            run_job(job, &mut state);
        }
        state.flush();
    }
}

fn run_job(job: Job, state: &mut IssuerState) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(state))).is_err() {
        tracing::error!("an issuer job panicked; its command was failed");
    }
}

/// Spins for `spin` before parking on the channel.
fn next_job(rx: &Receiver<Job>, spin: Duration) -> Option<Job> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        if start.elapsed() >= spin {
            return rx.recv().ok();
        }
        std::hint::spin_loop();
    }
}

/// Logging to standard error, filtered by `MIRRORCL_LOG` (e.g. `MIRRORCL_LOG=debug`);
/// warnings and errors by default.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MIRRORCL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
