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
    """A running controller (or cluster of them: ``controllers``) + network pair, with the time the network
    started."""

    def __init__(self, controllers, net, started):
        self.controllers = controllers
        self.controller = controllers[0] if controllers else None
        self.net = net
        self.started = started

    def elapsed(self):
        return time.time() - self.started


@pytest.fixture(scope="module")
def fabric_factory(tmp_path_factory):
    made = []

    def make(topo, config_text=None, jumbo=False, framework="ryu", extra_env=None, table_limit=None):
        """``config_text`` a list: one controller per configuration (a cluster), every switch connected to all."""
        for earlier in made:  # one emulated network at a time on this machine
            harness.stop_network(earlier.net)
        texts = config_text if isinstance(config_text, list) else [config_text]
        controllers = []
        fab = Fabric(controllers, None, time.time())
        made.append(fab)  # stopped at teardown even if a later one fails to start
        for text in texts:
            controllers.append(harness.Controller(tmp_path_factory.mktemp("ctl"), text, extra_env,
                                                  **harness.framework_options(framework)))
        for controller in controllers:
            controller.wait_ready()
        fab.controller = controllers[0]
        fab.net = harness.start_network(topo, controllers if len(controllers) > 1 else controllers[0], jumbo=jumbo,
                                        table_limit=table_limit)
        fab.started = time.time()
        return fab

    yield make
    for fab in made:  # every controller is stopped even if a network's teardown fails
        try:
            if fab.net is not None:
                harness.stop_network(fab.net)
        except Exception as exc:
            print(f"teardown of a network failed: {exc!r}")
        for controller in fab.controllers:
            controller.stop()
            print(f"\n--- controller log tail ({controller.log_path}) ---\n{controller.log()[-2000:]}")
