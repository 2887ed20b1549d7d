#!/usr/bin/env bash
# One rank against NVIDIA's own platform, each in its own process (benches/micro/roundtrip.c):
# kernel + clFinish, 16-byte blocking write and read, burst per command; native and
# MirrorCL alternating ROUNDS times (default 3; with target/gpu-base too if present), then
# one MirrorCL run traced (its merged trace comes back in $OUT for Perfetto; with TRACE=1),
# its calls taken apart by benches/roundtrip-breakdown.py.
# Run from the repository root with target/gpu/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
rt="$gpu/bin/roundtrip"
for round in $(seq 1 "${ROUNDS:-3}"); do
  echo "round $round"
  echo "  native:   $(CTEST_PLATFORM=NVIDIA timeout 120 "$rt" | grep _us)"
  [ -f "$base/libmirrorcl.so" ] &&
    echo "  base:     $(LD_PRELOAD="$base/libmirrorcl.so" MIRRORCL_PLATFORMS=NVIDIA timeout 120 "$rt" | grep _us)"
  echo "  MirrorCL: $(LD_PRELOAD="$gpu/libmirrorcl.so" MIRRORCL_PLATFORMS=NVIDIA timeout 120 "$rt" | grep _us)"
done
if [ -n "${TRACE:-}" ]; then
  rm -rf /tmp/rt-trace
  LD_PRELOAD="$gpu/libmirrorcl.so" MIRRORCL_PLATFORMS=NVIDIA MIRRORCL_TRACE=/tmp/rt-trace RT_ITERS=300 RT_BURST=300 \
    timeout 120 "$rt" | grep -E "_us|PASS|FAIL"
  "$gpu/bin/mirrorcl" trace /tmp/rt-trace -o "$out/roundtrip-trace.json" &&
    python3 "$gpu/bin/roundtrip-breakdown.py" "$out/roundtrip-trace.json"
fi
