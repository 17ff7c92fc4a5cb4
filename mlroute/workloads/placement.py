"""Where generated jobs' replicas sit and in which rank order: the placements ring choice is measured on.

A job's replicas are its data-parallel ranks in rank order (replica i = node rank i; ring member i sends to i+1).
Hosts are grouped by the boundary a ring pays for crossing: pods on a 3-tier fabric (their cables to the core),
ToRs on a 2-tier one (their uplinks) (:func:`host_groups`).

* ``contiguous``: a job's replicas half on one group and half on the next (pairs of groups 0-1, 2-3, ..., each
  filled before the next, hosts taken in group order); rank order one group then the other, so its ring crosses
  the boundary twice: the order a good scheduler gives.
* ``interleaved``: the same hosts, rank order alternating A, B, A, B: every ring edge crosses the boundary, the
  order ring choice exists to repair.
* ``random``: every replica's hosts drawn from one seeded permutation of all hosts (jobs in order, replicas in
  order), so groups and rank order are random.

``benchmarks/bench_ring_choice.py`` and ``mlroute simulate --placement`` (:func:`mlroute.workloads.jobs.paper_jobs`)
both place jobs with :func:`place_replicas`, so the benchmark's table and the simulator's describe the same jobs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from mlroute.errors import MlrouteError


class PlacementError(MlrouteError, ValueError):
    """The jobs do not fit the groups, or no such placement (``paper_jobs`` says it as a WorkloadError)."""


#: the placements of this module (``paper_jobs`` also has the paper's own, ``tor``).
RING_PLACEMENTS = ("contiguous", "interleaved", "random")


def host_groups(fabric) -> list[list]:
    """The fabric's hosts grouped by pod (3 tiers: the aggregation switches their leaf is cabled to) or by leaf
    (2 tiers), groups and hosts in the fabric's host order."""
    from mlroute.routing.ring_choice import pod_of

    groups: dict = {}
    for h, leaf in fabric.hosts.items():
        key = pod_of(fabric, leaf) if fabric.n_tiers >= 3 else leaf
        groups.setdefault(key, []).append(h)
    return list(groups.values())


def place_replicas(groups: Sequence[Sequence[Hashable]], needs: Sequence[tuple[int, int]], placement: str,
                   rng: np.random.Generator | None = None) -> list[list[list]]:
    """Per job (``needs``: its number of replicas, hosts per replica), its replicas in rank order, each a list of
    hosts; see the module docstring. ``rng`` draws the ``random`` placement (one permutation, drawn first)."""
    if placement not in RING_PLACEMENTS:
        raise PlacementError(f"placement must be one of {', '.join(RING_PLACEMENTS)}, not {placement!r}")
    if placement == "random":
        hosts = [h for g in groups for h in g]
        need = sum(r * n for r, n in needs)
        if need > len(hosts):
            raise PlacementError(f"the workload does not fit: {len(needs)} job(s) need {need} hosts but the fabric "
                                f"has {len(hosts)}")
        if rng is None:
            raise ValueError("the random placement needs a generator")
        free = [hosts[int(i)] for i in rng.permutation(len(hosts))]
        out, at = [], 0
        for replicas, n in needs:
            out.append([free[at + i * n:at + (i + 1) * n] for i in range(replicas)])
            at += replicas * n
        return out
    taken = [0] * len(groups)
    return [_paired(groups, taken, replicas, n, placement == "interleaved", j)
            for j, (replicas, n) in enumerate(needs)]


def _paired(groups: Sequence[Sequence[Hashable]], taken: list[int], replicas: int, n: int, alternate: bool,
            job: int) -> list[list]:
    """One job's replicas on the first pair of groups with room (``taken``: hosts used per group, updated)."""
    half = ((replicas + 1) // 2, replicas // 2)
    for a in range(0, len(groups) - 1, 2):
        pair = (a, a + 1)
        if all(taken[g] + k * n <= len(groups[g]) for g, k in zip(pair, half)):
            reps: list[list] = [[], []]
            for side, (g, k) in enumerate(zip(pair, half)):
                for _ in range(k):
                    reps[side].append(list(groups[g][taken[g]:taken[g] + n]))
                    taken[g] += n
            if not alternate:
                return reps[0] + reps[1]
            return [reps[i % 2][i // 2] for i in range(replicas)]
    raise PlacementError(f"the workload does not fit: job {job} needs {half[0]} + {half[1]} replicas of {n} host(s) "
                        f"on a pair of host groups (pods / ToRs of {max(map(len, groups), default=0)} hosts) and "
                        f"no pair has room left")
