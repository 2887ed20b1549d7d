#!/usr/bin/env bash
# Builds what the GPU machine needs (it has no Rust): the library, the test programs and
# the overhead benchmark, into target/gpu/ (stripped, to travel light).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cargo build --release -p mirrorcl -p mirrorcl-benches
out=target/gpu
rm -rf "$out" && mkdir -p "$out/bin"
strip --strip-debug -o "$out/libmirrorcl.so" target/release/libmirrorcl.so
strip --strip-debug -o "$out/bin/mirrorcl-overhead" target/release/mirrorcl-overhead
for src in tests/c/*.c; do
  name=$(basename "$src" .c)
  if [ "$name" = cluster_hybrid ]; then
    mpicc -O2 -std=c11 -pthread -o "$out/bin/$name" "$src" -lOpenCL -lm
  else
    cc -O2 -std=c11 -pthread -o "$out/bin/$name" "$src" -lOpenCL -lm
  fi
done
for src in benches/apps/*.c; do
  cc -O2 -std=c11 -pthread -Itests/c -o "$out/bin/$(basename "$src" .c)" "$src" -lOpenCL -lm
done
cc -O2 -std=c11 -pthread -Itests/c -o "$out/bin/bandwidth" benches/micro/bandwidth.c -lOpenCL -lm
mpicc -O2 -o "$out/bin/bandwidth_mpi" benches/micro/bandwidth_mpi.c
strip --strip-debug -o "$out/bin/mirrorcl" target/release/mirrorcl
cp tests/gpu/run-on-gpu.sh tests/gpu/run-cluster-on-gpu.sh "$out/"
du -sh "$out"
