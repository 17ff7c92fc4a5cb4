"""What a single controller writes down about its declared jobs so they survive a restart, and how it reads it back.

The state is the jobs declared over REST (the whole-list POST, the per-job PUT and its renews), as one JSON
document. A job with a lease carries its expiry as an absolute wall-clock time (``expires_at``, ``time.time()``,
as a cluster stores it in ZooKeeper): the controller's own lease clock is monotonic, meaningless in another
process, so a lease is converted on the way out and back (``dump`` / ``parse``) and keeps counting while the
controller is down. A job whose lease ran out meanwhile is not restored: it ended while nobody watched.

A job entry equal to one of the configuration's is the configured job, not a declaration, and is not written: a
configured job nobody touched follows the configuration when it is edited. At start the configuration's jobs are
the base and a saved job of the same name replaces it (the REST declaration is the later word); the other saved
jobs follow, in their saved order (``combine``). A configured job deleted over REST is back after a restart.

All or nothing: a document that is empty, cut short, not ours or of another version, or holds one entry that
does not validate, is refused whole (``StateError``, its reason), never read in part. Pure: the file itself is
controller/state/job_state_file.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

FORMAT = "mlroute-declared-jobs"
VERSION = 1
LEASE_KEYS = ("lease_s", "expires_at")
Jobs = Sequence[Mapping[str, Any]]


class StateError(ValueError):
    """A state document that cannot be used; the message is the reason (the caller adds the file's path)."""


@dataclass(frozen=True)
class JobRules:
    """The configuration's rules for a job list, handed in by the caller (``controller.config.job_rules()``):
    the state wing sits below the configuration and may not import it (tests/unit/controller/test_layers.py)."""

    validate: Callable[[Any, str], list[dict[str, Any]]]  # the job list validated as the configuration's
    check_bounds: Callable[[Sequence[Mapping[str, Any]], str], None]  # at most so many jobs and hosts
    lease_range_s: tuple[float, float]
    error: type[Exception]  # what ``validate`` and ``check_bounds`` raise


@dataclass(frozen=True)
class Restored:
    """What a state document gives back: the jobs to restore (leases on the lease clock), and the names of the
    leased jobs whose lease ran out while the controller was down (ended, not restored)."""

    jobs: list[dict[str, Any]]
    ended: list[str]


def declared(jobs: Jobs, configured: Jobs) -> list[dict[str, Any]]:
    """The jobs worth writing: every job in force that is not exactly one of the configuration's."""
    return [dict(job) for job in jobs if dict(job) not in [dict(c) for c in configured]]


def dump(jobs: Jobs, configured: Jobs, lease_clock: Callable[[], float], wall: Callable[[], float]) -> bytes:
    """The state document of ``jobs`` (the list in force): its declared jobs, leases as wall-clock expiries."""
    now, then = lease_clock(), wall()
    out = []
    for job in declared(jobs, configured):
        if job.get("expires_at") is not None:
            job["expires_at"] = then + (job["expires_at"] - now)
        out.append(job)
    return json.dumps({"format": FORMAT, "version": VERSION, "saved_at": then, "jobs": out},
                      separators=(",", ":")).encode()


def parse(data: bytes, lease_clock: Callable[[], float], wall: Callable[[], float], rules: JobRules) -> Restored:
    """The jobs a state document holds, leases back on ``lease_clock`` (what is left of each, never more than
    its ``lease_s``: a wall clock stepped back while down does not prolong it); StateError when unusable."""
    if not data.strip():
        raise StateError("empty")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise StateError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise StateError(f"cut short or not JSON ({exc.msg} at offset {exc.pos})") from None
    except RecursionError:
        raise StateError("not JSON (nested too deeply)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StateError(f"not an mlroute job state (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise StateError(f"version {doc.get('version')!r}, this controller reads version {VERSION}")
    entries = doc.get("jobs")
    if not isinstance(entries, list):
        raise StateError("\"jobs\" must be a list")
    leases = [_lease(entry, i, rules) for i, entry in enumerate(entries)]
    try:
        jobs = rules.validate([{k: v for k, v in e.items() if k not in LEASE_KEYS} for e in entries], "jobs")
    except rules.error as exc:
        raise StateError(str(exc)) from None
    now, then = lease_clock(), wall()
    restored, ended = [], []
    for job, (lease_s, expires_at) in zip(jobs, leases):
        if lease_s is None:
            restored.append(job)
            continue
        left = min(lease_s, expires_at - then)
        if left <= 0:
            ended.append(job["name"])
            continue
        restored.append({**job, "lease_s": lease_s, "expires_at": now + left})
    return Restored(restored, ended)


def _lease(entry: Any, i: int, rules: JobRules) -> tuple[float | None, float]:
    """(lease_s, wall-clock expiry) of one saved entry, (None, 0) without a lease; StateError if malformed."""
    if not isinstance(entry, dict):
        raise StateError(f"jobs[{i}]: must be a mapping, got {entry!r:.80}")
    lease_s, expires_at = entry.get("lease_s"), entry.get("expires_at")
    if lease_s is None and expires_at is None:
        return None, 0.0
    low, high = rules.lease_range_s
    if not _number(lease_s) or not low <= lease_s <= high:
        raise StateError(f"jobs[{i}].lease_s: must be a number in [{low:g}, {high:g}], got {lease_s!r}")
    if not _number(expires_at):
        raise StateError(f"jobs[{i}].expires_at: must be a wall-clock time (seconds), got {expires_at!r}")
    return float(lease_s), float(expires_at)


def _number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def combine(configured: Jobs, saved: Jobs, rules: JobRules) -> list[dict[str, Any]]:
    """The jobs in force at start: the configuration's, each replaced by the saved job of its name, then the
    other saved jobs in their order; ConfigError when together they pass the bounds of a job list."""
    by_name: dict[str, Mapping[str, Any]] = {}
    for job in saved:
        by_name.setdefault(job["name"], job)
    out = [dict(by_name.get(job["name"], job)) for job in configured]
    names = {job["name"] for job in configured}
    out += [dict(job) for job in saved if job["name"] not in names]
    rules.check_bounds(out, "saved jobs with the configuration's")
    return out
