"""Ring choice: the order of a ring all-reduce job's hosts that the network-wide metric prefers.

Routing can only spread the flows a ring creates; the ring's order decides which host pairs they join, so how many
must cross a rack or the core. A job's ranks on one host stay one contiguous block (torchrun gives every host a
block of ranks), so the choice is an order of *hosts*: node rank i = position i. Every candidate order is judged
the way the controller judges routings: its ring flows are routed by the default optimiser together with every
other flow, and the routings compare by the project's metric (:func:`mlroute.routing.metric.compare`, job-level by
default). The order given is always a candidate and is kept unless another is strictly better ("no order helps").

Direction: a library sends around its ring one way. gloo's rank r sends to r-1 (``direction="previous"``, the
default); mlroute's own rings (:class:`mlroute.workloads.jobs.Job`, declared rings) send member i -> i+1, so the
ring to declare is the chosen order reversed (:attr:`RingChoice.ring`). Rotations of an order are the same flows;
its reflection is the same flows reversed, equal in the metric only when nothing else shares the fabric (cables
are symmetric, so reversing every flow maps the network onto itself), so reflections are folded only then.

Exact (``method="exact"``) for a job of at most ``exact_max_hosts`` hosts: every order up to rotation is a
candidate, those giving the same multiset of (source, destination) pairs of interchangeable hosts (same leaf, no
other traffic on their NICs: each then carries exactly one ring flow each way) routed once. Candidates are tried
fewest core / rack crossings first, and the search stops early when a candidate gives every flow the most it
could get on any routing (its NIC rate, or its demand): no order can be better in a leximin order.

Larger jobs (``method="grouped"``): hosts grouped by rack (leaf switch), racks by pod (the aggregation switches a
leaf reaches; one pod on a 2-tier fabric), so the ring crosses each rack and pod boundary once: the lower bound on
crossings is the number of racks (pods) the job spans, when more than one, and :attr:`RingChoice.crossings`
reports the orders' crossings against it. Which racks and pods follow each other still matters under failures, so
a first-improvement search over block orders (reverse a pod's racks, swap two pods, swap adjacent racks, reverse
the ring) follows, routed and compared like the exact candidates, up to ``max_candidates`` routings.

Deterministic: candidates in a fixed order, the optimiser seeded and its search budget counted in work, not
seconds (no wall-clock budget decides anything here). Cost: one optimiser run per distinct candidate (k=4
fat-tree, 16 flows: under 1 ms uncongested, about 10 ms when the polishing works).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlroute.routing import metric
from mlroute.routing.demand import estimate_demands
from mlroute.routing.fabric import Fabric, FabricError
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.tolerances import REL_TOL

__all__ = ["DIRECTIONS", "EXACT_MAX_HOSTS", "RingChoice", "choose_ring", "choose_rings", "crossings",
           "grouped_order", "node_ranks", "pod_of", "rank_blocks", "ring_flows"]

#: "previous": member i sends to i-1 (gloo's ring all-reduce); "next": member i sends to i+1 (mlroute's rings).
DIRECTIONS = ("previous", "next")
#: jobs with at most this many hosts are chosen exactly ((n-1)! orders before folding: 5040 at 8).
EXACT_MAX_HOSTS = 8


@dataclass(frozen=True)
class RingChoice:
    """The chosen order of one ring job and what it is expected to gain over the order given.

    ``order``: hosts in node-rank order (host ``order[i]`` runs node rank i; its ranks stay one block);
    ``given``: the order asked about; ``ring``: ``order`` as mlroute declares a ring (member i sends to i+1) for
    the library's ``direction``; ``helps``: the chosen order is strictly better in the metric than the given one
    (else ``order == given``); ``gain``: the job's slowest ring flow, chosen / given (= the estimated all-reduce
    time, given / chosen: each lock-stepped ring step waits for the slowest edge); ``given_relative`` /
    ``chosen_relative``: the job's all-reduce time over its time on a non-blocking network; ``crossings``:
    ``{"rack": (given, chosen, lower bound), "pod": (...)}`` ring edges across racks / pods; ``method``:
    "trivial" (fewer than 3 hosts: one order), "exact" or "grouped"; ``candidates``: distinct orders routed;
    ``complete``: every candidate of the method was judged (or the search stopped at a proven optimum);
    ``flows`` / ``paths`` / ``rates``: every flow (the others first, then the ring's) as routed with the chosen
    order.
    """

    job: str
    direction: str
    given: tuple
    order: tuple
    helps: bool
    method: str
    candidates: int
    complete: bool
    gain: float
    given_rate: float
    chosen_rate: float
    given_relative: float
    chosen_relative: float
    crossings: dict
    flows: list = field(repr=False, default_factory=list)
    paths: list = field(repr=False, default_factory=list)
    rates: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    @property
    def ring(self) -> tuple:
        """The chosen order as a declared ring (member i sends to member i+1)."""
        return _as_next(self.order, self.direction)

    @property
    def node_ranks(self) -> dict:
        """Host -> its node rank in the chosen order (torchrun's ``--node-rank``)."""
        return node_ranks(self.order)

    def as_dict(self) -> dict[str, Any]:
        """The answer in JSON types (no flows, paths or rates)."""
        return {"order": list(self.order), "given": list(self.given), "helps": self.helps, "method": self.method,
                "candidates": self.candidates, "complete": self.complete, "gain": _finite(self.gain),
                "given_relative": _finite(self.given_relative), "chosen_relative": _finite(self.chosen_relative),
                "crossings": {k: list(v) for k, v in self.crossings.items()}}


def node_ranks(order: Sequence[Hashable]) -> dict:
    """Host -> node rank (its position in ``order``)."""
    return {h: i for i, h in enumerate(order)}


def rank_blocks(order: Sequence[Hashable], ranks_per_host: Mapping | None = None) -> dict:
    """Host -> (its first global rank, its number of ranks) when hosts take node ranks in ``order`` and each holds
    ``ranks_per_host[host]`` ranks (default 1) as one contiguous block, as torchrun assigns them."""
    out, first = {}, 0
    for h in order:
        n = 1 if ranks_per_host is None else int(ranks_per_host.get(h, 1))
        if n < 1:
            raise ValueError(f"host {h!r}: ranks per host must be at least 1, not {n}")
        out[h] = (first, n)
        first += n
    return out


def ring_flows(order: Sequence[Hashable], *, job: str | None = None, direction: str = "previous",
               place: Mapping | None = None, weight: float = 1.0) -> list[Flow]:
    """The ring's network flows for hosts in node-rank order: one per ring edge between hosts (a host's own ranks
    talk over shared memory), ``order[i] -> order[i-1]`` for "previous", ``-> order[i+1]`` for "next"; two hosts
    send to each other either way. ``place``: host -> leaf (index or name) for hosts the fabric does not know."""
    _check_direction(direction)
    m = len(order)
    if m < 2:
        return []
    step = -1 if direction == "previous" else 1
    place = place or {}
    return [Flow(order[i], order[(i + step) % m], src_tor=place.get(order[i]), dst_tor=place.get(order[(i + step) % m]),
                 job=job, weight=weight) for i in range(m)]


def crossings(order: Sequence[Hashable], group: Mapping) -> int:
    """Ring edges of ``order`` whose ends lie in different groups (``group``: host -> rack or pod)."""
    m = len(order)
    if m < 2:
        return 0
    return sum(group[order[i]] != group[order[i - 1]] for i in range(m))


def grouped_order(order: Sequence[Hashable], rack: Mapping, pod: Mapping) -> tuple:
    """``order`` regrouped so each pod, and each rack within it, is one contiguous run: pods, racks and hosts in
    order of first appearance in ``order`` (the ring then crosses each boundary once)."""
    pods: dict = {}
    for h in order:
        pods.setdefault(pod[h], {}).setdefault(rack[h], []).append(h)
    return tuple(h for racks in pods.values() for hosts in racks.values() for h in hosts)


def choose_ring(fabric: Fabric, hosts: Sequence[Hashable], others: Sequence[Flow] = (), *, job: str = "ring",
                direction: str = "previous", objective: str = "job", algo: str = "mlroute", seed: int = 0,
                weight: float = 1.0, place: Mapping | None = None, exact_max_hosts: int = EXACT_MAX_HOSTS,
                max_candidates: int | None = None) -> RingChoice:
    """The order of ``hosts`` (given in node-rank order) whose ring, routed jointly with ``others`` by ``algo``,
    is best in the metric (``objective``: "job" or "flow"); see the module docstring. ``max_candidates`` bounds the
    routings: an exact enumeration with more distinct candidates falls back to the grouped search, which stops
    after that many (default: no bound for the exact method, 64 for the grouped one)."""
    _check_direction(direction)
    given = tuple(hosts)
    if len(set(given)) != len(given):
        raise FabricError(f"ring choice: host {next(h for h in given if given.count(h) > 1)!r} listed twice")
    ev = _Evaluator(fabric, list(others), job, direction, objective, algo, seed, weight, place or {})
    rack, pod = ev.rack, ev.pod
    best = ev.judge(given)
    method, complete = "trivial", True
    if len(given) >= 3 and not ev.at_bound(best):
        exact = _exact_candidates(given, ev) if len(given) <= exact_max_hosts else None
        if exact is not None and (max_candidates is None or len(exact) <= max_candidates):
            method = "exact"
            best, complete = _best_of(exact, best, ev)
        else:
            method = "grouped"
            limit = 64 if max_candidates is None else max_candidates
            best, complete = _grouped_search(given, best, ev, limit)
    elif len(given) >= 3:
        method = "exact" if len(given) <= exact_max_hosts else "grouped"
    start = ev.judge(given)
    helps = best.order != given
    g_rate, g_rel = ev.job_rates(start)
    c_rate, c_rel = ev.job_rates(best)
    bound = {"rack": _bound(given, rack), "pod": _bound(given, pod)}
    return RingChoice(
        job=job, direction=direction, given=given, order=best.order, helps=helps, method=method,
        candidates=ev.routed, complete=complete,
        gain=(c_rate / g_rate) if g_rate > 0 else (math.inf if c_rate > 0 else 1.0),
        given_rate=g_rate, chosen_rate=c_rate, given_relative=g_rel, chosen_relative=c_rel,
        crossings={k: (crossings(given, grp), crossings(best.order, grp), bound[k])
                   for k, grp in (("rack", rack), ("pod", pod))},
        flows=best.flows, paths=best.paths, rates=best.rates)


def choose_rings(fabric: Fabric, jobs: Mapping[str, Sequence[Hashable]], others: Sequence[Flow] = (),
                 **kw: Any) -> dict:
    """:func:`choose_ring` for several jobs in turn (job order): each is chosen with ``others`` and every other
    job's ring as it stands (the jobs before it as chosen, those after in their given order). Job name ->
    RingChoice; ``kw`` as for choose_ring (``weight`` / ``place`` apply to all)."""
    direction = kw.get("direction", "previous")
    orders = {name: tuple(h) for name, h in jobs.items()}
    weight, place = kw.get("weight", 1.0), kw.get("place")
    out = {}
    for name in orders:
        rest = [f for other, order in orders.items() if other != name
                for f in ring_flows(order, job=other, direction=direction, place=place, weight=weight)]
        choice = choose_ring(fabric, orders[name], [*others, *rest], job=name, **kw)
        orders[name] = choice.order
        out[name] = choice
    return out


# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Judged:
    """One candidate order, routed: its flows (others first), paths and rates."""

    order: tuple
    flows: list
    paths: list
    rates: np.ndarray


class _Evaluator:
    """Routes candidate orders with the other flows and compares them; one routing per distinct candidate key."""

    def __init__(self, fabric: Fabric, others: list[Flow], job: str, direction: str, objective: str,
                 algo: str, seed: int, weight: float, place: Mapping) -> None:
        self.fabric, self.others, self.job, self.direction = fabric, others, job, direction
        self.objective, self.algo, self.seed, self.weight, self.place = objective, algo, seed, weight, place
        self.routed = 0
        self._memo: dict = {}
        self.rack: dict = {}
        self.pod: dict = {}
        self._labels: list | None = None
        self.busy = {h for f in others for h in (f.src, f.dst)}
        self.cls: dict = {}
        self.fold = not others  # reflections are equal only with nothing else on the fabric

    def locate(self, hosts: Iterable[Hashable]) -> None:
        fab = self.fabric
        for h in hosts:
            if h in self.rack:
                continue
            t = self.place.get(h)
            leaf = fab.host_leaf(h) if t is None else fab.src_leaf(Flow(h, h, src_tor=t))
            self.rack[h] = leaf
            self.pod[h] = pod_of(fab, leaf)
            # interchangeable hosts: same leaf, nothing else on their NICs (each carries one ring flow each way)
            self.cls[h] = ("leaf", leaf) if h not in self.busy else ("host", h)

    def key(self, order: tuple) -> tuple:
        self.locate(order)
        cls = self.cls
        k = tuple(sorted((cls[f.src], cls[f.dst]) for f in self._ring(order)))
        if self.fold:
            back = tuple(sorted((cls[f.dst], cls[f.src]) for f in self._ring(order)))
            k = min(k, back, key=repr)
        return k

    def _ring(self, order: tuple) -> list[Flow]:
        return ring_flows(order, job=self.job, direction=self.direction, place=self.place, weight=self.weight)

    def judge(self, order: tuple) -> _Judged:
        """The candidate routed (memoised by its key)."""
        k = self.key(order)
        hit = self._memo.get(k)
        if hit is not None:  # an equivalent order (interchangeable hosts swapped, rotated or reflected)
            return hit
        ring = sorted(self._ring(order), key=lambda f: (repr(self.cls[f.src]), repr(self.cls[f.dst])))
        flows = [*self.others, *ring]
        routing = optimise(self.algo, self.fabric, flows, seed=self.seed, objective=self.objective)
        rates = metric.rates(self.fabric, flows, routing.paths)
        self.routed += 1
        self._memo[k] = out = _Judged(order, flows, routing.paths, rates)
        return out

    def better(self, a: _Judged, b: _Judged) -> bool:
        """``a`` strictly better than ``b`` in the metric (the ring's flows sit at the same positions)."""
        if self._labels is None:
            self._labels = metric.job_labels(a.flows)
        return metric.compare(a.rates, b.rates, self._labels, self.objective) > 0

    def at_bound(self, j: _Judged) -> bool:
        """Every flow at the most any routing could give it (its NIC rate, capped by its demand): nothing beats
        this in a leximin order, flow- or job-level."""
        cap = self.fabric.host_capacity
        most = np.array([cap * min(1.0, f.demand) if f.demand is not None else cap for f in j.flows])
        return bool(np.all(j.rates >= most * (1 - REL_TOL)))

    def job_rates(self, j: _Judged) -> tuple[float, float]:
        """(the job's slowest ring flow, its all-reduce time / non-blocking time)."""
        idx = list(range(len(self.others), len(j.flows)))
        if not idx:
            return math.inf, 1.0
        slow = float(j.rates[idx].min())
        ideal = float(np.min(estimate_demands(j.flows)[idx])) * self.fabric.host_capacity
        return slow, (ideal / slow) if slow > 0 else math.inf


def _exact_candidates(given: tuple, ev: _Evaluator) -> list[tuple] | None:
    """Every order up to rotation (``given[0]`` first), one per distinct key, fewest pod then rack crossings first
    (enumeration order breaks ties)."""
    seen: dict = {ev.key(given): given}
    for tail in itertools.permutations(given[1:]):
        order = (given[0], *tail)
        seen.setdefault(ev.key(order), order)
    cands = list(seen.values())
    rank = {o: i for i, o in enumerate(cands)}
    cands.sort(key=lambda o: (crossings(o, ev.pod), crossings(o, ev.rack), rank[o]))
    return cands


def _best_of(cands: Iterable[tuple], best: _Judged, ev: _Evaluator) -> tuple[_Judged, bool]:
    """The best of ``best`` and ``cands`` (strictly better replaces: ties keep the earlier), stopping at a proven
    optimum; (best, True)."""
    for order in cands:
        cand = ev.judge(order)
        if ev.better(cand, best):
            best = cand
        if ev.at_bound(best):
            break
    return best, True


def _grouped_search(given: tuple, best: _Judged, ev: _Evaluator, limit: int) -> tuple[_Judged, bool]:
    """The grouped order, then first-improvement moves of whole racks and pods (module docstring), at most
    ``limit`` routings; (best, the search ended on its own)."""
    start = grouped_order(given, ev.rack, ev.pod)
    cand = ev.judge(start)
    if ev.better(cand, best):
        best = cand
    current = cand
    while ev.routed < limit and not ev.at_bound(best):
        improved = False
        for order in _block_moves(current.order, ev.rack, ev.pod):
            if ev.routed >= limit:
                return best, False
            cand = ev.judge(order)
            if ev.better(cand, current):
                current, improved = cand, True
                if ev.better(current, best):
                    best = current
                break
        if not improved:
            break
    return best, ev.routed < limit or ev.at_bound(best)


def _block_moves(order: tuple, rack: Mapping, pod: Mapping) -> Iterable[tuple]:
    """Orders one block move away: racks within a pod reversed, two pods swapped, two adjacent racks of a pod
    swapped, the whole ring reversed (host order within a rack kept)."""
    pods = [[list(g) for _, g in itertools.groupby(hosts, key=lambda h: rack[h])]
            for _, hosts in itertools.groupby(order, key=lambda h: pod[h])]

    def flat(ps: list) -> tuple:
        return tuple(h for p in ps for r in p for h in r)

    for i, p in enumerate(pods):
        if len(p) > 1:
            yield flat(pods[:i] + [p[::-1]] + pods[i + 1:])
    for i, j in itertools.combinations(range(len(pods)), 2):
        if j - i > 1 or len(pods) > 2:
            ps = list(pods)
            ps[i], ps[j] = ps[j], ps[i]
            yield flat(ps)
    for i, p in enumerate(pods):
        for a in range(len(p) - 2):
            q = list(p)
            q[a], q[a + 1] = q[a + 1], q[a]
            yield flat(pods[:i] + [q] + pods[i + 1:])
    yield order[:1] + order[:0:-1]


def pod_of(fabric: Fabric, leaf: Hashable) -> Hashable:
    """A leaf's pod: the aggregation switches it is cabled to (failed or not) on a 3-tier fabric; one pod on a
    2-tier fabric."""
    if fabric.n_tiers < 3:
        return None
    rank = fabric.rank
    return frozenset(v for v in fabric.graph[leaf] if rank[v] == rank[leaf] + 1)


def _bound(order: Sequence[Hashable], group: Mapping) -> int:
    """Fewest ring edges across groups: each group a ring spans must be left once (none if it spans one)."""
    n = len({group[h] for h in order})
    return 0 if n < 2 else (2 if len(order) == 2 else n)


def _as_next(order: tuple, direction: str) -> tuple:
    """``order`` (node-rank order) as a ring whose member i sends to i+1."""
    return order if direction == "next" or len(order) < 3 else order[:1] + order[:0:-1]


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None

