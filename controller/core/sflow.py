"""The core's sFlow wiring (te.detection: sflow | both | auto; controller/southbound/sflow/detection.py): datagrams
from the collector's thread into the estimator, completed windows into the flow monitor (a window is a poll), the
exact entries the sampled elephants being pinned get at their ingress, and under ``auto`` each switch's move
between flow stats and sFlow (southbound/sflow/switch_detection.py) with its flows handed over. A mixin of
``controller.core.ControllerCore``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from controller.core.state import CoreState
from controller.southbound.sflow.decoder import Datagram
from controller.state.flowkey import FlowKey

LOG = logging.getLogger("mlroute")


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
        if self.auto is not None:  # flows entering at a switch on flow stats are its polls' business
            rates = {key: v for key, v in rates.items() if self.auto.uses_sflow(v[0])}
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

    def detection_tick(self) -> bool:
        """``te.detection: auto``, from the shell's sFlow loop: a switch whose export was heard (and covers its
        host ports) moves to sFlow, one silent for ``sflow.silent_s`` back to flow stats, each with its flows
        handed over; returns True when one moved (a resync: its copy and counting rules follow)."""
        if self.auto is None or self.sflow is None:
            return False
        for dpid, at in self.sflow.heard().items():
            self.auto.heard(dpid, at)
        moves = self.auto.tick(self.clock(), self._export_covers)
        for dpid in sorted(moves.to_sflow):
            self._to_sflow(dpid)
        for dpid in sorted(moves.to_flowstats):
            self._to_flowstats(dpid)
        if moves:
            self.flow_copy = replace(self.flow_copy, sampled=self.auto.sampled)
        return bool(moves)

    def _export_covers(self, dpid: int) -> bool:
        """Every port of ``dpid`` with a host is in the agent map: a sample entering there is placed."""
        assert self.sflow is not None
        missing = self.topology.access_ports(dpid) - self.sflow.agents.mapped(dpid)
        return not any(self.topology.hosts_at(dpid, port) for port in missing)

    def _to_sflow(self, dpid: int) -> None:
        """Flows entering at ``dpid`` are fed by samples from the next window on, each keeping its state; their
        counting rules leave with the next sync, except a pinned flow's, whose entry holds its pin (an sFlow pin's
        from now on: it goes when unpinned, ``_sflow_pins``)."""
        handed = self.monitor.hand_to_samples(dpid)
        pinned = self.te.pinned
        left = 0
        for key, (where, _) in list(self.accounting.items()):
            if where != dpid:
                continue
            if key in pinned:
                self._sflow_pinned.add(key)
            elif self.accounting.removed(key, dpid):
                left += 1
        LOG.info("switch %s: its sFlow export is heard: flows entering there detected from samples (%d handed "
                 "over, %d counting rules to go)", dpid, len(handed), left)

    def _to_flowstats(self, dpid: int) -> None:
        """``dpid``'s export went silent: its sampled elephants get a counting rule at their ingress and are
        counted by its polls (the other sampled flows are new flows again at their next packet, copied as its
        host ports' copy rules come back); a pinned elephant's entry is an ordinary counting rule from now on."""
        assert self.sflow is not None
        handed = self.monitor.hand_to_stats(dpid)
        for key in handed:
            where = self.accounting.get(key) or self.sflow.ingress_of(key)
            if where is not None and where[0] == dpid:
                self.accounting.observe(key, *where)
        self._sflow_pinned -= {k for k in self._sflow_pinned if (self.accounting.get(k) or (None,))[0] == dpid}
        LOG.info("switch %s: no sFlow export heard for %.0f s: flows entering there detected by flow stats again "
                 "(%d elephants handed over)", dpid, self.config["sflow"]["silent_s"], len(handed))
