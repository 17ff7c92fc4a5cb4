"""The host rings a collective library really sends on, from the ranks' host addresses (pure functions).

A declared ring ``[a, b, c]`` means a -> b -> c -> a (controller.state.jobs): the controller pins exactly those
host pairs in that direction, so the ring must name the direction the bulk of the bytes takes, not rank order.
Ranks sharing a host exchange their bytes inside it: those edges put nothing on the fabric and are collapsed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def gloo_send_order(n: int) -> list[int]:
    """The ranks of gloo's ring all-reduce in the order the bulk flows: n-1 -> n-2 -> ... -> 0 -> n-1.

    gloo/allreduce.cc, ``ring()`` (facebookincubator/gloo at cc44198, lines 157-158)::

        const auto recvRank = (context->size + context->rank + 1) % context->size;
        const auto sendRank = (context->size + context->rank - 1) % context->size;

    and both phases send only to ``sendRank`` (reduce-scatter ``out[0]->send(sendRank, ...)`` line 317, all-gather
    line 384): rank r sends to r-1 and receives from r+1. ``allreduce()`` takes ``ring()`` for the UNSPECIFIED
    algorithm, which is what PyTorch's ProcessGroupGloo passes. Rank order is therefore the reverse of the flow.
    """
    return list(range(n - 1, -1, -1))


def nccl_send_order(n: int) -> list[int]:
    """NCCL's default inter-node ring without a log to read: nodes in the order they first appear in rank order,
    data flowing left to right (src/graph/connect.cc); channels come in identical pairs, no reverse ring."""
    return list(range(n))


def _simple_cycles(walk: Sequence[str]) -> list[list[str]]:
    """A closed walk (no self-steps) split into simple cycles, so that each can be declared as a ring of
    distinct hosts; together they hold every step of the walk."""
    cycles: list[list[str]] = []
    stack: list[str] = []
    for host in [*walk, walk[0]]:
        if host in stack:
            i = stack.index(host)
            if len(stack) - i >= 2:
                cycles.append(stack[i:])
            del stack[i + 1 :]
        else:
            stack.append(host)
    return cycles


def _canonical(ring: Sequence[str]) -> tuple[str, ...]:
    """A ring's rotation starting at its smallest host: the same cycle written from another start is the same."""
    i = min(range(len(ring)), key=lambda k: ring[k])
    return tuple(ring[i:]) + tuple(ring[:i])


def host_rings(rank_ring: Sequence[int], hosts: Sequence[str]) -> list[list[str]]:
    """The fabric rings of one rank ring (data flowing left to right and wrapping), ``hosts[r]`` = rank r's host.

    Consecutive ranks on one host collapse (their bytes never leave it); a job whose ranks are not contiguous per
    host visits hosts twice, and that walk is split into simple rings. One host only: no ring (nothing to route).
    """
    walk = [hosts[r] for r in rank_ring]
    collapsed = [h for i, h in enumerate(walk) if h != walk[i - 1]] if len(set(walk)) > 1 else []
    return unique_rings(_simple_cycles(collapsed)) if collapsed else []


def unique_rings(rings: Iterable[Sequence[str]]) -> list[list[str]]:
    """Rings without repeats (the same cycle from another start counts once), first seen order."""
    seen: dict[tuple[str, ...], list[str]] = {}
    for ring in rings:
        seen.setdefault(_canonical(ring), list(ring))
    return list(seen.values())


def gloo_rings(hosts: Sequence[str]) -> list[list[str]]:
    """The ring of gloo's all-reduce over a group whose rank r runs on ``hosts[r]``: hosts in descending rank
    order (see gloo_send_order). Two hosts give the same pairs either way (n = 2 is symmetric)."""
    return host_rings(gloo_send_order(len(hosts)), hosts)


