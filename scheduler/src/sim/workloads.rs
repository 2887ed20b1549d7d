//! Built-in command streams: what the thesis' test programs enqueue, item by item, as
//! the runtime's `submit` would see them (`tests/c/cluster_alltoall.c`,
//! `tests/c/cluster_stencil.c`), for any number of ranks.

use super::{At, Command, Item, Work, MARK};
use crate::{Access, DeviceDesc, Location, Mode};

pub const CL_COMMAND_NDRANGE_KERNEL: u32 = 0x11F0;
pub const CL_COMMAND_READ_BUFFER: u32 = 0x11F3;
pub const CL_COMMAND_COPY_BUFFER: u32 = 0x11F5;

/// A workload for `ranks` ranks with `per_rank` devices each (device d owned by rank
/// d / per_rank, one vendor group per rank).
#[derive(Clone, Debug)]
pub enum Workload {
    /// IV.7.2: every device's 16-byte `src` copied into every device's `dst` each
    /// iteration, after a kernel rewrote it; one untimed warm-up kernel per device;
    /// both buffers attached to their device; every `dst` read back at the end.
    AllToAll { iters: u32 },
    /// A 1D stencil of `elements` uints split over the devices, ping-pong buffers with
    /// ghost cells filled by 4-byte copies from the neighbours each iteration, run twice
    /// (ordered by events, then by `clFinish`: the same stream), buffers attached.
    Stencil { elements: u64, iters: u32 },
    /// A recorded stream (`record::read`), devices re-assigned to `ranks` ranks.
    Replay(super::record::Recording),
}

fn queue_stream(d: u32) -> u64 {
    u64::from(d) + 1
}

fn device_command(
    command_type: u32,
    device: u32,
    accesses: Vec<Access>,
    fills_host: Option<u64>,
    blocking: bool,
) -> Item {
    Item::Command(Command {
        command_type,
        device,
        at: At::Device,
        stream: queue_stream(device),
        work: Work::Vendor,
        fills_host,
        blocking,
        waits: Vec::new(),
        accesses,
    })
}

fn access(buffer: u64, range: std::ops::Range<u64>, mode: Mode) -> Access {
    Access {
        buffer,
        range,
        mode,
        aliased: false,
        pass_through: false,
    }
}

fn devices(n: u32, per_rank: u32, out: &mut dyn FnMut(u64, &Item)) {
    for d in 0..n {
        let desc = DeviceDesc {
            owner: d / per_rank,
            group: 0,
            ranges_apart: false,
        };
        out(0, &Item::Device { index: d, desc });
    }
}

