#!/usr/bin/env python3
"""Each rank's chain in an IV.7.2 iteration, from a merged trace (`mirrorcl trace DIR`)
of `cluster_alltoall` at n ranks: per rank, the median time of the kernel's call on
its issuer, and when (after that call began) the read another rank waits for was
issued, when its sends were queued, and when the next kernel began (the iteration).

  python3 alltoall-chain.py trace.json [--skip N] [--count N]
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=100, help="iterations left out first")
    ap.add_argument("--count", type=int, default=150, help="iterations measured")
    a = ap.parse_args()
    d = json.load(open(a.trace))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    for rank in sorted({e["pid"] for e in ev if "pid" in e}):
        iss = sorted((e for e in ev if e.get("pid") == rank and e.get("ph") in ("X", "i")
                      and names.get((rank, e.get("tid")), "").startswith("issuer")),
                     key=lambda e: e["ts"])
        kern = [e for e in iss if e.get("cat") == "issue" and e["name"] == "clEnqueueNDRangeKernel"]
        reads = [e for e in iss if e.get("cat") == "issue" and e["name"] == "clEnqueueReadBuffer"]
        queued = [e for e in iss if e["name"] == "transfer queued"]
        rows = []
        for k in kern[a.skip:a.skip + a.count]:
            t = k["ts"]
            r = next((x for x in reads if x["ts"] >= t), None)
            q = next((x for x in queued if x["ts"] >= t), None)
            n = next((x for x in kern if x["ts"] > t), None)
            if r and q and n:
                rows.append((k.get("dur", 0), r["ts"] - t, q["ts"] - t, n["ts"] - t))
        if not rows:
            continue
        m = [statistics.median(r[i] for r in rows) for i in range(4)]
        print(f"rank {rank}: kernel call {m[0]:.1f} µs, read issued +{m[1]:.1f}, "
              f"sends queued +{m[2]:.1f}, next kernel +{m[3]:.1f} ({len(rows)} iterations)")


if __name__ == "__main__":
    main()
