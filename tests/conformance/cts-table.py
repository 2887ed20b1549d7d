#!/usr/bin/env python3
"""Turns the logs of run-cts.sh into the table of docs/conformance.md.

    cts-table.py LOGDIR      # LOGDIR/<suite>.list, LOGDIR/<mode>/<suite>.{log,rc,secs}
    cts-table.py --remaining LOG LIST   # sub-tests not reached (run-cts.sh, after a crash)

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
    return test_list_file(os.path.join(logdir, suite + ".list"))


def test_list_file(path):
    names = []
    for line in read(path).splitlines():
        if line.startswith("\t") and line.strip():
            names.append(line.strip())
    return names


def scan(text, names):
    """Statuses of the sub-tests in one log (possibly several runs, each ended by
    "### run-cts: rc=N"), the notes (crashes, timeouts), the sub-test running at the end
    of a log without that line, whether the last run died in a sub-test (a crash, or an
    abort under mpirun, whose code is 1 like a failure) and why sub-tests were skipped."""
    known = set(names)
    status, notes, started, last_started = {}, [], None, False
    # Why a sub-test was skipped: the last line of its output about support or skipping,
    # else the verdict.
    why, said = {}, ""

    def ended(rc):
        nonlocal started, last_started
        last_started = False
        if started is not None and started not in status:
            status[started] = "timeout" if rc in ("124", "137") else "crash"
            notes.append(f"{status[started]} in `{started}`")
            last_started = True
        elif rc in ("124", "137"):
            notes.append("timeout")
        started = None

    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^### run-cts: rc=(\d+)$", line)
        if m:
            ended(m.group(1))
            continue
        m = re.search(r"(\w+)\.\.\.$", line)
        if m and m.group(1) in known:
            if started is None or started in status:
                started = m.group(1)
            said = ""
            continue
        # A sub-test's own output may precede the harness' verdict on the line.
        m = re.search(r"(\w+) (passed|FAILED|test not supported"
                      r"|test currently not implemented|skipped \(requires.*)$", line)
        if m and m.group(1) in known:
            word = m.group(2)
            status[m.group(1)] = {"passed": "pass", "FAILED": "FAIL"}.get(word, "skip")
            if word.startswith("skipped (requires"):
                why[m.group(1)] = re.sub(r"^skipped \((requires [^,]*).*", r"\1", word)
            elif status[m.group(1)] == "skip":
                why[m.group(1)] = said or word
            continue
        m = re.match(r"^Test (skipped|failed) while initialization", line)
        if m:
            for n in names:
                status.setdefault(n, "skip" if m.group(1) == "skipped" else "FAIL")
        if re.search(r"support|skip", line, re.I):
            said = line[:100]
    return status, notes, started, last_started, why


def remaining(logfile, listfile):
    """The sub-tests of the list not reached yet, one a line, if the last run died in a
    sub-test (a timeout excepted: run-cts.sh stops then)."""
    names = test_list_file(listfile)
    status, _, _, last_started, _ = scan(read(logfile), names)
    if last_started:
        for n in names:
            if n not in status:
                print(n)


def parse(logdir, mode, suite, names):
    """Returns ({test: status}, note) for one suite and mode, or None if not run."""
    base = os.path.join(logdir, mode, suite)
    if not os.path.exists(base + ".log"):
        return None
    text = read(base + ".log")
    rc = read(base + ".rc", "?").strip()
    status, notes, started, _, why = scan(text, names)
    if started is not None:  # a log without the end-of-run line
        text += f"\n### run-cts: rc={rc}\n"
        status, notes, _, _, why = scan(text, names)
    if not status and rc not in ("0", "1"):
        notes.append(f"exit {rc}")
    for n in names:
        status.setdefault(n, "not run")
    return status, ", ".join(notes), why


def cell(st, note):
    counts = {}
    for s in st.values():
        counts[s] = counts.get(s, 0) + 1
    run = len(st) - counts.get("skip", 0) - counts.get("not run", 0)
    text = f"{counts.get('pass', 0)}/{run}"
    if counts.get("skip"):
        text += f" ({counts['skip']} skipped)"
    if note:
        text += f", {note}"
    if counts.get("not run"):
        text += f", {counts['not run']} not reached"
    return text


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--remaining":
        remaining(sys.argv[2], sys.argv[3])
        return
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
            row.append("—" if r is None else cell(r[0], r[1]))
        print("| " + " | ".join(row) + " |")
    print()
    print("Cells: sub-tests passed / sub-tests run (neither skipped by the suite itself nor")
    print("left unreached by a timeout).")
    print()
    print("Sub-tests that pass natively and fail, crash or time out on MirrorCL:")
    print()
    skipped, unreached = [], {}
    any_exc = False
    for suite in SUITES:
        native = results.get((suite, "native"))
        if native is None:
            continue
        for test in sorted(native[0]):
            if native[0][test] != "pass":
                continue
            bad, skip = [], []
            for mode, label in MODES[1:]:
                r = results.get((suite, mode))
                if r is None or r[0][test] == "pass":
                    continue
                if r[0][test] == "skip":
                    skip.append((mode, r[2].get(test, "")))
                elif r[0][test] == "not run":
                    unreached[(suite, mode)] = unreached.get((suite, mode), 0) + 1
                else:
                    bad.append(f"{mode}: {r[0][test]}")
            if bad:
                any_exc = True
                print(f"- `{suite}` `{test}`: " + ", ".join(bad))
            if skip:
                reasons = sorted(set(w for _, w in skip))
                skipped.append(f"- `{suite}` `{test}` ({', '.join(m for m, _ in skip)}): "
                               + "; ".join(reasons))
    for (suite, mode), n in unreached.items():
        any_exc = True
        note = results[(suite, mode)][1] or "run stopped"
        print(f"- `{suite}` {mode}: {n} more not reached ({note})")
    if not any_exc:
        print("- none")
    print()
    print("Sub-tests that pass natively and that the suite skips on MirrorCL (its reason):")
    print()
    print("\n".join(skipped) if skipped else "- none")
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
