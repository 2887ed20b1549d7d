#!/usr/bin/env python3
"""Where an enqueue's instructions go, by part: reads two callgrind profiles of the
program's thread (`callgrind.out.*-01`) from runs that differ only in length and prints
the difference per unit of work, each function's own instructions (inlined code counted
in the function it was inlined into), summed per part of MirrorCL, the vendor, the C
library and the loader. Used by `BREAKDOWN=1 bash benches/run-enqueue-cost.sh`.

    benches/cost-breakdown.py SHORT LONG UNITS [--top N]

UNITS: how many more units (kernels, iterations) LONG ran than SHORT. --top: also list
the N costliest functions (default 0).
"""
import re
import subprocess
import sys
from collections import defaultdict

# Parts of MirrorCL by the module path of the function the code ended up in, first
# match wins; Rust library functions not inlined count as "Rust library".
PARTS = [
    ("API entry and validation", r"^(mirrorcl::|cl[A-Z])"),
    ("scheduler", r"mirrorcl_scheduler::"),
    ("planning a command (submit)", r"mirrorcl_runtime::enqueue::submit"),
    ("kernel arguments", r"mirrorcl_runtime::(objects::kernel::|enqueue::kernel_command)"),
    ("other enqueue steps", r"mirrorcl_runtime::enqueue::(buffer_commands|transfer|host_commands|remote)"),
    ("issuing (issue, issuer)", r"mirrorcl_runtime::(enqueue::issue|objects::issuer)"),
    ("events", r"mirrorcl_runtime::objects::event"),
    ("queues", r"mirrorcl_runtime::objects::queue"),
    ("handles and objects", r"mirrorcl_runtime::objects::handle"),
    ("vendor calls (wrappers)", r"mirrorcl_runtime::native"),
    ("spinning and clocks", r"(mirrorcl_runtime::objects::spin|Instant|Timespec|clock_gettime)"),
    ("allocation (mimalloc)", r"(^mi_|_mi_|__rust_alloc|__rust_dealloc|__rdl_)"),
    ("other MirrorCL", r"mirrorcl"),
    ("Rust library", r"(alloc::|core::|std::|<|hashbrown|smallvec|parking_lot)"),
]


def own_costs(path):
    """Each function's own instructions: {function: Ir}, vendor and system code under
    their library's name."""
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", path],
        capture_output=True, text=True, check=True).stdout
    costs = defaultdict(int)
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if not started or not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        obj = ""
        o = re.search(r" \[([^\]]*)\]$", rest)
        if o:
            obj, rest = o.group(1), rest[:o.start()]
        function = rest.split(":", 1)[1] if ":" in rest else rest
        if re.search(r"/libc\.so|/libm\.so", obj):
            function = "[C library] " + function
        elif "ld-linux" in obj:
            function = "[loader] " + function
        elif "pocl" in obj:
            function = "[vendor] " + function
        elif "libOpenCL" in obj:
            function = "[ICD loader] " + function
        costs[function] += ir
    return costs


def part(function):
    if function.startswith("[C library]"):
        return "C library"
    if function.startswith("[loader]"):
        return "loader (thread-local storage)"
    if function.startswith("[vendor]"):
        return "vendor (PoCL)"
    if function.startswith("[ICD loader]"):
        return "ICD loader"
    for name, pattern in PARTS:
        if re.search(pattern, function):
            return name
    return "other"


def main():
    short, long, units = sys.argv[1], sys.argv[2], int(sys.argv[3])
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 0
    a, b = own_costs(short), own_costs(long)
    per = {f: (b.get(f, 0) - a.get(f, 0)) / units for f in set(a) | set(b)}
    parts = defaultdict(float)
    for f, ir in per.items():
        parts[part(f)] += ir
    total = sum(parts.values())
    for name, ir in sorted(parts.items(), key=lambda p: -p[1]):
        if abs(ir) >= 0.5:
            print(f"  {name:<34} {ir:>10.0f}  {100 * ir / total:5.1f}%")
    print(f"  {'total':<34} {total:>10.0f}")
    if top:
        print(f"  the {top} costliest functions:")
        for f, ir in sorted(per.items(), key=lambda p: -p[1])[:top]:
            print(f"    {ir:>8.0f}  {f[:110]}")


if __name__ == "__main__":
    main()
