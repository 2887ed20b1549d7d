#!/usr/bin/env bash
# What a per-command cost is worth on CG (benches/apps/cg.c) with more PoCL devices than
# cores: the native platform with a fixed busy delay before every enqueue
# (benches/micro/enqueue_delay.c, DELAYS in ns), against MirrorCL (LD_PRELOAD), all
# alternating, ROUNDS rounds. Prints each one's median and its ratio to the native
# median, then the delay at which native reaches 1.2x (the per-command budget of the
# goal) and the delay MirrorCL costs as much as. With BATCH=1 also native and MirrorCL
# under SCHED_BATCH (`chrt -b`): woken threads then do not preempt the enqueuing one.
# With PRICES="W A L" also native with work of MirrorCL's kinds before every enqueue
# (benches/micro/enqueue_delay.c): W instructions, then W instructions and A atomic
# read-modify-writes, then those and L scattered cache lines written; give them
# MirrorCL's own figures per command (`KINDS=1 bash benches/run-enqueue-cost.sh`)
# to see which kind its cost is made of. With ON_TOP="D1 D2" (ns) also MirrorCL with
# that delay in front of each of its enqueues: MirrorCL's own slope, which says whether a
# cut of that size to its cost per command would show on CG's clock at all.
#
#   bash benches/run-cg-budget.sh     # DEVICES (4), APP_SIZE (128), APP_ITERS (1000), ROUNDS (5)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
lib="${MIRRORCL_LIB:-$root/target/release/libmirrorcl.so}"
[ -f "$lib" ] || cargo build --release -p mirrorcl
out="$root/target/bench/bin"
mkdir -p "$out"
cc -O2 -std=c11 -pthread -Itests/c -o "$out/cg" benches/apps/cg.c -lOpenCL -lm
cc -O2 -shared -fPIC -o "$out/enqueue_delay.so" benches/micro/enqueue_delay.c -ldl
devices=$(printf 'pthread %.0s' $(seq 1 "${DEVICES:-4}"))
export POCL_DEVICES="${devices% }" APP_SIZE="${APP_SIZE:-128}" APP_ITERS="${APP_ITERS:-1000}"
export POCL_KERNEL_CACHE=1
delays=(${DELAYS:-500 1000 1500 2000 3000})
echo "cg: ${DEVICES:-4} PoCL devices, APP_SIZE=$APP_SIZE, APP_ITERS=$APP_ITERS, $(nproc) cores"
# One run: its total seconds. run NAME [chrt options --] ENV...
seconds() { grep -o "total_s=[0-9.]*" | cut -d= -f2; }
declare -A runs
run() {
  local name=$1 policy=()
  shift
  if [ "${1:-}" = batch ]; then policy=(chrt -b 0); shift; fi
  runs[$name]+="$("${policy[@]}" env -u LD_PRELOAD "$@" "$out/cg" | seconds) "
}
names=(native)
for d in "${delays[@]}"; do names+=("delay_${d}ns"); done
names+=(mirrorcl)
kinds=(${PRICES:-})
if [ ${#kinds[@]} -eq 3 ]; then
  names+=("work_${kinds[0]}" "+atomics_${kinds[1]}" "+lines_${kinds[2]}")
fi
[ -n "${BATCH:-}" ] && names+=(native_batch mirrorcl_batch)
on_top=(${ON_TOP:-})
for d in "${on_top[@]}"; do names+=("mirrorcl+${d}ns"); done
for round in $(seq 1 "${ROUNDS:-5}"); do
  run native
  for d in "${delays[@]}"; do
    run "delay_${d}ns" LD_PRELOAD="$out/enqueue_delay.so" ENQUEUE_DELAY_NS="$d"
  done
  run mirrorcl LD_PRELOAD="$lib"
  if [ ${#kinds[@]} -eq 3 ]; then
    delayed=(LD_PRELOAD="$out/enqueue_delay.so" ENQUEUE_WORK="${kinds[0]}")
    run "work_${kinds[0]}" "${delayed[@]}"
    run "+atomics_${kinds[1]}" "${delayed[@]}" ENQUEUE_ATOMICS="${kinds[1]}"
    run "+lines_${kinds[2]}" "${delayed[@]}" ENQUEUE_ATOMICS="${kinds[1]}" ENQUEUE_LINES="${kinds[2]}"
  fi
  for d in "${on_top[@]}"; do
    run "mirrorcl+${d}ns" LD_PRELOAD="$out/enqueue_delay.so:$lib" ENQUEUE_DELAY_NS="$d"
  done
  if [ -n "${BATCH:-}" ]; then
    run native_batch batch
    run mirrorcl_batch batch LD_PRELOAD="$lib"
  fi
  echo "round $round done"
done
median() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median "${runs[native]}")
printf '%-16s %10s %8s   %s\n' run "median s" "/native" "all runs (s)"
for n in "${names[@]}"; do
  m=$(median "${runs[$n]}")
  printf '%-16s %10s %8s   %s\n' "$n" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')" "${runs[$n]}"
done
# Linear interpolation over (delay, ratio), native (0 ns) first.
points="0 1"
for d in "${delays[@]}"; do
  points+=" $d $(awk -v a="$(median "${runs[delay_${d}ns]}")" -v b="$base" 'BEGIN {print a / b}')"
done
at_ratio() { # the delay (ns) at which the ratio reaches $1
  echo "$points" | awk -v r="$1" '{for (i = 1; i + 3 <= NF; i += 2) {d0=$i; r0=$(i+1); d1=$(i+2); r1=$(i+3);
    if (r >= r0 && r <= r1 && r1 > r0) {printf "%.0f ns", d0 + (r - r0) * (d1 - d0) / (r1 - r0); exit}}
    printf "outside 0-%s ns (the delays measured)", $(NF-1)}'
}
mirrorcl=$(awk -v a="$(median "${runs[mirrorcl]}")" -v b="$base" 'BEGIN {print a / b}')
echo "budget for 1.2x native: $(at_ratio 1.2) per enqueue"
echo "MirrorCL costs as much as: $(at_ratio "$mirrorcl") per enqueue"
