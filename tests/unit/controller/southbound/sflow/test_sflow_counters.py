import pytest

from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.decoder import decode
from controller.state.linkstats import links_json
from controller.state.topology import Topology
from tests import sflow_datagrams as enc


def counters(in_octets, out_octets, speed=10_000_000, status=3):
    sample = enc.counter_sample([enc.if_counters_record(in_octets=in_octets, out_octets=out_octets, if_speed=speed,
                                                        if_status=status)])
    return decode(enc.datagram([sample])).counter_samples[0].interface


def test_rates_from_successive_samples_on_the_agent_clock():
    rates = CounterRates()
    first = rates.counter_sample(1, 2, 10_000, counters(1_000, 5_000))
    assert not first.measured and rates.utilisation(1, 2) is None
    r = rates.counter_sample(1, 2, 12_000, counters(1_000 + 250_000, 5_000 + 500_000))
    assert r.measured and (r.rx_bps, r.tx_bps) == (1e6, 2e6)
    assert rates.utilisation(1, 2) == pytest.approx(0.2)  # of the reported 10 Mb/s
    assert rates.utilisation(1, 2, capacity_bps=4e6) == pytest.approx(0.5)
    assert rates.speed_bps(1, 2) == 10_000_000 and rates.oper_up(1, 2) is True


def test_other_ports_are_kept_and_resets_rebaseline():
    rates = CounterRates()
    rates.counter_sample(1, 1, 1_000, counters(0, 0))
    rates.counter_sample(1, 2, 1_000, counters(0, 0))
    rates.counter_sample(1, 1, 2_000, counters(125_000, 0))
    assert rates.rate(1, 2) is not None and rates.rate(1, 1).rx_bps == 1e6
    again = rates.counter_sample(1, 1, 2_000, counters(125_000, 0))  # the same reading again
    assert again.rx_bps == 1e6
    restarted = rates.counter_sample(1, 1, 500, counters(10, 0, status=1))  # agent restarted
    assert not restarted.measured and rates.oper_up(1, 1) is False
    rates.forget(1)
    assert rates.rate(1, 2) is None and rates.speed_bps(1, 2) is None


def test_the_link_view_reads_it_as_port_stats():
    topo = Topology()
    topo.add_switch(1, [3])
    topo.add_switch(2, [4])
    topo.add_link(1, 3, 2, 4)
    topo.add_link(2, 4, 1, 3)  # admitted once both directions are claimed
    rates = CounterRates()
    for uptime, octets in ((1_000, 0), (2_000, 625_000)):
        rates.counter_sample(1, 3, uptime, counters(0, octets))
        rates.counter_sample(2, 4, uptime, counters(octets, 0))
    (link,) = [x for x in links_json(topo, rates, {}, capacity_bps=10e6) if x["src"] == 1]
    assert (link["tx_bps"], link["rx_bps"], link["utilisation"]) == (5e6, 5e6, 0.5)
