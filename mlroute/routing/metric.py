"""The network-wide efficiency metric ("2-layered max-min fairness", docs/paper.md) and routing reports.

Layer 1: for a fixed routing, every flow gets its max-min fair rate over the directed links it crosses
(:func:`water_fill`).  Layer 2: routings are ordered *leximin* by their sorted rate vectors
(:func:`leximin_compare`), or job-first (:func:`job_leximin_compare`: a job's rate is its slowest flow's rate,
jobs compared leximin first, then flows).

Rates are in the same unit as the capacities (with the generators' unit capacities: fractions of a link).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.demand import estimate_demands
from mlroute.tolerances import ABS_TOL, REL_TOL, TINY


def _csr(flow_links: Sequence[np.ndarray] | np.ndarray):
    lens = np.fromiter((len(x) for x in flow_links), dtype=np.int64, count=len(flow_links))
    if len(flow_links):
        flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in flow_links]) if lens.sum() else \
            np.zeros(0, np.int64)
    else:
        flat = np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(flow_links)), lens)
    return flat, owner, lens


def water_fill(flow_links: Sequence[np.ndarray] | np.ndarray, capacities: np.ndarray,
               demands: np.ndarray | None = None, *, events: bool = False) -> np.ndarray:
    """Max-min fair rates of flows that each cross a fixed set of links (progressive filling).

    ``flow_links[i]`` are the link indices flow i crosses (a link listed twice counts twice); a 2-D array
    (one row per flow, padded with the index of an infinite-capacity link) is the fast form;
    ``capacities[l]`` the capacity of link l; ``demands[i]`` (optional; ``inf`` or ``nan`` = unlimited) caps
    flow i.  All unfrozen flows rise together; at each step the fill level is computed directly from the
    capacities (``(cap - frozen rate on the link) / unfrozen flows on the link``), not by accumulating
    increments, so flows bottlenecked together get bit-identical rates and ties are exact.  Every link whose
    level is within a relative ``REL_TOL`` (:mod:`mlroute.tolerances`) of the minimum saturates in the same
    step.  A flow that crosses no link gets its demand, or ``inf`` if it has none.  Runs level by level with
    numpy (O(levels x incidences)); a big instance that needs many levels finishes event-driven with a heap
    (O(incidences x log links)); ``events`` runs event-driven from the start (small instances with many
    levels, e.g. flows capped by distinct demands: one numpy round per level costs more there).

    Worked example: flows 0 and 1 share link 0 (capacity 10), flow 1 also crosses link 1 (capacity 4), flow 2
    crosses link 1 only. Link 1 saturates first (flows 1 and 2 at 2 each); flow 0 then takes what is left of
    link 0:

    >>> [float(r) for r in water_fill([np.array([0]), np.array([0, 1]), np.array([1])], np.array([10.0, 4.0]))]
    [8.0, 2.0, 2.0]
    """
    n = len(flow_links)
    if isinstance(flow_links, np.ndarray) and flow_links.ndim == 2:
        flat = flow_links.ravel()
        owner = np.repeat(np.arange(n), flow_links.shape[1])
        lens = np.full(n, flow_links.shape[1], dtype=np.int64)
    else:
        flat, owner, lens = _csr(flow_links)
    return water_fill_csr(flat, owner, lens, capacities, demands, events=events)


def water_fill_csr(flat: np.ndarray, owner: np.ndarray, lens: np.ndarray, capacities: np.ndarray,
                   demands: np.ndarray | None = None, *, events: bool = False) -> np.ndarray:
    """:func:`water_fill` of flows given as incidences: flow ``owner[j]`` crosses link ``flat[j]`` (grouped by
    flow, in flow order), ``lens[i]`` links for flow i.

    Big instances are memoised by content (:data:`MEMO_MIN_INCIDENCES`): a TE decision fills the same routing
    several times (the routing in force, the greedy's, the previous period's proposal), and the function is
    deterministic, so a repeat returns a copy of the first result to the bit."""
    if len(flat) < MEMO_MIN_INCIDENCES:
        return _water_fill_csr(flat, owner, lens, capacities, demands, events)
    key = _fill_key(flat, owner, lens, capacities, demands, events)
    hit = _FILLS.get(key)
    if hit is not None:
        _FILLS.move_to_end(key)
        return hit.copy()
    rate = _water_fill_csr(flat, owner, lens, capacities, demands, events)
    _FILLS[key] = rate.copy()
    while len(_FILLS) > MEMO_SIZE:
        _FILLS.popitem(last=False)
    return rate


#: water-fillings with at least this many incidences are memoised (smaller ones cost less than the key).
MEMO_MIN_INCIDENCES = 20_000
#: memoised water-fillings kept (least recently used dropped first).
MEMO_SIZE = 8
_FILLS: OrderedDict[bytes, np.ndarray] = OrderedDict()


def _fill_key(flat, owner, lens, capacities, demands, events: bool) -> bytes:
    """A digest of everything a water-filling reads (each array's dtype and length included)."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"{'e' if events else 'v'}{VECTOR_ROUNDS}".encode())  # which variant runs is part of the input
    for arr in (flat, owner, lens, capacities, demands):
        if arr is None:
            h.update(b"none")
            continue
        a = np.ascontiguousarray(arr)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.digest()


def _water_fill_csr(flat: np.ndarray, owner: np.ndarray, lens: np.ndarray, capacities: np.ndarray,
                    demands: np.ndarray | None, events: bool) -> np.ndarray:
    n = len(lens)
    caps = np.asarray(capacities, dtype=float)
    dem = np.full(n, np.inf) if demands is None else np.asarray(demands, dtype=float).copy()
    if len(dem) != n:
        raise ValueError("demands must have one entry per flow")
    dem[np.isnan(dem)] = np.inf
    if len(flat) and (flat.min() < 0 or flat.max() >= len(caps)):
        raise ValueError("a flow crosses a link index outside capacities")
    rate = np.zeros(n)
    active = np.ones(n, dtype=bool)
    no_links = lens == 0
    rate[no_links] = dem[no_links]
    active[no_links] = False
    zero_dem = active & (dem <= 0)
    rate[zero_dem] = 0.0
    active[zero_dem] = False
    frozen_load = np.zeros(len(caps))  # rate of frozen flows on each link
    if len(flat):
        inc = ~active[owner]
        frozen_load += np.bincount(flat[inc], weights=rate[owner[inc]], minlength=len(caps))
    if not events and kernels.enabled():
        max_rounds = VECTOR_ROUNDS if len(flat) > 20_000 else len(rate) + 1  # every round freezes a flow
        if not kernels.water_fill_rounds(flat, owner, caps, dem, rate, active, frozen_load, max_rounds):
            _water_fill_events(flat, owner, lens, caps, dem, rate, active, frozen_load)
        return rate
    return _water_fill_rounds_reference(flat, owner, lens, caps, dem, rate, active, frozen_load, events)


def _water_fill_rounds_reference(flat, owner, lens, caps, dem, rate, active, frozen_load, events: bool):
    """The level-by-level rounds in numpy: the specification of the compiled ``kernels.water_fill_rounds``, its
    fallback, and (``events``) the way into the event-driven version."""
    n = len(rate)
    rounds = 0
    while active.any():
        if events or (rounds >= VECTOR_ROUNDS and len(flat) > 20_000):
            # many distinct levels on a big instance: finish with the event-driven version
            _water_fill_events(flat, owner, lens, caps, dem, rate, active, frozen_load)
            break
        rounds += 1
        act_inc = active[owner]
        cnt = np.bincount(flat[act_inc], minlength=len(caps))
        used = cnt > 0
        lvl_links = np.full(len(caps), np.inf)
        lvl_links[used] = np.maximum(caps[used] - frozen_load[used], 0.0) / cnt[used]
        link_level = lvl_links.min() if used.any() else np.inf
        dem_level = dem[active].min()
        level = min(link_level, dem_level)
        if not math.isfinite(level):
            rate[active] = np.inf
            break
        tol = REL_TOL * max(abs(level), TINY)
        sat = lvl_links <= level + tol
        freeze = np.zeros(n, dtype=bool)
        if link_level <= level + tol:
            hit = flat[act_inc]
            freeze[owner[act_inc][sat[hit]]] = True
        by_demand = active & (dem <= level + tol)
        freeze |= by_demand
        freeze &= active
        new_rate = np.full(n, level)
        new_rate[by_demand] = np.minimum(dem[by_demand], level)
        rate[freeze] = new_rate[freeze]
        active &= ~freeze
        inc = freeze[owner]
        frozen_load += np.bincount(flat[inc], weights=rate[owner[inc]], minlength=len(caps))
    return rate


#: vectorised progressive-filling rounds before a big instance switches to the event-driven version.
VECTOR_ROUNDS = 8


def _water_fill_events(flat, owner, lens, caps, dem, rate, active, frozen_load):
    """Event-driven progressive filling (heap of link saturation levels); same result, O(I log L). Runs the
    compiled kernel (:mod:`mlroute.routing.kernels`, the same to the bit) where numba is available."""
    if kernels.enabled():
        kernels.water_fill_events(flat, np.concatenate(([0], np.cumsum(lens))), caps, dem, rate, active,
                                  frozen_load)
        return
    _water_fill_events_reference(flat, owner, lens, caps, dem, rate, active, frozen_load)


def _water_fill_events_reference(flat, owner, lens, caps, dem, rate, active, frozen_load):  # noqa: C901 (the kernel's twin)
    """:func:`_water_fill_events` in pure Python: the specification of the compiled kernel, and its fallback."""
    import heapq

    n = len(rate)
    starts = np.concatenate(([0], np.cumsum(lens)))
    flow_links = flat.tolist()
    fstart = starts.tolist()
    act_inc = active[owner]
    # link -> active incidences (flows)
    lk = flat[act_inc]
    order = np.argsort(lk, kind="stable")
    fl = owner[act_inc][order]
    counts = np.bincount(lk, minlength=len(caps))
    lstart = np.concatenate(([0], np.cumsum(counts))).tolist()
    link_flows = fl.tolist()
    cnt = counts.tolist()
    cap = caps.tolist()
    fload = frozen_load.tolist()
    act = active.tolist()
    rt = rate.tolist()
    dm = dem.tolist()
    # the first entries, built with numpy (the same IEEE operations, in the same order, as the loop's updates):
    # the links in index order, then the flows with a finite demand
    used = np.flatnonzero(counts > 0)
    heap = list(zip((np.maximum(caps[used] - frozen_load[used], 0.0) / counts[used]).tolist(), used.tolist()))
    capped = np.flatnonzero(active & np.isfinite(dem))
    heap += zip(dem[capped].tolist(), (-1 - capped).tolist())
    heapq.heapify(heap)
    remaining = int(active.sum())
    pop, push = heapq.heappop, heapq.heappush
    # Heap entries are lower bounds of link levels (a level only rises as flows freeze), so links are not
    # re-pushed when their flows freeze elsewhere; a popped entry that turns out to be stale is re-pushed with
    # its current level, and a link is final when its popped entry is current.
    while heap and remaining:
        lvl, key = pop(heap)
        if key >= 0:
            c = cnt[key]
            if not c:
                continue
            cur = (cap[key] - fload[key] if cap[key] > fload[key] else 0.0) / c
            if cur > lvl:
                push(heap, (cur, key))
                continue
        elif not act[-1 - key]:
            continue
        top = lvl + REL_TOL * (lvl if lvl > TINY else TINY)
        batch = [key]
        while heap and heap[0][0] <= top:
            l2, k2 = pop(heap)
            if k2 >= 0:
                c = cnt[k2]
                if not c:
                    continue
                cur = (cap[k2] - fload[k2] if cap[k2] > fload[k2] else 0.0) / c
                if cur > top:
                    push(heap, (cur, k2))
                    continue
                batch.append(k2)
            elif act[-1 - k2]:
                batch.append(k2)
        frozen = []
        for key in batch:
            if key >= 0:
                for i in link_flows[lstart[key]:lstart[key + 1]]:
                    if act[i]:
                        act[i] = False
                        d = dm[i]
                        rt[i] = d if d < lvl else lvl
                        frozen.append(i)
            else:
                i = -1 - key
                if act[i]:
                    act[i] = False
                    d = dm[i]
                    rt[i] = d if d < lvl else lvl
                    frozen.append(i)
        remaining -= len(frozen)
        for i in frozen:
            r = rt[i]
            for link in flow_links[fstart[i]:fstart[i + 1]]:
                fload[link] += r
                cnt[link] -= 1
    for i in range(n):
        if act[i]:
            rt[i] = math.inf
    rate[:] = rt
    active[:] = False
    frozen_load[:] = fload


def _routing_csr(fabric, flows, paths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The link sets of flows on paths as incidences (flat links, owning flow, links per flow; a ``None`` path =
    unroutable: no links, rate 0), built without an array per flow (10,000 elephants: 4 ms instead of 70)."""
    li, nic, known, placed = fabric.link_index, fabric.nic_links, fabric._nic, fabric.hosts
    flat: list[int] = []
    lens: list[int] = []
    for f, p in zip(flows, paths):
        if p is None:
            lens.append(0)
            continue
        up = down = None
        if f.src_tor is None and f.dst_tor is None:  # default placement: the NICs the fabric registered
            up = known.get((f.src, placed.get(f.src)))
            down = known.get((f.dst, placed.get(f.dst)))
        if up is None or down is None:
            up, down = nic(f)
        else:
            down += 1
        flat.append(up)
        try:
            flat.extend([li[(p[k], p[k + 1])] for k in range(len(p) - 1)])
        except KeyError as exc:
            from mlroute.routing.fabric import FabricError

            raise FabricError(f"path {p!r} uses a link that does not exist: {exc}") from None
        flat.append(down)
        lens.append(len(p) + 1)
    ln = np.array(lens, dtype=np.int64)
    return np.array(flat, dtype=np.int64), np.repeat(np.arange(len(ln)), ln), ln


def _demands(flows):
    d = np.array([np.inf if f.demand is None else float(f.demand) for f in flows], dtype=float)
    return d


def rates(fabric, flows, paths, *, use_demands: bool = True) -> np.ndarray:
    """Max-min fair rates of ``flows`` routed on ``paths`` (host NIC links included).

    Flow demands (fractions of host-link capacity) cap the rates when ``use_demands``; unroutable flows
    (path ``None``) get 0.
    """
    return _rates(fabric, flows, paths, _routing_csr(fabric, flows, paths), use_demands)


def _rates(fabric, flows, paths, links, use_demands: bool = True) -> np.ndarray:
    flat, owner, lens = links
    dem = _demands(flows) * fabric.host_capacity if use_demands else None
    r = water_fill_csr(flat, owner, lens, fabric.capacities, dem)
    for i, p in enumerate(paths):
        if p is None:
            r[i] = 0.0
    return r


def assess(fabric, flows, paths, objective: str = "flow", *, ideal: np.ndarray | None = None,
           rates: np.ndarray | None = None, links: tuple | None = None) -> tuple[np.ndarray, dict]:
    """(:func:`rates`, :func:`report`) of one routing, its links looked up once (the TE step needs both);
    ``rates``, when the caller has them (an optimiser's ``Routing.rates``), are not water-filled again;
    ``links``, the routing's incidences where the caller has them (``Problem.incidences``), are not looked up
    again path by path."""
    links = _routing_csr(fabric, flows, paths) if links is None else links
    r = _rates(fabric, flows, paths, links) if rates is None else np.asarray(rates, dtype=float)
    return r, _report(fabric, flows, paths, links, None, objective, r, ideal)


def _cmp_sorted(a: np.ndarray, b: np.ndarray) -> int:
    return cmp_presorted(np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float)))


def cmp_presorted(a: np.ndarray, b: np.ndarray) -> int:
    """:func:`leximin_compare` of two rate vectors already sorted ascending."""
    if len(a) != len(b):
        raise ValueError("leximin comparison needs rate vectors of equal length")
    if kernels.enabled():
        return kernels.cmp_presorted(a, b)
    both_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    with np.errstate(invalid="ignore"):
        diff = np.where(both_inf, 0.0, a - b)
    scale = np.maximum(np.maximum(np.abs(np.where(np.isinf(a), 0, a)), np.abs(np.where(np.isinf(b), 0, b))), ABS_TOL)
    differ = np.abs(diff) > REL_TOL * scale
    if not differ.any():
        return 0
    i = int(np.argmax(differ))
    return 1 if a[i] > b[i] else -1


def leximin_compare(a, b) -> int:
    """Flow-level leximin order of two rate vectors: 1 if ``a`` is better, -1 if ``b`` is, 0 if equal.

    Both are sorted ascending and compared position by position (the worst flow first), with a relative
    tolerance of ``REL_TOL`` for equality.
    """
    return _cmp_sorted(a, b)


class WeightedJob(NamedTuple):
    """A job label with a weight other than 1 (:func:`job_labels`): the job's rate counts as rate / weight."""

    name: str
    weight: float


def job_labels(flows) -> list:
    """The job labels :func:`compare` takes for ``flows``: ``Flow.job``, or a :class:`WeightedJob` for a job
    whose flows carry a weight other than 1 (weighted max-min over jobs). A job with two weights is an error."""
    seen: dict = {}
    out = []
    for f in flows:
        w = float(f.weight)
        if f.job is not None:
            if seen.setdefault(f.job, w) != w:
                raise ValueError(f"job {f.job!r} has flows with different weights ({seen[f.job]:g}, {w:g})")
        if not w > 0 or not math.isfinite(w):
            raise ValueError(f"a job weight must be a positive number, got {w!r}")
        out.append(f.job if w == 1.0 or f.job is None else WeightedJob(f.job, w))
    return out


def job_rates(rates_vec, jobs) -> np.ndarray:
    """Per-job rate (the job's slowest flow, divided by its weight for a :class:`WeightedJob`), jobs in order
    of first appearance; ``None`` = a job per flow. ``jobs``: the labels, or their :class:`JobGroups`. One
    reduction over the flows grouped by job, not a slice per job: with 10k elephants mostly outside jobs, the
    polishing's comparisons spent 1.9 s of a 2.8 s k=24 decision taking 10k one-element minima."""
    groups = job_groups(jobs)
    r = np.asarray(rates_vec, dtype=float)
    if not len(r):
        return np.zeros(0)
    return np.minimum.reduceat(r[groups.order], groups.starts) / groups.weight


@dataclass(frozen=True)
class JobGroups:
    """Flows grouped by job (:func:`job_groups`), what :func:`job_rates` reduces over: built once for the many
    comparisons of one decision (grouping 10k labels in Python is ~7 ms, and the polishing compared ~40 times)."""

    order: np.ndarray  # the flows' indices, grouped (groups in order of first appearance, stable within one)
    starts: np.ndarray  # where each group starts in ``order``
    weight: np.ndarray  # each group's weight


def job_groups(jobs) -> JobGroups:
    """``jobs`` (labels as :func:`job_labels` gives them, one per flow) grouped; a JobGroups is returned as is."""
    if isinstance(jobs, JobGroups):
        return jobs
    group, weight = _job_groups(jobs)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]]) if len(group) else \
        np.zeros(0, dtype=np.int64)
    return JobGroups(order, starts, weight)


