"""RateState (the polishing's re-fill around one move) against a full water-filling of the moved routing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.incremental import RateState, _replace_sorted
from mlroute.routing.metric import leximin_compare, water_fill
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.mlroute import rate_levels


def _random_problem(rng, fabric, n_flows, demands):
    hosts = list(fabric.hosts)
    flows = []
    for _ in range(n_flows):
        a, b = rng.choice(len(hosts), size=2, replace=False)
        d = float(rng.choice([0.1, 0.3, 0.5, 1.0])) if demands and rng.random() < 0.6 else None
        flows.append(Flow(hosts[a], hosts[b], demand=d))
    prob = Problem(fabric, flows)
    choice = prob.initial_choice()
    for i in prob.inter.tolist():
        choice[i] = rng.integers(prob.n_opts[i])
    return prob, choice


def _walk(prob, choice, rng, steps):
    """Random moves, some committed, some dropped; every trial checked against a full water-filling."""
    rows, caps, dem = prob.rate_inputs(choice)
    dem = np.full(len(prob.flows), np.inf) if dem is None else dem
    state = RateState(rows, caps, dem, water_fill(rows, caps, dem))
    movable = prob.inter[prob.n_opts[prob.inter] > 1]
    for _ in range(steps):
        i = int(rng.choice(movable))
        row = prob.rate_row(i, prob.option_links(i)[int(rng.integers(prob.n_opts[i]))])
        got = state.trial(i, row)
        moved = state.rows.copy()
        moved[i] = row
        want = water_fill(moved, caps, dem)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert state.leximin(got) == leximin_compare(got, state.rates)
        if rng.random() < 0.7:
            state.commit()
            np.testing.assert_allclose(state.rates, want, rtol=1e-9, atol=1e-12)
    return state


@pytest.mark.parametrize("fabric, n_flows, demands", [
    (Fabric.fattree(4), 40, False),
    (Fabric.fattree(6), 300, True),
    (Fabric.clos(8, 4, 4), 120, True),
    (Fabric.clos(16, 4, 8), 600, False),
])
def test_trials_equal_a_full_water_filling(fabric, n_flows, demands):
    rng = np.random.default_rng(n_flows)
    prob, choice = _random_problem(rng, fabric, n_flows, demands)
    state = _walk(prob, choice, rng, 60)
    assert state.full_fills < 60  # the point: most trials re-fill only around the move
    # the flows per link (built on first use) follow the committed moves
    for link in range(len(state.caps) - 1):
        assert state.members[link] == set(np.flatnonzero((state.rows == link).any(1)).tolist())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 60), st.booleans())
def test_trials_equal_a_full_water_filling_on_random_instances(seed, n_flows, demands):
    rng = np.random.default_rng(seed)
    fabric = Fabric.fattree(4) if seed % 2 else Fabric.clos(4, 3, 3)
    prob, choice = _random_problem(rng, fabric, n_flows, demands)
    if not len(prob.inter[prob.n_opts[prob.inter] > 1]):
        return
    _walk(prob, choice, rng, 20)


def test_commit_needs_a_trial():
    prob, choice = _random_problem(np.random.default_rng(0), Fabric.fattree(4), 8, False)
    rows, caps, dem = prob.rate_inputs(choice)
    state = RateState(rows, caps, np.full(8, np.inf), water_fill(rows, caps, dem))
    with pytest.raises(RuntimeError):
        state.commit()


def test_rate_levels_merge_float_noise_whatever_the_unit():
    base = np.array([1 / 3, 1 / 7, 1 / 7 * (1 + 1e-14), 0.5, 0.5 * (1 - 1e-15), 0.9])
    assert rate_levels(base, 32) == pytest.approx([1 / 7, 1 / 3, 0.5 * (1 - 1e-15), 0.9], rel=1e-15)
    scaled = rate_levels(base * 1e9, 32)  # capacities in bit/s: rounding to decimals would not merge these
    assert len(scaled) == 4
    assert rate_levels(base, 2) == pytest.approx([1 / 7, 1 / 3])
    assert rate_levels(np.zeros(3), 5) == [0.0]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, np.inf]), min_size=1, max_size=30), st.data())
def test_replace_sorted_is_the_sort_of_the_changed_vector(values, data):
    vec = np.array(values)
    idx = data.draw(st.lists(st.integers(0, len(vec) - 1), unique=True))
    new = vec.copy()
    new[idx] = data.draw(st.lists(st.sampled_from([0.0, 0.5, 0.75, 3.0, np.inf]), min_size=len(idx), max_size=len(idx)))
    got = _replace_sorted(np.sort(vec), vec[idx], new[idx])
    assert got.tolist() == np.sort(new).tolist()
