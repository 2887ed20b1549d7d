#!/usr/bin/env bash
# The thesis' three variants side by side (Tables IV.6 and IV.7): per rank, the commands
# the program creates, those left out by the queueing optimisation, those scheduled and
# those issued to the rank's own devices, plus the time of the all-to-all copy loop.
# Runs cluster_alltoall (the IV.7.2 microbenchmark, every device's 16-byte buffer copied
# into every device's buffer, checked) and cluster_attach (private attached buffers) on
# 1-4 local ranks with 1 PoCL device each; prints a Markdown table.
# Usage: benches/run-variants.sh [ITERS]   (needs python3 for the JSON)
set -euo pipefail
cd "$(dirname "$0")/.."
iters="${1:-100}"
cargo build --release -p mirrorcl >/dev/null
out=target/variants
mkdir -p "$out"
for p in cluster_alltoall cluster_attach; do
  cc -O2 -std=c11 -pthread -Itests/c -o "$out/$p" "tests/c/$p.c" -lOpenCL -lm
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lib="$(pwd)/target/release/libmirrorcl.so"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; PoCL $(dpkg-query -W -f='${Version}' pocl-opencl-icd 2>/dev/null || echo '?'); $iters iterations"
echo
echo "| program | ranks | variant | created / rank | not enqueued / rank | scheduled / rank | issued / rank | scheduling ms (rank 0) | loop s |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in cluster_alltoall cluster_attach; do
  for ranks in 1 2 3 4; do
    for v in decentralization attach full; do
      json="$out/$p-$ranks-$v.json"
      rm -f "$json"
      mpirun -np "$ranks" --oversubscribe --bind-to none -x LD_PRELOAD="$lib" -x POCL_DEVICES=pthread \
        -x POCL_KERNEL_CACHE=0 -x MIRRORCL_VARIANT="$v" -x MIRRORCL_STATS="$(pwd)/$json" \
        -x CLUSTER_ITERS="$iters" "$out/$p" > "$out/$p-$ranks-$v.out" 2>&1 || { echo "$p $ranks $v failed"; tail "$out/$p-$ranks-$v.out"; exit 1; }
      secs=$(grep -m1 -o '[0-9.]* s (attach' "$out/$p-$ranks-$v.out" | cut -d' ' -f1 || true)
      python3 - "$json" "$p" "$ranks" "$v" "${secs:--}" <<'PY'
import json, sys
path, prog, ranks, variant, secs = sys.argv[1:]
r = json.load(open(path))["ranks"]
def per(key):
    vals = sorted({f[key] for f in r})
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"
print(f"| {prog} | {ranks} | {variant} | {per('commands_created')} | {per('commands_not_enqueued')} | "
      f"{per('commands_scheduled')} | {per('commands_issued')} | {r[0]['scheduling_ns']/1e6:.1f} | {secs} |")
PY
    done
  done
done
