"""The controller's decision core: every event in, every decision out, as plain values (no Ryu).

``ControllerCore`` holds what the controller knows (topology, tiers, accounting, flow monitor, traffic engineer,
each switch's installed rules) and answers the Ryu shell (app.py) with values: packet-in decisions, TE results
and ``sync.Step`` lists of rule changes. The shell only translates OpenFlow events into these calls and the
answers into messages, the way Faucet's valve answers faucet.py; the smoke test drives both with synthetic
events.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import networkx as nx

from controller.decide import te
from controller.decide.decision_requests import DecisionRequests
from controller.decide.host_ageing import HostAgeing
from controller.decide.optimiser_runner import DONE, LATE, OptimiserRunner, Outcome
from controller.decide.packet_in import Decision, Limited, PacketIn, PacketInHandler
from controller.desired import flowcopy, switch_profiles, sync, table_budget, te_rules
from controller.desired.audit import TableAudit
from controller.desired.flowcopy import NewFlowCopy
from controller.desired.plan_state import PlanState
from controller.desired.recovery import Recovered
from controller.desired.rules import (
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    TABLE_SEEN,
    Change,
    FlowRule,
    GroupRule,
    SwitchRules,
    apply_change,
)
from controller.desired.sync import Step
from controller.southbound.log_throttle import LogThrottle
from controller.southbound.openflow_errors import names as error_names
from controller.southbound.sflow_decoder import Datagram
from controller.southbound.sflow_detection import SflowDetection
from controller.state import jobs as mljobs
from controller.state.accounting import Accounting
from controller.state.budget import TokenBucket
from controller.state.capabilities import SwitchCapabilities, table_short
from controller.state.flowkey import FlowKey, key_from_fields
from controller.state.monitor import FlowMonitor, FlowSample, MonitorConfig
from controller.state.tiers import TierInference, infer_tiers
from controller.state.topology import Topology
from controller.web.metrics import Metrics
from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow

LOG = logging.getLogger("mlroute")

READBACK_TIMEOUT_S = 5.0  # a reconnecting switch that does not report its tables in time is rebuilt from scratch
FREEZE_AFTER_CHANGES = 10_000  # a sync this big (a first install, a mass reroute) moves its rules out of GC's scans
REFUSED_HOLD_S = 30.0  # a rule change a switch refused is not sent again for this long (a full table stays full)
RECOVERY_MIN_S = 10.0  # after start, only add rules for this long (at least 3 polls): LLDP and read-back settle
AUDIT_RECOUNT_S = 10.0  # a switch's believed rules per table are recounted at least this often (table stats)
TABLES_USED = (TABLE_CLASSIFY, TABLE_FORWARD, TABLE_SEEN)  # the tables mlroute writes (rules.py)
LLDP_SETTLE_S = 5.0  # a switch up this long has had LLDP classify its ports (k=4: one full send batch, 4 s)


def time_budget_s(config: Mapping[str, Any]) -> float:
    """How long an optimiser may search: ``te.time_budget_s``, else the poll interval."""
    return config["te"].get("time_budget_s") or config["te"]["poll_interval_s"]


class ControllerCore:
    """What the controller knows and decides; ``config`` is the validated configuration (controller.config)."""

    def __init__(self, config: Mapping[str, Any], clock: Callable[[], float], metrics: Metrics | None = None,
                 pause: Callable[[], None] | None = None, runner: OptimiserRunner | None = None) -> None:
        """``pause`` is called now and then during long work (the shell passes a green-thread yield);
        ``runner`` runs TE decisions in a worker process (the shell passes one: the optimiser never blocks the
        event loop); without one they run in the caller."""
        tecfg = config["te"]
        self.config = config
        self.clock = clock
        self.host_bps = tecfg["host_link_mbps"] * 1e6
        self.fabric_bps = (tecfg["fabric_link_mbps"] or tecfg["host_link_mbps"]) * 1e6
        hosts = config["hosts"]
        self.topology = Topology(hosts["max_per_port"], hosts["max_total"])
        self.packet_in = PacketInHandler(self.topology, clock, new_hosts_per_s=hosts["new_per_port_per_s"],
                                         new_hosts_burst=hosts["new_per_port_burst"])
        self._limited_log = LogThrottle(lambda: self.clock())  # a port's refused new addresses: once a minute
        self.ageing = HostAgeing(self.topology, lambda: self.clock(), hosts["age_after_s"], hosts["probes"],
                                 hosts["probe_interval_s"])
        self.metrics = metrics or Metrics()
        self.tiers: TierInference | None = None
        self.accounting = Accounting()
        self.monitor = FlowMonitor(MonitorConfig(tecfg["elephant_threshold"] * self.host_bps,
                                                 tecfg["elephant_polls"], tecfg["pattern_memory_s"]))
        self.te = te.TrafficEngineer(tecfg["mode"], tecfg["objective"], tecfg["hysteresis"],
                                     time_limit=time_budget_s(config))
        self.runner = runner if tecfg["mode"] != "ecmp" else None
        self.jobs: list[dict] = list(config["jobs"])
        self.decide_now = False  # a job event (jobs declared, a declared host learned, an elephant ended)
        rest = config["rest"]
        self.decisions = DecisionRequests(clock, max_wait_s=rest["max_decision_wait_s"])  # one at a time, coalesced
        self._started: tuple[int, int, dict] = (0, 0, {})  # the decision in flight's elephants before, now; pins
        self._decided_on: Fabric | None = None  # the fabric the decision in flight was given
        self.connected: set[int] = set()  # switches with a live OpenFlow connection
        self._connected_at: dict[int, float] = {}  # dpid -> when its connection came up
        self.installed: dict[int, SwitchRules] = {}  # dpid -> rules as last sent (or read back), less refused ones
        # (dpid, rule id) -> (when, why, the change): refused by the switch, held back for REFUSED_HOLD_S
        self.refused: dict[tuple[int, Any], tuple[float, str, Change]] = {}
        self._refusal_log = LogThrottle(lambda: self.clock())  # one line per switch and error per minute
        self.readback = sync.ReadBack(READBACK_TIMEOUT_S)
        audit = config["audit"]
        self.audit = TableAudit(audit["period_s"], audit["entries_per_s"], clock)  # installed state verified
        self._audited: dict[int, SwitchRules] = {}  # dpid -> what its audit read back, judged at the next sync
        self._static_counts: dict[int, tuple[int, float, dict[int, int]]] = {}  # dpid -> (flows, when, counts)
        self._short_log = LogThrottle(lambda: self.clock())
        self.capabilities: dict[int, SwitchCapabilities] = {}  # what each switch said it is and holds
        # dpid -> table -> (entries it held when it answered TABLE_FULL, when): its capacity for REFUSED_HOLD_S
        self.full_at: dict[int, dict[int, tuple[int, float]]] = {}
        # dpid -> rule id -> the change the table budget held back (not believed installed; tried every poll)
        self.over_budget: dict[int, dict[Any, Change]] = {}
        self._small = False  # some switch has a table with a known small capacity (the budget applies)
        self.profile_entries = [switch_profiles.entry_from(v) for v in config["switches"]]
        self.profiles: dict[int, switch_profiles.Profile] = {}  # dpid -> the profile in force (once described)
        self.pacing: dict[int, TokenBucket] = {}  # dpid -> its flow-mod budget (profiles with max_flow_mods_per_s)
        self._polled: dict[int, float] = {}  # dpid -> when its counters were last asked for
        rate = tecfg["new_flows_per_s"]
        self.new_flow_budget = TokenBucket(rate, max(1.0, rate / 10), clock)  # a tenth of a second's worth at once
        self.recovered = Recovered()  # what the switches' tables say (restart: hosts, counting rules, pins)
        self.recovery_ends = clock() + max(RECOVERY_MIN_S, 3 * tecfg["poll_interval_s"])
        self.found_state = False  # some switch already held mlroute rules when read back
        self.dirty = False
        # the desired state, kept per event (plan_state.py): the live graph is rebuilt only after a topology
        # event, the plan is told which accounting keys changed, and only the switches whose desired rules
        # changed (or whose installed state changed outside sync: _stale) are diffed, so an event costs what
        # it changes
        self.flow_copy = NewFlowCopy.from_config(tecfg)  # per switch once it says what it is (flowcopy.py)
        self.plan = PlanState(stagger=tecfg["ecmp_stagger"], idle_timeout=tecfg["flow_idle_timeout_s"],
                              pause=pause, copy=self.flow_copy)
        self.pause = pause or (lambda: None)
        self._graph: nx.Graph | None = None
        self._host_switches: frozenset[int] = frozenset()
        self._stale: set[int] = set()
        self.syncing = False
        self._fabric_cache: tuple | None = None  # (live graph, tiers, host places, Fabric)
        # te.detection: sflow | both: elephants from packet samples (sflow_detection.py); in sflow mode only the
        # pinned elephants get an exact entry at their ingress (their accounting, in _sflow_pins)
        self.detection = tecfg["detection"]
        self.sflow = None if self.detection == "flowstats" else SflowDetection(
            config["sflow"], self.monitor.config.threshold_bps, tecfg["elephant_polls"], self.topology,
            self.metrics)
        self._sflow_pinned: set[FlowKey] = set()  # accounting entries made for sampled elephants being pinned

    def live_graph(self) -> nx.Graph:
        """The live switch graph, rebuilt only after a switch, port or link event."""
        if self._graph is None:
            self._graph = self.topology.graph()
        return self._graph

    # -- switches, ports, links ---------------------------------------------------------------------------------
    def switch_connected(self, dpid: int, live_ports: Iterable[int]) -> None:
        """A switch (re)connected: its tables are read back before anything is sent to it."""
        self.topology.add_switch(dpid, live_ports)
        self._graph = None
        self.connected.add(dpid)
        self._connected_at[dpid] = self.clock()
        self._forget_refused(dpid)  # its tables are read back
        self.installed.pop(dpid, None)
        self._forget_audit(dpid)
        self.capabilities[dpid] = SwitchCapabilities(dpid)
        self.readback.start(dpid, self.clock())
        LOG.info("switch %s connected (%d live ports)", dpid, len(self.topology.ports[dpid]))
        self.dirty = True

    def switch_left(self, dpid: int) -> None:
        """The switch's OpenFlow connection is gone. It is not a topology change: the switch keeps forwarding
        with the rules it holds (fail mode secure), so its ports, links and hosts stay and nobody else's routes
        move; only link and port events of connected switches remove links (``link_deleted``)."""
        self.connection_lost(dpid)
        LOG.info("switch %s disconnected: keeping its links and hosts while it forwards on its own", dpid)
        self.dirty = True

    def connection_lost(self, dpid: int) -> None:
        self.connected.discard(dpid)
        self.installed.pop(dpid, None)
        self.readback.cancel(dpid)
        self._forget_refused(dpid)  # the read-back will tell
        self._forget_audit(dpid)
        self.metrics.forget_switch(dpid)

    def _forget_audit(self, dpid: int) -> None:
        self.full_at.pop(dpid, None)
        self.over_budget.pop(dpid, None)
        self._polled.pop(dpid, None)
        self.audit.forget(dpid)
        self._audited.pop(dpid, None)
        self._static_counts.pop(dpid, None)

    def _forget_refused(self, dpid: int) -> None:
        self.refused = {k: v for k, v in self.refused.items() if k[0] != dpid}

    def openflow_error(self, dpid: int, type_: int, code: int, change: Change | None) -> list[Change]:
        """A switch answered a message with an error; ``change`` is the rule change it refers to, if it was one.
        A group added that the switch already has, or modified that it lacks, is sent again the other way (the
        changes returned, to send now). Any other refused change is undone in what the controller believes the
        switch holds (an add or a modify leaves the rule out of it, a delete leaves it in), held back from the
        next resyncs for REFUSED_HOLD_S, counted and logged by name."""
        kind, why = error_names(type_, code)
        self.metrics.openflow_errors.labels(kind, why).inc()
        caps = self.capabilities.get(dpid)
        if caps is not None:
            caps.errors[f"{kind}/{why}"] = caps.errors.get(f"{kind}/{why}", 0) + 1
        held = self.installed.get(dpid)
        if change is None or held is None:
            if self._refusal_log.due((dpid, kind, why)):
                LOG.warning("switch %s: OpenFlow error %s/%s for a message that is no rule change", dpid, kind, why)
            return []
        rule = change.rule
        if isinstance(rule, GroupRule) and (change.op, why) in (("add", "GROUP_EXISTS"), ("modify", "UNKNOWN_GROUP")):
            return [Change("modify" if change.op == "add" else "add", rule)]  # the belief stands once it is sent
        apply_change(held, _undone(change))
        if why == "TABLE_FULL" and isinstance(rule, FlowRule):  # what it holds is what that table takes
            count = table_budget.table_counts(held).get(rule.table, 0)
            self.full_at.setdefault(dpid, {})[rule.table] = (count + table_budget.headroom(count), self.clock())
        self.refused[(dpid, _rule_id(rule))] = (self.clock(), f"{kind}/{why}", change)
        self.metrics.rules_installed.set(sum(len(r.flows) for r in self.installed.values()))
        self.metrics.rules_refused.set(len(self.refused))
        if self._refusal_log.due((dpid, kind, why)):
            LOG.warning("switch %s refused %s %s (%s/%s): not believed installed, sent again in %.0f s at the "
                        "earliest; further refusals of this kind at this switch are counted in "
                        "mlroute_openflow_errors_total", dpid, change.op, rule, kind, why, REFUSED_HOLD_S)
        return []

    def switch_described(self, dpid: int, mfr_desc: str, hw_desc: str, sw_desc: str | None = None) -> str | None:
        """A switch's OpenFlow description arrived: with ``te.flow_copy: auto`` an Open vSwitch marks new flows
        seen itself, any other switch copies them with plain OpenFlow 1.3. Returns an error to log when the
        configured policy cannot work on that switch."""
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        caps.manufacturer, caps.hardware, caps.software = mfr_desc, hw_desc, sw_desc
        profile = self.profiles[dpid] = switch_profiles.resolve(self.profile_entries, dpid, mfr_desc, hw_desc,
                                                                  sw_desc or "")
        rate = profile.max_flow_mods_per_s
        if rate:
            self.pacing[dpid] = TokenBucket(rate, max(1.0, rate / 10), self.clock)
        else:
            self.pacing.pop(dpid, None)
        copy = self.flow_copy.described(dpid, mfr_desc, hw_desc, None if profile.flow_copy is None
                                        else profile.flow_copy == "learn")
        if copy is not self.flow_copy:
            self.flow_copy = copy
            self.dirty = True
        if self.flow_copy.mode == "auto":
            LOG.info("switch %s (%s / %s): profile %s, new flows copied %s", dpid, mfr_desc, hw_desc, profile.name,
                     "once (Open vSwitch learn)" if copy.learns(dpid) else "with plain OpenFlow 1.3")
        idle = self.config["te"]["flow_idle_timeout_s"]
        if profile.min_idle_timeout_s > idle:
            return (f"switch {dpid}: its profile {profile.name} has idle timeouts of at least "
                    f"{profile.min_idle_timeout_s} s but te.flow_idle_timeout_s is {idle}: its counting rules may "
                    f"be refused; raise te.flow_idle_timeout_s or give it a profile in switches:")
        return flowcopy.unsupported(self.flow_copy, dpid, mfr_desc, hw_desc)

    def pace(self, dpid: int) -> float:
        """Seconds to wait before the next flow or group mod to ``dpid`` (0: send now, its budget taken)."""
        bucket = self.pacing.get(dpid)
        return 0.0 if bucket is None else bucket.take_or_wait()

    def barriers(self, dpid: int) -> bool:
        profile = self.profiles.get(dpid)
        return profile is None or profile.barriers

    def flows_read_back(self, dpid: int, flows: list[FlowRule]) -> None:
        self._read_back(dpid, self.readback.flows_read(dpid, flows))

    def groups_read_back(self, dpid: int, groups: list[GroupRule]) -> None:
        self._read_back(dpid, self.readback.groups_read(dpid, groups))

    def _read_back(self, dpid: int, rules: SwitchRules | None) -> None:
        if rules is not None and dpid in self.connected:
            self.installed[dpid] = rules
            self._stale.add(dpid)
            self.found_state = self.found_state or bool(rules.flows)
            for key, in_port in self.recovered.read(dpid, rules.flows.values()).items():
                if key not in self.accounting:
                    self.accounting.observe(key, dpid, in_port)
            self.recovered.read_groups(dpid, rules.groups.values())
            self.audit.checked(dpid)
            LOG.info("switch %s: %d mlroute rules and %d groups read back", dpid, len(rules.flows),
                     len(rules.groups))
            self.dirty = True

    def readback_overdue(self) -> list[int]:
        """Switches that did not report their tables in time: the shell wipes mlroute's rules there."""
        late = [d for d in self.readback.overdue(self.clock()) if d in self.connected]
        for dpid in late:
            LOG.warning("switch %s did not report its tables in %.0f s: rebuilding its rules", dpid,
                        READBACK_TIMEOUT_S)
            self.installed[dpid] = SwitchRules()
            self._stale.add(dpid)
            self.dirty = True
        return late

    # -- capabilities and the audit (installed state verified, not believed) -----------------------------------
    def table_features(self, dpid: int, max_entries: Mapping[int, int]) -> None:
        """The switch's table features: how many entries each table holds (where it answers)."""
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        caps.max_entries = {t: n for t, n in max_entries.items() if n > 0}
        self.metrics.table_capacity_of(dpid, caps.max_entries, TABLES_USED)

    def group_features(self, dpid: int, types: frozenset[str], max_groups: Mapping[str, int]) -> None:
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        caps.group_types, caps.max_groups = types, dict(max_groups)
        LOG.info("switch %s: group types %s", dpid, ", ".join(sorted(types)) or "none")

    def table_stats(self, dpid: int, active: Mapping[int, int]) -> None:
        """The switch's table stats (polled): its fill, and whether a table holds fewer entries than the
        controller's permanent rules there (a table wiped while connected: audit it now)."""
        caps = self.capabilities.get(dpid)
        if caps is None or dpid not in self.connected:
            return
        caps.active, caps.active_at = {t: n for t, n in active.items() if t in TABLES_USED}, self.clock()
        self.metrics.table_entries_of(dpid, caps.active)
        if dpid not in self.installed or self.readback.pending(dpid) or self.audit.out(dpid):
            return
        short = table_short(caps.active, self._permanent_counts(dpid))
        if short:
            self.audit.urgent(dpid)
            self.dirty = True
            if self._short_log.due(dpid):
                LOG.warning("switch %s: %s %s fewer entries than mlroute installed there: reading it back now",
                            dpid, "table" if len(short) == 1 else "tables", ", ".join(map(str, short)) +
                            (" holds" if len(short) == 1 else " hold"))

    def _permanent_counts(self, dpid: int) -> dict[int, int]:
        """Per table, the believed rules without an idle timeout (a counting rule may have just timed out).
        Recounted when the switch's rule count changed or every AUDIT_RECOUNT_S: a k=24 switch holds thousands."""
        flows = self.installed[dpid].flows
        now = self.clock()
        cached = self._static_counts.get(dpid)
        if cached is None or cached[0] != len(flows) or now - cached[1] > AUDIT_RECOUNT_S:
            counts: dict[int, int] = {}
            for rule in flows.values():
                if not rule.idle_timeout:
                    counts[rule.table] = counts.get(rule.table, 0) + 1
            cached = self._static_counts[dpid] = (len(flows), now, counts)
        return cached[2]

    def table_limits(self) -> dict[int, dict[int, int]]:
        """dpid -> table -> entries mlroute may hold there, for the tables with a known small capacity: what
        the switch's table features say, lowered to what it held when it answered TABLE_FULL."""
        limits = {}
        for dpid in self.connected:
            small = self._limits_of(dpid)
            if small:
                limits[dpid] = small
        return limits

    def _limits_of(self, dpid: int) -> dict[int, int]:
        caps = self.capabilities.get(dpid)
        capacity = dict(caps.max_entries) if caps is not None else {}
        profile = self.profiles.get(dpid)
        for table, n in profile.table_capacity.items() if profile is not None else ():
            capacity[table] = min(n, capacity.get(table, n))
        for table, (held, _) in self.full_at.get(dpid, {}).items():
            capacity[table] = min(held, capacity.get(table, held))
        return {t: table_budget.limit(n) for t, n in capacity.items()
                if t in TABLES_USED and n < table_budget.UNBOUNDED}

    def audits_due(self) -> list[int]:
        """Switches the shell reads back now (flow stats by cookie and group descriptions; answers go to
        ``audit_flows`` / ``audit_groups``). None while recovering or for a switch still being read back."""
        if self.recovering():
            return []
        sizes = {d: len(r.flows) + len(r.groups) for d, r in self.installed.items()
                 if d in self.connected and not self.readback.pending(d) and d not in self._audited}
        started = self.audit.due(sizes)
        self.metrics.audits.inc(len(started))
        return started

    def audit_flows(self, dpid: int, flows: list[FlowRule]) -> None:
        self._audit_read(dpid, self.audit.flows_read(dpid, flows))

    def audit_groups(self, dpid: int, groups: list[GroupRule]) -> None:
        self._audit_read(dpid, self.audit.groups_read(dpid, groups))

    def _audit_read(self, dpid: int, held: SwitchRules | None) -> None:
        if held is not None and dpid in self.installed:
            self._audited[dpid] = held  # judged at the start of the next sync, when every believed change is sent
            self.dirty = True

    def change_sent(self, dpid: int, change: Change) -> None:
        """The shell sent a rule change: an audit out for that switch does not judge that rule."""
        if self.audit.any_out:
            self.audit.touched(dpid, _rule_id(change.rule))

    def _judge_audits(self) -> None:
        """Audits answered since the last sync: where the switch holds other than believed, the belief takes
        what it holds and the switch is diffed in full (missing rules re-added, extra ones deleted)."""
        audited, self._audited = self._audited, {}
        for dpid, held in audited.items():
            belief = self.installed.get(dpid)
            if belief is None or dpid not in self.connected:
                self.audit.forget(dpid)
                continue
            refused = {rid for (d, rid) in self.refused if d == dpid}
            findings = self.audit.finish(dpid, belief, held)
            findings.missing = [r for r in findings.missing if _rule_id(r) not in refused]
            if not findings:
                continue
            findings.apply(belief)
            self._stale.add(dpid)
            self._static_counts.pop(dpid, None)
            for kind, n in findings.counts().items():
                if n:
                    self.metrics.audit_findings.labels(kind).inc(n)
            LOG.warning("switch %s: audit found its tables differ from what mlroute installed (%s): repairing",
                        dpid, ", ".join(f"{n} {kind}" for kind, n in findings.counts().items() if n))

    def switches_json(self) -> list[dict]:
        """Per switch: what it said it is, its tables' fill and capacity, group support, errors, audit state."""
        out = []
        for dpid in sorted(set(self.capabilities) | self.connected):
            caps = self.capabilities.get(dpid) or SwitchCapabilities(dpid)
            held = self.installed.get(dpid)
            view = caps.to_json(table_budget.table_counts(held) if held is not None else {}, TABLES_USED)
            view.update(connected=dpid in self.connected, groups_installed=len(held.groups) if held else 0,
                        refused=sum(1 for (d, _) in self.refused if d == dpid),
                        over_budget=len(self.over_budget.get(dpid, {})),
                        profile=self.profiles[dpid].to_json() if dpid in self.profiles else None,
                        limits={str(t): n for t, n in self._limits_of(dpid).items()} if dpid in self.connected
                        else {},
                        audit={"period_s": self.audit.period_s, "out": self.audit.out(dpid)})
            out.append(view)
        return out

    def link_added(self, src: int, src_port: int, dst: int, dst_port: int) -> None:
        if self.topology.add_link(src, src_port, dst, dst_port):
            self._graph = None
            self.dirty = True

    def link_deleted(self, src: int, src_port: int, dst: int, dst_port: int) -> None:
        if src not in self.connected or dst not in self.connected:
            return  # discovery cannot see through a disconnected switch; its port events will tell on reconnect
        if self.topology.remove_link(src, src_port, dst, dst_port):
            LOG.info("link %s:%s -> %s:%s down", src, src_port, dst, dst_port)
            self._graph = None
            self.dirty = True

    def port_changed(self, dpid: int, port: int, live: bool) -> None:
        if live:
            self.topology.port_up(dpid, port)
        else:
            self.topology.port_down(dpid, port)
        self._graph = None
        self.dirty = True

    # -- packets and flows --------------------------------------------------------------------------------------
    def packet(self, pkt: PacketIn) -> Decision:
        """An ARP/IPv4 packet-in: learn its sender, answer ARP (the shell sends the decision's actions)."""
        decision = self.packet_in.handle(pkt)
        if pkt.src_ip:
            self.ageing.heard_from(pkt.src_ip, pkt.dpid, pkt.in_port, pkt.eth_src)
        if decision.learned:
            host = self.topology.hosts[pkt.src_ip]
            LOG.info("host %s (%s) at switch %s port %s", host.ip, host.mac, host.dpid, host.port)
            if pkt.src_ip in self.jobs_by_host():
                self.decide_now = True  # a declared job's host: its sends can be routed now
        self._hosts_decided(decision)
        return decision

    def housekeeping(self) -> Decision:
        """Periodic: settle pending host moves by the clock (probes to resend, moves confirmed), probe silent
        hosts and forget those that did not answer (host_ageing.py); the shell sends the decision's actions."""
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
                self.dirty = True
        self._hosts_decided(decision)
        return decision

    def _release_refused(self) -> None:
        """Refused changes whose hold is over are tried again, and so are those the table budget held back:
        their switches are diffed in full."""
        for dpid in self.over_budget:
            self._stale.add(dpid)
            self.dirty = True
        now = self.clock()
        for tables in self.full_at.values():  # a table that said TABLE_FULL: its room is tried again
            for table in [t for t, (_, when) in tables.items() if now - when >= REFUSED_HOLD_S]:
                del tables[table]
        for key in [k for k, (t, _, _) in self.refused.items() if now - t >= REFUSED_HOLD_S]:
            del self.refused[key]
            self._stale.add(key[0])
            self.dirty = True
        self.metrics.rules_refused.set(len(self.refused))

    def _without_refused(self, steps: list[Step]) -> list[Step]:
        """``steps`` less the changes switches refused lately (held back: a full table stays full)."""
        out = []
        for step in steps:
            kept = [(d, c) for d, c in step.changes if (d, _rule_id(c.rule)) not in self.refused]
            if kept:
                out.append(Step(step.phase, kept))
        return out

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
        if decision.changed:
            self.dirty = True

    def _host_limited(self, limited: Limited) -> None:
        """A new address refused by the learning limits: counted, logged once per port per minute."""
        c = limited.claim
        self.metrics.hosts_refused.labels(limited.why).inc()
        if self._limited_log.due(c.location):
            LOG.warning("host limit (%s) at switch %s port %s: %s (%s) not learned; further ones at this port "
                        "are counted in mlroute_hosts_refused_total, logged again in %.0f s", limited.why, c.dpid,
                        c.port, c.ip, c.mac, self._limited_log.period_s)

    def new_transport_flow(self, key: FlowKey, dpid: int, in_port: int) -> list[Change]:
        """First packet of a TCP/UDP flow at its ingress: its counting rule, to send at once (not with the next
        resync), so the flow-miss copies stop before the flow's second round trip: one packet-in per flow."""
        self.ageing.heard_from(key.src_ip, dpid, in_port)
        if key in self.accounting:
            if not self.accounting.observe(key, dpid, in_port):
                return []  # a copy that was already in flight
        elif not self.new_flow_budget.take():
            self.metrics.packet_in.labels("newflow_over_budget").inc()
            return []  # past the packet-in budget: the flow stays on ECMP, uncounted
        else:
            self.accounting.observe(key, dpid, in_port)
        held = self.installed.get(dpid)
        if held is None or self.recovering() or self.syncing:  # (a sync paused mid-way would overwrite it)
            self.dirty = True  # the switch's tables are not known yet: the resync will add it
            return []
        graph = self.live_graph() if self.te.pinned else nx.Graph()
        rule = te_rules.counting_rule(graph, key, dpid, in_port, self.te.pinned,
                                      self.config["te"]["flow_idle_timeout_s"])
        if (dpid, _rule_id(rule)) in self.refused:
            return []  # the switch refused it lately: the flow stays uncounted until the hold is over
        if dpid in self.pacing and self.pace(dpid) > 0:
            self.dirty = True  # its flow-mod budget is spent: the paced resync sends it, after what matters more
            return []
        room = self._limits_of(dpid).get(rule.table) if self.full_at or self._small else None
        if room is not None and rule.key not in held.flows and not table_budget.has_room(held, rule.table, room):
            self.metrics.flows_uncounted.labels("table_full").inc()
            return []  # no room in its table: the flow stays on ECMP, uncounted
        change = Change("modify" if rule.key in held.flows else "add", rule)
        held.add_flow(rule)
        self.metrics.rule_changes.inc()
        return [change]

    def counting_rule_removed(self, dpid: int, fields: Mapping[str, Any]) -> None:
        """The switch removed a counting rule (idle timeout): the flow leaves accounting. ``fields`` are the
        rule's match fields (flowkey.MATCH_FIELDS); ValueError / KeyError / TypeError if they name no flow."""
        key = key_from_fields(fields)
        self.recovered.forget(key)  # a pin read back for it is moot (it stayed in the list, checked every poll)
        if self.accounting.removed(key, dpid):
            sync.forget_counting_rule(self.installed.get(dpid), key, fields.get("in_port"))
            state = self.monitor.flows.get(key)
            if state is not None and state.sampled:
                self._sflow_pinned.discard(key)  # samples still tell its rate; still pinned, it gets one again
            elif self.monitor.forget(key) and state is not None and state.elephant:
                self.decide_now = True  # an elephant ended: the others may use what it leaves, now
            self.dirty = True

    def flow_stats(self, dpid: int, samples: list[FlowSample]) -> None:
        self.monitor.update(dpid, samples, self.clock())
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
            profile = self.profiles.get(dpid)
            every = max(period, profile.stats_interval_s if profile is not None else 0.0)
            if now - self._polled.get(dpid, -float("inf")) >= every - period / 4:  # (the loop's own jitter)
                self._polled[dpid] = now
                due.append(dpid)
        return due

    # -- sFlow detection (te.detection: sflow | both; sflow_detection.py) -----------------------------------------
    def sflow_datagram(self, now: float, datagram: Datagram) -> None:
        """A decoded sFlow datagram (the collector's thread: only the estimator's tables are touched)."""
        if self.sflow is not None:
            self.sflow.feed(now, datagram)

    def sflow_tick(self, collector_stats: Mapping[str, int] | None = None) -> bool:
        """The shell's sFlow loop, a few times a window: a completed window goes to the flow monitor (a window
        is a poll); returns True when a new elephant appeared (a decision is requested at once)."""
        if self.sflow is None:
            return False
        now = self.clock()
        self.sflow.publish(collector_stats)
        rates = self.sflow.tick(now)
        if rates is None:
            return False
        before = {st.key for st in self.monitor.elephants()}
        self.monitor.sampled({key: (dpid, bps, above) for key, (dpid, _, bps, above) in rates.items()}, now)
        for key, (dpid, port, bps, _) in rates.items():
            if bps > 0:  # sampled bytes from the source's port: a sign of life
                self.ageing.heard_from(key.src_ip, dpid, port)
        for key in self.recovered.hops:  # pinned before a restart: an elephant at its first busy window
            st = self.monitor.flows.get(key)
            if st is not None and st.rate_bps >= self.monitor.config.threshold_bps:
                st.elephant = True
        new = any(st.key not in before for st in self.monitor.elephants())
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

    # -- traffic engineering ------------------------------------------------------------------------------------
    def set_jobs(self, jobs: list[dict]) -> None:
        """Declared jobs replaced (REST): the flows of jobs no longer declared leave at once, and a decision
        follows at once (new jobs' sends are routed before their first packet)."""
        still = {ip for job in jobs for ip in job["hosts"]}
        self.monitor.job_ended({ip for job in self.jobs for ip in job["hosts"]} - still)
        self.jobs = list(jobs)
        self.decide_now = self.dirty = True

    def jobs_by_host(self) -> dict[str, str]:
        return {ip: job["name"] for job in self.jobs for ip in job["hosts"]}

    def fabric(self) -> Fabric | None:
        """The routing core's Fabric of the live topology, rebuilt only when the live graph, the tiers or the
        hosts' places changed (a k=24 fat-tree's takes most of a second to build: not every period)."""
        places = frozenset((h.ip, h.dpid) for h in self.topology.hosts.values())
        graph = self.live_graph()
        cached = self._fabric_cache
        if cached is None or cached[0] is not graph or cached[1] is not self.tiers or cached[2] != places:
            fabric = te.fabric_from_topology(self.topology, self.tiers, self.host_bps, self.fabric_bps)
            self._fabric_cache = cached = (graph, self.tiers, places, fabric)
        return cached[3]

    def request_decision(self, urgent: bool = True) -> None:
        """The controller's own request for a decision (the period, a job event, a failure under an elephant):
        coalesced with every other request (decision_requests.py); the decision loop takes it."""
        self.decisions.request(ticket=False, urgent=urgent)

    def decision_tick(self, waited: Outcome | None = None) -> te.TEResult | None:
        """The decision loop's step, and the only place that talks to the optimiser's worker: take the decision
        in flight if it ended (applied here; every request it answers gets its result), then start the next
        requested one on the current inputs. Without a worker the decision is made here and now. Returns the
        result of a decision that ended in this step, if any. Never blocks (``waited``: the outcome te_step's
        blocking wait took from the worker)."""
        runner, ended = self.runner, None
        if self.decisions.inflight is not None and runner is not None:
            outcome = waited or runner.poll()
            if outcome is None and runner.busy:
                return None  # still deciding
            ended = self._decided(self._take(outcome))  # (no outcome and not busy: the worker was stopped)
        if runner is not None and not runner.ready:
            return ended  # warming up, or a fresh worker after a late decision: the requests wait
        if self.decisions.start() is None:
            return ended
        args, keys = self._decision_inputs()
        if runner is None:
            try:
                result = self.te.step(*args)
            except Exception:
                self._decided(None)  # its callers are answered; the shell logs the error
                raise
            self._demands_taken(keys, result)
            return self._decided(result)
        # the decision's elephants ride along as its generation: the keys of the demands it estimates
        if not runner.submit(self.te, *args, generation=keys):
            return self._decided(None)  # the worker died: a fresh one for the next decision
        return ended

    def te_step(self, wait: bool = False) -> te.TEResult:
        """One decision, requested and taken through the decision loop (tests, and a core without a worker,
        where it is made here). With a worker, ``wait`` blocks until it ended (the worker's deadline at most,
        per decision ahead of it); otherwise the result is that of a decision that ended meanwhile, if any."""
        self.request_decision()
        result = self.decision_tick()
        runner = self.runner
        for _ in range(4):  # warm-up, the decision in flight, ours
            if not wait or runner is None or not self.decisions.busy:
                break
            waited = runner.wait(runner.deadline_s) if runner.busy else None
            if waited is None and not runner.busy:
                runner.wait_ready(runner.deadline_s)
            result = self.decision_tick(waited) or result
        return result or te.TEResult(False, elephants=len(self.monitor.elephants()),
                                     reason="deciding in the optimiser worker")

    def _decision_inputs(self) -> tuple[tuple, list]:
        """What a decision starting now is taken on, as ``TrafficEngineer.step``'s arguments, and its keys."""
        self.decide_now = False
        self.monitor.expire(self.clock())
        elephants = self.monitor.elephants()
        pairs = mljobs.uncovered_pairs(self.jobs, [st.key for st in elephants])  # declared sends not seen yet
        if self.sflow is not None:  # host pairs busy as a whole, none of their 5-tuples an elephant
            pairs += [p for p in self.sflow.elephant_pairs(st.key for st in elephants) if p not in pairs]
        keys = [st.key for st in elephants] + pairs
        self._restore_pins([st.key for st in elephants])
        self._started = (self.te.last.elephants if self.te.last else 0, len(elephants), dict(self.te.pinned))
        self._decided_on = fabric = self.fabric()
        # the demands are estimated in the decision (in the worker, off the loop), from the elephants' hosts
        return (fabric, [(k, None) for k in keys], self.jobs_by_host(), mljobs.weights(self.jobs), True), keys

    def _decided(self, result: te.TEResult | None) -> te.TEResult:
        """The decision in flight ended (``result`` None: it failed or ran late, the routing in force stays):
        recorded, logged, and handed to every request it answers."""
        previous_count, elephants, previous_pins = self._started
        if result is None:
            result = te.TEResult(False, elephants=elephants, reason="no decision (the optimiser failed or ran "
                                 "late): routing in force kept")
        if self.te.pinned != previous_pins:
            self.dirty = True
        self._record(result, elephants)
        self.metrics.te_decisions.inc()
        self.decisions.finish(result)
        if result.applied or result.elephants != previous_count:
            b, a = result.before or {}, result.after or {}
            LOG.info("te: %d elephants, %s, %d moved; max link load %s -> %s, min rate %.2f -> %.2f Mb/s, "
                     "optimiser %.1f ms", result.elephants, result.reason, len(result.moved),
                     b.get("max_link_load"), a.get("max_link_load"), b.get("min_rate", 0) / 1e6,
                     a.get("min_rate", 0) / 1e6, 1e3 * result.runtime_s)
        return result

    def _demands_taken(self, keys: list, result: te.TEResult) -> None:
        """The demands a decision estimated for ``keys`` (its elephants, in order) onto the monitor's flows (the
        REST and dashboard figures; a flow gone meanwhile is skipped)."""
        if result.demands is None:
            return
        flows = self.monitor.flows
        for key, fraction in zip(keys, result.demands):
            st = flows.get(key) if isinstance(key, FlowKey) else None
            if st is not None:
                st.demand_bps = fraction * self.host_bps

    def _take(self, outcome: Outcome | None) -> te.TEResult | None:
        if outcome is None:
            return None
        if outcome.status == DONE:
            stale = self._stale_pin(outcome.pinned)
            if stale is not None:  # taken on a topology that changed meanwhile: it must not be installed
                LOG.info("te: a decision taken before a topology change pins %s on %s, no longer live: dropped, "
                         "deciding again", stale, outcome.pinned[stale] if outcome.pinned else None)
                self.request_decision()
                return te.TEResult(False, elephants=self._started[1], reason="the topology changed during the "
                                   "decision: dropped, deciding again")
            OptimiserRunner.apply(self.te, outcome)
            if outcome.result is not None:
                self._demands_taken(outcome.generation, outcome.result)
            return outcome.result
        LOG.warning("te: %s decision %s (%s): routing in force kept", self.te.mode,
                    "ran late" if outcome.status == LATE else "failed", outcome.error)
        return None

    def _stale_pin(self, pinned: Mapping[te.RouteKey, te.Path] | None) -> te.RouteKey | None:
        """A pin of a decision that ended which the topology no longer supports (a switch or link gone, an end
        host moved), when the topology changed while it was decided; else None (still valid: applied)."""
        if not pinned or self.fabric() is self._decided_on:
            return None
        graph, hosts = self.live_graph(), self.topology.hosts
        for key, path in pinned.items():
            src, dst = hosts.get(key.src_ip), hosts.get(key.dst_ip)
            if src is None or dst is None or (path[0], path[-1]) != (src.dpid, dst.dpid) \
                    or sync.pinned_paths_broken({key: path}, graph):
                return key
        return None

    def _restore_pins(self, keys: list[FlowKey]) -> None:
        """Elephants whose pinned rules survived a restart keep those paths (the TE step then judges them
        like any installed routing, so nothing moves without need)."""
        if not self.recovered.hops:
            return
        graph = self.topology.graph()
        for key in keys:
            dst = self.topology.hosts.get(key.dst_ip)
            if key in self.recovered.hops and key not in self.te.pinned and dst is not None:
                path = self.recovered.pinned_path(key, self.topology, graph, dst.dpid)
                if path is not None:
                    self.te.pinned[key] = path
                    LOG.info("elephant %s: pinned path %s recovered from the switches", key, path)
                self.recovered.forget(key)

    def _record(self, result: te.TEResult, elephants: int) -> None:
        m = self.metrics
        m.elephants.set(elephants)
        if result.runtime_s:
            m.optimiser_seconds.set(result.runtime_s)
        if result.after:
            m.max_link_load.set(result.after["max_link_load"])
        if result.applied:
            m.reoptimisations.inc()
            m.flows_moved.inc(len(result.moved))

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
        self.dirty = False
        if self._audited:
            self._judge_audits()
        graph = self._inputs_settled()
        flows = self.accounting.take_changed()
        stale, self._stale = self._stale, set()
        changed = self.plan.update(self.topology, graph, self.tiers, self.accounting, self.te.pinned, flows,
                                   copy=self.flow_copy)
        desired = self.plan.desired  # equals sync.desired_state(...) of these inputs (the property test)
        ready = [d for d in sorted(self.connected) if d in self.installed and d in desired
                 and (d in changed or d in stale)]
        # a switch whose installed state is its last desired one: diff only what the plan changed there
        only = {d: keys for d, keys in self.plan.changed.items() if keys is not None and d not in stale}
        steps = sync.plan_sync(self.installed, desired, ready, pause=self.pause, only=only)
        if self.refused:
            steps = self._without_refused(steps)
        steps = self._within_budget(steps, ready)
        if self.audit.any_out:  # believed from now on, sent in the steps: not judged by an audit out
            for step in steps:
                for dpid, change in step.changes:
                    self.audit.touched(dpid, _rule_id(change.rule))
        if self.recovering():
            steps = sync.additions_only(steps, self.installed)  # keeps what the switches hold, for now
            self._stale |= set(ready) | changed  # the rest follows once recovery is over
            self.dirty = True
        else:
            self._believe(steps, ready, only, desired)
        sent = sum(len(s.changes) for s in steps)
        if sent:
            self.metrics.rule_changes.inc(sent)
        self.metrics.rules_installed.set(sum(len(r.flows) for r in self.installed.values()))
        return steps

    def _inputs_settled(self) -> nx.Graph:
        """Before a sync plans: hosts recovered from the tables learned, tiers current, a decision requested
        where a job event or a failure under an elephant asks for one now; returns the live graph's snapshot."""
        for ip, mac, dpid, port in self.recovered.resolve_hosts(self.topology, self._lldp_settled()):
            self.topology.learn_host(ip, mac, dpid, port)
            LOG.info("host %s at switch %s port %s recovered from the switch's rules", ip, dpid, port)
        fresh = self._graph is None
        graph = self.live_graph()  # one snapshot of the live switch graph for this whole resync
        host_switches = frozenset(h.dpid for h in self.topology.hosts.values())
        if fresh or host_switches != self._host_switches or self.tiers is None:
            self._host_switches = host_switches
            self._update_tiers(graph)
        if self.decide_now or fresh and sync.pinned_paths_broken(self.te.pinned, graph):
            # a job event, or a failure under an elephant: decide now, not at the next period (the decision loop
            # takes the request; without a worker it is decided here, and this sync installs it)
            self.decide_now = False
            self.request_decision()
            if self.runner is None:
                self.decision_tick()
                self.dirty = False
        if self.sflow is not None:
            self._sflow_pins()
        return graph

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
        for (dpid, _), (_, _, change) in self.refused.items():  # ... less what the switches refused
            if dpid in ready and dpid not in only:
                apply_change(self.installed[dpid], _undone(change))
        for dpid, held in self.over_budget.items():  # ... and what their tables have no room for
            if dpid in ready and dpid not in only:
                for change in held.values():
                    apply_change(self.installed[dpid], _undone(change))

    def _within_budget(self, steps: list[Step], ready: list[int]) -> list[Step]:
        """``steps`` less the additions the switches' tables have no room for (table_budget.py), which are
        held back: not believed installed, counted, tried again every poll."""
        limits = self.table_limits()
        self._small = bool(limits)
        for dpid in ready:
            self.over_budget.pop(dpid, None)
        if limits:
            steps, held = table_budget.admit(steps, self.installed, limits)
            for dpid, change in held:
                self.over_budget.setdefault(dpid, {})[_rule_id(change.rule)] = change
        self.metrics.rules_over_budget.set(sum(len(h) for h in self.over_budget.values()))
        return steps

    def _lldp_settled(self) -> set[int]:
        """Connected switches up long enough for LLDP to have found their fabric links."""
        now = self.clock()
        return {d for d in self.connected if now - self._connected_at.get(d, now) >= LLDP_SETTLE_S}

    def recovering(self) -> bool:
        """Just (re)started over switches that still hold rules: learn from them before changing them."""
        return self.found_state and self.clock() < self.recovery_ends

    def _update_tiers(self, graph: nx.Graph) -> None:
        result = infer_tiers(graph, self.topology.access_switches(), self.config["tiers"], previous=self.tiers,
                             hosted=self._host_switches)  # a half-known graph keeps the tiers it agrees with
        previous, self.tiers = self.tiers, result
        if previous is not None and (previous.kind, previous.reason) == (result.kind, result.reason):
            return
        if result.is_clos:
            counts: dict[str, int] = {}
            for tier in result.tiers.values():
                counts[tier] = counts.get(tier, 0) + 1
            LOG.info("topology is a %s: %s", result.kind, ", ".join(f"{n} {t}" for t, n in sorted(counts.items())))
        else:
            LOG.warning("topology is not a recognised Clos (%s): forwarding over shortest paths", result.reason)

    # -- views (REST) -------------------------------------------------------------------------------------------
    def topology_json(self) -> dict:
        return self.topology.to_json(self.tiers.tiers if self.tiers else {})

    def elephants_json(self) -> list[dict]:
        pinned = self.te.pinned
        return [dict(st.key.as_dict(), rate_bps=st.rate_bps, demand_bps=st.demand_bps,
                     path=list(pinned[st.key]) if st.key in pinned else None, active=st.streak > 0)
                for st in self.monitor.elephants()]

    def routing_json(self) -> dict:
        """The routing-core report of the installed routing and of what ECMP would give (estimated)."""
        fabric = self.fabric()
        elephants = [st for st in self.monitor.elephants()
                     if fabric is not None and st.key.src_ip in fabric.hosts and st.key.dst_ip in fabric.hosts]
        out: dict[str, Any] = {"mode": self.te.mode, "elephants": len(elephants), "units": "bits per second",
                               "fabric": self.tiers.kind if self.tiers else "unknown", "installed": None,
                               "ecmp": None, "last_decision": None}
        last = self.te.last
        if last is not None:
            out["last_decision"] = {"applied": last.applied, "reason": last.reason, "moved": len(last.moved),
                                    "optimiser_ms": 1e3 * last.runtime_s,
                                    "max_link_load_before": (last.before or {}).get("max_link_load"),
                                    "max_link_load_after": (last.after or {}).get("max_link_load")}
        if not elephants or fabric is None:  # (elephants are only taken on a known fabric)
            return out
        jobs = self.jobs_by_host()
        flows = [Flow(st.key.src_ip, st.key.dst_ip, demand=st.demand_bps / self.host_bps or None,
                      job=jobs.get(st.key.src_ip), key=st.key) for st in elephants]
        objective = "job" if jobs else self.te.objective
        ecmp = te.run_optimiser("ecmp", fabric, flows).paths
        installed, _ = te.paths_in_force(fabric, flows, self.te.pinned, ecmp)
        out["installed"] = metric.report(fabric, flows, installed, objective=objective)
        out["ecmp"] = metric.report(fabric, flows, ecmp, objective=objective)
        return out


def _undone(change: Change) -> Change:
    """What undoes a refused change in the belief: a refused add or modify is not held, a refused delete is."""
    return Change("add" if change.op == "delete" else "delete", change.rule)


def _rule_id(rule: FlowRule | GroupRule) -> tuple[str, Any]:
    """What names a rule on its switch: a flow's table, priority and match, or a group's id."""
    return ("group", rule.key) if isinstance(rule, GroupRule) else ("flow", rule.key)
