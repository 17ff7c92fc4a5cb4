import pytest

from controller.state.monitor import (
    FlowKey,
    FlowMonitor,
    FlowSample,
    MalformedStatsError,
    MonitorConfig,
    StatsAssembler,
    sample_from_stat,
)

MBPS = 1e6
KEY = FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201)
KEY2 = FlowKey("10.0.0.1", "10.0.0.5", 6, 40001, 5202)


def poll(monitor, dpid, now, *flows):
    """flows: (key, total bytes, rule duration in s) as a switch would report them."""
    monitor.update(dpid, [FlowSample(k, dpid, b, d) for k, b, d in flows], now)


def mb(mbps, seconds):
    return int(mbps * MBPS * seconds / 8)


def make(polls=2, memory=30):
    return FlowMonitor(MonitorConfig(threshold_bps=1 * MBPS, polls_needed=polls, memory_s=memory))


def test_rate_uses_switch_durations_not_the_poll_clock():
    m = make()
    poll(m, 1, 100.0, (KEY, mb(8, 2.0), 2.0))
    poll(m, 1, 109.0, (KEY, mb(8, 2.0) + mb(8, 2.0), 4.0))  # the poll came 9 s later; the rule says 2 s
    assert m.flows[KEY].rate_bps == pytest.approx(8 * MBPS)


def test_elephant_after_n_consecutive_polls_above_threshold():
    m = make(polls=2)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0))
    assert m.elephants() == []
    poll(m, 1, 1, (KEY, mb(5, 2), 2.0))
    assert [e.key for e in m.elephants()] == [KEY]


def test_dip_below_threshold_resets_the_streak():
    m = make(polls=2)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0))
    poll(m, 1, 1, (KEY, mb(5, 1) + mb(0.5, 1), 2.0))
    poll(m, 1, 2, (KEY, mb(5, 1) + mb(0.5, 1) + mb(5, 1), 3.0))
    assert m.elephants() == []


def test_two_transport_flows_between_the_same_hosts_are_two_elephants():
    m = make(polls=1)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0), (KEY2, mb(5, 1), 1.0))
    assert {e.key for e in m.elephants()} == {KEY, KEY2}


def test_pattern_memory_keeps_an_idle_elephant_then_forgets_it():
    m = make(polls=1, memory=10)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0))
    poll(m, 1, 5, (KEY, mb(5, 1), 6.0))  # compute phase: no bytes
    assert [e.key for e in m.elephants()] == [KEY] and m.flows[KEY].streak == 0
    assert m.expire(8) == [] and [e.key for e in m.elephants()] == [KEY]
    poll(m, 1, 10.5, (KEY, mb(5, 1), 11.0))  # still idle, rule still there: past the memory it is forgotten
    assert m.expire(11) == [KEY] and m.elephants() == []


def test_an_elephant_whose_rule_expired_stops_counting_within_one_poll():
    # issue 12: finished flows were kept for the pattern memory (30 s) and routed as if live
    m = make(polls=1, memory=30)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0), (KEY2, mb(5, 1), 1.0))
    poll(m, 1, 2, (KEY2, mb(5, 3), 3.0))  # KEY's counting rule idled out on the switch: absent from the poll
    assert [e.key for e in m.elephants()] == [KEY2]


def test_a_removed_flow_stops_counting_at_once():
    m = make(polls=1, memory=30)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0), (KEY2, mb(5, 1), 1.0))
    assert m.forget(KEY) and not m.forget(KEY)  # flow-removed for KEY
    assert [e.key for e in m.elephants()] == [KEY2]
    poll(m, 1, 2, (KEY2, mb(5, 3), 3.0))
    assert [e.key for e in m.elephants()] == [KEY2]  # the switch index does not bring it back


def test_an_ended_job_leaves_pattern_memory():
    other = FlowKey("10.0.0.2", "10.0.0.6", 6, 1, 2)
    m = make(polls=1, memory=30)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0), (KEY2, mb(5, 1), 1.0), (other, mb(5, 1), 1.0))
    poll(m, 1, 2, (KEY, mb(5, 1), 3.0), (KEY2, mb(5, 1), 3.0), (other, mb(5, 3), 3.0))  # KEY, KEY2 idle
    assert sorted(m.job_ended(["10.0.0.1"])) == [KEY, KEY2]
    assert [e.key for e in m.elephants()] == [other]


def test_recreated_rule_is_measured_over_its_own_lifetime():
    m = make(polls=1)
    poll(m, 1, 0, (KEY, mb(5, 10), 10.0))
    poll(m, 1, 2, (KEY, mb(4, 2), 2.0))  # counters went backwards: a new rule for the same 5-tuple
    assert m.flows[KEY].rate_bps == pytest.approx(4 * MBPS)


