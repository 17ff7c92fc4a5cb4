"""The real ryu-manager refuses a malformed configuration at start, naming the key; ``mlroute controller``
serves and stops cleanly on SIGTERM under Ryu and os-ken (no network needed)."""

import signal
import urllib.request
from pathlib import Path

import pytest

from tests.integration.harness import OSKEN_PYTHON, Controller, framework_options, wait_until


@pytest.mark.parametrize("text, key", [
    ("te:\n  mode: fastest\n", "te.mode"),
    ("te:\n  poll_interval_s: 0\n", "te.poll_interval_s"),
    ("rest:\n  tokn: x\n", "rest.tokn"),
    ("rest:\n  host: 'not a host!'\n", "rest.host"),  # was: a traceback after start
    ("te:\n  flow_idle_timeout_s: 100000\n", "te.flow_idle_timeout_s"),  # was: struct.error at run time
    ("te:\n  mode: ilp\n", "te.mode"),  # an ILP without a time budget would block nothing now, but run 60 s
])
def test_malformed_config_stops_the_controller_with_the_key(tmp_path, key, text):
    ctl = Controller(tmp_path, text)
    try:
        ctl.proc.wait(timeout=60)
        assert ctl.proc.returncode == 2
        log = ctl.log()
        assert "invalid configuration" in log and f"mlroute.yaml:2: {key}" in log, log[-2000:]
        assert "Traceback" not in log, log[-2000:]
    finally:
        ctl.stop()


def children(pid):
    """Process ids whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def assert_sigterm_stops_it_and_its_worker(ctl):
    """The optimiser's worker (a child process) is up; SIGTERM: the controller exits 0 and the worker is gone."""
    workers = wait_until(lambda: children(ctl.proc.pid) or None, timeout=30)
    assert workers, "no optimiser worker process"
    ctl.proc.send_signal(signal.SIGTERM)
    assert ctl.proc.wait(timeout=15) == 0, ctl.log()[-2000:]
    assert not [w for w in workers if Path(f"/proc/{w}").exists()
                and "Z" not in Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0]], workers
    assert "SIGTERM: stopping" in ctl.log() and "Traceback" not in ctl.log()


@pytest.mark.parametrize("framework", ["ryu", pytest.param("os-ken", marks=pytest.mark.skipif(
    not OSKEN_PYTHON.exists(), reason=f"no os-ken venv at {OSKEN_PYTHON}"))])
def test_mlroute_controller_serves_and_stops_cleanly_on_sigterm(tmp_path, framework):
    ctl = Controller(tmp_path, "te:\n  poll_interval_s: 1\n", launcher=True, **framework_options(framework))
    try:
        ctl.wait_ready()
        assert ctl.get("/mlroute/topology") == {"switches": [], "links": [], "hosts": []}
        with urllib.request.urlopen(ctl.url("/"), timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/html") and b"mlroute" in r.read()
        assert f"mlroute controller on {framework}" in ctl.log()
        assert_sigterm_stops_it_and_its_worker(ctl)
    finally:
        ctl.stop()
