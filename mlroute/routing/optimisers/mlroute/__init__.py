r"""``mlroute``: the project's optimiser -- optimal max link load on 2-tier Clos, never worse than the greedy.

One module per step (the run itself, :func:`optimise`, is here):

1. **Construct** with the paper's greedy (:mod:`mlroute.routing.optimisers.greedy`), so the result starts where
   the paper ends; an intact fat-tree is coloured level by level instead (:mod:`.construct`).
2. **Repair to the optimum on uniform 2-tier fabrics** (any number of failed spines, :mod:`.repair`), see
   :func:`aligned_repair`: a proper Delta-edge-colouring of the ToR multigraph (Konig) with colour
   c = layer * S + spine puts at most ceil(Delta/S) flows on every link -- the lower bound, since a ToR with
   Delta flows has S live uplinks -- and the links at that load only on the same few spines for every ToR, so
   overloaded uplinks and downlinks line up on the same flows.  The greedy's assignment seeds the colouring;
   only flows that do not fit are inserted by alternating paths.  (:func:`equitable_repair`, which instead
   balances every ToR on its own, is kept as an alternative: ``REPAIR = "equitable"``.)
3. **Load-vector search** (:mod:`.search`, :func:`local_search`, every fabric): move a flow from path P to
   path Q when ``max over Q\P of (load+1) < max over P\Q of load`` (strictly lowers the sorted load vector, so
   it terminates): fewer links at the maximum, then at the next levels.
4. **Bottleneck search** (:mod:`.bottleneck`, :func:`bottleneck_search`, uniform 2-tier): with the max load
   fixed, fewer flows crossing a link at the max (the flows held at the lowest rate).
5. **Polishing in the metric** (:mod:`.polish`, :func:`polish`, :func:`exhaustive_descent`): moves that the exact
   water-filling says are leximin-better (flow- or job-level), slowest flows first; skipped where provably
   useless (one flow per NIC, max load <= 2 on a uniform 2-tier fabric).
6. **Verify** with the metric: the result is compared with the greedy's (leximin, per ``objective``) and the
   better routing is returned -- so ``mlroute`` is never worse than ``greedy``, by construction.
7. ``previous`` paths (:mod:`.stable`): on a uniform 2-tier fabric spines are interchangeable, so colours are
   relabelled to maximise the flows that keep their spine (a linear assignment); then flows whose previous path
   is still a candidate move back when that does not raise the sorted load vector, and the stabilised routing is
   kept when the metric says it is at least as good.

Steps 3-5 share a budget counted in work (:mod:`.budget`: candidate paths evaluated, flows re-counted, exact
evaluations), which grows with the instance's candidate paths (``budget.work_for``): the same input gives the same
routing on any machine, at any load. ``time_limit`` (seconds; default ``budget.CLOCK_CAP_S``) is only a safety net.
``info`` reports what each step did, ``timing_ms`` per step, ``work`` (units spent) of ``work_budget``,
``cut_by_clock`` (the safety net stopped a step: only then does the routing depend on the machine; logged),
``search_complete`` (no step was cut short, by the work budget or the clock) and ``fixpoint``: run again on the
same inputs with this routing as ``previous``, mlroute would return this routing (a traffic engineer that applied
it need not search the next period on the same inputs; see :func:`_is_fixpoint`).
"""

from __future__ import annotations

import time

import numpy as np

from mlroute.routing.metric import compare, job_groups
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.greedy import greedy_choice
from mlroute.routing.optimisers.mlroute.bottleneck import _bottleneck_screen, bottleneck_search
from mlroute.routing.optimisers.mlroute.budget import Budget, work_for
from mlroute.routing.optimisers.mlroute.construct import fattree_colouring, fattree_structure
from mlroute.routing.optimisers.mlroute.polish import (
    HELPER_MAX_FLOWS,
    HELPER_TRIES,
    MAX_LEVELS_PER_ROUND,
    exhaustive_descent,
    polish,
    rate_levels,
)
from mlroute.routing.optimisers.mlroute.repair import (
    _rank_within,
    _rank_within_reference,
    aligned_repair,
    equitable_repair,
)
from mlroute.routing.optimisers.mlroute.search import SEARCH_BLOCK, local_search
from mlroute.routing.optimisers.mlroute.stable import _is_fixpoint, _keep_previous, _relabel_to_previous, _stabilise

#: what this package offered as one module (``optimisers/mlroute.py``), importable from here as before
__all__ = ["EXHAUSTIVE_LIMIT", "HELPER_MAX_FLOWS", "HELPER_TRIES", "MAX_LEVELS_PER_ROUND", "REPAIR",
           "SEARCH_BLOCK", "_bottleneck_screen",
           "_is_fixpoint", "_rank_within", "_rank_within_reference", "_relabel_to_previous", "_stabilise",
           "aligned_repair", "bottleneck_search", "equitable_repair", "exhaustive_descent", "fattree_colouring",
           "fattree_structure", "local_search", "optimise", "polish", "rate_levels"]


#: instances with at most this many (flow, candidate path) pairs also get an exhaustive single-move descent.
EXHAUSTIVE_LIMIT = 600
#: how uniform 2-tier fabrics are repaired to the optimum: "aligned" (default) or "equitable".
REPAIR = "aligned"


def _one_flow_per_nic(prob: Problem) -> bool:
    n = len(prob.flows)
    return len({f.src for f in prob.flows}) == n and len({f.dst for f in prob.flows}) == n


