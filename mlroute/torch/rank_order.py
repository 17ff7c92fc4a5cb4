"""The node order the controller chose for a job's ring, handed to the job: which global rank each process takes.

A launcher gives every host (node) one contiguous block of global ranks, nodes in node-rank order (torchrun:
global rank = node rank x ranks per node + local rank). The controller chooses an order of the nodes
(``PUT /mlroute/jobs/{name}`` with ``"choose_ring": true``, docs/jobs.md) and answers each host's node rank; a
process then takes its host's new first rank plus its offset inside its host's block, so every host's ranks stay
one block and the ring the library builds in rank order is the chosen one. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

CHOOSE_TIMEOUT_S = 10.0  # the controller's ring choice: one routing per candidate order, then a decision
RING_ENV = "MLROUTE_RING"  # "choose": run the job in the controller's node order; unset or "given": as launched


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the job asks for its ring to be chosen (``MLROUTE_RING=choose``)."""
    return env.get(RING_ENV, "").strip().lower() == "choose"


def node_blocks(hosts: Sequence[str]) -> list[tuple[str, int]] | None:
    """(host, how many ranks) per node in rank order, from each global rank's host; None when a host's ranks
    are not one contiguous block (a launcher that interleaves a host's ranks: no node order to choose)."""
    blocks: list[tuple[str, int]] = []
    for host in hosts:
        if blocks and blocks[-1][0] == host:
            blocks[-1] = (host, blocks[-1][1] + 1)
        elif any(h == host for h, _ in blocks):
            return None
        else:
            blocks.append((host, 1))
    return blocks


def choose_body(blocks: Sequence[tuple[str, int]], lease_s: float, weight: float | None = None) -> dict[str, Any]:
    """The PUT body asking the controller to choose the node order of these nodes (launcher's order first)."""
    body: dict[str, Any] = {"hosts": [h for h, _ in blocks], "choose_ring": True, "lease_s": lease_s}
    if any(n != 1 for _, n in blocks):
        body["ranks_per_host"] = {h: n for h, n in blocks}
    if weight is not None:
        body["weight"] = weight
    return body


def ask(controller: Any, name: str, body: Mapping[str, Any]) -> tuple[Any, dict | None]:
    """PUT ``body`` (:func:`choose_body`) as job ``name`` to ``controller`` (a :class:`mlroute.torch.client.
    Controller`): its reply and its JSON answer (None unless a 2xx with a JSON object). UnreachableError as the
    client raises it."""
    reply = controller.call("PUT", controller.job_path(name), dict(body), limit=1 << 20, timeout_s=CHOOSE_TIMEOUT_S)
    return reply, json_answer(reply)


def json_answer(reply: Any) -> dict | None:
    """A 2xx reply's JSON object; None for any other status or a body that is not a JSON object."""
    try:
        answer = json.loads(reply.text) if reply.ok else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def node_ranks(answer: Any, blocks: Sequence[tuple[str, int]]) -> dict[str, int] | None:
    """The chosen node rank of every node, from the PUT's answer (``{"job": {"node_ranks": {...}}}``); None
    when the answer has none or they are not a permutation of the job's nodes (then the job keeps its order)."""
    job = answer.get("job") if isinstance(answer, dict) else None
    ranks = job.get("node_ranks") if isinstance(job, dict) else None
    if not isinstance(ranks, dict):
        return None
    hosts = [h for h, _ in blocks]
    if sorted(ranks) != sorted(hosts) or sorted(ranks.values()) != list(range(len(hosts))) \
            or not all(type(v) is int for v in ranks.values()):
        return None
    return {h: ranks[h] for h in hosts}


def new_ranks(blocks: Sequence[tuple[str, int]], chosen: Mapping[str, int]) -> list[int]:
    """The new global rank of every old global rank: nodes laid out in chosen node-rank order, each host's block
    kept whole and in its own internal order (local rank 0 stays its host's first)."""
    size = dict(blocks)
    first, at = {}, 0
    for host in sorted(size, key=chosen.__getitem__):
        first[host] = at
        at += size[host]
    out: list[int] = []
    for host, n in blocks:
        out.extend(first[host] + i for i in range(n))
    return out
