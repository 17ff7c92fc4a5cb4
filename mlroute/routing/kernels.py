"""Compiled inner loops of the routing core (numba), each the same computation as its pure-Python reference.

Why: a TE decision over 10k elephants on a k=24 fat-tree spent most of its CPU in loops that are sequential by
nature, or that numpy can only run over large temporaries: the event-driven water-filling (a heap of link
levels, ``metric._water_fill_events``), the paper's greedy (each flow placed under the loads its predecessors
left, ``greedy.greedy_choice``), the load-vector search's move evaluation and screen (``optimisers.mlroute.search``:
a block of flows x 144 candidate paths), the polishing's per-level link sums and screen, and the leximin
comparison of sorted rate vectors (it can stop at the first difference). Compiled they run 10-20x faster: the
decision at k=24 went from 1.5-2.5 s to 0.7-1.0 s (docs/scaling.md). A new set of elephants also runs the
fat-tree colouring's edge colouring, Hedera's demand estimate and the link matrix of a choice here. The
simulator fills tens of thousands of small components per run, where numpy's per-round temporaries cost more
than the arithmetic: the level-by-level rounds of ``metric._water_fill_csr`` are compiled too (ECMP on the
paper's largest quick cell: 28 -> 11 s).

Same result to the bit: each kernel performs the same IEEE operations in the same order as its reference
(the heap pops entries in the same order because no key is in it twice, so the order of pops is the total order
of (level, key); sums are accumulated in the same flow order), and the tests compare both on random
instances. The references stay the specification, and the fallback wherever numba is missing or
``MLROUTE_KERNELS=python`` is set (a benchmark's A/B, a platform without numba wheels).

Compiled code is cached next to this file (numba's ``cache=True``: the first process compiles, 2-4 s, the
next ones load it, ~0.3 s); the optimiser worker warms the kernels when it starts (:func:`warm`), before its
first decision.
"""

from __future__ import annotations

import os

import numpy as np

from mlroute.tolerances import ABS_TOL, REL_TOL, TINY

_compiled = None  # the kernels' namespace once compiled, False when unavailable (numba missing or disabled)


def enabled() -> bool:
    """True when the compiled kernels are in use (numba importable and not disabled by MLROUTE_KERNELS)."""
    return _kernels() is not None


def _kernels():
    global _compiled
    if _compiled is None:
        if os.environ.get("MLROUTE_KERNELS", "").lower() == "python":
            _compiled = False
        else:
            try:
                _compiled = _compile()
            except ImportError:
                _compiled = False
    return _compiled or None


def warm() -> bool:
    """Compile (or load from the cache) every kernel on a tiny instance: the first decision does not pay."""
    k = _kernels()
    if k is None:
        return False
    flat = np.array([0, 1, 1], dtype=np.int64)
    water_fill_events(flat, np.array([0, 2, 3], dtype=np.int64), np.array([1.0, 1.0]), np.array([np.inf, 0.3]),
                      np.zeros(2), np.ones(2, dtype=bool), np.zeros(2))
    rank_within(np.array([1, 0, 1], dtype=np.int64))
    two = np.array([[0, 1], [2, 3]], dtype=np.int64)
    bottleneck_screen(np.array([0, 0], dtype=np.int64), np.array([2, 2], dtype=np.int64), 5, two, two,
                      np.array([0, 0], dtype=np.int64), np.array([1, 1], dtype=np.int64), np.zeros(2, dtype=np.int64))
    water_fill_rounds(flat, np.array([0, 0, 1], dtype=np.int64), np.array([1.0, 1.0]), np.array([np.inf, 0.3]),
                      np.zeros(2), np.ones(2, dtype=bool), np.zeros(2), 8)
    rows = (np.array([0], dtype=np.int64), np.array([0], dtype=np.int64), np.array([1], dtype=np.int64),
            np.array([2], dtype=np.int64), np.array([2], dtype=np.int64), np.array([0, 1, 2, 3], dtype=np.int64))
    greedy_place(np.array([0], dtype=np.int64), np.array([0], dtype=np.int64), rows, np.zeros(1, dtype=np.int64),
                 np.zeros(5, dtype=np.int64))
    args = (np.array([0], dtype=np.int64), np.array([[0, 2]], dtype=np.int64), np.zeros(1, dtype=np.int64))
    for mode in (DISJOINT, POSITIONAL, GENERAL):
        first_improving(*args, np.zeros(5, dtype=np.int64), np.zeros(1, dtype=np.int64), rows, 4, mode)
        improving(*args, np.zeros(5, dtype=np.int64), np.zeros(1, dtype=np.int64), rows, 4, mode)
    for positional in (True, False):
        promising(*args, np.ones(5), np.zeros(5), 0.1, np.zeros(1, dtype=np.int64), rows, 4, positional)
    level_loads(np.array([[0, 1]], dtype=np.int64), np.array([0.5]), 0.4, 2)
    cmp_presorted(np.array([0.5, np.inf]), np.array([0.5, np.inf]))
    edge_colours(np.array([0, 0], dtype=np.int64), np.array([0, 1], dtype=np.int64), 1, 2, 2)
    one = np.array([0, 1], dtype=np.int64)
    hedera_demands(one, one[:1], one, one[:1], 1, 10)
    fill_link_matrix(one[:1], one[:1], one[:1], rows, np.zeros((1, 2), dtype=np.int64))
    return True


