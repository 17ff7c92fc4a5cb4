"""The traffic-engineering step: elephants + fabric -> optimiser -> (hysteresis) -> pinned paths -> rules.

The decision is a value exchange: :func:`decide` takes a :class:`TEInput` (the fabric, the elephants, the jobs,
the pins in force, the settled record, the settings) and answers a :class:`TEDecision` (the result and its
reports, the new pins or "unchanged", the fabric identity it was computed for), a pure function that runs in
the optimiser's worker (optimiser_runner.py) or in-process alike. :class:`TrafficEngineer` holds the one pin
table (the core's) and takes decisions over; the core then plans the rules of the pins in force
(``controller.desired.te_rules``) into the switches' desired state. Design choices, and why:

* Every elephant is pinned once known: ECMP's real choice for an unpinned flow is a switch-internal hash the
  controller cannot see, so "leave it where it is" is not a known state. Before/after reports show ECMP's
  behaviour by the routing core's per-flow hash, labelled as an estimate.
* Never worse than what runs: a new routing, the first decision included, is applied only if it is at least as
  good as the routing in force (ECMP's estimate for flows not pinned) in the configured leximin order; an
  optimiser that proposes worse (edge-colouring on a k=16 fat-tree's first decision: max link load 2 -> 5) is
  logged and ignored.
* Repair before re-routing: when pins broke (a failure) or newcomers arrived, the candidate that keeps every pin
  still valid and places only the others (mlroute.routing.repair) is applied unless the optimiser's routing is
  materially better (a lower max link load, or a higher minimum rate): one failed link under 10k pins on a k=16
  fat-tree moved 97 % of them. The decision a failure asks for (``TEInput.incremental``), beside
  ``PLACE_BESIDE_FROM`` flows, takes that candidate without the search when no worse than what runs
  (``REPAIRED``), and the core asks for the full search as the next decision (the broken elephants move in a
  third of the time: k=16 under 10k pins 520 -> 220 ms).
* A job's arrival is decided from the routing in force (``TEInput.incremental``, asked by job events): when
  every pin still holds and the only change is newcomers (or ended flows), the newcomers are placed on links
  with room for their non-blocking rates (no pin moves) and that is taken without the full search when
  certified (mlroute.routing.arrival: every newcomer at its non-blocking rate, and no placement keeping the
  pins does better). Otherwise (a collision: two 8-host rings on a k=4 fat-tree; a fabric full at the
  non-blocking rates) the full decision runs, as the periodic one always does, so the routing in force can
  still improve; but beside ``PLACE_BESIDE_FROM`` flows, where that search takes 0.5 s and more, the newcomers
  are placed where they overfill least and that is taken when no worse than what runs (``PLACED``): the job's
  rules go out at once, and the core asks for the full search as the next decision.
* Hysteresis: once all elephants are pinned on live paths, a new routing is applied only if it is strictly
  better; ties keep the installed routing, so nothing flaps.
* Declared jobs' sends (controller.state.jobs.HostPair) are routed like elephants before their first packet; a
  transport flow of a pinned pair follows the pair's path, so it takes the pair's place without moving.
* A settled decision is not re-run: when the optimiser searched to the end (or to its work budget: counted
  work, so the same again) and found nothing better than the routing in force, or the routing applied is the
  optimiser's own and it says it would return it again from itself (mlroute's ``fixpoint``), the next period
  with the same inputs (fabric, elephants, demands, jobs) and the same pins gets the same answer without the
  search (at 10k elephants that search is 0.3-2 s of CPU every period).
* An elephant's route is fixed by exact 5-tuple rules on its upward hops only (``controller.desired.te_rules``): the
  ingress rule's action picks the first hop, one more rule per upper tier below the top; the top switch (spine /
  core) has one way down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field, replace
from typing import Any, cast

import networkx as nx
import numpy as np

from controller.desired.te_rules import Path, RouteKey
from controller.state.jobs import HostPair
from controller.state.tiers import TierInference
from controller.state.topology import Topology
from mlroute.routing import arrival, metric
from mlroute.routing.demand import estimate_demands, estimate_pair_demands
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import Problem, Routing
from mlroute.routing.optimisers import optimise as run_optimiser
from mlroute.routing.repair import repair_choice
from mlroute.tolerances import ABS_TOL, REL_TOL

__all__ = ["ARRIVAL", "KEPT", "PLACED", "REPAIRED", "SEARCH_NEXT", "SETTLED", "Path", "RouteKey", "Settled",
           "TEDecision", "TEInput", "TEResult", "TESettings", "TrafficEngineer", "decide", "fabric_from_topology",
           "in_force"]

LOG = logging.getLogger("mlroute.te")

def fabric_from_topology(topology: Topology, tiers: TierInference | None, host_bps: float,
                         fabric_bps: float, graph: nx.Graph | None = None) -> Fabric | None:
    """The routing core's Fabric for the live learned topology, or None when it is not a Clos. ``graph``: the
    topology's live graph when the caller has it (built again otherwise: 16 ms at k=24, on the event loop)."""
    if tiers is None or not tiers.is_clos:
        return None
    graph = topology.graph() if graph is None else graph
    hosts = {h.ip: h.dpid for h in topology.hosts.values() if h.dpid in graph}
    return Fabric.from_graph(graph, hosts, capacity=fabric_bps, host_capacity=host_bps, tiers=tiers.tiers)


