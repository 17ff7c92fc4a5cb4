"""Event-driven, flow-level simulation of ML training jobs on a routed fabric.

Model (docs/simulation.md has the long version)
-----------------------------------------------
* Every send of every ring (all-reduce) or chain (pipeline) of every job is a *flow slot*. A slot is active while
  its current transfer runs; active flows share links max-min fairly, computed by the routing core's
  water-filling (:func:`mlroute.routing.metric.water_fill`) over the links of their current paths. Rates are
  recomputed whenever the set of active flows or the routing changes, and only then: between two events every
  rate is constant, so the next event is the earliest of the next flow completion and the next timed event.
* A job starts at ``start_s``. Iteration ``i`` is a compute phase of ``compute_s`` seconds, then the
  communication phase. All-reduce: each ring does ``2 (n - 1)`` lock-stepped steps; in a step every edge of the
  ring sends ``step_bytes``; the ring's next step starts when its slowest edge has finished; rings of a job run
  independently of each other. Pipeline: each chain sends stage 0 -> 1, then 1 -> 2, ... (one send at a time).
  The iteration's communication (All-Reduce) time is from the end of the compute phase to the end of the job's
  last ring; the next iteration's compute phase starts then.
* Controller: ``mode="iteration"`` (forward-looking, docs/paper.md) recomputes the routing of all flows of all
  running jobs at the start of every job iteration, i.e. at the start of its compute phase;
  ``mode="comm-start"`` does the same at every communication start; ``mode="events"`` recomputes whenever a
  job starts or ends its communication, over the flows of the jobs communicating then (a job that ends frees
  the fabric for the others at once, which the iteration model misses); ``mode="period"``
  recomputes every ``period_s`` seconds (from 0); in that mode a job whose flows start before the first
  recomputation that sees them uses ECMP (the switches' default forwarding) meanwhile. A new routing takes effect
  at once, for in-flight flows too (the optimiser's wall-clock runtime is recorded, not simulated, so runs are
  deterministic). Failures (spines or links) at a time ``t`` trigger an immediate recomputation.
* Completions that fall within ``1e-12`` relative time of each other are processed as one event (lock-stepped
  rings of symmetric jobs end together, and this keeps the event count low).
"""

from __future__ import annotations

import copy
import enum
import heapq
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mlroute.sim.results import JobResult, SimResult
from mlroute.sim.slots import FlowSlots
from mlroute.workloads.jobs import Job

#: Controller models: when the simulated controller takes a routing decision (docs/simulation.md).
#: ``iteration``: at every job iteration start (the paper's forward-looking model); ``comm-start``: at every
#: communication start, over every running job's flows; ``events``: whenever a job starts or ends its
#: communication, over the flows of the jobs communicating then; ``period``: every ``period_s`` seconds.
MODES = ("iteration", "comm-start", "events", "period")


class Event(enum.IntEnum):
    """Timed simulator events; at one instant they are handled in this order."""

    FAILURE = 0  # elements fail: re-route at once
    ITERATION_START = 1  # a job's iteration begins with its compute phase
    PERIOD = 2  # a periodic controller's recomputation
    COMM_START = 3  # a job's compute phase ends: its flows start


class SimulationError(RuntimeError):
    """The simulation cannot proceed (e.g. a flow has no live path, or the fabric is partitioned)."""


@dataclass(frozen=True)
class Failure:
    """Spines (indices or names) and/or directed links ``(u, v)`` that fail at ``time_s``."""

    time_s: float
    spines: tuple = ()
    links: tuple = ()


class Progress:
    """A progress bar with ETA on stderr (tqdm), over the run's ring steps; silent unless enabled."""

    def __init__(self, total: int, label: str, enabled: bool, stream=None):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=max(1, total), desc=label, unit="step", file=stream or sys.stderr,
                            mininterval=0.5, dynamic_ncols=True)

    def update(self, done: int, force: bool = False):
        if self.bar is not None and done > self.bar.n:
            self.bar.update(done - self.bar.n)
            if force:
                self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------------------------------------- the engine


