"""Step 2 of mlroute: repair a uniform 2-tier routing to the optimal max link load, ceil(Delta/S).

Both repairs colour the ToR multigraph (Konig) and keep the greedy's choice wherever it already fits, so only
the flows that do not fit move (the package docstring says why the aligned colouring is the default). Not to be
confused with :mod:`mlroute.routing.repair`, which keeps valid pins and places only broken or new flows.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.bipartite_colouring import BipartiteColouring


def _rank_within(keys: np.ndarray) -> np.ndarray:
    """Rank of every element among the elements with the same key (input order); compiled where the kernels
    are (:func:`mlroute.routing.kernels.rank_within`, the same ranks), else :func:`_rank_within_reference`."""
    if kernels.enabled() and (not len(keys) or keys.min() >= 0):
        return kernels.rank_within(keys)
    return _rank_within_reference(keys)


def _rank_within_reference(keys: np.ndarray) -> np.ndarray:
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    start = np.empty(len(sk), dtype=bool)
    if len(sk):
        start[0] = True
        start[1:] = sk[1:] != sk[:-1]
    grp_start = np.maximum.accumulate(np.where(start, np.arange(len(sk)), 0))
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(sk)) - grp_start
    return ranks


def _inter_tor_flows(prob: Problem, choice: np.ndarray):
    """What both 2-tier repairs colour: (flow indices, live spines S, ToRs, source ToR, destination ToR, current
    spine) of the inter-ToR flows; None when there is nothing to repair (no such flow or no live spine)."""
    idx = prob.inter
    s = len(prob.fabric.live_spines())
    if not len(idx) or s == 0:
        return None
    return idx, s, len(prob.fabric.leaves), prob.src_pos[idx], prob.dst_pos[idx], choice[idx]


def equitable_repair(prob: Problem, choice: np.ndarray) -> tuple[np.ndarray, int]:
    """Make a uniform 2-tier choice per-ToR equitable (package doc, step 2). Returns (choice, flows reinserted)."""
    inter = _inter_tor_flows(prob, choice)
    if inter is None:
        return choice, 0
    idx, s, nl, u, v, c = inter
    du = np.bincount(u, minlength=nl)
    dv = np.bincount(v, minlength=nl)
    lu, lv = -(-du // s), -(-dv // s)
    ru, rv = _rank_within(u * s + c), _rank_within(v * s + c)
    keep = (ru < lu[u]) & (rv < lv[v])
    if keep.all():
        return choice, 0
    ubase = np.concatenate(([0], np.cumsum(lu)[:-1]))
    vbase = np.concatenate(([0], np.cumsum(lv)[:-1]))
    col = BipartiteColouring(int(lu.sum()), int(lv.sum()), s)
    edge_flow = []
    for j in np.flatnonzero(keep).tolist():
        col.add_edge(int(ubase[u[j]] + ru[j]), int(vbase[v[j]] + rv[j]), int(c[j]))
        edge_flow.append(j)
    moved = np.flatnonzero(~keep).tolist()
    for j in moved:
        x0, y0 = int(ubase[u[j]]), int(vbase[v[j]])
        x = max(range(x0, x0 + int(lu[u[j]])), key=col.free_count_left)
        y = max(range(y0, y0 + int(lv[v[j]])), key=col.free_count_right)
        col.colour_edge(col.add_edge(x, y))
        edge_flow.append(j)
    out = choice.copy()
    out[idx[np.array(edge_flow)]] = np.array(col.colour, dtype=np.int64)
    return out, len(moved)


def aligned_repair(prob: Problem, choice: np.ndarray) -> tuple[np.ndarray, int]:
    """Repair a uniform 2-tier choice to the optimum ceil(Delta/S) with the overloads aligned (package doc, step 2).

    Colours 0..Delta-1, colour c = layer * S + spine: a proper Delta-edge-colouring of the ToR multigraph
    (Konig) puts at most ceil(Delta/S) flows on a link, and links at that load only on spines below
    r = Delta - S (ceil(Delta/S) - 1) -- the same spines for every ToR, so a flow on an overloaded uplink
    tends to be on an overloaded downlink too, and fewer flows share the bottleneck.  The greedy's choice
    seeds the colouring: a flow keeps its spine with layer = its rank among the flows of its (ToR, spine)
    uplink when that is also its rank on the downlink; only the others are inserted by alternating paths
    (their own spine's layers first).  Returns (choice, flows reinserted).
    """
    inter = _inter_tor_flows(prob, choice)
    if inter is None:
        return choice, 0
    idx, s, nl, u, v, c = inter
    delta = int(max(np.bincount(u, minlength=nl).max(), np.bincount(v, minlength=nl).max()))
    ru, rv = _rank_within(u * s + c), _rank_within(v * s + c)
    colour = ru * s + c
    keep = (ru == rv) & (colour < delta)
    if keep.all():
        return choice, 0
    col = BipartiteColouring(nl, nl, delta)
    edge_flow = []
    for j in np.flatnonzero(keep).tolist():
        col.add_edge(int(u[j]), int(v[j]), int(colour[j]))
        edge_flow.append(j)
    moved = np.flatnonzero(~keep).tolist()
    for j in moved:
        own = int(c[j])
        col.colour_edge(col.add_edge(int(u[j]), int(v[j])), prefer=range(own, delta, s))
        edge_flow.append(j)
    out = choice.copy()
    out[idx[np.array(edge_flow)]] = np.array(col.colour, dtype=np.int64) % s
    return out, len(moved)
