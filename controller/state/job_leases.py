"""Leases of jobs declared over per-job REST: a job that stops renewing ends, so a crashed job never holds routes.

A job declared with ``lease_s`` carries it in its entry, with ``expires_at`` on this class's clock: a renew moves
``expires_at`` to now + ``lease_s``; once it has passed, the job ends as if deleted (the core removes it, its pins
leave and a decision follows). The lease lives in the entry itself, not in a table beside the job list, so it
travels wherever the list goes: one controller keeps it in the core on ``time.monotonic`` (a wall-clock step
cannot end or prolong a job), a cluster stores the list in ZooKeeper with wall-clock (``time.time``) expiries
that whichever node leads can judge. Jobs without a lease (the configuration's, a whole-list POST's) never
expire.

Plain data and an injected clock: unit-tested with a fake clock (tests/unit/controller/state/test_job_leases.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

LEASE_KEYS = ("lease_s", "expires_at")


def unleased(jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The jobs as declared, without their lease fields: two lists equal here differ only by renews."""
    return [{k: v for k, v in job.items() if k not in LEASE_KEYS} for job in jobs]


class JobLeases:
    """Lease arithmetic over job entries (plain dicts) on ``clock``; entries are never changed in place."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def granted(self, job: Mapping[str, Any], lease_s: float | None) -> dict[str, Any]:
        """``job`` with a lease of ``lease_s`` seconds from now (None: without a lease, it never expires)."""
        out = {k: v for k, v in job.items() if k not in LEASE_KEYS}
        if lease_s is not None:
            out["lease_s"] = float(lease_s)
            out["expires_at"] = self.clock() + float(lease_s)
        return out

    def renewed(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """``job`` with its lease running ``lease_s`` from now again (a job without one is returned as is)."""
        if job.get("lease_s") is None:
            return dict(job)
        return dict(job, expires_at=self.clock() + job["lease_s"])

    def ran_out(self, job: Mapping[str, Any]) -> bool:
        """The job's lease has passed without a renew (never for a job without a lease)."""
        expires = job.get("expires_at")
        return expires is not None and expires <= self.clock()

    def expired(self, jobs: Iterable[Mapping[str, Any]]) -> list[str]:
        """Names of the jobs whose lease ran out."""
        return [job["name"] for job in jobs if self.ran_out(job)]

    def live(self, jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The jobs whose lease has not run out (or that have none), in order."""
        return [dict(job) for job in jobs if not self.ran_out(job)]

    def remaining_s(self, job: Mapping[str, Any]) -> float | None:
        """Seconds until the job's lease runs out (0 once it has), None without a lease."""
        expires = job.get("expires_at")
        return None if expires is None else max(0.0, expires - self.clock())

    def shown(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """The entry as REST shows it: the clock's own ``expires_at`` (meaningless off this clock) replaced by
        ``expires_in_s``, where the job has a lease."""
        out = {k: v for k, v in job.items() if k != "expires_at"}
        remaining = self.remaining_s(job)
        if remaining is not None:
            out["expires_in_s"] = round(remaining, 3)
        return out
