#!/usr/bin/env bash
# Every test program and application on a one-GPU host: natively on NVIDIA's platform
# and through MirrorCL in one process (NVIDIA alone), then at 2 and 3 ranks, rank 0 with
# the GPU and a PoCL CPU device, the others with a PoCL device each (a GPU is owned by
# one rank). Prints each program's outcome, with every rank's PASS counted, and checks
# that cluster_args' answer lines are the same on every rank. Natively NVIDIA fails some
# programs on error codes the specification names: those lines are for reading, the
# MirrorCL ones must all pass. Run from the repository root with target/gpu/ prepared;
# logs go to $OUT (or ./gpu-out).
set -uo pipefail
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
exec > >(tee "$out/all.log") 2>&1
gpu="$(pwd)/target/gpu"
lib="$gpu/libmirrorcl.so"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 POCL_KERNEL_CACHE=0
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
single="vecadd_multi platform_device context buffers program_kernel events errors pingpong
  wait_paths callback_enqueues lifetimes images memory_bounded threads_one_process
  vendor_fidelity cluster_args cluster_copies cluster_images cluster_vecadd cluster_attach
  cluster_fail cluster_hostfail"
cluster="cluster_turns cluster_stencil cluster_control cluster_build cluster_big
  cluster_alltoall cluster_threads cluster_hybrid"
apps="blackscholes binomialoption cp nbody matrixmul ep"
echo "== one process: NVIDIA's platform | MirrorCL over NVIDIA"
for p in $single; do
  OCL_ICD_FILENAMES=libnvidia-opencl.so.1 timeout 120 "$gpu/bin/$p" > "$out/native.$p" 2>&1
  a=$?
  MIRRORCL_EXPECT=1 MIRRORCL_PLATFORMS=NVIDIA LD_PRELOAD="$lib" timeout 120 "$gpu/bin/$p" \
    > "$out/mirrorcl.$p" 2>&1
  b=$?
  printf '%-20s native rc=%-3s | MirrorCL rc=%-3s %s\n' "$p" "$a" "$b" "$(tail -n 1 "$out/mirrorcl.$p")"
  [ "$b" = 0 ] || grep -m6 -A1 "CHECK FAILED\|panicked" "$out/mirrorcl.$p"
done
ranks() { # RANKS PROGRAM: rank 0 GPU + PoCL, the others PoCL
  local n=$1 p=$2 dir="$out/r$1.$2"
  rm -rf "$dir"
  timeout 200 mpirun -np "$n" --bind-to none --output-filename "$dir" -x LD_PRELOAD="$lib" \
    -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES=$((n + 1)) -x POCL_DEVICES=pthread \
    -x MIRRORCL_PLATFORMS= -x MIRRORCL_WAIT_TIMEOUT=100 -x MIRRORCL_OUTPUT=raw "$gpu/bin/$p" \
    > "$dir.mpirun" 2>&1
  local rc=$?
  local passed
  passed=$(cat "$dir"/*/rank.*/stdout 2>/dev/null | grep -c "^PASS $p")
  printf '%-20s %s ranks rc=%-3s passed %s/%s %s\n' "$p" "$n" "$rc" "$passed" "$n" \
    "$(grep -h '^TIME' "$dir"/*/rank.0/stdout 2>/dev/null | head -n 1)"
  [ "$rc" = 0 ] || { grep -h -m6 -A2 "CHECK FAILED\|panicked\|MirrorCL:" "$dir"/*/rank.*/std* | head -20; }
  if [ "$p" = cluster_args ]; then
    for r in $(seq 1 $((n - 1))); do
      cmp -s <(grep '^arg' "$dir"/*/rank.0/stdout) <(grep '^arg' "$dir"/*/rank.$r/stdout) ||
        echo "cluster_args: rank $r answered otherwise than rank 0"
    done
  fi
}
echo "== 2 ranks"
for p in $single $cluster $apps; do ranks 2 "$p"; done
echo "== 3 ranks"
for p in cluster_args cluster_vecadd cluster_stencil cluster_copies cluster_alltoall events callback_enqueues; do
  ranks 3 "$p"
done
