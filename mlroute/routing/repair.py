"""Repair: the routing in force, with only the flows that lost their path (or never had one) placed anew.

After a link failure the full optimisers re-route almost everything: on a k=16 fat-tree with 10k pinned
elephants one failed link broke a few percent of the pins, and the decision moved 97 % of them (no intact
fat-tree, so no colouring; the greedy's routing, stabilised towards the previous one only where that does not
raise the load vector). Each moved elephant is rules on several switches and a moment of reordering. The
traffic engineer therefore also builds this candidate and keeps it unless the full routing is materially
better (controller/decide/te.py).

The flows to place go in the greedy's group order (:func:`.greedy.group_order`), each on the candidate path
minimising the largest load on its links, over the loads of the flows that stay: the paper's greedy rule, run
for the broken flows only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.greedy import greedy_choice, group_order


def repair_choice(prob: Problem, choice: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``choice`` (option per flow) where ``keep`` is set and the option exists; the other routable flows placed
    by the greedy's rule over the kept flows' link loads."""
    kept = np.where(keep & (choice >= 0), choice, -1)
    loads = prob.loads(kept)  # a -1 row contributes no link
    todo = (kept < 0) & (prob.n_opts > 0)
    order = group_order(prob)
    placed, _ = greedy_choice(prob, order[todo[order]], loads)
    return np.where(todo, placed, kept)  # a flow left as it was is kept, or unroutable (-1 already)


def repair(prob: Problem, paths: Sequence, keep: Sequence[bool]) -> list:
    """Paths of :func:`repair_choice` for ``paths`` (one per flow of ``prob``; None: no path)."""
    choice = prob.choice_from_paths(paths)
    return prob.paths(repair_choice(prob, choice, np.asarray(keep, dtype=bool)))
