"""Step 5 of mlroute: polishing in the metric itself (leximin over max-min fair rates, flow- or job-level).

The load vector is only a proxy for the rates; these moves are kept only when the exact water-filling says they
are leximin-better, slowest flows first, within the max link load already reached.
"""

from __future__ import annotations

import numpy as np

from mlroute.routing import kernels
from mlroute.routing.incremental import RateState
from mlroute.routing.metric import compare
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.mlroute import budget as work
from mlroute.routing.optimisers.mlroute.search import _option_chunks
from mlroute.tolerances import ABS_TOL, REL_TOL

#: the polishing looks at the slowest levels of rates first, at most this many per round.
MAX_LEVELS_PER_ROUND = 32
#: exact evaluations the polishing may spend on moving a faster flow out of a slow flow's way (only on
#: instances with at most HELPER_MAX_FLOWS inter-leaf flows: each evaluation is a full water-filling).
HELPER_TRIES = 16
HELPER_MAX_FLOWS = 400


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
    unit; rounding to 12 decimals, as before, kept noise apart only at capacities in bit/s)."""
    out: list[float] = []
    for v in np.unique(rates).tolist():
        if not out or v > out[-1] * (1 + REL_TOL) + (ABS_TOL if out[-1] == 0 else 0.0):
            if len(out) == limit:
                break
            out.append(v)
    return out


def option_links_mask(prob: Problem, flows: np.ndarray) -> np.ndarray:
    """Mask of the fabric links (``dummy`` excluded) of every option of ``flows``, read from the option rows."""
    mask = np.zeros(prob.dummy + 1, dtype=bool)
    base, down, up, opts, rows, table = prob.option_rows()
    s = np.unique(prob.set_id[flows])
    n_up, n_all = up[s] * opts[s], rows[s] * opts[s]
    starts = np.concatenate((base[s], down[s] + n_up))  # each set's up rows, then its down rows
    lens = np.concatenate((n_up, n_all - n_up))
    first = np.cumsum(lens) - lens
    mask[table[np.repeat(starts - first, lens) + np.arange(int(lens.sum()))]] = True
    mask[prob.dummy] = False
    return mask


def _over_cap(prob: Problem, tmat: np.ndarray, cap: int | None) -> bool:
    """True if a trial routing puts more than ``cap`` flows on some fabric link."""
    if cap is None:
        return False
    ld = np.bincount(tmat.ravel(), minlength=prob.dummy + 1)
    ld[prob.dummy] = 0
    return int(ld.max()) > cap


def polish(prob: Problem, choice: np.ndarray, rates: np.ndarray, budget: work.Budget, jobs=None,
           objective: str = "flow", mat: np.ndarray | None = None, cap: int | None = None
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """Rate-aware descent in the metric itself (leximin over max-min fair rates).

    Flows below their non-blocking (NIC-limited) rate are taken slowest first.  For a flow at rate x, every
    candidate path is scored by the share it would offer: on each link it would newly cross,
    (capacity - rate of the link's flows slower than x) / (1 + its flows at x or faster); on links it keeps,
    the same without the +1.  Paths scoring above x are tried best first and a move is kept only if the exact
    water-filling of the whole routing is leximin-better (flow- or job-level) and no fabric link then carries
    more than ``cap`` flows (mlroute passes the max link load reached so far: the metric may prefer piling
    NIC-limited flows onto one link, which would give up the optimal max link load). Stops when ``budget`` runs
    out. Returns (choice, rates, moves).
    """
    choice = choice.copy()
    if not len(prob.inter):
        return choice, rates, 0
    mat = prob.link_matrix(choice) if mat is None else mat.copy()
    run = _Polish(prob, choice, mat, rates, budget, jobs, objective, cap)
    while run.time_left() and run.round():
        pass
    return run.choice, run.rates, run.moves


class _Polish:
    """The state of one :func:`polish` descent; every step that keeps a move returns True."""

    def __init__(self, prob: Problem, choice: np.ndarray, mat: np.ndarray, rates: np.ndarray, budget: work.Budget,
                 jobs, objective: str, cap: int | None):
        self.prob, self.choice, self.mat, self.rates = prob, choice, mat, rates
        self.budget, self.jobs, self.objective, self.cap = budget, jobs, objective, cap
        self.dummy = prob.dummy
        self.caps = np.append(prob.fabric.capacities[: prob.dummy], np.inf)
        self.ideal = prob.ideal_rates()
        self.movable = np.zeros(len(prob.flows), dtype=bool)
        self.movable[prob.inter[prob.n_opts[prob.inter] > 1]] = True
        self.moves = 0
        self.tried: set = set()
        self.helpers_left = HELPER_TRIES
        self.loads = prob.loads(matrix=mat)  # flows per switch link: each <= cap, which every kept move keeps
        self._state: RateState | None = None  # built at the first trial (a polishing may try no move at all)
        # Levels whose last pass kept no move, with the flows at the level: the fabric links their outcome reads
        # are every option of those flows (``_watched``, built when a kept move first asks). Without the helper
        # moves a level's pass reads only the rates on those links, the flows at the level and their paths, and
        # every move it tried is in ``tried``: until a kept move changes one of these, another pass would try
        # nothing and keep nothing, so it is skipped.
        self.dead: dict[float, np.ndarray] = {}
        self._watch: dict[float, np.ndarray] = {}
        self.skip_dead = len(prob.inter) > HELPER_MAX_FLOWS

    @property
    def state(self) -> RateState:
        """The incremental rates of the routing in force (made from the routing the polishing started with:
        before the first trial no move is kept)."""
        if self._state is None:
            rows, caps, dem = self.prob.rate_inputs(self.choice, self.mat)
            self._state = RateState(rows, caps, np.full(len(self.rates), np.inf) if dem is None else dem, self.rates)
        return self._state

    def time_left(self) -> bool:
        return self.budget.left()

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
            if self.skip_dead and self.time_left():  # a pass cut short by the budget proves nothing
                self.dead[lam] = slow[np.abs(self.rates[slow] - lam) <= REL_TOL * max(lam, ABS_TOL)]
                self._watch.pop(lam, None)
        return False

    def _watched(self, lam: float) -> np.ndarray:
        """Mask of the fabric links of every option of the flows of the dead level ``lam``."""
        hit = self._watch.get(lam)
        if hit is None:
            hit = self._watch[lam] = option_links_mask(self.prob, self.dead[lam])
        return hit

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
            watch = self._watched(lam)
            if watch[moved].any() or (i_low < thr and watch[i_links].any()) or watch[rows[lower < thr]].any():
                del self.dead[lam]

    def _level(self, slow: np.ndarray, lam: float) -> bool:
        """Move a slow flow at rate ``lam`` to a better-sharing path, else a faster flow out of its way."""
        rates, mat, dummy = self.rates, self.mat, self.dummy
        at = slow[np.abs(rates[slow] - lam) <= REL_TOL * max(lam, ABS_TOL)]
        self.budget.charge(work.LEVEL_FLOW * len(rates))  # the level's link sums read every flow
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
        self.budget.charge(work.TRIAL + work.FILLED * state.filled + work.TRIAL_FLOW * len(r2))
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
                if not self.time_left():
                    return False
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


def exhaustive_descent(prob: Problem, choice: np.ndarray, rates: np.ndarray, budget: work.Budget, jobs=None,
                       objective: str = "flow", cap: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Small instances: try every single-flow move (slowest flows first) with the exact metric, take the first
    that is leximin-better, repeat until none is (a local optimum of the metric) or ``budget`` runs out."""
    movable = prob.inter[prob.n_opts[prob.inter] > 1]
    mat = prob.link_matrix(choice)
    choice = choice.copy()
    moves = 0
    improved = True
    while improved and budget.left():
        improved = False
        for i in movable[np.argsort(rates[movable], kind="stable")].tolist():
            opts = prob.option_links(i)
            for q in range(len(opts)):
                if q == choice[i]:
                    continue
                budget.charge(work.FULL_FILL * len(prob.flows))
                better = _better_move(prob, choice, mat, rates, i, q, opts, cap, jobs, objective)
                if better is not None:
                    choice, mat, rates = better
                    moves += 1
                    improved = True
                    break
            if improved or not budget.left():
                break
    return choice, rates, moves
