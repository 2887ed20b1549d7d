#!/usr/bin/env bash
# What an enqueue costs the program's thread, in instructions (callgrind), natively and
# through each library in LIBS (default: this build's): a kernel after a wait on one
# PoCL device (benches/micro/roundtrip.c, inside clEnqueueNDRangeKernel), an
# iteration of CG on four PoCL devices (benches/apps/cg.c, inside the enqueue entry
# points and clSetKernelArg), and a kernel of a burst on the thread that issues it (the
# program's natively; through MirrorCL, with the GPUs' way of issuing, the device's
# issuer thread, whole, which sets a burst's pace on NVIDIA). Each figure is the
# difference between two run lengths, so start-up drops out. The kernel figure repeats to within 1%; CG's moves by about 5%
# with timing (a command whose dependencies are not done goes to the issuer thread).
#
#   bash benches/run-enqueue-cost.sh            # needs valgrind
#   BREAKDOWN=1 bash benches/run-enqueue-cost.sh   # and where each figure goes, by part
#                                                  # (benches/cost-breakdown.py)
#   KINDS=1 bash benches/run-enqueue-cost.sh       # and, for the first two figures,
#                                                  # their atomic operations, cache
#                                                  # misses and hot code
#                                                  # (benches/cost-kinds.py); with
#                                                  # ATOMICS=N, CG's N atomic
#                                                  # instructions run most, by source
#                                                  # line
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
# separated), for PROGRAM run with ENV... and PRELOAD, profiled into DIR (kept for
# the breakdown): counted DIR PRELOAD PROGRAM ENV...
counted() {
  local dir=$1 preload=$2 program=$3 t
  shift 3
  local toggles=() t
  for t in $TOGGLE; do toggles+=("--toggle-collect=$t"); done
  mkdir -p "$dir"
  (cd "$dir" && env "$@" valgrind --tool=callgrind --separate-threads=yes --trace-children=yes \
    "${toggles[@]}" $CACHE_SIM env ${preload:+LD_PRELOAD=$preload} "$program" >out 2>&1) || true
  grep -q PASS "$dir/out" || { echo "failed: $program $*" >&2; exit 1; }
  grep -h "^totals:" "$(profile "$dir")" | awk '{print $2}'
}
# With KINDS set, the first two figures' profiles also simulate the caches and keep
# each instruction's count (benches/cost-kinds.py reads them).
CACHE_SIM=""
[ -n "${KINDS:-}" ] && CACHE_SIM="--cache-sim=yes --dump-instr=yes --compress-pos=no --compress-strings=no"
# The program's thread's profile in DIR: the one of the program's own process, since
# PoCL's compiler runs (a cold kernel cache) leave profiles too, which count nothing
# inside the toggled entry points.
profile() {
  grep -H "^totals:" "$1"/callgrind.out.*-01 | sort -t' ' -k2 -n | tail -n 1 | cut -d: -f1
}
# Each figure: TAG PRELOAD (FIGURE: kernel or cg), profiles in $work/TAG-FIGURE-{short,long}.
kernel() {
  local a b d="$work/$1-kernel"
  TOGGLE=clEnqueueNDRangeKernel
  a=$(counted "$d-short" "$2" "$out/roundtrip" POCL_DEVICES=pthread RT_ITERS=50 RT_BURST=1)
  b=$(counted "$d-long" "$2" "$out/roundtrip" POCL_DEVICES=pthread RT_ITERS=450 RT_BURST=1)
  echo $(((b - a) / 440))
}
cg() {
  local env=("POCL_DEVICES=pthread pthread pthread pthread" APP_SIZE=32 POCL_KERNEL_CACHE=1)
  local a b d="$work/$1-cg"
  TOGGLE="clEnqueueNDRangeKernel clEnqueueCopyBuffer clEnqueueReadBuffer clSetKernelArg"
  a=$(counted "$d-short" "$2" "$out/cg" "${env[@]}" APP_ITERS=50)
  b=$(counted "$d-long" "$2" "$out/cg" "${env[@]}" APP_ITERS=150)
  echo $(((b - a) / 100))
}
# A kernel of a burst, on the thread that issues it: natively inside the program's
# enqueue calls; through MirrorCL (MIRRORCL_CALLER_ISSUES=waited, as on GPUs) the whole
# issuer thread, found by its job loop (its spinning shows as a part of its own). Needs
# an otherwise idle machine: the issuer takes the jobs only while a core is free.
burst() {
  local a b d="$work/$1-burst"
  local env=(POCL_DEVICES=pthread RT_ITERS=10 MIRRORCL_CALLER_ISSUES=waited)
  # Its job count is read from compressed names.
  local CACHE_SIM=""
  TOGGLE=""
  [ -z "$2" ] && TOGGLE=clEnqueueNDRangeKernel
  counted "$d-short" "$2" "$out/roundtrip" "${env[@]}" RT_BURST=200 >/dev/null
  counted "$d-long" "$2" "$out/roundtrip" "${env[@]}" RT_BURST=600 >/dev/null
  a=$(grep -h "^totals:" "$(issuing "$d-short")" | awk '{print $2}')
  b=$(grep -h "^totals:" "$(issuing "$d-long")" | awk '{print $2}')
  # With the cores taken (another job on the machine) the enqueuing thread issues the
  # kernels itself and the issuer's count means nothing.
  if [ -n "$2" ] && [ $(($(jobs_run "$d-long") - $(jobs_run "$d-short"))) -lt 3000 ]; then
    echo "cores taken"
    return
  fi
  echo $(((b - a) / 4000))
}
# How many jobs the issuer thread in DIR ran (calls of its job function).
jobs_run() {
  # Callgrind names a function once, then by its number: "cfn=(73650)".
  awk '/^c?fn=\([0-9]+\) .*issuer::thread::run_job$/ {split($1, p, /[()]/); id = p[2]}
    id != "" && $0 == "cfn=(" id ")" || /^cfn=\([0-9]+\) .*issuer::thread::run_job$/ {c = 1; next}
    c && /^calls=/ {n += substr($1, 7)} {c = 0}
    END {print n + 0}' "$(issuing "$1")"
}
# The profile of the thread that issues the burst's kernels in DIR.
issuing() {
  local f
  f=$(grep -l "issuer::thread::run_job" "$1"/callgrind.out.*-* 2>/dev/null | head -n 1)
  echo "${f:-$(profile "$1")}"
}
# SCRIPT's report on the first two figures of TAG (the burst's profile has no cache
# simulation); OPTIONS... go to SCRIPT for the CG iteration.
first_two() {
  local script=$1 tag=$2
  shift 2
  echo "$tag, a kernel after a wait:"
  python3 "$script" "$(profile "$work/$tag-kernel-short")" "$(profile "$work/$tag-kernel-long")" 440
  echo "$tag, a CG iteration:"
  python3 "$script" "$(profile "$work/$tag-cg-short")" "$(profile "$work/$tag-cg-long")" 100 \
    --top "${TOP:-0}" "$@"
}
# Where each figure of TAG goes, by part (BREAKDOWN).
breakdown() {
  first_two benches/cost-breakdown.py "$1"
  echo "$1, a kernel of a burst, on the thread that issues it:"
  python3 benches/cost-breakdown.py "$(issuing "$work/$1-burst-short")" \
    "$(issuing "$work/$1-burst-long")" 4000
}
# The first two figures' atomic operations, cache misses and hot code (KINDS).
kinds() { first_two benches/cost-kinds.py "$1" --atomics "${ATOMICS:-0}"; }
# REPORT TAG for native and each library of LIBS, named by the library's file.
each_build() {
  local l n=0
  "$1" native
  for l in ${LIBS:-$lib}; do
    n=$((n + 1))
    "$1" "lib$n" | sed "s|^lib$n|$(basename "$l")|"
  done
}
row() { printf '%-32s %20s %26s %24s\n' "$@"; }
row "" "kernel after a wait" "CG iteration (4 devices)" "burst kernel, issuing"
row native "$(kernel native "")" "$(cg native "")" "$(burst native "")"
n=0
for l in ${LIBS:-$lib}; do
  n=$((n + 1))
  row "$(basename "$l")" "$(kernel "lib$n" "$l")" "$(cg "lib$n" "$l")" "$(burst "lib$n" "$l")"
done
if [ -n "${KINDS:-}" ]; then
  echo
  echo "Per unit, besides instructions (caches simulated):"
  each_build kinds
fi
if [ -n "${BREAKDOWN:-}" ]; then
  echo
  echo "Instructions per unit by part (each function's own, inlined code included):"
  each_build breakdown
fi
