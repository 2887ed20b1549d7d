#!/usr/bin/env bash
# The stencil on RANKS (default 2) H100 ranks, base library (target/gpu-base, A) against
# this build (B) and the hand-written twin, interleaved ROUNDS times (default 3), plain
# and with clAttachBufferToDevice: µs per step. APP_SIZE (2048), APP_STEPS (300).
# Run from the repository root with target/gpu/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
st=(-x APP_SIZE="${APP_SIZE:-2048}" -x APP_STEPS="${APP_STEPS:-300}")
step() { grep -o "step_us=[0-9.]*" | head -1 | cut -d= -f2; }
for n in ${RANKS:-2}; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    line="ranks $n round $round: twin $(timeout 120 mpirun -np "$n" --bind-to none \
      -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 "${st[@]}" "$gpu/bin/stencil_mpi" 2>&1 | step)"
    for side in A B; do
      lib="$gpu/libmirrorcl.so"; [ "$side" = A ] && lib="$base/libmirrorcl.so"
      for attach in 0 1; do
        t=$(timeout 120 mpirun -np "$n" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
          -x APP_ATTACH=$attach "${st[@]}" "$gpu/bin/stencil" 2>&1 | step)
        line="$line | $side$([ $attach = 1 ] && echo +attach) $t"
      done
    done
    echo "$line (µs per step)"
  done
done
