#!/usr/bin/env bash
# Images and samplers on NVIDIA (tests/c/images.c, tests/c/cluster_images.c): each
# program natively on NVIDIA's OpenCL, on MirrorCL in one process (every GPU), on two
# ranks (one GPU each) and on three (one without a GPU). Every run must pass on every
# rank. Run from the repository root with target/gpu/ prepared by tests/gpu/prepare.sh;
# logs go to $OUT.
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lib="${LIB:-$gpu/libmirrorcl.so}"
failed=0
check() { # name, expected PASS lines, rc, log
  local passes
  passes=$(grep -c "PASS $2" "$4")
  echo "== $1: rc=$3, $passes PASS line(s) of $5"
  grep -m6 "CHECK FAILED\|MirrorCL:\|expected\|FATAL" "$4"
  [ "$3" = 0 ] && [ "$passes" = "$5" ] || failed=1
}
for p in images cluster_images; do
  prog="$gpu/bin/$p"
  OCL_ICD_FILENAMES=libnvidia-opencl.so.1 CTEST_PLATFORM=NVIDIA timeout 300 "$prog" > "$out/$p.native" 2>&1
  check "$p native NVIDIA" "$p" $? "$out/$p.native" 1
  MIRRORCL_PLATFORMS=NVIDIA MIRRORCL_EXPECT=1 MIRRORCL_STATS=1 LD_PRELOAD="$lib" timeout 300 "$prog" \
    > "$out/$p.mirrorcl" 2>&1
  check "$p MirrorCL, one process" "$p" $? "$out/$p.mirrorcl" 1
  for n in 2 3; do
    timeout 300 mpirun -np "$n" --bind-to none -x LD_PRELOAD="$lib" -x MIRRORCL_PLATFORMS=NVIDIA \
      -x MIRRORCL_EXPECT=1 -x MIRRORCL_OUTPUT=all -x MIRRORCL_STATS=1 -x MIRRORCL_WAIT_TIMEOUT=120 \
      "$prog" > "$out/$p.ranks$n" 2>&1
    check "$p MirrorCL, $n ranks" "$p" $? "$out/$p.ranks$n" "$n"
  done
  grep -h "bytes_sent\|sends " "$out/$p.ranks2" | head -2
done
[ "$failed" = 0 ] && echo "PASS images on NVIDIA" || echo "FAIL images on NVIDIA"
exit "$failed"
