#!/usr/bin/env bash
# pyopencl's own test suite (from its PyPI source distribution), natively on PoCL and on
# MirrorCL (through the wheel's bundled ICD loader, OCL_ICD_VENDORS), on 1 and 2 PoCL
# devices; fails when a test passing natively does not pass on MirrorCL.
# Needs target/release/libmirrorcl.so (cargo build --release) and python3 with venv.
# Everything else lives in target/pyopencl/. See README.md next to this script.
#   bash tests/pyopencl/run.sh [--files a.py,b.py] [--devices 1,2]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$root/target/pyopencl"

version=2026.1.4
sdist_sha256=6cb9544a004609061e86873fe36500da6c2101042e9c7b9c3b804a29a12b98bf
# Test files: all of the sdist's test/test_*.py unless --files names some (README.md
# has the time each takes).
files=""
devices=1,2
while [ $# -gt 0 ]; do
  case "$1" in
    --files) files="$2"; shift 2 ;;
    --devices) devices="$2"; shift 2 ;;
    *) echo "usage: $0 [--files a.py,b.py] [--devices 1,2]" >&2; exit 2 ;;
  esac
done

lib="$root/target/release/libmirrorcl.so"
[ -f "$lib" ] || { echo "pyopencl: $lib missing (cargo build --release)" >&2; exit 2; }
mkdir -p "$work"
start=$(date +%s)

# The venv, rebuilt when the pinned requirements change.
venv="$work/venv"
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
    -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi

# The suite: test/ of the source distribution, fetched through PyPI's simple index (the
# JSON form pip itself reads) and checked against the pinned hash. (`pip download
# --no-binary :all:` would first build cmake and ninja from source to read the sdist's
# metadata: minutes for a tarball.)
src="$work/pyopencl-$version"
if [ ! -d "$src/test" ]; then
  tarball="$work/pyopencl-$version.tar.gz"
  "$venv/bin/python" - "$version" "$tarball" <<'EOF'
import json, sys, urllib.request
version, dest = sys.argv[1], sys.argv[2]
req = urllib.request.Request("https://pypi.org/simple/pyopencl/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=120))["files"]
url = next(f["url"] for f in files if f["filename"] == f"pyopencl-{version}.tar.gz")
urllib.request.urlretrieve(url, dest)
EOF
  echo "$sdist_sha256  $tarball" | sha256sum -c --quiet
  tar -xzf "$tarball" -C "$work"
fi

# MirrorCL as the only platform the ICD loader sees: an .icd file in a directory of
# its own.
mkdir -p "$work/icd"
echo "$lib" >"$work/icd/mirrorcl.icd"

# Caches inside target/, one per test file (the files run side by side, and PoCL's is
# not safe for processes that build the same program at once): PoCL's compiled kernels
# (a file's MirrorCL runs build what its native runs did) and pyopencl's own binaries.
pocl_cache="$work/pocl-cache"
export XDG_CACHE_HOME="$work/xdg-cache"

logs="$work/logs"
rm -rf "$logs"
mkdir -p "$logs"
[ -n "$files" ] || files=$(cd "$src/test" && ls test_*.py | paste -sd, -)
echo "pyopencl $version: $files on $devices device(s); logs in $logs"
rc=0
"$venv/bin/python" "$here/driver.py" --test-dir "$src/test" --logs "$logs" \
  --icd-dir "$work/icd" --files "$files" --devices "$devices" --start "$start" \
  --cache "$XDG_CACHE_HOME" --pocl-cache "$pocl_cache" || rc=$?

# Threaded host programs on a cluster: pyopencl's threaded test (two Python threads,
# each with its own context and queue, whose "nanny" events are waited for from
# garbage-collector finalizers, in whichever thread collects) on two ranks, MirrorCL
# preloaded as a cluster needs. Each rank runs it on both devices. PoCL's kernel cache
# is off: two processes building the same program into it at once is not safe.
cluster_log="$logs/cluster-threaded.log"
(
  cd "$src/test"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout 300 mpirun -np 2 --oversubscribe -x LD_PRELOAD="$lib" -x OCL_ICD_VENDORS="$work/icd" \
    -x PYOPENCL_TEST=mirrorcl -x POCL_DEVICES=pthread -x MIRRORCL_WAIT_TIMEOUT=120 \
    -x MIRRORCL_OUTPUT=all -x POCL_KERNEL_CACHE=0 -x XDG_CACHE_HOME \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider test_wrapper.py -k threaded_nanny_events
) >"$cluster_log" 2>&1
cluster_rc=$?
if [ "$cluster_rc" = 0 ] && [ "$(grep -cE '^\[rank [01]\] 2 passed' "$cluster_log")" = 2 ]; then
  echo "pyopencl on 2 ranks: test_threaded_nanny_events passed on both ranks"
else
  echo "pyopencl on 2 ranks: test_threaded_nanny_events FAILED (rc=$cluster_rc); $cluster_log:"
  tail -n 30 "$cluster_log"
  rc=1
fi
exit $rc