@dataclass
class TEResult:
    applied: bool
    moved: list[RouteKey] = field(default_factory=list)  # FlowKeys whose path changed
    before: dict[str, Any] | None = None  # routing-core report of the routing in force before the step
    after: dict[str, Any] | None = None  # ... and of the routing in force after it
    runtime_s: float = 0.0
    elephants: int = 0
    reason: str = ""
    # the demand fractions the step estimated (``step(estimate=True)``), one per elephant it was given, in order
    demands: tuple[float, ...] | None = None
    # routing-core report of what ECMP alone would give these elephants (estimated by the routing core's hash):
    # with ``after``, what REST (GET /mlroute/routing) and /metrics show, the decision's own
    ecmp: dict[str, Any] | None = None


KEPT = "no improvement: routing kept"
SETTLED = "inputs unchanged since a decision that found nothing better: routing kept"
ARRIVAL = "newcomers placed beside the pins in force at their non-blocking rates: not searched"
PLACED = "newcomers placed beside the pins in force, no worse than before: searching next"
REPAIRED = "broken pins placed beside the ones that hold, no worse than before: searching next"
SEARCH_NEXT = frozenset({PLACED, REPAIRED})  # decisions taken without the search, which the core asks for next
# a job event's newcomers without room (PLACED), or a failure's broken pins (REPAIRED), beside this many flows in
# force are placed rather than searched: at 10k pins the search takes 0.3-0.7 s of CPU, the placement a third or
# less; below it the search costs about what the placement does (k=24 beside 1k pins: 60 ms vs 20-40 ms) and may
# find no collision at all
PLACE_BESIDE_FROM = 2000


@dataclass(frozen=True)
class Settled:
    """A decision the optimiser searched to the end without finding anything better than the routing in force
    (or a routing it returns again from itself): what it was taken on (``inputs``; the pins in force, as the
    keys and paths of the pin table in its order) and its result, handed to the next period. Tuples, not a
    copy of the table: they cross to the optimiser's worker and back every period without re-hashing 10k keys,
    and the same table built in another order only costs a search."""

    inputs: tuple
    keys: tuple
    paths: tuple
    result: TEResult

    @classmethod
    def of(cls, inputs: tuple, pinned: Mapping[RouteKey, Path], result: TEResult) -> Settled:
        return cls(inputs, tuple(pinned), tuple(pinned.values()), result)

    def holds(self, inputs: tuple, pinned: Mapping[RouteKey, Path]) -> bool:
        """Were these the inputs and the pins in force?"""
        return (self.inputs == inputs and len(self.keys) == len(pinned) and self.keys == tuple(pinned)
                and self.paths == tuple(pinned.values()))


