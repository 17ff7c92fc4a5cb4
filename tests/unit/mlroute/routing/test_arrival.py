"""Newcomers beside a routing in force (mlroute.routing.arrival): the relaxed rates bound every placement of
them, and a placement with room for them is certified and reaches that bound (against brute force)."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mlroute.routing import arrival, metric
from mlroute.routing.optimisers import Problem
from mlroute.routing.optimisers import optimise as run_optimiser
from tests.unit.mlroute.routing.strategies import any_instance


def rates_of(prob, choice):
    return prob.rates(choice)


@settings(max_examples=60, deadline=None)
@given(any_instance, st.integers(1, 2), st.integers(0, 2**16))
def test_no_placement_beats_the_relaxed_rates_and_a_roomy_placement_reaches_them(instance, newcomers, seed):
    fabric, flows = instance
    prob = Problem(fabric, flows)
    kept = run_optimiser("ecmp", fabric, prob, seed=seed).choice
    new = np.zeros(len(flows), dtype=bool)
    new[-newcomers:] = True
    relaxed = arrival.relaxed_rates(prob, kept, new)
    idx = np.flatnonzero(new)
    for options in itertools.product(*(range(max(prob.n_opts[i], 1)) for i in idx)):
        choice = kept.copy()
        choice[idx] = [o if prob.n_opts[i] else -1 for i, o in zip(idx, options)]
        assert metric.leximin_compare(rates_of(prob, choice), relaxed) <= 0
    placed, fits = arrival.place_beside(prob, kept, new, relaxed)
    assert np.array_equal(placed[~new], kept[~new])  # nothing in force moves, room or not
    assert (placed[idx] >= 0).all() == (prob.n_opts[idx] > 0).all()  # every routable newcomer placed
    if fits:
        rates = rates_of(prob, placed)
        assert arrival.certified(rates, relaxed, new)
        assert metric.leximin_compare(rates, relaxed) == 0