def _job_groups(jobs) -> tuple[np.ndarray, np.ndarray]:
    """Each flow's group (numbered in order of first appearance; a flow without a job is a group of its own)
    and each group's weight."""
    ids: dict = {}
    weights: list[float] = []
    group = np.empty(len(jobs), dtype=np.int64)
    for i, j in enumerate(jobs):
        g = None if j is None else ids.get(j)
        if g is None:
            g = len(weights)
            weights.append(j.weight if isinstance(j, WeightedJob) else 1.0)
            if j is not None:
                ids[j] = g
        group[i] = g
    return group, np.array(weights, dtype=float)


def job_leximin_compare(a, b, jobs) -> int:
    """Job-first leximin: compare per-job rates (min over each job's flows) leximin, ties -> flow level."""
    c = _cmp_sorted(job_rates(a, jobs), job_rates(b, jobs))
    return c if c else _cmp_sorted(a, b)


def compare(a, b, jobs=None, objective: str = "flow") -> int:
    """Compare two rate vectors by ``objective`` ("flow" or "job")."""
    if objective == "job":
        if jobs is None:
            raise ValueError("the job objective needs the jobs of the flows")
        return job_leximin_compare(a, b, jobs)
    if objective != "flow":
        raise ValueError(f"unknown objective {objective!r} (flow or job)")
    return leximin_compare(a, b)


