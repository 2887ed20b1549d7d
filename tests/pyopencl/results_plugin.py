"""pytest plugin for tests/pyopencl/run.sh: stable test ids, deselection by those ids,
and per-test results written as they happen (so a crash of the process hides nothing).

Loaded with `-p results_plugin` (this directory on PYTHONPATH). Environment:
  RESULTS_FILE   JSON lines appended: {"start": id} before a test runs, then
                 {"id", "outcome", "reason"} once it is over.
  DESELECT_FILE  optional, one stable id a line: tests not to run (already done).

pyopencl names its parameters after the device, including its address ("at 0x..."),
which differs between processes, and the platform's name, which differs between the
native run and MirrorCL's. Stable ids replace them by "<device>"/"<platform>" and
number repeated ids (two PoCL devices have the same name) in collection order, which
is the order of the platform's devices.
"""

import json
import os
import re

import pytest

_DEVICE = re.compile(r"<pyopencl\.Device '[^']*' on '[^']*'(?: at 0x[0-9a-fA-F]+)?>")
_PLATFORM = re.compile(r"<pyopencl\.Platform '[^']*'(?: at 0x[0-9a-fA-F]+)?>")

_stable = {}  # nodeid -> stable id
_phases = {}  # nodeid -> list of (when, outcome, reason)


def stable_base(nodeid):
    return _PLATFORM.sub("<platform>", _DEVICE.sub("<device>", nodeid))


def _write(record):
    path = os.environ.get("RESULTS_FILE")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    seen = {}
    for item in items:
        base = stable_base(item.nodeid)
        k = seen.get(base, 0)
        seen[base] = k + 1
        _stable[item.nodeid] = base if k == 0 else f"{base}#{k}"
    path = os.environ.get("DESELECT_FILE")
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            skip = {line.rstrip("\n") for line in f if line.strip()}
        keep = [i for i in items if _stable[i.nodeid] not in skip]
        gone = [i for i in items if _stable[i.nodeid] in skip]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    _write({"start": _stable.get(nodeid, stable_base(nodeid))})


def _reason(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    if report.failed:
        text = getattr(report, "longreprtext", "") or ""
        lines = [l for l in text.splitlines() if l.startswith("E ")]
        return (lines[-1] if lines else text.splitlines()[-1] if text else "")[:300]
    return ""


def pytest_runtest_logreport(report):
    _phases.setdefault(report.nodeid, []).append(
        (report.when, report.outcome, _reason(report), hasattr(report, "wasxfail"))
    )
    if report.when != "teardown":
        return
    phases = _phases.pop(report.nodeid)
    outcome, reason = "passed", ""
    for when, out, why, xfail in phases:
        if out == "failed":
            outcome, reason = ("failed" if when == "call" else "error"), why
            break
        if out == "skipped":
            outcome, reason = ("xfailed" if xfail else "skipped"), why
        elif xfail and when == "call":
            outcome, reason = "xpassed", why
    _write(
        {
            "id": _stable.get(report.nodeid, stable_base(report.nodeid)),
            "outcome": outcome,
            "reason": reason,
        }
    )
