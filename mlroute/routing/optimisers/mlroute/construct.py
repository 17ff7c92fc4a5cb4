"""Step 1 of mlroute where the fabric allows better than the greedy: an intact fat-tree, coloured level by level.

A k-ary fat-tree is a Clos of Closes, so equitable colourings per level give the optimal max load on every link
they decide; generated fat-trees are recognised by kind, learned ones (switch ids are DPIDs) by their structure.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.bipartite_colouring import equitable_colouring


def fattree_colouring(prob: Problem) -> np.ndarray | None:
    """A k-ary fat-tree without failures is a Clos of Closes: colour it level by level.

    Level 1: every inter-leaf flow picks its aggregation index a (k/2 choices) by an equitable colouring of the
    edge-switch multigraph, so each edge switch's k/2 uplinks (and downlinks) carry at most ceil(d/(k/2)) of
    its d flows -- optimal for those links.  Level 2: for each a, every inter-pod flow through aggregation
    index a picks its core (a, j) by an equitable colouring of the pod multigraph of those flows, so each
    aggregation-to-core link is as balanced as the level-1 split allows.  Returns a choice vector, or None when
    the fabric is not an intact generated fat-tree.
    """
    fab = prob.fabric
    if fab.failed_nodes or fab.failed_links or not len(prob.inter):
        return None
    if fab.kind == "graph":
        return _learned_fattree_colouring(prob)
    if fab.kind != "fattree":
        return None
    half = fab.k // 2
    idx = prob.inter
    src, dst = prob.src_pos[idx], prob.dst_pos[idx]
    pod_s, pod_d = src // half, dst // half
    nopt = prob.n_opts[idx]
    intra_pod = pod_s == pod_d
    if not (np.all(nopt[intra_pod] == half) and np.all(nopt[~intra_pod] == half * half)):
        return None
    agg = equitable_colouring(src, dst, half)
    choice = prob.initial_choice()
    # options are in node order: aggregation switches of the pod (intra-pod), cores core0.. (inter-pod),
    # core c = a * half + j sits above aggregation index a
    choice[idx[intra_pod]] = agg[intra_pod]
    inter = np.flatnonzero(~intra_pod)
    for a in range(half):
        sel = inter[agg[inter] == a]
        if len(sel):
            j = equitable_colouring(pod_s[sel], pod_d[sel], half)
            choice[idx[sel]] = a * half + j
    return choice


def fattree_structure(fab):
    """Recognise an intact k-ary fat-tree in a learned graph (arbitrary switch ids), or return None.

    Pods are the components left when the cores are removed; an aggregation switch's *index* is the set of
    cores it reaches (the same set for aggregation index a in every pod); a core's index within its set is its
    rank in node order. Returns (pod of each leaf, {(pod, a): aggregation switch}, {(a, j): core}, k/2).
    """
    if fab.n_tiers != 3:
        return None
    rank = fab.rank
    aggs = [n for n in fab.node_list if rank[n] == 1]
    cores = [n for n in fab.node_list if rank[n] == 2]
    pods = list(nx.connected_components(fab.graph.subgraph(fab.leaves + aggs)))
    k = len(pods)
    half = k // 2
    if k < 2 or k % 2 or len(cores) != half * half:
        return None
    groups = _core_groups(fab, aggs, set(cores), half)
    if groups is None:
        return None
    pods_found = _pods(fab, pods, groups, set(cores), half)
    if pods_found is None:
        return None
    pod_of, agg_of = pods_found
    core_of = {(a, j): core for a, grp in enumerate(groups)
               for j, core in enumerate(sorted(grp, key=fab.node_pos.get))}
    return pod_of, agg_of, core_of, half


def _core_groups(fab, aggs: list, cores: set, half: int) -> list[frozenset] | None:
    """The core sets the aggregation switches reach, by aggregation index (``half`` sets of ``half`` cores
    covering every core), or None."""
    pos = fab.node_pos
    uplinks = {frozenset(fab.graph.neighbors(a)) & cores for a in aggs}
    if frozenset() in uplinks:
        return None  # an aggregation switch lost every core link: not intact, the general search routes it
    groups = sorted(uplinks, key=lambda s: min(pos[c] for c in s))
    if len(groups) != half or any(len(grp) != half for grp in groups) or len(set().union(*groups)) != len(cores):
        return None
    return groups


def _pods(fab, pods: list, groups: list[frozenset], cores: set, half: int) -> tuple[dict, dict] | None:
    """(pod of each leaf, {(pod, aggregation index): switch}) when every pod is ``half`` leaves fully linked to
    ``half`` aggregation switches of distinct indices; else None."""
    g, rank, pos = fab.graph, fab.rank, fab.node_pos
    group_index = {grp: i for i, grp in enumerate(groups)}
    pod_of: dict = {}
    agg_of: dict = {}
    for p, members in enumerate(sorted(pods, key=lambda m: min(pos[n] for n in m))):
        p_leaves = [n for n in members if rank[n] == 0]
        p_aggs = [n for n in members if rank[n] == 1]
        if len(p_leaves) != half or len(p_aggs) != half:
            return None
        if any(set(g.neighbors(leaf)) != set(p_aggs) for leaf in p_leaves):
            return None
        pod_of.update((leaf, p) for leaf in p_leaves)
        for a in p_aggs:
            idx = group_index.get(frozenset(g.neighbors(a)) & cores)
            if idx is None or (p, idx) in agg_of:
                return None
            agg_of[(p, idx)] = a
    return pod_of, agg_of


def _learned_fattree_colouring(prob: Problem) -> np.ndarray | None:
    """``fattree_colouring`` for a fat-tree learned by the controller (switch ids are DPIDs, in any order)."""
    fab = prob.fabric
    structure = fattree_structure(fab)
    if structure is None:
        return None
    pod_of, agg_of, core_of, half = structure
    idx = prob.inter
    src_leaves = [prob._src_leaves[i] for i in idx.tolist()]
    dst_leaves = [prob._dst_leaves[i] for i in idx.tolist()]
    src = np.array([fab.leaf_pos[x] for x in src_leaves], dtype=np.int64)
    dst = np.array([fab.leaf_pos[x] for x in dst_leaves], dtype=np.int64)
    pod_s = np.array([pod_of[x] for x in src_leaves], dtype=np.int64)
    pod_d = np.array([pod_of[x] for x in dst_leaves], dtype=np.int64)
    agg = equitable_colouring(src, dst, half)
    core_j = np.zeros(len(idx), dtype=np.int64)
    inter_pod = np.flatnonzero(pod_s != pod_d)
    for a in range(half):
        sel = inter_pod[agg[inter_pod] == a]
        if len(sel):
            core_j[sel] = equitable_colouring(pod_s[sel], pod_d[sel], half)
    choice = prob.initial_choice()
    pos = fab.node_pos
    # in an intact fat-tree one path turns at each switch above a pair of leaves: its aggregation switch
    # (same pod) or core, so the option is found by its turning switch
    for n, i in enumerate(idx.tolist()):
        a = int(agg[n])
        turn = agg_of[(pod_s[n], a)] if pod_s[n] == pod_d[n] else core_of[(a, int(core_j[n]))]
        q = prob.sets[i].turning_at(pos[turn])
        if q < 0:
            return None
        choice[i] = q
    return choice
