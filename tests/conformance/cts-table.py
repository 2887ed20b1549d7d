#!/usr/bin/env python3
"""Turns the logs of run-cts.sh into the table of docs/conformance.md.

    cts-table.py LOGDIR      # LOGDIR/<suite>.list, LOGDIR/<mode>/<suite>.{log,rc,secs}

Each sub-test of a suite's list is: pass, FAIL, skip, crash (started, no result, the
process died), timeout (started, no result, killed at the time limit) or not run (after a
crash or timeout, or the suite did not start).
"""
import os
import re
import sys

MODES = [("native", "native PoCL"), ("one", "MirrorCL, 1 process"),
         ("ranks0", "MirrorCL, 2 ranks, device 0"), ("ranks1", "MirrorCL, 2 ranks, device 1")]
SUITES = ["basic", "api", "buffers", "events", "compiler", "multiple_device_context",
          "device_partition", "computeinfo", "mem_host_flags", "profiling"]


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def test_list(logdir, suite):
    names = []
    for line in read(os.path.join(logdir, suite + ".list")).splitlines():
        if line.startswith("\t") and line.strip():
            names.append(line.strip())
    return names


def parse(logdir, mode, suite, names):
    """Returns ({test: status}, note) for one run, or None if it was not run."""
    base = os.path.join(logdir, mode, suite)
    if not os.path.exists(base + ".log"):
        return None
    text = read(base + ".log")
    rc = read(base + ".rc", "?").strip()
    known = set(names)
    status, started = {}, None
    for line in text.splitlines():
        line = line.strip()
        m = re.search(r"(?:^|\s)(\S+)\.\.\.$", line)
        if m and m.group(1) in known:
            started = m.group(1)
            continue
        # A sub-test's own output may precede the harness' verdict on the line.
        m = re.search(r"(?:^|\s)(\S+) (passed|FAILED|test not supported|test currently not implemented"
                     r"|skipped \(requires.*)$", line)
        if m and m.group(1) in known:
            word = m.group(2)
            status[m.group(1)] = {"passed": "pass", "FAILED": "FAIL"}.get(word, "skip")
            if m.group(1) == started:
                started = None
            continue
        m = re.match(r"^Test (skipped|failed) while initialization", line)
        if m:
            for n in names:
                status[n] = "skip" if m.group(1) == "skipped" else "FAIL"
    note = ""
    killed = rc in ("124", "137")
    if started is not None and started not in status:
        status[started] = "timeout" if killed else "crash"
        note = f"{status[started]} in `{started}`"
    elif killed:
        note = "timeout"
    elif rc not in ("0", "1") and not status:
        note = f"exit {rc}"
    for n in names:
        status.setdefault(n, "not run")
    return status, note


def cell(st, note):
    counts = {}
    for s in st.values():
        counts[s] = counts.get(s, 0) + 1
    run = len(st) - counts.get("skip", 0)
    text = f"{counts.get('pass', 0)}/{run}"
    if counts.get("skip"):
        text += f" ({counts['skip']} skipped)"
    if note:
        text += f", {note}"
    return text


def main():
    logdir = sys.argv[1] if len(sys.argv) > 1 else "target/cts/logs"
    results = {}
    print("| suite | sub-tests | " + " | ".join(label for _, label in MODES) + " |")
    print("|---|---|" + "---|" * len(MODES))
    for suite in SUITES:
        names = test_list(logdir, suite)
        if not names:
            continue
        row = [f"`{suite}`", str(len(names))]
        for mode, _ in MODES:
            r = parse(logdir, mode, suite, names)
            results[(suite, mode)] = r
            row.append("—" if r is None else cell(*r))
        print("| " + " | ".join(row) + " |")
    print()
    print("Cells: sub-tests passed / sub-tests run (not skipped by the suite itself).")
    print()
    print("Sub-tests that pass natively but not on MirrorCL:")
    print()
    any_exc = False
    for suite in SUITES:
        native = results.get((suite, "native"))
        if native is None:
            continue
        for test in sorted(native[0]):
            if native[0][test] != "pass":
                continue
            bad = []
            for mode, label in MODES[1:]:
                r = results.get((suite, mode))
                if r is not None and r[0][test] != "pass":
                    bad.append(f"{mode}: {r[0][test]}")
            if bad:
                any_exc = True
                print(f"- `{suite}` `{test}`: " + ", ".join(bad))
    if not any_exc:
        print("- none")
    print()
    print("Sub-tests that fail natively (PoCL):")
    print()
    none = True
    for suite in SUITES:
        native = results.get((suite, "native"))
        if native is None:
            continue
        for test in sorted(native[0]):
            if native[0][test] not in ("pass", "skip"):
                none = False
                others = []
                for mode, _ in MODES[1:]:
                    r = results.get((suite, mode))
                    if r is not None:
                        others.append(f"{mode}: {r[0][test]}")
                print(f"- `{suite}` `{test}`: native {native[0][test]}"
                      + (" (" + ", ".join(others) + ")" if others else ""))
    if none:
        print("- none")


if __name__ == "__main__":
    main()