class _Router:
    """Maps flow slots to link-index arrays, via an optimiser on a fabric."""

    def __init__(self, fabric, flows, algo, *, seed, objective, time_limit, optimisers):
        self.fabric = fabric
        self.flows = flows
        self.algo = algo
        self.seed = seed
        self.objective = objective
        self.time_limit = time_limit
        self.optimisers = optimisers
        self.decisions: dict = {}  # (algo, slots) -> a decision over the fabric as it is now (see route)

    def fabric_changed(self) -> None:
        """Elements failed: no earlier decision holds for the fabric now."""
        self.decisions.clear()

    @property
    def capacities(self):
        return np.asarray(self.fabric.capacities, dtype=float)

    def route(self, idx: np.ndarray, algo: str | None = None):
        """Route the slots ``idx``; returns (link arrays, optimiser seconds, max fabric-link load).

        An optimiser is a deterministic function of the fabric and the flows (its seed is fixed for the run), and
        the paper's controller model asks it again for the same flows at every iteration start of every job; a
        repeat is answered with the first answer and the first call's measured runtime, which is what the
        optimiser would compute and take again (the ILP's only time-dependent answer, one cut short by its
        time limit, is then the same at every repeat)."""
        algo = algo or self.algo
        key = (algo, np.asarray(idx, dtype=np.int64).tobytes())
        hit = self.decisions.get(key)
        if hit is None:
            hit = self.decisions[key] = self._route(idx, algo)
        links, elapsed, load, self.last_proved, self.last_cut = hit
        return [ln.copy() for ln in links], elapsed, load

    def _route(self, idx: np.ndarray, algo: str):
        flows = [self.flows[i] for i in idx]
        kwargs = dict(seed=self.seed, objective=self.objective, time_limit=self.time_limit)
        opt = self.optimisers[algo]
        t0 = time.perf_counter()
        try:
            routing = opt(self.fabric, flows, **kwargs)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise SimulationError(f"{algo} could not route {len(flows)} flows: {exc}") from exc
        elapsed = time.perf_counter() - t0
        for f, p in zip(flows, routing.paths):
            if p is None:
                raise SimulationError(f"{algo}: flow {f.src}->{f.dst} of {f.job} has no live path "
                                      f"(the failures partition the fabric)")
        links = [np.asarray(self.fabric.flow_links(f, p), dtype=np.int64) for f, p in zip(flows, routing.paths)]
        load = _max_fabric_load(routing.paths)
        info = getattr(routing, "info", None) or {}
        # the one answer that depends on the machine: a search its wall-clock safety net cut short
        return links, elapsed, load, info.get("proved_optimal"), bool(info.get("cut_by_clock", False))


def _max_fabric_load(paths) -> int:
    """Elephants on the most loaded switch-to-switch link (NIC links excluded)."""
    counts: dict = {}
    for p in paths:
        for u, v in zip(p[:-1], p[1:]):
            counts[(u, v)] = counts.get((u, v), 0) + 1
    return max(counts.values(), default=0)


class _NicOnly:
    """A non-blocking fabric: each host has one up and one down link of capacity 1; nothing else."""

    def __init__(self, flows):
        ids: dict = {}
        self.links = []
        for f in flows:
            up = ids.setdefault(("up", f.src), len(ids))
            down = ids.setdefault(("down", f.dst), len(ids))
            self.links.append(np.array([up, down], dtype=np.int64))
        self.capacities = np.ones(len(ids))


def _default_water_fill():
    from mlroute.routing.metric import water_fill

    return water_fill


def _default_optimisers():
    from mlroute.routing.optimisers import OPTIMISERS

    return OPTIMISERS


