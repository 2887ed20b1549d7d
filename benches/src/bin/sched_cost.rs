//! The scheduler alone on the command stream of `benches/apps/cg.c` (four devices of one
//! rank, buffers attached to them, ghost rows copied between neighbours): nanoseconds
//! per command. For instructions, run it under callgrind at two lengths and take the
//! difference (`benches/cost-breakdown.py`).
//!
//!     cargo run --release -p mirrorcl-benches --bin mirrorcl-sched-cost [ITERATIONS]
use mirrorcl_scheduler::{Access, DeviceDesc, Location, Mode, Scheduler};
use std::sync::Arc;

fn acc(buffer: u64, range: std::ops::Range<u64>, mode: Mode, pass_through: bool) -> Access {
    Access {
        buffer,
        range,
        mode,
        aliased: false,
        pass_through,
    }
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .map_or(200_000, |a| a.parse().unwrap());
    let mut s: Scheduler<Arc<u64>> = Scheduler::with_done(|_| false);
    let ndev = 4u32;
    for d in 0..ndev {
        s.add_device(
            d,
            DeviceDesc {
                owner: 0,
                group: 0,
                ranges_apart: false,
            },
        );
    }
    let (n, rows) = (128u64, 32u64);
    let row = n * 8;
    let len = rows * n * 8;
    // x, r, q, p (with ghost rows), part per device, attached to it.
    let mut bufs = Vec::new();
    for d in 0..ndev {
        let ids: Vec<u64> = [len, len, len, len + 2 * row, 16 * 8]
            .iter()
            .map(|&size| s.create_buffer(size, Some(Location::Host)))
            .collect();
        for &b in &ids {
            s.attach(b, d);
        }
        bufs.push(ids);
    }
    // One iteration of cg.c, phase by phase as it enqueues them: (device, accesses).
    let plen = len + 2 * row;
    let whole = |b: u64, size: u64, mode: Mode| acc(b, 0..size, mode, false);
    let buffers = |d: u32| -> [u64; 5] { bufs[d as usize][..].try_into().expect("five") };
    let mut iteration: Vec<(u32, Vec<Access>)> = Vec::new();
    // Ghost rows of p from the neighbours, on the receiving device's queue.
    for d in 0..ndev - 1 {
        let (p0, p1) = (buffers(d)[3], buffers(d + 1)[3]);
        let lo = rows * row;
        iteration.push((
            d + 1,
            vec![
                acc(p0, lo..lo + row, Mode::Read, true),
                acc(p1, 0..row, Mode::Write, false),
            ],
        ));
        iteration.push((
            d,
            vec![
                acc(p1, row..2 * row, Mode::Read, true),
                acc(p0, lo + row..lo + 2 * row, Mode::Write, false),
            ],
        ));
    }
    // q = A p; then p.q and r.r, each partial sums and their read (`device_dot`).
    let dot = |iteration: &mut Vec<(u32, Vec<Access>)>, a: usize, b: usize, a_size: u64| {
        for d in 0..ndev {
            let bs = buffers(d);
            iteration.push((
                d,
                vec![
                    whole(bs[4], 128, Mode::ReadWrite),
                    whole(bs[a], a_size, Mode::Read),
                    whole(bs[b], len, Mode::Read),
                ],
            ));
            iteration.push((d, vec![whole(bs[4], 128, Mode::Read)]));
        }
    };
    for d in 0..ndev {
        let [_, _, q, p, _] = buffers(d);
        iteration.push((
            d,
            vec![whole(q, len, Mode::ReadWrite), whole(p, plen, Mode::Read)],
        ));
    }
    dot(&mut iteration, 3, 2, plen);
    for d in 0..ndev {
        let [x, r, q, p, _] = buffers(d);
        iteration.push((
            d,
            vec![
                whole(x, len, Mode::ReadWrite),
                whole(r, len, Mode::ReadWrite),
                whole(p, plen, Mode::Read),
                whole(q, len, Mode::Read),
            ],
        ));
    }
    dot(&mut iteration, 1, 1, len);
    for d in 0..ndev {
        let [_, r, _, p, _] = buffers(d);
        iteration.push((
            d,
            vec![whole(p, plen, Mode::ReadWrite), whole(r, len, Mode::Read)],
        ));
    }
    let mut next = 0u64;
    let start = std::time::Instant::now();
    for _ in 0..iters {
        for (d, accesses) in &iteration {
            next += 1;
            let token = Arc::new(next);
            let stream = 1 + *d as u64;
            let deps = s.schedule(Location::Device(*d), stream, accesses, &token, |_, _| {
                (u64::MAX, Arc::new(0))
            });
            std::hint::black_box(deps);
        }
    }
    let commands = next;
    let ns = start.elapsed().as_nanos() as f64 / commands as f64;
    println!("{commands} commands, {ns:.1} ns per command");
}
