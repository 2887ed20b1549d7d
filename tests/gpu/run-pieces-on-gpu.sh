#!/usr/bin/env bash
# Large-copy bandwidth between two GPU ranks by piece size: raw MPI (host memory) and
# MirrorCL with each MIRRORCL_PIECE_MIB in PIECES ("16 4 8"), interleaved, ROUNDS (3)
# rounds; prints GB/s at 64 MiB, 256 MiB and 1 GiB. LIB: the library (target/gpu's).
# Run from the repository root with target/gpu/ prepared (tests/gpu/prepare.sh).
set -uo pipefail
gpu="$(pwd)/target/gpu"
lib="${LIB:-$gpu/libmirrorcl.so}"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sizes() { grep -E "bytes=(67108864|268435456|1073741824) " | sed -E 's/.*bytes=([0-9]+) .*gbytes_per_s=([0-9.]+).*/\1:\2/' | tr '\n' ' '; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  echo "round $round raw MPI: $(CUDA_VISIBLE_DEVICES=0,1 timeout 120 mpirun -np 2 --bind-to none "$gpu/bin/bandwidth_mpi" 2>&1 | sizes)"
  for p in ${PIECES:-16 4 8}; do
    o=$(CUDA_VISIBLE_DEVICES=0,1 timeout 120 mpirun -np 2 --bind-to none -x LD_PRELOAD="$lib" \
      -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_PIECE_MIB="$p" "$gpu/bin/bandwidth" 2>&1)
    grep -q "^PASS" <<<"$o" || echo "FAILED:"
    echo "round $round MirrorCL pieces ${p} MiB: $(sizes <<<"$o")"
  done
done
