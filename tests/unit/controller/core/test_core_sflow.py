"""The core with ``te.detection: sflow | both | auto``, driven with real sFlow v5 datagrams (built by
tests/sflow_datagrams.py, decoded by the decoder): no per-flow rules for mice, exact entries only for the pinned
elephants, host pairs as one demand, link load from counter samples, metrics by outcome; under ``auto`` each
switch moving between flow stats and sFlow with its flows handed over."""

import pytest

from controller import config
from controller.core import ControllerCore
from controller.desired.rules import COOKIE_FLOW, COOKIE_FLOW_MISS, PRIO_FLOW_MISS, PRIO_PAIR, TABLE_SEEN
from controller.southbound.sflow.decoder import decode
from controller.state.flowkey import FlowKey
from controller.state.jobs import HostPair
from controller.state.monitor import FlowSample
from tests import topologies
from tests.decision_steps import te_step
from tests.sflow_datagrams import (
    counter_sample,
    datagram,
    ethernet_frame,
    flow_sample,
    header_record,
    if_counters_record,
    openflow_port_record,
)

AGENT = "127.0.0.1"
RATE = 64  # 1-in-64
FRAME = 1400  # payload bytes per sampled packet
STRIDE = [(f"10.0.0.{i + 1}", f"10.0.0.{(i + 4) % 16 + 1}") for i in range(8)]


class Fabric:
    """A core over a k=4 fat-tree whose switches export sFlow from one agent (ifIndex = dpid * 100 + port)."""

    def __init__(self, detection="sflow", extra="", dual_stack=False):
        self.now = 0.0
        self.core = ControllerCore(config.parse(f"te:\n  detection: {detection}\n  poll_interval_s: 2\n{extra}"),
                                   lambda: self.now)
        topo = topologies.fat_tree(4)
        self.core.topology = self.core.packet_in.topology = topologies.dual_stack(topo) if dual_stack else topo
        if self.core.sflow is not None:  # (the detection holds the topology it was made with)
            self.core.sflow = type(self.core.sflow)(self.core.config["sflow"], self.core.monitor.config.threshold_bps,
                                                    2, self.core.topology, self.core.metrics)
            for dpid, ports in self.core.topology.ports.items():
                for port in ports:
                    self.core.sflow.agents.add(AGENT, dpid * 100 + port, dpid, port)
        self.core.sync()
        self.seq = 0

    def host(self, ip):
        return self.core.topology.hosts[ip]

    def send(self, flows, seconds=1.0, per_window_bps=None):
        """One datagram per flow per window: samples standing for ``bps`` each (flows: [(key, bps)]), entering
        at the source host's port; then the clock moves on by ``seconds`` and the core ticks."""
        for key, bps in flows:
            n = max(1, round(bps * seconds / 8 / (FRAME + 58) / RATE))  # samples of a 1-in-64 stream
            h = self.host(key.src_ip)
            samples = []
            for _ in range(n):
                self.seq += 1
                frame = ethernet_frame(src_ip=key.src_ip, dst_ip=key.dst_ip, proto=key.proto,
                                       src_port=key.src_port, dst_port=key.dst_port, payload=FRAME,
                                       ethertype=0x86DD if ":" in key.src_ip else 0x0800)
                samples.append(flow_sample([header_record(frame, stripped=0)], sequence=self.seq,
                                           source_type=2, source_index=1000, sampling_rate=RATE,
                                           input_value=h.dpid * 100 + h.port, output_value=1))
            self.core.sflow_datagram(self.now, decode(datagram(samples, agent=AGENT, sequence=self.seq)))
        self.now += seconds
        return self.core.sflow_tick()

    def windows(self, flows, n):
        new = False
        for _ in range(n):
            new = self.send(flows) or new
        return new


def stride_keys():
    return [FlowKey(s, d, 6, 40000 + i, 5201) for i, (s, d) in enumerate(STRIDE)]


def rules_with_cookie(core, cookie):
    return [r for rules in core.plan.desired.values() for r in rules.flows.values() if r.cookie == cookie]


