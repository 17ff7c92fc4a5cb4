"""ECMP: a deterministic per-flow hash (of the flow's key, or src/dst/job) picks one candidate path.

Static and load-oblivious, like switch hashing; ``seed`` changes the hash function.
"""

from __future__ import annotations

from mlroute.routing.optimisers.base import Problem, stable_hash


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    choice = prob.initial_choice()
    for i in prob.inter.tolist():
        choice[i] = stable_hash(prob.flows[i], seed) % int(prob.n_opts[i])
    return prob.routing(choice, "ecmp", objective, seed=seed)
