"""Step 3 of mlroute: the load-vector search, on every fabric.

A flow moves from path P to path Q when ``max over Q\\P of (load+1) < max over P\\Q of load``: that strictly
lowers the sorted load vector, so the search terminates, with fewer links at the maximum, then at the next levels.
Moves are evaluated a block of flows at a time (numpy, or the compiled kernels where numba is available).
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.mlroute import budget as work

#: flows whose moves the load-vector search evaluates in one numpy pass.
SEARCH_BLOCK = 256


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
        lu, ld = loads[up], loads[dn]  # (leaves, S)
        # once per pair of ToRs (flows of rings share them: a few hundred pairs for thousands of flows)
        leaves = lu.shape[0]
        pair, at = np.unique(prob.src_pos[cand] * leaves + prob.dst_pos[cand], return_inverse=True)
        best = np.maximum(lu[pair // leaves], ld[pair % leaves]).min(1) + 1  # the current option cannot win:
        return best[at.reshape(-1)] < curmax  # its max is curmax
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


def local_search(prob: Problem, choice: np.ndarray, budget: work.Budget) -> tuple[np.ndarray, int]:
    """Load-vector descent (see the module doc) within ``budget``; returns (choice, moves)."""
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
    sides = _LeafSides.of(prob.fabric) if track else None
    evaluated = np.full(len(prob.flows), -1, dtype=np.int64)  # moves made when a flow was found without one
    touched_up = np.zeros(len(prob.fabric.leaves), dtype=np.int64)  # moves made when a load on the leaf's
    touched_down = np.zeros(len(prob.fabric.leaves), dtype=np.int64)  # up-paths / down-paths last changed
    stamp = 0
    while budget.left():
        flmax = _row_max(loads[mat[movable]])
        cand = movable[flmax >= 2]
        if not len(cand):
            break
        budget.charge(work.SCREENED * len(cand))
        cmax = flmax[flmax >= 2]
        ok = _screen(prob, cand, mat, loads, choice, cmax)
        todo = cand[ok][np.argsort(-cmax[ok], kind="stable")]
        moved_round = 0
        # The flows are taken in order, each moved when it has an improving option under the loads of the
        # moment. Gains are computed for a block of flows at once (the loads only change when one moves): the
        # first flow of the block with a positive gain moves, and the block restarts after it. A flow found
        # without a move is not evaluated again until a move changes a load on one of its options' links
        # (its source leaf's up-paths or its destination leaf's down-paths): its gains would be the same.
        pos, size = 0, SEARCH_BLOCK
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
            spent = work.OPTION * int(prob.n_opts[block[:k + 1]].sum())  # the kernel stops at the first mover
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
            if not budget.charge(spent):
                break
        moves += moved_round
        if not moved_round:
            break
    return choice, moves


class _LeafSides:
    """Which leaves' candidate paths cross a link: every option of a flow is an up-path of its source leaf
    joined to a down-path of its destination leaf (``Fabric._upset``)."""

    @classmethod
    def of(cls, fabric) -> _LeafSides:
        """The fabric's, built once per state of its failures (its memo is cleared on a change): every leaf's
        up-paths are read to build it, 10-25 ms per search at k=24."""
        hit = fabric._memo.get("leaf_sides")
        if hit is None:
            hit = fabric._memo["leaf_sides"] = cls(fabric)
        return hit

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