impl Workload {
    /// Emits the stream for `ranks` ranks of `per_rank` devices each: items of context 0,
    /// and a mark ([`MARK`]) after the set-up and warm-up and after every iteration.
    pub fn emit(&self, ranks: u32, per_rank: u32, out: &mut dyn FnMut(u64, &Item)) {
        let mark = Item::Release { buffer: u64::MAX };
        match self {
            Workload::AllToAll { iters } => {
                let n = ranks * per_rank;
                devices(n, per_rank, out);
                let n64 = u64::from(n);
                // Buffer ids in creation order, as the scheduler numbers them.
                let src = |d: u32| 1 + 2 * u64::from(d);
                let dst = |d: u32| 2 + 2 * u64::from(d);
                for d in 0..n {
                    out(
                        0,
                        &Item::Buffer {
                            id: src(d),
                            size: 16,
                            initial: None,
                        },
                    );
                    out(
                        0,
                        &Item::Buffer {
                            id: dst(d),
                            size: 16 * n64,
                            initial: None,
                        },
                    );
                    out(
                        0,
                        &Item::Attach {
                            buffer: src(d),
                            device: d,
                        },
                    );
                    out(
                        0,
                        &Item::Attach {
                            buffer: dst(d),
                            device: d,
                        },
                    );
                }
                let kernel = |d: u32| {
                    device_command(
                        CL_COMMAND_NDRANGE_KERNEL,
                        d,
                        vec![access(src(d), 0..16, Mode::ReadWrite)],
                        None,
                        false,
                    )
                };
                for d in 0..n {
                    out(0, &kernel(d));
                }
                out(MARK, &mark);
                for _ in 0..*iters {
                    for d in 0..n {
                        out(0, &kernel(d));
                    }
                    for j in 0..n {
                        for i in 0..n {
                            let at = 16 * u64::from(i);
                            out(
                                0,
                                &device_command(
                                    CL_COMMAND_COPY_BUFFER,
                                    j,
                                    vec![
                                        access(src(i), 0..16, Mode::Read),
                                        access(dst(j), at..at + 16, Mode::Write),
                                    ],
                                    None,
                                    false,
                                ),
                            );
                        }
                    }
                    out(MARK, &mark);
                }
                for j in 0..n {
                    out(
                        0,
                        &device_command(
                            CL_COMMAND_READ_BUFFER,
                            j,
                            vec![access(dst(j), 0..16 * n64, Mode::Read)],
                            Some(16 * n64),
                            true,
                        ),
                    );
                }
                for d in 0..n {
                    out(0, &Item::Release { buffer: src(d) });
                    out(0, &Item::Release { buffer: dst(d) });
                }
            }
            Workload::Stencil { elements, iters } => {
                let n = ranks * per_rank;
                devices(n, per_rank, out);
                let per = elements / u64::from(n);
                let len = |d: u32| {
                    if d + 1 == n {
                        elements - u64::from(d) * per
                    } else {
                        per
                    }
                };
                let mut next_id = 1;
                for run in 0..2 {
                    // Marks in the first run only: the second repeats it.
                    let mark_here = |out: &mut dyn FnMut(u64, &Item)| {
                        if run == 0 {
                            out(MARK, &mark)
                        }
                    };
                    // buf[p][d]
                    let base = next_id;
                    let buf = |p: u32, d: u32| base + 2 * u64::from(d) + u64::from(p);
                    for d in 0..n {
                        for p in 0..2 {
                            out(
                                0,
                                &Item::Buffer {
                                    id: buf(p, d),
                                    size: (len(d) + 2) * 4,
                                    initial: Some(Location::Host),
                                },
                            );
                        }
                        for p in 0..2 {
                            out(
                                0,
                                &Item::Attach {
                                    buffer: buf(p, d),
                                    device: d,
                                },
                            );
                        }
                    }
                    next_id += 2 * u64::from(n);
                    mark_here(out);
                    for it in 0..*iters {
                        let (cur, nxt) = (it % 2, (it + 1) % 2);
                        for d in 0..n {
                            let ghost = |s: u32, from: u64, to: u64| {
                                device_command(
                                    CL_COMMAND_COPY_BUFFER,
                                    d,
                                    vec![
                                        access(buf(cur, s), from..from + 4, Mode::Read),
                                        access(buf(cur, d), to..to + 4, Mode::Write),
                                    ],
                                    None,
                                    false,
                                )
                            };
                            if d > 0 {
                                out(0, &ghost(d - 1, len(d - 1) * 4, 0));
                            }
                            if d + 1 < n {
                                out(0, &ghost(d + 1, 4, (len(d) + 1) * 4));
                            }
                        }
                        for d in 0..n {
                            let whole = |_| 0..(len(d) + 2) * 4;
                            out(
                                0,
                                &device_command(
                                    CL_COMMAND_NDRANGE_KERNEL,
                                    d,
                                    vec![
                                        access(buf(cur, d), whole(cur), Mode::Read),
                                        access(buf(nxt, d), whole(nxt), Mode::ReadWrite),
                                    ],
                                    None,
                                    false,
                                ),
                            );
                        }
                        mark_here(out);
                    }
                    let fin = *iters % 2;
                    for d in 0..n {
                        let size = (len(d) + 2) * 4;
                        out(
                            0,
                            &device_command(
                                CL_COMMAND_READ_BUFFER,
                                d,
                                vec![access(buf(fin, d), 0..size, Mode::Read)],
                                Some(size),
                                true,
                            ),
                        );
                    }
                    for d in 0..n {
                        out(0, &Item::Release { buffer: buf(0, d) });
                        out(0, &Item::Release { buffer: buf(1, d) });
                    }
                }
            }
            Workload::Replay(rec) => rec.emit(ranks, out),
        }
    }
}
