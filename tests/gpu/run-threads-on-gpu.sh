#!/usr/bin/env bash
# Host programs with one thread per device on the GPUs: cluster_threads in each mode,
# natively on NVIDIA in one process (every GPU) and on MirrorCL at 1 rank and at as many
# ranks as GPUs (one GPU each); then binomialoption single-threaded and threaded
# (APP_THREADS=1), natively and on MirrorCL. Run from the repository root with
# target/gpu/ prepared by tests/gpu/prepare.sh; $OUT receives the logs.
set -u
OUT="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
gpu=$PWD/target/gpu; lib=$gpu/libmirrorcl.so
ngpu=$(nvidia-smi -L | wc -l)
echo "== machine: $ngpu GPU(s)"; nvidia-smi -L
mpi() { # ranks, env..., program: the job's PASS count and, on failure, MirrorCL's words
  local n=$1; shift
  timeout 200 mpirun -np "$n" --oversubscribe --bind-to none -x LD_PRELOAD=$lib \
    -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_OUTPUT=all -x MIRRORCL_WAIT_TIMEOUT=90 "$@" > "$OUT/last.log" 2>&1
  local rc=$?
  echo "rc=$rc passed=$(grep -cE '^\[rank [0-9]+\] PASS' "$OUT/last.log")/$n $(grep -m1 -oE 'host threads (race|must take turns)' "$OUT/last.log")"
  [ $rc = 0 ] || grep -m3 -E "MirrorCL:|FAIL|MISMATCH" "$OUT/last.log" | cut -c1-400
}
for mode in turns concurrent; do
  printf 'native %-10s ' $mode
  THREADS_MODE=$mode OCL_ICD_FILENAMES=libnvidia-opencl.so.1 timeout 120 $gpu/bin/cluster_threads > "$OUT/native.log" 2>&1
  echo "rc=$? $(tail -1 "$OUT/native.log")"
  printf 'mirrorcl 1 rank %-10s ' $mode; mpi 1 -x THREADS_MODE=$mode $gpu/bin/cluster_threads
  printf 'mirrorcl %s ranks %-10s ' $ngpu $mode; mpi $ngpu -x THREADS_MODE=$mode $gpu/bin/cluster_threads
done
for mode in nested race; do
  printf 'mirrorcl %s ranks %-10s (must end the job) ' $ngpu $mode; mpi $ngpu -x THREADS_MODE=$mode $gpu/bin/cluster_threads
done
echo "== binomialoption, single-threaded and one thread per GPU"
for t in 0 1; do
  printf 'native  APP_THREADS=%s ' $t
  APP_THREADS=$t OCL_ICD_FILENAMES=libnvidia-opencl.so.1 timeout 200 $gpu/bin/binomialoption 2>&1 | grep -E "time|PASS|FAIL" | tr '\n' ' '; echo
  for n in 1 $ngpu; do
    printf 'mirrorcl %s rank(s) APP_THREADS=%s ' $n $t
    timeout 200 mpirun -np $n --oversubscribe --bind-to none -x LD_PRELOAD=$lib -x MIRRORCL_PLATFORMS=NVIDIA -x APP_THREADS=$t $gpu/bin/binomialoption 2>&1 | grep -E "time|PASS|FAIL" | tr '\n' ' '; echo
  done
done
