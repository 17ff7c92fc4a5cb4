"""The table budget: a switch is never sent more entries than a table holds, and what matters most goes in first.

Lab switches hold hundreds of entries per table, not Open vSwitch's million (../shared/HARDWARE.md), and a full
table answers TABLE_FULL to whatever comes next: a host's guard, a forwarding entry, anything. Planned here
instead, per (switch, table): at most ``capacity - headroom`` of mlroute's entries (headroom for what the
switch holds besides: the topology app's LLDP entry before mlroute's replaces it, entries it learns itself).
Additions are admitted in order of what they are for: forwarding (the table-miss, ARP and LLDP handling and
the per-destination entries), then the rules of one port (host guards, fabric ARP), then elephant and
declared-pair pins, then new-flow copies and counting rules (a flow without one stays on ECMP, uncounted).
Within a kind, higher priority first: a host guard's allow rule goes in before its drop rule, so a tight table
can leave a host unguarded but never cut off. Modifications and deletions are never held (they do
not add entries), and deletions do not make room within the same sync (a switch applies the additions of a
make-before-break step first): what they free is used by the next one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from controller.desired.rules import COOKIE_ELEPHANT, COOKIE_FLOW, COOKIE_FLOW_MISS, Change, FlowRule, SwitchRules
from controller.desired.sync import Step

UNBOUNDED = 100_000  # a table this large is not budgeted (Open vSwitch: 1,000,000; nothing plans that many)
HEADROOM_FRACTION = 0.02

FORWARDING, PORT, PINS, COUNTING = 0, 1, 2, 3  # what an entry is for, in the order a tight table takes them


def headroom(capacity: int) -> int:
    """Entries left free in a table of ``capacity``: 2 %, at least one."""
    return max(1, math.ceil(capacity * HEADROOM_FRACTION))


def limit(capacity: int) -> int:
    """Entries mlroute may hold in a table of ``capacity``."""
    return max(0, capacity - headroom(capacity))


def kind(rule: FlowRule) -> int:
    if rule.cookie in (COOKIE_FLOW, COOKIE_FLOW_MISS):
        return COUNTING
    if rule.cookie == COOKIE_ELEPHANT:
        return PINS
    return PORT if any(name == "in_port" for name, _ in rule.match) else FORWARDING


def table_counts(rules: SwitchRules) -> dict[int, int]:
    counts: dict[int, int] = {}
    for key in rules.flows:
        counts[key[0]] = counts.get(key[0], 0) + 1
    return counts


def admit(steps: list[Step], installed: Mapping[int, SwitchRules], limits: Mapping[int, Mapping[int, int]]
          ) -> tuple[list[Step], list[tuple[int, Change]]]:
    """``steps`` less the flow additions that would take a table past its limit, and those held back.
    ``limits``: dpid -> table -> entries mlroute may hold there (only switches and tables with a limit)."""
    if not limits:
        return steps, []
    counts = {d: table_counts(installed[d]) if d in installed else {} for d in limits}
    adds = [(kind(c.rule), -c.rule.priority, i, j) for i, step in enumerate(steps)
            for j, (d, c) in enumerate(step.changes)
            if d in limits and c.op == "add" and isinstance(c.rule, FlowRule) and c.rule.table in limits[d]]
    held: set[tuple[int, int]] = set()
    for _, _, i, j in sorted(adds):
        dpid, change = steps[i].changes[j]
        table = change.rule.table  # type: ignore[union-attr]  # (adds of flow rules only, above)
        room = limits[dpid][table] - counts[dpid].get(table, 0)
        if room > 0:
            counts[dpid][table] = counts[dpid].get(table, 0) + 1
        else:
            held.add((i, j))
    if not held:
        return steps, []
    kept: list[Step] = []
    out: list[tuple[int, Change]] = []
    for i, step in enumerate(steps):
        changes = [dc for j, dc in enumerate(step.changes) if (i, j) not in held]
        out.extend(dc for j, dc in enumerate(step.changes) if (i, j) in held)
        if changes:
            kept.append(Step(step.phase, changes))
    return kept, out


def has_room(rules: SwitchRules, table: int, table_limit: int) -> bool:
    """Whether one more entry fits in ``table`` (a counting rule sent at once, outside a sync)."""
    return table_counts(rules).get(table, 0) < table_limit


PAIR_RESERVE_FRACTION = 0.25  # the last quarter of a table's room counts host pairs, not 5-tuples


def tight(rules: SwitchRules, table: int, table_limit: int) -> bool:
    """Whether ``table`` is too tight for one counting rule per transport flow: fewer free entries than a
    quarter of its room (at least two) are left, so new flows are counted per host pair (one entry for all of a
    pair's flows: ``flowkey.PROTO_PAIR``) and the last entries serve as many pairs as they can."""
    free = table_limit - table_counts(rules).get(table, 0)
    return free < max(2, math.ceil(table_limit * PAIR_RESERVE_FRACTION))
