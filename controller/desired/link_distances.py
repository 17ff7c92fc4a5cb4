"""Each destination switch's BFS distances over the live switch links, and the next hops they give, kept as
links come and go: a removed link moves only the switches that lost every parent one hop closer, a link between
adjacent distances only adds or drops a next hop, so a failure costs what it touches (the plan's forwarding
entries are rewritten where these change: plan_state.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from heapq import heapify, heappop, heappush

import networkx as nx

Adjacency = dict[int, dict[int, int]]  # switch -> {neighbour: own port toward it}


def adjacency(graph: nx.Graph) -> Adjacency:
    return {s: {n: attrs["ports"][s] for n, attrs in nbrs.items()} for s, nbrs in graph.adjacency()}


def hops_of(adj: Adjacency, dist: Mapping[int, int], s: int) -> tuple[int, ...]:
    """Ports of ``s`` toward neighbours one hop closer (the DAG's next hops), as ``forwarding.next_hop_ports``."""
    d = dist[s] - 1
    return tuple(sorted(p for n, p in adj[s].items() if dist.get(n) == d))


def after_removals(adj: Adjacency, dist: Mapping[int, int], removed: list[tuple[int, int]]) -> tuple[
        dict[int, int], set[int]]:
    """BFS distances toward one switch (``dist``) after these links were removed (and the switches gone from
    ``adj``), with the switches whose distance changed: the values a BFS over ``adj`` gives, not its order.
    Only switches that lost every parent one hop closer move (``lost_parents``); they are placed again outward from
    the switches that kept their distance."""
    lost = lost_parents(adj, dist, removed)
    new = {s: d for s, d in dist.items() if s not in lost}
    best = [(min(new[n] for n in adj[s] if n in new) + 1, s) for s in lost
            if any(n in new for n in adj.get(s, ()))]
    heapify(best)
    while best:
        d, s = heappop(best)
        if s in new:
            continue
        new[s] = d
        for n in adj[s]:
            if n in lost and n not in new:
                heappush(best, (d + 1, n))
    return new, lost


def lost_parents(adj: Adjacency, dist: Mapping[int, int], removed: list[tuple[int, int]]) -> set[int]:
    """The switches left without a parent one hop closer: the far ends of removed links and switches gone,
    then their children, looked at in order of distance (a parent's verdict is final before its children
    ask)."""
    todo = [(d, s) for s, d in dist.items() if s not in adj]
    for u, v in removed:
        du, dv = dist.get(u), dist.get(v)
        if du is not None and dv is not None and du != dv:
            todo.append((du, u) if du > dv else (dv, v))
    heapify(todo)
    lost: set[int] = set()
    looked: set[int] = set()
    while todo:
        d, s = heappop(todo)
        if s in looked:
            continue
        looked.add(s)
        nbrs = adj.get(s, {})
        if any(dist.get(n) == d - 1 and n not in lost for n in nbrs):
            continue  # another parent one hop closer: it stays
        lost.add(s)
        for n in nbrs:
            if dist.get(n) == d + 1:
                heappush(todo, (d + 1, n))
    return lost


def local_changes(adj: Adjacency, dist: Mapping[int, int], removed: list[tuple[int, int]],
                   added: list[tuple[int, int]]) -> set[int] | None:
    """The switches whose next hops toward a destination (its BFS distances ``dist``) these link changes change
    while no distance does; None when some distance changes (the destination's BFS runs again). A removed DAG
    link whose farther end keeps another parent one hop closer shrinks that end's next hops only; an added (or
    re-ported) link between adjacent distances only adds one."""
    local: set[int] = set()
    for u, v in removed:
        du, dv = dist.get(u), dist.get(v)
        if du is None or dv is None or du == dv:
            continue  # not a DAG link toward dst
        far = u if du > dv else v
        if far not in adj:
            continue  # the switch itself is gone
        if not any(dist.get(n) == dist[far] - 1 for n in adj[far]):
            return None
        local.add(far)  # another parent at the same distance: only its next hops shrink
    for u, v in added:
        du, dv = dist.get(u), dist.get(v)
        if du is None and dv is None:
            continue
        if du is None or dv is None or abs(du - dv) > 1:
            return None  # distances shrink somewhere
        if du != dv:
            local.add(u if du > dv else v)
    return local


def link_changes(old: Adjacency, adj: Adjacency) -> tuple[list[tuple[int, int]], list[tuple[int, int]],
                                                              list[tuple[int, int]]]:
    """The links (switch pairs) removed, added, and kept with other ports, from ``old`` to ``adj``. Only links at
    switches whose own links differ can differ (a failure: two of 720; listing every link cost ~4 ms at k=24)."""
    ends = sorted(s for s in old.keys() | adj.keys() if old.get(s) != adj.get(s))
    old_links, new_links = _links(old, ends), _links(adj, ends)
    removed = [uv for uv in old_links if uv not in new_links]
    added = [uv for uv in new_links if uv not in old_links]
    moved = [uv for uv, ports in new_links.items() if uv in old_links and old_links[uv] != ports]
    return removed, added, moved


def _links(adj: Adjacency, ends: Iterable[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """Undirected links (u < v) at these switches, with their ports at u and at v."""
    out = {}
    for s in ends:
        for n in adj.get(s, ()):
            u, v = min(s, n), max(s, n)
            out[u, v] = (adj[u][v], adj[v][u])
    return out
