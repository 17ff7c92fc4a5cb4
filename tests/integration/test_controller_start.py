"""The real ryu-manager refuses a malformed configuration at start, naming the key (no network needed)."""

import pytest

from tests.integration.harness import Controller


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
