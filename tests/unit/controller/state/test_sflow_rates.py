import math

import numpy as np
import pytest

from controller.state.flowkey import FlowKey
from controller.state.sflow_rates import SampleRates


def key(src_port=40000, src="10.0.0.1", dst="10.0.0.2"):
    return FlowKey(src, dst, 6, src_port, 5201)


def feed(rates, t0, k, samples, frame_bytes=1000, sampling_rate=10, span=1.0):
    """``samples`` samples of ``k`` spread over ``span`` seconds from ``t0``."""
    for i in range(samples):
        rates.add(t0 + span * i / (samples + 1), k, frame_bytes, sampling_rate)


def test_rate_and_error_of_one_window():
    rates = SampleRates(threshold_bps=1e9)
    feed(rates, 0.0, key(), 100)
    assert rates.flow_rate(key()).samples == 0  # the window in progress is not reported
    rates.advance(1.0)
    r = rates.flow_rate(key())
    assert (r.bps, r.pps, r.samples, r.seconds) == (8e6, 1000, 100, 1.0)
    assert r.rel_error == pytest.approx(0.1)  # 1/sqrt(100) for one size and one rate
    assert r.interval95() == pytest.approx((8e6 * (1 - 0.196), 8e6 * (1 + 0.196)))
    assert rates.pair_rate(("10.0.0.1", "10.0.0.2")).bps == 8e6
    assert rates.flow_rate(key(1)) is None


def test_sliding_windows_keep_the_last_n():
    rates = SampleRates(threshold_bps=1e9, window_s=0.5, windows=3)
    for w, n in enumerate([10, 20, 30, 40]):
        feed(rates, w * 0.5, key(), n, span=0.5)
    rates.advance(2.0)
    r = rates.flow_rate(key())  # windows 2..4: 20 + 30 + 40 samples of 10,000 bytes in 1.5 s
    assert r.samples == 90 and r.seconds == 1.5 and r.bps == pytest.approx(8 * 90 * 10_000 / 1.5)
    assert rates.flow_rate(key(), windows=1).samples == 40


def test_elephant_needs_consecutive_windows_and_stays_while_quiet():
    threshold = 8e6  # 100 samples of 1000 B at 1-in-10 per 1 s window
    rates = SampleRates(threshold_bps=threshold, windows=4, windows_needed=2, idle_windows=3)
    feed(rates, 0.0, key(), 100)
    feed(rates, 1.0, key(), 99)  # just below: the streak starts again
    feed(rates, 2.0, key(), 100)
    rates.advance(3.0)
    assert rates.elephants() == []
    feed(rates, 3.0, key(), 120)
    rates.advance(4.0)
    (e,) = rates.elephants()
    assert e.key == key() and e.streak == 2 and e.rate.bps == pytest.approx(8 * 220 * 10_000 / 2)
    rates.advance(6.5)  # two quiet windows: still an elephant (pattern memory is the caller's business)
    assert [x.streak for x in rates.elephants()] == [0]
    rates.advance(7.0)  # third idle window: forgotten
    assert rates.elephants() == [] and rates.flow_rate(key()) is None
    assert rates.stats()["flows_expired"] == 1


def test_host_pair_of_many_mice_is_one_elephant():
    rates = SampleRates(threshold_bps=8e6, windows_needed=2)
    for w in range(2):
        for port in range(50):
            feed(rates, w + port / 100, key(port), 4, span=0.5)  # 200 samples per window between the two hosts
    rates.advance(2.0)
    assert rates.elephants() == []
    (pair,) = rates.elephant_pairs()
    assert pair.key == ("10.0.0.1", "10.0.0.2") and pair.rate.samples == 400
    assert pair.rate.bps == pytest.approx(8 * 200 * 10_000)


def test_gap_of_several_windows_resets_the_streak():
    rates = SampleRates(threshold_bps=8e6, windows_needed=2, idle_windows=10)
    feed(rates, 0.0, key(), 100)
    feed(rates, 3.0, key(), 100)  # windows 1 and 2 empty
    rates.advance(4.0)
    assert rates.elephants() == []
    assert rates.flow_rate(key(), windows=3).samples == 100