@dataclass(frozen=True)
class TESettings:
    """How the traffic engineer decides (config ``te``): the optimiser, its objective, hysteresis, seed and budget."""

    mode: str = "mlroute"
    objective: str = "flow"
    hysteresis: bool = True
    seed: int = 0
    time_limit: float | None = None  # seconds the optimiser may search (config te.time_budget_s)


@dataclass(frozen=True)
class TEInput:
    """Everything one decision is taken on, as a value (it crosses to the optimiser's worker): the fabric (its
    ``identity`` names it), the elephants as (key, demand fraction or None) pairs, the declared jobs and their
    weights, whether to estimate the demands, the pins in force and the settled record, and the settings."""

    fabric: Fabric | None
    elephants: tuple[tuple[RouteKey, float | None], ...]
    jobs: Mapping[str, str]
    weights: Mapping[str, float]
    estimate: bool
    pinned: Mapping[RouteKey, Path]
    settled: Settled | None
    settings: TESettings
    incremental: bool = False  # a job event or a failure: newcomers or broken pins may be placed without the search

    @property
    def identity(self) -> Any:
        """The identity of the fabric the decision is taken on (None: no known Clos)."""
        return None if self.fabric is None else self.fabric.identity


@dataclass(frozen=True)
class TEDecision:
    """What one decision answers, as a value: its result (reports, moved keys, estimated demands), the new pins and
    settled record, or ``unchanged`` (a settled period: the pins and the record in force stand, and 10k pins are
    not sent back), and the identity of the fabric it was computed for."""

    identity: Any
    result: TEResult
    pinned: dict[RouteKey, Path] | None = None  # None when unchanged
    settled: Settled | None = None
    unchanged: bool = False


def decide(task: TEInput, clock: Callable[[], float] = time.perf_counter) -> TEDecision:
    """One traffic-engineering decision: a pure function of ``task`` (nothing it is given is changed), the same
    in the optimiser's worker and in-process. ``clock`` times the optimiser (the result's ``runtime_s``)."""
    step = _Step(task.settings, task.pinned, task.settled, clock, task.incremental)
    result = step.step(task.fabric, task.elephants, task.jobs, task.weights, task.estimate)
    if task.settled is not None and step.settled is task.settled:  # a settled period: nothing moved
        return TEDecision(task.identity, result, unchanged=True)
    return TEDecision(task.identity, result, dict(step.pinned), step.settled)


class TrafficEngineer:
    """The pins in force, the last result and the settled record (the one pin table: the core holds this), and
    the settings: :meth:`input` is what a decision (:func:`decide`, in the optimiser's worker) is taken on, and
    :meth:`take` takes it over."""

    def __init__(self, mode: str = "mlroute", objective: str = "flow", hysteresis: bool = True, seed: int = 0,
                 clock: Callable[[], float] = time.perf_counter, time_limit: float | None = None) -> None:
        self.mode = mode
        self.time_limit = time_limit  # seconds the optimiser may search (config te.time_budget_s)
        self.objective = objective
        self.hysteresis = hysteresis
        self.seed = seed
        self.clock = clock
        self.pinned: dict[RouteKey, Path] = {}  # FlowKey -> path (tuple of dpids, ingress switch first)
        self.last: TEResult | None = None  # last TEResult
        self.settled: Settled | None = None  # the last decision that changed nothing after a complete search

    @property
    def settings(self) -> TESettings:
        return TESettings(self.mode, self.objective, self.hysteresis, self.seed, self.time_limit)

    def input(self, fabric: Fabric | None, elephants: Iterable[tuple[RouteKey, float | None]],
              jobs: Mapping[str, str] | None = None, weights: Mapping[str, float] | None = None,
              estimate: bool = False, incremental: bool = False) -> TEInput:
        """The input of one decision (:func:`decide`) over the pins and the settled record in force.

        ``elephants``: (key, demand fraction or None) pairs, a key being a transport flow (FlowKey) or a declared
        job's host pair (HostPair, routed before its first packet). ``estimate``: the demands given are ignored
        and estimated in the decision from the elephants' hosts (Hedera's estimator, in the optimiser's worker
        rather than the event loop: with them the loop spent 190-230 ms on a new set of 10k elephants at k=16,
        without them 40-75 ms); the result's ``demands`` has them. ``jobs`` maps a host IP to a job name (job
        awareness); with jobs the objective is job-level, and ``weights`` (job name -> weight) weighs jobs in it.
        A new routing replaces the one in force only if it is at least as good in that order (strictly better
        once every elephant is pinned, with hysteresis); a worse one is never applied, first decision included.
        ``incremental``: a job event's decision, which may place newcomers without the full search (``ARRIVAL``).
        """
        return TEInput(fabric, tuple(elephants), dict(jobs or {}), dict(weights or {}), estimate, self.pinned,
                       self.settled, self.settings, incremental)

    def take(self, decision: TEDecision) -> None:
        """A decision's pins and settled record become the ones in force (unless it left them unchanged)."""
        if not decision.unchanged:
            self.pinned = decision.pinned if decision.pinned is not None else {}
            self.settled = decision.settled
        self.last = decision.result


