"""Decoded sFlow datagrams -> flow rates at the ingress edge and port rates: the one call the collector's
callback makes.

Why a step of its own: every switch on a path samples the same packet, so counting every flow sample would
multiply a flow's rate by its hop count. A flow sample counts only where its packet entered the fabric: its input
interface maps (``AgentMap``) to a host-facing port (``is_ingress``, the core's access-port test). Samples are
deduplicated per data source (``SequenceFilter``); the bytes counted per sample are ``frame_length - stripped``
(Open vSwitch strips the 4-byte FCS and counts it in ``frame_length``), the bytes OpenFlow flow statistics
count, so both detection modes compare against one threshold. Counter samples of mapped interfaces go to
``CounterRates``. Every sample not used is counted by why. No clock is read: ``now`` comes with each datagram.
``feed`` runs in the collector's thread and holds ``lock``; a reader in another thread (the TE step asking for
elephants, the link view) takes the same lock, since the tables are plain dicts. ``heard`` says when each switch's
export was last heard (a sample mapped to one of its ports): ``te.detection: auto`` moves a switch by it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.southbound.sflow.agents import AgentMap, PortRef
from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.decoder import Datagram
from controller.southbound.sflow.sequence import SequenceFilter
from controller.state.flowkey import PROTO_TCP, PROTO_UDP, FlowKey
from controller.state.sflow_rates import SampleRates

#: Why a flow sample was not counted (metric label values).
SKIP_REASONS = ("replayed", "no_header", "not_transport", "unknown_interface", "not_ingress")


class SflowIngest:
    def __init__(self, agents: AgentMap, rates: SampleRates, counters: CounterRates,
                 is_ingress: Callable[[int, int], bool], sequences: SequenceFilter | None = None):
        self.agents = agents
        self.rates = rates
        self.counters = counters
        self.is_ingress = is_ingress
        self.sequences = sequences if sequences is not None else SequenceFilter()
        self.ingress: dict[FlowKey, PortRef] = {}  # flow -> (dpid, port) where its last counted sample entered
        self.counted = 0
        self.skipped: dict[str, int] = dict.fromkeys(SKIP_REASONS, 0)
        self.counter_samples = 0
        self.counters_unmapped = 0
        self.heard: dict[int, float] = {}  # dpid -> when a sample mapped to one of its ports last arrived
        self.lock = threading.Lock()

    def feed(self, now: float, datagram: Datagram) -> None:
        """Fold in one datagram received at ``now`` (the controller's monotonic seconds)."""
        with self.lock:
            self._feed(now, datagram)

    def _feed(self, now: float, datagram: Datagram) -> None:
        agent, sub = datagram.agent, datagram.sub_agent_id
        accept = self.sequences.accept
        skipped = self.skipped
        for s in datagram.flow_samples:
            if not accept((agent, sub, 0, s.source_type, s.source_index), s.sequence):
                skipped["replayed"] += 1
                continue
            p = s.packet
            if p is None:
                skipped["no_header"] += 1
                continue
            if p.src_port is None or p.ip_proto not in (PROTO_TCP, PROTO_UDP):
                skipped["not_transport"] += 1
                continue
            where = self.agents.port_of(agent, sub, s.input_ifindex)
            if where is None:
                skipped["unknown_interface"] += 1
                continue
            self.heard[where[0]] = now
            if not self.is_ingress(*where):
                skipped["not_ingress"] += 1
                continue
            key = FlowKey(p.src_ip or "", p.dst_ip or "", p.ip_proto, p.src_port, p.dst_port or 0)
            self.rates.add(now, key, max(0, p.frame_length - p.stripped), s.sampling_rate)  # forged: >= 0
            self.ingress[key] = where
            self.counted += 1
        for c in datagram.counter_samples:
            if c.interface is None or not accept((agent, sub, 1, c.source_type, c.source_index), c.sequence):
                continue
            where = self.agents.port_of(agent, sub, c.interface.if_index)
            if where is None:
                self.counters_unmapped += 1
                continue
            self.heard[where[0]] = now
            self.counters.counter_sample(where[0], where[1], datagram.uptime_ms, c.interface)
            self.counter_samples += 1
        if len(self.ingress) > 2 * self.rates.flows.max_keys:  # keep only the flows the rates still track
            tracked = self.rates.flows.tracks
            self.ingress = {k: v for k, v in self.ingress.items() if k in tracked}

    def ingress_of(self, key: FlowKey) -> PortRef | None:
        """The (dpid, port) where the flow enters the fabric, as its samples said."""
        return self.ingress.get(key)

    def stats(self) -> dict[str, int]:
        """Counters for metrics (the rates' own ones included)."""
        out = {"flow_samples_counted": self.counted, "counter_samples_counted": self.counter_samples,
               "counter_samples_unmapped": self.counters_unmapped}
        out.update({f"flow_samples_{reason}": n for reason, n in self.skipped.items()})
        out.update(self.rates.stats())
        return out