def water_fill_events(flat, starts, caps, dem, rate, active, frozen_load) -> None:
    """``metric._water_fill_events`` compiled: flow i crosses ``flat[starts[i]:starts[i + 1]]``; ``rate``,
    ``active`` and ``frozen_load`` are updated in place (every flow ends frozen)."""
    k = _kernels()
    assert k is not None, "water_fill_events without the compiled kernels"
    k.water_fill_events(np.ascontiguousarray(flat, dtype=np.int64), np.ascontiguousarray(starts, dtype=np.int64),
                        np.ascontiguousarray(caps, dtype=np.float64), np.ascontiguousarray(dem, dtype=np.float64),
                        rate, active, frozen_load, REL_TOL, TINY)


def water_fill_rounds(flat, owner, caps, dem, rate, active, frozen_load, max_rounds: int) -> bool:
    """``metric._water_fill_csr``'s level-by-level rounds compiled (``rate``, ``active`` and ``frozen_load``
    updated in place); False when it stopped after ``max_rounds`` rounds with flows still active, for the
    event-driven version to finish. The simulator fills tens of thousands of small components per run, where
    numpy's per-round temporaries cost more than the arithmetic."""
    k = _kernels()
    assert k is not None, "water_fill_rounds without the compiled kernels"
    return bool(k.water_fill_rounds(np.ascontiguousarray(flat, dtype=np.int64),
                                    np.ascontiguousarray(owner, dtype=np.int64),
                                    np.ascontiguousarray(caps, dtype=np.float64),
                                    np.ascontiguousarray(dem, dtype=np.float64), rate, active, frozen_load,
                                    REL_TOL, TINY, int(max_rounds)))


def rank_within(keys: np.ndarray) -> np.ndarray:
    """``optimisers.mlroute.repair._rank_within`` compiled: each element's rank among the elements with its key, in
    input order (keys are small non-negative integers: ToR x spines + spine). One pass instead of a stable sort
    of every inter-ToR flow, twice per decision."""
    k = _kernels()
    assert k is not None, "rank_within without the compiled kernels"
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    return k.rank_within(keys, int(keys.max()) + 1 if len(keys) else 0)


def bottleneck_screen(a, b, nlinks: int, up_i, dn_i, u, v, c):
    """``optimisers.mlroute.bottleneck._bottleneck_screen`` compiled: (link loads, max load M, hot flows worth moving,
    (hot flows, spines) promising moves). A dozen numpy passes over every inter-ToR flow per decision before."""
    k = _kernels()
    assert k is not None, "bottleneck_screen without the compiled kernels"
    loads, m, hj, promising = k.bottleneck_screen(*(np.ascontiguousarray(x, dtype=np.int64) for x in (a, b)),
                                                  int(nlinks), *(np.ascontiguousarray(x, dtype=np.int64)
                                                                 for x in (up_i, dn_i, u, v, c)))
    return loads, int(m), hj, promising


def greedy_place(order, set_id, option_rows, choice, loads) -> None:
    """``greedy.greedy_choice``'s placement loop compiled. Flow ``i`` (in ``order``) has path set ``set_id[i]``,
    whose links ``option_rows`` (``Problem.option_rows()``) holds. Each flow takes the first option minimising
    the largest load on its links, whose loads then rise by one; ``choice`` and ``loads`` are updated in place."""
    k = _kernels()
    assert k is not None, "greedy_place without the compiled kernels"
    k.greedy_place(order, set_id, *option_rows, choice, loads)


