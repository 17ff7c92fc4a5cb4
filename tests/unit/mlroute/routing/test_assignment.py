"""max_assignment: scipy's linear_sum_assignment (maximize) answer, ties included, without importing scipy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from mlroute.routing.optimisers import assignment
from mlroute.routing.optimisers.assignment import max_assignment


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 24), st.sampled_from([2, 4, 50]), st.integers(0, 2**32 - 1))
def test_same_assignment_as_scipy(n, spread, seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(0, spread, size=(n, n)).astype(float)  # small ranges: many optimal assignments
    assert max_assignment(w).tolist() == linear_sum_assignment(w, maximize=True)[1].tolist()


def test_counts_like_the_relabelling_and_large_matrices(monkeypatch):
    rng = np.random.default_rng(3)
    for n in (1, 2, 8, 32, 40):
        w = np.zeros((n, n))
        np.add.at(w, (rng.integers(0, n, 20 * n), rng.integers(0, n, 20 * n)), 1)
        assert max_assignment(w).tolist() == linear_sum_assignment(w, maximize=True)[1].tolist()
    assert max_assignment(np.zeros((5, 5))).tolist() == [0, 1, 2, 3, 4]
    monkeypatch.setattr(assignment, "PURE_PYTHON_MAX", 4)  # beyond it: scipy itself
    w = rng.random((9, 9))
    assert max_assignment(w).tolist() == linear_sum_assignment(w, maximize=True)[1].tolist()


def test_bad_input():
    with pytest.raises(ValueError):
        max_assignment(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        max_assignment(np.array([[np.inf]]))


def test_no_scipy_import():
    code = ("import sys, numpy as np; from mlroute.routing.optimisers.assignment import max_assignment; "
            "max_assignment(np.eye(6)); print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
