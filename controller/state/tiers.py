"""Infer each switch's tier from the graph alone: 3-tier fat-tree, 2-tier leaf-spine, or neither.

The bottom tier is the set of switches that face hosts (they have hosts or access ports). Every other switch is
placed by its hop distance from that tier. The graph is a Clos when every link joins adjacent levels (no link
inside a level, nothing skips a level): two levels make a leaf-spine, three a fat-tree. No DPID or name rules.

Faults are not re-cablings: while a switch reconnects or a link comes back, the graph is half-known (a live port
without its link yet looks host-facing; a switch without links reaches nothing). Given the ``previous``
inference, tiers that the graph known so far still agrees with are kept, so no transient "not a Clos" turns
traffic engineering off and drops every pin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from mlroute.routing.tiers import FAT_TREE_TIERS, LEAF_SPINE_TIERS

LEAF_SPINE = "leafspine"
FAT_TREE = "fattree"
UNKNOWN = "unknown"

TIER_NAMES = {
    LEAF_SPINE: LEAF_SPINE_TIERS,
    FAT_TREE: FAT_TREE_TIERS,
}


@dataclass
class TierInference:
    kind: str  # LEAF_SPINE, FAT_TREE or UNKNOWN
    tiers: dict[int, str] = field(default_factory=dict)  # dpid -> tier name
    reason: str = ""
    levels: dict[int, int] = field(default_factory=dict)  # dpid -> hops from the host-facing tier (0 = leaf / edge)

    @property
    def is_clos(self) -> bool:
        return self.kind != UNKNOWN


def infer_tiers(graph: nx.Graph, access_switches: Iterable[int], pinned: Mapping[int, str] | None = None,
                previous: TierInference | None = None, hosted: Iterable[int] = ()) -> TierInference:
    """Classify ``graph`` (undirected switch graph) given the host-facing switches.

    ``pinned`` (dpid -> tier name, from configuration) overrides inference for odd labs; the layout is then
    judged on the pinned tiers. ``previous`` (the last TierInference) keeps the tiers of a Clos through a
    half-known graph: a switch it placed above the host-facing tier is not taken for host-facing because a port
    lost its link (unless it is in ``hosted``: it has hosts), and when the graph alone reads differently but
    every known link still joins adjacent previous levels, the previous levels stand. Returns a TierInference;
    ``reason`` says why a graph is not a Clos.
    """
    pinned = dict(pinned or {})
    switches = set(graph.nodes)
    if not switches:
        return TierInference(UNKNOWN, {}, "no switches")
    if pinned:
        return _judge_pinned(graph, pinned)
    before = previous.levels if previous is not None and previous.is_clos else {}
    upper = {d for d in switches if before.get(d, 0) > 0} - set(hosted)
    fresh = _from_graph(graph, switches, (set(access_switches) & switches) - upper)
    if not before or fresh.is_clos and all(fresh.levels[d] == before[d] for d in switches if d in before):
        return fresh
    assert previous is not None  # ``before`` is non-empty only with a previous Clos
    return _kept(graph, switches, before, previous.kind) or fresh


def from_levels(kind: str, levels: Mapping[int, int]) -> TierInference | None:
    """A Clos's inference as another controller made it (a cluster's published view: each switch's level), to
    judge a half-known graph against as ``previous``; None when it names no Clos or no switch."""
    names = TIER_NAMES.get(kind)
    if names is None or not levels or any(not 0 <= level < len(names) for level in levels.values()):
        return None
    return TierInference(kind, _named(levels, levels, kind), levels=dict(levels))


def _kept(graph: nx.Graph, switches: set[int], before: Mapping[int, int], kind: str) -> TierInference | None:
    """The previous levels, when the graph known so far agrees with them (every switch placed, every link
    between adjacent levels, the top level still there); else None: the fabric really changed."""
    if not switches <= set(before):
        return None
    level = {d: before[d] for d in switches}
    if any(abs(level[u] - level[v]) != 1 for u, v in graph.edges):
        return None
    if max(level.values()) != len(TIER_NAMES[kind]) - 1:
        return None
    return TierInference(kind, _named(level, switches, kind), levels=level)


def _from_graph(graph: nx.Graph, switches: set[int], bottom: set[int]) -> TierInference:
    if not bottom:
        return TierInference(UNKNOWN, {d: "unknown" for d in switches}, "no host-facing switch")
    level = hops_from(dict(graph.adjacency()), bottom)
    unreachable = switches - set(level)
    if unreachable:
        return TierInference(UNKNOWN, _named(level, switches, None),
                             f"switches not connected to any host-facing switch: {sorted(unreachable)}")
    height = max(level.values())
    for u, v in graph.edges:
        if abs(level[u] - level[v]) != 1:
            return TierInference(UNKNOWN, _named(level, switches, None),
                                 f"link {u}-{v} joins levels {level[u]} and {level[v]}: not a Clos")
    if height == 1:
        kind = LEAF_SPINE
    elif height == 2:
        kind = FAT_TREE
    else:
        return TierInference(UNKNOWN, _named(level, switches, None), f"{height + 1} levels: not a 2- or 3-tier Clos")
    return TierInference(kind, _named(level, switches, kind), levels=dict(level))


def hops_from(adj: Mapping[int, Iterable[int]], sources: Iterable[int]) -> dict[int, int]:
    """Each switch's hops from the nearest of ``sources`` over ``adj`` (switch -> its neighbours), unreachable
    ones left out: a breadth-first search, the same dict in the same order as networkx's unit-weight
    multi-source Dijkstra, at a fifth of its cost."""
    level = dict.fromkeys(sources, 0)
    frontier = list(level)
    d = 0
    while frontier:
        d += 1
        nxt = []
        for s in frontier:
            for n in adj[s]:
                if n not in level:
                    level[n] = d
                    nxt.append(n)
        frontier = nxt
    return level


def _named(level: Mapping[int, int], switches: Iterable[int], kind: str | None) -> dict[int, str]:
    names = TIER_NAMES.get(kind) if kind is not None else None
    return {d: (names[level[d]] if names and d in level else f"level{level[d]}" if d in level else "unknown")
            for d in switches}


def _judge_pinned(graph: nx.Graph, pinned: Mapping[int, str]) -> TierInference:
    tiers = {d: pinned.get(d, "unknown") for d in graph.nodes}
    for kind, names in TIER_NAMES.items():
        if set(tiers.values()) <= set(names):
            rank = {name: i for i, name in enumerate(names)}
            bad = [(u, v) for u, v in graph.edges if abs(rank[tiers[u]] - rank[tiers[v]]) != 1]
            if not bad:
                return TierInference(kind, tiers, levels={d: rank[t] for d, t in tiers.items()})
            return TierInference(UNKNOWN, tiers, f"pinned tiers: link {bad[0]} does not join adjacent tiers")
    return TierInference(UNKNOWN, tiers, "pinned tiers do not name one Clos layout (or some switch is unpinned)")
