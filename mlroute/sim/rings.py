"""Ring choice for simulated jobs: the same jobs with every all-reduce ring in the order
:func:`mlroute.routing.ring_choice.choose_rings` prefers, so a run can be compared with the rank-order one.

The simulator's rings send member i -> i+1 (:class:`mlroute.workloads.jobs.Job`), so orders are chosen in
direction ``"next"``. A job's rings over the same hosts (GPUs sharing NICs) follow one order, chosen once; rings
over other hosts (replicas of several hosts) are chosen each. The choice is taken once, at launch, all rings
jointly (each with the others as they stand, pipeline chains as other traffic), on the fabric as it is then: a
failure from time 0 is known, a later one (``--fail-at``) is not.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mlroute.routing.fabric import Fabric
from mlroute.routing.ring_choice import choose_rings
from mlroute.workloads.jobs import Job, jobs_to_flows


def choose_job_rings(fabric: Fabric, jobs: Sequence[Job], **kw: Any) -> tuple[list[Job], list[dict]]:
    """(the jobs with chosen rings, one row per distinct ring: job, number of rings following it, and
    :meth:`RingChoice.as_dict`). ``kw`` as for choose_ring (``objective``, ``algo``, ``seed``, ...)."""
    place = {h: t for job in jobs for h, t in job.host_tor.items()}
    others = jobs_to_flows(job for job in jobs if job.kind != "allreduce")
    distinct: dict[str, tuple] = {}  # ring name -> its hosts in rank order
    owner: dict[str, tuple[Job, int]] = {}  # ring name -> (its job, how many of the job's rings it stands for)
    for job in jobs:
        if job.kind != "allreduce":
            continue
        hosts = list(dict.fromkeys(tuple(r) for r in job.rings))
        for i, ring in enumerate(hosts):
            name = job.name if len(hosts) == 1 else f"{job.name}[{i}]"
            distinct[name] = ring
            owner[name] = (job, sum(tuple(r) == ring for r in job.rings))
    choices = choose_rings(fabric, distinct, others, direction="next", place=place, **kw)
    order = {(owner[n][0].name, distinct[n]): list(c.ring) for n, c in choices.items()}
    out = []
    for job in jobs:
        if job.kind == "allreduce":
            job = copy.copy(job)
            job.rings = [order[(job.name, tuple(r))] for r in job.rings]
        out.append(job)
    rows = [{"job": owner[n][0].name, "rings": owner[n][1], **c.as_dict()} for n, c in choices.items()]
    return out, rows
