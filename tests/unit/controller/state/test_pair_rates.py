"""A host pair opening new flows faster than one counting rule each can follow is counted whole: one rule at the
ingress for all its flows (neither copied nor learned any more), its 5-tuples' rules folded in, bounded per port
and in all; the rates alone, then the app over fake switches."""

import pytest

from controller.desired.rules import COOKIE_FLOW, COOKIE_FLOW_MISS
from controller.state.flowkey import FlowKey, pair_key
from controller.state.pair_rates import PairRates
from tests import topologies
from tests.clock import FakeClock
from tests.lab import Lab, stop_apps, tcp_packet


def test_a_pair_is_busy_once_it_passes_its_rate_in_a_window_and_forgotten_when_quiet():
    clock = FakeClock()
    rates = PairRates(3, clock)
    assert [rates.new_flow("a", "b") for _ in range(4)] == [False, False, False, True]
    assert rates.new_flow("a", "c") is False, "per pair"
    clock.advance(1.0)
    assert rates.new_flow("a", "b") is False, "a new window"
    clock.advance(2.0)
    rates.new_flow("x", "y")
    assert len(rates) == 1, "pairs quiet for two windows are dropped"


@pytest.fixture
def lab():
    lab = Lab(topologies.fat_tree(4))
    lab.bring_up()
    frozen = FakeClock(5.0)  # the whole storm arrives in one instant
    core = lab.app.core
    core.pair_rates.clock = core.new_flow_budget.clock = frozen
    core.new_flow_budget._tokens, core.new_flow_budget._last = core.new_flow_budget.burst, frozen()
    yield lab
    stop_apps()


def storm(lab, src, dsts, ports):
    for dst in dsts:
        for port in ports:
            lab.packet_in(src.dpid, src.port, tcp_packet(FlowKey(src.ip, dst, 6, port, 80)), cookie=COOKIE_FLOW_MISS)


def counting_rules(lab, dpid, src_ip, dst_ip):
    return [r for r in lab.switches[dpid].table.flows.values() if r.cookie == COOKIE_FLOW
            and dict(r.match).get("ipv4_src") == src_ip and dict(r.match).get("ipv4_dst") == dst_ip]


def test_a_storm_of_new_flows_to_one_host_is_counted_as_its_pair_by_one_rule(lab):
    src, dst = lab.ref.hosts["10.0.0.1"], lab.ref.hosts["10.0.0.9"]
    core = lab.app.core
    per_s = core.config["te"]["pair_new_flows_per_s"]
    storm(lab, src, [dst.ip], range(20000, 20500))
    pair = pair_key(FlowKey(src.ip, dst.ip, 6, 1, 80))
    assert core.accounting.get(pair) == (src.dpid, src.port)
    assert [k for k in core.accounting if k.src_ip == src.ip and not k.is_pair] == [], "its 5-tuples folded in"
    lab.app.resync()
    lab.pump()
    rules = counting_rules(lab, src.dpid, src.ip, dst.ip)
    assert len(rules) == 1 and "tcp_src" not in dict(rules[0].match), "one rule for the pair, the rest deleted"
    assert lab.switches[src.dpid].flow_mods  # (sent)
    t = lab.trace(src.ip, dst.ip, ip_proto=6, tcp_src=30000, tcp_dst=80)  # a later flow of the pair
    assert t.delivered == {(dst.dpid, dst.port)} and not t.to_controller, "neither copied nor lost"
    assert core.metrics.flows_by_pair._value.get() == 1
    assert core.metrics.packet_in.labels("newflow_over_budget")._value.get() == 0
    assert per_s < 500


def test_past_the_budget_a_host_cycling_destinations_creates_at_most_the_per_port_pair_cap(lab):
    src = lab.ref.hosts["10.0.0.1"]
    core = lab.app.core
    core.config["te"]["max_pairs_per_port"] = 4
    dsts = [ip for ip in sorted(lab.ref.hosts) if ip != src.ip]
    storm(lab, src, dsts, range(20000, 20020))  # 15 destinations x 20 new flows: 300, under any pair's rate
    counted = [k for k in core.accounting if k.src_ip == src.ip]
    pairs = [k for k in counted if k.is_pair]
    assert len(pairs) == 4, "the per-port cap"
    assert len(counted) - len(pairs) == core.new_flow_budget.burst == 100, "the budget's 5-tuples"
    assert core.metrics.flows_uncounted.labels("pair_cap")._value.get() > 0
    assert core.metrics.packet_in.labels("newflow_over_budget")._value.get() > 0
    lab.app.resync()
    lab.pump()
    assert all(len(counting_rules(lab, src.dpid, src.ip, p.dst_ip)) >= 1 for p in pairs)
