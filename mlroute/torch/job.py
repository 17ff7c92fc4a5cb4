"""What a training job declares: its name and body, from the launcher's environment and the derived rings."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_LEASE_S = 30.0


def base_name(env: Mapping[str, str]) -> str | None:
    """``MLROUTE_JOB``, else torchrun's run id, else the rendezvous address. torchrun's static rendezvous (the
    default with ``--master_addr``) reports the run id ``none`` for every job, and two jobs must not share a name:
    one PUT would replace the other's rings; a job's master address and port are unique while it runs."""
    for value in (env.get("MLROUTE_JOB"), env.get("TORCHELASTIC_RUN_ID")):
        if value and value.lower() != "none":
            return clean(value)
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return clean(f"torch-{env['MASTER_ADDR']}-{env['MASTER_PORT']}")
    return None


def clean(name: str) -> str:
    """A name that stays one URL path segment and reads the same in logs: letters, digits, ``._-`` only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("._-")[:100] or "job"  # the controller: [A-Za-z0-9] first


def group_name(base: str, ranks: Sequence[int], world_size: int) -> str:
    """The default group keeps the job's name; a sub-group gets a stable suffix of its ranks (every member derives
    the same one)."""
    if list(ranks) == list(range(world_size)):
        return base
    digest = hashlib.sha1(",".join(map(str, ranks)).encode()).hexdigest()[:8]
    return f"{base[:90]}-g{digest}"


def lease_seconds(env: Mapping[str, str]) -> float:
    """``MLROUTE_LEASE_S`` (renewed every third of it), default 30 s; a bad value falls back to the default."""
    try:
        value = float(env.get("MLROUTE_LEASE_S", DEFAULT_LEASE_S))
    except ValueError:
        return DEFAULT_LEASE_S
    return value if value > 0 else DEFAULT_LEASE_S


def body(hosts: Sequence[str], rings: Sequence[Sequence[str]], env: Mapping[str, str]) -> dict[str, Any]:
    """The PUT body without its lease: the hosts in rank order (each once), the rings, ``MLROUTE_WEIGHT`` if set."""
    out: dict[str, Any] = {"hosts": list(dict.fromkeys(hosts)), "rings": [list(r) for r in rings]}
    if weight(env) is not None:
        out["weight"] = weight(env)
    return out


def weight(env: Mapping[str, str]) -> float | None:
    """``MLROUTE_WEIGHT`` (the job's weight in the job-level objective); None when unset or not a number."""
    try:
        return float(env["MLROUTE_WEIGHT"]) if env.get("MLROUTE_WEIGHT") else None
    except ValueError:
        return None
