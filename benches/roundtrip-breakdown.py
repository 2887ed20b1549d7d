#!/usr/bin/env python3
"""Where a blocking call of benches/micro/roundtrip.c goes: reads the merged trace of a
MirrorCL run (MIRRORCL_TRACE=DIR, then `mirrorcl trace DIR -o FILE`) and prints, per API
call (blocking write and read, kernel enqueue, clFinish), the medians over its calls of
the call's span on the program's thread, the vendor calls inside it, and the rest
(MirrorCL's own part), in µs.

    benches/roundtrip-breakdown.py FILE [--skip N]

--skip: leave out each call's first N (warm-up; default 20).
"""
import json
import statistics
import sys


def main():
    path = sys.argv[1]
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 20
    spans = sorted((e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"),
                   key=lambda e: e["ts"])
    vendor = [e for e in spans if e.get("cat") == "vendor"]

    def inside(outer):
        a, b = outer["ts"], outer["ts"] + outer["dur"]
        return [e for e in vendor
                if e["tid"] == outer["tid"] and e["ts"] >= a and e["ts"] + e["dur"] <= b]

    for name in ["clEnqueueWriteBuffer", "clEnqueueReadBuffer", "clEnqueueNDRangeKernel",
                 "clFinish"]:
        calls = [e for e in spans if e.get("cat") == "api" and e["name"] == name][skip:]
        if not calls:
            continue
        rows = [(c["dur"], sum(v["dur"] for v in inside(c)), len(inside(c))) for c in calls]
        med = lambda f: statistics.median(f(r) for r in rows)
        print(f"{name}: {len(rows)} calls, span {med(lambda r: r[0]):.2f}, "
              f"vendor calls {med(lambda r: r[1]):.2f} ({med(lambda r: r[2]):g} a call), "
              f"MirrorCL's own {med(lambda r: r[0] - r[1]):.2f}")


if __name__ == "__main__":
    main()