def _flows_on(fabric: Fabric | None, elephants: Sequence[tuple[RouteKey, float | None]], jobs: Mapping[str, str],
              weights: Mapping[str, float]) -> list[Flow]:
    """The elephants between hosts of the fabric, as the routing core's flows (job and weight from the jobs)."""
    return [Flow(k.src_ip, k.dst_ip, demand=d, job=(job := jobs.get(k.src_ip)), key=k,
                 weight=1.0 if job is None else weights.get(job, 1.0)) for k, d in elephants
            if fabric is not None and k.src_ip in fabric.hosts and k.dst_ip in fabric.hosts]


@dataclass(frozen=True)
class _Round:
    """One decision's view of what runs now (``_Step._in_force``)."""

    fabric: Fabric
    flows: list[Flow]
    keys: list[RouteKey]
    problem: Problem
    current: list  # each flow's path in force: its valid pin, else ECMP's estimate
    valid: list[bool]  # the flow's pin holds
    newcomer: np.ndarray  # the flow has no pin at all (nor its host pair)
    current_choice: Any
    objective: str
    job_list: Any
    ideal: Any  # the flows' non-blocking rates
    r_current: Any
    before: dict
    ecmp_report: dict

    @property
    def all_valid(self) -> bool:
        """No unpinned newcomer and no path through a failed element."""
        return all(self.valid)


@dataclass(frozen=True)
class _Proposal:
    """A routing proposed to replace what runs, assessed (``order``: its comparison with what runs)."""

    routing: Routing
    runtime: float
    new: list
    same: bool  # the same paths as what runs
    r_new: Any
    proposed: dict
    order: int


