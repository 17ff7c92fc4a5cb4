"""ECMP: a deterministic per-flow hash (of the flow's key, or src/dst/job) picks one candidate path.

Static and load-oblivious, like switch hashing; ``seed`` changes the hash function.
"""

from __future__ import annotations

from mlroute.routing.optimisers.base import Problem, stable_hash


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    choice = prob.initial_choice()
    inter, flows = prob.inter, prob.flows
    if len(inter):  # (Python ints: a 64-bit hash modulo the option count, as per flow before)
        choice[inter] = [stable_hash(flows[i], seed) % n for i, n in zip(inter.tolist(), prob.n_opts[inter].tolist())]
    return prob.routing(choice, "ecmp", objective, seed=seed)
