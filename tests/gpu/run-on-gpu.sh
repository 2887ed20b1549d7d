#!/usr/bin/env bash
# Runs on the GPU machine (NVIDIA OpenCL + PoCL), from the repository root, with
# target/gpu/ prepared by tests/gpu/prepare.sh. Writes its log to $OUT (or ./gpu-out).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
log="$out/gpu.log"
exec > >(tee "$log") 2>&1

# NVIDIA's ICD is installed but not registered.
if [ ! -f /etc/OpenCL/vendors/nvidia.icd ]; then
  echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
fi
echo "== machine"; nvidia-smi -L; grep -m1 "model name" /proc/cpuinfo; ls /etc/OpenCL/vendors
echo "== native platforms"; clinfo -l
lib="$gpu/libmirrorcl.so"
export POCL_DEVICES=pthread
echo "== MirrorCL over every vendor (PoCL CPU + NVIDIA GPU in one platform)"
LD_PRELOAD="$lib" clinfo -l

run() { # label, env..., program
  local label="$1"; shift
  local start=$(date +%s%N)
  env "$@" MIRRORCL_EXPECT=1 LD_PRELOAD="$lib" timeout 300 "$gpu/bin/$prog" > "$out/$prog.$label.out" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%-16s %-10s rc=%-3s %6d ms  %s\n' "$prog" "$label" "$rc" "$ms" "$(tail -n 1 "$out/$prog.$label.out")"
  [ "$rc" = 0 ] || grep -A2 "CHECK FAILED" "$out/$prog.$label.out" | head -30
}
for prog in ${PROGRAMS:-vecadd_multi platform_device context buffers program_kernel events errors pingpong wait_paths callback_enqueues}; do
  [ -x "$gpu/bin/$prog" ] || continue
  run gpu-only MIRRORCL_PLATFORMS=NVIDIA
  run cpu_gpu MIRRORCL_PLATFORMS=
done
echo "== vecadd_multi output, CPU + GPU"; cat "$out/vecadd_multi.cpu_gpu.out"

echo "== per-command overhead against NVIDIA's OpenCL, one process"
vend=$(mktemp -d)
echo "libnvidia-opencl.so.1" > "$vend/nvidia.icd"
echo "$lib" > "$vend/mirrorcl.icd"
MIRRORCL_PLATFORMS=NVIDIA OCL_ICD_VENDORS="$vend/" timeout 300 "$gpu/bin/mirrorcl-overhead" --native NVIDIA --json "$out/overhead-nvidia.json"