def test_sflow_mode_copies_no_new_flow_and_polls_no_flow_stats():
    lab = Fabric("sflow")
    assert rules_with_cookie(lab.core, COOKIE_FLOW_MISS) == []  # no copy rules at host ports
    assert not [r for rules in lab.core.plan.desired.values() for r in rules.flows.values() if r.table == TABLE_SEEN]
    assert lab.core.stats_switches() == []
    flowstats = Fabric("flowstats")
    assert len(rules_with_cookie(flowstats.core, COOKIE_FLOW_MISS)) == 2 * 16  # TCP and UDP per host port


def test_sampled_elephants_are_pinned_with_exact_entries_only_for_them():
    lab = Fabric("sflow")
    elephants = stride_keys()
    # one sampled packet a window each (0.75 Mb/s estimated), between 12 distinct host pairs: mice
    mice = [FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + 1) % 16 + 1}", 6, 50000 + i, 80) for i in range(12)]
    flows = [(k, 8e6) for k in elephants] + [(k, 2e4) for k in mice]
    assert not lab.send(flows)  # the first completed window above: one of te.elephant_polls (2)
    assert lab.send(flows)  # the second: elephants, a decision requested
    assert {st.key for st in lab.core.monitor.elephants()} == set(elephants)
    result = te_step(lab.core)
    assert result.applied and set(lab.core.te.pinned) == set(elephants)
    lab.core.sync()
    counting = rules_with_cookie(lab.core, COOKIE_FLOW)
    assert len(counting) == len(elephants)  # the pinned ones, no mouse
    for rule in counting:
        key = next(k for k in elephants if dict(rule.match)["tcp_src"] == k.src_port)
        src = lab.host(key.src_ip)
        path = lab.core.te.pinned[key]
        assert rule.dpid == src.dpid == path[0] and dict(rule.match)["in_port"] == src.port
        assert rule.actions[0][0] == "output"  # to the pinned first hop, not the ECMP table


def test_sampled_ipv6_elephants_get_ipv6_rates_and_pins_whose_entries_match_ipv6():
    lab = Fabric("sflow", dual_stack=True)
    elephants = [FlowKey(topologies.ipv6_of(s), topologies.ipv6_of(d), 6, 40000 + i, 5201)
                 for i, (s, d) in enumerate(STRIDE)]
    assert elephants[0].src_ip == "fd00::a00:1"
    lab.windows([(k, 8e6) for k in elephants], 2)
    for key in elephants:
        assert lab.core.sflow.rates.flow_rate(key).bps > 5e6
    assert {st.key for st in lab.core.monitor.elephants()} == set(elephants)
    assert te_step(lab.core).applied and set(lab.core.te.pinned) == set(elephants)
    lab.core.sync()
    counting = rules_with_cookie(lab.core, COOKIE_FLOW)
    assert len(counting) == len(elephants)
    for rule in counting:
        fields = dict(rule.match)
        key = next(k for k in elephants if fields["tcp_src"] == k.src_port)
        assert (fields["eth_type"], fields["ipv6_src"], fields["ipv6_dst"]) == (0x86DD, key.src_ip, key.dst_ip)
        assert rule.dpid == lab.core.te.pinned[key][0] and rule.actions[0][0] == "output"


def test_an_elephant_that_ends_loses_its_pin_and_its_entry():
    lab = Fabric("sflow", "  pattern_memory_s: 3\nsflow:\n  idle_windows: 2\n")
    key = stride_keys()[0]
    lab.windows([(key, 8e6)], 3)
    te_step(lab.core)
    lab.core.sync()
    assert len(rules_with_cookie(lab.core, COOKIE_FLOW)) == 1
    lab.windows([], 6)  # silent: forgotten by the estimator, then past the pattern memory
    te_step(lab.core)
    lab.core.sync()
    assert lab.core.te.pinned == {} and rules_with_cookie(lab.core, COOKIE_FLOW) == []


