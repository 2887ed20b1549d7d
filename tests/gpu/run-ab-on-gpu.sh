#!/usr/bin/env bash
# Two builds of the library side by side on the GPU machine: the benchmark harness's
# parts (micro and overhead by default) with target/gpu-base/libmirrorcl.so (A, e.g. the
# last release) and target/gpu/libmirrorcl.so (B, this build), alternating A B A B with
# the same harness and programs, so a change is judged against its base on one machine
# in one run. Prepare both with tests/gpu/prepare.sh (copy the base's target/gpu to
# target/gpu-base). PARTS, RANKS, ROUNDS override the defaults; summaries go to $OUT.
set -uo pipefail
gpu="$(pwd)/target/gpu"
base="$(pwd)/target/gpu-base"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi -L
parts="${PARTS:-micro,overhead}"
ranks="${RANKS:-1,2}"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for side in A B; do
    lib="$gpu/libmirrorcl.so"
    [ "$side" = A ] && lib="$base/libmirrorcl.so"
    name="$side-$round"
    "$gpu/bin/mirrorcl-bench" --vendor nvidia --bin-dir "$gpu/bin" --lib "$lib" \
      --overhead-bin "$gpu/bin/mirrorcl-overhead" --out "$out/$name" --parts "$parts" \
      --ranks "$ranks" --reps "${REPS:-3}" --label "$name" > "$out/$name.log" 2>&1
    echo "== $name ($lib): rc=$?"
    cat "$out/$name/summary.md" 2>/dev/null || tail -20 "$out/$name.log"
  done
done
