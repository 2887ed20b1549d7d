#!/usr/bin/env bash
# Where each rank's threads run: the IV.7.2 microbenchmark and its twin at RANKS (4)
# under several mpirun bindings, interleaved, ROUNDS (3) rounds of ITERS (500)
# iterations. MirrorCL's threads of one rank (the program's, the issuer, the progress
# thread) share events and queues; across sockets every shared cache line is a remote
# access. Prints the machine's topology first. Run from the repository root with
# target/gpu/ prepared (tests/gpu/prepare.sh).
set -uo pipefail
gpu="$(pwd)/target/gpu"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n="${RANKS:-4}" iters="${ITERS:-500}"
lscpu | grep -E "^(Model name|Socket|NUMA node|Core|Thread|CPU\(s\))" || true
nvidia-smi topo -m 2>/dev/null | head -12 || true
us() { grep -o "copies: [0-9.]* s" | awk -v n="$iters" '{printf "%.1f", $2 * 1e6 / n}'; }
enq() { grep -o "enqueueing: [0-9.]* us per iteration, [0-9.]*" | awk '{printf " [%s, cpu %s]", $2, $6}'; }
IFS=';' read -ra binds <<<"${BINDS:---bind-to none;--map-by ppr:$((n / 2)):socket --bind-to socket;--map-by numa --bind-to numa}"
gpus=$(seq -s, 0 $((n - 1)))
for round in $(seq 1 "${ROUNDS:-3}"); do
  for b in "${binds[@]}"; do
    # shellcheck disable=SC2086
    run() { CUDA_VISIBLE_DEVICES=$gpus timeout 120 mpirun -np "$n" $b --report-bindings "$@" 2>&1; }
    twin=$(run -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 -x CLUSTER_ITERS="$iters" "$gpu/bin/alltoall_mpi")
    [ "$round" = 1 ] && grep -o "rank [0-9]* bound to.*" <<<"$twin" | cut -c1-100
    line="twin $(us <<<"$twin")"
    for lib in "$gpu"/libs/*.so; do
      o=$(run -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA -x CLUSTER_ITERS="$iters" "$gpu/bin/cluster_alltoall")
      grep -q '^PASS' <<<"$o" || line="$line FAILED:"
      line="$line | $(basename "$lib" .so) $(us <<<"$o")$(enq <<<"$o")"
    done
    echo "round $round [$b] IV.7.2 at $n ranks (µs/iteration): $line"
  done
done
