import pytest

from controller.southbound.sflow.agents import AgentMap
from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.decoder import decode
from controller.southbound.sflow.ingest import SflowIngest
from controller.state.flowkey import FlowKey
from controller.state.sflow_rates import SampleRates
from tests import sflow_datagrams as enc

# two bridges of one Open vSwitch: s1 (sub-agent 0) ports 1 (host, ifindex 8) and 2 (fabric, ifindex 6);
# s2 (sub-agent 1) ports 1 (fabric, ifindex 5) and 2 (host, ifindex 7)
ACCESS = {(0xA1, 1), (0xA2, 2)}
KEY = FlowKey("10.0.0.1", "10.0.0.2", 17, 41000, 5301)


def ingest():
    agents = AgentMap()
    for ifindex, dpid, port in ((8, 0xA1, 1), (6, 0xA1, 2), (5, 0xA2, 1), (7, 0xA2, 2)):
        agents.add("127.0.0.1", ifindex, dpid, port)
    return SflowIngest(agents, SampleRates(threshold_bps=5e5, windows_needed=1), CounterRates(),
                       lambda dpid, port: (dpid, port) in ACCESS)


def flows(sub_agent, input_value, first, n, frame=None, rate=8):
    frame = frame or enc.ethernet_frame(proto=17, src_port=41000, dst_port=5301, payload=1000)
    samples = [enc.flow_sample([enc.header_record(frame), enc.switch_record()], sequence=first + i, source_type=2,
                               source_index=1000 + sub_agent, sampling_rate=rate, input_value=input_value)
               for i in range(n)]
    return decode(enc.datagram(samples, agent="127.0.0.1", sub_agent=sub_agent))


def test_counted_once_at_the_ingress_edge():
    ing = ingest()
    ing.feed(0.1, flows(0, 8, 1, 10))  # s1 saw it arrive from the host
    ing.feed(0.2, flows(1, 5, 1, 9))  # s2 saw it arrive from the fabric: the same packets again
    ing.rates.advance(1.0)
    r = ing.rates.flow_rate(KEY)
    assert r.samples == 10 and r.bps == pytest.approx(8 * 10 * 8 * (14 + 20 + 8 + 1000))  # FCS not counted
    assert ing.ingress_of(KEY) == (0xA1, 1)
    assert ing.skipped["not_ingress"] == 9 and ing.counted == 10
    assert [e.key for e in ing.rates.elephants()] == [KEY]


def test_replays_unknown_interfaces_and_non_transport_skipped():
    ing = ingest()
    ing.feed(0.1, flows(0, 8, 1, 5))
    ing.feed(0.2, flows(0, 8, 1, 5))  # the same datagram again
    ing.feed(0.3, flows(0, 99, 6, 2))  # an interface not in the map
    ing.feed(0.4, flows(0, 8, 8, 3, frame=enc.ethernet_frame(ethertype=0x0806)))
    s = ing.stats()
    assert (s["flow_samples_counted"], s["flow_samples_replayed"], s["flow_samples_unknown_interface"],
            s["flow_samples_not_transport"]) == (5, 5, 2, 3)
    assert s["samples"] == 5


def test_a_forged_stripped_count_adds_no_negative_bytes():
    ing = ingest()
    frame = enc.ethernet_frame(proto=17, src_port=41000, dst_port=5301, payload=1000)
    record = enc.record(1, enc.u32(1) + enc.u32(100) + enc.u32(5000) + enc.opaque(frame[:128]))  # stripped > length
    forged = enc.flow_sample([record], sampling_rate=8, input_value=8)
    ing.feed(0.1, decode(enc.datagram([forged], agent="127.0.0.1")))
    ing.rates.advance(1.0)
    assert ing.rates.flow_rate(KEY).bps == 0 and ing.counted == 1


def test_counter_samples_feed_port_rates():
    ing = ingest()
    for uptime, octets, seq in ((1_000, 0, 1), (2_000, 1_250_000, 2)):
        sample = enc.counter_sample([enc.if_counters_record(if_index=6, out_octets=octets)], sequence=seq,
                                    source_index=6)
        ing.feed(uptime / 1000, decode(enc.datagram([sample], agent="127.0.0.1", uptime_ms=uptime)))
    assert ing.counters.rate(0xA1, 2).tx_bps == 10e6
    unknown = enc.counter_sample([enc.if_counters_record(if_index=42)], source_index=42)
    ing.feed(3.0, decode(enc.datagram([unknown], agent="127.0.0.1")))
    assert ing.stats()["counter_samples_counted"] == 2 and ing.stats()["counter_samples_unmapped"] == 1


def test_each_switch_heard_by_its_mapped_samples_flow_or_counter():
    ing = ingest()
    ing.feed(0.1, flows(0, 8, 1, 2))  # s1, at its host port
    ing.feed(0.2, flows(1, 5, 1, 1))  # s2, at its fabric port: not counted, but heard
    ing.feed(0.3, flows(0, 99, 3, 1))  # an interface not in the map: nobody
    assert ing.heard == {0xA1: 0.1, 0xA2: 0.2}
    sample = enc.counter_sample([enc.if_counters_record(if_index=6)], sequence=1, source_index=6)
    ing.feed(4.0, decode(enc.datagram([sample], agent="127.0.0.1", uptime_ms=4000)))  # an idle s1's counters
    assert ing.heard == {0xA1: 4.0, 0xA2: 0.2}
