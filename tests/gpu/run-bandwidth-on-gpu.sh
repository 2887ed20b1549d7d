#!/usr/bin/env bash
# Copy bandwidth between two GPUs: MirrorCL across two ranks (one GPU each), raw MPI
# between the same two ranks (host memory), and NVIDIA's own copy between the two GPUs
# in one process; sizes 4 KiB to 1 GiB. Writes to $OUT (or ./gpu-out).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
exec > >(tee "$out/bandwidth.log") 2>&1
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi -L
echo "== raw MPI, rank 0 -> rank 1, host memory"
mpirun -np 2 --bind-to none "$gpu/bin/bandwidth_mpi"
echo "== MirrorCL, GPU of rank 0 -> GPU of rank 1"
mpirun -np 2 --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA \
  "$gpu/bin/bandwidth" | grep -E "BW|PASS|FAIL|MirrorCL"
echo "== NVIDIA OpenCL, GPU 0 -> GPU 1 in one process"
vend=$(mktemp -d); echo "libnvidia-opencl.so.1" > "$vend/nvidia.icd"
OCL_ICD_VENDORS="$vend/" "$gpu/bin/bandwidth" | grep -E "BW|PASS|FAIL"
