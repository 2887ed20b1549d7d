#!/usr/bin/env bash
# The Khronos conformance suite's image suites, in wimpy mode (-w: a subset of sizes),
# natively on PoCL and on MirrorCL (one process; two MPI ranks with the rank-0 device and
# the rank-1 device selected), then the comparison of docs/conformance.md ("Images").
#
#   tests/conformance/run-cts-images.sh
#
# After tests/conformance/run-cts.sh, which checks out the pinned suite and configures
# its build in target/cts/build: this script adds the image binaries to it. Environment:
#   CTS_IMAGE_SUITES  suites to run (default: all seven below)
#   CTS_MODES         native,one,ranks0,ranks1 (default: all four)
#   CTS_TIMEOUT       seconds per suite and way (default 1800)
#   MIRRORCL_LIB      the library under test (default target/release/libmirrorcl.so)
# Logs: target/cts/image-logs/<way>/<suite>.log; comparison: target/cts/images.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/target/cts
BUILD=$OUT/build
LIB=${MIRRORCL_LIB:-$ROOT/target/release/libmirrorcl.so}
LIMIT=${CTS_TIMEOUT:-1800}
MODES=${CTS_MODES:-native,one,ranks0,ranks1}
declare -A BIN=(
  [get_info]=clGetInfo/test_cl_get_info
  [fill]=clFillImage/test_cl_fill_images
  [copy]=clCopyImage/test_cl_copy_images
  [read_write]=clReadWriteImage/test_cl_read_write_images
  [kernel_methods]=kernel_image_methods/test_kernel_image_methods
  [samplerless_reads]=samplerlessReads/test_samplerless_reads
  [streams]=kernel_read_write/test_image_streams
)
SUITES=${CTS_IMAGE_SUITES:-get_info fill copy read_write kernel_methods samplerless_reads streams}

[ -f "$BUILD/Makefile" ] || { echo "run-cts-images: run tests/conformance/run-cts.sh first"; exit 1; }
targets=()
for s in $SUITES; do targets+=("$(basename "${BIN[$s]}")"); done
make -C "$BUILD" -j"$(nproc)" "${targets[@]}" >"$OUT/build-images.log" 2>&1 ||
  { echo "run-cts-images: build failed, see $OUT/build-images.log"; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CL_DEVICE_TYPE=cpu
export POCL_CACHE_DIR=$OUT/pocl-cache
for mode in ${MODES//,/ }; do
  mkdir -p "$OUT/image-logs/$mode"
  for s in $SUITES; do
    bin=$BUILD/test_conformance/images/${BIN[$s]}
    log=$OUT/image-logs/$mode/$s.log
    start=$SECONDS
    pushd "$(dirname "$bin")" >/dev/null || exit 1
    case $mode in
      native) POCL_DEVICES="pthread pthread" CL_DEVICE_INDEX=0 timeout -k 20 "$LIMIT" "$bin" -w ;;
      one) POCL_DEVICES="pthread pthread" CL_DEVICE_INDEX=0 MIRRORCL_MPI=off LD_PRELOAD=$LIB \
        timeout -k 20 "$LIMIT" "$bin" -w ;;
      ranks0 | ranks1) timeout -k 20 "$LIMIT" mpirun -np 2 --oversubscribe -x POCL_DEVICES=pthread \
        -x CL_DEVICE_TYPE -x CL_DEVICE_INDEX="${mode#ranks}" -x POCL_CACHE_DIR -x LD_PRELOAD="$LIB" \
        "$bin" -w ;;
    esac >"$log" 2>&1
    rc=$?
    popd >/dev/null || exit 1
    printf '%-8s %-18s rc=%-4s %5ss\n' "$mode" "$s" "$rc" "$((SECONDS - start))"
  done
done
python3 "$ROOT/tests/conformance/cts-images-table.py" "$OUT/image-logs" | tee "$OUT/images.md"
