"""Foundation on a 4-spine x 4-leaf x 2-host leaf-spine (real Ryu + OVS + Mininet)."""

from collections import Counter

import pytest

from mininet_topos.leafspine import LeafSpineTopo
from tests.integration.checks import assert_pingall_converges, assert_quiet_first_minute
from tests.integration.harness import iperf3


@pytest.fixture(scope="module")
def leafspine(fabric_factory):
    return fabric_factory(LeafSpineTopo(4, 4, 2))


def test_leafspine_pingall_converges_and_repeats(leafspine):
    assert_pingall_converges(leafspine)


def test_leafspine_rest_topology(leafspine):
    topo = leafspine.controller.get("/mlroute/topology")
    assert Counter(s["tier"] for s in topo["switches"]) == {"spine": 4, "leaf": 4}
    assert len(topo["hosts"]) == 8


def test_leafspine_tcp_between_leaves_completes(leafspine):
    h1, h8 = leafspine.net.get("h1", "h8")
    assert iperf3(leafspine.net, h1, h8, seconds=2) > 1.0


def test_leafspine_no_storm_in_the_first_minute(leafspine):
    assert_quiet_first_minute(leafspine)
