"""Hedera's natural-demand estimator (Al-Fares et al., NSDI'10), as docs/paper.md describes it.

Demands are fractions of host NIC capacity.  Repeat until nothing changes: every sender splits what its
converged flows leave of its NIC equally among its unconverged flows; every oversubscribed receiver (sum of
incoming demand > 1) finds its fair share by repeatedly setting aside the flows below the share (they are
sender-limited), then pins the others at the share and marks them converged.  The fixed point is the max-min
fair allocation on an ideal non-blocking switch ("the non-blocking ideal" of a traffic matrix).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlroute.routing import kernels
from mlroute.tolerances import ABS_TOL


def estimate_demands(flows: Sequence, max_rounds: int = 10_000) -> np.ndarray:
    """Natural demand of every flow (fraction of NIC capacity), in input order.

    ``flows`` are :class:`~mlroute.routing.flow.Flow` objects (only ``src`` and ``dst`` are used: host
    identities).  Worked example: A->X, A->Y, B->Y, C->Y give [2/3, 1/3, 1/3, 1/3] (Y is oversubscribed and
    shares its NIC three ways; A gives what Y leaves it to X):

    >>> from mlroute.routing.flow import Flow
    >>> [round(float(d), 4) for d in estimate_demands([Flow("A", "X"), Flow("A", "Y"), Flow("B", "Y"),
    ...                                                 Flow("C", "Y")])]
    [0.6667, 0.3333, 0.3333, 0.3333]

    The last result is kept: the controller's optimiser worker estimates the same elephants' demands every
    period while they are unchanged (a settled period included). The estimate depends only on which flows share a
    source or a destination (the dictionaries below), so equal (src, dst) sequences give equal results.
    """
    return estimate_pair_demands([(f.src, f.dst) for f in flows], max_rounds)


def estimate_pair_demands(pairs: Sequence[tuple], max_rounds: int = 10_000) -> np.ndarray:
    """:func:`estimate_demands` of flows given as (src, dst) pairs: a caller holding only their hosts need not
    build a Flow per elephant (10k of them: ~9 ms of a TE decision)."""
    global _LAST
    key = (max_rounds, tuple(pairs))
    if _LAST is not None and _LAST[0] == key:
        return _LAST[1].copy()
    demand = _estimate(pairs, max_rounds)
    _LAST = (key, demand.copy())
    return demand


_LAST: tuple[tuple, np.ndarray] | None = None  # (key, demands) of the last estimate


def _estimate(pairs: Sequence[tuple], max_rounds: int) -> np.ndarray:
    n = len(pairs)
    if n and kernels.enabled():
        return kernels.hedera_demands(*_groups([s for s, _ in pairs]), *_groups([d for _, d in pairs]), n,
                                      max_rounds)
    demand = [0.0] * n
    converged = [False] * n
    out_of: dict = {}
    into: dict = {}
    for i, (src, dst) in enumerate(pairs):
        out_of.setdefault(src, []).append(i)
        into.setdefault(dst, []).append(i)
    senders = list(out_of.values())
    receivers = list(into.values())
    for _ in range(max_rounds):
        changed = _senders_pass(senders, demand, converged)
        changed = _receivers_pass(receivers, demand, converged) or changed
        if not changed:
            break
    return np.array(demand, dtype=float)


def _groups(hosts: list) -> tuple[np.ndarray, np.ndarray]:
    """The flows of each host as CSR (starts, members): hosts in order of first appearance, each one's flows in
    input order, as the reference's dictionaries of lists hold them."""
    ids: dict = {}
    gid = np.fromiter((ids.setdefault(h, len(ids)) for h in hosts), dtype=np.int64, count=len(hosts))
    members = np.argsort(gid, kind="stable")
    return np.concatenate(([0], np.cumsum(np.bincount(gid, minlength=len(ids))))), members


def _senders_pass(senders: list[list[int]], demand: list[float], converged: list[bool]) -> bool:
    """Each sender splits what its converged flows leave of its NIC equally over the others; True if any
    demand changed."""
    changed = False
    for fl in senders:
        d_f = 0.0
        n_u = 0
        for i in fl:
            if converged[i]:
                d_f += demand[i]
            else:
                n_u += 1
        if n_u:
            e_s = max(1.0 - d_f, 0.0) / n_u
            for i in fl:
                if not converged[i] and abs(demand[i] - e_s) > ABS_TOL:
                    demand[i] = e_s
                    changed = True
    return changed


def _receivers_pass(receivers: list[list[int]], demand: list[float], converged: list[bool]) -> bool:
    """Each oversubscribed receiver gives its receiver-limited flows an equal share of what the others leave
    (they converge there); True if any demand changed or converged."""
    changed = False
    for fl in receivers:
        d_t = sum(demand[i] for i in fl)
        if d_t <= 1.0 + ABS_TOL:
            continue
        limited = {i: True for i in fl}  # "receiver-limited"
        e_s = _receiver_share(fl, demand, limited)
        for i in fl:
            if limited[i]:
                if abs(demand[i] - e_s) > ABS_TOL or not converged[i]:
                    changed = changed or abs(demand[i] - e_s) > ABS_TOL or not converged[i]
                demand[i] = e_s
                converged[i] = True
    return changed


def _receiver_share(fl: list[int], demand: list[float], limited: dict[int, bool]) -> float:
    """The equal share of a receiver's limited flows, once flows asking less than it are taken out (``limited``
    marks which stay)."""
    n_r = len(fl)
    e_s = 1.0 / n_r
    d_s = 0.0
    while True:
        n_r = 0
        moved = False
        for i in fl:
            if limited[i]:
                if demand[i] < e_s - ABS_TOL:
                    d_s += demand[i]
                    limited[i] = False
                    moved = True
                else:
                    n_r += 1
        if not moved or n_r == 0:
            break
        e_s = (1.0 - d_s) / n_r
    return e_s
