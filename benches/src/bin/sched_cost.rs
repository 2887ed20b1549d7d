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
    let stream = |d: u32| 1 + d as u64;
    let mut next = 0u64;
    let mut commands = 0u64;
    let mut run = |s: &mut Scheduler<Arc<u64>>, d: u32, a: &[Access]| {
        next += 1;
        commands += 1;
        let token = Arc::new(next);
        let deps = s.schedule(Location::Device(d), stream(d), a, &token, |_, _| {
            (u64::MAX, Arc::new(0))
        });
        std::hint::black_box(deps);
    };
    let start = std::time::Instant::now();
    for _ in 0..iters {
        for d in 0..ndev as usize - 1 {
            let (p0, p1) = (bufs[d][3], bufs[d + 1][3]);
            let lo = rows * row;
            run(
                &mut s,
                d as u32 + 1,
                &[
                    acc(p0, lo..lo + row, Mode::Read, true),
                    acc(p1, 0..row, Mode::Write, false),
                ],
            );
            run(
                &mut s,
                d as u32,
                &[
                    acc(p1, row..2 * row, Mode::Read, true),
                    acc(p0, lo + row..lo + 2 * row, Mode::Write, false),
                ],
            );
        }
        for d in 0..ndev {
            let [x, r, q, p, part] = bufs[d as usize][..] else {
                unreachable!()
            };
            let plen = len + 2 * row;
            run(
                &mut s,
                d,
                &[
                    acc(q, 0..len, Mode::ReadWrite, false),
                    acc(p, 0..plen, Mode::Read, false),
                ],
            );
            run(
                &mut s,
                d,
                &[
                    acc(part, 0..128, Mode::ReadWrite, false),
                    acc(p, 0..plen, Mode::Read, false),
                    acc(q, 0..len, Mode::Read, false),
                ],
            );
            run(&mut s, d, &[acc(part, 0..128, Mode::Read, false)]);
            run(
                &mut s,
                d,
                &[
                    acc(x, 0..len, Mode::ReadWrite, false),
                    acc(r, 0..len, Mode::ReadWrite, false),
                    acc(p, 0..plen, Mode::Read, false),
                    acc(q, 0..len, Mode::Read, false),
                ],
            );
            run(
                &mut s,
                d,
                &[
                    acc(part, 0..128, Mode::ReadWrite, false),
                    acc(r, 0..len, Mode::Read, false),
                    acc(r, 0..len, Mode::Read, false),
                ],
            );
            run(&mut s, d, &[acc(part, 0..128, Mode::Read, false)]);
            run(
                &mut s,
                d,
                &[
                    acc(p, 0..plen, Mode::ReadWrite, false),
                    acc(r, 0..len, Mode::Read, false),
                ],
            );
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / commands as f64;
    println!("{commands} commands, {ns:.1} ns per command");
}