# NCCL INFO lines of rank 0 (subsystem INIT): "Channel 00/02 :    0   1   2   3" up to 2.22, "Channel 00/02 : 0 1 2 3"
# from 2.23.4. The per-connection lines ("Channel 00/0 : 3[3] -> 0[0] [receive] via NET/Socket/0") do not match:
# they have brackets and arrows after the colon.
_CHANNEL = re.compile(r"\bChannel (\d+)/(\d+) :((?:\s+\d+)+)\s*$")


@dataclass(frozen=True)
class NcclChannel:
    """One channel's ring as NCCL logged it: ranks in the order data flows (wrapping from last to first)."""

    channel: int
    nchannels: int
    ranks: tuple[int, ...]


def parse_nccl_log(lines: Iterable[str]) -> list[NcclChannel]:
    """Every ``Channel NN/NN : r0 r1 ...`` ring line of an ``NCCL_DEBUG=INFO`` log, in file order."""
    found = []
    for line in lines:
        m = _CHANNEL.search(line.rstrip("\r\n"))
        if m:
            found.append(NcclChannel(int(m.group(1)), int(m.group(2)), tuple(int(r) for r in m.group(3).split())))
    return found


def nccl_rank_rings(channels: Iterable[NcclChannel], n: int) -> list[list[int]]:
    """The distinct rank rings of a communicator of n ranks among logged channels. A line that is not a
    permutation of 0..n-1 is dropped: NCCL cuts long lines, and another communicator's rings have another size."""
    rings: dict[tuple[int, ...], list[int]] = {}
    for ch in channels:
        if len(ch.ranks) == n and sorted(ch.ranks) == list(range(n)):
            i = ch.ranks.index(0)
            rings.setdefault(ch.ranks[i:] + ch.ranks[:i], list(ch.ranks))
    return list(rings.values())


@dataclass(frozen=True)
class GraphChannel:
    """One channel of an ``NCCL_GRAPH_DUMP_FILE`` graph: within one node, the NIC data enters by, the GPUs in the
    order it visits them and the NIC it leaves by (``None`` for a channel that stays inside the node)."""

    gpus: tuple[int, ...]
    net_in: int | None
    net_out: int | None


# NCCL_TOPO_PATTERN_RING in src/graph/topo.h (1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 CollNet)
RING_PATTERN = 4


def parse_graph_xml(text: str) -> list[GraphChannel]:
    """The ring channels of an ``NCCL_GRAPH_DUMP_FILE`` (graphs of the ring pattern only; trees and NVLS are not
    rings). The file describes one node: the order across nodes is not in it."""
    out = []
    for graph in ET.fromstring(text).iter("graph"):
        if int(graph.get("pattern", "-1")) != RING_PATTERN:
            continue
        for channel in graph.iter("channel"):
            gpus = tuple(int(e.get("dev", "-1")) for e in channel if e.tag == "gpu")
            nets = [int(e.get("dev", "-1")) for e in channel if e.tag == "net"]
            out.append(GraphChannel(gpus, nets[0] if nets else None, nets[-1] if nets else None))
    return out


def graph_rank_rings(channels: Iterable[GraphChannel], hosts: Sequence[str], devices: Sequence[int]) -> list[list[int]]:
    """Rank rings from one node's graph: nodes in the order they first appear in rank order (src/graph/connect.cc),
    each node's ranks in the channel's GPU order (rank r drives GPU ``devices[r]`` on ``hosts[r]``). Assumes the
    nodes are alike, as NCCL's own search does; a rank whose GPU is not in the channel keeps its rank order."""
    nodes = list(dict.fromkeys(hosts))
    rings: dict[tuple[int, ...], list[int]] = {}
    for ch in channels:
        order = {dev: i for i, dev in enumerate(ch.gpus)}
        ring = []
        for node in nodes:
            ranks = [r for r in range(len(hosts)) if hosts[r] == node]
            ring += sorted(ranks, key=lambda r: (order.get(devices[r], len(order)), r))
        rings.setdefault(tuple(ring), ring)
    return list(rings.values())
