"""Max-min fair rates kept up to date while one flow at a time changes path (the polishing's inner loop).

A full water-filling of 10,000 flows costs ~60 ms, and the polishing (``optimisers/mlroute.py``) evaluates one
per tried move, although a move changes the rates of a handful of flows (median 7 on a k=16 fat-tree with 10k
elephants). :class:`RateState` re-fills only a growing set ``A`` of flows around the move, the other flows held
at their rates, and proves the result with the bottleneck characterisation of max-min fairness (Bertsekas &
Gallager, *Data Networks*, 6.5): a feasible allocation is the max-min fair one iff every flow is at its demand
or crosses a saturated link on which no flow is faster. Flows outside ``A`` whose links did not change keep the
bottleneck they had; every other flow is checked, and a violation adds flows to ``A`` and re-fills, so the
result is the max-min fair allocation of the new routing (up to the float noise of :mod:`mlroute.tolerances`,
like any water-filling), whatever ``A`` the search ends with: at worst every flow, i.e. a full water-filling.
"""

from __future__ import annotations

import numpy as np

from mlroute.tolerances import REL_TOL

#: relative change below which a re-filled rate is float noise (the old value is kept): far below REL_TOL.
NOISE = 1e-13
#: past this many flows in ``A`` a full water-filling is cheaper than growing it further.
FULL_FILL_FRACTION = 0.5