def simulate(fabric, jobs: Sequence[Job], algo: str, *, link_bps: float, mode: str = "iteration",
             period_s: float | None = None, failures: Sequence[Failure] = (), seed: int = 0,
             objective: str = "flow", time_limit: float | None = None, progress: bool = False,
             progress_label: str | None = None, water_fill: Callable | None = None,
             optimisers: dict | None = None, compute_ideal: bool = True) -> SimResult:
    """Simulate ``jobs`` on ``fabric`` routed by ``algo``; see the module docstring for the model.

    ``fabric.capacities`` are in units of ``link_bps`` (capacity 1.0 = one link of ``link_bps`` bit/s).
    The fabric is copied first when ``failures`` would change it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if mode == "period" and not (period_s and period_s > 0):
        raise ValueError("mode 'period' needs a positive period_s")
    if not jobs:
        raise ValueError("no jobs to simulate")
    if not link_bps > 0:
        raise ValueError("link_bps must be positive")
    water_fill = water_fill or _default_water_fill()
    optimisers = optimisers or _default_optimisers()
    if algo not in optimisers:
        raise ValueError(f"unknown algorithm {algo!r} (known: {', '.join(sorted(optimisers))})")
    if failures:
        fabric = copy.deepcopy(fabric)
    slots = FlowSlots(jobs)
    router = _Router(fabric, slots.flows, algo, seed=seed, objective=objective, time_limit=time_limit,
                     optimisers=optimisers)
    ideal = {}
    if compute_ideal:
        for job in jobs:
            ideal[job.name] = ideal_comm_time(job, link_bps, water_fill=water_fill)
    engine = _Engine(slots, router, algo, link_bps=link_bps, mode=mode, period_s=period_s, failures=failures,
                     water_fill=water_fill, progress=progress, label=progress_label or algo)
    return engine.run(ideal)


def ideal_comm_time(job: Job, link_bps: float, water_fill: Callable | None = None) -> float:
    """One iteration's communication time of ``job`` alone on a non-blocking fabric (only NICs constrain)."""
    water_fill = water_fill or _default_water_fill()
    one = copy.copy(job)
    one.start_s, one.compute_s, one.iterations = 0.0, 0.0, 1
    slots = FlowSlots([one])
    nic = _NicOnly(slots.flows)
    engine = _Engine(slots, None, "ideal", link_bps=link_bps, mode="iteration", period_s=None, failures=(),
                     water_fill=water_fill, progress=False, label="ideal", static_links=nic)
    res = engine.run({job.name: float("nan")})
    return res.jobs[0].iterations[0]["allreduce_s"]


