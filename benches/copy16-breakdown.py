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
    api1 = on(1, cat="api", name="clEnqueueCopyBuffer")
    reads = on(0, cat="issue", name="clEnqueueReadBuffer")
    writes = on(1, cat="issue", name="clEnqueueWriteBuffer")
    complete = {p: {e["args"]["command"]: e for e in on(p, cat="complete")} for p in (0, 1)}
    queued = on(0, cat="transfer", name="transfer queued")
    sends = {e["args"]["tag"]: e for e in on(0, ph="b", name="send")}
    recv_b = {e["args"]["tag"]: e for e in on(1, ph="b", name="receive")}
    recv_e = {e["id"]: e for e in on(1, ph="e", name="receive")}
    waits1 = on(1, cat="wait")

    steps = [
        "rank 0: clEnqueueCopyBuffer entered -> its read step handed to the issuer",
        "rank 0: the issuer picks the read up (channel; issuer wake-up)",
        "rank 0: the vendor's read enqueue returns",
        "rank 0: the read's completion seen (vendor callback thread, or issuer)",
        "rank 0: the send posted by the progress thread",
        "rank 1: clEnqueueCopyBuffer entered -> its receive queued for the progress thread",
        "rank 1: the receive posted by the progress thread (progress wake-up)",
        "rank 1: the receive complete, after the later of the two postings",
        "rank 1: the vendor's write (and the copy behind it) complete, seen",
        "rank 1: the thread waiting in clFinish wakes",
    ]
    rows = [[] for _ in steps]
    totals, finish1, seen_by, late, own1 = [], [], [], [], []
    queued1 = on(1, cat="transfer", name="transfer queued")
    for index in sorted(sched[0])[skip:]:
        s0, s1 = sched[0][index], sched[1].get(index)
        if s1 is None:
            continue
        a0 = next(a for a in api0 if a["ts"] <= s0["ts"] <= end(a))
        a1 = next(a for a in api1 if a["ts"] <= s1["ts"] <= end(a))
        read = first_after(reads, s0["ts"])
        if read is None:
            continue
        tq = first_after(queued, read["ts"], lambda e: e["args"]["direction"] == "send")
        if tq is None:
            continue
        tag = tq["args"]["tag"]
        tq1 = first_after(queued1, a1["ts"], lambda e: e["args"].get("tag") == tag)
        send, rb = sends.get(tag), recv_b.get(tag)
        re = recv_e.get(rb["id"]) if rb else None
        read_done = complete[0].get(read["args"]["command"])
        write = first_after(writes, s1["ts"])
        write_done = complete[1].get(write["args"]["command"]) if write else None
        copy_done = complete[1].get(s1["args"]["command"])
        wait = first_after(waits1, s1["ts"], lambda e: e["args"]["command"] == s1["args"]["command"])
        if None in (send, re, tq1, read_done, write_done, copy_done, wait):
            continue
        handed = read["ts"] - read["args"]["queued_ns"] / 1000
        sender = [a0["ts"], handed, read["ts"], end(read), read_done["ts"], send["ts"]]
        receiver = [a1["ts"], tq1["ts"], rb["ts"]]
        for i in range(5):
            rows[i].append(sender[i + 1] - sender[i])
        for i in range(2):
            rows[5 + i].append(receiver[i + 1] - receiver[i])
        rows[7].append(re["ts"] - max(send["ts"], rb["ts"]))
        rows[8].append(max(write_done["ts"], copy_done["ts"]) - re["ts"])
        rows[9].append(end(wait) - max(write_done["ts"], copy_done["ts"]))
        late.append(rb["ts"] - send["ts"])
        own1.append(end(wait) - a1["ts"])
        totals.append(end(wait) - a0["ts"])
        finish1.append(wait["dur"])
        seen_by.append((names.get((0, read_done["tid"])), names.get((1, copy_done["tid"]))))
    if not totals:
        sys.exit("no complete copy found in the trace")

    def q(v, p):
        v = sorted(v)
        return v[min(len(v) - 1, int(p * len(v)))]

    print(f"{len(totals)} copies (first {skip} left out); µs: median (p10-p90)")
    for name, v in zip(steps, rows):
        print(f"  {name:82} {statistics.median(v):8.1f} ({q(v, .1):.1f}-{q(v, .9):.1f})")
    print(f"  {'rank 0 entering the copy -> rank 1 leaving clFinish':82} "
          f"{statistics.median(totals):8.1f} ({q(totals, .1):.1f}-{q(totals, .9):.1f})")
    print(f"  {'rank 1: its clEnqueueCopyBuffer entered -> leaving clFinish':82} "
          f"{statistics.median(own1):8.1f} ({q(own1, .1):.1f}-{q(own1, .9):.1f})")
    print(f"  {'rank 1 posted its receive after rank 0 posted the send by':82} "
          f"{statistics.median(late):8.1f} ({q(late, .1):.1f}-{q(late, .9):.1f})")
    print(f"  {'rank 1: clFinish as the application times it':82} "
          f"{statistics.median(finish1):8.1f} ({q(finish1, .1):.1f}-{q(finish1, .9):.1f})")
    for (r, c), n in sorted(((k, seen_by.count(k)) for k in set(seen_by)), key=lambda x: -x[1]):
        print(f"  {n} copies: the read's completion seen on rank 0's {r!r} thread, "
              f"the copy's on rank 1's {c!r} thread")


if __name__ == "__main__":
    main()
