"""OpenFlow errors as what they are about: the names of the type and code (OpenFlow 1.3.5, section 7.4.4), and
the rule change that caused one, found by the xid it was sent with. A switch that refuses a rule (a full
table, an unsupported group type or match) then has it counted, logged by name and no longer believed
installed, instead of two integers in the log and a belief that the rule is there.
"""

from __future__ import annotations

from collections import OrderedDict

from controller.desired.rules import Change

TYPES = {0: "HELLO_FAILED", 1: "BAD_REQUEST", 2: "BAD_ACTION", 3: "BAD_INSTRUCTION", 4: "BAD_MATCH",
         5: "FLOW_MOD_FAILED", 6: "GROUP_MOD_FAILED", 7: "PORT_MOD_FAILED", 8: "TABLE_MOD_FAILED",
         9: "QUEUE_OP_FAILED", 10: "SWITCH_CONFIG_FAILED", 11: "ROLE_REQUEST_FAILED", 12: "METER_MOD_FAILED",
         13: "TABLE_FEATURES_FAILED", 0xFFFF: "EXPERIMENTER"}
CODES = {
    0: ("INCOMPATIBLE", "EPERM"),
    1: ("BAD_VERSION", "BAD_TYPE", "BAD_MULTIPART", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "EPERM", "BAD_LEN",
        "BUFFER_EMPTY", "BUFFER_UNKNOWN", "BAD_TABLE_ID", "IS_SLAVE", "BAD_PORT", "BAD_PACKET",
        "MULTIPART_BUFFER_OVERFLOW"),
    2: ("BAD_TYPE", "BAD_LEN", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_OUT_PORT", "BAD_ARGUMENT", "EPERM",
        "TOO_MANY", "BAD_QUEUE", "BAD_OUT_GROUP", "MATCH_INCONSISTENT", "UNSUPPORTED_ORDER", "BAD_TAG",
        "BAD_SET_TYPE", "BAD_SET_LEN", "BAD_SET_ARGUMENT"),
    3: ("UNKNOWN_INST", "UNSUP_INST", "BAD_TABLE_ID", "UNSUP_METADATA", "UNSUP_METADATA_MASK",
        "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_LEN", "EPERM"),
    4: ("BAD_TYPE", "BAD_LEN", "BAD_TAG", "BAD_DL_ADDR_MASK", "BAD_NW_ADDR_MASK", "BAD_WILDCARDS", "BAD_FIELD",
        "BAD_VALUE", "BAD_MASK", "BAD_PREREQ", "DUP_FIELD", "EPERM"),
    5: ("UNKNOWN", "TABLE_FULL", "BAD_TABLE_ID", "OVERLAP", "EPERM", "BAD_TIMEOUT", "BAD_COMMAND", "BAD_FLAGS"),
    6: ("GROUP_EXISTS", "INVALID_GROUP", "WEIGHT_UNSUPPORTED", "OUT_OF_GROUPS", "OUT_OF_BUCKETS",
        "CHAINING_UNSUPPORTED", "WATCH_UNSUPPORTED", "LOOP", "UNKNOWN_GROUP", "CHAINED_GROUP", "BAD_TYPE",
        "BAD_COMMAND", "BAD_BUCKET", "BAD_WATCH", "EPERM"),
    7: ("BAD_PORT", "BAD_HW_ADDR", "BAD_CONFIG", "BAD_ADVERTISE", "EPERM"),
    8: ("BAD_TABLE", "BAD_CONFIG", "EPERM"),
    11: ("STALE", "UNSUP", "BAD_ROLE"),
    12: ("UNKNOWN", "METER_EXISTS", "INVALID_METER", "UNKNOWN_METER", "BAD_COMMAND", "BAD_FLAGS", "BAD_RATE",
         "BAD_BURST", "BAD_BAND", "BAD_BAND_VALUE", "OUT_OF_METERS", "OUT_OF_BANDS"),
}
SENT_KEPT = 65536  # modifications remembered by xid (a switch answers errors within its round trip)


def names(type_: int, code: int) -> tuple[str, str]:
    """("FLOW_MOD_FAILED", "TABLE_FULL") for (5, 1); numbers for what OpenFlow 1.3 does not name."""
    codes = CODES.get(type_, ())
    return TYPES.get(type_, str(type_)), codes[code] if 0 <= code < len(codes) else str(code)


class SentChanges:
    """The rule changes sent lately, by (dpid, xid): what an error reply names by its xid."""

    def __init__(self, kept: int = SENT_KEPT) -> None:
        self.kept = kept
        self._sent: OrderedDict[tuple[int, int], Change] = OrderedDict()

    def record(self, dpid: int, xid: int, change: Change) -> None:
        self._sent[(dpid, xid)] = change
        if len(self._sent) > self.kept:
            self._sent.popitem(last=False)

    def pop(self, dpid: int, xid: int) -> Change | None:
        return self._sent.pop((dpid, xid), None)

    def forget(self, dpid: int) -> None:
        """The switch's connection went: its xids start over with the next one."""
        for key in [k for k in self._sent if k[0] == dpid]:
            del self._sent[key]
