#!/usr/bin/env python3
"""Where the time of a cross-rank copy goes: reads the merged trace of
benches/micro/copy16.c on 2 ranks (MIRRORCL_TRACE=DIR, then `mirrorcl trace DIR`) and
prints, per hand-off of each 16-byte copy from device 0 (rank 0) to device 1 (rank 1),
the median time over the iterations (µs, on the merged clock), with the 10th and 90th
percentiles.

    benches/copy16-breakdown.py DIR/trace.json [--skip N]

--skip: leave out the first N copies (warm-up; default 5).
"""
import json
import statistics
import sys


def main():
    path = sys.argv[1]
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 5
    ev = json.load(open(path))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}

    def on(pid, **kw):
        return sorted((e for e in ev if e.get("pid") == pid and e["ph"] != "M"
                       and all(e.get(k) == v for k, v in kw.items())),
                      key=lambda e: e["ts"])

    def end(e):
        return e["ts"] + e.get("dur", 0)

    def first_after(events, t, pred=lambda e: True):
        return next((e for e in events if e["ts"] >= t and pred(e)), None)

    sched = {p: {e["args"]["index"]: e for e in on(p, cat="schedule", name="clEnqueueCopyBuffer")}
             for p in (0, 1)}
    api0 = on(0, cat="api", name="clEnqueueCopyBuffer")
    reads = on(0, cat="issue", name="clEnqueueReadBuffer")
    writes = on(1, cat="issue", name="clEnqueueWriteBuffer")
    complete = {p: {e["args"]["command"]: e for e in on(p, cat="complete")} for p in (0, 1)}
    queued = on(0, cat="transfer", name="transfer queued")
    sends = {e["args"]["tag"]: e for e in on(0, ph="b", name="send")}
    recv_b = {e["args"]["tag"]: e for e in on(1, ph="b", name="receive")}
    recv_e = {e["id"]: e for e in on(1, ph="e", name="receive")}
    waits1 = on(1, cat="wait")

    steps = [
        "rank 0: clEnqueueCopyBuffer entered -> its read step handed to the issuer (scheduling)",
        "rank 0: the issuer picks the read up (channel, issuer wake-up)",
        "rank 0: vendor read enqueue returns",
        "rank 0: read complete, seen by a vendor callback thread",
        "rank 0: send posted by the progress thread",
        "rank 1: receive complete (progress thread)",
        "rank 1: the vendor's write (and the copy behind it) complete, seen",
        "rank 1: the thread waiting in clFinish wakes",
    ]
    rows = [[] for _ in steps]
    totals, finish1, seen_by = [], [], []
    for index in sorted(sched[0])[skip:]:
        s0, s1 = sched[0][index], sched[1].get(index)
        if s1 is None:
            continue
        a0 = next(a for a in api0 if a["ts"] <= s0["ts"] <= end(a))
        read = first_after(reads, s0["ts"])
        if read is None:
            continue
        tq = first_after(queued, read["ts"], lambda e: e["args"]["direction"] == "send")
        if tq is None:
            continue
        tag = tq["args"]["tag"]
        send, rb = sends.get(tag), recv_b.get(tag)
        re = recv_e.get(rb["id"]) if rb else None
        read_done = complete[0].get(read["args"]["command"])
        write = first_after(writes, s1["ts"])
        write_done = complete[1].get(write["args"]["command"]) if write else None
        copy_done = complete[1].get(s1["args"]["command"])
        wait = first_after(waits1, s1["ts"], lambda e: e["args"]["command"] == s1["args"]["command"])
        if None in (send, re, read_done, write_done, copy_done, wait):
            continue
        handed = read["ts"] - read["args"]["queued_ns"] / 1000
        marks = [a0["ts"], handed, read["ts"], end(read), read_done["ts"], send["ts"], re["ts"],
                 max(write_done["ts"], copy_done["ts"]), end(wait)]
        seen_by.append((names.get((0, read_done["tid"])), names.get((1, copy_done["tid"]))))
        for i in range(len(steps)):
            rows[i].append(marks[i + 1] - marks[i])
        totals.append(marks[-1] - marks[0])
        finish1.append(wait["dur"])
    if not totals:
        sys.exit("no complete copy found in the trace")

    def q(v, p):
        v = sorted(v)
        return v[min(len(v) - 1, int(p * len(v)))]

    print(f"{len(totals)} copies (first {skip} left out); µs: median (p10-p90)")
    for name, v in zip(steps, rows):
        print(f"  {name:82} {statistics.median(v):8.1f} ({q(v, .1):.1f}-{q(v, .9):.1f})")
    print(f"  {'total, rank 0 entering the copy -> rank 1 leaving clFinish':82} "
          f"{statistics.median(totals):8.1f} ({q(totals, .1):.1f}-{q(totals, .9):.1f})")
    print(f"  {'rank 1: clFinish as the application times it':82} "
          f"{statistics.median(finish1):8.1f} ({q(finish1, .1):.1f}-{q(finish1, .9):.1f})")
    for (r, c), n in sorted(((k, seen_by.count(k)) for k in set(seen_by)), key=lambda x: -x[1]):
        print(f"  {n} copies: the read's completion seen on rank 0's {r!r} thread, "
              f"the copy's on rank 1's {c!r} thread")


if __name__ == "__main__":
    main()
