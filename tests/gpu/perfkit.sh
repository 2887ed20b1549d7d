#!/usr/bin/env bash
# Packs this machine's `perf` with the libraries the GPU machine lacks into
# target/perfkit/ (carry it with target/gpu): the GPU machine has no perf, and sampling
# a rank there is how the progress thread's pass over every posted receive was found
# (docs/performance-notes.md, "Cross-rank transfers"). Needs `perf` here
# (linux-perf).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
kit="$root/target/perfkit"
perf="$(command -v perf)"
rm -rf "$kit" && mkdir -p "$kit/lib"
cp "$perf" "$kit/perf"
# The C and C++ runtimes are the GPU machine's own (newer, compatible).
for lib in $(ldd "$perf" | awk '/=>/ {print $3}'); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
    *) cp -L "$lib" "$kit/lib/" ;;
  esac
done
du -sh "$kit"
