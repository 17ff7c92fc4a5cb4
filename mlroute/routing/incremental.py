"""Max-min fair rates kept up to date while one flow at a time changes path (the polishing's inner loop).

A full water-filling of 10,000 flows costs ~60 ms, and the polishing (``optimisers/mlroute/polish.py``) evaluates
one per tried move, although a move changes the rates of a handful of flows (median 7 on a k=16 fat-tree with 10k
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
        self.filled = 0  # flows the last trial water-filled (the work it did: mlroute's budget counts it)

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
            self.filled = len(A)
            if len(A) > FULL_FILL_FRACTION * n:
                return self._full(i, row, water_fill)
            a = np.fromiter(A, dtype=np.int64, count=len(A))
            a_old = self.rows[a]
            a_rows = a_old.copy()
            a_rows[a == i] = row
            # capacity the flows outside A (held at their rates) leave on each link
            held = self.sums - np.bincount(a_old.ravel(), weights=np.repeat(rates[a], w), minlength=len(caps))
            real = a_rows != pad
            links, local = np.unique(a_rows[real], return_inverse=True)
            owner = np.nonzero(real)[0]
            r_a = water_fill_csr(local.ravel(), owner, real.sum(1), caps[links] - held[links], dem[a], events=True)
            # a flow re-filled to its old rate keeps it to the bit (float noise would break exact ties apart)
            r_a = np.where(np.abs(r_a - rates[a]) <= NOISE * rates[a], rates[a], r_a)
            new = rates.copy()
            new[a] = r_a
            # links whose sum or fastest flow can have moved: those of the flows whose rate moved, and flow
            # i's old and new links; every flow on them is checked
            moved = r_a != rates[a]  # (the flows of A whose rate moved)
            dirty = set(a_rows[moved].ravel().tolist()) | set(old.tolist()) | set(row.tolist())
            dirty.discard(pad)
            g_set = {i}
            for link in dirty:
                g_set |= members[link]
            g = np.fromiter(g_set, dtype=np.int64, count=len(g_set))
            g_rows = self.rows[g]
            g_rows[g == i] = row
            r_g = new[g]
            t = np.fromiter(dirty, dtype=np.int64, count=len(dirty))
            sums = self.sums.copy()
            top = self.top.copy()
            sums[t] = held[t] + np.bincount(a_rows.ravel(), weights=np.repeat(r_a, w), minlength=len(caps))[t]
            fresh = np.zeros(len(caps))
            np.maximum.at(fresh, g_rows.ravel(), np.repeat(r_g, w))
            top[t] = fresh[t]
            sums[pad], top[pad] = 0.0, 0.0
            # bottleneck check: saturated link on which no flow is faster, or the flow's demand
            sat = sums[g_rows] >= caps[g_rows] * (1 - REL_TOL)
            fastest = r_g[:, None] >= top[g_rows] * (1 - REL_TOL)
            ok = (sat & fastest).any(1) | (r_g >= dem[g] * (1 - REL_TOL))
            if ok.all():
                self._pending = (i, row.copy(), old.copy(), new, t, sums[t], top[t])
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
        self.filled = len(self.rates)
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
