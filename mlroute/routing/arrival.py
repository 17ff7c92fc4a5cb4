"""Newcomers placed beside a routing in force, with the proof that no placement keeping it does better.

A job's arrival would otherwise wait for the full search over every pin in force. The traffic engineer
(controller/decide/te.py) places the newcomers here instead and takes that without the search when it is
certified, by the metric's layer 1 (max-min fair rates are the leximin-largest feasible allocation):

* The *relaxed* rates (:func:`relaxed_rates`): the routing in force with the newcomers crossing no switch link,
  only their NICs. Every placement of the newcomers that keeps the rest adds constraints to that problem, so
  none gives a leximin-better flow rate vector; and the newcomers get their non-blocking rates there.
* :func:`place_beside` puts each newcomer on a path whose links have room for its relaxed rate over the relaxed
  rates already there (the least crowded such path, the greedy's rule; nothing in force moves). Then the relaxed
  rates are feasible on the new routing, so its own max-min rates are leximin at least as good: as good as any
  placement that keeps the routing in force, hence as the relaxed bound itself.
* :func:`certified` checks that on the water-filled rates: leximin at least the relaxed ones, and every
  newcomer at its relaxed (non-blocking) rate.

What it does not say: that moving flows in force could not do better (the periodic decision still searches from
the routing in force); nor anything when a newcomer finds no room: a collision (four full-rate 4-host rings on a
k=4 fat-tree), or a fabric already full at the non-blocking rates (a 64-host ring beside 10k random elephants at
k=24: every path of its first flow crosses three or four full links). Such a newcomer still gets the option it
overfills least (``fits`` False): the caller judges that placement against the routing in force, or searches.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import metric
from mlroute.routing.optimisers.base import Problem
from mlroute.tolerances import ABS_TOL, REL_TOL


def relaxed_rates(prob: Problem, choice: np.ndarray, newcomer: np.ndarray) -> np.ndarray:
    """Max-min fair rates of ``prob``'s flows with the others on ``choice`` and the ``newcomer`` flows (a mask)
    on their NICs only: an upper bound, in leximin order, of every placement of the newcomers."""
    kept = np.where(newcomer, -1, choice)
    full, caps, dem = prob.rate_inputs(kept)  # a newcomer's row: no link at all, demand 0 ...
    up, down = prob.nic
    live = newcomer & (prob.n_opts > 0)  # ... here its NICs and its demand (an unroutable one stays at 0)
    full[live, 0], full[live, -1] = up[live], down[live]
    dem = np.full(len(kept), np.inf) if dem is None else dem.copy()
    dem[live] = np.inf if prob.demands is None else prob.demands[live]
    return metric.water_fill(full, caps, dem)


def certified(rates: np.ndarray, relaxed: np.ndarray, newcomer: np.ndarray) -> bool:
    """Whether a placement's max-min ``rates`` are leximin at least the ``relaxed`` ones and every newcomer has
    its relaxed rate (up to the metric's tolerance)."""
    floor = relaxed[newcomer] * (1 - REL_TOL) - ABS_TOL
    return bool(np.all(rates[newcomer] >= floor)) and metric.leximin_compare(rates, relaxed) >= 0


def place_beside(prob: Problem, choice: np.ndarray, newcomer: np.ndarray,
                 relaxed: np.ndarray) -> tuple[np.ndarray, bool]:
    """``choice`` with the ``newcomer`` flows placed, highest relaxed rate first, each on its least crowded
    option (fewest flows on its busiest link, the greedy's rule) with room for its ``relaxed`` rate over the
    relaxed rates already there; a newcomer with no such option goes where it overfills its busiest link least.
    Returns (the choice, whether every newcomer had room: then the relaxed rates are feasible on it)."""
    placer = _Placer(prob, np.where(newcomer, -1, choice), relaxed)
    todo = np.flatnonzero(newcomer & (prob.n_opts > 0))
    fits = True
    for i in todo[np.argsort(-relaxed[todo], kind="stable")].tolist():
        fits = placer.place(i) and fits
    return placer.choice, fits


class _Placer:
    """The choice being built, and the relaxed rates and the flows on every switch link (the padding link: none,
    and room without end)."""

    def __init__(self, prob: Problem, choice: np.ndarray, rates: np.ndarray) -> None:
        self.prob, self.choice, self.rates = prob, choice.copy(), rates
        self.matrix = prob.link_matrix(self.choice)
        dummy = prob.dummy
        self.load = np.bincount(self.matrix.ravel(), weights=np.repeat(rates, self.matrix.shape[1]),
                                minlength=dummy + 1)
        self.count = prob.loads(self.choice)
        self.load[dummy], self.count[dummy] = 0.0, 0
        self.room = np.append(prob.fabric.capacities[:dummy], np.inf) * (1 + REL_TOL) + ABS_TOL

    def place(self, i: int) -> bool:
        """Flow ``i`` (unplaced) on its least crowded option with room for its rate; without one, on the option
        whose busiest link it fills least (relaxed load over room). Returns whether it had room."""
        options, rate = self.prob.option_links(i), self.rates[i]  # (options, K), padded with prob.dummy
        if not options.shape[1]:  # no flow crosses a switch link (K = 0)
            self.choice[i] = 0
            return True
        loads, room = self.load[options] + rate, self.room[options]
        fits = (loads <= room).all(axis=1)
        if fits.any():
            best = int(np.where(fits, self.count[options].max(axis=1), np.iinfo(np.int64).max).argmin())
        else:  # fill first, then the flows there (lexsort: the last key is the primary one)
            best = int(np.lexsort((self.count[options].max(axis=1), (loads / room).max(axis=1)))[0])
        links = options[best][options[best] != self.prob.dummy]
        self.load[links] += rate
        self.count[links] += 1
        self.choice[i] = best
        return bool(fits.any())
