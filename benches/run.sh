#!/usr/bin/env bash
# The whole benchmark suite in one command: builds MirrorCL, mirrorcl-overhead,
# mirrorcl-bench and the C programs (the IV.7.2 microbenchmark and its hand-written MPI
# twin, the bandwidth programs, the applications), then runs mirrorcl-bench with this
# script's arguments (`--help` lists them). Results: target/bench/LABEL/ (JSON, CSV, SVG
# plots, summary.md); `--docs docs/benchmarks.md` also publishes them there.
#
#   bash benches/run.sh                                   # everything, 1, 2 and 4 ranks
#   bash benches/run.sh --parts micro --ranks 1,2,4,8 --reps 5
#   bash benches/run.sh --quick                           # a smoke run of every part
#
# Environment: MIRRORCL_BENCH_SKIP_BUILD=1 uses what target/ already holds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin=target/bench/bin
if [ "${MIRRORCL_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p mirrorcl -p mirrorcl-benches
  bash benches/build-programs.sh "$bin"
fi
exec target/release/mirrorcl-bench --bin-dir "$bin" --lib target/release/libmirrorcl.so "$@"
