"""This host's address on the fabric: the source address of the route to the rendezvous (master) host.

A training host often has several addresses (management, fabric, loopback); the hostname may resolve to any of
them, or to the same name on every host (Mininet). The controller pins exact IPv4 pairs, so the address to
declare is the one the kernel picks to reach the master, i.e. the one the collective's connections use.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


def route_source(target: str) -> str:
    """The local IPv4 address the kernel's routes choose for ``target`` (a name or an address): the
    ``getsockname`` of a connected UDP socket. Sends nothing: connecting a datagram socket only picks the route."""
    addr = socket.getaddrinfo(target, None, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((addr, 9))
        return str(s.getsockname()[0])


def fabric_address(master: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """``MLROUTE_ADDR`` when set (a host whose route to the master is not its fabric address), else the route
    source toward ``master``; None when neither is known (nothing to declare rather than a wrong guess)."""
    if env.get("MLROUTE_ADDR"):
        return env["MLROUTE_ADDR"]
    if not master:
        return None
    try:
        return route_source(master)
    except OSError:
        return None