def report(fabric, flows, paths, jobs: dict | None = None, objective: str = "flow", *,
           rates: np.ndarray | None = None, ideal: np.ndarray | None = None) -> dict:
    """Everything one wants to know about a routing.

    * ``max_link_load``: most flows on one directed fabric (switch-to-switch) link; ``max_nic_load`` the same
      for host links (routing cannot change those).
    * ``flows_sharing``: flows that share at least one fabric link with another flow.
    * ``links_at_max``: fabric links carrying ``max_link_load`` flows.
    * ``min_rate``, ``median_rate``, ``sum_rate``: max-min fair rates (capacity units);
      ``ideal_sum_rate`` the sum on a non-blocking network (Hedera's NIC-limited estimator, times host
      capacity) and ``fraction_of_ideal`` their ratio.
    * ``jobs``: per job (``Flow.job``) its flows, slowest rate, the slowest rate it would get on a
      non-blocking network, ``allreduce_relative`` = ideal / actual time of a ring All-Reduce (each of the
      2(n-1) lock-stepped steps moves the same bytes over every ring edge, so the step time is set by the
      slowest flow), and, when ``jobs[job]`` gives ``ring`` (n) and ``bytes`` (the all-reduced size) and
      the fabric's capacity unit in bytes/s as ``capacity_Bps``, ``allreduce_time_s`` = 2(n-1) * bytes/n /
      (slowest rate * capacity_Bps).

    ``rates`` (what :func:`rates` gives for this routing) and ``ideal`` (``estimate_demands(flows)``, the
    non-blocking fractions) save a caller that has them computing them again.
    """
    return _report(fabric, flows, paths, _routing_csr(fabric, flows, paths), jobs, objective, rates, ideal)


