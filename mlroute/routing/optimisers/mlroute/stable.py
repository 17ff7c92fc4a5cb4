"""Step 7 of mlroute and its fixpoint: keep flows on their ``previous`` paths where the metric allows.

A traffic engineer pushes only the paths that changed, so a routing that moves fewer flows is cheaper to apply;
and one that mlroute would return again on the same inputs need not be searched for again.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing.metric import compare
from mlroute.routing.optimisers.assignment import max_assignment
from mlroute.routing.optimisers.base import Problem


def _relabel_to_previous(prob: Problem, choice: np.ndarray, prev: np.ndarray) -> np.ndarray:
    s = len(prob.fabric.live_spines())
    idx = prob.inter[prev[prob.inter] >= 0]
    if not len(idx) or s < 2:
        return choice
    w = np.zeros((s, s))
    np.add.at(w, (choice[idx], prev[idx]), 1)
    perm = max_assignment(w)  # scipy's linear_sum_assignment, without importing scipy.optimize
    out = choice.copy()
    out[prob.inter] = perm[choice[prob.inter]]
    return out


def _stabilise(prob: Problem, choice: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Flows back on their previous option, in flow order, where that does not raise the sorted load vector
    (max over the links it would add of load + 1 <= max over the links it would leave of load)."""
    choice = choice.copy()
    mat = prob.link_matrix(choice)
    loads = prob.loads(matrix=mat).tolist()
    dummy = prob.dummy
    offsets, table = prob.option_table()
    back = prob.inter[(prev[prob.inter] >= 0) & (prev[prob.inter] != choice[prob.inter])]
    for i in back.tolist():
        p = int(prev[i])
        cur = set(mat[i].tolist())
        new_row = table[offsets[prob.set_id[i]] + p] if table is not None else prob.option_links(i)[p]
        new = set(new_row.tolist())
        cur.discard(dummy)
        new.discard(dummy)
        new_max = max((loads[x] + 1 for x in new - cur), default=-1)
        old_max = max((loads[x] for x in cur - new), default=-1)
        if new_max <= old_max:
            for x in cur:
                loads[x] -= 1
            for x in new:
                loads[x] += 1
            mat[i] = new_row
            choice[i] = p
    return choice


def _keep_previous(prob: Problem, choice: np.ndarray, r_new, loads: np.ndarray, prev: np.ndarray, jobs,
                   objective: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 7: flows back on their previous paths where that is at least as good in the metric."""
    stable = _stabilise(prob, choice, prev)
    if not np.array_equal(stable, choice):
        r_stable = prob.rates(stable)
        if compare(r_stable, r_new, jobs, objective) >= 0:
            return stable, r_stable, prob.loads(stable)
    return choice, r_new, loads


def _is_fixpoint(prob: Problem, constructed: np.ndarray, start: np.ndarray, final: np.ndarray,
                 uniform: bool) -> bool:
    """Would a run on the same inputs with ``previous`` = ``final`` return ``final``? (Given a complete search
    that did not fall back to the greedy.) Only steps 2 and 7 read ``previous``:

    * step 2's relabelling: a second run starts from ``constructed`` relabelled towards ``final``; if that is
      this run's ``start``, it repeats this run's search and polishing move for move (they are deterministic
      and were not cut short) and reaches the same routing before step 7;
    * step 7 then moves back, in flow order, exactly the flows this run's step 7 moved back (each under the
      same loads: the attempts that failed here changed nothing), and accepts the result as this run did.

    On fabrics where step 2 does not relabel (not uniform 2-tier) the first point always holds."""
    if not uniform:
        return True
    if np.array_equal(final, constructed) and np.array_equal(start, constructed) and (final[prob.inter] >= 0).all():
        # relabelled towards itself every colour keeps its flows (a maximum assignment of a diagonal weight
        # matrix fixes every colour in use): no assignment to solve
        return True
    return bool(np.array_equal(_relabel_to_previous(prob, constructed, final), start))
