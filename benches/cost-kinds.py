#!/usr/bin/env python3
"""What a unit of work costs besides its instruction count: reads two callgrind profiles
of the program's thread (`callgrind.out.*-01`) made with `--cache-sim=yes
--dump-instr=yes --compress-pos=no --compress-strings=no` from runs that differ only
in length, and prints per unit (the difference of the two runs):

- atomic read-modify-writes (`lock`-prefixed instructions and `xchg` with memory,
  found in each library's code with `objdump`), per library: each costs some 20
  cycles uncontended and orders the core's memory traffic;
- L1 data and instruction cache misses (callgrind's simulation of this machine's
  caches);
- the hot code of the long run: the 64-byte lines holding an instruction run at least
  once per unit on average, per library. A path larger than the L1 instruction cache
  (32 KiB on the development machines) is fetched again on every pass.

`benches/micro/enqueue_delay.c` prices each kind on a real program
(`PRICES="W A L" bash benches/run-cg-budget.sh`). Used by
`KINDS=1 bash benches/run-enqueue-cost.sh`.

    benches/cost-kinds.py SHORT LONG UNITS [--top N] [--atomics N]

UNITS: how many more units (kernels, iterations) LONG ran than SHORT; LONG's hot
lines are those run at least UNITS times. --top: also list the N functions with the
most hot code (default 0). --atomics: also list the N atomic instructions run most per
unit, each with its inlined source frames (`addr2line -i`), innermost first: where a
reference count or lock is taken, and by what (default 0).
"""
import re
import subprocess
import sys
from collections import defaultdict


def totals(path):
    """The profile's event names and totals: {event: count}."""
    events, values = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:"):
                values = [int(v) for v in line.split()[1:]]
    return dict(zip(events, values))


def atomic_addresses(obj):
    """The addresses of the atomic read-modify-write instructions in a library's code."""
    try:
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    found = set()
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t(.*)$", line)
        if m and (m.group(2).startswith("lock ") or re.match(r"xchg\s.*\(", m.group(2))):
            found.add(int(m.group(1), 16))
    return found


def instructions(path):
    """Each instruction's own cost line in a profile: (library, function, address, runs)."""
    obj = function = None
    after_call = False
    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("fn="):
                function = line[3:].strip()
            elif line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not an instruction's.
                after_call = True
            elif line.startswith("0x"):
                if after_call:
                    after_call = False
                    continue
                # positions: instr line; events: Ir first.
                fields = line.split()
                runs = int(fields[2]) if len(fields) > 2 else 0
                yield obj, function, int(fields[0], 16), runs


def atomics_run(path, known):
    """Atomic read-modify-writes run, per instruction: {(library path, address,
    function): count}. `known` caches each library's addresses."""
    counts = defaultdict(int)
    for obj, function, address, runs in instructions(path):
        if obj not in known:
            known[obj] = atomic_addresses(obj)
        if address in known[obj]:
            counts[(obj, address, function)] += runs
    return counts


def atomics(runs):
    """`atomics_run`'s counts per library: {library: count}."""
    counts = defaultdict(int)
    for (obj, _, _), n in runs.items():
        counts[re.sub(r".*/", "", obj)] += n
    return counts


# Source files of the Rust library and parking_lot whose inlined frames say nothing of
# where an atomic operation comes from (the innermost frame still names its kind).
LIBRARY_FRAMES = {"atomic.rs", "sync.rs", "raw_mutex.rs", "mutex.rs", "mod.rs",
                  "function.rs", "option.rs", "clone.rs", "result.rs"}


def frames(obj, address):
    """The inlined source frames of an instruction, innermost first, shortened: the
    innermost, then those outside the Rust library."""
    try:
        out = subprocess.run(["addr2line", "-i", "-f", "-C", "-e", obj, hex(address)],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "?"
    named = [(re.sub(r"^.*::", "", f)[:32], re.sub(r".*/", "", line))
             for f, line in zip(out[0::2], out[1::2])]
    kept = named[:1] + [(f, line) for f, line in named[1:]
                        if line.split(":")[0] not in LIBRARY_FRAMES]
    return " < ".join(f"{f} ({line})" for f, line in kept)


def hot_lines(path, runs):
    """The 64-byte code lines with an instruction run at least `runs` times:
    {(library, line): function}."""
    most = defaultdict(int)
    function_of = {}
    for obj, function, address, runs_here in instructions(path):
        key = (obj, address >> 6)
        if runs_here > most[key]:
            most[key] = runs_here
            function_of[key] = function
    return {k: function_of[k] for k, n in most.items() if n >= runs}


def main():
    args = sys.argv[1:]
    options = {"--top": 0, "--atomics": 0}
    for name in options:
        if name in args:
            i = args.index(name)
            options[name] = int(args[i + 1])
            del args[i:i + 2]
    top = options["--top"]
    short, long_, units = args[0], args[1], int(args[2])
    a, b = totals(short), totals(long_)
    known = {}
    runs_a, runs_b = atomics_run(short, known), atomics_run(long_, known)
    atomic_a, atomic_b = atomics(runs_a), atomics(runs_b)
    per_library = {o: (atomic_b[o] - atomic_a.get(o, 0)) / units for o in atomic_b}
    print(f"  atomic read-modify-writes per unit {sum(per_library.values()):8.0f}")
    for obj, n in sorted(per_library.items(), key=lambda x: -x[1]):
        if n >= 0.5:
            print(f"    {obj:30s} {n:8.0f}")
    if options["--atomics"]:
        per_instruction = {k: (n - runs_a.get(k, 0)) / units for k, n in runs_b.items()}
        print(f"  the {options['--atomics']} atomic instructions run most per unit:")
        for (obj, address, function), n in sorted(per_instruction.items(),
                                                  key=lambda x: -x[1])[:options["--atomics"]]:
            print(f"    {n:6.1f}  {re.sub(r'<.*>', '<..>', function)[:60]}: "
                  f"{frames(obj, address)[:140]}")
    if "I1mr" not in b:
        print("  (caches not simulated: profiles without --cache-sim=yes)")
        return
    d1 = b["D1mr"] + b["D1mw"] - a["D1mr"] - a["D1mw"]
    print(f"  L1d misses per unit {d1 / units:21.0f}")
    print(f"  L1i misses per unit {(b['I1mr'] - a['I1mr']) / units:21.0f}")
    hot = hot_lines(long_, units)
    per_object = defaultdict(int)
    per_function = defaultdict(int)
    for (obj, _), function in hot.items():
        per_object[re.sub(r".*/", "", obj or "?")] += 64
        per_function[function] += 64
    print(f"  hot code {len(hot) * 64 / 1024:33.1f} KiB")
    for obj, size in sorted(per_object.items(), key=lambda x: -x[1]):
        if size >= 1024:
            print(f"    {obj:30s} {size / 1024:8.1f} KiB")
    if top:
        print(f"  the {top} functions with the most hot code:")
        for function, size in sorted(per_function.items(), key=lambda x: -x[1])[:top]:
            print(f"    {size:6d} B  {function[:100]}")


if __name__ == "__main__":
    main()
