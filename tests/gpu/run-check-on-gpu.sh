#!/usr/bin/env bash
# A short check of a build on two GPUs (one per rank): the cluster programs most
# exposed to the cross-rank path, a failure carried across ranks, then one interleaved
# round of the latency A/B (run-latency-ab-on-gpu.sh) and the stencil (base, this build,
# the hand-written twin).
# Run from the repository root with target/gpu/ (and target/gpu-base/) prepared.
# RANKS (default 2): ranks for the programs, as many as the machine has GPUs (each rank
# takes its share of the host's GPUs); CHECK_ONLY=1: the programs only.
set -uo pipefail
gpu="$(pwd)/target/gpu"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n="${RANKS:-2}"
for prog in ${PROGRAMS:-cluster_vecadd cluster_stencil cluster_attach cluster_alltoall cluster_copies cluster_threads vecadd_multi events cluster_fail}; do
  out=$(timeout 120 mpirun -np "$n" --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA \
    -x CTEST_EXPECT_DEVICES="$n" -x MIRRORCL_WAIT_TIMEOUT=60 -x MIRRORCL_OUTPUT=raw "$gpu/bin/$prog" 2>&1)
  echo "$prog rc=$? passed=$(grep -c "^PASS $prog" <<< "$out")/$n"
done
[ -n "${CHECK_ONLY:-}" ] && exit 0
ROUNDS=1 bash "$(dirname "$0")/run-latency-ab-on-gpu.sh" | tail -1
# The stencil (2048², 300 steps: the CPU reference stays short), base and this build
# against the hand-written twin.
st=(-x APP_SIZE=2048 -x APP_STEPS=300)
step() { grep -o "step_us=[0-9.]*" | head -1; }
for side in gpu-base gpu; do
  echo "stencil, 2 ranks, MirrorCL ($side): $(timeout 120 mpirun -np 2 --bind-to none \
    -x LD_PRELOAD="$(pwd)/target/$side/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA "${st[@]}" \
    "$gpu/bin/stencil" 2>&1 | step)"
done
echo "stencil, 2 ranks, twin: $(timeout 120 mpirun -np 2 --bind-to none \
  -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 "${st[@]}" "$gpu/bin/stencil_mpi" 2>&1 | step)"