class _Step:
    """One decision's working state (:func:`decide` makes one per decision): the pins and the settled record it
    starts from, replaced (never changed in place) as it decides."""

    def __init__(self, settings: TESettings, pinned: Mapping[RouteKey, Path], settled: Settled | None,
                 clock: Callable[[], float], incremental: bool = False) -> None:
        self.mode, self.objective, self.hysteresis = settings.mode, settings.objective, settings.hysteresis
        self.seed, self.time_limit, self.clock = settings.seed, settings.time_limit, clock
        self.pinned: Mapping[RouteKey, Path] = pinned
        self.settled = settled
        self.incremental = incremental
        self.last: TEResult | None = None

    def step(self, fabric: Fabric | None, elephants: Iterable[tuple[RouteKey, float | None]],
             jobs: Mapping[str, str], weights: Mapping[str, float], estimate: bool) -> TEResult:
        demands = None
        elephants = list(elephants)
        if estimate:
            demands = tuple(estimate_pair_demands([(k.src_ip, k.dst_ip) for k, _ in elephants]).tolist())
            elephants = [(k, d) for (k, _), d in zip(elephants, demands)]
        result = self._step(fabric, elephants, jobs, weights, demands)
        if demands is not None:
            self.last = result = replace(result, demands=demands)
        return result

    def _step(self, fabric: Fabric | None, elephants: Sequence[tuple[RouteKey, float | None]],
              jobs: Mapping[str, str], weights: Mapping[str, float],
              estimated: tuple[float, ...] | None = None) -> TEResult:
        """``estimated``: the natural demands of all of ``elephants`` when ``step`` estimated them (the reports'
        non-blocking rates, when every elephant is on the fabric: estimated once per decision). The steps: the
        elephants on the fabric, a settled decision held, the routing in force, newcomers placed without the
        search (a job event's, when they collide with nothing), the optimiser's proposal, the repair candidate
        beside it, acceptance, commit."""
        flows = _flows_on(fabric, elephants, jobs, weights)
        if not flows:
            self.pinned, self.settled = {}, None
            self.last = TEResult(False, elephants=0, reason="no elephants on a known Clos")
            return self.last
        assert fabric is not None  # flows are only taken on a known fabric
        inputs = (fabric.identity, tuple(f.key for f in flows), tuple(f.demand for f in flows),
                  tuple(sorted(jobs.items())), tuple(sorted(weights.items())), self.mode, self.objective,
                  self.hysteresis, self.seed, self.time_limit)
        held = self._settled_holds(inputs)
        if held is not None:
            return held
        now = self._in_force(fabric, flows, estimated if len(flows) == len(elephants) else None)
        if self.mode == "ecmp":
            self.pinned = {}
            self.last = TEResult(False, [], now.before, now.before, 0.0, len(flows), "ecmp mode: no re-optimisation",
                                 ecmp=now.ecmp_report)
            return self.last
        placed = (self._repaired(now) or self._arrival(now)) if self.incremental else None
        if placed is not None:
            return placed
        proposal = self._repair_candidate(now, self._optimise(now))
        kept = self._acceptance(now, proposal, inputs)
        return kept if kept is not None else self._commit(now, proposal, inputs)

    def _settled_holds(self, inputs: tuple) -> TEResult | None:
        """The last decision settled on these very inputs and pins: it holds, nothing is searched."""
        settled, self.settled = self.settled, None
        if settled is None or not settled.holds(inputs, self.pinned):
            return None
        self.settled = settled
        self.last = replace(settled.result, runtime_s=0.0, reason=SETTLED)
        return self.last

    def _in_force(self, fabric: Fabric, flows: list[Flow], estimated: tuple[float, ...] | None) -> _Round:
        """What runs now, assessed: the valid pins (a new transport flow of a pinned host pair follows the pair's
        path), ECMP's estimate for the rest; ended elephants and pins through failed elements are dropped (their
        traffic is on ECMP's groups)."""
        keys = cast("list[RouteKey]", [f.key for f in flows])
        problem = Problem(fabric, flows)  # flows resolved to candidate paths once, for both optimisers
        ecmp = run_optimiser("ecmp", fabric, problem, seed=self.seed)
        pins = _pins(flows, self.pinned)
        current, valid, current_choice = in_force(problem, pins, ecmp)
        self.pinned = {k: tuple(p) for k, p, ok in zip(keys, current, valid) if ok and p is not None}
        objective = "job" if any(f.job for f in flows) else self.objective
        # the reports' non-blocking rates: the estimate made in ``step`` when it was of these very flows
        ideal = np.array(estimated) if estimated is not None else estimate_demands(flows)
        r_current, before = metric.assess(fabric, flows, current, objective, ideal=ideal,
                                          links=problem.incidences(current_choice))
        # ECMP's own report: the routing in force when nothing is pinned, else assessed once here (in the worker,
        # not for every REST read and scrape)
        ecmp_report = before if not any(valid) else metric.assess(
            fabric, flows, ecmp.paths, objective, ideal=ideal,
            links=None if ecmp.choice is None else problem.incidences(ecmp.choice))[1]
        newcomer = np.fromiter((p is None for p in pins), dtype=bool, count=len(pins))
        return _Round(fabric, flows, keys, problem, current, valid, newcomer, current_choice, objective,
                      metric.job_groups(metric.job_labels(flows)) if objective == "job" else None, ideal, r_current,
                      before, ecmp_report)

    def _arrival(self, now: _Round) -> TEResult | None:
        """Newcomers beside pins that all hold (nothing broke), placed on links with room for their
        non-blocking rates (mlroute.routing.arrival; no pin moves), taken without the full search when certified
        as good as any placement keeping the pins (``ARRIVAL``). Without room for every newcomer, beside at least
        ``PLACE_BESIDE_FROM`` flows, the placement is taken when it is no worse than what runs (``PLACED``: the
        newcomers were on ECMP's groups), and a full decision follows at once. Else None: the full decision runs."""
        valid = np.asarray(now.valid, dtype=bool)
        if not valid.any() or valid.all() or not (valid | now.newcomer).all():
            return None
        t0 = self.clock()
        relaxed = arrival.relaxed_rates(now.problem, now.current_choice, now.newcomer)
        choice, fits = arrival.place_beside(now.problem, now.current_choice, now.newcomer, relaxed)
        if not fits and len(now.flows) < PLACE_BESIDE_FROM:
            return None  # a small fabric: the full search costs about what this would, and may avoid the collision
        changed = np.flatnonzero(now.newcomer).tolist()
        new = list(now.current)
        for i in changed:
            new[i] = now.problem.sets[i].path(int(choice[i])) if choice[i] >= 0 else None
        r_new, after = metric.assess(now.fabric, now.flows, new, now.objective, ideal=now.ideal,
                                     links=now.problem.incidences(choice))
        certified = fits and arrival.certified(r_new, relaxed, now.newcomer)
        if not certified and len(now.flows) < PLACE_BESIDE_FROM:
            return None
        if metric.compare(r_new, now.r_current, now.job_list, now.objective) < 0:
            return None  # (the job order is checked: the certificate is the flow order's)
        return self._placed(now, new, changed, after, t0, ARRIVAL if certified else PLACED)

    def _repaired(self, now: _Round) -> TEResult | None:
        """Pins broke (a failure; newcomers may have come too), beside at least ``PLACE_BESIDE_FROM`` flows: the
        pins that hold stay, only the others are placed (mlroute.routing.repair), taken without the search when
        no worse than what runs (``REPAIRED``; the core asks for the full search as the next decision: at 10k pins
        on a k=16 fat-tree it took 0.6-1 s before the broken elephants moved). Else None."""
        valid = np.asarray(now.valid, dtype=bool)
        if len(now.flows) < PLACE_BESIDE_FROM or not valid.any() or (valid | now.newcomer).all():
            return None
        t0 = self.clock()
        fixed, r_fix, after, order = self._repair(now)
        if order < 0:
            return None
        return self._placed(now, fixed, np.flatnonzero(~valid).tolist(), after, t0, REPAIRED)

    def _repair(self, now: _Round) -> tuple[list, Any, dict, int]:
        """The pins that hold, with only the other flows placed (mlroute.routing.repair), from the choice in
        force: (its paths, their rates, their report, its order against what runs)."""
        choice = repair_choice(now.problem, now.current_choice, np.asarray(now.valid, dtype=bool))
        fixed = now.problem.paths(choice)
        r_fix, report = metric.assess(now.fabric, now.flows, fixed, now.objective, ideal=now.ideal,
                                      links=now.problem.incidences(choice))
        return fixed, r_fix, report, metric.compare(r_fix, now.r_current, now.job_list, now.objective)

    def _placed(self, now: _Round, paths: list, changed: list[int], after: dict, t0: float, reason: str) -> TEResult:
        """Flows ``changed`` pinned on their ``paths`` beside the pins in force, without the search (``reason``:
        ARRIVAL, PLACED or REPAIRED); the next decision searches from here."""
        routed = [i for i in changed if paths[i] is not None]
        self.pinned = {**self.pinned, **{now.keys[i]: tuple(paths[i]) for i in routed}}
        self.settled = None
        self.last = TEResult(True, [now.keys[i] for i in routed], now.before, after, self.clock() - t0,
                             len(now.flows), reason, ecmp=now.ecmp_report)
        return self.last

    def _optimise(self, now: _Round) -> _Proposal:
        """The optimiser's routing, assessed against what runs. It keeps flows on the paths known to carry them
        (valid pins); ECMP's estimate is no such path (the switch's hash is not the routing core's), so newcomers
        are placed freely."""
        t0 = self.clock()
        previous = [c if ok else None for c, ok in zip(now.current, now.valid)] if any(now.valid) else None
        routing = run_optimiser(self.mode, now.fabric, now.problem, seed=self.seed, objective=now.objective,
                                previous=previous, time_limit=self.time_limit)
        runtime = self.clock() - t0
        new = [p if p is not None else c for p, c in zip(routing.paths, now.current)]
        same = _same_paths(new, now.current)
        if same:  # the steady state: the optimiser kept what runs, so its report is known
            r_new, proposed = now.r_current, deepcopy(now.before)
        else:  # the optimiser's own rates when it routed every flow (else some flows keep their current path)
            known = routing.rates if all(p is not None for p in routing.paths) else None
            links = None if routing.choice is None else \
                now.problem.incidences(np.where(routing.choice >= 0, routing.choice, now.current_choice))
            r_new, proposed = metric.assess(now.fabric, now.flows, new, now.objective, ideal=now.ideal, rates=known,
                                            links=links)
        order = metric.compare(r_new, now.r_current, now.job_list, now.objective)
        return _Proposal(routing, runtime, new, same, r_new, proposed, order)

    def _repair_candidate(self, now: _Round, proposal: _Proposal) -> _Proposal:
        """Pins broke or newcomers came: the pins that still hold, with only the others placed, unless the
        optimiser's routing is materially better (churn: one failed link made it move 97 % of 10k pins)."""
        if now.all_valid or not any(now.valid) or proposal.same:
            return proposal
        fixed, r_fix, repaired, order_fix = self._repair(now)
        if order_fix >= 0 and (proposal.order < 0 or not _materially_better(proposal.proposed, repaired)):
            return replace(proposal, new=fixed, r_new=r_fix, proposed=repaired, order=order_fix)
        return proposal

    def _acceptance(self, now: _Round, proposal: _Proposal, inputs: tuple) -> TEResult | None:
        """The routing in force kept (its result), or None: the proposal goes in. Never worse than what runs
        (ECMP's estimate for what is not pinned); with hysteresis, only a better objective moves what runs."""
        before, runtime, n = now.before, proposal.runtime, len(now.flows)
        if proposal.order < 0:
            LOG.info("te: %s routing rejected, worse than the routing in force: max link load %s -> %s, "
                     "min rate %.3g -> %.3g", self.mode, before["max_link_load"], proposal.proposed["max_link_load"],
                     before["min_rate"], proposal.proposed["min_rate"])
            return self._kept(TEResult(False, [], before, before, runtime, n, "worse than the routing in force: kept",
                                       ecmp=now.ecmp_report), inputs, proposal.routing.info)
        if now.all_valid and self.hysteresis and proposal.order == 0:
            return self._kept(TEResult(False, [], before, before, runtime, n, KEPT, ecmp=now.ecmp_report),
                              inputs, proposal.routing.info)
        return None

    def _commit(self, now: _Round, proposal: _Proposal, inputs: tuple) -> TEResult:
        """The proposal is the routing in force: its pins (an unroutable flow, with no live path at all, is left
        unpinned: ECMP's groups are all it has), and settled when the optimiser returns it from itself."""
        new = proposal.new
        pinned = self.pinned
        moved = [k for k, p in zip(now.keys, new) if p is not None and (not pinned or pinned.get(k) != tuple(p))]
        self.pinned = {k: tuple(p) for k, p in zip(now.keys, new) if p is not None}
        after, runtime, n = proposal.proposed, proposal.runtime, len(now.flows)
        reason = "new or broken paths" if not now.all_valid else "better objective"
        self.last = TEResult(True, moved, now.before, after, runtime, n, reason, ecmp=now.ecmp_report)
        if self.hysteresis and proposal.routing.info.get("fixpoint") and new == proposal.routing.paths \
                and None not in new:
            # the optimiser's own routing, which it returns again from itself on these inputs: the next period
            # with the same inputs (every elephant pinned) would search only to keep it (~1 s at 10k elephants)
            self.settled = Settled.of(inputs, self.pinned, TEResult(False, [], after, after, runtime, n, KEPT,
                                                                    ecmp=now.ecmp_report))
        return self.last

    def _kept(self, result: TEResult, inputs: tuple, info: Mapping[str, Any]) -> TEResult:
        """The routing in force stays: the result, remembered as settled when the search ran to its end, or was
        stopped by its work budget alone (counted work, not the clock: the same inputs and pins give the same
        search and the same answer again; at 10k elephants on a k=16 fat-tree every search is cut by work, and
        before this every period searched again for nothing, ~300 ms of CPU each)."""
        self.last = result
        if info.get("search_complete") or info.get("cut_by_clock") is False:
            self.settled = Settled.of(inputs, self.pinned, result)
        return result


