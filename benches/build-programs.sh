#!/usr/bin/env bash
# Compiles the C programs the benchmark harness runs into DIR (default target/bench/bin):
# tests/c/cluster_alltoall.c (the IV.7.2 microbenchmark), benches/micro/* (its
# hand-written MPI twin, the bandwidth programs, the stencil's twin, the enqueue-delay
# library) and benches/apps/*. The MPI programs are built with $MPICC (default mpicc;
# mpicc.mpich for the MPICH build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/target/bench/bin}"
mkdir -p "$out"
cd "$root"
cflags=(-O2 -std=c11 -pthread -Itests/c)
cc "${cflags[@]}" -o "$out/cluster_alltoall" tests/c/cluster_alltoall.c -lOpenCL -lm
cc "${cflags[@]}" -o "$out/bandwidth" benches/micro/bandwidth.c -lOpenCL -lm
cc "${cflags[@]}" -o "$out/copy16" benches/micro/copy16.c -lOpenCL -lm
cc "${cflags[@]}" -o "$out/roundtrip" benches/micro/roundtrip.c -lOpenCL -lm
cc "${cflags[@]}" -o "$out/vendorcalls" benches/micro/vendorcalls.c -lOpenCL -lm
# Not a program: the LD_PRELOAD library that adds a fixed delay to each enqueue.
cc -O2 -shared -fPIC -o "$out/enqueue_delay.so" benches/micro/enqueue_delay.c -ldl
cc -O2 -shared -fPIC -o "$out/batch_workers.so" benches/micro/batch_workers.c -ldl
mpicc="${MPICC:-mpicc}"
"$mpicc" "${cflags[@]}" -o "$out/bandwidth_mpi" benches/micro/bandwidth_mpi.c -lOpenCL -lm
"$mpicc" "${cflags[@]}" -o "$out/alltoall_mpi" benches/micro/alltoall_mpi.c -lOpenCL -lm
"$mpicc" "${cflags[@]}" -o "$out/stencil_mpi" benches/micro/stencil_mpi.c -lOpenCL -lm
for src in benches/apps/*.c; do
  cc "${cflags[@]}" -o "$out/$(basename "$src" .c)" "$src" -lOpenCL -lm
done
