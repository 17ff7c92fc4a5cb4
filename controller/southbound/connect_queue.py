"""Switches that connected, asked for their table features and their tables a few at a time.

Why: Open vSwitch answers a table-features request with every one of its 254 tables described field by field,
hundreds of kilobytes built in the thread that also forwards the userspace datapath's packets. Twenty emulated
switches (re)connecting at once -- a controller restart -- and asked together held every path of a k=4 fat-tree
for 200-300 ms, and now and then dropped a packet there. Asked a few at a time, each answer costs the forwarding
a moment between others; real switches, each answering for itself, lose a round trip per few switches.

A switch's read-back follows its table-features request on the same connection, so its capacities are known
before its first sync (replies come in order). A slot is freed by the answer, by the switch leaving, or after
``timeout_s`` (a switch that never answers must not hold the others back).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

IN_FLIGHT = 4  # switches asked at once
TIMEOUT_S = 2.0  # a slot not answered this long is freed


class ConnectQueue:
    """Switches waiting to be asked (in the order they connected) and those asked, not yet answered."""

    def __init__(self, in_flight: int = IN_FLIGHT, timeout_s: float = TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.in_flight = in_flight
        self.timeout_s = timeout_s
        self.clock = clock
        self._waiting: OrderedDict[int, Any] = OrderedDict()  # dpid -> its connection (a reconnect replaces it)
        self._asked: dict[int, float] = {}  # dpid -> when it was asked

    def want(self, dpid: int, connection: Any) -> None:
        """``dpid`` connected (again): to be asked, after those connected before it."""
        self._asked.pop(dpid, None)
        self._waiting.pop(dpid, None)
        self._waiting[dpid] = connection

    def answered(self, dpid: int) -> None:
        self._asked.pop(dpid, None)

    def forget(self, dpid: int) -> None:
        self._asked.pop(dpid, None)
        self._waiting.pop(dpid, None)

    def due(self) -> list[tuple[int, Any]]:
        """The switches to ask now (each counted asked): as many as free slots, the slots of switches that did
        not answer in ``timeout_s`` freed first."""
        now = self.clock()
        for dpid in [d for d, at in self._asked.items() if now - at >= self.timeout_s]:
            del self._asked[dpid]
        out = []
        while self._waiting and len(self._asked) < self.in_flight:
            dpid, connection = self._waiting.popitem(last=False)
            self._asked[dpid] = now
            out.append((dpid, connection))
        return out

    def __len__(self) -> int:
        """Switches waiting or asked."""
        return len(self._waiting) + len(self._asked)
