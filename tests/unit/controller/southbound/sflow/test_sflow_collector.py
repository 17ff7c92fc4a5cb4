import random
import socket
import threading

import pytest

from controller.southbound.sflow.agents import AgentMap
from controller.southbound.sflow.collector import SflowCollector
from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.ingest import SflowIngest
from controller.state.sflow_rates import SampleRates
from tests import sflow_datagrams as enc


@pytest.fixture
def sender():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield s
    s.close()


def make(agents=None, callback=None):
    got = []
    collector = SflowCollector(callback or (lambda d, peer: got.append((d, peer))), port=0, agents=agents)
    return collector, got


def test_datagrams_over_a_localhost_socket(sender):
    collector, got = make()
    try:
        sender.sendto(enc.ovs_flow_datagram(5, sequence=9), collector.address)
        assert collector.receive_once(timeout=5)
        (d, peer), = got
        assert d.sequence == 9 and len(d.flow_samples) == 5 and peer == ("127.0.0.1", sender.getsockname()[1])
        assert collector.address[0] == "127.0.0.1"
        assert not collector.receive_once(timeout=0.05)  # nothing more
        assert collector.stats() == {"received": 1, "decoded": 1, "flow_samples": 5, "counter_samples": 0,
                                     "callback_errors": 0}
    finally:
        collector.close()


def test_bad_datagrams_dropped_by_reason(sender):
    collector, got = make()
    try:
        for data in (b"garbage", enc.datagram([], version=2), enc.ovs_flow_datagram(2)[:-8], enc.ovs_flow_datagram(1)):
            sender.sendto(data, collector.address)
        for _ in range(4):
            assert collector.receive_once(timeout=5)
        assert len(got) == 1 and collector.decoded == 1 and collector.received == 4
        assert collector.dropped == {"truncated": 1, "version": 1, "length": 1}
        assert collector.stats()["dropped_version"] == 1
    finally:
        collector.close()


def test_unknown_agent_dropped_until_its_counters_teach_the_map(sender):
    agents = AgentMap()
    collector, got = make(agents)
    try:
        sender.sendto(enc.ovs_flow_datagram(1, agent="127.0.0.1"), collector.address)
        counters = enc.counter_sample([enc.if_counters_record(if_index=7), enc.openflow_port_record(0xA1, 1)])
        sender.sendto(enc.datagram([counters], agent="127.0.0.1"), collector.address)
        sender.sendto(enc.ovs_flow_datagram(1, agent="127.0.0.1"), collector.address)
        sender.sendto(enc.ovs_flow_datagram(1, agent="10.9.9.9"), collector.address)
        for _ in range(4):
            assert collector.receive_once(timeout=5)
        assert collector.dropped == {"unknown_agent": 2} and len(got) == 2
        d, _ = got[1]
        assert agents.input_port(d, d.flow_samples[0]) == (0xA1, 1)
    finally:
        collector.close()


def test_a_failing_callback_is_counted_and_serve_goes_on(sender):
    seen = []

    def callback(d, peer):
        seen.append(d.sequence)
        if d.sequence == 1:
            raise RuntimeError("bug in the consumer")

    collector, _ = make(callback=callback)
    stop = threading.Event()
    thread = threading.Thread(target=collector.serve, args=(stop, 0.05))
    thread.start()
    try:
        sender.sendto(enc.ovs_flow_datagram(1, sequence=1), collector.address)
        sender.sendto(enc.ovs_flow_datagram(1, sequence=2), collector.address)
        for _ in range(200):
            if len(seen) == 2:
                break
            stop.wait(0.02)
        assert seen == [1, 2] and collector.callback_errors == 1 and collector.decoded == 2
    finally:
        stop.set()
        thread.join(timeout=5)
        collector.close()
    assert not thread.is_alive()


def test_ipv6_localhost():
    try:
        collector = SflowCollector(lambda d, peer: None, host="::1", port=0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        s.sendto(enc.ovs_flow_datagram(1), collector.address)
        assert collector.receive_once(timeout=5) and collector.decoded == 1
    finally:
        s.close()
        collector.close()


def test_mutated_datagrams_through_the_whole_path_are_counted_never_raised():
    """Random and mutated datagrams through handle -> learn -> SflowIngest: every one is decoded or dropped by a
    reason, and the consumer never raises."""
    agents = AgentMap()
    ingest = SflowIngest(agents, SampleRates(threshold_bps=1e6, max_flows=64, max_pairs=16), CounterRates(),
                         lambda dpid, port: True)
    clock = [0.0]

    def feed(d, peer):
        clock[0] += 0.01
        ingest.feed(clock[0], d)

    collector = SflowCollector(feed, port=0, agents=agents)
    rng = random.Random(21)
    counters = enc.datagram([enc.counter_sample([enc.if_counters_record(if_index=5),
                                                 enc.openflow_port_record(1, 1)], source_index=5)],
                            agent="127.0.0.1")
    seeds = [enc.ovs_flow_datagram(5, agent="127.0.0.1"), counters]
    try:
        collector.handle(counters, ("127.0.0.1", 1))
        for _ in range(3000):
            collector.handle(enc.mutate(rng, rng.choice(seeds)), ("127.0.0.1", 1))
    finally:
        collector.close()
    assert collector.callback_errors == 0
    assert collector.received == collector.decoded + sum(collector.dropped.values()) == 3001
    assert collector.decoded > 100 and len(collector.dropped) >= 3
