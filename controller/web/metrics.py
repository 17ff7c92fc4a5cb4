"""Prometheus metrics of one controller instance (own registry, so tests and several apps never collide)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# an event-loop lag; a job's wait for its rules
WAIT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # process_cpu_seconds_total, resident memory, ...: the Ryu process's own
        self.packet_in = Counter("mlroute_packet_in", "Packet-ins received, by kind (lldp = link discovery)",
                                 ["kind"], registry=r)
        self.rule_changes = Counter("mlroute_rule_changes", "Flow and group modifications sent", registry=r)
        self.elephants = Gauge("mlroute_elephants", "Persistent elephant flows currently known", registry=r)
        self.reoptimisations = Counter("mlroute_reoptimisations", "Routings computed and applied", registry=r)
        self.te_decisions = Counter("mlroute_te_decisions", "TE decisions taken (periodic, job events, failures and "
                                    "the REST requests coalesced into them)", registry=r)
        self.rest_refused = Counter("mlroute_rest_refused", "REST calls answered 429 / 503 with Retry-After, by "
                                    "reason (rate_limited, busy)", ["reason"], registry=r)
        self.rest_errors = Counter("mlroute_rest_errors", "REST calls that raised (a JSON 500 with an error id)",
                                   registry=r)
        self.flows_moved = Counter("mlroute_flows_moved", "Elephants whose path changed", registry=r)
        self.optimiser_seconds = Gauge("mlroute_optimiser_seconds", "Runtime of the last optimisation", registry=r)
        self.max_link_load = Gauge("mlroute_max_link_load", "Elephants on the busiest directed link", registry=r)
        self.rules_installed = Gauge("mlroute_rules_installed", "Flow rules switches confirmed holding (a barrier "
                                     "answered after them, or their tables read back)", registry=r)
        self.rules_pending = Gauge("mlroute_rules_pending", "Flow and group changes sent, not yet confirmed by a "
                                   "barrier reply or a read-back", registry=r)
        self.barrier_timeouts = Counter("mlroute_barrier_timeouts", "Barriers a switch left unanswered too long "
                                        "(its changes stay unconfirmed; its tables are read back)", registry=r)
        self.ecmp_max_link_load = Gauge("mlroute_ecmp_max_link_load",
                                        "Elephants on the busiest directed link if ECMP routed them (estimate)",
                                        registry=r)
        self.link_utilisation = Gauge("mlroute_link_utilisation",
                                      "Directed fabric link load from port stats (sFlow counter samples with "
                                      "te.detection sflow | both), 0..1 of te.fabric_link_mbps",
                                      ["src", "dst"], registry=r)
        self._link_series: set[tuple[str, str]] = set()
        self.lldp_ignored = Counter("mlroute_lldp_ignored", "LLDP frames dropped before link discovery saw them, "
                                    "by reason (host_port, confirmed_source, confirmed_receiver)", ["reason"],
                                    registry=r)
        self.hosts_refused = Counter("mlroute_hosts_refused", "New host addresses not learned: the per-port or total "
                                     "cap (port, total) or the per-port rate (rate) of the hosts configuration",
                                     ["reason"], registry=r)
        self.openflow_errors = Counter("mlroute_openflow_errors", "OpenFlow error replies from switches, by "
                                       "switch, type and code (FLOW_MOD_FAILED / TABLE_FULL, ...)",
                                       ["dpid", "type", "code"], registry=r)
        self.rules_refused = Gauge("mlroute_rules_refused", "Rule changes switches refused lately, held back "
                                   "(not believed installed; sent again after a hold)", registry=r)
        self.hosts_aged = Counter("mlroute_hosts_aged", "Hosts forgotten with their rules: silent for "
                                  "hosts.age_after_s, then hosts.probes ARP probes unanswered", registry=r)
        self.table_entries = Gauge("mlroute_table_entries", "Entries a switch reports in each table mlroute uses "
                                   "(table stats, every poll; the switch's own entries included)",
                                   ["dpid", "table"], registry=r)
        self.table_capacity = Gauge("mlroute_table_capacity", "Entries a switch says each table holds "
                                    "(table features max_entries, where it answers)", ["dpid", "table"], registry=r)
        self._table_series: dict[int, set[str]] = {}  # dpid -> tables with series (removed when it goes)
        self.handler_errors = Counter("mlroute_handler_errors", "OpenFlow and topology events whose handler raised "
                                      "(a malformed reply or packet: logged, skipped), by handler", ["handler"],
                                      registry=r)
        self.rules_over_budget = Gauge("mlroute_rules_over_budget", "Rules held back because their switch's table "
                                       "has no room (capacity less headroom; tried again every poll)", registry=r)
        self.flows_by_pair = Counter("mlroute_flows_counted_by_pair", "Host pairs counted as a whole (one counting "
                                     "rule for all their flows): the ingress table too tight for one per "
                                     "transport flow, the pair opening new flows faster than "
                                     "te.pair_new_flows_per_s, or the new-flow budget spent", registry=r)
        self.flows_uncounted = Counter("mlroute_flows_uncounted", "New transport flows left on ECMP without a "
                                       "counting rule, by reason (table_full, pair_cap)", ["reason"], registry=r)
        self.cluster_leader = Gauge("mlroute_cluster_leader", "1 while this node leads its controller cluster "
                                    "(0: follower; absent without a cluster: section)", registry=r)
        self.cluster_generation = Gauge("mlroute_cluster_generation", "The cluster's generation this node knows "
                                        "(bumped at each election; the leader's role requests carry it)", registry=r)
        self.cluster_leader_changes = Counter("mlroute_cluster_leader_changes", "Times this node became leader or "
                                              "stepped down", registry=r)
        self.cluster_writable = Gauge("mlroute_cluster_switches_writable", "Switches that confirmed this node as "
                                      "MASTER at the current generation", registry=r)
        self.audits = Counter("mlroute_audits", "Switch tables read back to verify what mlroute installed",
                              registry=r)
        self.audit_findings = Counter("mlroute_audit_findings", "Rules an audit found differing from what mlroute "
                                      "believed installed, by kind (missing, extra, altered), then repaired",
                                      ["kind"], registry=r)
        self.sflow_datagrams = Counter("mlroute_sflow_datagrams", "sFlow datagrams by outcome (received, decoded, "
                                       "callback_errors, dropped_<reason>: truncated, version, unknown_agent, ...)",
                                       ["outcome"], registry=r)
        self.sflow_samples = Counter("mlroute_sflow_samples", "sFlow flow samples by outcome (counted, replayed, "
                                     "no_header, not_transport, unknown_interface, not_ingress)", ["outcome"],
                                     registry=r)
        self.switches_by_detection = Gauge("mlroute_switches_by_detection", "Connected switches by the detection "
                                           "in force for flows entering there (te.detection: auto; sflow: their "
                                           "sFlow export heard, flowstats: counting rules)", ["detection"],
                                           registry=r)
        self.loop_lag = Histogram("mlroute_event_loop_lag_seconds",
                                  "How late a short timer fires in the controller's event loop: how long other work "
                                  "held the one Ryu thread", buckets=WAIT_BUCKETS_S, registry=r)
        self.job_rules_confirmed = Histogram("mlroute_job_rules_confirmed_seconds",
                                             "From a job event's decision ending (a REST PUT, DELETE or POST of "
                                             "jobs) to every switch confirming its rules: time a declared job's "
                                             "answer waited; unconfirmed in time: counted at the wait's end",
                                             ["confirmed"], buckets=WAIT_BUCKETS_S, registry=r)
        for confirmed in ("true", "false"):  # both series exported from the start (zero until a job event)
            self.job_rules_confirmed.labels(confirmed)

    def estimate_ecmp_from(self, routing_view: Callable[[], Mapping[str, Any]]) -> None:
        """ECMP's estimated max link load, read from ``routing_view()`` (the GET /mlroute/routing body: the last
        decision's own report) when scraped."""
        def value() -> float:
            try:
                ecmp = routing_view().get("ecmp") or {}
            except Exception:  # a scrape must not fail because one estimate did
                return float("nan")
            return float(ecmp.get("max_link_load") or 0)
        self.ecmp_max_link_load.set_function(value)

    def table_entries_of(self, dpid: int, active: Mapping[int, int]) -> None:
        for table, n in active.items():
            self.table_entries.labels(str(dpid), str(table)).set(n)
        self._table_series.setdefault(dpid, set()).update(map(str, active))

    def table_capacity_of(self, dpid: int, capacity: Mapping[int, int], tables: Iterable[int]) -> None:
        for table in tables:
            if table in capacity:
                self.table_capacity.labels(str(dpid), str(table)).set(capacity[table])
                self._table_series.setdefault(dpid, set()).add(str(table))

    def forget_switch(self, dpid: int) -> None:
        """A switch's connection is gone: its table series go (the label set stays bounded by the fabric)."""
        for table in self._table_series.pop(dpid, ()):
            for gauge in (self.table_entries, self.table_capacity):
                try:
                    gauge.remove(str(dpid), table)
                except KeyError:
                    pass

    def set_link_utilisation(self, links: Iterable[Mapping[str, Any]]) -> None:
        """One series per directed fabric link (``links_json`` rows); a link that went away loses its series,
        so the label set stays bounded by the fabric. Parallel links between two switches report the busier."""
        values: dict[tuple[str, str], float] = {}
        for link in links:
            if link["utilisation"] is not None:
                key = (str(link["src"]), str(link["dst"]))
                values[key] = max(values.get(key, 0.0), link["utilisation"])
        for key in self._link_series - set(values):
            self.link_utilisation.remove(*key)
        for key, value in values.items():
            self.link_utilisation.labels(*key).set(value)
        self._link_series = set(values)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
