"""Simulated annealing, the paper's variant (docs/paper.md, after Hedera).

State: one spine (top-tier switch; the option index of each flow's candidate list) per *destination host*;
a flow to host d takes option ``state[d] mod (its number of candidate paths)`` -- on a uniform 2-tier Clos
that is live spine ``state[d]``.  A move swaps the states of two random destination hosts.  Energy =
(max link load) x (number of links at that max).  Temperature starts at 1000 and is multiplied by 0.99 per
step until it drops below 0.1 (917 steps, :func:`planned_steps`); a move is accepted if it lowers the energy
or with probability exp(-dE / T).  The best state seen is returned.  Seeded and deterministic: the budget is the
schedule's steps; ``time_limit`` (seconds) is only a safety net, and a run it cuts short says so
(``info["cut_by_clock"]``, logged).
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from mlroute.routing.optimisers.base import Problem

T0, COOLING, T_MIN = 1000.0, 0.99, 0.1
LOG = logging.getLogger("mlroute.routing")


def planned_steps() -> int:
    """Steps of the whole cooling schedule (T0 down to T_MIN), the run length without a time limit."""
    steps, temp = 0, T0
    while temp >= T_MIN:
        temp *= COOLING
        steps += 1
    return steps


def _energy(loads: np.ndarray) -> int:
    m = int(loads.max()) if len(loads) else 0
    return m * int((loads == m).sum()) if m else 0


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    rng = np.random.default_rng(seed)
    choice = prob.initial_choice()
    idx = prob.inter
    if not len(idx):
        return prob.routing(choice, "annealing", objective, steps=0, seed=seed, cut_by_clock=False)
    dst_ids: dict = {}
    dst_of = np.fromiter((dst_ids.setdefault(prob.flows[i].dst, len(dst_ids)) for i in idx.tolist()),
                         dtype=np.int64, count=len(idx))
    n_dst = len(dst_ids)
    n_states = max(int(prob.n_opts[idx].max()), 1)
    state = rng.integers(0, n_states, size=n_dst)
    nopt = prob.n_opts[idx]
    flows_of = [[] for _ in range(n_dst)]
    for j, d in enumerate(dst_of.tolist()):
        flows_of[d].append(j)
    flows_of = [np.array(f, dtype=np.int64) for f in flows_of]
    sub = idx  # flow indices

    def links_for(js, st):
        out = []
        for j in js.tolist():
            out.append(prob.option_links(int(sub[j]))[int(st % nopt[j])])
        return np.array(out, dtype=np.int64).reshape(len(js), prob.K)

    choice[idx] = state[dst_of] % nopt
    mat = prob.link_matrix(choice)
    loads = prob.loads(matrix=mat)
    loads[prob.dummy] = 0
    energy = _energy(loads)
    best_state, best_energy = state.copy(), energy
    temp = T0
    steps = 0
    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    cut = False
    while temp >= T_MIN and n_dst >= 2:
        if deadline is not None and time.perf_counter() > deadline:
            cut = True
            LOG.warning("annealing: stopped by its time limit after %d of %d steps (the routing depends on this "
                        "machine's speed and load)", steps, planned_steps())
            break
        a, b = rng.choice(n_dst, size=2, replace=False)
        steps += 1
        temp *= COOLING
        if state[a] == state[b]:
            continue
        fa, fb = flows_of[a], flows_of[b]
        old_a, old_b = mat[sub[fa]], mat[sub[fb]]
        new_a, new_b = links_for(fa, state[b]), links_for(fb, state[a])
        for arr, sign in ((old_a, -1), (old_b, -1), (new_a, 1), (new_b, 1)):
            np.add.at(loads, arr.ravel(), sign)
        loads[prob.dummy] = 0
        e = _energy(loads)
        if e <= energy or rng.random() < math.exp(-(e - energy) / temp):
            state[a], state[b] = state[b], state[a]
            mat[sub[fa]] = new_a
            mat[sub[fb]] = new_b
            energy = e
            if e < best_energy:
                best_energy, best_state = e, state.copy()
        else:
            for arr, sign in ((old_a, 1), (old_b, 1), (new_a, -1), (new_b, -1)):
                np.add.at(loads, arr.ravel(), sign)
            loads[prob.dummy] = 0
    choice[idx] = best_state[dst_of] % nopt
    return prob.routing(choice, "annealing", objective, steps=steps, energy=best_energy, seed=seed, cut_by_clock=cut)
