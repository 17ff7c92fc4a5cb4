"""``mlroute``: the project's optimiser -- optimal max link load on 2-tier Clos, never worse than the greedy.

1. **Construct** with the paper's greedy (:mod:`.greedy`), so the result starts where the paper ends.
2. **Repair to the optimum on uniform 2-tier fabrics** (any number of failed spines), see
   :func:`aligned_repair`: a proper Delta-edge-colouring of the ToR multigraph (Konig) with colour
   c = layer * S + spine puts at most ceil(Delta/S) flows on every link -- the lower bound, since a ToR with
   Delta flows has S live uplinks -- and the links at that load only on the same few spines for every ToR, so
   overloaded uplinks and downlinks line up on the same flows.  The greedy's assignment seeds the colouring;
   only flows that do not fit are inserted by alternating paths.  (:func:`equitable_repair`, which instead
   balances every ToR on its own, is kept as an alternative: ``REPAIR = "equitable"``.)
3. **Load-vector search** (:func:`local_search`, every fabric): move a flow from path P to path Q when
   ``max over Q\\P of (load+1) < max over P\\Q of load`` (strictly lowers the sorted load vector, so it
   terminates): fewer links at the maximum, then at the next levels.
4. **Bottleneck search** (:func:`bottleneck_search`, uniform 2-tier): with the max load fixed, fewer flows
   crossing a link at the max (the flows held at the lowest rate).
5. **Polishing in the metric** (:func:`polish`, :func:`exhaustive_descent`): moves that the exact
   water-filling says are leximin-better (flow- or job-level), slowest flows first; skipped where provably
   useless (one flow per NIC, max load <= 2 on a uniform 2-tier fabric).
6. **Verify** with the metric: the result is compared with the greedy's (leximin, per ``objective``) and the
   better routing is returned -- so ``mlroute`` is never worse than ``greedy``, by construction.
7. ``previous`` paths: on a uniform 2-tier fabric spines are interchangeable, so colours are relabelled to
   maximise the flows that keep their spine (a linear assignment); then flows whose previous path is still a
   candidate move back when that does not raise the sorted load vector, and the stabilised routing is kept
   when the metric says it is at least as good.

Steps 3-5 are anytime: ``time_limit`` seconds if given, else twice the construction time (20 ms to 2 s).
``info`` reports what each step did, ``timing_ms`` per step, ``search_complete`` (no step was cut short by
the time limit: the same inputs would give the same routing again) and ``fixpoint``: run again on the same
inputs with this routing as ``previous``, mlroute would return this routing (a traffic engineer that applied it
need not search the next period on the same inputs; see :func:`_is_fixpoint`).
"""

from __future__ import annotations

import time

import networkx as nx
import numpy as np

from mlroute.routing import kernels
from mlroute.routing.incremental import RateState
from mlroute.routing.metric import WeightedJob, compare
from mlroute.routing.optimisers.assignment import max_assignment
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.colouring import BipartiteColouring, equitable_colouring
from mlroute.routing.optimisers.greedy import greedy_choice
from mlroute.tolerances import ABS_TOL, REL_TOL

#: without a time_limit, the improvement phases (after the greedy construction) may take this many times the
#: construction's own time, but at least MIN_SEARCH_BUDGET and at most MAX_SEARCH_BUDGET seconds: an anytime
#: search that scales with the instance instead of a fixed wall-clock allowance.
SEARCH_BUDGET_FACTOR = 2.0
MIN_SEARCH_BUDGET = 0.02
MAX_SEARCH_BUDGET = 2.0
#: the polishing looks at the slowest levels of rates first, at most this many per round.
MAX_LEVELS_PER_ROUND = 32
#: exact evaluations the polishing may spend on moving a faster flow out of a slow flow's way (only on
#: instances with at most HELPER_MAX_FLOWS inter-leaf flows: each evaluation is a full water-filling).
HELPER_TRIES = 16
HELPER_MAX_FLOWS = 400
#: instances with at most this many (flow, candidate path) pairs also get an exhaustive single-move descent.
EXHAUSTIVE_LIMIT = 600
#: flows whose moves the load-vector search evaluates in one numpy pass.
SEARCH_BLOCK = 256
#: how uniform 2-tier fabrics are repaired to the optimum: "aligned" (default) or "equitable".
REPAIR = "aligned"


def _rank_within(keys: np.ndarray) -> np.ndarray:
    """Rank of every element among the elements with the same key (input order); compiled where the kernels
    are (:func:`mlroute.routing.kernels.rank_within`, the same ranks), else :func:`_rank_within_reference`."""
    if kernels.enabled() and (not len(keys) or keys.min() >= 0):
        return kernels.rank_within(keys)
    return _rank_within_reference(keys)


def _rank_within_reference(keys: np.ndarray) -> np.ndarray:
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    start = np.empty(len(sk), dtype=bool)
    if len(sk):
        start[0] = True
        start[1:] = sk[1:] != sk[:-1]
    grp_start = np.maximum.accumulate(np.where(start, np.arange(len(sk)), 0))
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(sk)) - grp_start
    return ranks


def _inter_tor_flows(prob: Problem, choice: np.ndarray):
    """What both 2-tier repairs colour: (flow indices, live spines S, ToRs, source ToR, destination ToR, current
    spine) of the inter-ToR flows; None when there is nothing to repair (no such flow or no live spine)."""
    idx = prob.inter
    s = len(prob.fabric.live_spines())
    if not len(idx) or s == 0:
        return None
    return idx, s, len(prob.fabric.leaves), prob.src_pos[idx], prob.dst_pos[idx], choice[idx]


