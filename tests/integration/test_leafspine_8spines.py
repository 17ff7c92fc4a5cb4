"""A leaf-spine with 8 spines live (8 spines x 8 leaves x 4 hosts; real ryu-manager + Open vSwitch + Mininet).

Measured first (docs/scaling.md): about 12 s on 2 cores. Every host pings a host under another leaf before and
after a leaf-spine link is cut.
"""

from collections import Counter

import pytest

from mininet_topos.leafspine import LeafSpineTopo
from tests.integration.harness import stride_loss, wait_until

STRIDE = 5


@pytest.fixture(scope="module")
def ls8(fabric_factory):
    return fabric_factory(LeafSpineTopo(8, 8, 4, bw=10))



def test_eight_spine_fabric_is_learned_forwards_and_survives_a_link_cut(ls8):
    ctl, net = ls8.controller, ls8.net
    topo = wait_until(lambda: (t := ctl.get("/mlroute/topology")) and len(t["links"]) == 128 and t, timeout=30)
    assert topo and Counter(s["tier"] for s in topo["switches"]) == {"spine": 8, "leaf": 8}
    assert wait_until(lambda: stride_loss(net, STRIDE) == 0 or None, timeout=30, interval=0), "pings lost"
    assert len(ctl.get("/mlroute/topology")["hosts"]) == 32
    net.configLinkStatus("l1", "s1", "down")
    try:
        assert wait_until(lambda: stride_loss(net, STRIDE) == 0 or None, timeout=20, interval=0), "loss after link cut"
    finally:
        net.configLinkStatus("l1", "s1", "up")
