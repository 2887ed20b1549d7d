#!/usr/bin/env bash
# Builds what the GPU machine needs (it has no Rust): the library, the test programs and
# the benchmarks, into target/gpu/ (stripped, to travel light).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cargo build --release -p mirrorcl -p mirrorcl-benches
out=target/gpu
rm -rf "$out" && mkdir -p "$out/bin"
strip --strip-debug -o "$out/libmirrorcl.so" target/release/libmirrorcl.so
strip --strip-debug -o "$out/bin/mirrorcl-overhead" target/release/mirrorcl-overhead
strip --strip-debug -o "$out/bin/mirrorcl-bench" target/release/mirrorcl-bench
strip --strip-debug -o "$out/bin/mirrorcl-sim" target/release/mirrorcl-sim
for src in tests/c/*.c; do
  name=$(basename "$src" .c)
  if [ "$name" = cluster_hybrid ]; then
    mpicc -O2 -std=c11 -pthread -o "$out/bin/$name" "$src" -lOpenCL -lm
  else
    cc -O2 -std=c11 -pthread -o "$out/bin/$name" "$src" -lOpenCL -lm
  fi
done
# The benchmark programs (apps, the microbenchmark's MPI twin, the bandwidth programs).
bash benches/build-programs.sh "$out/bin"
strip --strip-debug -o "$out/bin/mirrorcl" target/release/mirrorcl
cp tests/gpu/run-*.sh "$out/"
cp benches/copy16-breakdown.py benches/alltoall-chain.py benches/roundtrip-breakdown.py "$out/bin/"
du -sh "$out"
