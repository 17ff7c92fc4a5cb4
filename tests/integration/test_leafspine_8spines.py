"""A leaf-spine with 8 spines live (8 spines x 8 leaves x 4 hosts; real ryu-manager + Open vSwitch + Mininet).

Measured first (docs/scaling.md): about 12 s on 2 cores. Every host pings every other (992 pairs) and, after a
leaf-spine link is cut, a host under another leaf. Then 16 TCP elephants (leaves 1-4 to leaves 5-8, and a seeded
random bijection) are pinned on paths that share no link, and a cut under a pinned elephant moves it off the
link while the set stays link-disjoint.
"""

import subprocess
from collections import Counter

import pytest

from mininet_topos.leafspine import LeafSpineTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.harness import (
    link_loads,
    no_loss_with_link_cut,
    ping_all_concurrently,
    pinned_paths,
    random_bijection,
    wait_pinned_disjoint,
    wait_until,
)

STRIDE = 5
HOSTS = 32
ELEPHANTS = 16
STRIDE_16 = [(f"h{i}", f"h{i + 16}") for i in range(1, ELEPHANTS + 1)]


@pytest.fixture(scope="module")
def ls8(fabric_factory):
    return fabric_factory(LeafSpineTopo(8, 8, 4, bw=10), jumbo=True)



def test_eight_spine_fabric_is_learned_forwards_and_survives_a_link_cut(ls8):
    ctl, net = ls8.controller, ls8.net
    topo = wait_until(lambda: (t := ctl.get("/mlroute/topology")) and len(t["links"]) == 128 and t, timeout=30)
    assert topo and Counter(s["tier"] for s in topo["switches"]) == {"spine": 8, "leaf": 8}
    assert wait_until(lambda: ping_all_concurrently(net) == 0 or None, timeout=30, interval=0), "pings lost"
    assert len(ctl.get("/mlroute/topology")["hosts"]) == 32
    assert no_loss_with_link_cut(net, "l1", "s1", STRIDE), "loss after link cut"


@pytest.mark.parametrize("pattern, base_port", [("stride", 5300), ("random bijection", 5500)])
def test_elephants_are_pinned_apart_and_moved_off_a_cut_link(ls8, pattern, base_port):
    ctl, net = ls8.controller, ls8.net
    assert wait_until(lambda: ctl.get("/mlroute/elephants") == [] or None, timeout=30), "earlier elephants stay"
    pairs = STRIDE_16 if pattern == "stride" else random_bijection(HOSTS, 4, ELEPHANTS, seed=4)
    name = {int(sw.dpid, 16): sw.name for sw in net.switches}
    flows = Iperf3Flows(net, pairs, seconds=40, base_port=base_port)
    try:
        pinned_s, disjoint_s, paths = wait_pinned_disjoint(ctl, base_port, ELEPHANTS, timeout=30)
        assert paths, [h for h, n in link_loads(pinned_paths(ctl, base_port, ELEPHANTS) or []).items() if n > 1]
        cut = tuple(paths[0][:2])  # the first elephant's leaf -> spine hop
        net.configLinkStatus(name[cut[0]], name[cut[1]], "down")
        try:
            _, moved_s, moved = wait_pinned_disjoint(ctl, base_port, ELEPHANTS, timeout=10, avoid=[cut])
        finally:
            net.configLinkStatus(name[cut[0]], name[cut[1]], "up")
    finally:
        flows.stop()
    left = subprocess.run(["pgrep", "-f", "iperf3 -J -i 1 -c"], capture_output=True, text=True).stdout.split()
    assert left == [], f"iperf3 clients outlived stop(): {left}"  # they spun at 70 % of a core ever after
    print(f"{pattern}: 16 elephants pinned {pinned_s:.1f} s after the flows started, link-disjoint after "
          f"{disjoint_s:.1f} s; {name[cut[0]]}-{name[cut[1]]} cut: moved off it, still disjoint, in {moved_s:.1f} s")
    assert moved, pinned_paths(ctl, base_port, ELEPHANTS)

