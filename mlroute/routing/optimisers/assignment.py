"""A square linear assignment (maximum weight), for relabelling spines towards the previous routing.

``scipy.optimize.linear_sum_assignment`` does this, but importing ``scipy.optimize`` costs ~0.5 s, paid by the
first TE decision of a controller (the worker process imports nothing else of scipy). :func:`max_assignment`
runs the same algorithm -- the shortest augmenting path of Crouse, "On implementing 2D rectangular assignment
algorithms" (IEEE TAES 2016), as scipy implements it, including its tie-breaks -- so it returns scipy's
assignment; in pure Python it is O(n^3), fine for the few dozen spines of a fabric, and larger matrices go to
scipy. The unit test compares both on random matrices full of ties.
"""

from __future__ import annotations

import math

import numpy as np

#: above this size scipy's compiled version is faster than its import.
PURE_PYTHON_MAX = 64


def max_assignment(weights: np.ndarray) -> np.ndarray:
    """For a square matrix of finite weights: ``cols`` such that row r gets column ``cols[r]`` and the total
    weight is maximal (``linear_sum_assignment(weights, maximize=True)[1]``)."""
    w = np.asarray(weights, dtype=float)
    n = w.shape[0]
    if w.ndim != 2 or w.shape[1] != n:
        raise ValueError("max_assignment needs a square matrix")
    if not np.isfinite(w).all():
        raise ValueError("max_assignment needs finite weights")
    if n > PURE_PYTHON_MAX:
        from scipy.optimize import linear_sum_assignment

        return linear_sum_assignment(w, maximize=True)[1]
    cost = (-w).tolist()
    u = [0.0] * n
    v = [0.0] * n
    path = [-1] * n
    col4row = [-1] * n
    row4col = [-1] * n
    for cur in range(n):
        sink, low, shortest, rows_seen, cols_seen = _augmenting_path(cost, u, v, path, row4col, cur)
        u[cur] += low
        for i in range(n):
            if rows_seen[i] and i != cur:
                u[i] += low - shortest[col4row[i]]
        for j in range(n):
            if cols_seen[j]:
                v[j] -= low - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    return np.array(col4row, dtype=np.int64)


def _augmenting_path(cost, u, v, path, row4col, i):
    n = len(cost)
    remaining = [n - it - 1 for it in range(n)]  # reverse order: a constant matrix gives the identity
    num_remaining = n
    rows_seen = [False] * n
    cols_seen = [False] * n
    shortest = [math.inf] * n
    low = 0.0
    sink = -1
    while sink == -1:
        index = -1
        lowest = math.inf
        rows_seen[i] = True
        row, ui = cost[i], u[i]
        for it in range(num_remaining):
            j = remaining[it]
            r = low + row[j] - ui - v[j]
            if r < shortest[j]:
                path[j] = i
                shortest[j] = r
            if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                lowest = shortest[j]
                index = it
        low = lowest
        j = remaining[index]
        if row4col[j] == -1:
            sink = j
        else:
            i = row4col[j]
        cols_seen[j] = True
        num_remaining -= 1
        remaining[index] = remaining[num_remaining]
    return sink, low, shortest, rows_seen, cols_seen
