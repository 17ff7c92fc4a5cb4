"""Hedera's Global First Fit (Al-Fares et al., NSDI'10), faithful form (docs/paper.md).

Flows are taken in detection (input) order with their demand -- ``Flow.demand`` when given, else Hedera's
natural-demand estimate (:func:`mlroute.routing.demand.estimate_demands`), as a fraction of host-link
capacity.  Each flow gets the first candidate path whose links all still have room for its demand
(reserved + demand <= capacity), and its demand is reserved on those links.  A flow that fits nowhere stays
on its ECMP path (per-flow hash, as in :mod:`.ecmp`) and reserves nothing: Hedera does not track it.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing.demand import estimate_demands
from mlroute.routing.optimisers.base import Problem, stable_hash
from mlroute.tolerances import REL_TOL


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    est = estimate_demands(prob.flows)
    dem = np.array([e if f.demand is None else float(f.demand) for f, e in zip(prob.flows, est)])
    dem = dem * fabric.host_capacity
    caps = np.append(fabric.capacities[: prob.dummy], np.inf)
    reserved = np.zeros(prob.dummy + 1)
    choice = prob.initial_choice()
    unplaced = 0
    for i in prob.inter.tolist():
        opts = prob.option_links(i)
        room = ((reserved[opts] + dem[i]) <= caps[opts] * (1 + REL_TOL)).all(1)
        fits = np.flatnonzero(room)
        if len(fits):
            c = int(fits[0])
            reserved[opts[c]] += dem[i]
            reserved[prob.dummy] = 0.0
        else:
            c = stable_hash(prob.flows[i], seed) % int(prob.n_opts[i])
            unplaced += 1
        choice[i] = c
    return prob.routing(choice, "gff", objective, left_on_ecmp=unplaced)