def test_many_connections_between_two_hosts_become_one_host_pair_demand():
    lab = Fabric("sflow")
    storm = [(FlowKey("10.0.0.1", "10.0.0.5", 17, 10000 + i, 9), 2e5) for i in range(40)]  # 8 Mb/s in all
    lab.windows(storm, 3)
    assert lab.core.monitor.elephants() == []  # no 5-tuple is one
    te_step(lab.core)
    pair = HostPair("10.0.0.1", "10.0.0.5")
    assert set(lab.core.te.pinned) == {pair}
    lab.core.sync()
    ingress = [r for r in rules_with_cookie(lab.core, COOKIE_FLOW_MISS) if r.priority == PRIO_PAIR]
    assert len(ingress) == 2 and all(r.actions == (("output", ingress[0].actions[0][1]),) for r in ingress)
    assert rules_with_cookie(lab.core, COOKIE_FLOW) == []  # no rule per connection
    assert lab.core.sflow.elephant_pairs([]) == [pair]
    listed = lab.core.elephants_json()  # (GET /mlroute/elephants): the pair, as a pair counted whole is listed
    assert [(e["src_ip"], e["dst_ip"], e["proto"], e["path"] is not None) for e in listed] == \
        [("10.0.0.1", "10.0.0.5", 0, True)]
    assert listed[0]["rate_bps"] >= lab.core.monitor.config.threshold_bps, "its sampled rate, above the threshold"


def test_a_storm_between_two_hosts_asks_for_a_decision_within_a_quarter_window():
    """Issue 21's storm: many new 5-tuples from one host to another, each a mouse. The pair has sent what the
    whole windows ask within the first quarter window, so the tick asks for a decision at once (before: only at
    a completed window, and then only at the next period) and the decision routes it as one demand."""
    lab = Fabric("sflow")
    storm = [(FlowKey("10.0.0.1", "10.0.0.5", 17, 10000 + i, 9), 4e6) for i in range(40)]
    requests = lab.core.decisions.requests
    assert lab.send(storm, seconds=0.25) is True
    assert lab.core.decisions.requests == requests + 1 and lab.core.monitor.elephants() == []
    te_step(lab.core)
    assert set(lab.core.te.pinned) == {HostPair("10.0.0.1", "10.0.0.5")}
    assert lab.send(storm, seconds=0.25) is False  # judged once


def test_a_pair_with_an_elephant_5_tuple_is_routed_by_its_flow():
    lab = Fabric("sflow")
    key = stride_keys()[0]
    lab.windows([(key, 8e6)], 3)
    assert lab.core.sflow.elephant_pairs([key]) == []
    te_step(lab.core)
    assert set(lab.core.te.pinned) == {key}


def test_both_mode_leaves_counted_flows_to_flow_statistics():
    lab = Fabric("both")
    counted, sampled = stride_keys()[:2]
    src = lab.host(counted.src_ip)
    lab.core.new_transport_flow(counted, src.dpid, src.port)  # copied: it has a counting rule
    lab.core.flow_stats(src.dpid, [FlowSample(counted, src.dpid, int(1e6 / 8), 1.0)])  # 1 Mb/s by its counter
    lab.windows([(counted, 8e6), (sampled, 8e6)], 3)  # the samples say 8 Mb/s for both
    assert lab.core.monitor.flows[counted].rate_bps == 1e6 and not lab.core.monitor.flows[counted].sampled
    assert lab.core.monitor.flows[sampled].sampled and lab.core.monitor.flows[sampled].elephant
    assert len(rules_with_cookie(lab.core, COOKIE_FLOW_MISS)) == 2 * 16  # new flows are still copied


def test_counter_samples_give_the_link_view_and_metrics_count_drops():
    lab = Fabric("sflow")
    core, link = lab.core, next(iter(lab.core.topology.links.values()))
    for seq, (uptime, octets) in enumerate([(1000, 0), (2000, 1_250_000)], start=1):  # 10 Mb/s out
        sample = counter_sample([if_counters_record(if_index=link.src * 100 + link.src_port, out_octets=octets,
                                                    in_octets=0), openflow_port_record(link.src, link.src_port)],
                                sequence=seq, source_index=link.src * 100 + link.src_port)
        core.sflow_datagram(lab.now, decode(datagram([sample], agent=AGENT, sequence=seq, uptime_ms=uptime)))
    view = core.sflow.links(core.topology, {}, core.fabric_bps)
    row = next(r for r in view if (r["src"], r["src_port"]) == (link.src, link.src_port))
    assert row["tx_bps"] == 1e7 and row["utilisation"] == 1.0
    core.sflow_tick({"received": 5, "decoded": 3, "dropped_truncated": 2})
    core.sflow_tick({"received": 6, "decoded": 3, "dropped_truncated": 3})
    assert core.metrics.sflow_datagrams.labels("dropped_truncated")._value.get() == 3
    assert core.metrics.sflow_datagrams.labels("received")._value.get() == 6


