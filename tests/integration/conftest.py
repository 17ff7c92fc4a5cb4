"""Fixtures that own the real controller and the emulated network: one of each per test module, torn down
cleanly (bridges and veths removed, never `mn -c`). Integration tests need root, OVS and Mininet."""

import os
import shutil
import subprocess
import time

import pytest

from tests.integration import harness

# Run as CI and services do: without $SHELL (Mininet's popen(shell=True) needs it; our code must not).
os.environ.pop("SHELL", None)


def _platform_ready():
    if os.geteuid() != 0:
        return "integration tests need root (Mininet)"
    if not shutil.which("mnexec") or not shutil.which("ovs-vsctl"):
        return "Mininet / Open vSwitch not installed (run scripts/setup_env.sh)"
    if subprocess.run(["ovs-vsctl", "show"], capture_output=True).returncode != 0:
        return "Open vSwitch is not running (run scripts/setup_env.sh)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _platform_ready()
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            if reason and os.environ.get("MLROUTE_REQUIRE_INTEGRATION") != "1":
                item.add_marker(pytest.mark.skip(reason=reason))


class Fabric:
    """A running controller + network pair, with the time the network started."""

    def __init__(self, controller, net, started):
        self.controller = controller
        self.net = net
        self.started = started

    def elapsed(self):
        return time.time() - self.started


@pytest.fixture(scope="module")
def fabric_factory(tmp_path_factory):
    made = []

    def make(topo, config_text=None, jumbo=False, framework="ryu", extra_env=None, table_limit=None):
        for earlier in made:  # one emulated network at a time on this machine
            harness.stop_network(earlier.net)
        workdir = tmp_path_factory.mktemp("ctl")
        controller = harness.Controller(workdir, config_text, extra_env, **harness.framework_options(framework))
        controller.wait_ready()
        net = harness.start_network(topo, controller, jumbo=jumbo, table_limit=table_limit)
        fab = Fabric(controller, net, time.time())
        made.append(fab)
        return fab

    yield make
    for fab in made:  # every controller is stopped even if a network's teardown fails
        try:
            harness.stop_network(fab.net)
        except Exception as exc:
            print(f"teardown of a network failed: {exc!r}")
        fab.controller.stop()
        print(f"\n--- controller log tail ({fab.controller.log_path}) ---\n{fab.controller.log()[-2000:]}")