def equitable_repair(prob: Problem, choice: np.ndarray) -> tuple[np.ndarray, int]:
    """Make a uniform 2-tier choice per-ToR equitable (see module doc). Returns (choice, flows reinserted)."""
    inter = _inter_tor_flows(prob, choice)
    if inter is None:
        return choice, 0
    idx, s, nl, u, v, c = inter
    du = np.bincount(u, minlength=nl)
    dv = np.bincount(v, minlength=nl)
    lu, lv = -(-du // s), -(-dv // s)
    ru, rv = _rank_within(u * s + c), _rank_within(v * s + c)
    keep = (ru < lu[u]) & (rv < lv[v])
    if keep.all():
        return choice, 0
    ubase = np.concatenate(([0], np.cumsum(lu)[:-1]))
    vbase = np.concatenate(([0], np.cumsum(lv)[:-1]))
    col = BipartiteColouring(int(lu.sum()), int(lv.sum()), s)
    edge_flow = []
    for j in np.flatnonzero(keep).tolist():
        col.add_edge(int(ubase[u[j]] + ru[j]), int(vbase[v[j]] + rv[j]), int(c[j]))
        edge_flow.append(j)
    moved = np.flatnonzero(~keep).tolist()
    for j in moved:
        x0, y0 = int(ubase[u[j]]), int(vbase[v[j]])
        x = max(range(x0, x0 + int(lu[u[j]])), key=col.free_count_left)
        y = max(range(y0, y0 + int(lv[v[j]])), key=col.free_count_right)
        col.colour_edge(col.add_edge(x, y))
        edge_flow.append(j)
    out = choice.copy()
    out[idx[np.array(edge_flow)]] = np.array(col.colour, dtype=np.int64)
    return out, len(moved)


def _gains(opts: np.ndarray, cur: np.ndarray, disjoint: bool, loads: np.ndarray, dummy: int,
           positional: bool = False):
    """Move evaluation for one or many flows.

    opts: (..., P, K) option links, cur: (..., K) current links.  Returns (gain, newmax) of shape (..., P):
    gain = max over P\\Q of load - max over Q\\P of (load + 1); a move is improving iff gain > 0.
    ``positional``: a link that two options share is in the same column of both (``Fabric.is_graded``), so
    set membership is a column-wise comparison (K instead of K * K per option).
    """
    if disjoint:  # options share no link with each other (2-tier, intra-pod): Q\\P = Q, P\\Q = P
        newmax = loads[opts].max(-1) + 1
        gain = loads[cur].max(-1)[..., None] - newmax
        return gain, newmax
    if positional:
        same = opts == cur[..., None, :]  # option link in the current path <=> current link in the option
        pad = cur == dummy  # the padding columns are the same for every option of a flow
        newmax = np.where(same, -1, loads[opts] + 1).max(-1)
        oldmax = np.where(same | pad[..., None, :], -1, loads[cur][..., None, :]).max(-1)
        return oldmax - newmax, newmax
    sharedq = (opts[..., :, :, None] == cur[..., None, None, :]).any(-1) | (opts == dummy)
    newmax = np.where(sharedq, -1, loads[opts] + 1).max(-1)
    cur_in_q = (cur[..., None, :, None] == opts[..., :, None, :]).any(-1) | (cur == dummy)[..., None, :]
    oldmax = np.where(cur_in_q, -1, loads[cur][..., None, :]).max(-1)
    gain = oldmax - newmax
    return gain, newmax


def _kernel_mode(prob: Problem) -> int:
    """How :func:`_gains` compares an option with the current path on this fabric, as the kernels name it."""
    if prob.K == 2:
        return kernels.DISJOINT
    return kernels.POSITIONAL if prob.fabric.is_graded() else kernels.GENERAL


def _first_improving(prob: Problem, block: np.ndarray, mat: np.ndarray, choice: np.ndarray, loads: np.ndarray,
                     positional: bool) -> tuple[int, int]:
    """(position in ``block`` of the first flow with an improving move under ``loads``, its best option: the
    largest gain, then the smallest new max, then the first), or (len(block), -1). Compiled where numba is
    available (:func:`mlroute.routing.kernels.first_improving`, the same answer)."""
    disjoint = prob.K == 2
    if kernels.enabled():
        return kernels.first_improving(block, mat, choice, loads, prob.set_id, prob.option_rows(), prob.dummy,
                                       _kernel_mode(prob))
    opts_list = [prob.option_links(i) for i in block.tolist()]
    width = max(len(o) for o in opts_list)
    opts = np.empty((len(block), width, prob.K), dtype=np.int64)
    for k, o in enumerate(opts_list):
        opts[k, :len(o)] = o
        opts[k, len(o):] = o[0]  # padding options, masked below
    gain, _ = _gains(opts, mat[block], disjoint, loads, prob.dummy, positional)
    gain[np.arange(len(block)), choice[block]] = -1
    gain[np.arange(width)[None, :] >= prob.n_opts[block][:, None]] = -1
    hits = np.flatnonzero(gain.max(1) > 0)
    if not len(hits):
        return len(block), -1
    k = int(hits[0])
    i = int(block[k])
    g, newmax = _gains(opts_list[k], mat[i], disjoint, loads, prob.dummy, positional)
    g[choice[i]] = -1
    return k, int(np.lexsort((newmax, -g))[0])


def _row_max(a: np.ndarray) -> np.ndarray:
    """``a.max(1)`` of a (rows, K) integer array; column by column for the 2-tier K = 2 (numpy's reduction
    along a short axis costs more than the arithmetic)."""
    if a.shape[1] == 2:
        return np.maximum(a[:, 0], a[:, 1])
    return a.max(1)


def _screen(prob: Problem, cand: np.ndarray, mat: np.ndarray, loads: np.ndarray, choice: np.ndarray,
            curmax: np.ndarray) -> np.ndarray:
    """Which candidate flows have an improving move right now (vectorised over flows with equal option counts).
    ``curmax``: the largest load on each candidate's current path."""
    sidx = prob.fabric.spine_link_index()
    if sidx is not None:  # uniform 2-tier: option c of every inter-ToR flow is live spine c
        up, dn = sidx
        u, v = prob.src_pos[cand], prob.dst_pos[cand]
        lu, ld = loads[up], loads[dn]  # (leaves, S)
        best = np.maximum(lu[u], ld[v]).min(1) + 1  # the current option cannot win: its max is curmax
        return best < curmax
    chunks = _option_chunks(prob, cand)
    if chunks is None:
        return np.ones(len(cand), dtype=bool)
    if kernels.enabled():  # the same test, compiled
        return kernels.improving(cand, mat, choice, loads, prob.set_id, prob.option_rows(), prob.dummy,
                                 _kernel_mode(prob))
    out = np.zeros(len(cand), dtype=bool)
    for part, fl, opts in chunks:
        gain, _ = _gains(opts, mat[fl], prob.K == 2, loads, prob.dummy, prob.fabric.is_graded())
        gain[np.arange(len(fl)), choice[fl]] = -1
        out[part] = (gain > 0).any(1)
    return out


def _option_chunks(prob: Problem, flows: np.ndarray):
    """Iterate (positions in ``flows``, flow ids, their options as an (m, P, K) link array) in memory-bounded
    chunks of flows with the same number of options P; None when the option table is too big to stack."""
    offsets, table = prob.option_table()
    if table is None:
        return None

    def chunks():
        nopt = prob.n_opts[flows]
        for p in np.unique(nopt).tolist():
            sel = np.flatnonzero(nopt == p)
            # (the column-wise comparisons of a graded fabric need K, not K * K, values per option)
            step = max(1, 200_000 // max(p * prob.K * (1 if prob.fabric.is_graded() else prob.K), 1))
            for lo in range(0, len(sel), step):
                part = sel[lo:lo + step]
                fl = flows[part]
                yield part, fl, table[offsets[prob.set_id[fl]][:, None] + np.arange(p)[None, :]]

    return chunks()


def aligned_repair(prob: Problem, choice: np.ndarray) -> tuple[np.ndarray, int]:
    """Repair a uniform 2-tier choice to the optimum ceil(Delta/S) with the overloads aligned (module doc).

    Colours 0..Delta-1, colour c = layer * S + spine: a proper Delta-edge-colouring of the ToR multigraph
    (Konig) puts at most ceil(Delta/S) flows on a link, and links at that load only on spines below
    r = Delta - S (ceil(Delta/S) - 1) -- the same spines for every ToR, so a flow on an overloaded uplink
    tends to be on an overloaded downlink too, and fewer flows share the bottleneck.  The greedy's choice
    seeds the colouring: a flow keeps its spine with layer = its rank among the flows of its (ToR, spine)
    uplink when that is also its rank on the downlink; only the others are inserted by alternating paths
    (their own spine's layers first).  Returns (choice, flows reinserted).
    """
    inter = _inter_tor_flows(prob, choice)
    if inter is None:
        return choice, 0
    idx, s, nl, u, v, c = inter
    delta = int(max(np.bincount(u, minlength=nl).max(), np.bincount(v, minlength=nl).max()))
    ru, rv = _rank_within(u * s + c), _rank_within(v * s + c)
    colour = ru * s + c
    keep = (ru == rv) & (colour < delta)
    if keep.all():
        return choice, 0
    col = BipartiteColouring(nl, nl, delta)
    edge_flow = []
    for j in np.flatnonzero(keep).tolist():
        col.add_edge(int(u[j]), int(v[j]), int(colour[j]))
        edge_flow.append(j)
    moved = np.flatnonzero(~keep).tolist()
    for j in moved:
        own = int(c[j])
        col.colour_edge(col.add_edge(int(u[j]), int(v[j])), prefer=range(own, delta, s))
        edge_flow.append(j)
    out = choice.copy()
    out[idx[np.array(edge_flow)]] = np.array(col.colour, dtype=np.int64) % s
    return out, len(moved)


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


def _moved(mat: np.ndarray, i: int, links: np.ndarray) -> np.ndarray:
    """A copy of the link matrix with flow ``i`` on ``links``."""
    out = mat.copy()
    out[i] = links
    return out


def _better_move(prob, choice, mat, rates, i, q, opts, cap, jobs, objective):
    """(choice, link matrix, rates) with flow ``i`` moved to option ``q``, if that keeps the max-load cap and is
    strictly better in the metric (a full water-filling); else None."""
    trial = choice.copy()
    trial[i] = q
    tmat = _moved(mat, i, opts[q])
    if _over_cap(prob, tmat, cap):
        return None
    r2 = prob.rates(trial, matrix=tmat)
    if compare(r2, rates, jobs, objective) <= 0:
        return None
    return trial, tmat, r2


def local_search(prob: Problem, choice: np.ndarray, deadline: float) -> tuple[np.ndarray, int]:
    """Load-vector descent (see module doc); returns (choice, moves)."""
    choice = choice.copy()
    if not len(prob.inter):
        return choice, 0
    mat = prob.link_matrix(choice)
    loads = prob.loads(choice)
    dummy = prob.dummy
    movable = prob.inter[prob.n_opts[prob.inter] > 1]
    if not len(movable):
        return choice, 0
    moves = 0
    positional = prob.fabric.is_graded()
    track = prob.K > 2  # 2-tier: a flow's options are a few links, evaluating them costs less than tracking
    sides = _LeafSides(prob.fabric) if track else None
    evaluated = np.full(len(prob.flows), -1, dtype=np.int64)  # moves made when a flow was found without one
    touched_up = np.zeros(len(prob.fabric.leaves), dtype=np.int64)  # moves made when a load on the leaf's
    touched_down = np.zeros(len(prob.fabric.leaves), dtype=np.int64)  # up-paths / down-paths last changed
    stamp = 0
    while time.perf_counter() < deadline:
        flmax = _row_max(loads[mat[movable]])
        cand = movable[flmax >= 2]
        if not len(cand):
            break
        cmax = flmax[flmax >= 2]
        ok = _screen(prob, cand, mat, loads, choice, cmax)
        todo = cand[ok][np.argsort(-cmax[ok], kind="stable")]
        moved_round = 0
        # The flows are taken in order, each moved when it has an improving option under the loads of the
        # moment. Gains are computed for a block of flows at once (the loads only change when one moves): the
        # first flow of the block with a positive gain moves, and the block restarts after it. A flow found
        # without a move is not evaluated again until a move changes a load on one of its options' links
        # (its source leaf's up-paths or its destination leaf's down-paths): its gains would be the same.
        pos, checked, size = 0, 0, SEARCH_BLOCK
        while pos < len(todo):
            window = todo[pos:pos + (8 if track else 1) * size]
            if track:
                seen = evaluated[window]
                fresh = np.flatnonzero((seen < 0) | (touched_up[prob.src_pos[window]] > seen)
                                       | (touched_down[prob.dst_pos[window]] > seen))[:size]
            else:
                fresh = np.arange(len(window))
            if not len(fresh):
                pos += len(window)
                continue
            block = window[fresh]
            k, q = _first_improving(prob, block, mat, choice, loads, positional)
            if track:
                evaluated[block[:k]] = stamp
            if k < len(block):
                i = int(block[k])
                own = prob.option_links(i)
                changed = np.concatenate((mat[i], own[q])) if track else None
                loads[mat[i]] -= 1
                loads[own[q]] += 1
                loads[dummy] = 0
                mat[i] = own[q]
                choice[i] = q
                moved_round += 1
                if track:
                    assert sides is not None and changed is not None
                    stamp += 1
                    touched_up[sides.up_leaves(changed)] = stamp
                    touched_down[sides.down_leaves(changed)] = stamp
                pos += int(fresh[k]) + 1
                size = max(16, size // 4)  # moves come in runs: smaller blocks waste less after one
            else:
                pos += int(fresh[-1]) + 1
                size = min(SEARCH_BLOCK, 2 * size)
            if pos // 32 > checked:  # the deadline is read every 32 flows
                checked = pos // 32
                if time.perf_counter() >= deadline:
                    break
        moves += moved_round
        if not moved_round:
            break
    return choice, moves


class _LeafSides:
    """Which leaves' candidate paths cross a link: every option of a flow is an up-path of its source leaf
    joined to a down-path of its destination leaf (``Fabric._upset``)."""

    def __init__(self, fabric):
        ups, downs, up_owner, down_owner = [], [], [], []
        for n, leaf in enumerate(fabric.leaves):
            sets = list(fabric._upset(leaf).values())
            if not sets:
                continue
            u = np.unique(np.concatenate([s.up.ravel() for s in sets]))
            d = np.unique(np.concatenate([s.down.ravel() for s in sets]))
            ups.append(u)
            downs.append(d)
            up_owner.append(np.full(len(u), n, dtype=np.int64))
            down_owner.append(np.full(len(d), n, dtype=np.int64))
        self._up = _by_link(ups, up_owner)
        self._down = _by_link(downs, down_owner)

    def up_leaves(self, links: np.ndarray) -> np.ndarray:
        """Leaves with an up-path over one of ``links``."""
        return _owners(self._up, links)

    def down_leaves(self, links: np.ndarray) -> np.ndarray:
        """Leaves with a down-path over one of ``links``."""
        return _owners(self._down, links)


def _by_link(links: list, owners: list) -> tuple[np.ndarray, np.ndarray]:
    """(links sorted, their owners) for looking up the owners of a few links by bisection."""
    if not links:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    flat, own = np.concatenate(links), np.concatenate(owners)
    order = np.argsort(flat, kind="stable")
    return flat[order], own[order]


def _owners(table: tuple[np.ndarray, np.ndarray], links: np.ndarray) -> np.ndarray:
    flat, own = table
    lo, hi = np.searchsorted(flat, links, "left"), np.searchsorted(flat, links, "right")
    return np.concatenate([own[a:b] for a, b in zip(lo.tolist(), hi.tolist())])


def _share_scores(opts, cur, free, n_ge, dummy, positional: bool = False):
    """(m, P) share each option would offer (see :func:`polish`); opts (m, P, K), cur (m, K); ``positional`` as
    in :func:`_gains`."""
    if positional:
        shared = opts == cur[..., None, :]
    else:
        shared = (opts[..., :, :, None] == cur[..., None, None, :]).any(-1)
    f = free[opts]
    n = n_ge[opts]
    share = np.where(shared, f / np.maximum(n, 1), f / (n + 1))
    share = np.where(opts == dummy, np.inf, share)
    return share.min(-1)


def _promising(prob, at, mat, choice, free, n_ge, lam) -> np.ndarray:
    """Flows among ``at`` with some other option scoring above ``lam`` (vectorised when possible)."""
    sidx = prob.fabric.spine_link_index()
    if sidx is not None:  # uniform 2-tier: options are the live spines, disjoint from each other
        up, dn = sidx
        su = free[up] / (n_ge[up] + 1)
        sd = free[dn] / (n_ge[dn] + 1)
        score = np.minimum(su[prob.src_pos[at]], sd[prob.dst_pos[at]])
        score[np.arange(len(at)), choice[at]] = -np.inf
        return (score > lam * (1 + REL_TOL)).any(1)
    if kernels.enabled():  # the same scores, compiled (and without the option table a big instance lacks)
        return kernels.promising(at, mat, choice, free, n_ge, lam * (1 + REL_TOL), prob.set_id, prob.option_rows(),
                                 prob.dummy, prob.fabric.is_graded())
    chunks = _option_chunks(prob, at)
    if chunks is None:  # every flow is scored in the polishing's loop instead, with the same outcome
        return np.ones(len(at), dtype=bool)
    out = np.zeros(len(at), dtype=bool)
    for part, fl, opts in chunks:
        score = _share_scores(opts, mat[fl], free, n_ge, prob.dummy, prob.fabric.is_graded())
        score[np.arange(len(fl)), choice[fl]] = -np.inf
        out[part] = (score > lam * (1 + REL_TOL)).any(1)
    return out


def rate_levels(rates: np.ndarray, limit: int) -> list[float]:
    """The ``limit`` lowest distinct levels among ``rates``, ascending: rates within ``REL_TOL`` of a level's
    lowest rate are that level (float noise apart, flows of one bottleneck have one rate whatever the capacity
    unit; rounding to RATE_DECIMALS, as before, kept noise apart at capacities in bit/s)."""
    out: list[float] = []
    for v in np.unique(rates).tolist():
        if not out or v > out[-1] * (1 + REL_TOL) + (ABS_TOL if out[-1] == 0 else 0.0):
            if len(out) == limit:
                break
            out.append(v)
    return out


def _over_cap(prob: Problem, tmat: np.ndarray, cap: int | None) -> bool:
    """True if a trial routing puts more than ``cap`` flows on some fabric link."""
    if cap is None:
        return False
    ld = np.bincount(tmat.ravel(), minlength=prob.dummy + 1)
    ld[prob.dummy] = 0
    return int(ld.max()) > cap


def polish(prob: Problem, choice: np.ndarray, rates: np.ndarray, deadline: float, jobs=None,
           objective: str = "flow", mat: np.ndarray | None = None, cap: int | None = None
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """Rate-aware descent in the metric itself (leximin over max-min fair rates).

    Flows below their non-blocking (NIC-limited) rate are taken slowest first.  For a flow at rate x, every
    candidate path is scored by the share it would offer: on each link it would newly cross,
    (capacity - rate of the link's flows slower than x) / (1 + its flows at x or faster); on links it keeps,
    the same without the +1.  Paths scoring above x are tried best first and a move is kept only if the exact
    water-filling of the whole routing is leximin-better (flow- or job-level) and no fabric link then carries
    more than ``cap`` flows (mlroute passes the max link load reached so far: the metric may prefer piling
    NIC-limited flows onto one link, which would give up the optimal max link load).
    Returns (choice, rates, moves).
    """
    choice = choice.copy()
    if not len(prob.inter):
        return choice, rates, 0
    mat = prob.link_matrix(choice) if mat is None else mat.copy()
    run = _Polish(prob, choice, mat, rates, deadline, jobs, objective, cap)
    while run.time_left() and run.round():
        pass
    return run.choice, run.rates, run.moves


class _Polish:
    """The state of one :func:`polish` descent; every step that keeps a move returns True."""

    def __init__(self, prob: Problem, choice: np.ndarray, mat: np.ndarray, rates: np.ndarray, deadline: float,
                 jobs, objective: str, cap: int | None):
        self.prob, self.choice, self.mat, self.rates = prob, choice, mat, rates
        self.deadline, self.jobs, self.objective, self.cap = deadline, jobs, objective, cap
        self.dummy = prob.dummy
        self.caps = np.append(prob.fabric.capacities[: prob.dummy], np.inf)
        self.ideal = prob.ideal_rates()
        self.movable = np.zeros(len(prob.flows), dtype=bool)
        self.movable[prob.inter[prob.n_opts[prob.inter] > 1]] = True
        self.moves = 0
        self.tried: set = set()
        self.helpers_left = HELPER_TRIES
        self.loads = prob.loads(matrix=mat)  # flows per switch link: each <= cap, which every kept move keeps
        rows, caps, dem = prob.rate_inputs(choice, mat)
        self.state = RateState(rows, caps, np.full(len(rates), np.inf) if dem is None else dem, rates)
        # Levels whose last pass kept no move, with the fabric links their outcome reads (every option of the
        # flows at the level). Without the helper moves a level's pass reads only the rates on those links, the
        # flows at the level and their paths, and every move it tried is in ``tried``: until a kept move
        # changes one of these, another pass would try nothing and keep nothing, so it is skipped.
        self.dead: dict[float, np.ndarray] = {}
        self.skip_dead = len(prob.inter) > HELPER_MAX_FLOWS

    def time_left(self) -> bool:
        return time.perf_counter() < self.deadline

    def round(self) -> bool:
        """One pass over the rate levels of the slow flows, slowest first, until one move is kept."""
        slow = np.flatnonzero(self.movable & (self.rates < self.ideal * (1 - REL_TOL)))
        if not len(slow):
            return False
        for lam in rate_levels(self.rates[slow], MAX_LEVELS_PER_ROUND):
            if not self.time_left():
                break
            if self.skip_dead and lam in self.dead:
                continue
            if self._level(slow, lam):
                return True
            if self.skip_dead and self.time_left():  # a pass cut short by the deadline proves nothing
                self.dead[lam] = self._watched(slow[np.abs(self.rates[slow] - lam) <= REL_TOL * max(lam, ABS_TOL)])
        return False

    def _watched(self, at: np.ndarray) -> np.ndarray:
        """Mask of the fabric links of every option of the flows ``at``."""
        mask = np.zeros(self.dummy + 1, dtype=bool)
        offsets, table = self.prob.option_table()
        for f in at.tolist():
            if table is not None:
                o = int(offsets[self.prob.set_id[f]])
                mask[table[o:o + int(self.prob.n_opts[f])]] = True
            else:
                mask[self.prob.option_links(f)] = True
        mask[self.dummy] = False
        return mask

    def _forget_dead(self, old_rates: np.ndarray, old_row: np.ndarray, i: int) -> None:
        """A move was kept: revive the dead levels whose inputs it changed (see ``dead``). At level ``lam`` a
        link's inputs are the rate of its flows below ``lam`` and the count of the others, so a flow whose rate
        changed matters there only if its old or new rate is below ``lam``; the moved flow also changes links."""
        if not self.dead:
            return
        changed = np.flatnonzero(self.rates != old_rates)
        changed = changed[changed != i]
        lower = np.minimum(old_rates[changed], self.rates[changed])
        rows = self.mat[changed]
        moved = np.setxor1d(old_row, self.mat[i])  # links flow i left or joined
        i_low = min(old_rates[i], self.rates[i])
        i_links = np.concatenate((old_row, self.mat[i]))
        rates = np.concatenate((old_rates[changed], self.rates[changed], old_rates[[i]], self.rates[[i]]))
        for lam in list(self.dead):
            if (np.abs(rates - lam) <= REL_TOL * max(lam, ABS_TOL)).any():  # a flow joins or leaves the level
                del self.dead[lam]
                continue
            thr = lam * (1 - REL_TOL)
            watch = self.dead[lam]
            if watch[moved].any() or (i_low < thr and watch[i_links].any()) or watch[rows[lower < thr]].any():
                del self.dead[lam]

    def _level(self, slow: np.ndarray, lam: float) -> bool:
        """Move a slow flow at rate ``lam`` to a better-sharing path, else a faster flow out of its way."""
        rates, mat, dummy = self.rates, self.mat, self.dummy
        at = slow[np.abs(rates[slow] - lam) <= REL_TOL * max(lam, ABS_TOL)]
        flat = mat.ravel()
        rr = None
        if kernels.enabled():  # the same sums, without the (flows x K) temporaries
            below, n_ge = kernels.level_loads(mat, rates, lam * (1 - REL_TOL), dummy + 1)
        else:
            rr = np.repeat(rates, mat.shape[1])
            below = np.bincount(flat, weights=np.where(rr < lam * (1 - REL_TOL), rr, 0.0), minlength=dummy + 1)
            n_ge = np.bincount(flat, weights=(rr >= lam * (1 - REL_TOL)).astype(float), minlength=dummy + 1)
        free = self.caps - below
        promising = _promising(self.prob, at, mat, self.choice, free, n_ge, lam)
        if self._move_slow(at[promising], lam, free, n_ge):
            return True
        if self.helpers_left > 0 and len(self.prob.inter) <= HELPER_MAX_FLOWS:
            return self._move_helpers(at, lam, flat, np.repeat(rates, mat.shape[1]) if rr is None else rr)
        return False

    def _over_cap(self, i: int, row: np.ndarray) -> bool:
        """Would flow ``i`` on ``row`` put more than ``cap`` flows on a fabric link? (Only the links it newly
        takes gain a flow, and every load is within the cap now.)"""
        if self.cap is None:
            return False
        own = set(self.mat[i].tolist())
        loads, cap, dummy = self.loads, self.cap, self.dummy
        return any(loads[x] >= cap for x in row.tolist() if x not in own and x != dummy)

    def _keep(self, i: int, q: int, opts: np.ndarray) -> bool:
        """Move flow ``i`` to option ``q`` if that is strictly better within the cap: its rates re-filled around
        the move only (``state``), and the move committed to it when kept."""
        row = opts[q]
        if self._over_cap(i, row):
            return False
        state = self.state
        r2 = state.trial(i, self.prob.rate_row(i, row))
        order = state.leximin(r2) if self.objective == "flow" else compare(r2, self.rates, self.jobs, self.objective)
        if order <= 0:
            return False
        state.commit()
        old_rates, old_row = self.rates, self.mat[i].copy()
        self.loads[old_row] -= 1
        self.loads[row] += 1
        self.loads[self.dummy] = 0
        self.mat[i] = row
        self.choice[i] = q
        self.rates = r2
        self.moves += 1
        self._forget_dead(old_rates, old_row, i)
        return True

    def _move_slow(self, flows: np.ndarray, lam: float, free: np.ndarray, n_ge: np.ndarray) -> bool:
        """Try each flow's options that score above ``lam``, best first; the first kept move ends the step."""
        for i in flows.tolist():
            if not self.time_left():
                break
            opts = self.prob.option_links(i)
            score = _share_scores(opts[None], self.mat[i][None], free, n_ge, self.dummy,
                                  self.prob.fabric.is_graded())[0]
            score[self.choice[i]] = -np.inf
            for q in np.argsort(-score, kind="stable").tolist():
                if score[q] <= lam * (1 + REL_TOL):
                    break
                key = (i, q, int(self.choice[i]))
                if key in self.tried:
                    continue
                self.tried.add(key)
                if self._keep(i, q, opts):
                    return True
        return False

    def _move_helpers(self, at: np.ndarray, lam: float, flat: np.ndarray, rr: np.ndarray) -> bool:
        """No slow flow at this level can move: try moving a faster flow off a saturated fabric link of a slow
        one, onto a path where it fits without taking anything from anyone (at most HELPER_TRIES tries)."""
        mat, dummy = self.mat, self.dummy
        link_sum = np.bincount(flat, weights=np.where(np.isfinite(rr), rr, 0.0), minlength=dummy + 1)
        sat = link_sum >= self.caps * (1 - REL_TOL)
        sat[dummy] = False
        for i in at.tolist():
            if self.helpers_left <= 0 or not self.time_left():
                break
            for link in mat[i][sat[mat[i]]].tolist():
                if self.helpers_left <= 0:
                    break
                users = np.flatnonzero((mat == link).any(1) & self.movable & (self.rates > lam * (1 + REL_TOL)))
                for g in users.tolist():
                    if self._move_helper(g, link_sum):
                        return True
                    if self.helpers_left <= 0:
                        break
        return False

    def _move_helper(self, g: int, link_sum: np.ndarray) -> bool:
        """Try one untried option of flow ``g`` on which it fits in the spare capacity."""
        gopts = self.prob.option_links(g)
        caps, mat = self.caps, self.mat
        fits = ((link_sum[gopts] + self.rates[g] <= caps[gopts] * (1 + REL_TOL)) | (gopts == self.dummy)
                | (gopts == mat[g][None, :].repeat(1, 0)[:, :gopts.shape[1]])).all(1)
        fits[self.choice[g]] = False
        for q in np.flatnonzero(fits).tolist():
            key = ("h", g, q, int(self.choice[g]))
            if key in self.tried:
                continue
            self.tried.add(key)
            self.helpers_left -= 1
            if self._over_cap(g, gopts[q]):
                continue  # not a try of this flow's one option: the next one may fit the cap
            return self._keep(g, q, gopts)  # one option per helper flow
        return False


def bottleneck_search(prob: Problem, choice: np.ndarray, deadline: float) -> tuple[np.ndarray, int]:
    """Uniform 2-tier: fewer flows at the bottleneck with the max link load M unchanged.

    A flow is *hot* if it crosses a link carrying M flows (with equal capacities and no slower NIC, exactly
    the flows that get the lowest rate c/M).  Moving a hot flow to another spine (never above M) frees the
    flows that were hot only through the link it leaves and heats the cold flows of a link it brings to M.
    Candidates are screened for all hot flows at once with per-link counts (flows hot only through that link,
    cold flows), then each is checked exactly on the four links involved and applied only if the number of
    hot flows strictly drops.  Returns (choice, moves).
    """
    sidx = prob.fabric.spine_link_index()
    idx = prob.inter
    if sidx is None or not len(idx):
        return choice, 0
    choice = choice.copy()
    up_i, dn_i = sidx
    u, v = prob.src_pos[idx], prob.dst_pos[idx]
    nlinks = prob.dummy + 1
    moves = 0
    members: dict | None = None
    while time.perf_counter() < deadline:
        c = choice[idx]
        a, b = up_i[u, c], dn_i[v, c]  # each inter flow's uplink and downlink
        screen = kernels.bottleneck_screen if kernels.enabled() else _bottleneck_screen
        loads, m, hj, promising = screen(a, b, nlinks, up_i, dn_i, u, v, c)
        rows = np.flatnonzero(promising.any(1))
        if not len(rows):
            break
        if members is None:
            members = {}
        members.clear()
        for j, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            members.setdefault(x, []).append(j)
            members.setdefault(y, []).append(j)
        ld_list = loads.tolist()
        aa, bb = a.tolist(), b.tolist()
        moved = 0
        for row in rows.tolist():
            j = int(hj[row])
            for t in np.flatnonzero(promising[row]).tolist():
                na, nb = int(up_i[u[j], t]), int(dn_i[v[j], t])
                if ld_list[na] + 1 > m or ld_list[nb] + 1 > m or aa[j] == na:
                    continue
                oa, ob = aa[j], bb[j]
                affected = set(members.get(oa, ())) | set(members.get(ob, ())) | \
                    set(members.get(na, ())) | set(members.get(nb, ())) | {j}
                before = _hot_count(affected, ld_list, aa, bb, m)
                ld_list[oa] -= 1
                ld_list[ob] -= 1
                ld_list[na] += 1
                ld_list[nb] += 1
                aa[j], bb[j] = na, nb
                after = _hot_count(affected, ld_list, aa, bb, m)
                if after < before:
                    members[oa].remove(j)
                    members[ob].remove(j)
                    members.setdefault(na, []).append(j)
                    members.setdefault(nb, []).append(j)
                    choice[idx[j]] = t
                    moved += 1
                    break
                ld_list[oa] += 1
                ld_list[ob] += 1
                ld_list[na] -= 1
                ld_list[nb] -= 1
                aa[j], bb[j] = oa, ob
            if time.perf_counter() >= deadline:
                break
        moves += moved
        if not moved:
            break
    return choice, moves


def _bottleneck_screen(a, b, nlinks: int, up_i, dn_i, u, v, c):
    """The bottleneck search's screen (the specification of ``kernels.bottleneck_screen``): link loads, the max
    load M, the hot flows whose move would free someone, and per such flow the spines worth trying (below M on
    both sides, not its own, and heating fewer cold flows than it frees). No hot flow: M < 2 or none to free."""
    loads = np.bincount(np.concatenate((a, b)), minlength=nlinks)
    m = int(loads.max())
    none = np.zeros(0, dtype=np.int64), np.zeros((0, up_i.shape[1]), dtype=bool)
    if m < 2:
        return (loads, m, *none)
    hot_a, hot_b = loads[a] == m, loads[b] == m
    hot = hot_a | hot_b
    # flows hot only through one link: freed when that link drops to m-1
    only = np.bincount(np.concatenate((a[hot_a & ~hot_b], b[hot_b & ~hot_a])), minlength=nlinks)
    cold = np.bincount(np.concatenate((a[~hot], b[~hot])), minlength=nlinks)
    hj = np.flatnonzero(hot)
    # gain of moving j: flows freed from its hot links (other than j itself)
    gain = np.where(hot_a[hj], only[a[hj]] - (hot_a[hj] & ~hot_b[hj]), 0) + \
        np.where(hot_b[hj], only[b[hj]] - (hot_b[hj] & ~hot_a[hj]), 0)
    keep = gain > 0  # a move must free someone (its cost, the cold flows it heats, is >= 0)
    hj, gain = hj[keep], gain[keep]
    if not len(hj):
        return (loads, m, *none)
    lu, ld = loads[up_i[u[hj]]], loads[dn_i[v[hj]]]  # (h, S)
    cost = np.where(lu == m - 1, cold[up_i[u[hj]]], 0) + np.where(ld == m - 1, cold[dn_i[v[hj]]], 0)
    ok = (lu < m) & (ld < m)
    ok[np.arange(len(hj)), c[hj]] = False
    return loads, m, hj, ok & (cost < gain[:, None])


def _hot_count(flows: set, loads: list, up: list, down: list, m: int) -> int:
    """How many of ``flows`` cross a link at load ``m`` (their uplink ``up[g]`` or downlink ``down[g]``)."""
    return sum(1 for g in flows if loads[up[g]] == m or loads[down[g]] == m)


def exhaustive_descent(prob: Problem, choice: np.ndarray, rates: np.ndarray, deadline: float, jobs=None,
                       objective: str = "flow", cap: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Small instances: try every single-flow move (slowest flows first) with the exact metric, take the first
    that is leximin-better, repeat until none is (a local optimum of the metric) or time runs out."""
    movable = prob.inter[prob.n_opts[prob.inter] > 1]
    mat = prob.link_matrix(choice)
    choice = choice.copy()
    moves = 0
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for i in movable[np.argsort(rates[movable], kind="stable")].tolist():
            opts = prob.option_links(i)
            for q in range(len(opts)):
                if q == choice[i]:
                    continue
                better = _better_move(prob, choice, mat, rates, i, q, opts, cap, jobs, objective)
                if better is not None:
                    choice, mat, rates = better
                    moves += 1
                    improved = True
                    break
            if improved or time.perf_counter() >= deadline:
                break
    return choice, rates, moves


def _relabel_to_previous(prob: Problem, choice: np.ndarray, prev: np.ndarray) -> np.ndarray:
    s = len(prob.fabric.live_spines())
    idx = prob.inter[prev[prob.inter] >= 0]
    if not len(idx) or s < 2:
        return choice
    w = np.zeros((s, s))
    np.add.at(w, (choice[idx], prev[idx]), 1)
    perm = max_assignment(w)  # scipy's linear_sum_assignment, without importing scipy.optimize
    out = choice.copy()
    out[prob.inter] = perm[choice[prob.inter]]
    return out


def _stabilise(prob: Problem, choice: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Flows back on their previous option, in flow order, where that does not raise the sorted load vector
    (max over the links it would add of load + 1 <= max over the links it would leave of load)."""
    choice = choice.copy()
    mat = prob.link_matrix(choice)
    loads = prob.loads(matrix=mat).tolist()
    dummy = prob.dummy
    offsets, table = prob.option_table()
    back = prob.inter[(prev[prob.inter] >= 0) & (prev[prob.inter] != choice[prob.inter])]
    for i in back.tolist():
        p = int(prev[i])
        cur = set(mat[i].tolist())
        new_row = table[offsets[prob.set_id[i]] + p] if table is not None else prob.option_links(i)[p]
        new = set(new_row.tolist())
        cur.discard(dummy)
        new.discard(dummy)
        new_max = max((loads[x] + 1 for x in new - cur), default=-1)
        old_max = max((loads[x] for x in cur - new), default=-1)
        if new_max <= old_max:
            for x in cur:
                loads[x] -= 1
            for x in new:
                loads[x] += 1
            mat[i] = new_row
            choice[i] = p
    return choice


def _one_flow_per_nic(prob: Problem) -> bool:
    n = len(prob.flows)
    return len({f.src for f in prob.flows}) == n and len({f.dst for f in prob.flows}) == n


class _Laps:
    """Milliseconds per named step since the previous one (``info["timing_ms"]``)."""

    def __init__(self, start: float):
        self.timing: dict = {}
        self._mark = start

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timing[name] = round((now - self._mark) * 1e3, 3)
        self._mark = now


def optimise(fabric, flows, *, seed=0, objective="flow", previous=None, time_limit=None):
    start = time.perf_counter()
    lap = _Laps(start)
    prob = flows if isinstance(flows, Problem) else Problem(fabric, flows)
    lap("problem")
    g_choice, g_loads = greedy_choice(prob)
    info = {"greedy_max_link_load": int(g_loads.max()) if len(g_loads) else 0}
    lap("greedy")
    now = time.perf_counter()
    budget = float(time_limit) if time_limit is not None else \
        min(MAX_SEARCH_BUDGET, max(MIN_SEARCH_BUDGET, SEARCH_BUDGET_FACTOR * (now - start)))
    deadline = now + budget
    bound = prob.degree_bound()
    uniform = bound is not None
    prev = None if previous is None else prob.choice_from_paths(previous)
    choice, constructed = _construct(prob, g_choice, bound, prev, info, lap)
    start = choice
    choice = _search(prob, choice, uniform, deadline, info)
    lap("search")
    jobs = prob.jobs if objective == "job" else None
    changed = prev is not None or not np.array_equal(choice, g_choice)
    choice, r_new, loads = _polish_phase(prob, choice, changed, uniform, deadline, jobs, objective, info, lap)
    if prev is not None:
        choice, r_new, loads = _keep_previous(prob, choice, r_new, loads, prev, jobs, objective)
        lap("stabilise")
    if not np.array_equal(choice, g_choice):
        r_greedy = prob.rates(g_choice)
        if compare(r_new, r_greedy, jobs, objective) < 0:
            choice, r_new, loads = g_choice, r_greedy, g_loads
            info["kept_greedy"] = True
        lap("verify")
    info["max_link_load"] = int(loads.max()) if len(loads) else 0
    info["search_complete"] = time.perf_counter() < deadline  # every phase ended on its own, none was cut short
    info["fixpoint"] = bool(info["search_complete"] and not info.get("kept_greedy")
                            and _is_fixpoint(prob, constructed, start, choice, uniform))
    info["timing_ms"] = lap.timing
    return prob.routing(choice, "mlroute", objective, rates=r_new, **info)


def _is_fixpoint(prob: Problem, constructed: np.ndarray, start: np.ndarray, final: np.ndarray,
                 uniform: bool) -> bool:
    """Would a run on the same inputs with ``previous`` = ``final`` return ``final``? (Given a complete search
    that did not fall back to the greedy.) Only steps 2 and 7 read ``previous``:

    * step 2's relabelling: a second run starts from ``constructed`` relabelled towards ``final``; if that is
      this run's ``start``, it repeats this run's search and polishing move for move (they are deterministic
      and were not cut short) and reaches the same routing before step 7;
    * step 7 then moves back, in flow order, exactly the flows this run's step 7 moved back (each under the
      same loads: the attempts that failed here changed nothing), and accepts the result as this run did.

    On fabrics where step 2 does not relabel (not uniform 2-tier) the first point always holds."""
    if not uniform:
        return True
    if np.array_equal(final, constructed) and np.array_equal(start, constructed) and (final[prob.inter] >= 0).all():
        # relabelled towards itself every colour keeps its flows (a maximum assignment of a diagonal weight
        # matrix fixes every colour in use): no assignment to solve
        return True
    return bool(np.array_equal(_relabel_to_previous(prob, constructed, final), start))


def _construct(prob: Problem, choice: np.ndarray, bound: int | None, prev: np.ndarray | None, info: dict,
               lap: _Laps) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2: the greedy's routing, replaced by the fat-tree colouring where it applies, repaired to the
    optimal max load on a uniform 2-tier fabric (colours relabelled towards ``prev``). Returns (the routing,
    the same before the relabelling)."""
    uniform = bound is not None
    tree = fattree_colouring(prob) if not uniform else None
    if tree is not None:
        choice = tree
        info["construction"] = "fat-tree colouring"
        lap("colouring")
    if uniform:
        choice, reinserted = (aligned_repair if REPAIR == "aligned" else equitable_repair)(prob, choice)
        info["lower_bound"] = bound
        info["repaired_flows"] = reinserted
        constructed = choice
        if prev is not None:
            choice = _relabel_to_previous(prob, choice, prev)
        lap("repair")
        return choice, constructed
    return choice, choice


def _search(prob: Problem, choice: np.ndarray, uniform: bool, deadline: float, info: dict) -> np.ndarray:
    """Steps 3-4: load-vector search, then (uniform 2-tier) the bottleneck search and a final load-vector pass."""
    if len(prob.inter) and prob.loads(choice).max() <= 1:
        # no link carries two flows: both searches look only at flows on such links, so neither has a move
        info["search_moves"] = 0
        if uniform:
            info["bottleneck_moves"] = 0
        return choice
    choice, moves = local_search(prob, choice, deadline)
    info["search_moves"] = moves
    if uniform:
        choice, bmoves = bottleneck_search(prob, choice, deadline)
        info["bottleneck_moves"] = bmoves
        if bmoves:  # leave no load-vector move behind (the polishing skip rule relies on it)
            choice, more = local_search(prob, choice, deadline)
            info["search_moves"] += more
    return choice


def _polish_phase(prob: Problem, choice: np.ndarray, changed: bool, uniform: bool, deadline: float, jobs,
                  objective: str, info: dict, lap: _Laps) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Step 5 where it can help: (choice, rates or None when nobody needs them, link loads). ``changed``: the
    routing differs from the greedy's, or there are previous paths (the later steps compare rates then)."""
    mat = prob.link_matrix(choice)
    loads = prob.loads(choice)
    max_load = loads.max(initial=0)
    weighted = any(isinstance(j, WeightedJob) for j in jobs or ())  # the proof below is for equal jobs only
    if uniform and prob.demands is None and max_load <= 2 and not weighted and _one_flow_per_nic(prob):
        # Provably nothing for the polishing to find: every NIC carries one flow, so rates are c/2 on the links
        # with two flows and c elsewhere; a flow at c/2 sits on a link of a ToR with more flows than spines,
        # all of whose links carry a flow at >= c/2, so no other spine offers it more than c/2.
        info["polish_skipped"] = True
        return choice, (prob.rates(choice, matrix=mat) if changed else None), loads
    if (prob.demands is not None or max_load > 1) and time.perf_counter() < deadline:
        # some fabric link is shared: the metric may still improve beyond the load vector
        r_new = prob.rates(choice, matrix=mat)
        cap = int(max_load)
        choice, r_new, pm = polish(prob, choice, r_new, deadline, jobs, objective, mat=mat, cap=cap)
        if int(prob.n_opts[prob.inter].sum()) <= EXHAUSTIVE_LIMIT:
            choice, r_new, em = exhaustive_descent(prob, choice, r_new, deadline, jobs, objective, cap=cap)
            pm += em
        info["polish_moves"] = pm
        if pm:
            loads = prob.loads(matrix=prob.link_matrix(choice))
        lap("polish")
        return choice, r_new, loads
    return choice, (prob.rates(choice, matrix=mat) if changed else None), loads


def _keep_previous(prob: Problem, choice: np.ndarray, r_new, loads: np.ndarray, prev: np.ndarray, jobs,
                   objective: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 7: flows back on their previous paths where that is at least as good in the metric."""
    stable = _stabilise(prob, choice, prev)
    if not np.array_equal(stable, choice):
        r_stable = prob.rates(stable)
        if compare(r_stable, r_new, jobs, objective) >= 0:
            return stable, r_stable, prob.loads(stable)
    return choice, r_new, loads
