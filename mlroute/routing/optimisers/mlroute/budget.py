"""The allowance of mlroute's improvement phases (steps 3-5), counted in work, not seconds.

Why: a search that stops on a wall-clock deadline returns a different routing on a loaded machine, or with more
worker processes beside it, so the same experiment gives different results on different machines. Each phase
charges what it evaluates -- a candidate path of a flow (the load-vector search), a flow re-counted (the
bottleneck search), an exact evaluation (the polishing) -- so the same input gets the same search, hence the same
routing, on any machine at any load. The allowance grows with the instance (its
candidate paths), as the construction does. A wall-clock cap stays only as a safety net: when it is what stopped
the search, that is logged and the routing says so (``cut_by_clock``).
"""

from __future__ import annotations

import logging
import time

LOG = logging.getLogger("mlroute.routing")

#: work units per (inter-leaf flow, candidate path) pair of the instance, at least MIN_WORK and at most MAX_WORK:
#: on this project's 2-core machine, unloaded, a unit is ~0.3-1 us, so the allowance is a few times the
#: construction's own time (the greedy looks at every candidate path once) and at most ~2 s, the old time budget.
WORK_PER_OPTION = 2
MIN_WORK = 500_000
MAX_WORK = 4_000_000
#: without a time_limit, the safety net: seconds after which a search still running is stopped (and says so).
CLOCK_CAP_S = 60.0
#: the clock is read once per this many units charged (reading it costs more than most charges).
_CLOCK_EVERY = 2_000

#: what one evaluation of each kind costs, in units (each kind's measured time relative to one candidate path of
#: the load-vector search's block evaluation).
OPTION = 1  # a candidate path of a flow, evaluated against the loads (the load-vector search)
SCREENED = 1  # a flow screened for an improving move at the start of a round (either search)
RECOUNTED = 2  # a flow whose hot / cold state the bottleneck search re-counts (Python, per trial and per round)
LEVEL_FLOW = 1  # a flow whose links the polishing sums at the start of a level's pass
TRIAL = 100  # an exact evaluation of one move in the polishing (rates re-filled around it, leximin compared)
FILLED = 5  # and per flow it re-filled (``RateState.filled``: a move may change the rates of a whole component)
TRIAL_FLOW = 1  # and per flow of the instance (the trial's copies of the rates and the link sums)
FULL_FILL = 1  # per flow of a full water-filling (the exhaustive descent's evaluation of one move)


def work_for(options: int) -> int:
    """The default allowance of an instance with ``options`` (inter-leaf flow, candidate path) pairs."""
    return min(MAX_WORK, max(MIN_WORK, WORK_PER_OPTION * int(options)))


class Budget:
    """Work units left for the improvement phases, shared by them in order, and the wall-clock safety net."""

    def __init__(self, work: int, clock_s: float | None = None, start: float | None = None,
                 clock=time.perf_counter):
        """``clock_s``: the safety net, in seconds from ``start`` (the caller's start: now if None)."""
        self.work = int(work)
        self.spent = 0
        self.cut_by_work = False  # a phase stopped because the work allowance ran out: deterministic
        self.cut_by_clock = False  # the safety net stopped a phase: the routing depends on the machine
        self._clock = clock
        self._cap = (clock() if start is None else start) + (CLOCK_CAP_S if clock_s is None else float(clock_s))
        self._next_read = 0  # the first question reads the clock: a cap of 0 s stops every phase before it starts

    def charge(self, units: int) -> bool:
        """Count ``units`` of work done; True while the phases may go on (see :meth:`left`)."""
        self.spent += int(units)
        return self.left()

    def left(self) -> bool:
        """Is there work left, and is the safety net not reached? (A False answer is sticky.)"""
        if self.cut_by_work or self.cut_by_clock:
            return False
        if self.spent >= self.work:
            self.cut_by_work = True
            return False
        if self.spent >= self._next_read:
            self._next_read = self.spent + _CLOCK_EVERY
            if self._clock() >= self._cap:
                self.cut_by_clock = True
                LOG.warning("mlroute: the search was stopped by its wall-clock safety net after %d of %d work units "
                            "(the routing depends on this machine's speed and load)", self.spent, self.work)
                return False
        return True

    def finish(self) -> None:
        """The run is over: a safety net reached meanwhile counts as cut (a phase that asked no more would have
        been), so a caller's limit of 0 s never reads as a complete search."""
        self._next_read = self.spent
        self.left()

    @property
    def complete(self) -> bool:
        """No phase was cut short (by the work allowance or by the clock)."""
        return not (self.cut_by_work or self.cut_by_clock)
