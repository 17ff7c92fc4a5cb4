"""The controller starts without the heavy parts it may never need: scipy (the ilp optimiser), matplotlib
(reports) and numba (the routing core's compiled kernels, loaded by the optimiser's worker)."""

import subprocess
import sys

HEAVY = ("scipy", "matplotlib", "numba")


def test_loading_the_ryu_app_imports_none_of_the_heavy_parts():
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


def test_the_kernels_bring_numba_when_first_used():
    code = ("import sys; from mlroute.routing import kernels; before = 'numba' in sys.modules; "
            "kernels.warm(); print(before, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False True"
