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
    tables = _structure_tables(fab)
    if tables is None:
        return None
    pod, agg_at, core_at, half = tables
    idx = prob.inter
    src, dst = prob.src_pos[idx], prob.dst_pos[idx]
    pod_s, pod_d = pod[src], pod[dst]
    agg = equitable_colouring(src, dst, half)
    core_j = np.zeros(len(idx), dtype=np.int64)
    inter_pod = np.flatnonzero(pod_s != pod_d)
    for a in range(half):
        sel = inter_pod[agg[inter_pod] == a]
        if len(sel):
            core_j[sel] = equitable_colouring(pod_s[sel], pod_d[sel], half)
    # in an intact fat-tree one path turns at each switch above a pair of leaves: its aggregation switch
    # (same pod) or core, so the option is found by its turning switch
    q = _turning_options(prob, idx, np.where(pod_s == pod_d, agg_at[pod_s, agg], core_at[agg, core_j]))
    if q is None:
        return None
    choice = prob.initial_choice()
    choice[idx] = q
    return choice


def _structure_tables(fab):
    """:func:`fattree_structure` as arrays of node positions, kept with the fabric's other derived facts (its memo
    is cleared when an element fails or returns): (pod of each leaf position, aggregation switch of (pod, index),
    core of (aggregation index, core index), k/2), or None."""
    if "fattree_tables" not in fab._memo:
        structure = fattree_structure(fab)
        out = None
        if structure is not None:
            pod_of, agg_of, core_of, half = structure
            pos = fab.node_pos
            pod = np.array([pod_of[leaf] for leaf in fab.leaves], dtype=np.int64)
            agg_at = np.array([[pos[agg_of[(p, a)]] for a in range(half)] for p in range(2 * half)], dtype=np.int64)
            core_at = np.array([[pos[core_of[(a, j)]] for j in range(half)] for a in range(half)], dtype=np.int64)
            out = (pod, agg_at, core_at, half)
        fab._memo["fattree_tables"] = out
    return fab._memo["fattree_tables"]


def _turning_options(prob: Problem, idx: np.ndarray, turn: np.ndarray) -> np.ndarray | None:
    """The option of each flow ``idx[n]`` that turns at node position ``turn[n]`` (``PathSet.turning_at``), or
    None when some flow has none or several: looked up per group of path sets with equal turning switches."""
    sid = prob.set_id[idx]
    uniq, inv = np.unique(sid, return_inverse=True)
    groups: dict = {}
    reps: list[np.ndarray] = []
    gid = np.empty(len(uniq), dtype=np.int64)
    for n, s in enumerate(uniq.tolist()):
        ps = prob.unique_sets[s]
        g = groups.get(ps.turn_group)
        if g is None:
            g = groups[ps.turn_group] = len(reps)
            reps.append(ps.turn)
        gid[n] = g
    flow_group = gid[inv]
    q = np.empty(len(idx), dtype=np.int64)
    for g, turns in enumerate(reps):
        sel = np.flatnonzero(flow_group == g)
        lo = np.searchsorted(turns, turn[sel], "left")
        if np.any(np.searchsorted(turns, turn[sel], "right") - lo != 1):
            return None
        q[sel] = lo
    return q
