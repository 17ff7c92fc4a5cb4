"""Proper edge colouring of bipartite multigraphs (Konig's theorem, alternating-path recolouring).

A bipartite multigraph of maximum degree D has a proper D-edge-colouring; inserting edges one by one and
flipping one alternating (a, b)-path whenever the free colours of the two ends differ constructs it in
O(E * V) worst case and near-linear time on the graphs routing produces.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels


class BipartiteColouring:
    """A proper partial edge colouring with ``k`` colours of a bipartite multigraph (left/right vertices)."""

    def __init__(self, n_left: int, n_right: int, k: int):
        self.k = k
        self.left = [[-1] * k for _ in range(n_left)]  # left[x][c] = edge coloured c at x, or -1
        self.right = [[-1] * k for _ in range(n_right)]
        self.ex: list[int] = []
        self.ey: list[int] = []
        self.colour: list[int] = []

    def add_edge(self, x: int, y: int, colour: int = -1) -> int:
        """Add edge x-y; colour it now if ``colour`` >= 0 (must be free at both ends), else leave it uncoloured."""
        e = len(self.ex)
        self.ex.append(x)
        self.ey.append(y)
        self.colour.append(-1)
        if colour >= 0:
            assert self.left[x][colour] < 0 and self.right[y][colour] < 0
            self.left[x][colour] = e
            self.right[y][colour] = e
            self.colour[e] = colour
        return e

    def free_count_left(self, x: int) -> int:
        return self.left[x].count(-1)

    def free_count_right(self, y: int) -> int:
        return self.right[y].count(-1)

    def colour_edge(self, e: int, prefer=()) -> int:
        """Colour an uncoloured edge; both ends must have a free colour (degree <= k). Returns its colour.

        Colours in ``prefer`` that are free at both ends are tried first, then any common free colour, then
        one alternating-path flip."""
        x, y = self.ex[e], self.ey[e]
        lx, ry = self.left[x], self.right[y]
        for c in prefer:
            if lx[c] < 0 and ry[c] < 0:
                lx[c] = ry[c] = e
                self.colour[e] = c
                return c
        for c in range(self.k):
            if lx[c] < 0 and ry[c] < 0:
                lx[c] = ry[c] = e
                self.colour[e] = c
                return c
        a = lx.index(-1)  # free at x, used at y
        b = ry.index(-1)  # free at y, used at x
        # alternating path from y: a-edge, b-edge, a-edge, ...; it cannot reach x (parity), so flipping it
        # frees a at y.
        path = []
        side_right, v, c = True, y, a
        while True:
            f = (self.right[v][c] if side_right else self.left[v][c])
            if f < 0:
                break
            path.append(f)
            v = self.ex[f] if side_right else self.ey[f]
            side_right = not side_right
            c = b if c == a else a
        for f in path:
            cf = self.colour[f]
            self.left[self.ex[f]][cf] = -1
            self.right[self.ey[f]][cf] = -1
        for f in path:
            cf = b if self.colour[f] == a else a
            self.colour[f] = cf
            self.left[self.ex[f]][cf] = f
            self.right[self.ey[f]][cf] = f
        lx[a] = ry[a] = e
        self.colour[e] = a
        return a


def edge_colouring(left: np.ndarray, right: np.ndarray, k: int | None = None) -> np.ndarray:
    """Proper edge colouring of the bipartite multigraph with edges left[i]-right[i], using k >= max degree
    colours (default: exactly the max degree).  Returns the colour of every edge."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.int64)
    dl = np.bincount(left)
    dr = np.bincount(right)
    delta = int(max(dl.max(), dr.max()))
    k = delta if k is None else k
    if k < delta:
        raise ValueError(f"{k} colours cannot properly colour a graph of maximum degree {delta}")
    return _colour_in_order(left, right, len(dl), len(dr), k)


def equitable_colouring(left: np.ndarray, right: np.ndarray, k: int) -> np.ndarray:
    """Colour the edges of a bipartite multigraph with k colours so that every vertex of degree d has at most
    ceil(d/k) edges of each colour (split each vertex into ceil(d/k) copies of degree <= k, then Konig)."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.int64)
    dl = np.bincount(left)
    dr = np.bincount(right)
    cl, cr = -(-dl // k), -(-dr // k)
    bl = np.concatenate(([0], np.cumsum(cl)[:-1]))
    br = np.concatenate(([0], np.cumsum(cr)[:-1]))
    # the i-th edge at a vertex goes to copy i // k: copies of degree k, the last one the rest
    order_l = np.argsort(left, kind="stable")
    rank_l = np.empty(len(left), dtype=np.int64)
    rank_l[order_l] = np.arange(len(left)) - np.repeat(np.concatenate(([0], np.cumsum(dl)[:-1])), dl)
    order_r = np.argsort(right, kind="stable")
    rank_r = np.empty(len(right), dtype=np.int64)
    rank_r[order_r] = np.arange(len(right)) - np.repeat(np.concatenate(([0], np.cumsum(dr)[:-1])), dr)
    return _colour_in_order(bl[left] + rank_l // k, br[right] + rank_r // k, int(cl.sum()), int(cr.sum()), k)


def _colour_in_order(xs: np.ndarray, ys: np.ndarray, n_left: int, n_right: int, k: int) -> np.ndarray:
    """Every edge xs[e]-ys[e] coloured by :meth:`BipartiteColouring.colour_edge`, in order (compiled where
    numba is available: ``kernels.edge_colours``, the same colours)."""
    if kernels.enabled():
        return kernels.edge_colours(xs, ys, n_left, n_right, k)
    col = BipartiteColouring(n_left, n_right, k)
    for x, y in zip(xs.tolist(), ys.tolist()):
        col.colour_edge(col.add_edge(x, y))
    return np.array(col.colour, dtype=np.int64)
