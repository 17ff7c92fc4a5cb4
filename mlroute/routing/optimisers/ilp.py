"""Exact min max-link-load routing (the authors' ILP baseline) with scipy's HiGHS MILP solver.

    minimise alpha  s.t.  sum_p x[f,p] = 1 for every flow f (one candidate path; failed elements have no
                          candidate), sum of x[f,p] over paths p through link l <= alpha for every link l,
                          x binary.

Budget: at most ``NODE_LIMIT`` branch-and-bound nodes (HiGHS is deterministic, so the same instance gives the
same answer on any machine at any load); ``time_limit`` (seconds, default 60) is only a safety net, and an answer
it cut short says so (``info["cut_by_clock"]``, logged).  ``info["proved_optimal"]`` says whether HiGHS proved
optimality; ``info["lower_bound"]`` is its proven bound on alpha (rounded up: alpha is integral), and
``info["max_link_load"]`` the load of the returned routing.  If HiGHS finds no feasible solution within its
budget, the greedy's routing is returned (``info["fallback"] = "greedy"``).
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.greedy import greedy_choice
from mlroute.tolerances import SOLVER_TOL

DEFAULT_TIME_LIMIT = 60.0
#: branch-and-bound nodes HiGHS may solve: the work budget that decides the answer.
NODE_LIMIT = 2_000
LOG = logging.getLogger("mlroute.routing")


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    choice = prob.initial_choice()
    idx = prob.inter
    if not len(idx):
        return prob.routing(choice, "ilp", objective, proved_optimal=True, lower_bound=0, max_link_load=0,
                            cut_by_clock=False)
    rows_eq, cols_eq, rows_ld, cols_ld, starts = [], [], [], [], []
    nvar = 0
    for j, i in enumerate(idx.tolist()):
        opts = prob.option_links(i)
        p = len(opts)
        starts.append(nvar)
        rows_eq.extend([j] * p)
        cols_eq.extend(range(nvar, nvar + p))
        for q in range(p):
            for link in opts[q].tolist():
                if link != prob.dummy:
                    rows_ld.append(link)
                    cols_ld.append(nvar + q)
        nvar += p
    alpha = nvar
    nv = nvar + 1
    a_eq = sparse.csr_matrix((np.ones(len(rows_eq)), (rows_eq, cols_eq)), shape=(len(idx), nv))
    links, row_of = np.unique(np.array(rows_ld, dtype=np.int64), return_inverse=True)
    data = np.ones(len(rows_ld))
    a_ld = sparse.csr_matrix((data, (row_of, cols_ld)), shape=(len(links), nv)).tolil()
    a_ld[:, alpha] = -1.0
    a_ld = a_ld.tocsr()
    c = np.zeros(nv)
    c[alpha] = 1.0
    integrality = np.ones(nv)
    integrality[alpha] = 0
    ub = np.ones(nv)
    ub[alpha] = len(idx)
    res = milp(
        c,
        constraints=[LinearConstraint(a_eq, 1, 1), LinearConstraint(a_ld, -np.inf, 0)],
        integrality=integrality,
        bounds=Bounds(np.zeros(nv), ub),
        options={"time_limit": limit, "node_limit": NODE_LIMIT, "disp": False, "presolve": True},
    )
    cut = res.status == 1 and "time limit" in str(res.message).lower()
    if cut:
        LOG.warning("ilp: stopped by its time limit (%g s) before its node limit: the answer depends on this "
                    "machine's speed and load", limit)
    info = {"status": int(res.status), "message": str(res.message), "time_limit": limit, "node_limit": NODE_LIMIT,
            "cut_by_clock": bool(cut)}
    bound = getattr(res, "mip_dual_bound", None)
    if res.x is None:
        g, ld = greedy_choice(prob)
        info.update(proved_optimal=False, fallback="greedy", max_link_load=int(ld.max()))
        if bound is not None and math.isfinite(bound):
            info["lower_bound"] = int(math.ceil(bound - SOLVER_TOL))
        return prob.routing(g, "ilp", objective, **info)
    x = res.x
    for j, i in enumerate(idx.tolist()):
        p = int(prob.n_opts[i])
        choice[i] = int(np.argmax(x[starts[j]:starts[j] + p]))
    ld = prob.loads(choice)
    max_load = int(ld.max())
    proved = res.status == 0
    info["proved_optimal"] = bool(proved)
    if proved:
        info["lower_bound"] = max_load
    elif bound is not None and math.isfinite(bound):
        info["lower_bound"] = int(math.ceil(bound - SOLVER_TOL))
    info["max_link_load"] = max_load
    return prob.routing(choice, "ilp", objective, **info)
