#!/usr/bin/env bash
# What the trace hooks cost with tracing off (and, for reference, on): the per-command
# overhead benchmark (mirrorcl-overhead, as benches/run-overhead.sh runs it) against two
# builds of libmirrorcl.so in one script, alternating the builds round by round
# (A B, B A, A B, ...) so that the machine's noise hits both alike.
#
#   benches/trace-off-cost.sh OLD_LIB [NEW_LIB] [ROUNDS] [-- mirrorcl-overhead args]
#
# OLD_LIB: a copy of the library built before the change; NEW_LIB: default
# target/release/libmirrorcl.so; ROUNDS: default 5. Each round also runs NEW_LIB with
# MIRRORCL_TRACE set (tracing on). Prints, per figure, the median over the rounds of
# MirrorCL's median µs for each build, and new/old. MIRRORCL_OVERHEAD_BIN: another
# mirrorcl-overhead binary to run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
old="${1:?usage: trace-off-cost.sh OLD_LIB [NEW_LIB] [ROUNDS] [-- args]}"
shift
new="$target_dir/release/libmirrorcl.so"
rounds=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then new="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="${MIRRORCL_OVERHEAD_BIN:-$target_dir/release/mirrorcl-overhead}"
pocl_icd="${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}"

work="$(mktemp -d "${TMPDIR:-/tmp}/mirrorcl-trace-cost.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for which in old new; do
    mkdir -p "$work/vendors-$which"
    cp "$pocl_icd" "$work/vendors-$which/"
done
cp "$old" "$work/old.so"
cp "$new" "$work/new.so"
printf '%s\n' "$work/old.so" >"$work/vendors-old/mirrorcl.icd"
printf '%s\n' "$work/new.so" >"$work/vendors-new/mirrorcl.icd"

args=("$@")
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
        echo "round $round: $which" >&2
        OCL_ICD_VENDORS="$work/vendors-$which/" "$bin" --json "$work/$which-$round.json" \
            "${args[@]}" >/dev/null
    done
    echo "round $round: new, MIRRORCL_TRACE on" >&2
    rm -rf "$work/trace"
    MIRRORCL_TRACE="$work/trace" OCL_ICD_VENDORS="$work/vendors-new/" "$bin" \
        --json "$work/traced-$round.json" "${args[@]}" >/dev/null
done

python3 - "$work" "$rounds" <<'EOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = {w: [json.load(open(f"{work}/{w}-{r}.json")) for r in range(1, rounds + 1)]
        for w in ("old", "new", "traced")}
print(f"MirrorCL median µs per command, median over {rounds} rounds (old/new alternating)")
print(f"{'figure':40} {'old':>10} {'new (off)':>10} {'new/old':>8} {'traced':>10} {'traced/old':>10}")
for name, fig in runs["old"][0]["figures"].items():
    med = {w: statistics.median(r["figures"][name]["mirrorcl"]["median_us"] for r in runs[w])
           for w in runs}
    print(f"{fig['description'][:40]:40} {med['old']:10.3f} {med['new']:10.3f} "
          f"{med['new'] / med['old']:8.3f} {med['traced']:10.3f} {med['traced'] / med['old']:10.3f}")
EOF
