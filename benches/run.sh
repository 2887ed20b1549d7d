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
#   bash benches/run.sh --mpi mpich --label local-mpich   # MirrorCL and twins on MPICH
#
# Environment: MIRRORCL_BENCH_SKIP_BUILD=1 uses what target/ already holds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# --mpi mpich: the library, the harness and the hand-written twins built for MPICH, in
# MPICH's target directory (as `MIRRORCL_BUILD_MPI=mpich bash .ci/setup` builds it).
mpi=openmpi
prev=""
for a in "$@"; do
  case "$a" in --mpi=*) mpi="${a#--mpi=}" ;; esac
  [ "$prev" = --mpi ] && mpi="$a"
  prev="$a"
done
target=target
if [ "$mpi" = mpich ]; then
  target=target/mpich
  export MPICC="${MPICC:-mpicc.mpich}" CARGO_TARGET_DIR="$target"
fi
bin="$target/bench/bin"
if [ "${MIRRORCL_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p mirrorcl -p mirrorcl-benches
  bash benches/build-programs.sh "$bin"
fi
exec "$target/release/mirrorcl-bench" --bin-dir "$bin" --lib "$target/release/libmirrorcl.so" "$@"
