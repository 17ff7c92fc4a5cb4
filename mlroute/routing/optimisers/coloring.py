"""The edge-colouring baseline (docs/paper.md): a proper Delta-edge-colouring of the leaf-pair multigraph.

Vertices: source leaves (left) and destination leaves (right); one edge per inter-leaf flow.  Konig gives a
proper colouring with Delta colours (Delta = most inter-leaf flows leaving or entering one leaf).  Flow with
colour c takes candidate path c mod (its number of candidate paths): on a uniform 2-tier Clos that is live
spine c mod S, so every spine gets ceil(Delta/S) or floor(Delta/S) colours and every link at most
ceil(Delta/S) flows -- optimal.  On fat-trees and fabrics with failed links the same rule is applied to each
flow's own candidate list (no guarantee there).
"""

from __future__ import annotations

from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.bipartite_colouring import edge_colouring


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    choice = prob.initial_choice()
    idx = prob.inter
    colours = edge_colouring(prob.src_pos[idx], prob.dst_pos[idx])
    choice[idx] = colours % prob.n_opts[idx]
    return prob.routing(choice, "coloring", objective, colours=int(colours.max() + 1) if len(colours) else 0)
