#!/usr/bin/env bash
# Measures MirrorCL's cost per command against the native platform (PoCL), in
# one process: builds release, registers the system PoCL ICD and
# target/release/libmirrorcl.so with the ICD loader through a temporary vendors
# directory, and runs mirrorcl-overhead with this script's arguments.
#
#   benches/run-overhead.sh [--iters N] [--bursts N] [--json PATH] ...
#   benches/run-overhead.sh --native-only     # PoCL alone; libmirrorcl not built
#
# Environment: MIRRORCL_BENCH_SKIP_BUILD=1 measures what target/release already
# holds instead of building first. POCL_ICD (default /etc/OpenCL/vendors/pocl.icd) names the native
# ICD file to copy. MirrorCL finds the vendors it wraps on its own
# (/etc/OpenCL/vendors or MIRRORCL_VENDORS), independently of this directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
pocl_icd="${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}"

native_only=0
for arg in "$@"; do
    [ "$arg" = "--native-only" ] && native_only=1
done

if [ "${MIRRORCL_BENCH_SKIP_BUILD:-0}" = 1 ]; then
    echo "run-overhead: MIRRORCL_BENCH_SKIP_BUILD=1: using the binaries already in $target_dir/release" >&2
elif [ "$native_only" = 1 ]; then
    cargo build --release -p mirrorcl-benches
else
    cargo build --release -p mirrorcl -p mirrorcl-benches
fi

bin="$target_dir/release/mirrorcl-overhead"
lib="$target_dir/release/libmirrorcl.so"

if [ ! -f "$pocl_icd" ]; then
    echo "run-overhead: native ICD file $pocl_icd not found (set POCL_ICD)" >&2
    exit 2
fi

vendors="$(mktemp -d "${TMPDIR:-/tmp}/mirrorcl-vendors.XXXXXX")"
trap 'rm -rf "$vendors"' EXIT
cp "$pocl_icd" "$vendors/"
if [ "$native_only" = 0 ]; then
    if [ ! -f "$lib" ]; then
        echo "run-overhead: $lib was not built" >&2
        exit 2
    fi
    printf '%s\n' "$lib" >"$vendors/mirrorcl.icd"
fi

echo "run-overhead: OCL_ICD_VENDORS=$vendors/ ($(cd "$vendors" && echo *))" >&2
OCL_ICD_VENDORS="$vendors/" "$bin" "$@"
