"""SflowDetection: completed windows become the monitor's input (rate over te.elephant_polls windows, judged
above the threshold by one standard error), host pairs busy as a whole, counters' growth onto metrics."""

from controller import config
from controller.southbound.sflow.decoder import decode
from controller.southbound.sflow.detection import SflowDetection
from controller.state.flowkey import FlowKey
from controller.state.jobs import HostPair
from controller.state.sflow_rates import RateEstimate, above
from controller.web.metrics import Metrics
from tests import topologies
from tests.sflow_datagrams import datagram, ethernet_frame, flow_sample, header_record

AGENT = "127.0.0.1"


def detection(pairs=True):
    topo = topologies.fat_tree(4)
    cfg = dict(config.DEFAULTS["sflow"], pairs=pairs)
    det = SflowDetection(cfg, threshold_bps=1e6, windows_needed=2, topology=topo, metrics=Metrics())
    host = topo.hosts["10.0.0.1"]
    det.agents.add(AGENT, 7, host.dpid, host.port)
    return det, host


def feed(det, now, key, samples, seq, rate=64, payload=1400):
    frame = ethernet_frame(src_ip=key.src_ip, dst_ip=key.dst_ip, src_port=key.src_port, dst_port=key.dst_port,
                           payload=payload)
    records = [flow_sample([header_record(frame, stripped=0)], sequence=seq + i, source_type=2, source_index=1000,
                           sampling_rate=rate, input_value=7) for i in range(samples)]
    det.feed(now, decode(datagram(records, agent=AGENT, sequence=seq)))
    return seq + samples


def test_a_window_is_reported_once_with_ingress_and_judgement():
    det, host = detection()
    key = FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201)
    seq = feed(det, 0.1, key, 10, 1)  # 10 x 64 x 1454 B in the first window: 7.4 Mb/s
    assert det.tick(0.5) is None  # nothing completed yet
    first = det.tick(1.0)
    assert first[key][:2] == (host.dpid, host.port) and first[key][3] is None  # tracked one window only
    assert det.tick(1.2) is None  # the same window is not reported twice
    feed(det, 1.1, key, 10, seq)
    second = det.tick(2.0)
    assert second[key][3] is True and abs(second[key][2] - 8 * 20 * 64 * 1454 / 2) < 1


def test_one_sample_is_no_elephant_however_large_it_stands():
    one = RateEstimate(bps=4.6e6, pps=64, samples=1, seconds=2, rel_error=1.0)
    assert not above(one, 1e6)
    assert above(RateEstimate(bps=4.6e6, pps=128, samples=2, seconds=2, rel_error=2 ** -0.5), 1e6)
    assert not above(RateEstimate(bps=0.0, pps=0, samples=0, seconds=2, rel_error=float("inf")), 1e6)


def test_a_busy_pair_without_an_elephant_flow_is_a_pair_demand():
    det, _ = detection()
    seq = 1
    for w in range(2):
        det.tick(w)  # (the core ticks a few times a window)
        for i in range(10):  # 10 connections of 2 samples a window each: 1.5 Mb/s apiece, 15 Mb/s in all
            seq = feed(det, w + 0.1, FlowKey("10.0.0.1", "10.0.0.9", 17, 9000 + i, 53), 2, seq)
    det.tick(2.0)
    assert det.elephant_pairs([]) == [HostPair("10.0.0.1", "10.0.0.9")]
    assert det.elephant_pairs([FlowKey("10.0.0.1", "10.0.0.9", 17, 9000, 53)]) == []  # covered by a flow
    off, _ = detection(pairs=False)
    assert off.elephant_pairs([]) == []


def test_counters_growth_is_published_once():
    det, host = detection()
    seen = []
    det.publish({"received": 3, "dropped_version": 1}, on=lambda *a: seen.append(a))
    det.publish({"received": 5, "dropped_version": 1}, on=lambda *a: seen.append(a))
    assert ("datagrams", "received", 3) in seen and ("datagrams", "received", 2) in seen
    assert seen.count(("datagrams", "dropped_version", 1)) == 1


def test_a_storm_between_two_hosts_is_a_pair_demand_within_the_window_in_progress():
    det, _ = detection()
    det.tick(0.0)
    seq = 1
    for i in range(12):  # 12 new connections of 2 samples each within 0.2 s: 2.2 MB, the 2 windows ask 0.25 MB
        seq = feed(det, 0.01 * i, FlowKey("10.0.0.1", "10.0.0.5", 17, 1024 + i, 9), 2, seq)
    assert det.tick(0.25) is None and det.pairs_added  # no window completed, the pair judged already
    assert det.elephant_pairs([]) == [HostPair("10.0.0.1", "10.0.0.5")]
    assert det.tick(0.5) is None and not det.pairs_added  # said once
    first = det.tick(1.0)  # the window completes: the pair stays one, not new again; each 5-tuple is a mouse
    assert not det.pairs_added and all(judged is None for *_, judged in first.values())
    assert det.elephant_pairs([]) == [HostPair("10.0.0.1", "10.0.0.5")]


def test_no_early_pairs_when_pairs_are_off():
    det, _ = detection(pairs=False)
    det.tick(0.0)
    feed(det, 0.1, FlowKey("10.0.0.1", "10.0.0.5", 17, 1024, 9), 40, 1)
    assert det.tick(0.25) is None and not det.pairs_added and det.elephant_pairs([]) == []


def test_a_short_connection_sampled_twice_in_one_window_is_no_elephant():
    """Live (test_detection_auto): a 20-kB connection's two 9,000-byte frames sampled at 1-in-64 within 16 ms
    stood for 4.6 Mb/s over two windows and was pinned. A stream sampled as sparsely, but in both windows, is
    one."""
    det, _ = detection()
    mouse = FlowKey("10.0.0.1", "10.0.0.5", 6, 55386, 7000)
    stream = FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201)
    seq = feed(det, 0.2, mouse, 2, 1, payload=8948)
    seq = feed(det, 0.3, stream, 1, seq, payload=8948)
    det.tick(0.0)
    assert det.tick(1.0)[mouse][3] is None  # tracked one window
    seq = feed(det, 1.4, stream, 1, seq, payload=8948)
    second = det.tick(2.0)
    assert second[mouse][2] > 4e6 and second[mouse][3] is not True  # as large, but it never lasted
    assert second[stream][3] is True
    assert det.tick(3.0)[mouse][3] is not True