def _pins(flows: Sequence[Flow], pinned: Mapping[RouteKey, Sequence[int]]) -> list[Sequence[int] | None]:
    """Each flow's pin, or its host pair's (which its packets follow), or None."""
    if not pinned:  # a new set of elephants: nothing to look up (10k keys and host pairs hashed: 7 ms)
        return [None] * len(flows)
    # the controller's flows carry their RouteKey as ``key`` and host IPs as ``src`` / ``dst``
    return [pinned[cast(RouteKey, f.key)] if f.key in pinned
            else pinned.get(HostPair(cast(str, f.src), cast(str, f.dst))) for f in flows]


def in_force(problem: Problem, pins: Sequence[Sequence[int] | None],
             fallback: Routing) -> tuple[list[Sequence[int] | None], list[bool], np.ndarray]:
    """The routing that actually carries ``problem``'s flows: each flow's pin (``_pins``: its own, else its host
    pair's, which a transport flow's packets follow) where it is still valid, else its ``fallback`` path (ECMP's
    estimate, a Routing of the same problem). Returns (paths, valid flags, the choice vector of those paths: each
    pin's option looked up once)."""
    index = [ps.index_of(p) if p is not None else -1 for ps, p in zip(problem.sets, pins)]
    valid = [i >= 0 for i in index]
    paths = [p if ok else e for p, ok, e in zip(pins, valid, fallback.paths)]
    assert fallback.choice is not None
    return paths, valid, np.where(np.array(index, dtype=np.int64) >= 0, index, fallback.choice)


def _materially_better(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Is report ``a``'s routing better than ``b``'s where it shows: a lower max link load, or at the same load a
    higher minimum rate (beyond the metric's tolerance)? Finer leximin gains do not pay for moving elephants."""
    if a["max_link_load"] != b["max_link_load"]:
        return bool(a["max_link_load"] < b["max_link_load"])
    return bool(a["min_rate"] > b["min_rate"] * (1 + REL_TOL) + ABS_TOL)


def _same_paths(a: Sequence[Sequence[int] | None], b: Sequence[Sequence[int] | None]) -> bool:
    """Whether two routings put every flow on the same path (an unroutable flow: ``None`` in both)."""
    return len(a) == len(b) and all(p is q or (p is not None and q is not None and tuple(p) == tuple(q))
                                    for p, q in zip(a, b))
