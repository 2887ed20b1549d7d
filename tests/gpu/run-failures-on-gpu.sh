#!/usr/bin/env bash
# Failures and divergence across ranks on the GPU machine: two ranks, one GPU each.
# A kernel made to fail on one rank's GPU (MIRRORCL_INJECT_FAILURE) fails the commands
# on the other rank's GPU that wait for it, on both ranks (cluster_fail); replicas that
# diverge in what they exchange end the job promptly with the first call that differs
# (cluster_diverge, DIVERGE=size and wait). Run from the repository root with
# target/gpu/ prepared by tests/gpu/prepare.sh; logs go to $OUT (or ./gpu-out).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job() { # label, program, env...
  local label="$1" prog="$2"; shift 2
  local start=$(date +%s%N)
  timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" \
    -x MIRRORCL_OUTPUT=raw -x MIRRORCL_WAIT_TIMEOUT=60 -x MIRRORCL_PLATFORMS=NVIDIA "$@" \
    "$gpu/bin/$prog" > "$out/$label.log" 2>&1
  local rc=$?
  echo "== $label: rc=$rc in $(( ($(date +%s%N) - start) / 1000000 )) ms"
  grep -E "^PASS|^FAIL|wait|read|map|copy|MirrorCL|rank [01]:" "$out/$label.log" | head -20
}
job fail-injected cluster_fail -x MIRRORCL_INJECT_FAILURE=1:-5 -x FAIL_EXPECTED=1
job fail-none cluster_fail
job diverge-size cluster_diverge -x DIVERGE=size
job diverge-wait cluster_diverge -x DIVERGE=wait
job diverge-verify-arg cluster_diverge -x DIVERGE=arg -x MIRRORCL_VERIFY=1
