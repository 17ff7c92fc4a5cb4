"""Request bodies of the REST API, checked before anything is applied: bounded size, bounded nesting, valid JSON,
validated like the configuration file.

Ryu-free so every bad input is unit-tested: rest.py hands over the declared ``Content-Length`` and the body
stream's ``read``; each call returns ``(value, None)`` or ``(None, (http_status, {"error": message}))``. The
message is short (values are never echoed at length), and a bad body never changes state (all or nothing).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

from controller import config
from controller.decide import job_rings

MAX_BODY_BYTES = 1 << 20  # 1 MiB: 1024 jobs of 32 IPv4 hosts fit in a third of it
MAX_JSON_DEPTH = 32  # a jobs body nests 4 deep; json.loads itself only stops at Python's recursion limit
MAX_ERROR_CHARS = 300

Error = tuple[int, dict]
Result = tuple[Any, None] | tuple[None, Error]


def _error(status: int, message: str) -> tuple[None, Error]:
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + "..."
    return None, (status, {"error": message})


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion (a deep value must not exhaust the stack here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, dict)):
            deepest = max(deepest, depth)
            if depth <= MAX_JSON_DEPTH:
                stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


DRAIN_MAX_BYTES = 16 << 20  # an over-long body up to this size is read and dropped before the 413 goes out


def _drain(read: Callable[[int], bytes], content_length: int) -> None:
    """Read and drop a refused body (bounded), so the client finishes sending and reads the 413: a server that
    closes with the body unread resets the connection, and the client may see a broken pipe instead."""
    left = min(content_length, DRAIN_MAX_BYTES)
    while left > 0:
        chunk = read(min(left, 1 << 16))
        if not chunk:
            return
        left -= len(chunk)


def parse_json(content_length: int | None, read: Callable[[int], bytes], max_bytes: int = MAX_BODY_BYTES) -> Result:
    """The body as a JSON value: 413 past ``max_bytes`` (declared or read), 400 for anything that is not
    UTF-8 JSON of at most ``MAX_JSON_DEPTH`` levels."""
    if content_length is not None:
        if content_length < 0:
            return _error(400, "bad Content-Length")
        if content_length > max_bytes:
            _drain(read, content_length)
            return _error(413, f"request body of {content_length} bytes: at most {max_bytes} bytes")
    data = read(max_bytes + 1)  # one byte more than allowed tells "too long" without reading the rest
    if len(data) > max_bytes:
        return _error(413, f"request body: at most {max_bytes} bytes")
    if not data.strip():
        return _error(400, "empty request body: JSON expected")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(400, f"request body is not UTF-8 (byte {exc.start})")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return _error(400, f"request body nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    except ValueError as exc:  # json.JSONDecodeError, NaN / Infinity
        return _error(400, f"request body is not valid JSON: {exc}")
    if _depth(value) > MAX_JSON_DEPTH:
        return _error(400, f"request body nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    return value, None


def parse_jobs(content_length: int | None, read: Callable[[int], bytes]) -> Result:
    """``{"jobs": [{name, hosts}, ...]}`` as the validated job list (same rules as the YAML ``jobs:``)."""
    body, error = parse_json(content_length, read)
    if error is not None:
        return None, error
    if not isinstance(body, dict) or "jobs" not in body:
        return _error(400, 'request body must be {"jobs": [{"name": ..., "hosts": [IP, ...]}, ...]}')
    extra = sorted(set(body) - {"jobs"})
    if extra:
        return _error(400, f"request body: unknown key {extra[0]!r} (known: jobs)")
    jobs = body["jobs"]
    if isinstance(jobs, list) and len(jobs) > config.MAX_JOBS:
        return _error(413, f"request body: at most {config.MAX_JOBS} jobs, got {len(jobs)}")
    try:
        return config.validate_jobs(jobs, "request body"), None
    except config.ConfigError as exc:
        return _error(400, str(exc))


JOB_BODY_KEYS = ("choose_ring", "hosts", "lease_s", "name", "ranks_per_host", "rings", "stages", "weight")


def job_name(name: str) -> Error | None:
    """400 for a name no per-job path may carry (``config.JOB_NAME``), else None."""
    problem = config.job_name_problem(name)
    return None if problem is None else _error(400, f"job name {name[:64]!r}: {problem}")[1]


def parse_job(name: str, content_length: int | None, read: Callable[[int], bytes]) -> Result:
    """``PUT /mlroute/jobs/{name}``'s body ``{hosts?, rings?, stages?, weight?, lease_s?, choose_ring?,
    ranks_per_host?}`` as (the validated job, its lease in seconds or None, its ring request or None): the same
    rules as one entry of a whole-list body (hosts and / or rings / stages, today's host bounds), the name from the
    path (a ``name`` in the body must be the same); ``choose_ring: true`` asks for the ring to be chosen
    (controller/decide/job_rings.py checks the rest: hosts once each, ring members among them, ranks per host)."""
    bad = job_name(name)
    if bad is not None:
        return None, bad
    body, error = parse_json(content_length, read)
    if error is not None:
        return None, error
    if not isinstance(body, dict):
        return _error(400, 'request body must be {"hosts": [IP, ...], "rings": [[IP, ...]], "stages": '
                           '[[IP, ...]], "weight": w, "lease_s": s} (hosts or rings / stages; IP: IPv4 or '
                           'IPv6)')
    extra = sorted(set(body) - set(JOB_BODY_KEYS))
    if extra:
        return _error(400, f"request body: unknown key {extra[0][:64]!r} (known: {', '.join(JOB_BODY_KEYS)})")
    if body.get("name", name) != name:
        return _error(400, f"request body: name must be the path's ({name!r}) or absent")
    lease = body.get("lease_s")
    low, high = config.JOB_LEASE_RANGE_S
    if lease is not None and (isinstance(lease, bool) or not isinstance(lease, (int, float))
                              or not low <= lease <= high):
        return _error(400, f"request body: lease_s must be a number of seconds in [{low:g}, {high:g}] (or null: "
                           f"no lease), got {str(lease)[:32]}")
    choose = body.get("choose_ring", False)
    if not isinstance(choose, bool):
        return _error(400, f"request body: choose_ring must be true or false, got {str(choose)[:32]}")
    if not choose and "ranks_per_host" in body:
        return _error(400, "request body: ranks_per_host is only read with choose_ring: true")
    job = {k: v for k, v in body.items() if k not in ("lease_s", "choose_ring", "ranks_per_host")}
    job["name"] = name
    try:
        (entry,) = config.validate_jobs([job], "request body")
    except config.ConfigError as exc:
        return _error(400, str(exc).replace("jobs[0]", "job", 1))
    ring = None
    if choose:
        problem = job_rings.request_problem(body)
        if problem is not None:
            return _error(400, f"request body: {problem}")
        ring = job_rings.request_of(body)
    return (entry, None if lease is None else float(lease), ring), None