# -- te.detection: auto -----------------------------------------------------------------------------------------
def auto_fabric(extra=""):
    lab = Fabric("auto", extra)
    lab.core.connected = set(lab.core.topology.ports)
    return lab


def copies_at(core, dpid):
    return [r for r in rules_with_cookie(core, COOKIE_FLOW_MISS) if r.dpid == dpid and r.priority == PRIO_FLOW_MISS]


def counting_at(core, dpid):
    return [r for r in rules_with_cookie(core, COOKIE_FLOW) if r.dpid == dpid]


def poll(lab, dpid, flows, seconds):
    """One flow-stats poll of ``dpid``: each flow's counting rule (flows: [(key, bps)]) ``seconds`` old."""
    lab.core.flow_stats(dpid, [FlowSample(k, dpid, int(bps * seconds / 8), seconds) for k, bps in flows])


def test_auto_starts_on_flow_stats_and_moves_a_switch_whose_export_is_heard():
    lab = auto_fabric()
    core, key = lab.core, stride_keys()[0]
    src = lab.host(key.src_ip)
    assert len(rules_with_cookie(core, COOKIE_FLOW_MISS)) == 2 * 16 and src.dpid in core.stats_switches()
    assert {s["detection"] for s in core.switches_json()} == {"flowstats"}
    assert not core.detection_tick()  # nothing heard yet
    lab.send([(key, 8e6)])  # a sample entering at its host's port: its switch exports
    assert core.detection_tick()
    core.sync()
    assert copies_at(core, src.dpid) == []  # no copies at its host ports any more ...
    assert len(rules_with_cookie(core, COOKIE_FLOW_MISS)) == 2 * 14  # ... and at every other host port still
    lab.now += 2  # the next poll
    due = core.stats_switches()
    assert src.dpid not in due and len(due) == 7  # the other edge switches still polled
    shown = {s["dpid"]: s["detection"] for s in core.switches_json()}
    assert shown.pop(src.dpid) == "sflow" and set(shown.values()) == {"flowstats"}
    assert detection_series(core) == {"sflow": 1, "flowstats": len(core.connected) - 1}
    other = FlowKey(src.ip, "10.0.0.9", 6, 1234, 80)
    assert core.new_transport_flow(other, src.dpid, src.port) == ([], False)  # a copy sent before the move
    assert other not in core.accounting


def detection_series(core):
    return {s.labels["detection"]: s.value for m in core.metrics.switches_by_detection.collect() for s in m.samples}


@pytest.mark.parametrize("detection, want", [("flowstats", {"sflow": 0, "flowstats": 20}),
                                             ("sflow", {"sflow": 20, "flowstats": 0}),
                                             ("auto", {"sflow": 0, "flowstats": 20})])
def test_switches_by_detection_has_both_series_under_every_detection(detection, want):
    """A dashboard query on either series answers whatever te.detection is (an unset label has no series)."""
    lab = Fabric(detection)
    lab.core.connected = set(lab.core.topology.ports)
    assert detection_series(lab.core) == want


def test_a_switch_whose_host_ports_are_not_all_mapped_stays_on_flow_stats():
    lab = auto_fabric()
    key = stride_keys()[0]
    src = lab.host(key.src_ip)
    lab.core.sflow.agents.forget_switch(src.dpid)
    lab.core.sflow.agents.add(AGENT, src.dpid * 100 + src.port, src.dpid, src.port)  # its other host port unknown
    lab.send([(key, 8e6)])
    assert not lab.core.detection_tick() and lab.core.detection_of(src.dpid) == "flowstats"


