"""sFlow counter samples -> per-port transmit and receive rates, in the same shape as port-stats polling.

Why: where sFlow is on, every switch already pushes its interface counters each polling interval, so the link
view needs no port-stats requests. ``CounterRates`` is a ``linkstats.PortRates`` (``links_json`` and the
utilisation metric read it unchanged) fed one port at a time: a counter sample speaks of one interface, so a
port missing from one datagram is not forgotten (``forget`` on switch leave is). The clock is the agent's uptime
in the datagram header, which ticks when the counters were read, not when the datagram arrived (as linkstats
prefers the switch's port durations); a counter or an uptime that goes backwards (agent restart, counters
cleared) starts a new baseline. ifSpeed and ifOperStatus are kept too: Open vSwitch reports 10 Gb/s for a veth
whatever shaping it has, so capacity should still come from the configuration where links are shaped.
"""

from __future__ import annotations

from controller.southbound.sflow.decoder import InterfaceCounters
from controller.state.linkstats import PortRate, PortRates


class CounterRates(PortRates):
    def __init__(self) -> None:
        super().__init__()
        self.status: dict[tuple[int, int], tuple[int, bool]] = {}  # (dpid, port) -> (ifSpeed bit/s, oper up)

    def counter_sample(self, dpid: int, port: int, uptime_ms: int, counters: InterfaceCounters) -> PortRate:
        """Fold in one interface's counters, read at agent uptime ``uptime_ms``; returns the port's rate."""
        ports = self.switches.setdefault(dpid, {})
        clock = uptime_ms / 1000.0
        tx, rx = counters.out_octets, counters.in_octets
        self.status[(dpid, port)] = (counters.if_speed, counters.oper_up)
        prev = ports.get(port)
        if prev is None or clock < prev.clock_s or tx < prev.tx_bytes or rx < prev.rx_bytes:
            ports[port] = PortRate(tx, rx, clock)  # new port, agent restart or counters cleared: new baseline
            return ports[port]
        dt = clock - prev.clock_s
        if dt > 0:
            prev.tx_bps = 8 * (tx - prev.tx_bytes) / dt
            prev.rx_bps = 8 * (rx - prev.rx_bytes) / dt
            prev.tx_bytes, prev.rx_bytes, prev.clock_s, prev.measured = tx, rx, clock, True
        return prev

    def speed_bps(self, dpid: int, port: int) -> int | None:
        """The ifSpeed the agent reports (None before its first counter sample)."""
        st = self.status.get((dpid, port))
        return st[0] if st else None

    def oper_up(self, dpid: int, port: int) -> bool | None:
        st = self.status.get((dpid, port))
        return st[1] if st else None

    def utilisation(self, dpid: int, port: int, capacity_bps: float | None = None) -> float | None:
        """max(tx, rx) over ``capacity_bps`` (the reported ifSpeed when None), clamped to 0..1; None before a rate."""
        rate = self.rate(dpid, port)
        capacity = capacity_bps if capacity_bps is not None else self.speed_bps(dpid, port)
        if rate is None or not rate.measured or not capacity or capacity <= 0:
            return None
        return min(1.0, max(rate.tx_bps, rate.rx_bps) / capacity)

    def forget(self, dpid: int) -> None:
        super().forget(dpid)
        for key in [k for k in self.status if k[0] == dpid]:
            del self.status[key]
