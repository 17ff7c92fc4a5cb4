"""Shared machinery of the optimisers: the per-flow option table and the result type."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow


@dataclass
class Routing:
    """One path per flow, in input order (``None`` = no live path exists), plus optimiser info.

    ``info`` always holds ``algo`` and ``objective``; optimisers add their own keys (``proved_optimal`` and
    ``lower_bound`` for ``ilp``, ``lower_bound`` = ceil(Delta/S) for 2-tier fabrics, ...). ``rates``: the
    routing's max-min fair rates (:meth:`Problem.rates`, up to float noise), where the optimiser computed them
    anyway (a caller that reports on the routing need not water-fill it again), else None.
    """

    paths: list
    info: dict = field(default_factory=dict)
    choice: np.ndarray | None = field(default=None, repr=False)
    rates: np.ndarray | None = field(default=None, repr=False)

    def changed(self, previous: Sequence | None) -> list[int]:
        """Indices of flows whose path differs from ``previous`` (what a controller must push)."""
        if previous is None:
            return list(range(len(self.paths)))
        return [i for i, (p, q) in enumerate(zip(self.paths, previous))
                if p is None or q is None or tuple(p) != tuple(q)]


class Problem:
    """Flows resolved against a fabric: leaves, candidate path sets, option choices and link loads.

    A *choice* vector holds, per flow, the index of its path in its path set (-1: unroutable).
    Link loads count flows per directed *switch* link; index ``dummy`` (= n_switch_links) pads link rows of
    unequal length and is never loaded.
    """

    def __init__(self, fabric: Fabric, flows: Sequence[Flow]):
        self.fabric = fabric
        self.flows = list(flows)
        n = len(self.flows)
        lp = fabric.leaf_pos
        hl, lt = fabric.hosts, fabric._leaf_of_tor
        try:
            src = [hl[f.src] if f.src_tor is None else lt(f.src_tor) for f in self.flows]
            dst = [hl[f.dst] if f.dst_tor is None else lt(f.dst_tor) for f in self.flows]
        except KeyError:  # unknown host: let the fabric raise its error for the first offender
            src = [fabric.src_leaf(f) for f in self.flows]
            dst = [fabric.dst_leaf(f) for f in self.flows]
        self._src_leaves, self._dst_leaves = src, dst
        self.src_pos = np.fromiter((lp[s] for s in src), dtype=np.int64, count=n)
        self.dst_pos = np.fromiter((lp[d] for d in dst), dtype=np.int64, count=n)
        self.sets = sets = list(map(fabric.pathset, src, dst))  # (the fabric caches them)
        uniq: dict = {}
        self.set_id = np.fromiter((uniq.setdefault(id(ps), len(uniq)) for ps in sets), dtype=np.int64, count=n)
        self.unique_sets = list({id(ps): ps for ps in sets}.values())
        self._table = None
        self._rows: tuple | None = None  # option_rows(), built when first asked for
        self._mat_memo: list | None = None  # [choice, link matrix, loads or None] of the last link_matrix call
        self.n_opts = np.fromiter((len(ps) for ps in sets), dtype=np.int64, count=n)
        self.hops = np.fromiter((ps.up.shape[1] for ps in sets), dtype=np.int64, count=n)
        self.inter = np.flatnonzero((self.hops > 0) & (self.n_opts > 0))
        self.unroutable = np.flatnonzero(self.n_opts == 0)
        self.dummy = fabric.n_switch_links
        self.K = int(2 * self.hops.max()) if n else 0

    # ------------------------------------------------------------------ conversions
    def initial_choice(self) -> np.ndarray:
        c = np.zeros(len(self.flows), dtype=np.int64)
        c[self.unroutable] = -1
        return c

    def paths(self, choice) -> list:
        return [ps.path(c) if c >= 0 else None for ps, c in zip(self.sets, np.asarray(choice).tolist())]

    def choice_from_paths(self, paths) -> np.ndarray:
        """Option index of each given path (-1 where the path is missing or no longer a candidate)."""
        return np.array([ps.index_of(p) if p is not None else -1 for ps, p in zip(self.sets, paths)], dtype=np.int64)

    def option_links(self, i: int) -> np.ndarray:
        """(options, K) switch links of flow i's options, padded with ``dummy``."""
        ps = self.sets[i]
        cached = getattr(ps, "_padded", None)
        if cached is not None and cached[0] == (self.dummy, self.K):
            return cached[1]
        lk = ps.links()
        if lk.shape[1] < self.K:
            lk = np.hstack((lk, np.full((len(lk), self.K - lk.shape[1]), self.dummy, dtype=np.int64)))
        if lk.size <= 4096:
            ps._padded = ((self.dummy, self.K), lk)
        return lk

    def option_table(self):
        """(offsets, table): all options of all distinct path sets stacked, padded to K, or None if too big."""
        if self._table is None:
            total = sum(len(ps) for ps in self.unique_sets) * max(self.K, 1)
            if total > 4_000_000:
                self._table = (None, None)
            else:
                sizes = np.array([len(ps) for ps in self.unique_sets], dtype=np.int64)
                offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
                rows = [_padded(ps, self.K, self.dummy) for ps in self.unique_sets]
                table = np.vstack(rows) if rows else np.zeros((0, self.K), dtype=np.int64)
                self._table = (offsets, table)
        return self._table

    def option_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every distinct path set's links as rows (the compiled loops read them): (base, down, up, options, rows,
        table) per set in ``set_id`` order; row r (up hops, then down hops) of option c of set s is at
        ``table[(base[s] if r < up[s] else down[s]) + r * options[s] + c]``. A set's up rows are its source
        leaf's up-path table (or the part of it the pair can use) and its down rows its destination leaf's, shared
        by every pair of those leaves: each distinct table is stored once (at k=24 a copy per pair was 40 MB
        for a new set of 10k elephants, 15-25 ms to build)."""
        if self._rows is None:
            sets = self.unique_sets
            n = len(sets)
            opts = np.fromiter(map(len, sets), dtype=np.int64, count=n)
            up = np.array([ps.up.shape[1] for ps in sets], dtype=np.int64).reshape(n)
            rows = up + np.array([ps.down.shape[1] for ps in sets], dtype=np.int64).reshape(n)
            up[opts == 0] = 0
            rows[opts == 0] = 0
            # every set's up table, then every set's down table: each distinct array stored once (by identity:
            # the sets keep them alive), in any order (the offsets say where)
            halves = [ps.upT for ps in sets] + [ps.downT for ps in sets]
            ids = np.fromiter(map(id, halves), dtype=np.int64, count=2 * n)
            _, first, which = np.unique(ids, return_index=True, return_inverse=True)
            blocks = [halves[i] for i in first.tolist()]
            sizes = np.fromiter((b.size for b in blocks), dtype=np.int64, count=len(blocks))
            at = (np.cumsum(sizes) - sizes)[which.reshape(-1)]
            used = opts * rows > 0
            base = np.where(used, at[:n], 0)
            down = np.where(used, at[n:] - up * opts, 0)
            table = np.concatenate([b.ravel() for b in blocks]).astype(np.int64, copy=False) if blocks else \
                np.zeros(0, dtype=np.int64)
            self._rows = (base, down, up, opts, rows, table)
        return self._rows

    def link_matrix(self, choice) -> np.ndarray:
        """(flows, K) switch links of every flow's chosen path (dummy-padded; unroutable rows all dummy).

        The last choice's matrix is kept: the optimiser's steps ask for the same routing's matrix one after
        the other (the search, the bottleneck search, the polishing); each caller gets its own copy."""
        return self._memo(choice)[1].copy()

    def _memo(self, choice) -> list:
        """[choice, link matrix, loads or None] of ``choice``, built when it is not the last one asked for."""
        choice = np.asarray(choice)
        memo = self._mat_memo
        if memo is None or not np.array_equal(memo[0], choice):
            memo = self._mat_memo = [choice.copy(), self._link_matrix(choice), None]
        return memo

    def _link_matrix(self, choice: np.ndarray) -> np.ndarray:
        n = len(self.flows)
        out = np.full((n, self.K), self.dummy, dtype=np.int64)
        # from the option table where some step has built it; else from option_rows(), which the greedy
        # builds and which costs a fraction of the table (a column per hop: K = 2 on a 2-tier Clos)
        offsets, table = self._table if self._table is not None else (None, None)
        if table is not None:
            idx = self.inter
            ch = np.asarray(choice)[idx]
            ok = ch >= 0
            out[idx[ok]] = table[offsets[self.set_id[idx[ok]]] + ch[ok]]
            return out
        idx = self.inter
        ch = np.asarray(choice)[idx]
        idx, ch = idx[ch >= 0], ch[ch >= 0]
        if kernels.enabled():
            kernels.fill_link_matrix(idx, ch, self.set_id, self.option_rows(), out)
            return out
        base, down, up, opts, rows, table = self.option_rows()  # the same links, one column at a time
        s = self.set_id[idx]
        at_up, at_down, n_up, stride, width = base[s] + ch, down[s] + ch, up[s], opts[s], rows[s]
        for col in range(self.K):
            sel = width > col
            at = np.where(col < n_up[sel], at_up[sel], at_down[sel])
            out[idx[sel], col] = table[at + col * stride[sel]]
        return out

    def loads(self, choice=None, matrix=None) -> np.ndarray:
        """Flows per link of ``choice`` (kept with its link matrix: the steps of a decision ask for the same
        routing's loads in turn; each caller gets its own copy), or of the link ``matrix`` given."""
        if matrix is None:
            memo = self._memo(choice)
            if memo[2] is None:
                memo[2] = self._loads(memo[1])
            return memo[2].copy()
        return self._loads(matrix)

    def _loads(self, m: np.ndarray) -> np.ndarray:
        ld = np.bincount(m.ravel(), minlength=self.dummy + 1).astype(np.int64)
        ld[self.dummy] = 0
        return ld

    @property
    def nic(self) -> tuple[np.ndarray, np.ndarray]:
        """(source NIC up link, destination NIC down link) of every flow."""
        if getattr(self, "_nic", None) is None:
            fab = self.fabric
            get = fab._nic.get  # (host, leaf) pairs looked up by map: half the time of a comprehension
            up = list(map(get, zip([f.src for f in self.flows], self._src_leaves)))
            dn = list(map(get, zip([f.dst for f in self.flows], self._dst_leaves)))
            if None in up or None in dn:  # hosts placed where the fabric did not know them: register
                nl = fab.nic_links
                pairs = [nl(f, s, d) for f, s, d in zip(self.flows, self._src_leaves, self._dst_leaves)]
                up = [p[0] for p in pairs]
                dn = [p[1] - 1 for p in pairs]
            self._nic = (np.array(up, dtype=np.int64), np.array(dn, dtype=np.int64) + 1)
        return self._nic

    def rates(self, choice, matrix=None) -> np.ndarray:
        """Max-min fair rates (NIC links included, demands respected) of a choice vector."""
        from mlroute.routing.metric import water_fill

        full, caps, dem = self.rate_inputs(choice, matrix)
        return water_fill(full, caps, dem)

    def rate_inputs(self, choice, matrix=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """What :meth:`rates` water-fills: (flows, K + 2) links (source NIC, switch links, destination NIC;
        padding = the last link, of infinite capacity), the capacities, the demands (None = unlimited)."""
        up, down = self.nic
        m = self.link_matrix(choice) if matrix is None else matrix
        caps = self.fabric.capacities
        sentinel = len(caps)
        full = np.empty((len(self.flows), m.shape[1] + 2), dtype=np.int64)
        full[:, 0] = up
        full[:, -1] = down
        full[:, 1:-1] = np.where(m == self.dummy, sentinel, m)
        caps = np.append(caps, np.inf)
        dead = np.zeros(len(self.flows), dtype=bool)
        dead[self.unroutable] = True
        dead[self.inter[np.asarray(choice)[self.inter] < 0]] = True
        dem = self.demands
        if dead.any():  # unroutable flows take no capacity anywhere (NICs included) and get 0
            dem = np.full(len(self.flows), np.inf) if dem is None else dem.copy()
            dem[dead] = 0.0
            full[dead] = sentinel
        return full, caps, dem

    def incidences(self, choice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links every flow of a choice vector crosses as incidences (flat links, owning flow, links per
        flow): ``metric``'s form of a routing (source NIC, switch links in path order, destination NIC; none
        for an unroutable flow), read from the option tables instead of looked up per path."""
        full, _, _ = self.rate_inputs(choice)
        real = full != len(self.fabric.capacities)
        lens = real.sum(1)
        return full[real], np.repeat(np.arange(len(lens)), lens), lens

    def rate_row(self, i: int, links: np.ndarray) -> np.ndarray:
        """Flow ``i``'s row of :meth:`rate_inputs` with its switch links ``links`` (dummy-padded)."""
        up, down = self.nic
        sentinel = len(self.fabric.capacities)
        return np.concatenate(([up[i]], np.where(links == self.dummy, sentinel, links), [down[i]]))

    def ideal_rates(self) -> np.ndarray:
        """Max-min fair rates with only the NIC links (a non-blocking fabric): no routing gives a flow more."""
        from mlroute.routing.metric import water_fill

        if getattr(self, "_ideal", None) is None:
            up, down = self.nic
            dem = self.demands
            if len(self.unroutable):
                dem = np.full(len(self.flows), np.inf) if dem is None else dem.copy()
                dem[self.unroutable] = 0.0
            # event-driven from the start: two links per flow and, with demands, a level per distinct demand
            self._ideal = water_fill(np.stack((up, down), axis=1), self.fabric.capacities, dem, events=True)
        return self._ideal

    @property
    def demands(self) -> np.ndarray | None:
        """Demands in capacity units (inf = unlimited), or None when no flow has one."""
        if not hasattr(self, "_demands"):
            d = [f.demand for f in self.flows]
            self._demands = None if d.count(None) == len(d) else \
                np.array([np.inf if x is None else float(x) for x in d]) * self.fabric.host_capacity
        return self._demands

    @property
    def jobs(self) -> list:
        from mlroute.routing.metric import job_labels

        return job_labels(self.flows)

    def max_load(self, choice) -> int:
        ld = self.loads(choice)
        return int(ld.max()) if len(ld) else 0

    def routing(self, choice, algo: str, objective: str = "flow", *, rates: np.ndarray | None = None,
                **info) -> Routing:
        info = {"algo": algo, "objective": objective, **info}
        return Routing(self.paths(choice), info, np.asarray(choice), rates)

    # ------------------------------------------------------------------ bounds
    def degree_bound(self) -> int | None:
        """ceil(Delta/S) on a uniform 2-tier fabric (None elsewhere): no routing has a lower max load."""
        fab = self.fabric
        if not fab.is_uniform_two_tier() or not len(self.inter):
            return None if not fab.is_uniform_two_tier() else 0
        s = len(fab.live_spines())
        if s == 0:
            return None
        up = np.bincount(self.src_pos[self.inter], minlength=len(fab.leaves))
        dn = np.bincount(self.dst_pos[self.inter], minlength=len(fab.leaves))
        delta = int(max(up.max(), dn.max()))
        return -(-delta // s)


def _padded(ps, k: int, dummy: int) -> np.ndarray:
    lk = ps.links()
    if lk.shape[1] < k:
        lk = np.hstack((lk, np.full((len(lk), k - lk.shape[1]), dummy, dtype=np.int64)))
    return lk


def stable_hash(flow: Flow, seed: int) -> int:
    """A process-independent 64-bit hash of a flow (its ``key`` if set, else src, dst, job) and a seed."""
    ident = flow.key if flow.key is not None else (flow.src, flow.dst, flow.src_tor, flow.dst_tor, flow.job)
    h = hashlib.blake2b(repr((ident, seed)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")
