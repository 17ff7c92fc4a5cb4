"""OpenFlow 1.3 roles of one cluster node: what to ask each switch for, what its answers mean, when it may write.

Pure (no kazoo, no framework): the shell feeds it role replies and errors, the coordinator feeds it leadership.
The leader asks every switch for MASTER with the cluster's generation, which only grows (ZooKeeper bumps it at
each election); the others ask for SLAVE. A switch refuses a role request whose generation is older than the
newest it has seen (OpenFlow 1.3 §6.3.6: ROLE_REQUEST_FAILED / STALE) and a write from a SLAVE (BAD_REQUEST /
IS_SLAVE), so a deposed leader that still believes it leads is fenced by the switches themselves: on either
answer it steps down and writes nothing more. A node writes to a switch only while it leads *and* that switch
confirmed MASTER at the current generation (``may_write``).
"""

from __future__ import annotations

from dataclasses import dataclass

# OpenFlow 1.3 constants (ofp_controller_role, ofp_error_type and their codes): plain numbers, no framework
NOCHANGE, EQUAL, MASTER, SLAVE = 0, 1, 2, 3
ROLE_NAMES = {NOCHANGE: "nochange", EQUAL: "equal", MASTER: "master", SLAVE: "slave"}
OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE = 1, 10
OFPET_ROLE_REQUEST_FAILED, OFPRRFC_STALE = 11, 0

_U64 = 1 << 64

#: what an answer means for this node (``SwitchRoles.reply`` / ``error``)
CONFIRMED = "confirmed"  # the switch is now writable (leader: MASTER at the current generation)
FENCED = "fenced"  # a newer generation holds the switches: step down at once, write nothing
RETRY = "retry"  # a follower's request was stale: asked again when the generation it knows grows
NOTHING = "nothing"


def distance(a: int, b: int) -> int:
    """``a - b`` as OpenFlow compares generation ids: the difference taken as a signed 64-bit number, so the
    order survives the counter wrapping around."""
    d = (a - b) % _U64
    return d - _U64 if d >= 1 << 63 else d


def newer(a: int, b: int) -> bool:
    """Whether generation ``a`` is newer than ``b`` (§6.3.6)."""
    return distance(a, b) > 0


@dataclass(frozen=True)
class RoleRequest:
    """An OFPT_ROLE_REQUEST to send: role and generation_id (a framework's helper would send 0)."""

    dpid: int
    role: int
    generation: int


@dataclass
class _Switch:
    asked: int | None = None  # the role last asked for
    asked_generation: int = 0
    role: int = EQUAL  # what the switch last confirmed (a new connection starts EQUAL)
    generation: int | None = None


class SwitchRoles:
    """This node's role on each connected switch, and whether it may write there."""

    def __init__(self) -> None:
        self.leading = False
        self.generation: int | None = None  # the newest this node knows (its own as leader)
        self.switches: dict[int, _Switch] = {}
        self.fenced_at: int | None = None  # the generation a switch fenced this node at (last time)
        self.led_at: int | None = None  # the generation it last led at

    # -- leadership (from the coordinator) -------------------------------------------------------------------
    def lead(self, generation: int) -> list[RoleRequest]:
        """This node was elected and bumped the generation: MASTER asked of every connected switch (none is
        writable until it confirms). The generation may equal the one it knows: its own bump, seen through the
        generation's watch before the election returned (kazoo's watch and the campaign run on two threads)."""
        if self.generation is not None and newer(self.generation, generation) or generation == self.led_at:
            raise ValueError(f"a leader's generation must grow: {generation} after {self.generation}")
        self.leading, self.generation, self.led_at = True, generation, generation
        for state in self.switches.values():
            state.role, state.generation = EQUAL, None
        return [self._ask(dpid) for dpid in sorted(self.switches)]

    def step_down(self) -> list[int]:
        """Leadership lost (session lost, fenced, resigned): the switches it could write to, which the shell
        stops writing to at once; SLAVE is asked again once the generation is known (``follow``)."""
        writable = [dpid for dpid in sorted(self.switches) if self.may_write(dpid)]
        self.leading = False
        for state in self.switches.values():
            state.role, state.asked = EQUAL, None
        return writable

    def follow(self, generation: int | None) -> list[RoleRequest]:
        """A follower learned the cluster's generation (at start, at each election): SLAVE asked of every switch
        not yet SLAVE at it."""
        if self.leading:
            return []
        if generation is not None and (self.generation is None or newer(generation, self.generation)):
            self.generation = generation
        return [self._ask(dpid) for dpid, state in sorted(self.switches.items())
                if state.asked is None or state.role != SLAVE and state.asked_generation != (self.generation or 0)]

    # -- switches (from the shell) ---------------------------------------------------------------------------
    def connected(self, dpid: int) -> RoleRequest:
        """A switch (re)connected: a new connection is EQUAL until asked; the role this node wants."""
        self.switches[dpid] = _Switch()
        return self._ask(dpid)

    def disconnected(self, dpid: int) -> None:
        self.switches.pop(dpid, None)

    def reply(self, dpid: int, role: int, generation: int) -> str:
        """A role reply: CONFIRMED when a leader's switch became writable, FENCED when it names a newer
        generation than this leader's."""
        state = self.switches.get(dpid)
        if state is None:
            return NOTHING
        state.role, state.generation = role, generation
        if not self.leading:
            return NOTHING
        if self.generation is not None and newer(generation, self.generation):
            return self._fenced(generation)
        return CONFIRMED if self.may_write(dpid) else NOTHING

    def error(self, dpid: int, err_type: int, code: int) -> str:
        """An OpenFlow error from a switch: STALE or IS_SLAVE fence a leader; a follower's stale SLAVE request
        is asked again when it learns the newer generation."""
        state = self.switches.get(dpid)
        stale = err_type == OFPET_ROLE_REQUEST_FAILED and code == OFPRRFC_STALE
        is_slave = err_type == OFPET_BAD_REQUEST and code == OFPBRC_IS_SLAVE
        if state is None or not (stale or is_slave):
            return NOTHING
        if self.leading:
            return self._fenced(self.generation)
        if stale:
            state.asked = None  # asked again by the next follow()
            return RETRY
        return NOTHING  # a follower's write refused (the framework's own LLDP packet-outs): expected

    def _fenced(self, generation: int | None) -> str:
        self.fenced_at = generation
        return FENCED

    # -- the gate --------------------------------------------------------------------------------------------
    def may_write(self, dpid: int) -> bool:
        """Flow mods, group mods and packet-outs go to ``dpid`` only while this node leads and the switch
        confirmed MASTER at this node's generation."""
        state = self.switches.get(dpid)
        return (self.leading and state is not None and state.role == MASTER
                and state.generation is not None and state.generation == self.generation)

    def view(self) -> dict[int, dict[str, object]]:
        """Per switch: the role asked and confirmed, and the generation confirmed (GET /mlroute/cluster)."""
        return {dpid: {"asked": ROLE_NAMES.get(s.asked, None) if s.asked is not None else None,
                       "role": ROLE_NAMES.get(s.role, str(s.role)), "generation": s.generation,
                       "writable": self.may_write(dpid)}
                for dpid, s in sorted(self.switches.items())}

    def _ask(self, dpid: int) -> RoleRequest:
        state = self.switches[dpid]
        state.asked = MASTER if self.leading else SLAVE
        state.asked_generation = self.generation or 0
        return RoleRequest(dpid, state.asked, state.asked_generation)
