"""The core's state: what the controller knows and keeps (topology, hosts, flows, the traffic engineer, each
switch's installed rules, refusals, capabilities, the plan), set up from the configuration, and the few queries
every part of the core asks of it (the live graph, the fabric, the declared jobs, whether it is recovering).
``controller.core.ControllerCore`` is this state with its methods (core.py, core/switches.py, core/sflow.py,
core/views.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import networkx as nx

from controller.decide import te
from controller.decide.decision_requests import DecisionRequests
from controller.decide.host_ageing import HostAgeing
from controller.decide.optimiser_runner import OptimiserRunner
from controller.decide.packet_in import PacketInHandler
from controller.desired import switch_profiles, sync
from controller.desired.audit import TableAudit
from controller.desired.flowcopy import NewFlowCopy
from controller.desired.plan_state import PlanState
from controller.desired.recovery import Recovered
from controller.desired.rules import SwitchRules
from controller.desired.switch_belief import SwitchBelief
from controller.southbound.log_throttle import LogThrottle
from controller.southbound.sflow.detection import SflowDetection
from controller.southbound.sflow.switch_detection import SwitchDetection
from controller.state.accounting import Accounting
from controller.state.budget import TokenBucket
from controller.state.capabilities import SwitchCapabilities
from controller.state.flowkey import FlowKey
from controller.state.job_leases import JobLeases
from controller.state.job_state_file import JobStateFile
from controller.state.jobs import HostPair
from controller.state.monitor import FlowMonitor, MonitorConfig
from controller.state.pair_rates import PairRates
from controller.state.tiers import TierInference, infer_tiers
from controller.state.topology import Topology
from controller.web.metrics import Metrics
from mlroute.routing.fabric import Fabric

LOG = logging.getLogger("mlroute")

READBACK_TIMEOUT_S = 5.0  # a reconnecting switch that does not report its tables in time is rebuilt from scratch
BARRIER_ANSWER_S = 10.0  # a barrier unanswered this long: its changes stay unconfirmed, the switch is read back
RESTORE_S = 10.0  # a counting rule a wipe deleted is waited for this long before polls that miss it end its flow
RECOVERY_MIN_S = 10.0  # after start, only add rules for this long (at least 3 polls): LLDP and read-back settle
LLDP_SETTLE_S = 5.0  # a switch up this long has had LLDP classify its ports (k=4: one full send batch, 4 s)


def time_budget_s(config: Mapping[str, Any]) -> float:
    """How long an optimiser may search: ``te.time_budget_s``, else the poll interval."""
    return config["te"].get("time_budget_s") or config["te"]["poll_interval_s"]


class CoreState:
    """What the controller knows; ``config`` is the validated configuration (controller.config)."""

    def __init__(self, config: Mapping[str, Any], clock: Callable[[], float], metrics: Metrics | None = None,
                 pause: Callable[[], None] | None = None, runner: OptimiserRunner | None = None,
                 lease_clock: Callable[[], float] | None = None, job_file: JobStateFile | None = None) -> None:
        """``pause`` is called now and then during long work (the shell passes a green-thread yield);
        ``runner`` runs TE decisions in a worker process (the shell passes one: the optimiser never blocks the
        event loop); without one they run in the caller. ``lease_clock`` times the jobs' leases (default
        ``clock``; a cluster's shell passes the wall clock: its expiries are stored for every node to judge).
        ``job_file``: where a single controller keeps its declared jobs across restarts (read here, before any
        decision; written at every change of ``jobs``); none on a cluster (ZooKeeper keeps them) or in tests."""
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
        self.leases = JobLeases(lease_clock or clock)  # per-job REST declarations' leases (in the job entries)
        self.job_file = job_file
        self._jobs: list[dict] = job_file.restore() if job_file is not None else list(config["jobs"])
        # the next decision is a job's arrival: its newcomers may be placed beside the pins without the full search
        self.incremental_next = False
        rest = config["rest"]
        self.decisions = DecisionRequests(clock, max_wait_s=rest["max_decision_wait_s"])  # one at a time, coalesced
        # the decision in flight's elephants before, now; the pin table in force when it started
        self._started: tuple[int, int, dict] = (0, 0, {})
        self._decided_graph: nx.Graph | None = None  # the live switch graph the decision in flight was taken on
        self.connected: set[int] = set()  # switches with a live OpenFlow connection
        self._connected_at: dict[int, float] = {}  # dpid -> when its connection came up
        self.belief = SwitchBelief()  # what each switch holds: sent (pending) and confirmed (switch_belief.py)
        # counted when /metrics is scraped, not at every barrier reply, error or sync (a recount per reply was
        # quadratic in a first install's changes); a core that replaces this one (cluster) rebinds them
        self.metrics.rules_installed.set_function(self.belief.confirmed_flows)
        self.metrics.rules_pending.set_function(self.belief.pending_total)
        self.installed: dict[int, SwitchRules] = self.belief.held  # dpid -> its rules as sent or read back
        self._refusal_log = LogThrottle(lambda: self.clock())  # one line per switch and error per minute
        self.readback = sync.ReadBack(READBACK_TIMEOUT_S)
        audit = config["audit"]
        self.audit = TableAudit(audit["period_s"], audit["entries_per_s"], clock)  # installed state verified
        self._static_counts: dict[int, tuple[int, float, dict[int, int]]] = {}  # dpid -> (flows, when, counts)
        self._short_log = LogThrottle(lambda: self.clock())
        self.capabilities: dict[int, SwitchCapabilities] = {}  # what each switch said it is and holds
        self._small = False  # some switch has a table with a known small capacity (the budget applies)
        self.profile_entries = [switch_profiles.entry_from(v) for v in config["switches"]]
        self.profiles: dict[int, switch_profiles.Profile] = {}  # dpid -> the profile in force (once described)
        self.pacing: dict[int, TokenBucket] = {}  # dpid -> its flow-mod budget (profiles with max_flow_mods_per_s)
        self._polled: dict[int, float] = {}  # dpid -> when its counters were last asked for
        rate = tecfg["new_flows_per_s"]
        self.new_flow_budget = TokenBucket(rate, max(1.0, rate / 10), clock)  # a tenth of a second's worth at once
        self.pair_rates = PairRates(tecfg["pair_new_flows_per_s"], clock)  # pairs opening flows too fast: whole
        self._pair_log = LogThrottle(lambda: self.clock())  # one line per ingress port per minute
        self.recovered = Recovered()  # what the switches' tables say (restart: hosts, counting rules, pins)
        self.recovery_ends = clock() + max(RECOVERY_MIN_S, 3 * tecfg["poll_interval_s"])
        self.found_state = False  # some switch already held mlroute rules when read back
        # the desired state, kept per event (plan_state.py): the live graph is rebuilt only after a topology
        # event, the plan is told which accounting keys changed, and only the switches whose desired rules
        # changed (or whose installed state changed outside a sync: the belief's stale ones) are diffed, so an
        # event costs what it changes
        self.flow_copy = NewFlowCopy.from_config(tecfg)  # per switch once it says what it is (flowcopy.py)
        self.plan = PlanState(stagger=tecfg["ecmp_stagger"], idle_timeout=tecfg["flow_idle_timeout_s"],
                              pause=pause, copy=self.flow_copy)
        self.pause = pause or (lambda: None)
        self._graph: nx.Graph | None = None
        self._settled_graph: nx.Graph | None = None  # the live graph the last sync planned on
        self._tiers_of: tuple[nx.Graph, frozenset[int]] | None = None  # the graph and host switches tiers are of
        self._worker_waited_since: float | None = None  # decisions wanted, the optimiser worker not ready
        self.warm: set[int] = set()  # a warm takeover's switches not all read back yet (begin_recovery)
        self.warm_since = 0.0
        self.syncing = False
        self.syncs_started = 0  # rule syncs begun: each takes the desired state as it is then
        self.synced = 0  # the last sync whose changes the shell has sent in full
        self._fabric_cache: tuple | None = None  # (live graph, tiers, host places, Fabric)
        self._fabric_whole: tuple | None = None  # (tiers, host places, Fabric): the last one built whole
        # te.detection: sflow | both | auto: elephants from packet samples (southbound/sflow/detection.py); in sflow
        # mode only the pinned elephants get an exact entry at their ingress (their accounting, in _sflow_pins)
        self.detection = tecfg["detection"]
        self.sflow = None if self.detection == "flowstats" else SflowDetection(
            config["sflow"], self.monitor.config.threshold_bps, tecfg["elephant_polls"], self.topology,
            self.metrics)
        self._sflow_pinned: set[FlowKey] = set()  # accounting entries made for sampled elephants being pinned
        # te.detection: auto: which switches are on sFlow (their export heard) and which on flow stats, per switch
        self.auto = SwitchDetection(config["sflow"]["silent_s"]) if self.detection == "auto" else None
        for mode in ("sflow", "flowstats"):  # counted when scraped, both series under every te.detection
            self.metrics.switches_by_detection.labels(mode).set_function(partial(self.switches_on, mode))

    @property
    def jobs(self) -> list[dict]:
        """The declared jobs in force (configuration, REST), with their leases."""
        return self._jobs

    @jobs.setter
    def jobs(self, jobs: list[dict]) -> None:
        """Every change of the job list, whoever makes it, is written to the job file (if any) before another
        change can be made: the file always holds the latest whole list."""
        if self.job_file is None:
            self._jobs = list(jobs)
            return
        with self.job_file.lock:
            self._jobs = list(jobs)
            self.job_file.save(self._jobs)

    def live_graph(self) -> nx.Graph:
        """The live switch graph, rebuilt only after a switch, port or link event."""
        if self._graph is None:
            self._graph = self.topology.graph()
        return self._graph

    def begin_recovery(self, warm: Iterable[int] = (), tiers: TierInference | None = None) -> None:
        """This node just took over a cluster's switches (controller/shell/cluster.py): recover as after a restart
        (read back, only add rules until LLDP and the read-back have settled). ``warm``: the switches of the
        leader's published view, whose links this node already has: recovery ends as soon as every one of them
        is read back (core._warm_recovery_over), not when a restart's would. ``tiers``: the last leader's (from
        its view), the previous inference the half-known graph is judged against while LLDP catches up on what
        changed since the view (a cable restored just before: its live, linkless ports do not make its switches
        host-facing, so the fabric stays a Clos and the pins stay)."""
        self.recovery_ends = self.clock() + max(RECOVERY_MIN_S, 3 * self.config["te"]["poll_interval_s"])
        self.found_state = False
        self.warm = set(warm)
        self.warm_since = self.clock()
        if tiers is not None:  # (a follower's own knew no switch: nothing to keep of it)
            self.tiers, self._tiers_of = tiers, None

    def _lldp_settled(self) -> set[int]:
        """Connected switches up long enough for LLDP to have found their fabric links."""
        now = self.clock()
        return {d for d in self.connected if now - self._connected_at.get(d, now) >= LLDP_SETTLE_S}

    def recovering(self) -> bool:
        """Just (re)started over switches that still hold rules: learn from them before changing them."""
        return self.found_state and self.clock() < self.recovery_ends

    def jobs_by_host(self) -> dict[str, str]:
        return {ip: job["name"] for job in self.jobs for ip in job["hosts"]}

    def settle_tiers(self, graph: nx.Graph) -> None:
        """The tiers of ``graph`` (the live graph) with the hosts' switches now: inferred again whenever either
        differs from what the last inference saw, whoever reads the graph first (a sync, a decision, a
        packet-in), so a link LLDP has just found always reaches the tiers."""
        host_switches = frozenset(h.dpid for h in self.topology.hosts.values())
        if self.tiers is None or self._tiers_of is None or self._tiers_of[0] is not graph \
                or self._tiers_of[1] != host_switches:
            self._tiers_of = (graph, host_switches)
            self._update_tiers(graph, host_switches)

    def _update_tiers(self, graph: nx.Graph, hosted: frozenset[int]) -> None:
        result = infer_tiers(graph, self.topology.access_switches(), self.config["tiers"], previous=self.tiers,
                             hosted=hosted)  # a half-known graph keeps the tiers it agrees with
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

    def fabric(self) -> Fabric | None:
        """The routing core's Fabric of the live topology, made again only when the live graph, the tiers or the
        hosts' places changed (a k=24 fat-tree's takes most of a second to build: not every period). Where only
        links went down since the last one built whole, or came back, it is that one with those links failed
        (``Fabric.with_failed_links``), or that one itself."""
        places = frozenset((h.ip, h.dpid) for h in self.topology.hosts.values())
        graph = self.live_graph()
        self.settle_tiers(graph)
        cached = self._fabric_cache
        if cached is None or cached[0] is not graph or cached[1] is not self.tiers or cached[2] != places:
            fabric = self._fabric_with_links_down(graph, places)
            if fabric is None:
                fabric = te.fabric_from_topology(self.topology, self.tiers, self.host_bps, self.fabric_bps, graph)
                self._fabric_whole = None if fabric is None or self.tiers is None else \
                    (dict(self.tiers.tiers), places, fabric)
            self._fabric_cache = cached = (graph, self.tiers, places, fabric)
        return cached[3]

    def _fabric_with_links_down(self, graph: nx.Graph, places: frozenset) -> Fabric | None:
        """The last fabric built whole with the links ``graph`` lacks failed, when ``graph`` has its switches
        and no link it lacks and the tiers and hosts are the same; else None."""
        whole, tiers = self._fabric_whole, self.tiers
        if whole is None or tiers is None or not tiers.is_clos or whole[1] != places or whole[0] != tiers.tiers:
            return None
        fabric = whole[2]
        known, live = dict(fabric.graph.adjacency()), dict(graph.adjacency())
        if known.keys() != live.keys():
            return None
        down: set[frozenset] = set()
        for node, nbrs in live.items():  # (neighbour sets compared in C: 720 switches at k=24, not 6,912 links)
            had = known[node]
            if nbrs.keys() != had.keys():
                if not nbrs.keys() <= had.keys():
                    return None  # a link the whole one lacks
                down.update(frozenset((node, v)) for v in had.keys() - nbrs.keys())
        return fabric.with_failed_links(down) if down else fabric

    def request_decision(self, urgent: bool = True) -> None:
        """The controller's own request for a decision (the period, a job event, a failure under an elephant):
        coalesced with every other request (decision_requests.py); the decision loop takes it."""
        self.decisions.request(ticket=False, urgent=urgent)

    def sampled_at(self, dpid: int) -> bool:
        """Whether flows entering at ``dpid`` are detected from sFlow samples (not from counting rules there)."""
        return self.detection == "sflow" or (self.auto is not None and self.auto.uses_sflow(dpid))

    def switches_on(self, detection: str) -> int:
        """Connected switches whose flows are detected by ``detection`` (``detection_of``)."""
        return sum(1 for d in self.connected if self.detection_of(d) == detection)

    def detection_of(self, dpid: int) -> str:
        """The detection in force at ``dpid``: ``te.detection``, or under ``auto`` the switch's own choice."""
        return self.auto.of(dpid) if self.auto is not None else self.detection

    def sampled_pairs(self, elephant_keys: Iterable[FlowKey]) -> list[HostPair]:
        """Host pairs whose samples make them an elephant as a whole, none of their 5-tuples one
        (``elephant_keys``), entering where sFlow detects (under ``auto``: the source host's switch is on it)."""
        if self.sflow is None:
            return []
        pairs = self.sflow.elephant_pairs(elephant_keys)
        if self.auto is None:
            return pairs
        hosts = self.topology.hosts
        return [p for p in pairs if p.src_ip in hosts and self.auto.uses_sflow(hosts[p.src_ip].dpid)]
