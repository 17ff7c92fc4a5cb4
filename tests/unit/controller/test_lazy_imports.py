"""The controller starts without the heavy parts it may never need: scipy (the ilp optimiser), matplotlib
(reports) and numba (the routing core's compiled kernels, loaded by the optimiser's worker)."""

import subprocess
import sys

HEAVY = ("scipy", "matplotlib", "numba")


def _last_line(code: str) -> str:
    """The last line a fresh interpreter prints running ``code``."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_loading_the_ryu_app_imports_none_of_the_heavy_parts():
    assert _last_line(f"import sys, controller.app; print(sorted(m for m in {HEAVY!r} if m in sys.modules))") == "[]"


def test_the_ilp_optimiser_still_brings_scipy_when_asked_for():
    assert _last_line("import sys; from mlroute.routing.optimisers import OPTIMISERS; OPTIMISERS['ilp']; "
                      "print('scipy' in sys.modules)") == "True"


def test_the_kernels_bring_numba_when_first_used():
    assert _last_line("import sys; from mlroute.routing import kernels; before = 'numba' in sys.modules; "
                      "kernels.warm(); print(before, 'numba' in sys.modules)") == "False True"
