"""Step 4 of mlroute (uniform 2-tier): with the max link load fixed, fewer flows crossing a link at the max.

Those are the flows held at the lowest rate; the load-vector search cannot see them, since moving one does not
change the sorted load vector.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.mlroute import budget as work


def bottleneck_search(prob: Problem, choice: np.ndarray, budget: work.Budget) -> tuple[np.ndarray, int]:
    """Uniform 2-tier: fewer flows at the bottleneck with the max link load M unchanged.

    A flow is *hot* if it crosses a link carrying M flows (with equal capacities and no slower NIC, exactly
    the flows that get the lowest rate c/M).  Moving a hot flow to another spine (never above M) frees the
    flows that were hot only through the link it leaves and heats the cold flows of a link it brings to M.
    Candidates are screened for all hot flows at once with per-link counts (flows hot only through that link,
    cold flows), then each is checked exactly on the four links involved and applied only if the number of
    hot flows strictly drops.  Stops when ``budget`` runs out.  Returns (choice, moves).
    """
    sidx = prob.fabric.spine_link_index()
    idx = prob.inter
    if sidx is None or not len(idx):
        return choice, 0
    choice = choice.copy()
    up_i, dn_i = sidx
    u, v = prob.src_pos[idx], prob.dst_pos[idx]
    nlinks = prob.dummy + 1
    moves = 0
    members: dict | None = None
    while budget.charge(work.RECOUNTED * len(idx)):  # a round re-counts every flow (screen, link members)
        c = choice[idx]
        a, b = up_i[u, c], dn_i[v, c]  # each inter flow's uplink and downlink
        screen = kernels.bottleneck_screen if kernels.enabled() else _bottleneck_screen
        loads, m, hj, promising = screen(a, b, nlinks, up_i, dn_i, u, v, c)
        rows = np.flatnonzero(promising.any(1))
        if not len(rows):
            break
        if members is None:
            members = {}
        members.clear()
        for j, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            members.setdefault(x, []).append(j)
            members.setdefault(y, []).append(j)
        ld_list = loads.tolist()
        aa, bb = a.tolist(), b.tolist()
        moved = 0
        for row in rows.tolist():
            j = int(hj[row])
            for t in np.flatnonzero(promising[row]).tolist():
                na, nb = int(up_i[u[j], t]), int(dn_i[v[j], t])
                if ld_list[na] + 1 > m or ld_list[nb] + 1 > m or aa[j] == na:
                    continue
                oa, ob = aa[j], bb[j]
                affected = set(members.get(oa, ())) | set(members.get(ob, ())) | \
                    set(members.get(na, ())) | set(members.get(nb, ())) | {j}
                before = _hot_count(affected, ld_list, aa, bb, m)
                ld_list[oa] -= 1
                ld_list[ob] -= 1
                ld_list[na] += 1
                ld_list[nb] += 1
                aa[j], bb[j] = na, nb
                after = _hot_count(affected, ld_list, aa, bb, m)
                budget.charge(work.RECOUNTED * len(affected))
                if after < before:
                    members[oa].remove(j)
                    members[ob].remove(j)
                    members.setdefault(na, []).append(j)
                    members.setdefault(nb, []).append(j)
                    choice[idx[j]] = t
                    moved += 1
                    break
                ld_list[oa] += 1
                ld_list[ob] += 1
                ld_list[na] -= 1
                ld_list[nb] -= 1
                aa[j], bb[j] = oa, ob
            if not budget.left():
                break
        moves += moved
        if not moved:
            break
    return choice, moves


def _bottleneck_screen(a, b, nlinks: int, up_i, dn_i, u, v, c):
    """The bottleneck search's screen (the specification of ``kernels.bottleneck_screen``): link loads, the max
    load M, the hot flows whose move would free someone, and per such flow the spines worth trying (below M on
    both sides, not its own, and heating fewer cold flows than it frees). No hot flow: M < 2 or none to free."""
    loads = np.bincount(np.concatenate((a, b)), minlength=nlinks)
    m = int(loads.max())
    none = np.zeros(0, dtype=np.int64), np.zeros((0, up_i.shape[1]), dtype=bool)
    if m < 2:
        return (loads, m, *none)
    hot_a, hot_b = loads[a] == m, loads[b] == m
    hot = hot_a | hot_b
    # flows hot only through one link: freed when that link drops to m-1
    only = np.bincount(np.concatenate((a[hot_a & ~hot_b], b[hot_b & ~hot_a])), minlength=nlinks)
    cold = np.bincount(np.concatenate((a[~hot], b[~hot])), minlength=nlinks)
    hj = np.flatnonzero(hot)
    # gain of moving j: flows freed from its hot links (other than j itself)
    gain = np.where(hot_a[hj], only[a[hj]] - (hot_a[hj] & ~hot_b[hj]), 0) + \
        np.where(hot_b[hj], only[b[hj]] - (hot_b[hj] & ~hot_a[hj]), 0)
    keep = gain > 0  # a move must free someone (its cost, the cold flows it heats, is >= 0)
    hj, gain = hj[keep], gain[keep]
    if not len(hj):
        return (loads, m, *none)
    lu, ld = loads[up_i[u[hj]]], loads[dn_i[v[hj]]]  # (h, S)
    cost = np.where(lu == m - 1, cold[up_i[u[hj]]], 0) + np.where(ld == m - 1, cold[dn_i[v[hj]]], 0)
    ok = (lu < m) & (ld < m)
    ok[np.arange(len(hj)), c[hj]] = False
    return loads, m, hj, ok & (cost < gain[:, None])


def _hot_count(flows: set, loads: list, up: list, down: list, m: int) -> int:
    """How many of ``flows`` cross a link at load ``m`` (their uplink ``up[g]`` or downlink ``down[g]``)."""
    return sum(1 for g in flows if loads[up[g]] == m or loads[down[g]] == m)
