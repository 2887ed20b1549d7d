#!/usr/bin/env bash
# Installs libmirrorcl.so and registers it with the ICD loader.
#
#   icd/install.sh [PREFIX] [VENDORS_DIR]
#
# Copies target/release/libmirrorcl.so to PREFIX/lib (default /usr/local) and writes
# VENDORS_DIR/mirrorcl.icd (default /etc/OpenCL/vendors) naming its absolute path.
# For a private registration (no root), pass a directory of your own as VENDORS_DIR and
# run programs with OCL_ICD_VENDORS=VENDORS_DIR/. MirrorCL keeps finding the vendor
# platforms it drives in /etc/OpenCL/vendors (MIRRORCL_VENDORS), skipping itself.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-/usr/local}"
vendors="${2:-/etc/OpenCL/vendors}"
lib="$root/target/release/libmirrorcl.so"
[ -f "$lib" ] || { echo "install: $lib missing: run cargo build --release -p mirrorcl"; exit 1; }
mkdir -p "$prefix/lib" "$vendors"
install -m 0755 "$lib" "$prefix/lib/libmirrorcl.so"
echo "$prefix/lib/libmirrorcl.so" > "$vendors/mirrorcl.icd"
echo "installed $prefix/lib/libmirrorcl.so; registered in $vendors/mirrorcl.icd"
