#!/usr/bin/env bash
# Cross-rank latency, base library (target/gpu-base, A) against this build (B), one GPU
# per rank, interleaved rounds: the IV.7.2 microbenchmark (µs per iteration) and its
# hand-written MPI + OpenCL twin, then copy16 (16-byte cross-rank copy + clFinish).
# After each IV.7.2 figure, in brackets: rank 0's enqueue loop and its thread's CPU time.
# RANKS (default "2"), ROUNDS (default 3), ITERS (default 1000).
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
iters="${ITERS:-1000}"
us() { grep -o "copies: [0-9.]* s" | awk -v n="$iters" '{printf "%.1f", $2 * 1e6 / n}'; }
enq() { grep -o "enqueueing: [0-9.]* us per iteration, [0-9.]*" | awk '{printf " [enqueue %s, cpu %s]", $2, $6}'; }
for n in ${RANKS:-2}; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    t=$(mpirun -np "$n" --bind-to none -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 \
      -x CLUSTER_ITERS="$iters" "$gpu/bin/alltoall_mpi" 2>&1 | us)
    line="ranks $n round $round: twin $t"
    for side in A B; do
      lib="$gpu/libmirrorcl.so"; [ "$side" = A ] && lib="$base/libmirrorcl.so"
      o=$(timeout 120 mpirun -np "$n" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
        -x CLUSTER_ITERS="$iters" "$gpu/bin/cluster_alltoall" 2>&1)
      m="$(echo "$o" | us)$(echo "$o" | enq)"
      c=$(timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
        -x CLUSTER_ITERS=200 "$gpu/bin/copy16" 2>&1 | grep -o "median [0-9.]*" | awk '{print $2}')
      line="$line | $side alltoall $m copy16 $c"
    done
    echo "$line (µs)"
  done
done