def test_memory_bound_keeps_the_big_flows():
    rates = SampleRates(threshold_bps=1e9, max_flows=64, max_pairs=64)
    feed(rates, 0.0, key(1), 50)
    for port in range(2, 2000):  # a storm of one-sample 5-tuples from other hosts
        rates.add(0.5, FlowKey(f"10.1.{port // 250}.{port % 250}", "10.0.0.9", 17, port, 53), 64, 10)
    assert len(rates.flows.tracks) <= 64 and len(rates.pairs.tracks) <= 64
    rates.advance(1.0)
    assert rates.flow_rate(key(1)).samples == 50
    assert rates.pair_rate(("10.0.0.1", "10.0.0.2")).samples == 50
    assert rates.stats()["flows_evicted"] > 1900


def test_clock_going_back_counts_into_the_current_window():
    rates = SampleRates(threshold_bps=1e9)
    rates.add(5.2, key(), 1000, 10)
    rates.add(4.0, key(), 1000, 10)
    rates.advance(6.0)
    assert rates.flow_rate(key()).samples == 2


def test_bad_configuration_refused():
    with pytest.raises(ValueError):
        SampleRates(threshold_bps=1, windows=2, windows_needed=3)
    with pytest.raises(ValueError):
        SampleRates(threshold_bps=1, window_s=0)


def coverage(rel_error_of, trials=1500, packets=3000, sampling_rate=32, seed=7):
    """Fraction of seeded trials whose 95 % interval (from ``rel_error_of(estimate)``) holds the true rate: a flow
    of ``packets`` packets in one window, 40 % of 64 bytes and 60 % of 1,500, each sampled with p = 1/N."""
    rng = np.random.default_rng(seed)
    rates = SampleRates(threshold_bps=1e12, max_flows=trials + 1, max_pairs=4)
    truth = []
    for t in range(trials):
        sizes = np.where(rng.random(packets) < 0.4, 64, 1500)
        truth.append(8 * int(sizes.sum()))
        for b in sizes[rng.random(packets) < 1 / sampling_rate]:
            rates.add(0.5, key(t), int(b), sampling_rate)
    rates.advance(1.0)
    inside = 0
    for t in range(trials):
        r = rates.flow_rate(key(t))
        half = 1.96 * rel_error_of(r) * r.bps
        inside += r.bps - half <= truth[t] <= r.bps + half
    return inside / trials


def test_error_bound_covers_the_true_rate_95_percent_of_trials():
    assert 0.93 <= coverage(lambda r: r.rel_error) <= 0.975
    # the bare binomial 1/sqrt(n) understates the error of mixed packet sizes: the stated formula is needed
    assert coverage(lambda r: 1 / math.sqrt(r.samples)) < 0.91


def test_a_pair_that_sent_the_whole_windows_worth_is_heavy_within_the_window_in_progress():
    rates = SampleRates(threshold_bps=8e6, windows_needed=2)  # the rule asks 2 x 1 MB
    rates.advance(0.0)
    for port in range(40):  # a storm of new connections: 40 x 6 samples x 10 kB = 2.4 MB within 0.5 s
        feed(rates, 0.01 * port, key(port), 6, frame_bytes=1000, sampling_rate=10, span=0.1)
    assert rates.heavy_in_progress(pairs=True) == [("10.0.0.1", "10.0.0.2")]
    assert rates.heavy_in_progress() == []  # no 5-tuple of it sent that much
    assert rates.elephant_pairs() == []  # the window rule still waits for its windows


def test_what_only_nears_the_whole_windows_worth_waits_for_them():
    rates = SampleRates(threshold_bps=8e6, windows_needed=2)
    rates.advance(0.0)
    feed(rates, 0.0, key(), 190, span=0.9)  # 1.9 MB: short of 2 MB
    assert rates.heavy_in_progress(pairs=True) == []
    feed(rates, 0.9, key(), 20, span=0.05)  # 2.1 MB, but one standard error (sqrt(210) x 10 kB) takes it below
    assert rates.heavy_in_progress(pairs=True) == []
    feed(rates, 0.95, key(), 20, span=0.04)  # 2.3 MB less 0.152 MB
    assert rates.heavy_in_progress(pairs=True) == [("10.0.0.1", "10.0.0.2")]
    assert rates.heavy_in_progress() == [key()]
    one = SampleRates(threshold_bps=8e3, windows_needed=1)
    feed(one, 0.0, key(), 1, frame_bytes=9000, sampling_rate=1024)  # one sample stands for 9.2 MB: never enough
    assert one.heavy_in_progress(pairs=True) == []
