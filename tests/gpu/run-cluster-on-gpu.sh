#!/usr/bin/env bash
# Cluster mode on the GPU machine: two MPI ranks on one host, each owning one GPU
# through NVIDIA's OpenCL (MirrorCL splits the host's GPUs by node-local rank), running
# the test programs; then each rank with its GPU and its own PoCL CPU device. Run from
# the repository root with target/gpu/ prepared by tests/gpu/prepare.sh; writes its log
# to $OUT (or ./gpu-out).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
exec > >(tee "$out/cluster.log") 2>&1

if [ ! -f /etc/OpenCL/vendors/nvidia.icd ]; then
  echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
fi
echo "== machine"; nvidia-smi -L; grep -m1 "model name" /proc/cpuinfo; mpirun --version | head -1
lib="$gpu/libmirrorcl.so"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks="${RANKS:-2}"

run() { # label, devices in all, program, env...
  local label="$1" ndev="$2" prog="$3"; shift 3
  local start=$(date +%s%N)
  timeout 300 mpirun -np "$ranks" --bind-to none --output-filename "$out/$prog.$label" \
    -x LD_PRELOAD="$lib" -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES="$ndev" \
    -x POCL_DEVICES=pthread -x POCL_KERNEL_CACHE=0 -x MIRRORCL_WAIT_TIMEOUT=120 -x MIRRORCL_OUTPUT=raw "$@" \
    "$gpu/bin/$prog" > "$out/$prog.$label.mpirun" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local passed=$(cat "$out/$prog.$label"/*/rank.*/stdout 2>/dev/null | grep -c "^PASS $prog")
  printf '%-16s %-9s rc=%-3s %6d ms  ranks passed: %s/%s\n' "$prog" "$label" "$rc" "$ms" "$passed" "$ranks"
  [ "$rc" = 0 ] || { grep -h -A2 "CHECK FAILED\|MirrorCL:" "$out/$prog.$label"/*/rank.*/std* | head -20; tail -5 "$out/$prog.$label.mpirun"; }
}

echo "== device table, GPUs only"
mpirun -np "$ranks" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x MIRRORCL_SHOW_DEVICES=1 "$gpu/bin/platform_device" 2>&1 | grep -A9 "MirrorCL: $ranks rank"
echo "== test programs: $ranks ranks, one GPU each (NVIDIA OpenCL)"
for prog in ${PROGRAMS:-cluster_vecadd cluster_turns cluster_stencil cluster_control cluster_build cluster_big cluster_attach cluster_alltoall cluster_threads vecadd_multi platform_device context buffers program_kernel events errors pingpong cluster_hybrid}; do
  [ -x "$gpu/bin/$prog" ] || continue
  run gpu "$ranks" "$prog" -x MIRRORCL_PLATFORMS=NVIDIA
done
echo "== build report lines, rank 0 and rank 1 (must be identical)"
for r in 0 1; do grep -h "^build-log\|^wg\|^device" "$out/cluster_build.gpu"/*/rank.$r/stdout | md5sum; done
grep -h "^build-log\|^wg\|^device" "$out/cluster_build.gpu"/*/rank.0/stdout
echo "== cluster_big (2 GiB + 64 MiB from GPU 0 on rank 0 to GPU 1 on rank 1), rank 1"
cat "$out/cluster_big.gpu"/*/rank.1/stdout
echo "== the thesis' three variants on the GPUs: all-to-all copies (100 iterations) and the stencil with attached buffers"
for v in decentralization attach full; do
  run "$v" "$ranks" cluster_alltoall -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_VARIANT=$v -x CLUSTER_ITERS=100 -x MIRRORCL_STATS=1
  grep -h "iterations" "$out/cluster_alltoall.$v"/*/rank.0/stdout
  grep -h "commands_\|bytes_sent\|scheduling_ns" "$out/cluster_alltoall.$v"/*/rank.0/stderr
  run "$v" "$ranks" cluster_stencil -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_VARIANT=$v -x CLUSTER_ATTACH=1
done
echo "== replicas: clock-seeded program, one copy of the output (mirrorcl run), divergence caught"
"$gpu/bin/mirrorcl" doctor --lib "$lib" || true
MIRRORCL_PLATFORMS=NVIDIA POCL_KERNEL_CACHE=0 REPLICA_FILE="$out/replica.txt" \
  "$gpu/bin/mirrorcl" run -n "$ranks" --lib "$lib" -- "$gpu/bin/cluster_replica"
echo "lines in the file the program appended to: $(wc -l < "$out/replica.txt")"
MIRRORCL_PLATFORMS=NVIDIA MIRRORCL_VERIFY=1 timeout 120 "$gpu/bin/mirrorcl" run -n "$ranks" --lib "$lib" \
  -- "$gpu/bin/cluster_diverge" 2>&1 | grep -m3 "diverged\|ranks \["
echo "== applications (benches/apps), $ranks ranks, one GPU each"
for app in blackscholes binomialoption cp nbody matrixmul ep; do
  run gpu "$ranks" "$app" -x MIRRORCL_PLATFORMS=NVIDIA
  grep -h "^TIME" "$out/$app.gpu"/*/rank.0/stdout
done
echo "== test programs: $ranks ranks, each with its GPU and its own PoCL CPU device"
for prog in ${CPU_GPU_PROGRAMS:-cluster_vecadd cluster_turns cluster_stencil cluster_control vecadd_multi buffers}; do
  run cpu_gpu "$((ranks * 2))" "$prog" -x MIRRORCL_PLATFORMS=
done
echo "== a wait that cannot complete (deadline 5 s)"
start=$(date +%s)
timeout 120 mpirun -np "$ranks" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x MIRRORCL_WAIT_TIMEOUT=5 "$gpu/bin/cluster_timeout" 2>&1 | grep "MirrorCL" | head -6
echo "ended after $(( $(date +%s) - start )) s"
