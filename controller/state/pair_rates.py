"""How fast each host pair opens new transport flows, so that a pair opening them faster than one counting rule
each can follow is counted as a whole.

Why: under flow-stats detection every new 5-tuple gets a counting rule (and, on Open vSwitch, a learned "seen"
entry). A host opening thousands of new flows a second to one destination -- a scan, a storm, an RPC client
without connection reuse -- would have the switch learn thousands of entries a second and the controller count
none of it past its budget, while the pair carries a link's worth of traffic beside the elephants. Counted as one
pair, one rule catches all its new flows and the pair is one demand (as sFlow's pair demands are).

Counted over fixed one-second windows per pair; pairs not heard from for two windows are dropped, so the table
holds only pairs opening flows now.
"""

from __future__ import annotations

from collections.abc import Callable

WINDOW_S = 1.0


class PairRates:
    """New transport flows per host pair in the current window; ``busy`` once a pair passes ``per_s``."""

    def __init__(self, per_s: int, clock: Callable[[], float]) -> None:
        self.per_s = per_s
        self.clock = clock
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}  # (src, dst) -> (window start, flows)
        self._pruned = clock()

    def new_flow(self, src: str, dst: str) -> bool:
        """A new transport flow from ``src`` to ``dst``: True once the pair has opened more than ``per_s`` in
        this window (this one included)."""
        now = self.clock()
        if now - self._pruned >= 2 * WINDOW_S:
            self._windows = {p: w for p, w in self._windows.items() if now - w[0] < 2 * WINDOW_S}
            self._pruned = now
        start, count = self._windows.get((src, dst), (now, 0))
        if now - start >= WINDOW_S:
            start, count = now, 0
        self._windows[(src, dst)] = (start, count + 1)
        return count + 1 > self.per_s

    def __len__(self) -> int:
        return len(self._windows)
