#!/usr/bin/env bash
# The Khronos conformance suite (OpenCL-CTS), its OpenCL 1.2 subset, natively on PoCL and
# on MirrorCL (one process; two MPI ranks with the rank-0 device and the rank-1 device
# selected), then the table of docs/conformance.md.
#
#   tests/conformance/run-cts.sh CTS_DIR [HEADERS_DIR [SPIRV_HEADERS_DIR]]
#
# CTS_DIR: a clone of https://github.com/KhronosGroup/OpenCL-CTS (CTS_PIN is checked out).
# HEADERS_DIR: a clone of https://github.com/KhronosGroup/OpenCL-Headers (HEADERS_PIN is
# checked out; Debian 12's opencl-headers are too old for this CTS).
# SPIRV_HEADERS_DIR: a clone of https://github.com/KhronosGroup/SPIRV-Headers (SPIRV_PIN;
# Debian 12's spirv-headers are too old for test_api).
#
# Environment:
#   CTS_SUITES   suites to run (default: all ten below)
#   CTS_MODES    native,one,ranks0,ranks1 (default: all four)
#   CTS_TIMEOUT  seconds per suite and mode before it is killed and recorded (default 1200)
#   CTS_NO_BUILD 1: do not configure/build (binaries already in target/cts/build)
#   MIRRORCL_LIB the library under test (default target/release/libmirrorcl.so)
# Logs: target/cts/logs/<mode>/<suite>.log (+ .rc, .secs); table: target/cts/table.md.
set -uo pipefail

CTS_PIN=b8f8906c251926b1b3679323bfbf3df730b40fb8     # 2026-08-18, "add SPIR-V tests for ... access chain"
HEADERS_PIN=15b536b7fbe1098cea462a27db496b287ac89b63 # 2026-08-13
SPIRV_PIN=0d25db97cb9b8f725e4c95e4553001710e7fc39d   # 2026-08-14

# suite name -> binary (relative to the build's test_conformance/)
declare -A BIN=(
  [basic]=basic/test_basic
  [api]=api/test_api
  [buffers]=buffers/test_buffers
  [events]=events/test_events
  [compiler]=compiler/test_compiler
  [multiple_device_context]=multiple_device_context/test_multiples
  [device_partition]=device_partition/test_device_partition
  [computeinfo]=computeinfo/test_computeinfo
  [mem_host_flags]=mem_host_flags/test_mem_host_flags
  [profiling]=profiling/test_profiling
)
ALL_SUITES="basic api buffers events compiler multiple_device_context device_partition computeinfo mem_host_flags profiling"

