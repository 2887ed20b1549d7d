#!/usr/bin/env python3
"""The comparison of the CTS image suites (tests/conformance/run-cts-images.sh): per
suite and way, sub-tests (one per image format and type) failed of those run, and the
ones that fail on MirrorCL but not natively, by test group and format."""
import pathlib
import re
import sys

WAYS = ["native", "one", "ranks0", "ranks1"]


def read(path):
    """(failed sub-tests as (group, format), summary (failed, run) or None, how it ended)."""
    if not path.exists():
        return None
    group, failed, summary, text = "?", set(), None, path.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith("Running "):
            group = line.removeprefix("Running ").removesuffix("...")
        m = re.match(r"\s*FAILED: \[(\S+)\s+(\S+)", line)
        if m:
            failed.add((group, f"{m.group(1)} {m.group(2)}"))
        m = re.match(r"(PASSED|FAILED) (\d+) of (\d+) sub-tests", line)
        if m:
            n, run = int(m.group(2)), int(m.group(3))
            summary = (run - n if m.group(1) == "PASSED" else n, run)
    ended = "completed" if summary else ("crashed" if re.search(r"Segmentation|Abort|core dumped", text) else "cut off")
    return failed, summary, ended


def main():
    logs = pathlib.Path(sys.argv[1])
    suites = sorted({p.stem for p in logs.glob("*/*.log")})
    print("| suite | " + " | ".join(WAYS) + " | failing on MirrorCL only |")
    print("|---" * (len(WAYS) + 2) + "|")
    extra_all = []
    for s in suites:
        cells, native = [], read(logs / "native" / f"{s}.log")
        extra = set()
        for w in WAYS:
            r = read(logs / w / f"{s}.log")
            if r is None:
                cells.append("–")
                continue
            failed, summary, ended = r
            cells.append(f"{summary[0]} failed of {summary[1]}" if summary else ended)
            if w != "native" and native is not None:
                extra |= {(w, g, f) for g, f in failed - native[0]}
        extra_all += [(s, *e) for e in sorted(extra)]
        print(f"| {s} | " + " | ".join(cells) + f" | {len(extra)} |")
    for s, w, g, f in extra_all:
        print(f"- {s}, {w}: {g}: {f}")


if __name__ == "__main__":
    main()
