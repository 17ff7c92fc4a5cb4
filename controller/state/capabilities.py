"""What each switch says it is and can hold: its description, table capacities, group support and table fill.

Lab switches differ from Open vSwitch in exactly these (../shared/HARDWARE.md: a Zodiac FX holds 512 flows,
an Aruba runs SELECT groups in software, many switches have no SELECT groups at all), and a controller that
plans rules needs them from the switch itself, not from a vendor table. Read at connect:
``OFPMP_TABLE_FEATURES`` (``max_entries`` per table, where the switch answers) and ``OFPMP_GROUP_FEATURES``;
polled with the flow stats: ``OFPMP_TABLE`` (``active_count`` per table). Plain values, filled by the shell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: OpenFlow 1.3 group types by bit of ``ofp_group_features.types`` (7.3.5.13)
GROUP_TYPES = ("all", "select", "indirect", "fast_failover")


@dataclass
class SwitchCapabilities:
    """One switch as it described itself; None / empty where it did not (yet) answer."""

    dpid: int
    manufacturer: str | None = None
    hardware: str | None = None
    software: str | None = None
    max_entries: dict[int, int] = field(default_factory=dict)  # table id -> max_entries (table features)
    group_types: frozenset[str] | None = None  # None: group features not (yet) reported
    max_groups: dict[str, int] = field(default_factory=dict)  # group type -> how many the switch holds
    active: dict[int, int] = field(default_factory=dict)  # table id -> active_count (last table stats)
    active_at: float | None = None  # when ``active`` was read
    errors: dict[str, int] = field(default_factory=dict)  # "TYPE/CODE" -> how many error replies it sent

    def select_groups(self) -> bool | None:
        """Whether the switch says it has SELECT groups (None: it has not said)."""
        return None if self.group_types is None else "select" in self.group_types

    def to_json(self, believed: Mapping[int, int], tables: Iterable[int]) -> dict[str, Any]:
        """The REST view; ``believed``: table -> entries the controller holds there, ``tables``: those it uses."""
        return {
            "dpid": self.dpid,
            "description": {"manufacturer": self.manufacturer, "hardware": self.hardware,
                            "software": self.software},
            "tables": {str(t): {"entries": self.active.get(t), "mlroute_entries": believed.get(t, 0),
                                "capacity": self.max_entries.get(t)} for t in tables},
            "groups": {"types": sorted(self.group_types) if self.group_types is not None else None,
                       "max": dict(self.max_groups)},
            "errors": dict(self.errors),
        }


def group_types_from_bitmap(types: int) -> frozenset[str]:
    return frozenset(name for bit, name in enumerate(GROUP_TYPES) if types & (1 << bit))


def max_groups_by_type(types: int, max_groups: Iterable[int]) -> dict[str, int]:
    """``ofp_group_features.max_groups`` (one count per type, in GROUP_TYPES order) for the types supported."""
    return {name: int(n) for bit, (name, n) in enumerate(zip(GROUP_TYPES, max_groups)) if types & (1 << bit)}


def table_short(active: Mapping[int, int], believed: Mapping[int, int]) -> list[int]:
    """Tables holding fewer entries than the controller believes it installed there: rules went missing
    (wiped by an operator, a switch-side flush, a line-card reset). More entries is normal (the switch's own
    learned entries, the topology app's LLDP rule); a table the switch did not report is not judged."""
    return sorted(t for t, n in believed.items() if t in active and active[t] < n)
