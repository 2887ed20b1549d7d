#!/usr/bin/env bash
# The IV.7.2 microbenchmark (cluster_alltoall, 2 ranks, one GPU each) with the base
# library (target/gpu-base, A) and this build (B), with MIRRORCL_OUTPUT=all and raw,
# each run followed by the hand-written MPI + OpenCL twin: whether anything a MirrorCL
# run leaves behind slows the next program. Seconds for ITERS iterations, rank 0's.
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
iters="${ITERS:-1000}"
secs() { grep -o "copies: [0-9.]* s" | awk '{print $2}'; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  for side in A B; do
    lib="$gpu/libmirrorcl.so"; [ "$side" = A ] && lib="$base/libmirrorcl.so"
    for mode in all raw; do
      m=$(mpirun -np 2 --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_OUTPUT=$mode \
        -x MIRRORCL_PLATFORMS=NVIDIA -x CLUSTER_ITERS=$iters -x CUDA_VISIBLE_DEVICES=0,1 \
        "$gpu/bin/cluster_alltoall" 2>&1 | secs)
      t=$(mpirun -np 2 --bind-to none -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 \
        -x CTEST_PLATFORM=NVIDIA -x CLUSTER_ITERS=$iters -x CUDA_VISIBLE_DEVICES=0,1 \
        "$gpu/bin/alltoall_mpi" 2>&1 | secs)
      echo "round $round $side $mode: mirrorcl $m s, then mpi twin $t s"
    done
  done
done
