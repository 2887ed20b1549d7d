#!/usr/bin/env bash
# The simulator against real runs: the IV.7.2 microbenchmark (tests/c/cluster_alltoall.c)
# under mpirun on 1..8 local ranks, one PoCL device each, in the three variants, with
# MIRRORCL_STATS; then mirrorcl-sim on the same rank counts. Prints, per rank count and
# variant, whether every rank's counts equal the simulator's, the real iteration time
# next to the model's (docs/benchmarks.md, "The thesis' three variants at scale"), and
# the real and simulated scheduling time per iteration.
#
# Usage: benches/run-sim-check.sh [--ranks 1,2,3,4,5,6,7,8] [--iters 100]
#          [--variants decentralization,attach,full] [mirrorcl-sim model options:
#          --command-us X --latency-us Y --enqueue-us Z]
# Needs a core per rank for the times to mean anything (PoCL's threads, the issuer and
# MPI's progress thread share them); python3 for the JSON. SIM_CHECK_PREBUILT=DIR takes
# the library and programs from a tests/gpu/prepare.sh folder and builds nothing (the
# GPU machine has no Rust); MIRRORCL_PLATFORMS passes on (Portable: PoCL only).
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=1,2,3,4,5,6,7,8
iters=100
variants=decentralization,attach,full
model=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --variants) variants="$2"; shift 2 ;;
    --command-us|--latency-us|--enqueue-us) model+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run-sim-check: unknown option $1" >&2; exit 2 ;;
  esac
done
out=target/sim-check
mkdir -p "$out"
prebuilt="${SIM_CHECK_PREBUILT:-}"
if [ -n "$prebuilt" ]; then
  lib="$prebuilt/libmirrorcl.so" sim="$prebuilt/bin/mirrorcl-sim" prog="$prebuilt/bin/cluster_alltoall"
else
  cargo build --release -p mirrorcl -p mirrorcl-benches >/dev/null
  cc -O2 -std=c11 -pthread -Itests/c -o "$out/cluster_alltoall" tests/c/cluster_alltoall.c -lOpenCL -lm
  lib="$(pwd)/target/release/libmirrorcl.so" sim=target/release/mirrorcl-sim prog="$out/cluster_alltoall"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; PoCL $(dpkg-query -W -f='${Version}' pocl-opencl-icd 2>/dev/null || echo '?'); $iters iterations"
for n in ${ranks//,/ }; do
  for v in ${variants//,/ }; do
    json="$out/real-$n-$v.json"
    rm -f "$json"
    mpirun -np "$n" --oversubscribe --bind-to none -x LD_PRELOAD="$lib" -x POCL_DEVICES=pthread \
      -x POCL_KERNEL_CACHE=0 -x MIRRORCL_VARIANT="$v" -x MIRRORCL_STATS="$(pwd)/$json" \
      -x MIRRORCL_PLATFORMS="${MIRRORCL_PLATFORMS:-}" \
      -x CLUSTER_ITERS="$iters" "$prog" > "$out/real-$n-$v.out" 2>&1 \
      || { echo "cluster_alltoall, $n ranks, $v: failed"; tail "$out/real-$n-$v.out"; exit 1; }
  done
  "$sim" --ranks "$n" --iters "$iters" --variants "$variants" --per-rank \
    --csv "$out/sim-$n.csv" "${model[@]}" > "$out/sim-$n.txt"
done
python3 - "$out" "$ranks" "$variants" "$iters" <<'PY'
import csv, json, re, sys
out, ranks, variants, iters = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), int(sys.argv[4])
keys = ["commands_created", "commands_not_enqueued", "commands_scheduled", "commands_issued",
        "local_copies", "sends", "receives", "bytes_sent", "bytes_received"]
print()
print("| ranks | variant | counts equal (every rank) | real µs/iter | model µs/iter | real / model | model + enqueue µs/iter | real scheduling µs/iter (median rank) | simulated scheduling µs/iter |")
print("|---|---|---|---|---|---|---|---|---|")
for n in ranks:
    rows = {r["variant"]: r for r in csv.DictReader(open(f"{out}/sim-{n}.csv"))}
    # The simulator's per-rank lines, in the order of the variants.
    blocks, cur = [], None
    for line in open(f"{out}/sim-{n}.txt"):
        if line.startswith("| " + n + " |") or line.startswith("| " + n + " ("):
            cur = []
            blocks.append(cur)
        elif line.startswith("rank ") and cur is not None:
            cur.append(dict(kv.split("=") for kv in line.split()[2:]))
    for v, sim in zip(variants, blocks):
        real = json.load(open(f"{out}/real-{n}-{v}.json"))["ranks"]
        same = len(real) == len(sim) and all(int(s[k]) == r[k] for r, s in zip(real, sim) for k in keys)
        text = open(f"{out}/real-{n}-{v}.out").read()
        m = re.search(r"([0-9.]+) s \(attach", text)
        real_us = float(m.group(1)) / iters * 1e6 if m else float("nan")
        sched = sorted(r["scheduling_ns"] for r in real)[len(real) // 2] / iters / 1e3
        row = rows[v]
        model = float(row["model_us_per_iter"])
        print(f"| {n} | {v} | {'yes' if same else '**no**'} | {real_us:.1f} | {model:.1f} | "
              f"{real_us / model if model else float('nan'):.2f} | {float(row['model_with_enqueue_us_per_iter']):.1f} | "
              f"{sched:.1f} | {float(row['scheduling_us_per_iter']):.1f} |")
PY