class _Engine:
    REL_TOL = 1e-12

    def __init__(self, slots: FlowSlots, router: _Router | None, algo, *, link_bps, mode, period_s, failures,
                 water_fill, progress, label, static_links=None):
        self.s = slots
        self.router = router
        self.algo = algo
        self.bps = link_bps / 8.0  # bytes per second of a capacity-1 link
        self.mode = mode
        self.period_s = period_s
        self.failures = sorted(failures, key=lambda f: f.time_s)
        self.water_fill = water_fill
        # the routing core's own filling takes a component's incidences directly (_fill_component)
        from mlroute.routing import metric

        self.fill_csr = metric.water_fill_csr if water_fill is metric.water_fill else None
        self.static = static_links
        total_steps = sum(int(slots.ring_steps[r]) * slots.jobs[slots.ring_job[r]].iterations
                          for r in range(slots.n_rings))
        self.progress = Progress(total_steps, label, progress)

    # -- routing --------------------------------------------------------------------------------------------
    def _reroute(self, t, algo=None, idx=None):
        s = self.s
        if idx is None:
            idx = np.flatnonzero(self.live[s.job_of])
        if len(idx) == 0:
            return
        links, secs, load = self.router.route(idx, algo)
        changed = False
        for i, ln in zip(idx.tolist(), links):
            old = self.links[i]
            if old is None or len(old) != len(ln) or not np.array_equal(old, ln):
                changed = True
            self.links[i] = ln
        caps = self.router.capacities
        if changed or len(caps) != len(self.caps):
            self.rate_cache.clear()  # memoised rates are only valid for unchanged paths and capacities
        self.routed[idx] = True
        self._components()
        if algo is None or algo == self.algo:
            self.controller_ms.append(secs * 1e3)
            self.recompute_times.append(t)
            self.max_load.append(load)
            self.recompute_flows.append(int(len(idx)))
            self.proved_optimal.append(getattr(self.router, "last_proved", None))
            self.cut_by_clock.append(getattr(self.router, "last_cut", False))
        self.caps = self.router.capacities * self.bps
        self.dirty = True  # everything: one global water-filling

    def _components(self):
        """Connected components of the flow-link incidence graph of all routed slots.

        Max-min fair rates decompose exactly over these components (flows that share no link, directly or
        through other flows, do not influence each other), and active flows are a subset of routed slots, so
        after a flow starts or ends only its component's rates need recomputing. With the paper's placement
        (replicas on ToRs of their own) components are small, which is what makes paper scale fast."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        idx = np.flatnonzero(self.routed)
        n = self.s.n
        lens = np.fromiter((len(self.links[i]) for i in idx), dtype=np.int64, count=len(idx))
        rows = np.repeat(idx, lens)
        flat = np.concatenate([self.links[i] for i in idx]) if len(idx) else np.zeros(0, np.int64)
        n_links = int(flat.max()) + 1 if len(flat) else 0
        size = n + n_links
        g = coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, flat + n)), shape=(size, size))
        _, labels = connected_components(g, directed=False)
        comp = labels[:n].copy()
        comp[~self.routed] = -1
        self.comp = comp
        order = np.argsort(comp, kind="stable")
        sorted_c = comp[order]
        starts = np.searchsorted(sorted_c, np.arange(labels.max() + 2))
        self.comp_members = {int(c): order[starts[c]:starts[c + 1]] for c in np.unique(comp[comp >= 0])}
        # every link belongs to one component: number the used links 0.. within their component
        used = np.unique(flat)
        lcomp = labels[n + used]
        lorder = np.lexsort((used, lcomp))
        used, lcomp = used[lorder], lcomp[lorder]
        first = np.searchsorted(lcomp, lcomp, side="left")
        local_of = np.zeros(max(n_links, 1), dtype=np.int64)
        local_of[used] = np.arange(len(used)) - first
        cstart = np.searchsorted(lcomp, np.arange(labels.max() + 2))
        self.comp_caps_idx = {c: used[cstart[c]:cstart[c + 1]] for c in self.comp_members}
        local_flat = local_of[flat]
        self.local_links = [None] * n
        k = 0
        for i, ln in zip(idx.tolist(), lens.tolist()):
            self.local_links[i] = local_flat[k:k + ln]
            k += ln
        # each component's incidences in member order: the water-filling's input is a mask away
        self.comp_lens = {c: np.fromiter((len(self.local_links[i]) for i in m), dtype=np.int64, count=len(m))
                          for c, m in self.comp_members.items()}
        self.comp_flat = {c: np.concatenate([self.local_links[i] for i in m]) for c, m in self.comp_members.items()}
        self.dirty_comps = set()

    def _mark(self, idx):
        if not self.dirty:
            self.dirty_comps.update(np.unique(self.comp[idx]).tolist())

    def _rates(self):
        """Recompute max-min rates: globally after a re-route, else only in the components that changed
        (globally too when many components changed at once: one call is cheaper than many)."""
        if self.dirty or len(self.dirty_comps) > 16:
            act = np.flatnonzero(self.active)
            self.rate[:] = 0.0
            if len(act):
                self.rate[act] = self.water_fill([self.links[i] for i in act], self.caps)
            self.dirty = False
            self.dirty_comps = set()
            return 1
        calls = 0
        for c in self.dirty_comps:
            members = self.comp_members[c]
            act = members[self.active[members]]
            if not len(act):
                continue
            if len(act) == 1:  # alone in its component: the tightest link on its path
                i = int(act[0])
                self.rate[i] = self.caps[self.links[i]].min()
                continue
            key = act.tobytes()
            rates = self.rate_cache.get(key)
            if rates is None:
                rates = self._fill_component(c, members, act)
                calls += 1
                if len(self.rate_cache) > 500_000:
                    self.rate_cache.clear()
                self.rate_cache[key] = rates
            self.rate[act] = rates
        self.dirty_comps = set()
        return calls

    def _fill_component(self, c: int, members: np.ndarray, act: np.ndarray) -> np.ndarray:
        """Max-min rates of the active flows ``act`` of component ``c``. The routing core's water-filling takes
        their incidences straight from the component's (the same input it would build from their link lists);
        an injected one gets the link lists."""
        caps = self.caps[self.comp_caps_idx[c]]
        if self.fill_csr is None:
            return self.water_fill([self.local_links[i] for i in act.tolist()], caps)
        mask = self.active[members]
        lens = self.comp_lens[c][mask]
        flat = self.comp_flat[c][np.repeat(mask, self.comp_lens[c])]
        return self.fill_csr(flat, np.repeat(np.arange(len(act)), lens), lens, caps)

    def _apply_failure(self, failure: Failure):
        """Fail the elements; the caller then re-routes every live flow over the surviving fabric (the
        controller reacts to the port-status event at once). Flows of jobs not running now lose their paths,
        which may cross the failed elements."""
        fabric = self.router.fabric
        for sp in failure.spines:
            name = sp if isinstance(sp, str) else fabric.tops[int(sp)]
            fabric.fail_switch(name)
        for u, v in failure.links:
            fabric.fail_link(u, v)
        self.router.fabric_changed()
        stale = np.flatnonzero(~self.live[self.s.job_of] & self.routed)
        self.routed[stale] = False

    # -- flow starts ----------------------------------------------------------------------------------------
    def _start_ring_step(self, t, ring):
        s = self.s
        a, b = s.ring_first[ring], s.ring_first[ring + 1]
        if s.job_kind[s.ring_job[ring]] == "allreduce":
            idx = np.arange(a, b)
            self.pending[ring] = b - a
        else:
            idx = np.array([a + self.ring_step[ring]])
            self.pending[ring] = 1
        self._activate(t, idx)

    def _activate(self, t, idx):
        if self.static is None and not self.routed[idx].all():
            # only in period mode before the first recomputation that sees the job: default (ECMP) forwarding
            self._reroute(t, algo="ecmp", idx=idx[~self.routed[idx]])
        self.active[idx] = True
        self.rem[idx] = self.s.bytes[idx]
        self.fstart[idx] = t
        self._mark(idx)

    # -- main loop ------------------------------------------------------------------------------------------
    def run(self, ideal) -> SimResult:
        """Jump from event to event until every job has run all its iterations."""
        wall0 = time.perf_counter()
        self._reset(ideal)
        self._schedule_start()
        t = 0.0
        while self.done_jobs < len(self.s.jobs):
            t, finished = self._advance(t)
            self.events += 1
            if finished is not None:
                self._complete(t, finished)
            self._timed_events(t)
        self.progress.close()
        return self._result(t, wall0)

    def _reset(self, ideal) -> None:
        """Fresh per-run state: every slot idle and unrouted, every job before its start."""
        s = self.s
        n, n_jobs = s.n, len(s.jobs)
        self.active = np.zeros(n, dtype=bool)
        self.rem = np.zeros(n)
        self.rate = np.zeros(n)
        self.fstart = np.zeros(n)
        self.routed = np.zeros(n, dtype=bool)
        self.links = [None] * n
        self.live = np.zeros(n_jobs, dtype=bool)  # started and not yet finished its last iteration
        self.communicating = np.zeros(n_jobs, dtype=bool)  # in its communication phase
        self.pending = np.zeros(s.n_rings, dtype=np.int64)
        self.ring_step = np.zeros(s.n_rings, dtype=np.int64)
        self.rings_left = np.zeros(n_jobs, dtype=np.int64)
        self.iteration = np.zeros(n_jobs, dtype=np.int64)
        self.comm_start = np.zeros(n_jobs)
        self.iter_start = np.zeros(n_jobs)
        self.controller_ms, self.recompute_times, self.max_load, self.recompute_flows = [], [], [], []
        self.proved_optimal = []
        self.cut_by_clock: list[bool] = []
        self.dirty = False
        self.dirty_comps = set()
        # max-min rates of a set of active flows depend only on that set and its paths: memoised per set (the
        # same ring phases recur every iteration), cleared whenever a re-route changes a path
        self.rate_cache = {}
        self.comp = np.full(n, -1)
        self.comp_members = {}
        if self.static is not None:
            self.links = list(self.static.links)
            self.routed[:] = True
            self.caps = self.static.capacities * self.bps
            self._components()
        else:
            self.caps = self.router.capacities * self.bps
        self.results = [JobResult(j.name, j.kind, j.model, j.ring_size, len(j.rings), j.start_s,
                                  ideal.get(j.name, float("nan"))) for j in s.jobs]
        self.fcts, self.tputs = [], []
        self.steps_done = self.events = self.rate_computations = self.done_jobs = 0
        self.reroute_due = False  # a job ended its communication (events model): decide at this instant
        self.heap = []  # (time, Event, seq, payload): at one instant the Event order decides, then push order
        self.seq = 0

    def _push(self, at: float, event: Event, payload=None) -> None:
        heapq.heappush(self.heap, (at, event, self.seq, payload))
        self.seq += 1

    def _schedule_start(self) -> None:
        for j, job in enumerate(self.s.jobs):
            self._push(job.start_s, Event.ITERATION_START, j)
        for f in self.failures:
            self._push(f.time_s, Event.FAILURE, f)
        if self.mode == "period" and self.static is None:
            self._push(0.0, Event.PERIOD)

    def _advance(self, t: float):
        """Move time to the next event (the earliest completion or timed event) and drain the active flows
        until then. Returns (new time, the slots that completed then or None)."""
        s = self.s
        act = np.flatnonzero(self.active)
        if self.dirty or self.dirty_comps:
            self.rate_computations += self._rates()
        t_fin = math.inf
        fin = None
        if len(act):
            ra = self.rate[act]
            if np.any(ra <= 0):
                if not self.heap:
                    bad = act[ra <= 0][0]
                    f = s.flows[bad]
                    raise SimulationError(f"flow {f.src}->{f.dst} of {f.job} gets no bandwidth "
                                          f"(its path crosses a failed or zero-capacity link)")
                fin = np.full(len(act), math.inf)
                pos = ra > 0
                fin[pos] = t + self.rem[act[pos]] / ra[pos]
            else:
                fin = t + self.rem[act] / ra
            t_fin = float(fin.min())
        t_evt = self.heap[0][0] if self.heap else math.inf
        if t_fin == math.inf and t_evt == math.inf:
            raise SimulationError("simulation stalled: no active flow and no pending event")
        t_next = min(t_fin, t_evt)
        if len(act):
            self.rem[act] -= self.rate[act] * (t_next - t)
        # completions within a relative tolerance form one event (lock-stepped rings end together)
        if len(act) and t_fin <= self._due(t_next):
            return t_next, act[fin <= self._due(t_next)]
        return t_next, None

    def _due(self, t: float) -> float:
        return t * (1 + self.REL_TOL) + 1e-15

    def _complete(self, t: float, done: np.ndarray) -> None:
        """Transfers that ended at ``t``: rings whose step is complete start the next step; a job whose rings
        are all done ends its communication (and its iteration)."""
        s = self.s
        self.active[done] = False
        self.rem[done] = 0.0
        self.rate[done] = 0.0
        self._mark(done)
        fct = t - self.fstart[done]
        self.fcts.append(fct)
        self.tputs.append(s.bytes[done] * 8.0 / fct / 1e9)
        rings, counts = np.unique(s.ring_of[done], return_counts=True)
        self.pending[rings] -= counts
        for ring in rings[self.pending[rings] == 0]:
            ring = int(ring)
            self.steps_done += 1
            self.ring_step[ring] += 1
            j = int(s.ring_job[ring])
            if self.ring_step[ring] < s.ring_steps[ring]:
                self._start_ring_step(t, ring)
                continue
            self.rings_left[j] -= 1
            if self.rings_left[j] == 0:
                self._end_communication(t, j)
        self.progress.update(self.steps_done)

    def _end_communication(self, t: float, j: int) -> None:
        self.results[j].iterations.append({
            "iteration": int(self.iteration[j]),
            "start_s": float(self.iter_start[j]),
            "comm_start_s": float(self.comm_start[j]),
            "allreduce_s": float(t - self.comm_start[j]),
        })
        self.communicating[j] = False
        if self.mode == "events" and self.static is None:
            self.reroute_due = True  # the fabric it leaves may serve the others better
        self.iteration[j] += 1
        if self.iteration[j] < self.s.jobs[j].iterations:
            self._push(t, Event.ITERATION_START, j)
        else:
            self.results[j].end_s = float(t)
            self.live[j] = False
            self.done_jobs += 1

    def _timed_events(self, t: float) -> None:
        """Every timed event due at ``t``, then at most one decision for the instant, then the communication
        phases that start now (so a decision taken at a communication start is in place for its flows)."""
        s = self.s
        reroute, self.reroute_due = self.reroute_due, False
        starting = []
        decide_at_comm = self.mode in ("comm-start", "events") and self.static is None
        while self.heap and self.heap[0][0] <= self._due(t):
            _, event, _, payload = heapq.heappop(self.heap)
            if event is Event.FAILURE:
                if self.static is None:
                    self._apply_failure(payload)
                    reroute = True
            elif event is Event.ITERATION_START:
                self.live[payload] = True
                self.iter_start[payload] = t
                reroute |= self.static is None and self.mode == "iteration"
                self._push(t + s.jobs[payload].compute_s, Event.COMM_START, payload)
            elif event is Event.COMM_START:
                self.comm_start[payload] = t
                self.communicating[payload] = True
                starting.append(payload)
                reroute |= decide_at_comm
            elif event is Event.PERIOD:
                if self.done_jobs < len(s.jobs):
                    reroute = True
                    self._push(t + self.period_s, Event.PERIOD)
        if reroute:
            self._reroute(t, idx=self._decision_slots())
        for j in starting:
            rings = s.job_rings[j]
            self.rings_left[j] = len(rings)
            self.ring_step[rings] = 0
            for ring in rings:
                self._start_ring_step(t, int(ring))

    def _decision_slots(self) -> np.ndarray:
        """The flows a decision routes: those of the jobs communicating now (events model: the controller
        sees which jobs are in their communication phase), else every running job's flows."""
        jobs = self.communicating if self.mode == "events" else self.live
        return np.flatnonzero(jobs[self.s.job_of])

    def _result(self, t: float, wall0: float) -> SimResult:
        return SimResult(
            algo=self.algo,
            mode=self.mode,
            jobs=self.results,
            fct_s=np.concatenate(self.fcts) if self.fcts else np.zeros(0),
            throughput_gbps=np.concatenate(self.tputs) if self.tputs else np.zeros(0),
            controller_ms=self.controller_ms,
            recompute_times_s=self.recompute_times,
            max_link_load=self.max_load,
            recompute_flows=self.recompute_flows,
            proved_optimal=self.proved_optimal,
            cut_by_clock=self.cut_by_clock,
            makespan_s=float(t),
            events=self.events,
            rate_computations=self.rate_computations,
            wall_s=time.perf_counter() - wall0,
        )
