"""A declared job's ring chosen by the controller: the launcher's host order in, the order whose ring the
network-wide metric prefers out, as a node rank per host, and the job entry declared with that ring.

A job PUT with ``"choose_ring": true`` gives its hosts in the launcher's order (node rank i = host i) and,
optionally, how many ranks each holds (each host's ranks stay one block: the choice is an order of hosts).
:func:`choose` asks the routing core (:func:`mlroute.routing.ring_choice.choose_ring`) for the order, routed with
what the controller routes besides the job: the other declared jobs' sends and the elephants it knows (as
network-limited flows), on the fabric as learned (failed links gone). The entry then declares one ring in gloo's
direction (rank r sends to r-1, so the declared ring, whose member i sends to i+1, is the order reversed) and
carries ``node_ranks`` and ``ring_choice`` (the expected gain and why), which GET shows as they are. When no order
is strictly better, or the choice cannot be made (a host not on the learned fabric yet), the given order is kept,
pinned in the same direction, and ``ring_choice.reason`` says so.

Cost: one optimiser run per distinct candidate order (k=4 fat-tree, 16 flows: under 1 ms uncongested, ~10 ms when
the polishing works); exact up to :data:`MAX_CANDIDATES` distinct orders (a job of up to 6 hosts with nothing to
fold, or 8 hosts on 4 racks), else grouped by rack and pod with at most that many routings: at k=4..8 a PUT spends
from a few ms to well under a second here, in the REST call (the core's turn), not in the decision loop's worker.
Ryu-free and pure: unit-tested through the REST handlers (tests/unit/controller/web/test_rest_jobs.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.state import jobs as declared_jobs
from controller.state.flowkey import is_ipv6
from mlroute.routing.fabric import Fabric, FabricError
from mlroute.routing.flow import Flow
from mlroute.routing.ring_choice import choose_ring, rank_blocks

#: distinct candidate orders routed at most per choice (exact below it, grouped search bounded by it above).
MAX_CANDIDATES = 120
#: the most ranks one host may declare (a bound on the request, not a model of any machine).
MAX_RANKS_PER_HOST = 4096
DIRECTION = "previous"  # gloo's ring all-reduce: rank r sends to rank r-1


@dataclass(frozen=True)
class RingRequest:
    """What a PUT asked for besides the job: its ring chosen, with ranks per host (host -> count, default 1)."""

    ranks_per_host: Mapping[str, int] = field(default_factory=dict)


def request_problem(body: Mapping[str, Any]) -> str | None:
    """Why a PUT body's ring request is unusable (checked after the job itself validated: hosts are IPv4 or IPv6
    strings), or None: hosts listed once each in the launcher's order, all of one family (the ring sends within
    it), no stages, ring members among the hosts, ``ranks_per_host`` a count for all or a {host: count} map of
    listed hosts, counts in [1, MAX_RANKS_PER_HOST]. Hosts compare as the job holds them (``_address``)."""
    hosts = body.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        return "choose_ring needs hosts: the job's hosts in the launcher's order (node rank 0 first)"
    seen: set = set()
    for h in map(_address, hosts):
        if h in seen:
            return f"hosts: {h} appears twice (each host holds one block of ranks)"
        seen.add(h)
    if len({is_ipv6(str(h)) for h in seen}) > 1:
        return "choose_ring: hosts mix IPv4 and IPv6 (a ring sends within one family)"
    if "stages" in body:
        return "choose_ring: a ring job declares no stages"
    for ring in body.get("rings") or ():
        for h in map(_address, ring):
            if h not in seen:
                return f"rings: host {h} is not in hosts"
    ranks = body.get("ranks_per_host")
    if ranks is None:
        return None
    counts = ranks.items() if isinstance(ranks, dict) else [(None, ranks)]
    for host, n in counts:
        if host is not None and _address(host) not in seen:
            return f"ranks_per_host: {str(host)[:64]} is not in hosts"
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RANKS_PER_HOST:
            return (f"ranks_per_host: a count of ranks in [1, {MAX_RANKS_PER_HOST}] for every host, or a map "
                    f"{{host: count}}, got {str(n)[:32]}")
    return None


def request_of(body: Mapping[str, Any]) -> RingRequest:
    """The request of a body :func:`request_problem` accepted."""
    ranks = body.get("ranks_per_host")
    if ranks is None:
        return RingRequest()
    if isinstance(ranks, dict):
        return RingRequest({_address(h): n for h, n in ranks.items()})
    return RingRequest({_address(h): int(ranks) for h in body["hosts"]})


def _address(host: Any) -> Any:
    """A body's host as the validated job holds it (an IPv6 address compressed), else as given."""
    return declared_jobs.host_address(host) or host