class RateState:
    """Rates of a fixed set of flows on a routing that changes one flow at a time.

    ``rows`` is the (flows, W) link matrix of the routing (padding = ``len(caps) - 1``, a link of infinite
    capacity, the last entry of ``caps``), ``demands`` the per-flow caps (``inf`` = none), ``rates`` the
    max-min fair rates of that routing (a full water-filling). :meth:`trial` gives the rates with one flow on
    other links; :meth:`commit` makes the last trial the routing in force.
    """

    def __init__(self, rows: np.ndarray, caps: np.ndarray, demands: np.ndarray, rates: np.ndarray):
        self.rows = rows.copy()
        self.caps = caps
        self.pad = len(caps) - 1
        self.dem = demands
        self.rates = rates.copy()
        n, w = rows.shape
        flat = self.rows.ravel()
        owner = np.repeat(np.arange(n), w)
        real = flat != self.pad
        flat, owner = flat[real], owner[real]
        order = np.argsort(flat, kind="stable")
        counts = np.bincount(flat, minlength=len(caps))
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        by_link = owner[order].tolist()
        self.members = _LinkMembers(by_link, bounds)
        self.sums = np.bincount(flat, weights=self.rates[owner], minlength=len(caps))
        self.top = np.zeros(len(caps))
        np.maximum.at(self.top, flat, self.rates[owner])
        self._pending: tuple | None = None
        self._sorted: np.ndarray | None = None  # the rates sorted ascending (leximin comparisons)
        self._trial_sorted: np.ndarray | None = None
        self.full_fills = 0  # trials that grew into a full water-filling (reported by the tests)

    def trial(self, i: int, row: np.ndarray) -> np.ndarray:
        """The max-min fair rates (a new array) with flow ``i`` on ``row`` instead of its current links."""
        self._trial_sorted = None
        from mlroute.routing.metric import water_fill, water_fill_csr

        old = self.rows[i]
        pad, caps, dem, rates = self.pad, self.caps, self.dem, self.rates
        changed = set(old.tolist()) ^ set(row.tolist())
        changed.discard(pad)
        members = self.members
        grow = {i}
        for link in changed:
            grow |= members[link]
        A: set = set()
        n, w = len(rates), self.rows.shape[1]
        while True:
            A |= grow
            if len(A) > FULL_FILL_FRACTION * n:
                return self._full(i, row, water_fill)
            a = np.fromiter(A, dtype=np.int64, count=len(A))
            a_old = self.rows[a]
            a_rows = a_old.copy()
            a_rows[a == i] = row
            # every figure below is read on the links of A's old and new rows only (``near``), never on all
            # links: capacity the flows outside A (held at their rates) leave on each of them
            near = np.unique(np.concatenate((a_old.ravel(), a_rows.ravel())))
            at_old = np.searchsorted(near, a_old.ravel())
            held = self.sums[near] - np.bincount(at_old, weights=np.repeat(rates[a], w), minlength=len(near))
            real = a_rows != pad
            links, local = np.unique(a_rows[real], return_inverse=True)
            owner = np.nonzero(real)[0]
            held_links = held[np.searchsorted(near, links)]
            r_a = water_fill_csr(local.ravel(), owner, real.sum(1), caps[links] - held_links, dem[a], events=True)
            # a flow re-filled to its old rate keeps it to the bit (float noise would break exact ties apart)
            r_a = np.where(np.abs(r_a - rates[a]) <= NOISE * rates[a], rates[a], r_a)
            new = rates.copy()
            new[a] = r_a
            # links whose sum or fastest flow can have moved: those of the flows whose rate moved, and flow
            # i's old and new links; every flow on them is checked
            moved = a[r_a != rates[a]]
            dirty = set(a_rows[np.isin(a, moved)].ravel().tolist()) | set(old.tolist()) | set(row.tolist())
            dirty.discard(pad)
            g_set = {i}
            for link in dirty:
                g_set |= members[link]
            g = np.fromiter(g_set, dtype=np.int64, count=len(g_set))
            g_rows = self.rows[g]
            g_rows[g == i] = row
            r_g = new[g]
            t = np.fromiter(dirty, dtype=np.int64, count=len(dirty))
            t_near = np.searchsorted(near, t)  # (every dirty link is on a row of A)
            at_new = np.searchsorted(near, a_rows.ravel())
            sums_t = held[t_near] + np.bincount(at_new, weights=np.repeat(r_a, w), minlength=len(near))[t_near]
            # the fastest flow on each dirty link: every flow on it is in g (0 on a link flow i left alone)
            g_links, g_at = np.unique(g_rows.ravel(), return_inverse=True)
            fresh = np.zeros(len(g_links))
            np.maximum.at(fresh, g_at.ravel(), np.repeat(r_g, w))
            t_g = np.minimum(np.searchsorted(g_links, t), len(g_links) - 1)
            top_t = np.where(g_links[t_g] == t, fresh[t_g], 0.0)
            # the links' sums and fastest flows as they would be, read where g's rows cross them
            g_sums, g_top = self.sums[g_rows], self.top[g_rows]
            order = np.argsort(t)
            ts = t[order]  # (never empty: flow i's own NIC links are dirty)
            pos = np.minimum(np.searchsorted(ts, g_rows), len(ts) - 1)
            hit = ts[pos] == g_rows
            g_sums[hit] = sums_t[order][pos[hit]]
            g_top[hit] = top_t[order][pos[hit]]
            g_sums[g_rows == pad], g_top[g_rows == pad] = 0.0, 0.0
            # bottleneck check: saturated link on which no flow is faster, or the flow's demand
            sat = g_sums >= caps[g_rows] * (1 - REL_TOL)
            fastest = r_g[:, None] >= g_top * (1 - REL_TOL)
            ok = (sat & fastest).any(1) | (r_g >= dem[g] * (1 - REL_TOL))
            if ok.all():
                self._pending = (i, row.copy(), old.copy(), new, t, sums_t, top_t)
                return new
            bad = g[~ok].tolist()
            grow = set(bad)
            for f in bad:  # the flows sharing a link with a flow that lost its bottleneck may move too
                if f in A:
                    for link in (row if f == i else self.rows[f]).tolist():
                        if link != pad:
                            grow |= members[link]
            grow -= A
            if not grow:  # cannot happen in exact arithmetic; float noise: settle it with a full filling
                return self._full(i, row, water_fill)

    def _full(self, i: int, row: np.ndarray, water_fill) -> np.ndarray:
        self.full_fills += 1
        rows = self.rows.copy()
        rows[i] = row
        new = water_fill(rows, self.caps, self.dem)
        self._pending = (i, row.copy(), self.rows[i].copy(), new, None, None, None)
        return new

    def leximin(self, new: np.ndarray) -> int:
        """``metric.leximin_compare(new, rates in force)`` for the rates the last :meth:`trial` gave: the sorted
        vector in force is kept, and the trial's is that one with the few changed rates replaced."""
        from mlroute.routing.metric import cmp_presorted

        if self._sorted is None:
            self._sorted = np.sort(self.rates)
        changed = np.flatnonzero(new != self.rates)
        self._trial_sorted = _replace_sorted(self._sorted, self.rates[changed], new[changed])
        return cmp_presorted(self._trial_sorted, self._sorted)

    def commit(self) -> None:
        """Make the last :meth:`trial` the routing in force."""
        if self._pending is None:
            raise RuntimeError("commit without a trial")
        i, row, old, new, t, sums_t, top_t = self._pending
        self._pending = None
        self._sorted, self._trial_sorted = self._trial_sorted, None  # None unless leximin() read this trial
        pad = self.pad
        for link in set(old.tolist()) - set(row.tolist()) - {pad}:
            self.members[link].discard(i)
        for link in set(row.tolist()) - set(old.tolist()) - {pad}:
            self.members[link].add(i)
        self.rows[i] = row
        self.rates = new
        if t is None:  # a full filling: rebuild the per-link figures
            flat = self.rows.ravel()
            rep = np.repeat(self.rates, self.rows.shape[1])
            self.sums = np.bincount(flat, weights=rep, minlength=len(self.caps))
            self.top = np.zeros(len(self.caps))
            np.maximum.at(self.top, flat, rep)
            self.sums[pad], self.top[pad] = 0.0, 0.0
            return
        self.sums[t] = sums_t
        self.top[t] = top_t


class _LinkMembers:
    """``members[link]``: the set of flows on a link, made from the initial routing when first asked for (a move
    reads the few links it touches; a set per link of a k=24 fabric cost 70 ms). A set is built from the same
    list, and then sees the same additions and removals, as one built up front: the same set, iterated alike."""

    def __init__(self, by_link: list[int], bounds: list[int]):
        self._by_link, self._bounds = by_link, bounds
        self._sets: dict[int, set] = {}

    def __getitem__(self, link: int) -> set:
        s = self._sets.get(link)
        if s is None:
            s = self._sets[link] = set(self._by_link[self._bounds[link]:self._bounds[link + 1]])
        return s


def _replace_sorted(arr: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``np.sort`` of the vector whose sorted values are ``arr`` after values ``old`` (each present) became
    ``new``: one occurrence deleted per old value, the new ones inserted in order."""
    ov = np.sort(old)
    pos = np.searchsorted(arr, ov, "left")
    if len(ov) > 1:  # equal old values: consecutive occurrences
        start = np.r_[True, ov[1:] != ov[:-1]]
        first = np.maximum.accumulate(np.where(start, np.arange(len(ov)), 0))
        pos = pos + np.arange(len(ov)) - first
    out = np.delete(arr, pos)
    nv = np.sort(new)
    return np.insert(out, np.searchsorted(out, nv), nv)
