from types import SimpleNamespace

import pytest

from controller.state.flowkey import FlowKey
from controller.state.linkstats import (
    DURATION_UNKNOWN,
    LinkLoad,
    PortRates,
    PortSample,
    elephants_per_link,
    links_json,
    sample_from_port_stat,
    samples_from_reply,
)
from controller.state.monitor import MalformedStatsError
from controller.web.metrics import Metrics
from tests.topologies import fat_tree, leaf_spine

MBPS = 1e6


def mb(mbps, seconds):
    return int(mbps * MBPS * seconds / 8)


def poll(rates, dpid, now, *ports):
    """ports: (port, tx bytes, rx bytes, duration s) as the switch reports them."""
    rates.update(dpid, [PortSample(dpid, p, tx, rx, d) for p, tx, rx, d in ports], now)


def stat(port_no, tx=0, rx=0, sec=1, nsec=0):
    return SimpleNamespace(port_no=port_no, tx_bytes=tx, rx_bytes=rx, duration_sec=sec, duration_nsec=nsec)


def test_rates_use_the_switch_durations_not_the_poll_clock():
    r = PortRates()
    poll(r, 1, 100.0, (1, mb(4, 10), mb(2, 10), 10.0))
    poll(r, 1, 109.0, (1, mb(4, 10) + mb(8, 2), mb(2, 10) + mb(3, 2), 12.0))  # 9 s later by our clock, 2 s by its
    p = r.rate(1, 1)
    assert p.measured and p.tx_bps == pytest.approx(8 * MBPS) and p.rx_bps == pytest.approx(3 * MBPS)


def test_first_poll_gives_no_rate_and_a_repeated_snapshot_changes_nothing():
    r = PortRates()
    poll(r, 1, 0.0, (1, mb(5, 4), 0, 4.0))
    assert not r.rate(1, 1).measured
    poll(r, 1, 1.0, (1, mb(5, 6), 0, 6.0))
    poll(r, 1, 2.0, (1, mb(5, 6), 0, 6.0))
    assert r.rate(1, 1).tx_bps == pytest.approx(5 * MBPS)


def test_switch_without_port_durations_falls_back_to_the_controller_clock():
    assert sample_from_port_stat(1, 2, 10, 20, DURATION_UNKNOWN, DURATION_UNKNOWN).duration_s is None
    r = PortRates()
    poll(r, 1, 50.0, (1, 0, 0, None))
    poll(r, 1, 52.0, (1, mb(6, 2), 0, None))
    assert r.rate(1, 1).tx_bps == pytest.approx(6 * MBPS)


@pytest.mark.parametrize("second", [
    (1, 100, 100, 1.0),  # the port was re-created: duration went back
    (1, 10, 10, 12.0),  # counters cleared while the port lived on
])
def test_counter_reset_starts_a_new_baseline_instead_of_a_negative_rate(second):
    r = PortRates()
    poll(r, 1, 0.0, (1, mb(8, 10), mb(8, 10), 10.0))
    poll(r, 1, 1.0, (1, mb(8, 11), mb(8, 11), 11.0))
    poll(r, 1, 2.0, second)
    p = r.rate(1, 1)
    assert not p.measured and p.tx_bps == 0.0 and p.rx_bps == 0.0
    poll(r, 1, 3.0, (1, second[1] + mb(2, 1), second[2], second[3] + 1))
    assert r.rate(1, 1).tx_bps == pytest.approx(2 * MBPS) and r.rate(1, 1).rx_bps == 0.0


def test_a_port_missing_from_a_reply_is_forgotten_and_other_switches_are_untouched():
    r = PortRates()
    poll(r, 1, 0.0, (1, 0, 0, 1.0), (2, 0, 0, 1.0))
    poll(r, 2, 0.0, (1, 0, 0, 1.0))
    poll(r, 1, 1.0, (1, 10, 10, 2.0))
    assert r.rate(1, 2) is None and r.rate(1, 1) is not None and r.rate(2, 1) is not None
    r.forget(2)
    assert r.rate(2, 1) is None and r.rate(1, 1) is not None


def test_reply_parsing_skips_reserved_ports_and_reports_malformed_entries():
    entries = [stat(1, 10, 20, 3, 500_000_000), stat(0xFFFFFFFE, 5, 5), stat(2, -1, 0), SimpleNamespace(port_no=3),
               stat(4, "x", 0)]
    samples, problems = samples_from_reply(7, entries)
    assert samples == [PortSample(7, 1, 10, 20, 3.5)]
    assert len(problems) == 3 and all("switch 7" in p for p in problems)
    with pytest.raises(MalformedStatsError, match="negative"):
        sample_from_port_stat(7, 1, 0, -5, 1, 0)


def _path_ports(topo, path):
    g = topo.graph()
    return [(a, g.edges[a, b]["ports"][a]) for a, b in zip(path, path[1:])]


def test_elephants_are_counted_on_each_directed_link_of_their_pinned_path():
    topo = fat_tree(4)
    up = (1000, 2000, 3001, 2200, 1200)
    other = (1001, 2000, 3001, 2300, 1300)
    back = tuple(reversed(up))
    pinned = {FlowKey("10.0.0.1", "10.0.0.9", 6, 1, 2): up, FlowKey("10.0.0.3", "10.0.0.13", 6, 1, 2): other,
              FlowKey("10.0.0.9", "10.0.0.1", 6, 3, 4): back}
    counts = elephants_per_link(pinned, topo.graph())
    shared = _path_ports(topo, up)[1]  # aggregation 2000 -> core 3001, used by two flows
    assert counts[shared] == 2
    assert counts[_path_ports(topo, up)[0]] == 1 and counts[_path_ports(topo, back)[0]] == 1
    assert sum(counts.values()) == 12  # 3 paths of 4 hops: the reverse direction is its own link


