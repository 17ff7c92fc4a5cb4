"""The controller's decision core: every event in, every decision out, as plain values (no Ryu).

``ControllerCore`` holds what the controller knows (topology, tiers, accounting, flow monitor, traffic engineer,
each switch's installed rules) and answers the Ryu shell (app.py) with values: packet-in decisions, TE results
and ``sync.Step`` lists of rule changes. The shell only translates OpenFlow events into these calls and the
answers into messages, the way Faucet's valve answers faucet.py; the smoke test drives both with synthetic
events.

Its methods come in five modules along the core's seams: this one (switches, ports and links coming and going,
packets and flows, the sync), ``decisions`` (jobs, the TE decision and its outcome), ``switches`` (each switch's
tables: description and profile, read-back, audit, refusals, barriers, the table budget), ``sflow`` (the sFlow
wiring) and ``views`` (what REST and the web view show), over ``state`` (what it holds).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from controller.core.decisions import TrafficDecisions
from controller.core.sflow import SflowWiring
from controller.core.state import LLDP_SETTLE_S as LLDP_SETTLE_S

# the constants and the budget function callers know from here (the state and the switch tables define them)
from controller.core.state import READBACK_TIMEOUT_S as READBACK_TIMEOUT_S
from controller.core.state import RECOVERY_MIN_S as RECOVERY_MIN_S
from controller.core.state import RESTORE_S
from controller.core.state import time_budget_s as time_budget_s
from controller.core.switches import REFUSED_HOLD_S as REFUSED_HOLD_S
from controller.core.switches import SwitchTables, _rule_id, _undone
from controller.core.views import CoreViews
from controller.decide.packet_in import Decision, Limited, PacketIn
from controller.desired import group_free, sync, table_budget, te_rules
from controller.desired.rules import (
    TABLE_CLASSIFY,
    Change,
    FlowRule,
    SwitchRules,
    apply_change,
)
from controller.desired.sync import Step
from controller.state.capabilities import SwitchCapabilities
from controller.state.flowkey import FlowKey, key_from_fields, pair_key
from controller.state.monitor import FlowSample

LOG = logging.getLogger("mlroute")

FREEZE_AFTER_CHANGES = 10_000  # a sync this big (a first install, a mass reroute) moves its rules out of GC's scans


class ControllerCore(TrafficDecisions, CoreViews, SflowWiring, SwitchTables):
    """What the controller knows (``CoreState``, set up from the validated configuration) and decides."""

    # -- switches, ports, links ---------------------------------------------------------------------------------
    def switch_connected(self, dpid: int, live_ports: Iterable[int]) -> bool:
        """A switch (re)connected: its tables are read back before anything is sent to it. Like every event
        here that returns a bool: whether the desired state may have changed (the shell resyncs; switches whose
        held rules changed outside a sync are the belief's stale ones, decisions wanted are queued)."""
        self.topology.add_switch(dpid, live_ports)
        self._graph = None
        self.connected.add(dpid)
        self._connected_at[dpid] = self.clock()
        self.belief.forget_refusals(dpid)  # its tables are read back
        self.belief.forget(dpid)
        self._forget_audit(dpid)
        self.capabilities[dpid] = SwitchCapabilities(dpid)
        self.readback.start(dpid, None)  # asked for in its turn: readback_asked
        LOG.info("switch %s connected (%d live ports)", dpid, len(self.topology.ports[dpid]))
        return True

    def readback_asked(self, dpid: int) -> None:
        """Its tables were asked for now (switches are asked a few at a time, connect_queue.py): the read-back's
        time runs from here."""
        if self.readback.pending(dpid):
            self.readback.start(dpid, self.clock())

    def switch_left(self, dpid: int) -> bool:
        """The switch's OpenFlow connection is gone. It is not a topology change: the switch keeps forwarding
        with the rules it holds (fail mode secure), so its ports, links and hosts stay and nobody else's routes
        move; only link and port events of connected switches remove links (``link_deleted``)."""
        self.connection_lost(dpid)
        LOG.info("switch %s disconnected: keeping its links and hosts while it forwards on its own", dpid)
        return True

    def connection_lost(self, dpid: int) -> None:
        self.connected.discard(dpid)
        self.belief.forget(dpid)
        self.readback.cancel(dpid)
        self.belief.forget_refusals(dpid)  # the read-back will tell
        self._forget_audit(dpid)
        self.metrics.forget_switch(dpid)

    def link_added(self, src: int, src_port: int, dst: int, dst_port: int) -> bool:
        if not self.topology.add_link(src, src_port, dst, dst_port):
            return False
        self._graph = None
        return True

    def link_deleted(self, src: int, src_port: int, dst: int, dst_port: int) -> bool:
        if src not in self.connected or dst not in self.connected:
            return False  # discovery cannot see through a disconnected switch; its port events tell on reconnect
        if not self.topology.remove_link(src, src_port, dst, dst_port):
            return False
        LOG.info("link %s:%s -> %s:%s down", src, src_port, dst, dst_port)
        self._graph = None
        return True

    def port_changed(self, dpid: int, port: int, live: bool) -> bool:
        if live:
            self.topology.port_up(dpid, port)
        else:
            self.topology.port_down(dpid, port)
        self._graph = None
        return True

    # -- packets and flows --------------------------------------------------------------------------------------
    def packet(self, pkt: PacketIn) -> Decision:
        """An ARP/IPv4 packet-in: learn its sender, answer ARP (the shell sends the decision's actions; hosts
        changed, ``decision.changed``: it resyncs)."""
        decision = self.packet_in.handle(pkt)
        if pkt.src_ip:
            self.ageing.heard_from(pkt.src_ip, pkt.dpid, pkt.in_port, pkt.eth_src)
        if decision.learned:
            host = self.topology.hosts[pkt.src_ip]
            LOG.info("host %s (%s) at switch %s port %s", host.ip, host.mac, host.dpid, host.port)
            if pkt.src_ip in self.jobs_by_host():
                self.incremental_next = True  # a declared job's host: its sends can be routed now
                self.request_decision()
        self._hosts_decided(decision)
        return decision

    def housekeeping(self) -> Decision:
        """Periodic: settle pending host moves by the clock (probes to resend, moves confirmed), probe silent
        hosts and forget those that did not answer (host_ageing.py); the shell sends the decision's actions and
        resyncs when hosts changed (``decision.changed``)."""
        decision = self.packet_in.tick()
        self._release_refused()
        probes, expired = self.ageing.tick()
        decision.actions.extend(probes)
        for host in expired:
            if self.topology.forget_host(host.ip):
                LOG.info("host %s (%s) at switch %s port %s aged out: silent for %.0f s and %d ARP probes "
                         "unanswered", host.ip, host.mac, host.dpid, host.port, self.ageing.age_after_s,
                         self.ageing.probes)
                self.metrics.hosts_aged.inc()
                decision.forgotten.append(host)
        self._hosts_decided(decision)
        return decision

    def _hosts_decided(self, decision: Decision) -> None:
        for host in decision.moved:
            LOG.info("host %s (%s) moved to switch %s port %s: its old location did not answer", host.ip,
                     host.mac, host.dpid, host.port)
        for refused in decision.refused:
            c = refused.claim
            LOG.warning("refused claim: %s (%s) at switch %s port %s contradicts %s: %s", c.ip, c.mac, c.dpid,
                        c.port, ", ".join(f"{h.ip} ({h.mac}) at {h.dpid}:{h.port}" for h in refused.holders),
                        refused.reason)
            self.metrics.packet_in.labels("refused_claim").inc()
        for limited in decision.limited:
            self._host_limited(limited)

    def _host_limited(self, limited: Limited) -> None:
        """A new address refused by the learning limits: counted, logged once per port per minute."""
        c = limited.claim
        self.metrics.hosts_refused.labels(limited.why).inc()
        if self._limited_log.due(c.location):
            LOG.warning("host limit (%s) at switch %s port %s: %s (%s) not learned; further ones at this port "
                        "are counted in mlroute_hosts_refused_total, logged again in %.0f s", limited.why, c.dpid,
                        c.port, c.ip, c.mac, self._limited_log.period_s)

    def new_transport_flow(self, key: FlowKey, dpid: int, in_port: int) -> tuple[list[Change], bool]:
        """First packet of a TCP/UDP flow at its ingress: its counting rule, to send at once (not with the next
        resync), so the flow-miss copies stop before the flow's second round trip: one packet-in per flow. With
        whether a resync is wanted (the rule left to it, or the flow's host pair counted whole from now on)."""
        self.ageing.heard_from(key.src_ip, dpid, in_port)
        if self.auto is not None and self.auto.uses_sflow(dpid):
            return [], False  # a copy sent before its switch moved to sFlow: samples detect it now
        counted, whole = self._account(key, dpid, in_port)
        if counted is None:
            return [], whole
        held = self.installed.get(dpid)
        if held is None or self.recovering() or self.syncing:  # (a sync paused mid-way would overwrite it)
            return [], True  # the switch's tables are not known yet: the resync adds it
        graph = self.live_graph() if self.te.pinned else nx.Graph()
        rule = te_rules.counting_rule(graph, counted, dpid, in_port, self.te.pinned,
                                      self.config["te"]["flow_idle_timeout_s"])
        if (dpid, _rule_id(rule)) in self.belief.refusals:
            return [], whole  # refused lately: uncounted until the hold is over
        if dpid in self.pacing and self.pace(dpid) > 0:
            return [], True  # its flow-mod budget is spent: the paced resync sends it, after what matters more
        if not self._room_for_counting_rule(dpid, held, rule):
            return [], whole
        change = Change("modify" if rule.key in held.flows else "add", rule)
        held.add_flow(rule)
        self.metrics.rule_changes.inc()
        return [change], whole

    def _account(self, key: FlowKey, dpid: int, in_port: int) -> tuple[FlowKey | None, bool]:
        """The key a new flow's copy is counted by from now on (its 5-tuple, or its host pair: ``_counted_as``,
        or past the new-flow budget), or None when nothing changes: a copy already in flight, a flow of a pair
        counted whole, or a flow left on ECMP uncounted (past the budget and the pair caps); with whether a host
        pair is counted whole from now on (a resync installs its rule)."""
        whole = False
        if key not in self.accounting:
            key, whole = self._counted_as(key, dpid, in_port)
        if key in self.accounting:
            return (key if self.accounting.observe(key, dpid, in_port) else None), whole
        if not (key.is_pair or self.new_flow_budget.take()):  # past the budget: its host pair counted whole
            new = pair_key(key) not in self.accounting
            pair = self._whole_pair(key, dpid, in_port, "the new-flow budget (te.new_flows_per_s) is spent")
            if pair is None:
                self.metrics.packet_in.labels("newflow_over_budget").inc()
                return None, whole
            key, whole = pair, whole or new
        return (key if self.accounting.observe(key, dpid, in_port) else None), whole

    def _room_for_counting_rule(self, dpid: int, held: SwitchRules, rule: FlowRule) -> bool:
        """Whether the counting rule's table has room (else the flow stays on ECMP, uncounted)."""
        room = self._limits_of(dpid).get(rule.table) if self.belief.full or self._small else None
        if room is not None and rule.key not in held.flows and not table_budget.has_room(held, rule.table, room):
            self.metrics.flows_uncounted.labels("table_full").inc()
            return False
        return True

    def _counted_as(self, key: FlowKey, dpid: int, in_port: int) -> tuple[FlowKey, bool]:
        """The key a new flow is counted by: its own 5-tuple, or its host pair where the ingress table is too
        tight for one entry per flow (table_budget.tight: the last entries count whole pairs) or the pair opens
        new flows faster than te.pair_new_flows_per_s (pair_rates.py; within the pair caps); and whether that
        pair is counted whole from now on by this flow (its rule goes in with a resync)."""
        held = self.installed.get(dpid)
        if held is not None and (self.belief.full or self._small):
            room = self._limits_of(dpid).get(TABLE_CLASSIFY)
            if room is not None and table_budget.tight(held, TABLE_CLASSIFY, room):
                pair = pair_key(key)
                if pair not in self.accounting:
                    self.metrics.flows_by_pair.inc()
                return pair, False
        if self.pair_rates.new_flow(key.src_ip, key.dst_ip):
            new = pair_key(key) not in self.accounting
            whole = self._whole_pair(key, dpid, in_port, "it opens new flows faster than te.pair_new_flows_per_s")
            return (key, False) if whole is None else (whole, new)
        return key, False

    def _whole_pair(self, key: FlowKey, dpid: int, in_port: int, why: str) -> FlowKey | None:
        """``key``'s host pair, counted whole from now on at this ingress (one rule for all its flows, above the
        new-flow copy: its next flows are neither copied nor learned), its 5-tuples' counting rules there
        folded into it; None past te.max_pairs_per_port or te.max_pairs (the flow stays uncounted)."""
        pair = pair_key(key)
        if pair in self.accounting:
            return pair
        te_cfg = self.config["te"]
        if (self.accounting.pairs_at((dpid, in_port)) >= te_cfg["max_pairs_per_port"]
                or self.accounting.pairs() >= te_cfg["max_pairs"]):
            self.metrics.flows_uncounted.labels("pair_cap").inc()
            return None
        self.metrics.flows_by_pair.inc()
        folded = [k for k, (d, _) in self.accounting.items()
                  if d == dpid and not k.is_pair and k.src_ip == pair.src_ip and k.dst_ip == pair.dst_ip]
        for k in folded:
            self.accounting.removed(k, dpid)
        if folded:
            self.belief.mark_stale(dpid)  # diffed whole: rules sent since the last sync are not in the plan yet
        if self._pair_log.due((dpid, in_port)):
            LOG.info("host pair %s -> %s counted whole at switch %s port %s (%s); %d of its flows' rules folded "
                     "in; further pairs at this port are counted in mlroute_flows_counted_by_pair_total",
                     pair.src_ip, pair.dst_ip, dpid, in_port, why, len(folded))
        return pair

    def counting_rule_removed(self, dpid: int, fields: Mapping[str, Any], deleted: bool = False) -> bool:
        """The switch removed a counting rule (idle timeout): the flow leaves accounting. ``fields`` are the
        rule's match fields (flowkey.MATCH_FIELDS); ValueError / KeyError / TypeError if they name no flow.
        ``deleted``: removed by a delete, not by a timeout; one mlroute did not send (it still believes the rule
        installed) is a wipe of the switch (an operator's ``del-flows``, a flush): the flow keeps counting and
        its rule is put back (``_deleted_elsewhere``)."""
        key = key_from_fields(fields)
        if deleted and self._deleted_elsewhere(dpid, key, fields.get("in_port")):
            return False  # (the switch is stale: resynced)
        self.recovered.forget(key)  # a pin read back for it is moot (it stayed in the list, checked every poll)
        if not self.accounting.removed(key, dpid):
            return False
        sync.forget_counting_rule(self.installed.get(dpid), key, fields.get("in_port"))
        state = self.monitor.flows.get(key)
        if state is not None and state.sampled:
            self._sflow_pinned.discard(key)  # samples still tell its rate; still pinned, it gets one again
        elif self.monitor.forget(key) and state is not None and state.elephant:
            self.request_decision()  # an elephant ended: the others may use what it leaves, now
        return True

    def _deleted_elsewhere(self, dpid: int, key: FlowKey, in_port: int | None) -> bool:
        """A counting rule deleted while mlroute believes it installed: not the flow's end but a wipe. The
        belief drops it, the switch is diffed in full (the rule comes back, counting from zero) and read back
        now (what else went with it: forwarding, pins, guards); until the rule is back, polls that miss it do not
        end the flow or its elephant (the belief's ``restoring``)."""
        held = self.installed.get(dpid)
        where = self.accounting.get(key)
        if held is None or where is None or where[0] != dpid:
            return False
        rule_key = te_rules.counting_rule_key(key, in_port)
        if rule_key not in held.flows:
            return False  # mlroute deleted it (or never had it)
        del held.flows[rule_key]
        self.belief.restoring(dpid, key, self.clock())
        self.belief.mark_stale(dpid)
        self.audit.urgent(dpid)
        return True

    def _restoring_at(self, dpid: int, samples: list[FlowSample]) -> set[FlowKey]:
        """Flows of ``dpid`` whose counting rule a wipe deleted and mlroute is putting back: not ended by a poll
        that misses them. A key leaves once a poll shows its rule, its flow left accounting, or RESTORE_S passed
        (a rule that never came back: the flow ends as any silent one); a switch with none left leaves too, so
        polls of switches never wiped cost nothing here."""
        if not self.belief.restores(dpid):
            return set()
        seen = {s.key for s in samples}
        return self.belief.still_restoring(dpid, lambda k: k in seen or k not in self.accounting, self.clock(),
                                           RESTORE_S)

    def flow_stats(self, dpid: int, samples: list[FlowSample]) -> None:
        self.monitor.update(dpid, samples, self.clock(), keep=self._restoring_at(dpid, samples))
        flows = self.monitor.flows
        for sample in samples:
            st = flows.get(sample.key)
            where = self.accounting.get(sample.key)
            if st is not None and st.rate_bps > 0 and where is not None:  # bytes from the source's port
                self.ageing.heard_from(sample.key.src_ip, *where)
        for key in self.recovered.hops:  # pinned before a restart: an elephant at its first busy poll
            st = self.monitor.flows.get(key)
            if st is not None and st.rate_bps >= self.monitor.config.threshold_bps:
                st.elephant = True

    def stats_switches(self) -> list[int]:
        """Ingress switches to poll for counting-rule statistics now (those with hosts), connected ones only,
        each no more often than its profile says it refreshes counters (a counter read twice between two
        refreshes would look like a flow that stopped)."""
        if self.detection == "sflow":
            return []  # no counting rules to read: samples tell the rates
        now, period = self.clock(), self.config["te"]["poll_interval_s"]
        due = []
        for dpid in sorted({h.dpid for h in self.topology.hosts.values()} & self.connected):
            if self.auto is not None and self.auto.uses_sflow(dpid):
                continue  # (te.detection: auto) its pinned elephants' entries too: samples tell their rates
            profile = self.profiles.get(dpid)
            every = max(period, profile.stats_interval_s if profile is not None else 0.0)
            if now - self._polled.get(dpid, -float("inf")) >= every - period / 4:  # (the loop's own jitter)
                self._polled[dpid] = now
                due.append(dpid)
        return due

    # -- synchronisation ----------------------------------------------------------------------------------------
    def sync(self) -> list[Step]:
        """The rule changes that bring every connected, read-back switch to its desired state (in order); the
        shell sends them, with a barrier after each step whose phase needs one."""
        self.syncing = True  # ``pause`` lets other handlers run meanwhile
        collecting = gc.isenabled()
        gc.disable()  # a full collection over millions of rule objects would be one long event-loop step
        steps: list[sync.Step] = []
        try:
            steps = self._sync()
            return steps
        finally:
            self.syncing = False
            if sum(len(s.changes) for s in steps) > FREEZE_AFTER_CHANGES:
                # the rules just built are long-lived, acyclic values: later collections skip them (a collection
                # first would scan all of them, the very pause this avoids; cycles made meanwhile stay frozen)
                gc.freeze()
            if collecting:
                gc.enable()

    def _sync(self) -> list[Step]:
        self.syncs_started += 1
        self._judge_audits()
        graph = self._inputs_settled()
        flows = self.accounting.take_changed()
        stale = self.belief.take_stale()
        changed = self.plan.update(self.topology, graph, self.tiers, self.accounting, self.te.pinned, flows,
                                   copy=self.flow_copy)
        desired = self.plan.desired  # equals sync.desired_state(...) of these inputs (the property test)
        ready = [d for d in sorted(self.connected) if d in self.installed and d in desired
                 and (d in changed or d in stale)]
        # a switch without SELECT groups: its ECMP spread over plain entries, diffed whole (its tables are small)
        plain = self.group_free(ready)
        if plain:
            desired = group_free.plain_view(desired, plain)
        # a switch whose installed state is its last desired one: diff only what the plan changed there
        only = {d: keys for d, keys in self.plan.changed.items()
                if keys is not None and d not in stale and d not in plain}
        steps = self._sendable(sync.plan_sync(self.installed, desired, ready, pause=self.pause, only=only), ready)
        if self.recovering():
            # (a switch read back forwarding keeps it while the links found so far make no Clos: sync.additions_only)
            keep = self.recovered.forwarding if self.tiers is None or not self.tiers.is_clos else ()
            # keeps what the switches hold, for now, except rules into ports that are down
            steps = sync.additions_only(steps, self.installed, keep, self.topology.ports)
            self.belief.mark_stale(*ready, *changed)  # the rest follows once recovery is over
        else:
            self._believe(steps, ready, only, desired)
        sent = sum(len(s.changes) for s in steps)
        if sent:
            self.metrics.rule_changes.inc(sent)
        return steps

    def _sendable(self, steps: list[Step], ready: list[int]) -> list[Step]:
        """The planned steps less what switches refused lately and what their tables have no room for; what is
        left is believed from now on, so an audit out does not judge it."""
        if self.belief.refusals:
            steps = self._without_refused(steps)
        steps = self._within_budget(steps, ready)
        if self.audit.any_out:
            for step in steps:
                for dpid, change in step.changes:
                    self.audit.touched(dpid, _rule_id(change.rule))
        return steps

    def _inputs_settled(self) -> nx.Graph:
        """Before a sync plans: hosts recovered from the tables learned, tiers current, a decision requested
        where a job event or a failure under an elephant asks for one now; returns the live graph's snapshot."""
        for ip, mac, dpid, port in self.recovered.resolve_hosts(self.topology, self._lldp_settled()):
            self.topology.learn_host(ip, mac, dpid, port)
            LOG.info("host %s at switch %s port %s recovered from the switch's rules", ip, dpid, port)
        if self.warm:
            self._warm_recovery_over()
        graph = self.live_graph()  # one snapshot of the live switch graph for this whole resync
        fresh = graph is not self._settled_graph  # (a decision or a packet-in may have read it first)
        self._settled_graph = graph
        self.settle_tiers(graph)
        if fresh and sync.pinned_paths_broken(self.te.pinned, graph):
            self.incremental_next = True  # the broken pins may be placed beside the others first (te.REPAIRED)
            self.request_decision()  # a failure under an elephant: decided now, not at the next period
        if self.runner is None and self.decisions.queued is not None:
            # the decision loop takes a request; without a worker it is decided here too, and this sync installs it
            self.decision_tick()
        if self.sflow is not None:
            self._sflow_pins()
        return graph

    def _warm_recovery_over(self) -> None:
        """A warm takeover (core.state.begin_recovery): once every switch of the published view is read back,
        this node knows what the old leader knew (links from the view; hosts, counting rules and pins from the
        tables, which the old leader wrote at most a session ago), so recovery ends now, where a restart's waits
        for LLDP and a busy poll. Every pin of the tables is an elephant at once and keeps its path while that
        is live; one whose path broke (a link lost during the takeover) is decided again at once."""
        if any(d not in self.installed or self.readback.pending(d) for d in self.warm):
            return
        self.warm = set()
        if not self.recovering():
            return  # nothing was found, or a restart's deadline came first
        now = self.clock()
        self.recovery_ends = now
        keys = [k for k in self.recovered.hops if k in self.accounting]
        for key in keys:
            self.monitor.seed_elephant(key, self.accounting[key][0], now)
        before = len(self.te.pinned)
        self._restore_pins(keys)
        kept = len(self.te.pinned) - before
        self.request_decision()
        LOG.info("cluster takeover: every switch read back %.2f s after it began: recovery over, %d pinned elephants "
                 "kept, %d to route again", now - self.warm_since, kept, len(keys) - kept)

    def _believe(self, steps: list[Step], ready: list[int], only: Mapping[int, Any],
                 desired: Mapping[int, SwitchRules]) -> None:
        """What the switches hold once ``steps`` are sent: the steps applied where only the plan's changes were
        diffed, a snapshot of the desired state elsewhere, less what switches refused or have no room for."""
        for step in steps if only else ():
            for dpid, change in step.changes:
                if dpid in only:
                    apply_change(self.installed[dpid], change)
        for dpid in ready:  # the others: a snapshot (the plan changes its own dicts in place)
            if dpid not in only:
                self.installed[dpid] = SwitchRules(dict(desired[dpid].flows), dict(desired[dpid].groups))
                self.pause()
        for dpid, change in self.belief.withheld():  # ... less what the switches refused or have no room for
            if dpid in ready and dpid not in only:
                apply_change(self.installed[dpid], _undone(change))
        planned: dict[int, list[Change]] = {}
        for step in steps:  # unconfirmed until sent and confirmed (a scrape mid-sync counts them pending)
            for dpid, change in step.changes:
                planned.setdefault(dpid, []).append(change)
        for dpid, changes in planned.items():
            self.belief.planned(dpid, changes)
            self.pause()
