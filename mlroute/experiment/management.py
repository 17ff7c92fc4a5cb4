"""An out-of-band management network for emulated hosts: a Linux bridge in the root namespace and one veth per
host, so training jobs inside the hosts reach the controller's REST as training hosts reach a controller in a
real cluster, never through the fabric under test.

Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range), which no interface of these machines holds
(PLATFORM.md: the uplink is 192.0.2.0/24). The bridge takes the first address; host ``hN`` takes the (N+1)-th.
Before anything is sent, the root namespace's route to the bridge address must name the bridge: an overlap with
a real network would send the controller's replies out of the machine.

Everything is torn down by ``close()`` (idempotent): the veths, then the bridge. A leftover bridge of the same
name (a run killed before its teardown) is removed first: only one emulated network runs at a time
(/tmp/mlroute-mininet.lock), so it cannot belong to a run still going.
"""

from __future__ import annotations

import ipaddress
import subprocess
from typing import Any

from mlroute.errors import MlrouteError

NETWORK = ipaddress.IPv4Network("198.18.0.0/16")  # the first half of RFC 2544's 198.18.0.0/15
BRIDGE = "mlr-mgmt"
ROOT_PREFIX = "mlrm-"  # the root-namespace end of a host's veth: mlrm-h1, ...
HOST_SUFFIX = "-mgmt"  # the host's end: h1-mgmt, ...
IP_TIMEOUT_S = 10


class ManagementError(MlrouteError, RuntimeError):
    """The management network could not be set up (an address taken, a command refused)."""


def host_address(number: int) -> str:
    """Host ``h<number>``'s management address (1-based Mininet numbering)."""
    if not 1 <= number < NETWORK.num_addresses - 2:
        raise ManagementError(f"host number {number} does not fit the management network {NETWORK}")
    return str(NETWORK.network_address + 1 + number)


def bridge_address() -> str:
    return str(NETWORK.network_address + 1)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and done.returncode != 0:
        raise ManagementError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def _links() -> list[str]:
    out = _ip("-o", "link", check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def route_device(address: str) -> str | None:
    """The device the root namespace's routes send ``address`` out of (None when there is no route)."""
    words = _ip("route", "get", address, check=False).stdout.split()
    return words[words.index("dev") + 1] if "dev" in words else None


class ManagementNetwork:
    """The bridge (``up()``), then the hosts (``attach(net)``, once the Mininet network runs), ``close()``."""

    def __init__(self, bridge: str = BRIDGE) -> None:
        self.bridge = bridge
        self.address = bridge_address()
        self.hosts: dict[str, str] = {}  # Mininet host name -> management address
        self._veths: list[str] = []
        self._up = False

    def __enter__(self) -> ManagementNetwork:
        self.up()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def up(self) -> None:
        """The bridge with its address, checked to be where the root namespace routes that address."""
        self.close_leftovers()
        self._up = True
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.address}/{NETWORK.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            probe = host_address(1)  # the bridge's own address routes via lo: ask for a host's
            dev = route_device(probe)
            if dev != self.bridge:
                raise ManagementError(f"the root namespace routes {probe} via {dev}, not the management "
                                      f"bridge {self.bridge}: {NETWORK} overlaps a network of this machine")
        except BaseException:
            self.close()
            raise

    def attach(self, net: Any) -> dict[str, str]:
        """One veth per host of ``net`` (host ``hN``: ``hN-mgmt`` inside it, ``mlrm-hN`` on the bridge) with its
        management address; returns host name -> address. The fabric's routes are untouched: the hosts reach only
        the management network's addresses through it."""
        for host in net.hosts:
            number = int(host.name.lstrip("h"))
            outer, inner = f"{ROOT_PREFIX}{host.name}", f"{host.name}{HOST_SUFFIX}"
            addr = host_address(number)
            if outer in _links():  # the last network's, its namespace still being dismantled by the kernel
                _ip("link", "del", outer, check=False)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", str(host.pid))
            self._veths.append(outer)
            _ip("link", "set", outer, "master", self.bridge, "up")
            out = host.cmd(f"ip addr add {addr}/{NETWORK.prefixlen} dev {inner} && ip link set {inner} up "
                           f"&& echo mgmt-ok")
            if "mgmt-ok" not in out:
                raise ManagementError(f"{host.name}: could not configure {inner}: {out.strip()}")
            self.hosts[host.name] = addr
        return dict(self.hosts)

    def detach(self) -> None:
        """Delete the hosts' veths (before their network stops; the bridge stays for the next network)."""
        for dev in self._veths:
            _ip("link", "del", dev, check=False)
        self._veths.clear()
        self.hosts.clear()

    def url(self, port: int) -> str:
        """The controller's REST root as the hosts reach it."""
        return f"http://{self.address}:{port}"

    def close_leftovers(self) -> None:
        for dev in _links():
            if dev == self.bridge or dev.startswith(ROOT_PREFIX):
                _ip("link", "del", dev, check=False)

    def close(self) -> None:
        """Delete the veths and the bridge (idempotent; nothing of ours is left even after a failed set-up)."""
        if not self._up:
            return
        self._up = False
        for dev in self._veths:
            _ip("link", "del", dev, check=False)  # gone already when the host's namespace went
        self._veths.clear()
        self.close_leftovers()
        self.hosts.clear()
