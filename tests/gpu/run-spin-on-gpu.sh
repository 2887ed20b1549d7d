#!/usr/bin/env bash
# Spinning only while a core is free (runtime/src/spin.rs), on the GPU machine: the CG
# solver of benches/apps on four PoCL CPU devices in one process, natively, with the
# base library (target/gpu-base) and with this build (target/gpu), first confined to two
# cores (taskset: more threads than cores, where spinning starves PoCL's workers) and
# then on every core; then the cost per command on NVIDIA and the IV.7.2
# microbenchmark, base against this build (cores free: spinning must stay).
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cg() { # label, preload, cores...
  local label="$1" pre="$2"; shift 2
  local pick="MIRRORCL_PLATFORMS=Portable"
  [ -z "$pre" ] && pick="CTEST_PLATFORM=Portable"
  env LD_PRELOAD="$pre" "$pick" \
    POCL_DEVICES="pthread pthread pthread pthread" APP_SIZE="${CG_SIZE:-128}" \
    "$@" "$gpu/bin/cg" 2>&1 | grep -E "^TIME|FAIL" | awk -v l="$label" '{print l, $5}'
}
for where in "taskset -c 0,1" "env"; do
  echo "== CG, 4 PoCL devices, one process: $where"
  for round in 1 2 3; do
    cg native "" $where
    cg base "$base/libmirrorcl.so" $where
    cg new "$gpu/libmirrorcl.so" $where
  done
done
if [ "${SKIP_NVIDIA:-0}" != 1 ]; then
  OUT="${OUT:-$(pwd)/gpu-out}/ab" ROUNDS=2 PARTS=micro,overhead RANKS=1,2 bash tests/gpu/run-ab-on-gpu.sh 2>&1 \
    | grep -E "^== |^\| (1|2) \||kernel enqueue|16 B blocking|burst"
fi
