"""Port statistics of fabric switches -> per directed link tx/rx bit/s, utilisation and pinned elephants.

Why port counters: flow stats are polled at ingress switches only and cover the counting rules, so they say
nothing about how loaded each fabric link is (mice, ECMP's real hash choices). One port-stats multipart per
switch and period gives every port's byte counters. Rates come from the switch-reported port durations, as in
monitor.py, because a poll that arrives late on a busy controller would otherwise inflate or deflate the rate;
a switch that does not report durations (all ones, allowed by OpenFlow 1.3) falls back to the controller's
clock. A counter that goes backwards (port re-created, counters cleared) starts a new baseline instead of
producing a negative rate, and a port missing from a complete reply is forgotten. Plain data, no Ryu: the
southbound wing hands the reply's entries to ``samples_from_reply``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from controller.state.flowkey import FlowKey
from controller.state.monitor import MalformedStatsError
from controller.state.topology import Topology, port_toward

# OpenFlow 1.3 reserved port numbers start here (OFPP_MAX = 0xffffff00): OFPP_LOCAL and friends are no links.
OFPP_MAX = 0xFFFFFF00
DURATION_UNKNOWN = 0xFFFFFFFF  # duration_sec a switch sends when it does not track port durations


@dataclass(frozen=True)
class PortSample:
    """One port's counters from one poll; ``duration_s`` None when the switch does not report it."""

    dpid: int
    port: int
    tx_bytes: int
    rx_bytes: int
    duration_s: float | None


def sample_from_port_stat(dpid: int, port_no: Any, tx_bytes: Any, rx_bytes: Any, duration_sec: Any,
                          duration_nsec: Any) -> PortSample:
    """A PortSample from one port-stats entry's fields; MalformedStatsError when they are not usable counters."""
    try:
        port, tx, rx, sec, nsec = int(port_no), int(tx_bytes), int(rx_bytes), int(duration_sec), int(duration_nsec)
    except (TypeError, ValueError) as exc:
        raise MalformedStatsError(f"switch {dpid}: port-stats entry without usable counters: {exc!r}") from None
    if min(port, tx, rx, sec, nsec) < 0:
        raise MalformedStatsError(f"switch {dpid}: negative counter in port-stats entry for port {port}")
    duration = None if sec == DURATION_UNKNOWN else sec + nsec / 1e9
    return PortSample(dpid, port, tx, rx, duration)


def samples_from_reply(dpid: int, entries: Iterable[Any]) -> tuple[list[PortSample], list[str]]:
    """PortSamples of the physical ports in a port-stats reply (objects with OFPPortStats' attribute names).

    Returns (samples, problems): a malformed entry is skipped and described, the others still count.
    """
    samples, problems = [], []
    for stat in entries:
        try:
            sample = sample_from_port_stat(dpid, stat.port_no, stat.tx_bytes, stat.rx_bytes, stat.duration_sec,
                                           stat.duration_nsec)
        except AttributeError as exc:
            problems.append(f"switch {dpid}: port-stats entry lacks a field: {exc}")
            continue
        except MalformedStatsError as exc:
            problems.append(str(exc))
            continue
        if sample.port < OFPP_MAX:
            samples.append(sample)
    return samples, problems


@dataclass
class PortRate:
    tx_bytes: int
    rx_bytes: int
    clock_s: float  # the switch's port duration, or the controller's time when the switch gives none
    tx_bps: float = 0.0
    rx_bps: float = 0.0
    measured: bool = False  # False until two polls of the same counter baseline gave a rate


