#!/usr/bin/env python3
"""Each rank's chain in an IV.7.2 iteration, from a merged trace (`mirrorcl trace DIR`)
of `cluster_alltoall` at n ranks: per rank, the median time of the kernel's call on
its issuer, and when (after that call began) the read another rank waits for was
issued, when its sends were queued, and when the next kernel began (the iteration).
Then the loop across ranks: from the last peer's bytes received here to the next
kernel, that message's time from its sender's queue to its receipt, and on that peer
from its kernel's call to its sends (the three add up to the loop that sets the pace,
less the other peers' skew), with how often each peer was the last.

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
    loop(ev, names, a)


def loop(ev, names, a):
    """The cross-rank loop: per rank, medians of last bytes in -> next kernel, the last
    peer's message (queued -> received here), that peer's kernel call -> sends queued."""
    ranks = sorted({e["pid"] for e in ev if "pid" in e})
    on_issuer = lambda e: names.get((e["pid"], e.get("tid")), "").startswith("issuer")
    timed = sorted((e for e in ev if "ts" in e), key=lambda e: e["ts"])
    kern = {r: [e["ts"] for e in timed if e["pid"] == r and on_issuer(e)
                and e.get("cat") == "issue" and e["name"] == "clEnqueueNDRangeKernel"]
            for r in ranks}
    sends = {r: [e["ts"] for e in timed if e["pid"] == r and on_issuer(e)
                 and e["name"] == "transfer queued"
                 and e.get("args", {}).get("direction") == "send"] for r in ranks}
    # A receive's arguments are on its begin (when posted); its end is when it completed.
    begun = {(e["pid"], e["id"]): e["args"] for e in timed if e.get("ph") == "b"}
    received = {r: [] for r in ranks}
    for e in timed:
        if e.get("ph") == "e" and e["name"] == "receive" and (e["pid"], e["id"]) in begun:
            received[e["pid"]].append((e["ts"], begun[(e["pid"], e["id"])]["peer"]))
    for r in ranks:
        rows, lasts = [], {}
        for k in range(a.skip, min(a.skip + a.count, len(kern[r]) - 1)):
            start, end = kern[r][k], kern[r][k + 1]
            last = {}
            for t, p in received[r]:
                if start - 200 < t < end:
                    last[p] = t
            if len(last) < len(ranks) - 1:
                continue
            p, t = max(last.items(), key=lambda x: x[1])
            queued = [q for q in sends[p] if q < t]
            if not queued:
                continue
            called = [c for c in kern[p] if c < queued[-1]]
            if not called:
                continue
            rows.append((end - t, t - queued[-1], queued[-1] - called[-1]))
            lasts[p] = lasts.get(p, 0) + 1
        if rows:
            m = [statistics.median(x[i] for x in rows) for i in range(3)]
            print(f"rank {r}: last bytes in -> next kernel {m[0]:.1f} µs, "
                  f"their message {m[1]:.1f}, that peer's kernel call -> sends {m[2]:.1f}; "
                  f"last peer (iterations): {dict(sorted(lasts.items()))}")


if __name__ == "__main__":
    main()
