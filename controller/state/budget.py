"""A token bucket: at most ``rate`` events per second on average, ``burst`` at once, on an injected clock.

The controller gives new transport flows their counting rules within this budget; past it a flow simply stays
on ECMP, uncounted (its next packets are not copied again until its rule would exist, so the cost of a storm is
bounded by the switches' packet-in rate limit and this check, never by rule installation).
"""

from __future__ import annotations

from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = burst
        self._last = clock()

    def take(self) -> bool:
        """Spend one token if there is one."""
        return self.take_or_wait() == 0.0

    def take_or_wait(self) -> float:
        """Spend one token if there is one (0.0), else the seconds until there will be one."""
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate

    @property
    def full(self) -> bool:
        """As many tokens saved up as the burst allows (by the last refill): forgetting it loses nothing."""
        return self._tokens + (self.clock() - self._last) * self.rate >= self.burst
