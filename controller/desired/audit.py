"""Installed state verified, not believed: switches' tables read back now and then and compared with the belief.

A switch can lose rules while it stays connected (an operator's ``del-flows``, a switch-side flush, a line-card
reset) and nothing in OpenFlow says so; ONOS audits installed rules against flow stats and re-adds what is
missing. Here every connected switch is read back (mlroute's flow rules by cookie, its groups) once per
``audit.period_s``, spread over time within ``audit.entries_per_s`` (reading entries back costs the event loop
about 20 us each, benchmarks/bench_audit.py: a k=24 fabric's millions of entries are never read at once), and
at once when its table stats show a table holding fewer entries than believed (capabilities.table_short: the
cheap check, every poll).

What the switch holds answers a request sent at one moment; rule changes sent after it are not in the answer.
The shell reports every change it sends (``touched``) while a switch's audit is out, and those rules are not
judged by it (the next audit does). Everything else that differs is a finding: the belief takes what the switch
holds, and the next resync sends the difference to the desired state (missing rules re-added, extra ones
deleted, altered ones rewritten), within the budgets any sync respects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.desired.rules import FlowRule, GroupRule, SwitchRules
from controller.desired.sync import ReadBack

AUDIT_TIMEOUT_S = 10.0  # an audit the switch does not answer in this long is dropped (and tried again later)


@dataclass
class Findings:
    """How a switch's tables differ from what the controller believes it holds."""

    missing: list[FlowRule | GroupRule] = field(default_factory=list)  # believed installed, not on the switch
    extra: list[FlowRule | GroupRule] = field(default_factory=list)  # on the switch, not believed
    altered: list[FlowRule | GroupRule] = field(default_factory=list)  # on the switch, not as believed

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra or self.altered)

    def counts(self) -> dict[str, int]:
        return {"missing": len(self.missing), "extra": len(self.extra), "altered": len(self.altered)}

    def apply(self, belief: SwitchRules) -> None:
        """Make ``belief`` what the switch holds."""
        for rule in self.missing:
            if isinstance(rule, GroupRule):
                belief.groups.pop(rule.key, None)
            else:
                belief.flows.pop(rule.key, None)
        for rule in self.extra + self.altered:
            if isinstance(rule, GroupRule):
                belief.add_group(rule)
            else:
                belief.add_flow(rule)


def compare(belief: SwitchRules, held: SwitchRules, skip: Iterable[tuple[str, Any]] = ()) -> Findings:
    """What differs between ``belief`` and ``held``, less the rules named in ``skip`` (("flow", key) or
    ("group", id): changed while the audit was out)."""
    skipped = set(skip)
    found = Findings()
    tables: tuple[tuple[str, Mapping[Any, Any], Mapping[Any, Any]], ...] = (
        ("group", belief.groups, held.groups), ("flow", belief.flows, held.flows))
    for kind, mine, theirs in tables:
        for key, rule in mine.items():
            if (kind, key) in skipped:
                continue
            other = theirs.get(key)
            if other is None:
                found.missing.append(rule)
            elif other != rule:
                found.altered.append(other)
        found.extra.extend(rule for key, rule in theirs.items() if key not in mine and (kind, key) not in skipped)
    return found


class TableAudit:
    """Which switch to read back next, and the read-backs out. ``clock`` is the controller's."""

    def __init__(self, period_s: float, entries_per_s: float, clock: Callable[[], float]) -> None:
        self.period_s = period_s
        self.entries_per_s = entries_per_s
        self.clock = clock
        self._reads = ReadBack(AUDIT_TIMEOUT_S)
        self._checked: dict[int, float] = {}  # dpid -> when its tables were last read (audit or reconnect)
        self._urgent: set[int] = set()
        self._touched: dict[int, set[tuple[str, Any]]] = {}  # dpid -> rules changed while its audit is out
        self._credit = entries_per_s  # entries that may be read back now (refills at entries_per_s, 1 s worth)
        self._credit_at = clock()

    def checked(self, dpid: int) -> None:
        """The switch's tables were just read (its reconnect read-back): the next audit is a period away."""
        self._checked[dpid] = self.clock()

    def forget(self, dpid: int) -> None:
        """The switch's connection is gone (or back): an audit out for it is moot."""
        self._reads.cancel(dpid)
        self._touched.pop(dpid, None)
        self._urgent.discard(dpid)
        self._checked.pop(dpid, None)

    def urgent(self, dpid: int) -> None:
        """A table came up short (table stats): read the switch back next, whatever its period says."""
        self._urgent.add(dpid)

    def out(self, dpid: int) -> bool:
        return self._reads.pending(dpid)

    @property
    def any_out(self) -> bool:
        """Some audit is out or unjudged (changes sent now must be reported)."""
        return bool(self._touched)

    def due(self, sizes: Mapping[int, int], urgent_only: bool = False) -> list[int]:
        """Switches to read back now, among ``sizes`` (dpid -> entries believed there: its cost), marked out.
        Short tables first, then those checked longest ago once their period is over, within the entry budget
        (one switch bigger than a second's worth goes when the budget is full, and the budget then pays it
        back); an audit unanswered for AUDIT_TIMEOUT_S is dropped. ``urgent_only``: the short tables alone."""
        now = self.clock()
        for dpid in self._reads.overdue(now):
            self._touched.pop(dpid, None)
        self._credit = min(self.entries_per_s, self._credit + (now - self._credit_at) * self.entries_per_s)
        self._credit_at = now
        idle = [d for d in sizes if d not in self._touched]  # (an answer not judged yet is still out)
        urgent = sorted(d for d in idle if d in self._urgent)
        periodic = [] if urgent_only else sorted((d for d in idle if d not in self._urgent
                           and now - self._checked.get(d, -float("inf")) >= self.period_s),
                          key=lambda d: (self._checked.get(d, -float("inf")), d))
        started = []
        for dpid in urgent + periodic:
            cost = sizes[dpid]
            if dpid not in self._urgent and cost > self._credit and self._credit < self.entries_per_s:
                break
            self._credit -= cost
            self._urgent.discard(dpid)
            self._checked[dpid] = now
            self._reads.start(dpid, now)
            self._touched[dpid] = set()
            started.append(dpid)
        return started

    def touched(self, dpid: int, rule_id: tuple[str, Any]) -> None:
        """A change to this rule was sent (or believed) while the switch's audit is out: not judged by it."""
        seen = self._touched.get(dpid)
        if seen is not None:
            seen.add(rule_id)

    def flows_read(self, dpid: int, flows: list[FlowRule]) -> SwitchRules | None:
        """The switch's mlroute flow rules arrived; what it holds once its groups have too. Its changes are
        still tracked until ``finish``: the caller judges the answer when nothing believed is unsent."""
        return self._reads.flows_read(dpid, flows)

    def groups_read(self, dpid: int, groups: list[GroupRule]) -> SwitchRules | None:
        return self._reads.groups_read(dpid, groups)

    def finish(self, dpid: int, belief: SwitchRules, held: SwitchRules) -> Findings:
        """The audit's findings: ``held`` (what the switch answered) against ``belief``, less the rules changed
        since the request; the switch's changes are no longer tracked."""
        return compare(belief, held, self._touched.pop(dpid, ()))