class _Laps:
    """Milliseconds per named step since the previous one (``info["timing_ms"]``)."""

    def __init__(self, start: float):
        self.timing: dict = {}
        self._mark = start

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timing[name] = round((now - self._mark) * 1e3, 3)
        self._mark = now


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    start = time.perf_counter()
    lap = _Laps(start)
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    budget = Budget(work_for(prob.n_opts[prob.inter].sum()), time_limit, start)  # the caller's limit is from now
    lap("problem")
    g_choice, g_loads = greedy_choice(prob)
    info = {"greedy_max_link_load": int(g_loads.max()) if len(g_loads) else 0}
    lap("greedy")
    bound = prob.degree_bound()
    uniform = bound is not None
    prev = None if previous is None else prob.choice_from_paths(previous)
    choice, constructed = _construct(prob, g_choice, bound, prev, info, lap)
    start = choice
    choice = _search(prob, choice, uniform, budget, info)
    lap("search")
    jobs = job_groups(prob.jobs) if objective == "job" else None  # grouped once for every comparison below
    changed = prev is not None or not np.array_equal(choice, g_choice)
    choice, r_new, loads = _polish_phase(prob, choice, changed, uniform, budget, jobs, objective, info, lap)
    if prev is not None:
        choice, r_new, loads = _keep_previous(prob, choice, r_new, loads, prev, jobs, objective)
        lap("stabilise")
    if not np.array_equal(choice, g_choice):
        r_greedy = prob.rates(g_choice)
        if compare(r_new, r_greedy, jobs, objective) < 0:
            choice, r_new, loads = g_choice, r_greedy, g_loads
            info["kept_greedy"] = True
        lap("verify")
    info["max_link_load"] = int(loads.max()) if len(loads) else 0
    budget.finish()
    info.update(work=budget.spent, work_budget=budget.work, cut_by_clock=budget.cut_by_clock,
                search_complete=budget.complete)  # every phase ended on its own, none was cut short
    info["fixpoint"] = bool(info["search_complete"] and not info.get("kept_greedy")
                            and _is_fixpoint(prob, constructed, start, choice, uniform))
    info["timing_ms"] = lap.timing
    return prob.routing(choice, "mlroute", objective, rates=r_new, **info)


def _construct(prob: Problem, choice: np.ndarray, bound: int | None, prev: np.ndarray | None, info: dict,
               lap: _Laps) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2: the greedy's routing, replaced by the fat-tree colouring where it applies, repaired to the
    optimal max load on a uniform 2-tier fabric (colours relabelled towards ``prev``). Returns (the routing,
    the same before the relabelling)."""
    uniform = bound is not None
    tree = fattree_colouring(prob) if not uniform else None
    if tree is not None:
        choice = tree
        info["construction"] = "fat-tree colouring"
        lap("colouring")
    if uniform:
        choice, reinserted = (aligned_repair if REPAIR == "aligned" else equitable_repair)(prob, choice)
        info["lower_bound"] = bound
        info["repaired_flows"] = reinserted
        constructed = choice
        if prev is not None:
            choice = _relabel_to_previous(prob, choice, prev)
        lap("repair")
        return choice, constructed
    return choice, choice


def _search(prob: Problem, choice: np.ndarray, uniform: bool, budget: Budget, info: dict) -> np.ndarray:
    """Steps 3-4: load-vector search, then (uniform 2-tier) the bottleneck search and a final load-vector pass."""
    if len(prob.inter) and prob.loads(choice).max() <= 1:
        # no link carries two flows: both searches look only at flows on such links, so neither has a move
        info["search_moves"] = 0
        if uniform:
            info["bottleneck_moves"] = 0
        return choice
    choice, moves = local_search(prob, choice, budget)
    info["search_moves"] = moves
    if uniform:
        choice, bmoves = bottleneck_search(prob, choice, budget)
        info["bottleneck_moves"] = bmoves
        if bmoves:  # leave no load-vector move behind (the polishing skip rule relies on it)
            choice, more = local_search(prob, choice, budget)
            info["search_moves"] += more
    return choice


def _polish_phase(prob: Problem, choice: np.ndarray, changed: bool, uniform: bool, budget: Budget, jobs,
                  objective: str, info: dict, lap: _Laps) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Step 5 where it can help: (choice, rates or None when nobody needs them, link loads). ``changed``: the
    routing differs from the greedy's, or there are previous paths (the later steps compare rates then)."""
    mat = prob.link_matrix(choice)
    loads = prob.loads(choice)
    max_load = loads.max(initial=0)
    weighted = jobs is not None and bool((jobs.weight != 1.0).any())  # the proof below is for equal jobs only
    if uniform and prob.demands is None and max_load <= 2 and not weighted and _one_flow_per_nic(prob):
        # Provably nothing for the polishing to find: every NIC carries one flow, so rates are c/2 on the links
        # with two flows and c elsewhere; a flow at c/2 sits on a link of a ToR with more flows than spines,
        # all of whose links carry a flow at >= c/2, so no other spine offers it more than c/2.
        info["polish_skipped"] = True
        return choice, (prob.rates(choice, matrix=mat) if changed else None), loads
    if (prob.demands is not None or max_load > 1) and budget.left():
        # some fabric link is shared: the metric may still improve beyond the load vector
        r_new = prob.rates(choice, matrix=mat)
        cap = int(max_load)
        choice, r_new, pm = polish(prob, choice, r_new, budget, jobs, objective, mat=mat, cap=cap)
        if int(prob.n_opts[prob.inter].sum()) <= EXHAUSTIVE_LIMIT:
            choice, r_new, em = exhaustive_descent(prob, choice, r_new, budget, jobs, objective, cap=cap)
            pm += em
        info["polish_moves"] = pm
        if pm:
            loads = prob.loads(matrix=prob.link_matrix(choice))
        lap("polish")
        return choice, r_new, loads
    return choice, (prob.rates(choice, matrix=mat) if changed else None), loads
