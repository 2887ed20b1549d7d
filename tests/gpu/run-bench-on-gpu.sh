#!/usr/bin/env bash
# The benchmark harness on the GPU machine: mirrorcl-bench with NVIDIA's OpenCL, one GPU
# per rank, against NVIDIA's OpenCL directly and hand-written MPI. Run from the
# repository root with target/gpu/ prepared by tests/gpu/prepare.sh; arguments go to
# mirrorcl-bench (e.g. --parts micro,overhead,bandwidth --ranks 1,2,4; the stencil against
# its hand-written twin: --parts stencil --ranks 2,4 --reps 5 --sizes large). Results
# accumulate in $BENCH_RESULTS (default /tmp/mirrorcl-bench-gpu, so that parts run in
# separate calls add up) and are archived to $OUT/bench-NAME.tgz (or ./gpu-out/).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
res="${BENCH_RESULTS:-/tmp/mirrorcl-bench-gpu}"
mkdir -p "$out" "$res"
# NVIDIA's ICD is installed but not registered.
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi -L
"$gpu/bin/mirrorcl-bench" --vendor nvidia --bin-dir "$gpu/bin" --lib "$gpu/libmirrorcl.so" \
  --overhead-bin "$gpu/bin/mirrorcl-overhead" --out "$res" "$@" 2>&1 | tee -a "$res/bench.log"
rc=${PIPESTATUS[0]}
# One archive (few files come back from the machine), every run's log included.
tar czf "$out/bench-$(basename "$res").tgz" --exclude=./vendors-native --exclude=./vendors-overhead -C "$res" .
exit "$rc"