def level_loads(mat, rates, threshold: float, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """The polishing's view of the links at one rate level (``optimisers.mlroute.polish._Polish._level``): per link
    of the (flows, K) link matrix ``mat``, the summed rate of its flows below ``threshold`` and (as a float) the
    number of the others, summed in flow order like ``np.bincount``."""
    k = _kernels()
    assert k is not None, "level_loads without the compiled kernels"
    return k.level_loads(mat, rates, float(threshold), int(n_links))


def cmp_presorted(a: np.ndarray, b: np.ndarray) -> int:
    """``metric.cmp_presorted`` compiled (the leximin order of two ascending rate vectors of equal length):
    it stops at the first position that differs, where the reference compares every position."""
    k = _kernels()
    assert k is not None, "cmp_presorted without the compiled kernels"
    return int(k.cmp_presorted(np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64),
                               REL_TOL, ABS_TOL))


#: :func:`first_improving`'s modes, as ``optimisers.mlroute.search._gains`` tells them apart
DISJOINT, POSITIONAL, GENERAL = 0, 1, 2


def first_improving(block, mat, choice, loads, set_id, option_rows, dummy: int, mode: int) -> tuple[int, int]:
    """The load-vector search's move evaluation (``optimisers.mlroute.search._gains`` over a block of flows) compiled:
    (position in ``block`` of the first flow with an improving move, its best option), or (len(block), -1).
    An option's gain is the max load over the current path's links it leaves minus the max of (load + 1) over
    the links it newly takes; the best option has the largest gain, then the smallest new max, then the lowest
    index (``np.lexsort((newmax, -gain))[0]``). ``option_rows``: ``Problem.option_rows()``."""
    k = _kernels()
    assert k is not None, "first_improving without the compiled kernels"
    b, q = k.first_improving(block, mat, choice, loads, set_id, *option_rows, dummy, mode)
    return int(b), int(q)


def improving(flows, mat, choice, loads, set_id, option_rows, dummy: int, mode: int) -> np.ndarray:
    """:func:`first_improving`'s test for every one of ``flows`` (the search's screen): which have a move."""
    k = _kernels()
    assert k is not None, "improving without the compiled kernels"
    return k.improving(flows, mat, choice, loads, set_id, *option_rows, dummy, mode)


def promising(flows, mat, choice, free, n_ge, threshold: float, set_id, option_rows, dummy: int,
              positional: bool) -> np.ndarray:
    """The polishing's screen (``optimisers.mlroute.polish._promising``) compiled: which of ``flows`` have another
    option whose share score (the least, over its links, of ``free / max(n_ge, 1)`` on a link it keeps and
    ``free / (n_ge + 1)`` on one it would take) is above ``threshold``."""
    k = _kernels()
    assert k is not None, "promising without the compiled kernels"
    return k.promising(flows, mat, choice, free, n_ge, float(threshold), set_id, *option_rows, dummy,
                       bool(positional))


def edge_colours(xs, ys, n_left: int, n_right: int, k: int) -> np.ndarray:
    """``bipartite_colouring``'s edge-by-edge colouring compiled (the fat-tree colouring's, 10k edges a
    decision at k=24): the colour of every edge ``xs[e]``-``ys[e]`` with ``k`` colours, edges inserted in order
    (every vertex's degree at most ``k``)."""
    k_ = _kernels()
    assert k_ is not None, "edge_colours without the compiled kernels"
    return k_.edge_colours(np.ascontiguousarray(xs, dtype=np.int64), np.ascontiguousarray(ys, dtype=np.int64),
                           int(n_left), int(n_right), int(k))


def hedera_demands(s_start, s_members, r_start, r_members, n: int, max_rounds: int) -> np.ndarray:
    """``demand._estimate`` compiled (Hedera's estimator, 17 ms in Python for 10k elephants): flow indices grouped
    by sender (``s_members[s_start[g]:s_start[g + 1]]``) and by receiver, in the reference's order."""
    k = _kernels()
    assert k is not None, "hedera_demands without the compiled kernels"
    return k.hedera_demands(*(np.ascontiguousarray(x, dtype=np.int64) for x in (s_start, s_members, r_start,
                                                                             r_members)),
                            int(n), int(max_rounds), ABS_TOL)


def fill_link_matrix(flows, ch, set_id, option_rows, out) -> None:
    """``Problem._link_matrix`` from the option rows, compiled: row ``flows[j]`` of ``out`` gets the links of
    option ``ch[j]`` (a column per hop in numpy: 3-4 ms per routing at 10k elephants, six routings a decision)."""
    k = _kernels()
    assert k is not None, "fill_link_matrix without the compiled kernels"
    k.fill_link_matrix(np.ascontiguousarray(flows, dtype=np.int64), np.ascontiguousarray(ch, dtype=np.int64),
                       set_id, *option_rows, out)


def _compile():
    """The compiled kernels (numba is imported here only: ``import mlroute`` does not need it)."""
    from mlroute.routing import _numba_kernels

    return _numba_kernels
