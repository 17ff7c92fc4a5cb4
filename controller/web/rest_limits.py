"""What the REST server allows a client: POSTs per second per client address, and errors without tracebacks.

Ryu-free so it is unit-tested without a server: rest.py asks ``ClientRateLimit.admit`` before any POST is read
(a token bucket per client address, ``rest.post_rate_per_s`` and ``rest.post_burst``), and turns any exception
a handler raises into ``internal_error``'s JSON 500 with a short id, the traceback going to the log under that
id. The table of clients is bounded: past ``max_clients`` the least recently seen client is forgotten (it
starts again with a full burst).
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable

from controller.state.budget import TokenBucket

DEFAULT_MAX_CLIENTS = 4096


class ClientRateLimit:
    """A token bucket per client address: ``rate`` POSTs per second on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float],
                 max_clients: int = DEFAULT_MAX_CLIENTS) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self.refused = 0

    def admit(self, client: str) -> float:
        """0.0 when ``client`` may POST now (a token spent), else the seconds until it may."""
        bucket = self._buckets.get(client)
        if bucket is None:
            self._forget_some()
            bucket = self._buckets[client] = TokenBucket(self.rate, self.burst, self.clock)
        else:
            self._buckets.move_to_end(client)
        wait = bucket.take_or_wait()
        if wait:
            self.refused += 1
        return wait

    def _forget_some(self) -> None:
        """Room for one more client: the idle ones (full buckets) go first, then the least recently seen."""
        if len(self._buckets) < self.max_clients:
            return
        for client in [c for c, b in self._buckets.items() if b.full]:
            del self._buckets[client]
        while len(self._buckets) >= self.max_clients:
            self._buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)


def internal_error(log: logging.Logger, what: str) -> dict:
    """Inside an ``except``: log the traceback under a short id and return the JSON body of the 500 (the id,
    never the traceback)."""
    error_id = secrets.token_hex(4)
    log.error("REST %s failed (error id %s)", what, error_id, exc_info=True)
    return {"error": f"internal error (id {error_id}: the controller's log has the details)", "id": error_id}
