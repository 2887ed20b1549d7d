#!/usr/bin/env bash
# What NVIDIA accepts natively, MirrorCL must accept (tests/c/vendor_fidelity.c): the
# program natively on NVIDIA's OpenCL, on MirrorCL in one process and on two ranks (one
# GPU each); every run must pass, and its "outcome:" lines (what the vendor did with a
# launch above CL_KERNEL_WORK_GROUP_SIZE) must be the native run's. Run from the
# repository root with target/gpu/ prepared by tests/gpu/prepare.sh; logs go to $OUT.
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog="$gpu/bin/vendor_fidelity"
lib="${LIB:-$gpu/libmirrorcl.so}"
OCL_ICD_FILENAMES=libnvidia-opencl.so.1 CTEST_PLATFORM=NVIDIA timeout 120 "$prog" > "$out/fidelity.native" 2>&1
MIRRORCL_PLATFORMS=NVIDIA MIRRORCL_EXPECT=1 LD_PRELOAD="$lib" timeout 120 "$prog" \
  > "$out/fidelity.mirrorcl" 2>&1
timeout 180 mpirun -np 2 --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
  -x MIRRORCL_EXPECT=1 -x MIRRORCL_OUTPUT=all "$prog" > "$out/fidelity.ranks2" 2>&1
failed=0
for run in native mirrorcl ranks2; do
  f="$out/fidelity.$run"
  passes=$(grep -c "PASS vendor_fidelity" "$f")
  echo "== $run: $passes PASS line(s)"
  grep "CHECK FAILED" -A2 "$f" | head -12
  grep "outcome:" "$f" | sed 's/^\[rank [0-9]*\] //' | sort -u > "$f.outcome"
  cat "$f.outcome"
  if [ "$run" = ranks2 ]; then [ "$passes" = 2 ] || failed=1; else [ "$passes" = 1 ] || failed=1; fi
  [ "$run" = native ] || cmp -s "$out/fidelity.native.outcome" "$f.outcome" || {
    echo "   differs from the native outcome"; failed=1; }
done
# A rank without a device (3 ranks, 2 GPUs), and MIRRORCL_MAX_DEVICES per rank (2 ranks
# with a limit of 1 own one GPU each).
for case in "3 none" "2 max1"; do
  set -- $case
  env_max=""; expect=2
  [ "$2" = max1 ] && env_max="-x MIRRORCL_MAX_DEVICES=1"
  for p in cluster_build program_kernel cluster_vecadd vendor_fidelity; do
    timeout 180 mpirun -np "$1" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
      -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES=$expect -x MIRRORCL_OUTPUT=all \
      -x MIRRORCL_WAIT_TIMEOUT=60 $env_max "$gpu/bin/$p" > "$out/$p.$2" 2>&1
    rc=$?
    passes=$(grep -c "PASS $p" "$out/$p.$2")
    echo "== $p, $1 ranks ($2): rc=$rc, $passes of $1 ranks passed"
    grep -m4 "CHECK FAILED\|MirrorCL:" "$out/$p.$2"
    [ "$rc" = 0 ] && [ "$passes" = "$1" ] || failed=1
  done
done
[ "$failed" = 0 ] && echo "PASS fidelity on NVIDIA" || echo "FAIL fidelity on NVIDIA"
exit "$failed"
