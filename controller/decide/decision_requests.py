"""Requests for a traffic-engineering decision, coalesced: one decision in flight, at most one queued.

Nothing but the core's decision loop talks to the optimiser's worker (controller/decide/optimiser_runner.py: one pipe,
one reader). Everyone else *requests* a decision: the poll loop every period, a job event, a failure under an
elephant, and the REST calls (``POST /mlroute/recompute``, ``POST /mlroute/jobs``). A request joins the queued
decision if there is one, else it queues a new one; the loop starts the queued decision once the one in flight
has ended, and every ticket of a decision is answered with its outcome. So a burst of any number of requests
makes at most two decisions while it lasts (the one in flight and the one they all joined), and a caller never
waits for more than the rest of one decision plus one more.

A caller that would wait longer than ``max_wait_s`` (by the recent decisions' durations) is refused at once
with 503 and the seconds to retry after; past ``max_waiting`` waiting callers, with 429. Decisions requested
by callers only (not urgent: REST) start at least ``min_interval_s`` after the previous one ended, so callers
that ask back-to-back get the same few decisions; the controller's own requests (periodic, job events,
failures) are urgent and start as soon as the worker is free.

Ryu-free and clock-injected: unit-tested by feeding requests, starts and finishes (tests/unit/controller/
test_decision_requests.py). Waiting is a ``threading.Event`` per decision (green under Ryu's monkey-patching).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BUSY = 503  # the decision would come too late (or the worker is not ready): retry after the estimate
TOO_MANY = 429  # too many callers waiting already (or, in rest_limits, too many POSTs from one client)

DEFAULT_MAX_WAIT_S = 10.0
DEFAULT_MIN_INTERVAL_S = 0.5
DEFAULT_MAX_WAITING = 256
DURATION_WEIGHT = 0.3  # of the newest decision in the running estimate of how long one takes


@dataclass(frozen=True)
class Refusal:
    """No answer to wait for: the HTTP status (429 / 503), the whole seconds to retry after, and why."""

    status: int
    retry_after_s: int
    reason: str


@dataclass
class Decision:
    """One decision: the requests it answers, and its outcome once it ended."""

    urgent: bool = False
    tickets: int = 0  # callers waiting for it
    started: float | None = None
    outcome: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    sync_round: int = 0  # rule syncs started before it ended: the next one sends the rules it decided


@dataclass(frozen=True)
class Ticket:
    """A caller's place in a decision: ``wait`` for its outcome."""

    decision: Decision
    requested: float

    def wait(self, timeout_s: float) -> bool:
        """Block (green under Ryu) until the decision ended, at most ``timeout_s``; True when it did."""
        return self.decision.done.wait(timeout_s)

    @property
    def outcome(self) -> Any:
        return self.decision.outcome


def retry_after(seconds: float) -> int:
    """Whole seconds for a ``Retry-After`` header: at least 1."""
    return max(1, math.ceil(seconds))


class DecisionRequests:
    """The queue of requested decisions (at most one in flight and one queued) on an injected clock."""

    def __init__(self, clock: Callable[[], float], max_wait_s: float = DEFAULT_MAX_WAIT_S,
                 min_interval_s: float = DEFAULT_MIN_INTERVAL_S, max_waiting: int = DEFAULT_MAX_WAITING) -> None:
        self.clock = clock
        self.max_wait_s = max_wait_s
        self.min_interval_s = min_interval_s
        self.max_waiting = max_waiting
        self.inflight: Decision | None = None
        self.queued: Decision | None = None
        self.duration_s = 0.0  # running estimate of one decision's duration (0 until one ended)
        self.last_end: float | None = None
        self.decisions = 0  # decisions started
        self.requests = 0  # requests taken (coalesced into those decisions)
        self.refused = 0

    @property
    def waiting(self) -> int:
        return sum(d.tickets for d in (self.inflight, self.queued) if d is not None)

    @property
    def busy(self) -> bool:
        """A decision is in flight or queued: the loop should look again soon."""
        return self.inflight is not None or self.queued is not None

    def expected_wait_s(self) -> float:
        """How long a request made now would wait for its answer: the rest of the decision in flight, the
        spacing after it, and one decision."""
        now = self.clock()
        wait = 0.0
        if self.inflight is not None and self.inflight.started is not None:
            wait = max(0.0, self.duration_s - (now - self.inflight.started))
        elif self.last_end is not None and not (self.queued and self.queued.urgent):
            wait = max(0.0, self.last_end + self.min_interval_s - now)
        return wait + self.duration_s

    def request(self, ticket: bool = True, urgent: bool = False) -> Ticket | Refusal | None:
        """Ask for a decision on the inputs as they will be when it starts. ``ticket``: the caller waits for
        its outcome (a Ticket, or a Refusal when it would wait too long); otherwise None (the controller's own
        requests, never refused)."""
        if ticket:
            expected = self.expected_wait_s()
            if self.waiting >= self.max_waiting:
                self.refused += 1
                return Refusal(TOO_MANY, retry_after(expected), f"{self.waiting} callers already wait for a "
                               "decision")
            if expected > self.max_wait_s:
                self.refused += 1
                return Refusal(BUSY, retry_after(expected), f"the next decision is expected in {expected:.1f} s "
                               f"(at most {self.max_wait_s:g} s of waiting)")
        if self.queued is None:
            self.queued = Decision()
        self.queued.urgent = self.queued.urgent or urgent
        self.requests += 1
        if not ticket:
            return None
        self.queued.tickets += 1
        return Ticket(self.queued, self.clock())

    def start(self) -> Decision | None:
        """The decision to start now, if one is queued, none is in flight and (for callers' requests only)
        the spacing after the last one has passed; it is in flight from now on."""
        queued = self.queued
        if queued is None or self.inflight is not None:
            return None
        now = self.clock()
        if not queued.urgent and self.last_end is not None and now < self.last_end + self.min_interval_s:
            return None
        self.inflight, self.queued = queued, None
        queued.started = now
        self.decisions += 1
        return queued

    def finish(self, outcome: Any) -> Decision | None:
        """The decision in flight ended with ``outcome``: every ticket of it is answered."""
        decision = self.inflight
        if decision is None:
            return None
        now = self.clock()
        took = now - (decision.started if decision.started is not None else now)
        self.duration_s = took if self.last_end is None else \
            (1 - DURATION_WEIGHT) * self.duration_s + DURATION_WEIGHT * took
        self.inflight, self.last_end = None, now
        decision.outcome = outcome
        decision.done.set()
        return decision

    def timed_out(self, ticket: Ticket) -> Refusal:
        """The answer for a caller whose decision did not end within its wait (the worker warming up, or a
        decision running to its deadline): 503, retry after the expected wait."""
        self.refused += 1
        if not ticket.decision.done.is_set():
            ticket.decision.tickets -= 1  # it waits no more
        return Refusal(BUSY, retry_after(self.expected_wait_s()),
                       f"no decision within {self.clock() - ticket.requested:.1f} s: the optimiser is busy or "
                       "starting")