def choose(job: Mapping[str, Any], request: RingRequest, fabric: Fabric | None, jobs: Sequence[Mapping[str, Any]],
           elephants: Iterable[Any], *, algo: str = "mlroute", seed: int = 0) -> dict[str, Any]:
    """The job entry declared with its chosen ring: ``rings`` = [the order in gloo's direction], ``node_ranks``
    ({host: node rank}) and ``ring_choice`` (helps, gain, given / chosen all-reduce time over ideal, crossings,
    method, candidates, reason; ``first_rank`` per host). ``jobs``: the declared list (a job of the same name is
    being replaced and does not count); ``elephants``: the keys of the known elephants (``src_ip``,
    ``dst_ip``)."""
    given = list(job["hosts"])
    name = job["name"]
    kept = {"helps": False, "gain": 1.0, "method": "trivial", "candidates": 0}
    if len(given) < 2:
        return _entry(job, given, None, dict(kept, reason="one host: its ranks talk over shared memory, no ring "
                                                            "on the network"), request)
    missing = [h for h in given if fabric is None or h not in fabric.hosts]
    if fabric is None or missing:
        why = "no Clos fabric learned yet" if fabric is None else \
            f"host {missing[0]} not on the learned fabric yet (no packet seen from it)"
        return _entry(job, given, given, dict(kept, reason=f"not chosen: {why}; the given order is kept"), request)
    weight = float(job.get("weight", 1.0))
    others = other_flows(name, jobs, elephants, set(given), fabric)
    try:
        choice = choose_ring(fabric, given, others, job=name, direction=DIRECTION, objective="job",
                             algo="mlroute" if algo == "ecmp" else algo, seed=seed, weight=weight,
                             max_candidates=MAX_CANDIDATES)
    except FabricError as exc:
        return _entry(job, given, given, dict(kept, reason=f"not chosen: {exc}; the given order is kept"), request)
    info = choice.as_dict()
    del info["order"], info["given"]
    info["reason"] = (f"the chosen order's slowest ring edge is {choice.gain:.3g}x the given order's"
                      if choice.helps else
                      "no order helps: the given order is as good in the metric as any (only placement can help)")
    return _entry(job, given, list(choice.order), info, request)


def other_flows(name: str, jobs: Sequence[Mapping[str, Any]], elephants: Iterable[Any], hosts: set,
                fabric: Fabric) -> list[Flow]:
    """What the controller routes besides job ``name``: the other jobs' declared sends (with their weights), then
    the elephants no declared send covers and that are not between two of the job's own hosts."""
    flows: list[Flow] = []
    declared = set()
    on = fabric.hosts
    owner = {ip: job["name"] for job in jobs if job["name"] != name for ip in job["hosts"]}
    weights = declared_jobs.weights(jobs)
    for job in jobs:
        if job["name"] == name:
            continue
        for p in declared_jobs.sends(job):
            declared.add((p.src_ip, p.dst_ip))
            if p.src_ip in on and p.dst_ip in on:
                flows.append(Flow(p.src_ip, p.dst_ip, job=job["name"], weight=weights.get(job["name"], 1.0)))
    for key in elephants:
        pair = (key.src_ip, key.dst_ip)
        if pair in declared or (pair[0] in hosts and pair[1] in hosts) or not (pair[0] in on and pair[1] in on):
            continue
        label = owner.get(key.src_ip)
        flows.append(Flow(key.src_ip, key.dst_ip, job=label, weight=1.0 if label is None else weights.get(label, 1.0)))
    return flows


def _entry(job: Mapping[str, Any], given: list, order: list | None, info: dict[str, Any],
           request: RingRequest) -> dict[str, Any]:
    """The job entry: hosts as given, one ring over ``order`` in gloo's direction (none for a single host)."""
    order = order if order is not None else given
    out = {k: v for k, v in job.items() if k not in ("rings", "stages")}
    if len(order) >= 2:
        out["rings"] = [order[:1] + order[:0:-1]]  # member i sends to i+1: node rank i sends to i-1
    blocks = rank_blocks(order, request.ranks_per_host)
    out["node_ranks"] = {h: i for i, h in enumerate(order)}
    out["ring_choice"] = dict(info, direction="gloo: rank r sends to rank r-1",
                              first_rank={h: blocks[h][0] for h in order},
                              world_size=sum(n for _, n in blocks.values()))
    return out
