"""The southbound framework layer (controller/southbound/framework.py): which framework, the turn native threads take,
and that no other module imports a framework."""

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from controller.southbound import framework as southbound
from controller.southbound import ofmsg
from controller.southbound.framework import FrameworkError, Turn, choose

ROOT = Path(__file__).resolve().parents[4]


def installed(*packages):
    return lambda package: package in packages


def test_an_explicit_setting_wins_over_what_is_installed():
    both = installed("ryu", "os_ken")
    assert choose({}, {}, both) == "ryu"  # Ryu first: the mission's framework
    assert choose({"MLROUTE_FRAMEWORK": "os-ken"}, {}, both) == "os-ken"
    assert choose({"MLROUTE_FRAMEWORK": "os_ken"}, {}, both) == "os-ken"
    assert choose({}, {}, installed("os_ken")) == "os-ken"


def test_the_framework_running_the_process_wins_and_a_contradiction_is_refused():
    both = installed("ryu", "os_ken")
    assert choose({}, {"os_ken.base.app_manager": object()}, both) == "os-ken"
    assert choose({"MLROUTE_FRAMEWORK": "ryu"}, {"ryu.base.app_manager": object()}, both) == "ryu"
    with pytest.raises(FrameworkError, match="already runs ryu"):
        choose({"MLROUTE_FRAMEWORK": "os-ken"}, {"ryu.base.app_manager": object()}, both)


def test_missing_or_unknown_frameworks_say_what_to_install():
    with pytest.raises(FrameworkError, match=r"mlroute\[ryu\]"):
        choose({}, {}, installed())
    with pytest.raises(FrameworkError, match=r"mlroute\[os-ken\]"):
        choose({"MLROUTE_FRAMEWORK": "os-ken"}, {}, installed("ryu"))
    with pytest.raises(FrameworkError, match="expected"):
        choose({"MLROUTE_FRAMEWORK": "pox"}, {}, installed("ryu"))


def test_the_openflow_encoding_is_the_chosen_frameworks():
    assert ofmsg.ofparser.__name__ == f"{southbound.PACKAGE}.ofproto.ofproto_v1_3_parser"
    assert southbound.NATIVE == (southbound.NAME == "os-ken")  # os-ken 4's default hub: native threads


def test_a_thread_that_gives_up_the_turn_lets_another_run_and_gets_it_back_as_deep_as_before():
    turn = Turn(enabled=True)
    order = []
    turn.acquire()
    turn.acquire()  # re-entrant

    def other():
        with turn.held():
            order.append("other")
    thread = threading.Thread(target=other)
    thread.start()
    time.sleep(0.05)
    assert order == []  # it waits for the turn
    with turn.given_up():
        thread.join(2)
        assert order == ["other"]
    assert turn.holds()
    turn.release()
    assert turn.holds()  # depth 2 restored: one release left
    turn.release()
    assert not turn.holds()
    with turn.given_up():  # a thread without the turn gives up nothing
        assert not turn.holds()


def test_a_disabled_turn_is_no_lock_at_all():
    turn = Turn(enabled=False)
    with turn.held():
        seen = []
        thread = threading.Thread(target=lambda: turn.held().__enter__() or seen.append(1))
        thread.start()
        thread.join(2)
        assert seen == [1]


FRAMEWORK_IMPORT = re.compile(r"^\s*(?:from|import)\s+(ryu|os_ken|eventlet)\b", re.M)


def test_only_the_southbound_layer_imports_a_framework():
    """controller/southbound/framework.py imports Ryu or os-ken; controller/southbound/wsgi_server.py is Ryu's
    eventlet server's limits, loaded by the framework layer under Ryu only. Nothing else in the packages imports
    either, or eventlet."""
    allowed = {"controller/southbound/framework.py", "controller/southbound/wsgi_server.py"}
    found = {str(path.relative_to(ROOT)) for package in ("controller", "mlroute", "mininet_topos")
             for path in (ROOT / package).rglob("*.py") if FRAMEWORK_IMPORT.search(path.read_text())}
    assert found <= allowed, sorted(found - allowed)


OSKEN_PYTHON = Path(os.environ.get("MLROUTE_OSKEN_PYTHON", ROOT / ".venv-osken" / "bin" / "python"))
NO_EVENTLET = """import os, sys
os.environ["MLROUTE_FRAMEWORK"] = "os-ken"
import controller.app, controller.shell.launcher, controller.web.rest, controller.southbound.http_server
from controller.southbound import framework as southbound
assert southbound.NAME == "os-ken" and southbound.NATIVE
print(sorted(m for m in sys.modules if m.split(".")[0] in ("eventlet", "greenlet", "ryu")))
"""


@pytest.mark.skipif(not OSKEN_PYTHON.exists(), reason=f"no os-ken venv at {OSKEN_PYTHON}")
def test_under_os_ken_the_controller_imports_no_eventlet():
    """The app, its launcher and REST server loaded under os-ken: no eventlet (nor greenlet, nor Ryu) in
    sys.modules. (The live controller's whole import log is checked in tests/integration/test_os_ken.py.)"""
    out = subprocess.run([str(OSKEN_PYTHON), "-c", NO_EVENTLET], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={k: v for k, v in os.environ.items() if k != "MLROUTE_CONFIG"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


@pytest.mark.skipif(not southbound.NATIVE, reason="os-ken's native hub only")
def test_the_native_hubs_event_wait_times_out_once_fixed():
    """os-ken 4.2's native hub.Event().wait(timeout) waits until set, whatever the timeout; the fix (applied
    when the app loads) makes the topology app's loops wake on time again."""
    import controller.app  # noqa: F401  (applies the fix, as loading the app does)

    assert southbound.hub.Event is southbound.Event
    started = time.monotonic()
    assert southbound.hub.Event().wait(timeout=0.2) is False
    assert time.monotonic() - started < 1
