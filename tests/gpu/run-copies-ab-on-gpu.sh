#!/usr/bin/env bash
# Copies across ranks and devices, base library (target/gpu-base, A) against this build
# (B) and the hand-written MPI + OpenCL twins, interleaved ROUNDS times (default 3):
# the IV.7.2 microbenchmark (µs per iteration, ITERS iterations, default 500) and the
# stencil (µs per step, APP_SIZE default 1024, APP_STEPS 300, plain and attached), at
# each of RANKS (default "2 4") one GPU per rank; then IV.7.2 in one process over all
# the host's GPUs (one rank, MirrorCL's devices of one vendor context).
# Run from the repository root with target/gpu/ and target/gpu-base/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
iters="${ITERS:-500}"
st=(-x APP_SIZE="${APP_SIZE:-1024}" -x APP_STEPS="${APP_STEPS:-300}")
per_iter() { grep -o "copies: [0-9.]* s" | awk -v n="$iters" '{printf "%.1f", $2 * 1e6 / n}'; }
step() { grep -o "step_us=[0-9.]*" | head -1 | cut -d= -f2; }
lib_of() { if [ "$1" = A ]; then echo "$base/libmirrorcl.so"; else echo "$gpu/libmirrorcl.so"; fi; }
mirrorcl() { timeout 120 mpirun -np "$1" --bind-to none -x LD_PRELOAD="$(lib_of "$2")" -x MIRRORCL_PLATFORMS=NVIDIA "${@:3}"; }
native() { timeout 120 mpirun -np "$1" --bind-to none -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 -x CTEST_PLATFORM=NVIDIA "${@:2}"; }
for n in ${RANKS:-2 4}; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    line="IV.7.2 ranks $n round $round: twin $(native "$n" -x CLUSTER_ITERS="$iters" "$gpu/bin/alltoall_mpi" 2>&1 | per_iter)"
    for side in A B; do
      line="$line | $side $(mirrorcl "$n" $side -x CLUSTER_ITERS="$iters" "$gpu/bin/cluster_alltoall" 2>&1 | per_iter)"
    done
    echo "$line (µs per iteration)"
    line="stencil ranks $n round $round: twin $(native "$n" "${st[@]}" "$gpu/bin/stencil_mpi" 2>&1 | step)"
    for side in A B; do
      for attach in 0 1; do
        t=$(mirrorcl "$n" $side -x APP_ATTACH=$attach "${st[@]}" "$gpu/bin/stencil" 2>&1 | step)
        line="$line | $side$([ $attach = 1 ] && echo +attach) $t"
      done
    done
    echo "$line (µs per step)"
  done
done
gpus=$(nvidia-smi -L | wc -l)
for round in $(seq 1 "${ROUNDS:-3}"); do
  line="IV.7.2 one process, $gpus GPUs, round $round:"
  for side in A B; do
    line="$line $side $(mirrorcl 1 $side -x CLUSTER_ITERS="$iters" "$gpu/bin/cluster_alltoall" 2>&1 | per_iter)"
  done
  echo "$line (µs per iteration)"
done
