#!/usr/bin/env bash
# The stencil on two H100 ranks (benches/apps/stencil.c), untraced against its twin, then
# traced (MIRRORCL_TRACE, merged by `mirrorcl trace`; the merged trace comes back in $OUT).
# Run from the repository root with target/gpu/ prepared. APP_SIZE (1024), APP_STEPS (200).
set -uo pipefail
gpu="$(pwd)/target/gpu"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
st=(-x APP_SIZE="${APP_SIZE:-1024}" -x APP_STEPS="${APP_STEPS:-200}")
step() { grep -o "step_us=[0-9.]*" | head -1; }
mc=(-x LD_PRELOAD="$gpu/libmirrorcl.so" -x MIRRORCL_PLATFORMS=NVIDIA)
for round in 1 2; do
  echo "round $round: MirrorCL $(timeout 120 mpirun -np 2 --bind-to none "${mc[@]}" "${st[@]}" "$gpu/bin/stencil" 2>&1 | step)" \
    "attached $(timeout 120 mpirun -np 2 --bind-to none "${mc[@]}" -x APP_ATTACH=1 "${st[@]}" "$gpu/bin/stencil" 2>&1 | step)" \
    "twin $(timeout 120 mpirun -np 2 --bind-to none -x OCL_ICD_FILENAMES=libnvidia-opencl.so.1 "${st[@]}" "$gpu/bin/stencil_mpi" 2>&1 | step)"
done
rm -rf /tmp/st-trace
timeout 120 mpirun -np 2 --bind-to none "${mc[@]}" -x MIRRORCL_TRACE=/tmp/st-trace -x APP_STEPS=100 \
  -x APP_SIZE="${APP_SIZE:-1024}" "$gpu/bin/stencil" 2>&1 | grep -E "STEP|PASS|FAIL|rror"
"$gpu/bin/mirrorcl" trace /tmp/st-trace -o "$out/stencil-trace.json" && ls -la "$out"
