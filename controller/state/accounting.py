"""Per-transport-flow accounting: which flows have a counting rule, and on which ingress switch and host port.

The first packet of a TCP/UDP flow at its ingress switch reaches the controller once (the flow-miss copy); from
then on an exact counting rule there counts it, and the flow-stats poll reads it. The rule idles out (or is
removed) on the switch, which tells the controller through flow-removed: then the flow leaves this set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from controller.state.flowkey import FlowKey

Where = tuple[int, int]  # (ingress dpid, host port)


class Accounting(Mapping[FlowKey, Where]):
    """FlowKey -> (ingress dpid, in_port) of every transport flow with a counting rule."""

    def __init__(self) -> None:
        self._where: dict[FlowKey, Where] = {}
        self.changed: set[FlowKey] = set()  # keys observed or removed since the consumer last took them

    def take_changed(self) -> set[FlowKey]:
        """The keys that changed since the last call (the incremental plan updates only their rules)."""
        changed, self.changed = self.changed, set()
        return changed

    def observe(self, key: FlowKey, dpid: int, in_port: int) -> bool:
        """A new-flow copy arrived; True when the desired rules change (a new flow, or one seen elsewhere)."""
        where = (dpid, in_port)
        if self._where.get(key) == where:
            return False
        self._where[key] = where
        self.changed.add(key)
        return True

    def removed(self, key: FlowKey, dpid: int) -> bool:
        """The counting rule of ``key`` on ``dpid`` is gone; True if that was the flow's rule (it leaves)."""
        where = self._where.get(key)
        if where is None or where[0] != dpid:
            return False
        del self._where[key]
        self.changed.add(key)
        return True

    def __getitem__(self, key: FlowKey) -> Where:
        return self._where[key]

    def __iter__(self) -> Iterator[FlowKey]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
