"""Hosts that stop answering age out with their rules: a binding costs an entry on every switch, so one left
by a host that went away, or by an address a hostile host claimed and dropped, must not stay forever.

Every sign of life refreshes a binding: a packet from its own port (ARP, IPv4 toward an unknown host, a new
transport flow's first packet, an answer to a probe) or counting-rule bytes from its port. A binding silent
for ``age_after_s`` gets a probe (``packet_in.probe``: ARP's for IPv4, RFC 5227's sender 0.0.0.0 unicast to its
MAC so the host's ARP cache is untouched; neighbour discovery's duplicate-address solicitation for IPv6) up to
``probes`` times, ``probe_interval_s`` apart at least; silent ``probe_interval_s`` after the last one, it is
forgotten. At most ``max_probes_per_tick`` probes go out per call, longest silence first, so a fabric whose
hosts all went quiet at once is probed over several periods instead of in one burst. Plain data and an injected
clock: the core calls ``tick`` from its housekeeping and sends the probes it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.decide.packet_in import Probe, probe
from controller.state.topology import UNKNOWN_MAC, Host, Topology

MAX_PROBES_PER_TICK = 256


@dataclass
class _Probing:
    sent: int
    last: float


class HostAgeing:
    def __init__(self, topology: Topology, clock: Callable[[], float], age_after_s: float, probes: int = 3,
                 probe_interval_s: float = 1.0, max_probes_per_tick: int = MAX_PROBES_PER_TICK) -> None:
        """``age_after_s`` 0 switches ageing off (bindings stay until contradicted)."""
        self.topology, self.clock = topology, clock
        self.age_after_s, self.probes, self.probe_interval_s = age_after_s, probes, probe_interval_s
        self.max_probes_per_tick = max_probes_per_tick
        self.heard: dict[str, float] = {}  # ip -> last sign of life of its current binding
        self.probing: dict[str, _Probing] = {}  # ip -> probes sent since it went silent

    def heard_from(self, ip: str, dpid: int, port: int, mac: str | None = None) -> None:
        """A packet with source ``ip`` (and MAC ``mac``, if known) from (dpid, port), or counting-rule bytes of a
        flow from it entering there: a sign of life if that is where ``ip`` is bound."""
        host = self.topology.hosts.get(ip)
        if host is None or host.location != (dpid, port):
            return
        if mac is not None and host.mac not in (mac, UNKNOWN_MAC):
            return  # another MAC using the address at that port: not the bound host
        self.heard[ip] = self.clock()
        self.probing.pop(ip, None)

    def tick(self) -> tuple[list[Probe], list[Host]]:
        """The probes to send now, and the bindings that did not answer (the caller forgets them)."""
        if not self.age_after_s:
            return [], []
        now, hosts = self.clock(), self.topology.hosts
        for ip in [ip for ip in self.heard if ip not in hosts]:  # unbound meanwhile (moved away, refused)
            del self.heard[ip]
            self.probing.pop(ip, None)
        probes: list[Probe] = []
        expired: list[Host] = []
        for ip, p in list(self.probing.items()):
            host = hosts.get(ip)
            if host is None or now - p.last < self.probe_interval_s:
                continue
            if p.sent >= self.probes:
                expired.append(host)
                del self.probing[ip]
                self.heard.pop(ip, None)
            elif len(probes) < self.max_probes_per_tick:
                p.sent, p.last = p.sent + 1, now
                probes.append(probe(host))
        silent = []
        for ip in hosts:
            heard = self.heard.setdefault(ip, now)  # a binding first seen now (learned, recovered) starts its clock
            if now - heard >= self.age_after_s and ip not in self.probing:
                silent.append((heard, ip))
        for _, ip in sorted(silent)[:max(0, self.max_probes_per_tick - len(probes))]:
            self.probing[ip] = _Probing(1, now)
            probes.append(probe(hosts[ip]))
        return probes, expired
