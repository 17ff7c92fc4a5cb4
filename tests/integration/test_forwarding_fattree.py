"""Foundation on a k=4 fat-tree: loop-free forwarding, tiers, failures, reconnects (real Ryu + OVS + Mininet)."""

import subprocess
from collections import Counter

import pytest

from mininet_topos.fattree import FatTreeTopo
from tests.integration.checks import assert_pingall_converges, assert_quiet_first_minute
from tests.integration.harness import iperf3, ping_all, wait_until


@pytest.fixture(scope="module")
def fattree(fabric_factory):
    return fabric_factory(FatTreeTopo(k=4))


def test_fattree_pingall_converges_and_repeats(fattree):
    assert_pingall_converges(fattree)


def test_fattree_rest_topology_has_tiers_links_and_hosts(fattree):
    topo = fattree.controller.get("/mlroute/topology")
    assert len(topo["switches"]) == 20
    assert Counter(s["tier"] for s in topo["switches"]) == {"core": 4, "aggregation": 8, "edge": 8}
    assert len({frozenset((link["src"], link["dst"])) for link in topo["links"]}) == 32
    assert len(topo["links"]) == 64  # both directions of each
    assert len(topo["hosts"]) == 16
    assert {h["ip"] for h in topo["hosts"]} == {f"10.0.0.{i}" for i in range(1, 17)}


def test_fattree_rest_binds_loopback_only_by_default(fattree):
    assert f"wsgi starting up on http://127.0.0.1:{fattree.controller.rest_port}" in fattree.controller.log()


def test_fattree_tcp_between_pods_completes(fattree):
    h1, h16 = fattree.net.get("h1", "h16")
    assert iperf3(fattree.net, h1, h16, seconds=2) > 1.0


def test_fattree_survives_an_aggregation_core_link_going_down_and_up(fattree):
    net = fattree.net
    net.configLinkStatus("a0_0", "c1", "down")
    try:
        assert wait_until(lambda: ping_all(net) == 0 or None, timeout=15, interval=0), "loss after link cut"
    finally:
        net.configLinkStatus("a0_0", "c1", "up")
    assert wait_until(lambda: ping_all(net) == 0 or None, timeout=15, interval=0), "loss after link restore"
    topo = wait_until(lambda: (t := fattree.controller.get("/mlroute/topology")) and len(t["links"]) == 64 and t,
                      timeout=20)
    assert len(topo["links"]) == 64, "restored link not rediscovered"


def test_fattree_survives_a_switch_going_down_and_up(fattree):
    net = fattree.net
    peers = ["c1", "c2", "e0_0", "e0_1"]  # every link of aggregation switch a0_0
    for peer in peers:
        net.configLinkStatus("a0_0", peer, "down")
    try:
        assert wait_until(lambda: ping_all(net) == 0 or None, timeout=15, interval=0), "loss with a switch down"
    finally:
        for peer in peers:
            net.configLinkStatus("a0_0", peer, "up")
    assert wait_until(lambda: ping_all(net) == 0 or None, timeout=15, interval=0)


def test_fattree_reconnecting_switch_gets_its_tables_back(fattree):
    ctl = fattree.controller
    target = f"tcp:127.0.0.1:{ctl.of_port}"
    subprocess.run(["ovs-vsctl", "del-controller", "e0_0"], check=True)
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", "e0_0"], check=True)
    subprocess.run(["ovs-vsctl", "set-controller", "e0_0", target], check=True)
    assert wait_until(lambda: ping_all(fattree.net) == 0 or None, timeout=20, interval=0.5)
    flows = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "e0_0"], capture_output=True,
                           text=True).stdout
    # compact forwarding (a Clos): its own hosts' exact entries and the host ports' default up are back
    assert "nw_dst=10.0.0.1 " in flows and "nw_dst=10.0.0.2 " in flows and "priority=5,in_port" in flows, flows


def test_fattree_no_storm_in_the_first_minute(fattree):
    assert_quiet_first_minute(fattree)


