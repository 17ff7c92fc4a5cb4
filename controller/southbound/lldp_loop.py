"""Ryu's LLDP send loop, with a port that comes up, or a half-learned link's far end, served at once instead of
after the whole batch.

Ryu's ``Switches.lldp_loop`` sends one LLDP frame to every due port with a 50 ms guard between frames, and only
looks for new work after the whole batch. Every port is due again 0.9 s after its last frame, so on a fabric of
N switch ports a batch lasts N x 50 ms (k=8 fat-tree: 640 ports, 32 s, and up to 60 s on a loaded machine), and
a port that came up waited for the batch to end: a restored link was learned again 1.5-3.2 s after it came back
on k=4 and 11 s on k=8 (measured), during which the traffic engineer routed around a link that was back; a cable
whose first frames were both lost at start-up stayed unknown for a whole batch (its switches look host-facing:
the fabric "not a Clos" for 60 s on k=8).

This is Ryu's loop with three changes. The guard shrinks with the port count so that a batch lasts at most
``ROTATION_S`` (8 s; k=4's 80 ports keep Ryu's 50 ms, k=8's 640 get 12.5 ms: 80 frames a second), never below
``MIN_GUARD_S``. Between guarded frames it checks the loop's event, which Ryu sets on every
port change, and when it is set it starts over, so the ports waiting without a timestamp (just up, just changed,
or a link's reverse end to re-check) are sent first; the rest of the batch follows. Same frames, same order
otherwise. Ryu-free (the Switches app is passed in), installed by controller/app.py.

A link is learned only once both of its ends' frames arrived. At start-up, when the first end's frame arrives,
Ryu sends the far end's at once to check the reverse; when that one frame is lost (a switch still connecting,
its LLDP rule not yet in place, drops it), the port waited for its turn in the batch, and on k=8 a fabric once
stayed "not a Clos" for more than 60 s (a half-known cable's switches look host-facing). Such a port (some link
ends at it, none starts from it) is *unanswered*: it is sent again every ``LLDP_SEND_PERIOD_PER_PORT``, between
the batch's frames, until a link starts from it. After start-up there are none (a one-way cable costs one frame
a second).

A controller cluster's follower may not send (a SLAVE's packet-outs are refused, OpenFlow 1.3 §6.3.6), so a
``lldp_allowed(dpid)`` on the app, when set, holds back the ports of switches it says no to: they keep no
timestamp, so they go first once allowed (the shell sets ``lldp_event`` when this node takes over), and the loop
looks again every ``HELD_RECHECK_S`` meanwhile instead of spinning on them. It asks before every frame, not once
per batch: a node that steps down mid-batch sends nothing more (before: up to 1.5 s of frames refused IS_SLAVE).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from controller.southbound.log_throttle import LogThrottle

LOG = logging.getLogger("mlroute")

HELD_RECHECK_S = 0.5  # ports held back (lldp_allowed said no): looked at again this often
ROTATION_S = 8.0  # a batch of every port lasts at most this long (the guard shrinks with the port count) ...
MIN_GUARD_S = 0.005  # ... down to this guard between frames (at most 200 frames a second)


def lldp_loop(switches: Any, sleep: Callable[[float], Any], clock: Callable[[], float] = time.time) -> None:
    """Run ``switches``' LLDP sending (a ryu.topology.switches.Switches) until it stops being active. A pass that
    fails is logged (once a minute) and the loop goes on: discovery that died silently would leave every link as
    it was, half-learned ones for ever."""
    throttle = LogThrottle(clock)
    unanswered = _Unanswered(switches)
    while switches.is_active:
        try:
            _one_pass(switches, sleep, clock, throttle, unanswered)
        except Exception:
            if throttle.due("the loop"):
                LOG.exception("LLDP: a pass of the send loop failed; going on")
            sleep(HELD_RECHECK_S)


def _one_pass(switches: Any, sleep: Callable[[float], Any], clock: Callable[[], float], throttle: LogThrottle,
              unanswered: _Unanswered) -> None:
    """Send what is due, then wait for the next port to be due or for a port change."""
    unanswered.find()
    event = switches.lldp_event
    event.clear()
    now = clock()
    timeout = None
    ports_now, ports = [], []
    allowed = getattr(switches, "lldp_allowed", None)
    held = False
    for key, data in switches.ports.items():  # ordered: never-sent first, then by the time of the last frame
        if allowed is not None and not allowed(getattr(key, "dpid", None)):
            held = True
            continue
        if data.timestamp is None:
            ports_now.append(key)
            continue
        expire = data.timestamp + switches.LLDP_SEND_PERIOD_PER_PORT
        if expire <= now:
            ports.append(key)
            continue
        timeout = expire - now
        break
    for port in ports_now:
        switches.send_lldp_packet(port)
    interrupted = False
    urgent_sent = _send_unanswered(switches, unanswered, sleep, clock, allowed, throttle)
    for port in ports:
        if event.is_set():  # a port changed meanwhile: it goes first, the rest of this batch after it
            interrupted = True
            break
        urgent_sent |= _send_unanswered(switches, unanswered, sleep, clock, allowed, throttle)
        if port in urgent_sent:
            continue
        if allowed is not None and not allowed(getattr(port, "dpid", None)):
            held = True  # stepped down during the batch (a batch lasts ports x 50 ms): not one frame more
            continue
        switches.send_lldp_packet(port)
        sleep(guard(switches))  # don't burst
    if interrupted:
        return  # (at once: the changed port first)
    if timeout is not None and ports:
        timeout = 0  # we have already slept
    retry = _next_unanswered(switches, unanswered, clock(), allowed)
    if retry is not None:
        timeout = retry if timeout is None else min(timeout, retry)
    if held:
        timeout = HELD_RECHECK_S if timeout is None else min(timeout, HELD_RECHECK_S)
    event.wait(timeout=timeout)


def guard(switches: Any) -> float:
    """The pause between two frames: Ryu's 50 ms, shortened so that a batch of every port lasts at most
    ``ROTATION_S`` (640 ports of a k=8 fat-tree: 12.5 ms), never below ``MIN_GUARD_S``."""
    ports = max(1, len(switches.ports))
    return max(MIN_GUARD_S, min(switches.LLDP_SEND_GUARD, ROTATION_S / ports))


class _Unanswered:
    """The unanswered ports (module docstring) as (the link's source port, the port, its PortData). A pass looks at
    them before every frame and a large fabric has thousands of links, so they are found again only at the start
    of a pass and when the link table changes size (a link learned or gone), not at every frame."""

    def __init__(self, switches: Any) -> None:
        self.switches = switches
        self._size: int | None = None
        self._found: list[tuple[Any, Any, Any]] = []

    def find(self) -> None:
        links = list(getattr(self.switches, "links", None) or ())  # (one C-level copy: atomic under native threads)
        starts = {link.src for link in links}  # (from the links themselves: Ryu's and os-ken's peer maps differ)
        found = []
        for link in links:
            data = self.switches.ports.get(link.dst)
            if data is not None and link.dst not in starts:
                found.append((link.src, link.dst, data))
        self._size, self._found = len(links), found

    def ports(self, allowed: Callable[[Any], bool] | None) -> list[tuple[Any, Any, Any]]:
        """Those this node may send to now."""
        if len(getattr(self.switches, "links", None) or ()) != self._size:
            self.find()
        return [u for u in self._found if allowed is None or allowed(getattr(u[1], "dpid", None))]


def _send_unanswered(switches: Any, unanswered: _Unanswered, sleep: Callable[[float], Any],
                     clock: Callable[[], float], allowed: Callable[[Any], bool] | None,
                     throttle: LogThrottle) -> set[Any]:
    """Send the unanswered ports that are due (their last frame ``LLDP_SEND_PERIOD_PER_PORT`` ago); the ports
    sent. A port sent again (its reverse check was lost) is logged, once a period per port."""
    now, period = clock(), switches.LLDP_SEND_PERIOD_PER_PORT
    sent = set()
    for src, port, data in unanswered.ports(allowed):
        if data.timestamp is None or data.timestamp + period <= now:
            if data.timestamp is not None and throttle.due(port):
                LOG.info("LLDP: link %s:%s -> %s:%s learned, its reverse not yet: sending again every %.1f s",
                         getattr(src, "dpid", src), getattr(src, "port_no", ""), getattr(port, "dpid", port),
                         getattr(port, "port_no", ""), period)
            switches.send_lldp_packet(port)
            sent.add(port)
            sleep(guard(switches))
    return sent


def _next_unanswered(switches: Any, unanswered: _Unanswered, now: float,
                     allowed: Callable[[Any], bool] | None) -> float | None:
    """Seconds until the next unanswered port is due; None when there is none."""
    period = switches.LLDP_SEND_PERIOD_PER_PORT
    due = [max(0.0, (data.timestamp or 0.0) + period - now) for _, _, data in unanswered.ports(allowed)]
    return min(due) if due else None


def install(switches_cls: type, sleep: Callable[[float], Any]) -> None:
    """Make ``switches_cls`` (Ryu's Switches app class) run this loop; before the app is instantiated. Ryu's
    own stays reachable as ``ryu_lldp_loop``."""
    if "ryu_lldp_loop" not in vars(switches_cls):
        setattr(switches_cls, "ryu_lldp_loop", vars(switches_cls)["lldp_loop"])  # noqa: B010
    setattr(switches_cls, "lldp_loop", lambda self: lldp_loop(self, sleep))  # noqa: B010  (any class)
