"""The per-job REST calls (``PUT``, ``DELETE``, ``POST .../renew`` on ``/mlroute/jobs/{name}``) as edits of the
declared job list: a function from the list as it is to the list as it becomes, or ``RefusedError`` (a 4xx).

Pure, so the same edit runs on the core's list (one controller) and inside ZooKeeper's compare-and-set
(``Coordinator.update``, a cluster), where it may run again on a list another node changed meanwhile: each call
touches its own job only, so two jobs declared at once on any nodes both stay. A refused edit changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller import config
from controller.state.job_leases import JobLeases

Jobs = Sequence[Mapping[str, Any]]


class RefusedError(Exception):
    """The call cannot be applied to the list as it is: its HTTP status and a short message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def named(jobs: Jobs, name: str) -> Mapping[str, Any] | None:
    """The job called ``name`` (the first, should a whole-list declaration have repeated it), or None."""
    return next((job for job in jobs if job["name"] == name), None)


def put(jobs: Jobs, job: Mapping[str, Any], lease_s: float | None, leases: JobLeases) -> list[dict[str, Any]]:
    """``job`` (validated) declared with its lease, in place of any job of that name, else last; 409 when the
    list would pass the bounds of a job list (``config.MAX_JOBS`` jobs, ``config.MAX_JOB_HOSTS`` hosts)."""
    entry = leases.granted(job, lease_s)
    out: list[dict[str, Any]] = []
    placed = False
    for old in jobs:
        if old["name"] != job["name"]:
            out.append(dict(old))
        elif not placed:
            out.append(entry)
            placed = True
    if not placed:
        out.append(entry)
    try:
        config.check_job_bounds(out, "jobs")
    except config.ConfigError as exc:
        raise RefusedError(409, f"{exc} (delete a job first)") from None
    return out


def delete(jobs: Jobs, name: str) -> list[dict[str, Any]]:
    """The list without the job ``name``; 404 when there is none."""
    if named(jobs, name) is None:
        raise RefusedError(404, f"no job named {name!r}")
    return [dict(job) for job in jobs if job["name"] != name]


def renew(jobs: Jobs, name: str, leases: JobLeases) -> list[dict[str, Any]]:
    """The job ``name``'s lease running again from now; 404 when there is no such job or its lease has already
    run out (it ends at the next check: the caller declares it again)."""
    job = named(jobs, name)
    if job is None:
        raise RefusedError(404, f"no job named {name!r}")
    if leases.ran_out(job):
        raise RefusedError(404, f"job {name!r}: its lease ran out; declare it again (PUT)")
    return [leases.renewed(j) if j["name"] == name else dict(j) for j in jobs]
