"""Sample sequence numbers per sFlow data source -> whether a sample is new, so replays count once.

Why: every sample carries a sequence number that its data source (agent, sub-agent, source type and index)
increments by one per sample. A duplicated or replayed datagram (a retransmitting relay, a forger, two collectors
forwarding to one) would otherwise add its bytes again and make mice look like elephants. The filter keeps, per
source, the highest number seen and a bitmap of the ``window`` numbers below it, as IPsec's anti-replay window
does (RFC 4303, 3.4.3): a number already in the bitmap is a replay; one below the window is stale. Numbers are
compared in 32-bit serial arithmetic (RFC 1982), so the counter may wrap. An agent that restarts begins again near
1: after ``restart_after`` stale samples in a row from one source the filter starts that source afresh (a replayer
can gain at most that many samples once). Sources are bounded: the one seen least recently is forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

HALF = 1 << 31
MASK32 = (1 << 32) - 1


class SequenceFilter:
    def __init__(self, window: int = 256, restart_after: int = 16, max_sources: int = 65536):
        self.window = window
        self.restart_after = restart_after
        self.max_sources = max_sources
        self._state: OrderedDict[Hashable, list[int]] = OrderedDict()  # source -> [highest, bitmap, stale run]
        self.replayed = 0
        self.stale = 0
        self.restarts = 0

    def accept(self, source: Hashable, sequence: int) -> bool:
        """Whether sample ``sequence`` of ``source`` is new (True), or a replay / too old to tell (False)."""
        st = self._state.get(source)
        if st is None:
            if len(self._state) >= self.max_sources:
                self._state.popitem(last=False)
            self._state[source] = [sequence, 1, 0]
            return True
        self._state.move_to_end(source)
        highest, bitmap, _ = st
        ahead = (sequence - highest) & MASK32
        if ahead and ahead < HALF:  # newer than anything seen
            st[0] = sequence
            st[1] = ((bitmap << ahead) | 1) & ((1 << self.window) - 1) if ahead < self.window else 1
            st[2] = 0
            return True
        behind = (highest - sequence) & MASK32
        if behind < self.window:
            bit = 1 << behind
            if bitmap & bit:
                self.replayed += 1
                return False
            st[1] = bitmap | bit
            st[2] = 0
            return True
        st[2] += 1
        if st[2] >= self.restart_after:  # the agent restarted its numbering
            self.restarts += 1
            self._state[source] = [sequence, 1, 0]
            return True
        self.stale += 1
        return False

    def forget(self, source: Hashable) -> None:
        self._state.pop(source, None)

    def __len__(self) -> int:
        return len(self._state)