[ $# -ge 1 ] || { sed -n 2,20p "$0"; exit 2; }
CTS_DIR=$(realpath "$1")
HEADERS_DIR=${2:+$(realpath "$2")}
SPIRV_DIR=${3:+$(realpath "$3")}
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/target/cts
BUILD=$OUT/build
LIB=${MIRRORCL_LIB:-$ROOT/target/release/libmirrorcl.so}
SUITES=${CTS_SUITES:-$ALL_SUITES}
MODES=${CTS_MODES:-native,one,ranks0,ranks1}
LIMIT=${CTS_TIMEOUT:-1200}
mkdir -p "$OUT"

# A clone whose blobs are partly absent (a partial mirror) still checks out the sources:
# the missing files are the SPIR test archives, which these suites do not use.
checkout() { # dir commit
  local dir=$1 pin=$2
  [ "$(git -C "$dir" rev-parse HEAD)" = "$pin" ] && git -C "$dir" diff --quiet HEAD -- . ':(exclude)test_conformance/spir' && return 0
  git -C "$dir" -c advice.detachedHead=false checkout -q --detach "$pin" 2>/dev/null && return 0
  git -C "$dir" reset -q "$pin" &&
    git -C "$dir" restore --source="$pin" -- . ':(exclude)test_conformance/spir/*.zip'
}

if [ "${CTS_NO_BUILD:-0}" != 1 ]; then
  checkout "$CTS_DIR" "$CTS_PIN" || { echo "run-cts: cannot check out $CTS_PIN in $CTS_DIR"; exit 1; }
  if [ -n "$HEADERS_DIR" ]; then
    [ -d "$HEADERS_DIR/.git" ] && { checkout "$HEADERS_DIR" "$HEADERS_PIN" || exit 1; }
    CL_INC=$HEADERS_DIR
  else
    CL_INC=/usr/include
  fi
  if [ -n "$SPIRV_DIR" ]; then
    [ -d "$SPIRV_DIR/.git" ] && { checkout "$SPIRV_DIR" "$SPIRV_PIN" || exit 1; }
  else
    SPIRV_DIR=/usr
  fi
  missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v spirv-as >/dev/null || missing+=(spirv-tools) # test_compiler assembles SPIR-V
  [ -f "$SPIRV_DIR/include/spirv/unified1/spirv.core.grammar.json" ] || missing+=(spirv-headers)
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  cmake -S "$CTS_DIR" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCL_INCLUDE_DIR="$CL_INC" \
    -DCL_LIB_DIR=/usr/lib/x86_64-linux-gnu -DSPIRV_INCLUDE_DIR="$SPIRV_DIR" -DOPENCL_LIBRARIES=OpenCL \
    >"$OUT/cmake.log" 2>&1 || { echo "run-cts: cmake failed, see $OUT/cmake.log"; exit 1; }
  targets=()
  for s in $SUITES; do targets+=("$(basename "${BIN[$s]}")"); done
  make -C "$BUILD" -j"$(nproc)" "${targets[@]}" >"$OUT/build.log" 2>&1 ||
    { echo "run-cts: build failed, see $OUT/build.log"; exit 1; }
fi
[ -f "$LIB" ] || { echo "run-cts: $LIB missing (cargo build --release -p mirrorcl)"; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Every mode sees two PoCL CPU devices: natively and in one process both of this process,
# on two ranks one of each rank. The CTS takes the device of index CL_DEVICE_INDEX among
# the CPU devices of the first platform (computeinfo accepts no "all").
export CL_DEVICE_TYPE=cpu
export POCL_CACHE_DIR=$OUT/pocl-cache
mkdir -p "$POCL_CACHE_DIR"

# One run of a suite's binary, its output appended to $log.log and ended by a line
# "### run-cts: rc=N" (the parser reads it). Arguments: sub-test names (none: all).
run_segment() { # mode bin log limit [tests...]
  local mode=$1 bin=$2 log=$3 limit=$4 rc
  shift 4
  case $mode in
    native)
      POCL_DEVICES="pthread pthread" CL_DEVICE_INDEX=0 \
        timeout -k 20 "$limit" "$bin" "$@" >>"$log.log" 2>&1 ;;
    one)
      POCL_DEVICES="pthread pthread" CL_DEVICE_INDEX=0 MIRRORCL_MPI=off LD_PRELOAD=$LIB \
        timeout -k 20 "$limit" "$bin" "$@" >>"$log.log" 2>&1 ;;
    ranks0 | ranks1)
      timeout -k 20 "$limit" mpirun -np 2 --oversubscribe \
        -x POCL_DEVICES=pthread -x CL_DEVICE_TYPE -x CL_DEVICE_INDEX="${mode#ranks}" \
        -x POCL_CACHE_DIR -x LD_PRELOAD="$LIB" "$bin" "$@" >>"$log.log" 2>&1 ;;
  esac
  rc=$?
  echo "### run-cts: rc=$rc" >>"$log.log"
  return $rc
}

# A suite in one mode. After a crash (or an abort: mpirun's code is 1 then, as for a
# failed sub-test) the suite goes on with the sub-tests not reached, each crash recorded
# against the sub-test that was running, within the one time limit; a timeout ends it.
run_one() { # mode suite
  local mode=$1 suite=$2 bin=$BUILD/test_conformance/${BIN[$2]}
  local log=$OUT/logs/$mode/$suite
  mkdir -p "$OUT/logs/$mode"
  : >"$log.log"
  [ -x "$bin" ] || { echo "binary missing: $bin" >"$log.log"; echo 127 >"$log.rc"; return; }
  local start=$SECONDS rc rest=() left
  # Suites read their kernel sources/include files relative to their own directory.
  pushd "$(dirname "$bin")" >/dev/null || return
  for _ in 1 2 3 4 5 6 7 8; do
    left=$((LIMIT - (SECONDS - start)))
    [ $left -gt 0 ] || { rc=124; break; }
    run_segment "$mode" "$bin" "$log" "$left" "${rest[@]}"
    rc=$?
    case $rc in 0 | 124 | 137) break ;; esac
    mapfile -t rest < <(python3 "$ROOT/tests/conformance/cts-table.py" --remaining "$log.log" "$OUT/logs/$suite.list")
    [ ${#rest[@]} -gt 0 ] || break
  done
  popd >/dev/null || return
  echo "$rc" >"$log.rc"
  echo $((SECONDS - start)) >"$log.secs"
  printf '%-8s %-24s rc=%-4s %5ss\n' "$mode" "$suite" "$rc" "$((SECONDS - start))"
}

mkdir -p "$OUT/logs"
for s in $SUITES; do
  b=$BUILD/test_conformance/${BIN[$s]}
  [ -x "$b" ] && (cd "$(dirname "$b")" && "$b" --list) >"$OUT/logs/$s.list" 2>&1
done
for mode in ${MODES//,/ }; do
  for s in $SUITES; do run_one "$mode" "$s"; done
done
python3 "$ROOT/tests/conformance/cts-table.py" "$OUT/logs" | tee "$OUT/table.md"
