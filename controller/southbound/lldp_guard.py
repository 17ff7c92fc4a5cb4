"""LLDP that cannot move links: a frame the topology must not believe is dropped before Ryu's topology app sees it.

Ryu's ``Switches.lldp_packet_in_handler`` acts on every Ryu-format LLDP frame at once: when the claimed source port
already has a peer other than the receiving port, it deletes that link and announces the delete *before* it looks
at the new claim. The topology's own guard (``Topology.add_link``: a claim becomes a link only once both directions
are claimed and neither end has a host) therefore saw the delete of a real link first and the forged claim second:
a host replaying frames that name real switch ports kept real links out of the topology (measured: 12 claims at
50 frames/s, 7-12 of the k=4 fabric's links missing at every sample). Here the frame is judged first:

* received on a port where a host is bound: a host port is not a fabric port (hosts are only ever bound at ports
  that LLDP has not made fabric ports);
* naming a source port whose link is confirmed in both directions, towards another port than the receiving one;
* received on a port whose link is confirmed in both directions, from another port than its peer.

Such a frame never creates, moves or deletes a link, nor refreshes the claimed port's LLDP timestamp. A real
re-cabling is still learned: the old link stops being refreshed, Ryu times it out, and the next frame is admitted.
Ryu-free (the Switches class and the topology are passed in), installed by controller/app.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from controller.southbound.log_throttle import LOG_PERIOD_S, LogThrottle
from controller.state.topology import Topology

LOG = logging.getLogger("mlroute")

#: a frame refused for a port is logged at most once per this many seconds per port (a replay is thousands)

HOST_PORT = "host_port"
CONFIRMED_SOURCE = "confirmed_source"
CONFIRMED_RECEIVER = "confirmed_receiver"


def verdict(topology: Topology, src: tuple[int, int], dst: tuple[int, int]) -> str | None:
    """Why an LLDP frame naming port ``src`` and received at port ``dst`` must be ignored; None to let it in."""
    if topology.hosts_at(*dst):
        return HOST_PORT
    peer = _confirmed_peer(topology, src)
    if peer is not None and peer != dst:
        return CONFIRMED_SOURCE
    peer = _confirmed_peer(topology, dst)
    if peer is not None and peer != src:
        return CONFIRMED_RECEIVER
    return None


def _confirmed_peer(topology: Topology, port: tuple[int, int]) -> tuple[int, int] | None:
    """The far end of ``port``'s link when the topology holds it in both directions."""
    link = topology.links.get(port)
    if link is None or topology.links.get((link.dst, link.dst_port)) != link.reverse:
        return None
    return link.dst, link.dst_port


class LldpGuard:
    """Judges frames for the patched handler, counts the refused ones by reason and logs them once per port per
    period."""

    def __init__(self, topology: Topology, count: Callable[[str], None], clock: Callable[[], float]):
        self.topology, self.count, self.clock = topology, count, clock
        self._log = LogThrottle(clock, LOG_PERIOD_S)

    def admit(self, src: tuple[int, int], dst: tuple[int, int]) -> bool:
        why = verdict(self.topology, src, dst)
        if why is None:
            return True
        self.count(why)
        if self._log.due(dst):
            LOG.warning("LLDP claiming %s:%s received at %s:%s ignored (%s); further ones at this port are "
                        "counted in mlroute_lldp_ignored_total, logged again in %.0f s", src[0], src[1], dst[0],
                        dst[1], why, LOG_PERIOD_S)
        return False


def install(switches_cls: type, parse: Callable[[bytes], tuple[int, int]]) -> None:
    """Make ``switches_cls`` (Ryu's Switches app class) consult ``switches_cls.lldp_guard`` (an
    :class:`LldpGuard`, set once the app that owns the topology exists; until then every frame passes) before
    its LLDP packet-in handler. ``parse(data)`` returns the frame's (dpid, port) or raises for a frame that is
    not Ryu's LLDP (the handler then ignores it as before). Before the app is instantiated."""
    # Ryu's handler is kept out of sight of Ryu's registration, which takes every method that carries event
    # subscriptions: kept as a class attribute it would be registered too and see every frame unguarded
    kept = vars(switches_cls).get("_mlroute_unguarded")
    original = kept[0] if kept else vars(switches_cls)["lldp_packet_in_handler"]
    switches_cls._mlroute_unguarded = (original,)  # type: ignore[attr-defined]
    switches_cls.lldp_guard = None  # type: ignore[attr-defined]

    @functools.wraps(original)  # keeps Ryu's event-handler registration (the function's attributes)
    def guarded(self: Any, ev: Any) -> Any:
        guard = getattr(self, "lldp_guard", None)
        msg = ev.msg
        if guard is not None:
            try:
                src = parse(msg.data)
                dst = (msg.datapath.id, msg.match["in_port"])
            except Exception:  # not Ryu's LLDP (or no in_port): Ryu's handler decides, as it always did
                return original(self, ev)
            if not guard.admit((int(src[0]), int(src[1])), (int(dst[0]), int(dst[1]))):
                return None
        return original(self, ev)

    switches_cls.lldp_packet_in_handler = guarded  # type: ignore[attr-defined]
