"""``te.detection: auto``: per switch, sFlow where the switch exports it to the collector, flow stats where not.

Why per switch: a fabric is often mixed (switches that export sFlow beside ones that do not, or whose export is
not configured yet), and sFlow costs no table entry per flow where it is heard while flow statistics work
everywhere. A switch starts on flow stats (counting rules at its host ports). Once its export is heard (a sample
mapped to one of its ports within ``silent_s``) and covers it (every port with a host mapped: a flow entering
there can be told apart), it moves to sFlow; once nothing was heard from it for ``silent_s`` it moves back.
Counter samples arrive every polling interval whatever the traffic, so an idle switch that still exports is not
silent as long as ``silent_s`` is longer than its polling interval.

Plain data in, moves out: the core does the hand-over (flows, counting rules, copy rules) of each move.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SFLOW = "sflow"
FLOWSTATS = "flowstats"


@dataclass(frozen=True)
class Moves:
    """The switches one ``tick`` moved, each way."""

    to_sflow: frozenset[int] = frozenset()
    to_flowstats: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.to_sflow or self.to_flowstats)


class SwitchDetection:
    """Which detection each switch is on: its export heard (``heard``) and judged at each ``tick``."""

    def __init__(self, silent_s: float) -> None:
        if silent_s <= 0:
            raise ValueError(f"silent_s must be > 0, got {silent_s!r}")
        self.silent_s = silent_s
        self._heard: dict[int, float] = {}  # dpid -> when a sample of its last arrived
        self._sflow: set[int] = set()

    def heard(self, dpid: int, at: float) -> None:
        """A sample mapped to a port of ``dpid`` arrived at ``at`` (times out of order keep the latest)."""
        if at > self._heard.get(dpid, float("-inf")):
            self._heard[dpid] = at

    def tick(self, now: float, covered: Callable[[int], bool]) -> Moves:
        """Judge every switch heard of at ``now``: ``covered(dpid)`` says whether its host ports are all mapped."""
        up, down = set(), set()
        for dpid, at in self._heard.items():
            fresh = now - at < self.silent_s
            if dpid in self._sflow and not fresh:
                down.add(dpid)
            elif dpid not in self._sflow and fresh and covered(dpid):
                up.add(dpid)
        self._sflow = (self._sflow | up) - down
        for dpid in down:
            del self._heard[dpid]  # silent: judged again from its next sample
        return Moves(frozenset(up), frozenset(down))

    def uses_sflow(self, dpid: int) -> bool:
        return dpid in self._sflow

    def of(self, dpid: int) -> str:
        """``sflow`` or ``flowstats`` (the views' word for it)."""
        return SFLOW if dpid in self._sflow else FLOWSTATS

    @property
    def sampled(self) -> frozenset[int]:
        """The switches on sFlow."""
        return frozenset(self._sflow)