def test_mice_are_forgotten_when_their_rule_expires():
    m = make()
    poll(m, 1, 0, (KEY, 1000, 1.0))
    poll(m, 1, 2)
    assert KEY not in m.flows


def test_a_poll_of_one_switch_does_not_touch_flows_of_another():
    m = make(polls=1)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0))
    poll(m, 2, 1)
    assert m.flows[KEY].rate_bps > 0


def test_multipart_replies_are_reassembled_per_switch_and_request():
    a = StatsAssembler()
    assert a.feed(1, 7, ["a"], more=True) is None
    assert a.feed(2, 9, ["x"], more=False) == ["x"]
    assert a.feed(1, 7, ["b"], more=False) == ["a", "b"]


@pytest.mark.parametrize("fields, counters", [
    ({"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2", "ip_proto": 6, "tcp_src": 1}, (10, 1, 0)),  # no tcp_dst
    ({"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2", "ip_proto": 1}, (10, 1, 0)),  # ICMP: not ours
    ({"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2", "ip_proto": 17, "udp_src": 1, "udp_dst": 2}, (-5, 1, 0)),
    ({"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2", "ip_proto": 6, "tcp_src": 1, "tcp_dst": 2}, ("x", 1, 0)),
])
def test_malformed_stats_entries_are_rejected_clearly(fields, counters):
    with pytest.raises(MalformedStatsError, match="switch 3"):
        sample_from_stat(3, fields, *counters)


def test_udp_entries_become_samples():
    s = sample_from_stat(3, {"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2", "ip_proto": 17, "udp_src": 9,
                             "udp_dst": 10}, 100, 2, 500_000_000)
    assert s.key == FlowKey("10.0.0.1", "10.0.0.2", 17, 9, 10) and s.duration_s == 2.5


def test_elephants_come_in_flow_key_order_and_mice_are_left_out():
    import random

    rng = random.Random(2)

    def ip():
        return f"10.0.{rng.randrange(3)}.{rng.randrange(1, 9)}"
    keys = list({FlowKey(ip(), ip(), rng.choice([6, 17]), rng.randrange(40000, 40004), rng.randrange(5201, 5203))
                 for _ in range(400)})
    rng.shuffle(keys)
    m = make(polls=1)
    poll(m, 1, 0, *[(k, mb(5 if i % 3 else 0.1, 1), 1.0) for i, k in enumerate(keys)])
    elephants = [k for i, k in enumerate(keys) if i % 3]
    assert [e.key for e in m.elephants()] == sorted(elephants)  # FlowKey's own ordering


def test_a_switch_handed_to_samples_keeps_its_flows_fed_by_samples_only():
    m = make(polls=1)
    poll(m, 1, 0, (KEY, mb(5, 1), 1.0), (KEY2, mb(0.1, 1), 1.0))
    poll(m, 2, 0, (FlowKey("10.0.0.9", "10.0.0.5", 6, 1, 2), mb(5, 1), 1.0))
    assert sorted(m.hand_to_samples(1)) == sorted([KEY, KEY2])
    assert m.flows[KEY].elephant and m.flows[KEY].sampled
    poll(m, 1, 1, (KEY, mb(0.1, 2), 2.0))  # a poll in flight at the move: ignored, and missing flows not ended
    assert m.flows[KEY].rate_bps == 5 * MBPS and KEY2 in m.flows
    m.sampled({KEY: (1, 6 * MBPS, True)}, 2)
    assert m.flows[KEY].rate_bps == 6 * MBPS and KEY2 not in m.flows  # silent in samples: a mouse leaves


def test_a_switch_handed_back_to_stats_keeps_its_elephants_until_a_poll_shows_their_rules():
    m = make(polls=1)
    m.sampled({KEY: (1, 6 * MBPS, True), KEY2: (1, 0.2 * MBPS, False)}, 0)
    assert m.hand_to_stats(1) == [KEY]
    assert KEY2 not in m.flows and not m.flows[KEY].sampled and m.flows[KEY].elephant
    poll(m, 1, 1)  # its counting rule not in yet: not ended
    m.sampled({KEY: (1, 9 * MBPS, True)}, 1)  # nor fed by samples any more
    assert m.flows[KEY].elephant and m.flows[KEY].rate_bps == 6 * MBPS
    poll(m, 1, 2, (KEY, mb(4, 2), 2.0))  # the rule's lifetime so far
    assert m.flows[KEY].rate_bps == pytest.approx(4 * MBPS)
    poll(m, 1, 3)  # its rule gone: the flow ended
    assert KEY not in m.flows
