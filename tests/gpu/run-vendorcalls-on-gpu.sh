#!/usr/bin/env bash
# What NVIDIA's own OpenCL charges for each call an issuer makes (benches/micro/vendorcalls.c),
# ROUNDS times (default 3), then the one-rank round trips native and through MirrorCL
# (benches/micro/roundtrip.c) on the same host. Run from the repository root with
# target/gpu/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
for round in $(seq 1 "${ROUNDS:-3}"); do
  echo "round $round vendor calls: $(CTEST_PLATFORM=NVIDIA timeout 120 "$gpu/bin/vendorcalls" | grep _us)"
  echo "round $round native:   $(CTEST_PLATFORM=NVIDIA timeout 120 "$gpu/bin/roundtrip" | grep _us)"
  echo "round $round MirrorCL: $(LD_PRELOAD="$gpu/libmirrorcl.so" MIRRORCL_PLATFORMS=NVIDIA timeout 120 \
    "$gpu/bin/roundtrip" | grep _us)"
done
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
