"""The controller starts without the heavy optional parts: scipy (the ilp optimiser) and matplotlib (reports)."""

import subprocess
import sys

HEAVY = ("scipy", "matplotlib")


def test_loading_the_ryu_app_imports_neither_scipy_nor_matplotlib():
    code = ("import sys, controller.app; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_ilp_optimiser_still_brings_scipy_when_asked_for():
    code = ("import sys; from mlroute.routing.optimisers import OPTIMISERS; OPTIMISERS['ilp']; "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "True"