class PortRates:
    """Per (dpid, port) transmit and receive rates from successive complete port-stats replies."""

    def __init__(self) -> None:
        self.switches: dict[int, dict[int, PortRate]] = {}  # dpid -> port -> rate (a reply touches one switch)

    def update(self, dpid: int, samples: Iterable[PortSample], now: float) -> None:
        """Fold in one complete reply of switch ``dpid``; its ports absent from the reply are forgotten."""
        before = self.switches.get(dpid, {})
        after = {}
        for s in samples:
            clock = s.duration_s if s.duration_s is not None else now
            prev = before.get(s.port)
            if prev is None or clock < prev.clock_s or s.tx_bytes < prev.tx_bytes or s.rx_bytes < prev.rx_bytes:
                after[s.port] = PortRate(s.tx_bytes, s.rx_bytes, clock)  # new port or reset: new baseline
                continue
            after[s.port] = prev
            dt = clock - prev.clock_s
            if dt <= 0:
                continue  # the same snapshot again: nothing to learn
            prev.tx_bps = 8 * (s.tx_bytes - prev.tx_bytes) / dt
            prev.rx_bps = 8 * (s.rx_bytes - prev.rx_bytes) / dt
            prev.tx_bytes, prev.rx_bytes, prev.clock_s, prev.measured = s.tx_bytes, s.rx_bytes, clock, True
        self.switches[dpid] = after

    def forget(self, dpid: int) -> None:
        """A switch went away: its counters mean nothing any more."""
        self.switches.pop(dpid, None)

    def rate(self, dpid: int, port: int) -> PortRate | None:
        return self.switches.get(dpid, {}).get(port)


def elephants_per_link(pinned: Mapping[FlowKey, tuple[int, ...]], graph: nx.Graph) -> dict[tuple[int, int], int]:
    """Number of pinned elephants on each directed link, keyed by (src dpid, src port).

    ``pinned`` maps FlowKey -> path (tuple of dpids); the port of each hop is the one the pinned rules use
    (the live graph's port toward the next switch), so parallel links are told apart as the rules do.
    """
    counts: dict[tuple[int, int], int] = {}
    for path in pinned.values():
        for a, b in zip(path, path[1:]):
            port = port_toward(graph, a, b)
            if port is not None:
                counts[(a, port)] = counts.get((a, port), 0) + 1
    return counts


def links_json(topology: Topology, rates: PortRates, pinned: Mapping[FlowKey, tuple[int, ...]], capacity_bps: float,
               graph: nx.Graph | None = None) -> list[dict[str, Any]]:
    """The body of ``GET /mlroute/links``: one entry per directed fabric link the topology knows.

    ``tx_bps`` is what the source port sent, ``rx_bps`` what the destination port received; ``utilisation``
    is the larger of the two over ``capacity_bps``, clamped to 0..1 (None while no rate is measured yet).
    """
    if capacity_bps <= 0:
        raise ValueError(f"fabric capacity must be > 0 bit/s, got {capacity_bps!r}")
    graph = graph if graph is not None else topology.graph()
    elephants = elephants_per_link(pinned, graph)
    live = {(link.src, link.src_port) for link in topology.live_links()}
    out = []
    for link in sorted(topology.links.values(), key=lambda lnk: (lnk.src, lnk.src_port)):
        tx = rates.rate(link.src, link.src_port)
        rx = rates.rate(link.dst, link.dst_port)
        tx_bps = tx.tx_bps if tx is not None and tx.measured else None
        rx_bps = rx.rx_bps if rx is not None and rx.measured else None
        known = [v for v in (tx_bps, rx_bps) if v is not None]
        out.append({"src": link.src, "src_port": link.src_port, "dst": link.dst, "dst_port": link.dst_port,
                    "tx_bps": tx_bps, "rx_bps": rx_bps,
                    "utilisation": min(1.0, max(known) / capacity_bps) if known else None,
                    "elephants": elephants.get((link.src, link.src_port), 0),
                    "live": (link.src, link.src_port) in live})
    return out


class LinkLoad:
    """The shell's one handle on link load: which switches to poll, replies in, the REST view out.

    ``clock`` is the fallback for switches that report no port durations (monotonic seconds).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.rates = PortRates()

    @staticmethod
    def poll_targets(topology: Topology, connected: Iterable[int]) -> list[int]:
        """Connected switches with at least one fabric port: one port-stats request each per period."""
        return sorted(d for d in connected if topology.fabric_ports(d))

    def reply(self, dpid: int, entries: Iterable[Any]) -> list[str]:
        """Fold in one complete port-stats reply; returns descriptions of the entries that were skipped."""
        samples, problems = samples_from_reply(dpid, entries)
        self.rates.update(dpid, samples, self.clock())
        return problems

    def forget(self, dpid: int) -> None:
        self.rates.forget(dpid)

    def links(self, topology: Topology, pinned: Mapping[FlowKey, tuple[int, ...]],
              capacity_bps: float) -> list[dict[str, Any]]:
        return links_json(topology, self.rates, pinned, capacity_bps)
