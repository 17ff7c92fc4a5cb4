"""Per-transport-flow accounting: which flows have a counting rule, and on which ingress switch and host port.

The first packet of a TCP/UDP flow at its ingress switch reaches the controller once (the flow-miss copy); from
then on an exact counting rule there counts it, and the flow-stats poll reads it. The rule idles out (or is
removed) on the switch, which tells the controller through flow-removed: then the flow leaves this set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from controller.state.flowkey import FlowKey

Where = tuple[int, int]  # (ingress dpid, host port)


class Accounting(Mapping[FlowKey, Where]):
    """FlowKey -> (ingress dpid, in_port) of every transport flow with a counting rule."""

    def __init__(self) -> None:
        self._where: dict[FlowKey, Where] = {}
        self.changed: set[FlowKey] = set()  # keys observed or removed since the consumer last took them
        self._pairs: Counter[Where] = Counter()  # host pairs counted whole, per ingress port

    def take_changed(self) -> set[FlowKey]:
        """The keys that changed since the last call (the incremental plan updates only their rules)."""
        changed, self.changed = self.changed, set()
        return changed

    def observe(self, key: FlowKey, dpid: int, in_port: int) -> bool:
        """A new-flow copy arrived; True when the desired rules change (a new flow, or one seen elsewhere)."""
        where = (dpid, in_port)
        old = self._where.get(key)
        if old == where:
            return False
        if key.is_pair:
            self._count_pair(old, -1)
            self._count_pair(where, 1)
        self._where[key] = where
        self.changed.add(key)
        return True

    def removed(self, key: FlowKey, dpid: int) -> bool:
        """The counting rule of ``key`` on ``dpid`` is gone; True if that was the flow's rule (it leaves)."""
        where = self._where.get(key)
        if where is None or where[0] != dpid:
            return False
        del self._where[key]
        if key.is_pair:
            self._count_pair(where, -1)
        self.changed.add(key)
        return True

    def pairs_at(self, where: Where) -> int:
        """Host pairs counted whole at one ingress port."""
        return self._pairs.get(where, 0)

    def pairs(self) -> int:
        """Host pairs counted whole, in all."""
        return sum(self._pairs.values())

    def _count_pair(self, where: Where | None, n: int) -> None:
        if where is not None:
            self._pairs[where] += n
            if self._pairs[where] <= 0:
                del self._pairs[where]

    def __getitem__(self, key: FlowKey) -> Where:
        return self._where[key]

    def __iter__(self) -> Iterator[FlowKey]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
