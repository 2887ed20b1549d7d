#!/usr/bin/env bash
# Several builds of the library side by side: every target/gpu/libs/NAME.so runs the
# IV.7.2 microbenchmark (µs per iteration, with rank 0's enqueue loop and its CPU time
# in brackets, with its system time and voluntary context switches per iteration) and the stencil (µs per step, plain / attached), interleaved with the
# hand-written twins in each round, so the builds are compared on one host in one run.
# A run that did not print PASS shows "FAILED:" before its time.
# RANKS ("2 4"; a 2-rank run sees GPUs 0 and 1), ROUNDS (3), ITERS (1000), APP_SIZE
# (1024), APP_STEPS (200). Run from the repository root with target/gpu/ prepared.
set -uo pipefail
gpu="$(pwd)/target/gpu"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
iters="${ITERS:-1000}"
st=(-x APP_SIZE="${APP_SIZE:-1024}" -x APP_STEPS="${APP_STEPS:-200}")
us() { grep -o "copies: [0-9.]* s" | awk -v n="$iters" '{printf "%.1f", $2 * 1e6 / n}'; }
enq() {
  awk '/enqueueing: / { e = $2; c = $6 }
       /enqueueing thread: / { s = $3; v = $10 }
       END { if (e != "") printf " [%s, cpu %s, sys %s, waits %s]", e, c, s, v }'
}
step() { grep -o "step_us=[0-9.]*" | head -1 | cut -d= -f2; }
# A run whose program did not report PASS, or reported FAIL, is marked, not only timed.
checked() {
  local o
  o=$("$@")
  if ! grep -q '^PASS' <<<"$o" || grep -q '^FAIL' <<<"$o"; then echo "FAILED:"; fi
  echo "$o"
}
for n in ${RANKS:-2 4}; do
  gpus=$(seq -s, 0 $((n - 1)))
  run() { CUDA_VISIBLE_DEVICES=$gpus timeout 120 mpirun -np "$n" --bind-to none "$@" 2>&1; }
  for round in $(seq 1 "${ROUNDS:-3}"); do
    a2a="twin $(run -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 -x CLUSTER_ITERS="$iters" \
      "$gpu/bin/alltoall_mpi" | us)"
    sten="twin $(run -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 "${st[@]}" "$gpu/bin/stencil_mpi" | step)"
    for lib in "$gpu"/libs/*.so; do
      name=$(basename "$lib" .so)
      common=(-x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA)
      o=$(checked run "${common[@]}" -x CLUSTER_ITERS="$iters" "$gpu/bin/cluster_alltoall")
      a2a="$a2a | $name $(grep -o '^FAILED:' <<<"$o")$(echo "$o" | us)$(echo "$o" | enq)"
      o=$(checked run "${common[@]}" -x APP_ATTACH=0 "${st[@]}" "$gpu/bin/stencil")
      p="$(grep -o '^FAILED:' <<<"$o")$(echo "$o" | step)"
      o=$(checked run "${common[@]}" -x APP_ATTACH=1 "${st[@]}" "$gpu/bin/stencil")
      a="$(grep -o '^FAILED:' <<<"$o")$(echo "$o" | step)"
      sten="$sten | $name $p / $a"
    done
    echo "ranks $n round $round IV.7.2 (µs/iteration): $a2a"
    echo "ranks $n round $round stencil (µs/step, plain / attached): $sten"
  done
done