def test_a_pinned_hop_over_a_missing_link_is_not_counted():
    topo = leaf_spine(2, 2, 1)
    assert elephants_per_link({FlowKey("a", "b", 6, 1, 2): (101, 999)}, topo.graph()) == {}


def _measured(topo, loads_bps, dt=2.0):
    """PortRates after two polls where every fabric port sent/received ``loads_bps[(src, dst)]`` (0 if absent)."""
    rates = PortRates()
    per_switch = {}
    for step in (0, 1):
        per_switch.clear()
        for link in topo.links.values():
            bps = loads_bps.get((link.src, link.dst), 0.0)
            sent = int(step * bps * dt / 8)
            per_switch.setdefault(link.src, {}).setdefault(link.src_port, [0, 0])[0] = sent
            per_switch.setdefault(link.dst, {}).setdefault(link.dst_port, [0, 0])[1] = sent
        for dpid, ports in per_switch.items():
            poll(rates, dpid, step * dt, *[(p, tx, rx, 10 + step * dt) for p, (tx, rx) in ports.items()])
    return rates


def test_links_json_lists_every_directed_link_with_rates_utilisation_and_elephants():
    topo = leaf_spine(2, 2, 1)
    rates = _measured(topo, {(101, 201): 5 * MBPS, (201, 102): 20 * MBPS})
    pinned = {FlowKey("10.0.0.1", "10.0.0.2", 6, 1, 2): (101, 201, 102)}
    rows = links_json(topo, rates, pinned, capacity_bps=10 * MBPS)
    assert len(rows) == len(topo.links) == 8
    by = {(r["src"], r["dst"]): r for r in rows}
    assert set(rows[0]) == {"src", "dst", "src_port", "dst_port", "tx_bps", "rx_bps", "utilisation", "elephants",
                            "live"}
    assert by[101, 201]["tx_bps"] == pytest.approx(5 * MBPS) and by[101, 201]["rx_bps"] == pytest.approx(5 * MBPS)
    assert by[101, 201]["utilisation"] == pytest.approx(0.5)
    assert by[201, 102]["utilisation"] == 1.0  # clamped: the configured capacity was too low
    assert by[102, 201]["utilisation"] == 0.0 and by[102, 201]["elephants"] == 0
    assert by[101, 201]["elephants"] == 1 and by[201, 102]["elephants"] == 1
    assert all(r["live"] for r in rows)


def test_links_json_before_any_rate_and_with_a_dead_port():
    topo = leaf_spine(2, 2, 1)
    link = next(lnk for lnk in topo.links.values() if (lnk.src, lnk.dst) == (101, 201))
    topo.ports[201].discard(link.dst_port)  # the far end's port is down, the link record is still there
    rows = links_json(topo, PortRates(), {}, capacity_bps=1e7)
    assert all(r["tx_bps"] is None and r["utilisation"] is None for r in rows)
    assert [r["live"] for r in rows if (r["src"], r["dst"]) in ((101, 201), (201, 101))] == [False, False]
    with pytest.raises(ValueError, match="capacity"):
        links_json(topo, PortRates(), {}, capacity_bps=0)


def _series(metrics):
    return {tuple(s.labels[k] for k in ("src", "dst")): s.value for m in metrics.registry.collect()
            if m.name == "mlroute_link_utilisation" for s in m.samples}


def test_link_utilisation_gauge_has_one_series_per_directed_link_and_drops_vanished_links():
    topo = leaf_spine(2, 2, 1)
    metrics = Metrics()
    metrics.set_link_utilisation(links_json(topo, _measured(topo, {(101, 201): 4 * MBPS}), {}, 1e7))
    series = _series(metrics)
    assert len(series) == 8 and series[("101", "201")] == pytest.approx(0.4)
    topo.remove_switch(202)
    metrics.set_link_utilisation(links_json(topo, _measured(topo, {}), {}, 1e7))
    assert set(_series(metrics)) == {("101", "201"), ("201", "101"), ("102", "201"), ("201", "102")}
    assert b'mlroute_link_utilisation{dst="201",src="101"} 0.0' in metrics.exposition()[0]


def test_link_load_polls_connected_fabric_switches_and_folds_replies_into_the_view():
    topo = leaf_spine(2, 2, 1)
    topo.add_switch(999, [1])  # a lone switch without fabric links: nothing to poll there
    assert LinkLoad.poll_targets(topo, {101, 201, 999}) == [101, 201]
    clock = iter([0.0, 1.0, 0.0, 1.0])
    load = LinkLoad(lambda: next(clock))
    link = next(lnk for lnk in topo.links.values() if (lnk.src, lnk.dst) == (101, 201))
    for t in (0, 1):
        assert load.reply(101, [stat(link.src_port, tx=t * mb(3, 2), sec=10 + 2 * t)]) == []
        assert load.reply(201, [stat(link.dst_port, rx=t * mb(3, 2), sec=10 + 2 * t), stat(9, tx=-1)]) != []
    row = next(r for r in load.links(topo, {}, 1e7) if (r["src"], r["dst"]) == (101, 201))
    assert row["tx_bps"] == pytest.approx(3 * MBPS) and row["utilisation"] == pytest.approx(0.3)
    load.forget(101)
    row = next(r for r in load.links(topo, {}, 1e7) if (r["src"], r["dst"]) == (101, 201))
    assert row["tx_bps"] is None and row["rx_bps"] == pytest.approx(3 * MBPS)
