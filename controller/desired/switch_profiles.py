"""Switch profiles: what the controller assumes of a switch beyond what it reports, per switch family.

A switch's own answers (table features, group features: capabilities.py) come first; a profile adds what
OpenFlow does not say: how fast it takes flow-mods, the floor of its idle timeouts, how often it refreshes
counters, whether it needs barriers, whether it marks new flows seen itself (Open vSwitch's ``learn``), and
table sizes where the switch does not report them (or reports more than it takes). The ``switches:``
configuration matches a switch by DPID or by a regular expression on its description (manufacturer,
hardware and software, joined by spaces), names a shipped profile and overrides any of its keys; a switch no
entry matches gets ``open-vswitch`` when its description says so, else the conservative ``generic-of13``.

Shipped figures come from ../shared/HARDWARE.md (vendor guides, Faucet's vendor notes, Zodiac FX firmware);
they are claims, so every key can be overridden per switch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controller.desired.flowcopy import is_open_vswitch

KEYS = ("table_capacity", "groups", "flow_copy", "max_flow_mods_per_s", "min_idle_timeout_s", "stats_interval_s",
        "barriers")


@dataclass(frozen=True)
class Profile:
    name: str
    table_capacity: Mapping[int, int] = field(default_factory=dict)  # table -> entries (besides what it says)
    groups: str = "select"  # "select": ECMP by SELECT groups (where the switch reports them); "none": group_free.py
    flow_copy: str | None = None  # "learn" | "controller"; None: te.flow_copy decides
    max_flow_mods_per_s: float | None = None  # flow and group mods per second at most (None: unpaced)
    min_idle_timeout_s: int = 0  # idle timeouts below this are refused or rounded up by the switch
    stats_interval_s: float = 0.0  # the switch refreshes counters this often: polled no more often
    barriers: bool = True  # fence make-before-break steps with barriers

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "table_capacity": {str(t): n for t, n in self.table_capacity.items()},
                "groups": self.groups,
                "flow_copy": self.flow_copy, "max_flow_mods_per_s": self.max_flow_mods_per_s,
                "min_idle_timeout_s": self.min_idle_timeout_s, "stats_interval_s": self.stats_interval_s,
                "barriers": self.barriers}


SHIPPED: dict[str, Profile] = {p.name: p for p in (
    Profile("open-vswitch", flow_copy="learn"),  # a million entries per table, every group type, learn
    # Aruba 2930F / 3810 / 5400R: ~100 free entries per table in sample output; a software rate limit; SELECT
    # groups in software only, round-robin per packet (reordering a TCP flow's packets): spread by entries
    Profile("aruba", table_capacity={0: 100, 1: 100, 2: 50}, groups="none", flow_copy="controller",
            max_flow_mods_per_s=100),
    # Cisco Catalyst 9300/9400 (IOS-XE >= 16.9): counters every 5 s for at most 9,216 flows, idle timeout >= 10 s
    Profile("catalyst-9300", table_capacity={0: 9216}, flow_copy="controller", max_flow_mods_per_s=500,
            min_idle_timeout_s=10, stats_interval_s=5.0),
    Profile("noviflow", flow_copy="controller", max_flow_mods_per_s=1000),  # reports its tables; needs barriers
    Profile("allied-telesis", flow_copy="controller", max_flow_mods_per_s=200),  # TCAM carved IPv4 / IPv6
    # Zodiac FX: 512 flows in all in OpenFlow 1.3 (firmware MAX_FLOWS_13), split here over mlroute's tables; groups
    # only in a sibling build
    Profile("zodiac-fx", table_capacity={0: 200, 1: 250, 2: 50}, groups="none", flow_copy="controller",
            max_flow_mods_per_s=50, stats_interval_s=2.0),
    # an unknown switch: what it reports, plain OpenFlow 1.3 (SELECT groups are optional in it), paced, idle
    # timeouts and counters as a cautious hardware switch
    Profile("generic-of13", groups="none", flow_copy="controller", max_flow_mods_per_s=200, min_idle_timeout_s=10,
            stats_interval_s=5.0),
)}


@dataclass(frozen=True)
class Entry:
    """One ``switches:`` entry: which switches (``dpid`` or ``description`` regex) get which profile."""

    profile: Profile
    dpid: int | None = None
    description: re.Pattern | None = None
    line: str = ""

    def matches(self, dpid: int, description: str) -> bool:
        if self.dpid is not None and self.dpid != dpid:
            return False
        return self.description is None or self.description.search(description) is not None


def resolve(entries: Sequence[Entry], dpid: int, mfr: str, hw: str, sw: str = "") -> Profile:
    """The profile of a switch: the first entry that matches it, else by its description."""
    description = " ".join(part for part in (mfr, hw, sw) if part)
    for entry in entries:
        if entry.matches(dpid, description):
            return entry.profile
    return SHIPPED["open-vswitch"] if is_open_vswitch(mfr, hw) else SHIPPED["generic-of13"]


class ProfileError(ValueError):
    """A bad ``switches:`` entry; the message names the key (the configuration adds file and line)."""


def entry_from(value: Any) -> Entry:
    """One ``switches:`` entry from its YAML value."""
    if not isinstance(value, dict):
        raise ProfileError("must be a mapping with dpid or description, and profile and/or profile keys")
    unknown = set(value) - {"dpid", "description", "profile", *KEYS}
    if unknown:
        raise ProfileError(f"{sorted(unknown)[0]}: unknown key (known: dpid, description, profile, "
                           f"{', '.join(KEYS)})")
    if "dpid" not in value and "description" not in value:
        raise ProfileError("needs dpid or description (which switches it is for)")
    dpid = value.get("dpid")
    if isinstance(dpid, str):
        try:
            dpid = int(dpid, 0)
        except ValueError:
            raise ProfileError(f"dpid: must be an integer (decimal or 0x...), got {dpid!r}") from None
    if dpid is not None and (isinstance(dpid, bool) or not isinstance(dpid, int) or not 0 <= dpid < 2 ** 64):
        raise ProfileError(f"dpid: must be an integer in [0, 2^64), got {dpid!r}")
    pattern = None
    if "description" in value:
        if not isinstance(value["description"], str):
            raise ProfileError(f"description: must be a regular expression (text), got {value['description']!r}")
        try:
            pattern = re.compile(value["description"], re.IGNORECASE)
        except re.error as exc:
            raise ProfileError(f"description: not a regular expression ({exc})") from None
    base = value.get("profile", "generic-of13")
    if base not in SHIPPED:
        raise ProfileError(f"profile: must be one of {', '.join(sorted(SHIPPED))}, got {base!r}")
    overrides = {key: _checked(key, value[key]) for key in KEYS if key in value}
    return Entry(replace(SHIPPED[base], name=base if not overrides else f"{base}+", **overrides), dpid, pattern)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _same(v: Any) -> Any:
    return v


#: an override key -> (is its value valid, what a valid one is, the value kept)
_CHECKS: dict[str, tuple[Callable[[Any], bool], str, Callable[[Any], Any]]] = {
    "table_capacity": (lambda v: isinstance(v, dict) and all(_is_int(t) and 0 <= t < 255 and _is_int(n) and n > 0
                                                             for t, n in v.items()),
                       "must map table id (0-254) -> entries (> 0)", dict),
    "groups": (lambda v: v in ("select", "none"), "must be select or none", _same),
    "flow_copy": (lambda v: v in ("learn", "controller"), "must be learn or controller", _same),
    "barriers": (lambda v: isinstance(v, bool), "must be true or false", _same),
    "max_flow_mods_per_s": (lambda v: v is None or (_is_number(v) and v > 0),
                            "must be a number > 0 (or null: unpaced)", _same),
    "min_idle_timeout_s": (lambda v: _is_int(v) and 0 <= v <= 65535, "must be an integer in [0, 65535]", _same),
    "stats_interval_s": (lambda v: _is_number(v) and 0 <= v <= 3600, "must be a number in [0, 3600]", float),
}


def _checked(key: str, v: Any) -> Any:
    valid, what, kept = _CHECKS[key]
    if not valid(v):
        raise ProfileError(f"{key}: {what}, got {v!r}")
    return kept(v)
