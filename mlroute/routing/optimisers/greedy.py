"""The paper's greedy (docs/paper.md, "The paper's greedy"), generalised to any tiered fabric.

1. Group flows by source leaf and by destination leaf (2 x |leaves| groups).
2. Take groups largest first; ties: source groups before destination groups, then leaf order.
3. For every not-yet-placed flow of the group (input order): an intra-leaf flow needs no spine; otherwise
   pick the candidate path minimising the largest current load on its links -- on a 2-tier Clos exactly
   ``max(load[srcToR->spine], load[spine->dstToR])`` -- first strict minimum in path (spine) order, and
   increment the loads of its links.

O(|T| log |T| + |F| |S|); a 2-approximation of the min max-load on a 2-tier Clos.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.optimisers.base import Problem


def group_order(prob: Problem) -> np.ndarray:
    """Flow indices in the order the greedy places them."""
    n = len(prob.flows)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    nl = len(prob.fabric.leaves)
    src_size = np.bincount(prob.src_pos, minlength=nl)
    dst_size = np.bincount(prob.dst_pos, minlength=nl)
    # group g in [0, 2nl): g < nl source group of leaf g, else destination group of leaf g-nl
    sizes = np.concatenate((src_size, dst_size))
    rank_of_group = np.empty(2 * nl, dtype=np.int64)
    rank_of_group[np.lexsort((np.arange(2 * nl), -sizes))] = np.arange(2 * nl)
    first = np.minimum(rank_of_group[prob.src_pos], rank_of_group[nl + prob.dst_pos])
    return np.lexsort((np.arange(n), first))


def greedy_choice(prob: Problem, order=None, loads=None) -> tuple[np.ndarray, np.ndarray]:
    """Run the greedy placement; returns (choice, switch-link loads)."""
    choice = prob.initial_choice()
    ld = np.zeros(prob.dummy + 1, dtype=np.int64) if loads is None else loads
    if order is None:
        order = group_order(prob)
    if kernels.enabled():  # the same placement, compiled (mlroute.routing.kernels)
        ld = np.ascontiguousarray(ld, dtype=np.int64)
        kernels.greedy_place(np.ascontiguousarray(order, dtype=np.int64), prob.set_id, prob.option_rows(), choice, ld)
        if loads is not None and ld is not loads:
            loads[:] = ld
        return choice, ld
    sets, hops, nopts = prob.sets, prob.hops, prob.n_opts
    for i in order.tolist():
        if hops[i] == 0 or nopts[i] == 0:
            continue
        ps = sets[i]
        upt, dnt = ps.upT, ps.downT  # (h, P): one row per hop, contiguous
        if hops[i] == 1 and len(dnt) == 1:  # (a path with a shortcut can be 1 hop up and 2 down)
            u, d = upt[0], dnt[0]
            c = int(np.maximum(ld[u], ld[d]).argmin())
            ld[u[c]] += 1
            ld[d[c]] += 1
        else:
            cost = ld[upt[0]]
            for row in upt[1:]:
                np.maximum(cost, ld[row], out=cost)
            for row in dnt:
                np.maximum(cost, ld[row], out=cost)
            c = int(cost.argmin())
            ld[upt[:, c]] += 1
            ld[dnt[:, c]] += 1
        choice[i] = c
    return choice, ld


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    choice, ld = greedy_choice(prob)
    return prob.routing(choice, "greedy", objective, max_link_load=int(ld.max()) if len(ld) else 0)