def _report(fabric, flows, paths, links, jobs, objective, rates, ideal) -> dict:
    flat, owner, lens = links
    caps = fabric.capacities
    dem = _demands(flows) * fabric.host_capacity
    if rates is None:
        r = water_fill_csr(flat, owner, lens, caps, dem)
        unroutable = [i for i, p in enumerate(paths) if p is None]
        r[unroutable] = 0.0
    else:
        r = np.asarray(rates, dtype=float)
        unroutable = [i for i, p in enumerate(paths) if p is None]
    n_sw = fabric.n_switch_links
    loads = np.bincount(flat, minlength=len(caps))
    sw = loads[:n_sw]
    max_load = int(sw.max()) if len(sw) else 0
    shared_links = np.zeros(len(caps), dtype=bool)
    shared_links[:n_sw] = sw >= 2
    sharing = int(np.count_nonzero(np.bincount(owner[shared_links[flat]], minlength=len(flows))))
    ideal = (estimate_demands(flows) if ideal is None else np.asarray(ideal, dtype=float)) * fabric.host_capacity
    ideal = np.minimum(ideal, dem)
    finite = np.isfinite(r)
    out = {
        "flows": len(flows),
        "unroutable": len(unroutable),
        "max_link_load": max_load,
        "links_at_max": int((sw == max_load).sum()) if max_load else 0,
        "max_nic_load": int(loads[n_sw:].max()) if len(loads) > n_sw else 0,
        "flows_sharing": int(sharing),
        "min_rate": float(r.min()) if len(r) else None,
        "median_rate": float(np.median(r)) if len(r) else None,
        "sum_rate": float(r[finite].sum()),
        "ideal_sum_rate": float(ideal.sum()),
        "fraction_of_ideal": float(r[finite].sum() / ideal.sum()) if ideal.sum() > 0 else None,
        "objective": objective,
    }
    if any(f.job is not None for f in flows):
        out["jobs"] = _job_reports(flows, jobs or {}, r, ideal)
    return out


def _job_reports(flows, jobs, r, ideal) -> dict:
    """Per job: its flows, its slowest flow's rate against the ideal's, and (given its ring, bytes and capacity)
    the all-reduce time that slowest flow sets."""
    per_job: dict = {}
    for i, f in enumerate(flows):
        if f.job is not None:
            per_job.setdefault(f.job, []).append(i)
    jout = {}
    for job, idx in per_job.items():
        slow = float(r[idx].min())
        slow_ideal = float(ideal[idx].min())
        entry = {
            "flows": len(idx),
            "min_rate": slow,
            "ideal_min_rate": slow_ideal,
            "allreduce_relative": (slow_ideal / slow) if slow > 0 else math.inf,
        }
        spec = jobs.get(job) or {}
        if {"ring", "bytes", "capacity_Bps"} <= set(spec) and slow > 0:
            n = int(spec["ring"])
            entry["allreduce_time_s"] = (2 * (n - 1) * (float(spec["bytes"]) / n)
                                         / (slow * float(spec["capacity_Bps"])))
        jout[job] = entry
    return jout
