"""One log line per key (a port) per period: refused claims are counted on every frame (/metrics) but logged
once a minute per port, so a hostile host cannot flood the controller's log."""

from __future__ import annotations

from collections.abc import Callable, Hashable

LOG_PERIOD_S = 60.0
MAX_KEYS = 4096  # past this many keys, those not logged within the period are forgotten


class LogThrottle:
    def __init__(self, clock: Callable[[], float], period_s: float = LOG_PERIOD_S) -> None:
        self.clock, self.period_s = clock, period_s
        self._last: dict[Hashable, float] = {}

    def due(self, key: Hashable) -> bool:
        """Whether to log for ``key`` now (then it is not due again for a period)."""
        now = self.clock()
        if now - self._last.get(key, now - self.period_s) < self.period_s:
            return False
        if len(self._last) >= MAX_KEYS:
            self._last = {k: t for k, t in self._last.items() if now - t < self.period_s}
        self._last[key] = now
        return True
