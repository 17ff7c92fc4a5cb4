"""The live subset under os-ken 4 (issue 24): ``mlroute controller --framework os-ken`` from the os-ken venv
(native threads, mlroute's own REST server), real Open vSwitch and Mininet, on one k=4 fat-tree. The checks are
the Ryu suite's own test bodies, run against this controller: pingall, REST under concurrent calls and slow
clients, the web view's files and its REST calls, the web view rendered in headless Chromium over the loaded
fabric; and no eventlet imported anywhere in the controller's process (its import log,
``PYTHONPROFILEIMPORTTIME``). The 8 stride elephants pinned link-disjoint in the switches' tables, a SIGKILL and
restart without a lost ping, a link cut and a wiped switch under os-ken: the conformance suite's ``no groups``
run (test_conformance.py)."""

import re

import pytest

import tests.integration.test_rest_concurrency as rest_concurrency
import tests.integration.test_web_ui as web_ui
from mininet_topos.fattree import FatTreeTopo
from tests.integration.checks import assert_pingall_converges
from tests.integration.harness import OSKEN_PYTHON

# the web view test's configuration (its token and two declared jobs), with the REST tests' client timeout
CONFIG = web_ui.CONFIG.replace("  token: secret\n",
                               f"  token: secret\n  client_timeout_s: {rest_concurrency.CLIENT_TIMEOUT_S}\n")
IMPORT_LOG = {"PYTHONPROFILEIMPORTTIME": "1"}  # every module the process imports, on its stderr (the log)

pytestmark = pytest.mark.skipif(not OSKEN_PYTHON.exists(),
                                reason=f"no os-ken venv at {OSKEN_PYTHON} (scripts/test.sh makes .venv-osken)")


def on_os_ken(fabric_factory):
    """``fabric_factory`` whose controllers run under os-ken, their imports logged."""
    def make(topo, config_text=None, jumbo=False):
        return fabric_factory(topo, config_text, jumbo=jumbo, framework="os-ken", extra_env=IMPORT_LOG)
    return make


@pytest.fixture(scope="module")
def fab(fabric_factory):
    fab = on_os_ken(fabric_factory)(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert "mlroute controller on os-ken (native threads)" in fab.controller.log()
    return fab


def imported(log):
    """Top-level packages the process imported, from its ``-X importtime`` lines (behind the harness's time)."""
    line = re.compile(r"^(?:[\d:.]+ )?import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", re.M)
    return {m.group(1).split(".")[0] for m in line.finditer(log)}


def test_pingall_converges_under_os_ken(fab):
    assert_pingall_converges(fab)


def test_rest_and_the_web_view_under_os_ken(fab):
    web_ui.test_the_page_and_the_objective_switch_over_rest(fab)
    rest_concurrency.test_concurrent_recompute_calls_get_clean_answers_and_few_decisions(fab)
    rest_concurrency.test_slow_header_connections_are_cut_off(fab)


@pytest.fixture
def loaded_fab(fab):
    web_ui.required_binary("chromium")
    yield from web_ui.loaded(fab)


def test_the_web_view_renders_the_loaded_fabric_under_os_ken(loaded_fab, tmp_path):
    web_ui.test_the_rendered_page_shows_the_fabric_its_load_and_every_elephant_path(loaded_fab, tmp_path)


def test_no_eventlet_in_the_os_ken_controller(fab):
    modules = imported(fab.controller.log())
    assert {"os_ken", "controller", "webob"} <= modules, sorted(modules)  # the log is the import log
    assert "eventlet" not in modules and "greenlet" not in modules and "ryu" not in modules

