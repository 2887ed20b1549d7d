#!/usr/bin/env bash
# What an enqueue costs the program's thread, in instructions (callgrind), natively and
# through each library in LIBS (default: this build's): a kernel after a wait on one
# PoCL device (benches/micro/roundtrip.c, inside clEnqueueNDRangeKernel), and an
# iteration of CG on four PoCL devices (benches/apps/cg.c, inside the enqueue entry
# points and clSetKernelArg). Each figure is the difference between two run lengths, so
# start-up drops out. The kernel figure repeats to within 1%; CG's moves by about 5%
# with timing (a command whose dependencies are not done goes to the issuer thread).
#
#   bash benches/run-enqueue-cost.sh            # needs valgrind
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)"; exit 1; }
lib="$root/target/release/libmirrorcl.so"
[ -f "$lib" ] || cargo build --release -p mirrorcl
out="$root/target/bench/bin"
mkdir -p "$out"
cc -O2 -std=c11 -pthread -Itests/c -o "$out/roundtrip" benches/micro/roundtrip.c -lOpenCL -lm
cc -O2 -std=c11 -pthread -Itests/c -o "$out/cg" benches/apps/cg.c -lOpenCL -lm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Instructions of the main thread inside the entry points named in TOGGLE (space
# separated), for PROGRAM run with ENV... and PRELOAD: counted PRELOAD PROGRAM ENV...
counted() {
  local preload=$1 program=$2 dir t
  shift 2
  local toggles=()
  for t in $TOGGLE; do toggles+=("--toggle-collect=$t"); done
  dir=$(mktemp -d -p "$work")
  (cd "$dir" && env "$@" valgrind --tool=callgrind --separate-threads=yes --trace-children=yes \
    "${toggles[@]}" env ${preload:+LD_PRELOAD=$preload} "$program" >out 2>&1) || true
  grep -q PASS "$dir/out" || { echo "failed: $program $*" >&2; exit 1; }
  grep -h "^totals:" "$dir"/callgrind.out.*-01 | awk '{print $2}'
}
kernel() {
  local a b
  TOGGLE=clEnqueueNDRangeKernel
  a=$(counted "$1" "$out/roundtrip" POCL_DEVICES=pthread RT_ITERS=50 RT_BURST=1)
  b=$(counted "$1" "$out/roundtrip" POCL_DEVICES=pthread RT_ITERS=450 RT_BURST=1)
  echo $(((b - a) / 440))
}
cg() {
  local env=("POCL_DEVICES=pthread pthread pthread pthread" APP_SIZE=32 POCL_KERNEL_CACHE=1)
  local a b
  TOGGLE="clEnqueueNDRangeKernel clEnqueueCopyBuffer clEnqueueReadBuffer clSetKernelArg"
  a=$(counted "$1" "$out/cg" "${env[@]}" APP_ITERS=50)
  b=$(counted "$1" "$out/cg" "${env[@]}" APP_ITERS=150)
  echo $(((b - a) / 100))
}
printf '%-40s %22s %26s\n' "" "kernel after a wait" "CG iteration (4 devices)"
printf '%-40s %22s %26s\n' native "$(kernel "")" "$(cg "")"
for l in ${LIBS:-$lib}; do
  printf '%-40s %22s %26s\n' "$(basename "$l")" "$(kernel "$l")" "$(cg "$l")"
done