def test_moving_to_sflow_keeps_a_counted_elephant_once_and_drops_the_mice_rules():
    lab = auto_fabric()
    core, key = lab.core, stride_keys()[0]
    src = lab.host(key.src_ip)
    mouse = FlowKey(src.ip, "10.0.0.9", 6, 1234, 80)
    for k in (key, mouse):
        core.new_transport_flow(k, src.dpid, src.port)
    for t in (1.0, 3.0):  # two polls above the threshold: an elephant by flow stats
        poll(lab, src.dpid, [(key, 8e6), (mouse, 1e4)], t)
    assert core.monitor.flows[key].elephant and not core.monitor.flows[key].sampled
    assert te_step(core).applied and key in core.te.pinned
    core.sync()
    lab.send([(key, 8e6)])
    assert core.detection_tick()
    st = core.monitor.flows[key]
    assert st.elephant and st.sampled  # the same elephant, fed by samples from now on
    assert mouse not in core.accounting and key in core.accounting  # the pinned entry holds its pin
    core.sync()
    [rule] = counting_at(core, src.dpid)
    assert rule.actions[0][0] == "output" and dict(rule.match)["tcp_src"] == key.src_port
    poll(lab, src.dpid, [(key, 1e3)], 5.0)  # a poll in flight at the move: not fed twice
    assert core.monitor.flows[key].rate_bps == st.rate_bps
    lab.windows([(key, 8e6)], 2)
    assert [s.key for s in core.monitor.elephants()] == [key]
    assert core.monitor.flows[key].rate_bps >= core.monitor.config.threshold_bps  # the sampled estimate


def test_silence_hands_sampled_elephants_back_to_counting_rules():
    lab = auto_fabric("sflow:\n  silent_s: 5\n")
    core = lab.core
    keys = stride_keys()[:2]  # 10.0.0.1 and 10.0.0.2: one edge switch
    dpid = lab.host(keys[0].src_ip).dpid
    assert lab.host(keys[1].src_ip).dpid == dpid
    mouse = (FlowKey(keys[0].src_ip, "10.0.0.9", 6, 1234, 80), 2e4)
    lab.send([(keys[0], 8e6)])
    assert core.detection_tick()
    lab.windows([(k, 8e6) for k in keys] + [mouse], 3)
    assert {s.key for s in core.monitor.elephants()} == set(keys) and core.monitor.flows[mouse[0]].sampled
    te_step(core)
    core.sync()
    pinned = [k for k in keys if k in core.te.pinned]
    lab.now += 5  # nothing heard from the switch for silent_s
    assert core.detection_tick() and core.detection_of(dpid) == "flowstats"
    for k in keys:
        st = core.monitor.flows[k]
        assert st.elephant and not st.sampled and core.accounting[k] == (dpid, lab.host(k.src_ip).port)
    assert mouse[0] not in core.monitor.flows  # a new flow again at its next packet
    assert not core._sflow_pinned & set(pinned)  # ordinary counting rules now
    core.sync()
    assert len(copies_at(core, dpid)) == 2 * 2 and len(counting_at(core, dpid)) == 2
    lab.now += 2
    assert dpid in core.stats_switches()
    poll(lab, dpid, [], 2.0)  # polled before the rules went in: not ended
    lab.windows([], 1)  # the estimator's windows of that switch no longer feed the monitor
    assert {s.key for s in core.monitor.elephants()} == set(keys) and mouse[0] not in core.monitor.flows
    poll(lab, dpid, [(k, 6e6) for k in keys], 2.0)
    assert all(core.monitor.flows[k].rate_bps == 6e6 for k in keys)
    poll(lab, dpid, [(keys[0], 6e6)], 4.0)  # counted by its polls now: a rule gone is a flow ended
    assert keys[1] not in core.monitor.flows and core.monitor.flows[keys[0]].elephant


def test_host_pairs_are_routed_from_samples_only_where_the_switch_is_on_sflow():
    lab = auto_fabric()
    storm = [(FlowKey("10.0.0.1", "10.0.0.5", 17, 10000 + i, 9), 2e5) for i in range(40)]
    lab.windows(storm, 3)
    assert lab.core.sampled_pairs([]) == []  # its switch is on flow stats: its counting rules tell
    lab.core.detection_tick()
    assert lab.core.sampled_pairs([]) == [HostPair("10.0.0.1", "10.0.0.5")]
