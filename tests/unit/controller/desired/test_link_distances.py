"""Distances toward a destination kept as links go: the same values a BFS from scratch gives."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.desired.link_distances import after_removals
from controller.state.tiers import hops_from


@settings(max_examples=300, deadline=None)
@given(n=st.integers(2, 16), seed=st.integers(0, 2 ** 32 - 1), cut=st.integers(0, 5), gone=st.booleans())
def test_distances_after_removed_links_equal_a_new_bfs(n, seed, cut, gone):
    """Links cut (and maybe a switch gone with its links) on a random graph: the switches that moved and their
    new distances, as a BFS from scratch finds them."""
    rng = random.Random(seed)
    adj = {s: {} for s in range(n)}
    for u in range(n):
        for v in range(u + 1, n):
            if rng.random() < 3 / n:
                adj[u][v], adj[v][u] = v, u
    dst = rng.randrange(n)
    dist = hops_from(adj, (dst,))
    links = [(u, v) for u in adj for v in adj[u] if u < v]
    removed = rng.sample(links, min(cut, len(links)))
    if gone and n > 2:
        s = rng.choice([x for x in adj if x != dst])
        removed += [(min(s, x), max(s, x)) for x in adj[s] if (min(s, x), max(s, x)) not in removed]
        adj = {x: {y: p for y, p in nbrs.items() if y != s} for x, nbrs in adj.items() if x != s}
    for u, v in removed:
        if u in adj and v in adj:
            adj[u].pop(v, None)
            adj[v].pop(u, None)
    new, lost = after_removals(adj, dist, removed)
    assert new == hops_from(adj, (dst,))
    assert lost == {s for s in dist.keys() | new.keys() if dist.get(s) != new.get(s)}
