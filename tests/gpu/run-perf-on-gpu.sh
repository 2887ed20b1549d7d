#!/usr/bin/env bash
# Samples rank 0 of a MirrorCL program on the GPU machine with `perf` (target/perfkit,
# from tests/gpu/perfkit.sh) and writes per-thread reports to $OUT: the share of each
# thread (the program's, the issuers', the progress thread's), each thread's hottest
# functions, and with CALLS=1 the call graphs of the program's thread. Usage:
#   RANKS=4 bash target/gpu/run-perf-on-gpu.sh cluster_alltoall -x CLUSTER_ITERS=20000
# Extra arguments after the program go to mpirun (-x VAR=value). DELAY_MS (2500) skips
# the start-up (platform, contexts, kernels compiled) before sampling.
set -uo pipefail
gpu="$(pwd)/target/gpu"; kit="$(pwd)/target/perfkit"
out="${OUT:-$(pwd)/gpu-out}"; mkdir -p "$out"
prog="$1"; shift
if command -v nvidia-smi > /dev/null && [ ! -f /etc/OpenCL/vendors/nvidia.icd ]; then
  echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
opts="-F ${FREQ:-3000} -D ${DELAY_MS:-2500}"
[ "${CALLS:-0}" = 1 ] && opts="-F ${FREQ:-800} -D ${DELAY_MS:-2500} --call-graph dwarf,32768"
wrap=$(mktemp)
cat > "$wrap" <<EOW
#!/bin/bash
if [ "\$OMPI_COMM_WORLD_RANK" = "0" ]; then
  pre=\$LD_PRELOAD; unset LD_PRELOAD
  exec env LD_LIBRARY_PATH=$kit/lib $kit/perf record -e cpu-clock $opts -o /tmp/rank0.perf \
    -- env LD_LIBRARY_PATH= LD_PRELOAD=\$pre "\$@"
fi
exec "\$@"
EOW
chmod +x "$wrap"
mpirun -np "${RANKS:-2}" --bind-to none -x LD_PRELOAD="$gpu/libmirrorcl.so" \
  -x MIRRORCL_PLATFORMS=NVIDIA "$@" "$wrap" "$gpu/bin/$prog" 2>&1 | tail -5
perf() { env LD_LIBRARY_PATH="$kit/lib" "$kit/perf" "$@"; }
perf report -i /tmp/rank0.perf --sort comm --no-children -g none 2>/dev/null \
  | grep -v "^#" | grep -v "^$" | tee "$out/threads.txt"
for comm in "${prog:0:15}" mirrorcl-issuer mirrorcl-progre; do
  perf report -i /tmp/rank0.perf --comm "$comm" --no-children --sort dso,sym -g none \
    2>/dev/null | grep -v "^#" | grep -v "^$" | head -80 > "$out/flat-$comm.txt"
done
if [ "${CALLS:-0}" = 1 ]; then
  perf report -i /tmp/rank0.perf --comm "${prog:0:15}" --children --sort sym -g none \
    2>/dev/null | grep -v "^$" | head -300 > "$out/children-$prog.txt"
fi
ls "$out"
