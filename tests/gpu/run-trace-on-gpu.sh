#!/usr/bin/env bash
# One 16-byte copy between two H100 ranks taken apart from its trace: benches/micro/copy16.c
# (200 copies + clFinish) with MIRRORCL_TRACE, merged by `mirrorcl trace`, read by
# copy16-breakdown.py; then the IV.7.2 microbenchmark traced on 2 ranks (its merged trace
# comes back in $OUT for Perfetto). Run from the repository root with target/gpu/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf /tmp/c16 /tmp/a2a
timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x CLUSTER_ITERS=200 -x MIRRORCL_TRACE=/tmp/c16 "$gpu/bin/copy16" 2>&1 | grep -E "median|PASS|FAIL"
"$gpu/bin/mirrorcl" trace /tmp/c16 && python3 "$gpu/bin/copy16-breakdown.py" /tmp/c16/trace.json --skip 10
echo "== untraced, for the cost of tracing on"
timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x CLUSTER_ITERS=200 "$gpu/bin/copy16" 2>&1 | grep -E "median|PASS|FAIL"
echo "== IV.7.2, 2 ranks, 100 iterations, traced"
timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x CLUSTER_ITERS=100 -x MIRRORCL_TRACE=/tmp/a2a "$gpu/bin/cluster_alltoall" 2>&1 | grep -E "copies|PASS|FAIL"
"$gpu/bin/mirrorcl" trace /tmp/a2a -o "$out/alltoall-2-ranks-trace.json" && ls -la "$out"
