"""Run chosen test modules N times in a row and say how many runs passed, failed and timed out, with the names
of what failed (a test that fails now and then is a bug to find, not a run to repeat).

    scripts/soak.sh tests/unit/controller/cluster/test_zookeeper.py tests/unit/controller/shell/test_app_cluster.py \
        --runs 50
    scripts/soak.sh tests/integration/test_cluster.py --runs 5
    scripts/soak.sh MODULES --runs 50 --beside-unit   # with the unit phase of scripts/test.sh running beside it

Each run is one pytest process (``-p no:cacheprovider``, a JUnit XML report read back). A test past its limit
(pytest-timeout, pyproject.toml) counts as timed out; a whole run past ``--run-timeout`` is killed and counts as
timed out too. ``--beside-unit`` runs the os-ken unit phase of scripts/test.sh over and over (one core) while
the runs go on, as CI does beside its other unit phase. Exit status 0 only when every run passed.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_UNIT = ["tests/unit/controller/cluster/test_zookeeper.py", "tests/unit/controller/shell/test_app_cluster.py"]
# the os-ken unit phase of scripts/test.sh (keep in step with it)
BESIDE_UNIT = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/controller", "tests/unit/test_deployment.py",
               "tests/unit/test_monitoring.py", "tests/unit/test_script_imports.py", "tests/unit/mlroute/test_cli.py",
               "tests/unit/mininet_topos", "--ignore=tests/unit/controller/shell/test_recovery_kills.py",
               *[f"--ignore={m}" for m in CLUSTER_UNIT]]


def outcomes(report: Path) -> tuple[int, list[str], list[str]]:
    """(tests run, failed test ids, timed-out test ids) from a JUnit XML report."""
    tree = ET.parse(report)
    ran, failed, timed_out = 0, [], []
    for case in tree.iter("testcase"):
        ran += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = [el for el in case if el.tag in ("failure", "error")]
        if not bad:
            continue
        text = " ".join((el.get("message") or "") + (el.text or "") for el in bad)
        (timed_out if "Timeout (>" in text else failed).append(name)
    return ran, failed, timed_out


def one_run(python: str, modules: list[str], extra: list[str], run_timeout_s: float,
            log: Path) -> tuple[str, int, list[str], list[str], float]:
    report = log.with_suffix(".xml")
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                                 *extra, *modules], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=run_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "timed out", 0, [], [f"(the whole run, past {run_timeout_s:g} s)"], time.monotonic() - started
        finally:
            if proc.poll() is None:  # the soak itself stopped mid-run
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    took = time.monotonic() - started
    if not report.exists():
        return "failed", 0, [f"(no report: pytest exit {code}; see {log})"], [], took
    ran, failed, timed_out = outcomes(report)
    if code != 0 and not failed and not timed_out:
        failed = [f"(pytest exit {code}; see {log})"]
    verdict = "timed out" if timed_out else "failed" if failed else "passed"
    return verdict, ran, failed, timed_out, took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="test modules (or node ids) to run each time")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--beside-unit", action="store_true",
                        help="run the os-ken unit phase of scripts/test.sh beside the runs, over and over")
    parser.add_argument("--python", default=str(ROOT / ".venv/bin/python"))
    parser.add_argument("--run-timeout", type=float, default=3600.0, help="seconds; a longer run is killed")
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed to each pytest run")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped soak still stops what it started (finally)
    logs = Path(tempfile.mkdtemp(prefix="soak-"))
    beside = None
    if args.beside_unit:
        osken = ROOT / ".venv-osken/bin/python"
        python = str(osken if osken.exists() else args.python)
        loop = f"while true; do {python} {' '.join(BESIDE_UNIT)} >/dev/null 2>&1; done"
        beside = subprocess.Popen(["bash", "-c", loop], cwd=ROOT, start_new_session=True)
        print(f"[soak] beside: the os-ken unit phase, over and over ({python})", flush=True)
    counts: collections.Counter = collections.Counter()
    names: collections.Counter = collections.Counter()
    try:
        for i in range(1, args.runs + 1):
            log = logs / f"run{i:03d}.log"
            verdict, ran, failed, timed_out, took = one_run(args.python, args.modules, args.pytest_arg,
                                                            args.run_timeout, log)
            counts[verdict] += 1
            names.update(f"failed: {n}" for n in failed)
            names.update(f"timed out: {n}" for n in timed_out)
            detail = "" if verdict == "passed" else f"  {', '.join(failed + timed_out)}  (log: {log})"
            print(f"[soak] run {i}/{args.runs}: {verdict}, {ran} tests, {took:.0f} s{detail}", flush=True)
    finally:
        if beside is not None:
            os.killpg(beside.pid, signal.SIGKILL)
            beside.wait()
    print(f"[soak] {' '.join(args.modules)}{' (beside the unit phase)' if args.beside_unit else ''}: "
          f"{args.runs} runs: {counts['passed']} passed, {counts['failed']} failed, {counts['timed out']} timed out")
    for name, n in names.most_common():
        print(f"[soak]   {n}x {name}")
    print(f"[soak] logs: {logs}")
    return 0 if counts["passed"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
