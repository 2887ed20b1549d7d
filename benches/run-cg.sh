#!/usr/bin/env bash
# A multi-device solver in one process with more devices than cores: benches/apps/cg.c
# (conjugate gradient, 5 kernels, 2 copies and 2 small reads per device and iteration)
# on DEVICES PoCL CPU devices (default 4), natively and through MirrorCL (LD_PRELOAD),
# alternating, ROUNDS rounds (default 5); prints each run's time and the ratio of the
# medians. Nothing to set: MirrorCL must not spin where the cores are taken.
# MirrorCL runs a CPU vendor's workers under SCHED_BATCH (runtime/src/vendor/threads.rs);
# a third run per round, "native, batch", gives the native platform the same policy
# (benches/micro/batch_workers.c), to tell MirrorCL's own cost from the policy's gain.
#
#   bash benches/run-cg.sh                 # APP_SIZE (default 128), APP_ITERS (100)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
lib="${MIRRORCL_LIB:-$root/target/release/libmirrorcl.so}"
[ -f "$lib" ] || cargo build --release -p mirrorcl
out="$root/target/bench/bin"
mkdir -p "$out"
cc -O2 -std=c11 -pthread -Itests/c -o "$out/cg" benches/apps/cg.c -lOpenCL -lm
cc -O2 -shared -fPIC -o "$out/batch_workers.so" benches/micro/batch_workers.c -ldl
devices=$(printf 'pthread %.0s' $(seq 1 "${DEVICES:-4}"))
export POCL_DEVICES="${devices% }" APP_SIZE="${APP_SIZE:-128}" POCL_KERNEL_CACHE="${POCL_KERNEL_CACHE:-0}"
echo "cg: ${DEVICES:-4} PoCL devices, APP_SIZE=$APP_SIZE, $(nproc) cores, one process"
native=() batch=() mirrorcl=()
seconds() { grep -o "total_s=[0-9.]*" | cut -d= -f2; }
for round in $(seq 1 "${ROUNDS:-5}"); do
  n=$(env -u LD_PRELOAD "$out/cg" | seconds)
  b=$(LD_PRELOAD="$out/batch_workers.so" "$out/cg" | seconds)
  m=$(LD_PRELOAD="$lib" "$out/cg" | seconds)
  echo "round $round: native $n s, native batch $b s, MirrorCL $m s"
  native+=("$n") batch+=("$b") mirrorcl+=("$m")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mn=$(median "${native[@]}") mb=$(median "${batch[@]}") mm=$(median "${mirrorcl[@]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "median: native $mn s, native batch $mb s, MirrorCL $mm s"
echo "MirrorCL / native $(ratio "$mm" "$mn")x, MirrorCL / native batch $(ratio "$mm" "$mb")x"
