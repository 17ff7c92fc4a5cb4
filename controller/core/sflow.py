"""The core's sFlow wiring (te.detection: sflow | both; controller/southbound/sflow/detection.py): datagrams from
the collector's thread into the estimator, completed windows into the flow monitor (a window is a poll), and the
exact entries the sampled elephants being pinned get at their ingress. A mixin of ``controller.core.ControllerCore``.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.state import CoreState
from controller.southbound.sflow.decoder import Datagram
from controller.state.flowkey import FlowKey


class SflowWiring(CoreState):
    """sFlow samples in, elephants out, for the core."""

    def sflow_datagram(self, now: float, datagram: Datagram) -> None:
        """A decoded sFlow datagram (the collector's thread: only the estimator's tables are touched)."""
        if self.sflow is not None:
            self.sflow.feed(now, datagram)

    def sflow_tick(self, collector_stats: Mapping[str, int] | None = None) -> bool:
        """The shell's sFlow loop, a few times a window: a completed window goes to the flow monitor (a window
        is a poll); returns True when a new elephant or elephant host pair appeared (a decision is requested at
        once)."""
        if self.sflow is None:
            return False
        now = self.clock()
        self.sflow.publish(collector_stats)
        rates = self.sflow.tick(now)
        if rates is None:
            if self.sflow.pairs_added:  # a heavy pair judged within the window: routed now, not at the next period
                self.request_decision()
            return self.sflow.pairs_added
        before = {st.key for st in self.monitor.elephants()}
        self.monitor.sampled({key: (dpid, bps, above) for key, (dpid, _, bps, above) in rates.items()}, now)
        for key, (dpid, port, bps, _) in rates.items():
            if bps > 0:  # sampled bytes from the source's port: a sign of life
                self.ageing.heard_from(key.src_ip, dpid, port)
        for key in self.recovered.hops:  # pinned before a restart: an elephant at its first busy window
            st = self.monitor.flows.get(key)
            if st is not None and st.rate_bps >= self.monitor.config.threshold_bps:
                st.elephant = True
        new = self.sflow.pairs_added or any(st.key not in before for st in self.monitor.elephants())
        if new:
            self.request_decision()
        return new

    def _sflow_pins(self) -> None:
        """Sampled elephants being pinned get an exact entry at their ingress (accounting: te_rules.counting_rule
        carries the pinned first hop), and lose it when unpinned; with ``sflow`` no other flow has one."""
        assert self.sflow is not None
        pinned = {k for k in self.te.pinned if isinstance(k, FlowKey)}
        for key in self._sflow_pinned - pinned:
            where = self.accounting.get(key)
            if where is not None:
                self.accounting.removed(key, where[0])
        self._sflow_pinned &= pinned
        for key in pinned - self._sflow_pinned:
            st = self.monitor.flows.get(key)
            if key in self.accounting or st is None or not st.sampled:
                continue  # counted already (flow stats, or read back after a restart)
            where = self.sflow.ingress_of(key)
            if where is not None:
                self.accounting.observe(key, *where)
                self._sflow_pinned.add(key)
