"""The traffic-engineering loop with the real controller, OVS and Mininet: elephants from flow stats, a global
re-routing checked in the switches' own tables, failures, and the ECMP baseline."""

import time

import pytest

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.flowtables import dataplane_paths, dump_flows
from tests.integration.harness import POLL_S, STRIDE4, ping_all, te_config, wait_until

TOKEN = "rest:\n  token: secret\n"


def wait_for_elephants(fab, n, within_s):
    return wait_until(lambda: (e := fab.controller.get("/mlroute/elephants")) and len(e) >= n and e,
                      timeout=within_s, interval=0.5) or fab.controller.get("/mlroute/elephants")


@pytest.fixture(scope="module")
def te_fabric(fabric_factory):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), te_config("mlroute", TOKEN), jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    return fab


def test_stride4_elephants_are_found_and_routed_without_sharing_a_link(te_fabric):
    flows = Iperf3Flows(te_fabric.net, STRIDE4, seconds=25)
    try:
        elephants = wait_for_elephants(te_fabric, 8, within_s=3 * POLL_S + 3)
        assert len(elephants) == 8, f"{len(elephants)} elephants after 3 polls: {elephants}"
        # the routing is installed within the next period; then read it back from the switches
        assert wait_until(lambda: all(e["path"] for e in te_fabric.controller.get("/mlroute/elephants")),
                          timeout=2 * POLL_S)
        time.sleep(1)
        paths = dataplane_paths(te_fabric, te_fabric.controller.get("/mlroute/elephants"))
        used = [link for crossed in paths.values() for link in crossed]
        assert len(paths) == 8 and all(paths.values())
        assert len(used) == len(set(used)), f"elephants share a directed link: {paths}"
        routing = te_fabric.controller.get("/mlroute/routing")
        assert routing["installed"]["max_link_load"] == 1 and routing["installed"]["flows_sharing"] == 0
    finally:
        mbps = flows.results_mbps()
    assert min(mbps) > 0, mbps


def test_two_flows_between_the_same_hosts_are_two_elephants(te_fabric):
    flows = Iperf3Flows(te_fabric.net, [("h1", "h9"), ("h1", "h9")], seconds=12, base_port=5500)
    try:
        def pair():
            return [e for e in te_fabric.controller.get("/mlroute/elephants")
                    if (e["src_ip"], e["dst_ip"]) == ("10.0.0.1", "10.0.0.9")]
        found = wait_until(lambda: len(pair()) == 2 and pair(), timeout=3 * POLL_S + 3)
        assert found and len({(e["src_port"], e["dst_port"]) for e in found}) == 2, pair()
    finally:
        flows.results_mbps()


def test_cutting_a_link_under_an_elephant_moves_it_within_one_period(te_fabric):
    net = te_fabric.net
    flows = Iperf3Flows(net, [("h1", "h13")], seconds=30, base_port=5700)
    try:
        el = wait_until(lambda: [e for e in te_fabric.controller.get("/mlroute/elephants")
                                 if e["path"] and e["dst_ip"] == "10.0.0.13" and e["active"]], timeout=5 * POLL_S)
        assert el, "elephant never pinned"
        path = el[0]["path"]
        names = {int(sw.dpid, 16): sw.name for sw in net.switches}
        a, b = names[path[1]], names[path[2]]  # aggregation -> core hop of the pinned path
        net.configLinkStatus(a, b, "down")
        moved = wait_until(lambda: [e for e in te_fabric.controller.get("/mlroute/elephants")
                                    if e["dst_ip"] == "10.0.0.13" and e["path"] and e["path"] != path],
                           timeout=POLL_S + 2, interval=0.2)
        assert moved, "elephant still on the cut path after one period"
        new_path = moved[0]["path"]
        assert (path[1], path[2]) not in zip(new_path, new_path[1:])
        crossed = dataplane_paths(te_fabric, moved)
        assert all((path[1], path[2]) not in c for c in crossed.values())
        time.sleep(POLL_S)  # let one poll measure the flow on its new path
        rate_after = wait_until(lambda: [e["rate_bps"] for e in te_fabric.controller.get("/mlroute/elephants")
                                         if e["dst_ip"] == "10.0.0.13" and e["rate_bps"] > 1e6],
                                timeout=3 * POLL_S)
        assert rate_after, "flow stopped delivering after the move"
        net.configLinkStatus(a, b, "up")
    finally:
        mbps = flows.results_mbps()
    assert mbps[0] > 1.0


def test_rest_mutations_need_the_token(te_fabric):
    import urllib.error
    with pytest.raises(urllib.error.HTTPError) as err:
        te_fabric.controller.post("/mlroute/recompute")
    assert err.value.code == 401
    answer = te_fabric.controller.post("/mlroute/recompute", token="secret")
    assert "applied" in answer
    jobs = te_fabric.controller.post("/mlroute/jobs", {"jobs": [{"name": "ring0", "hosts": ["10.0.0.1"]}]},
                                     token="secret")
    assert te_fabric.controller.get("/mlroute/jobs") == {"jobs": jobs["jobs"]}
    assert "applied" in jobs["decision"]  # answered once the decision the job event requested ended
    metrics = te_fabric.controller.get("/metrics")
    for name in ("mlroute_elephants", "mlroute_reoptimisations_total", "mlroute_flows_moved_total",
                 "mlroute_optimiser_seconds", "mlroute_max_link_load", "mlroute_rules_installed"):
        assert name in metrics


@pytest.fixture(scope="module")
def ecmp_fabric(fabric_factory, te_fabric):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), te_config("ecmp", TOKEN), jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    return fab


def test_ecmp_mode_lists_elephants_but_reroutes_nothing(ecmp_fabric):
    flows = Iperf3Flows(ecmp_fabric.net, STRIDE4, seconds=12, base_port=5900)
    try:
        elephants = wait_for_elephants(ecmp_fabric, 8, within_s=3 * POLL_S + 3)
        assert len(elephants) == 8 and all(e["path"] is None for e in elephants)
        for sw in ecmp_fabric.net.switches:
            for rule in dump_flows(sw.name):
                assert rule["cookie"] != 0x6D6C0002, f"pinned elephant rule in ecmp mode on {sw.name}"
                if rule["cookie"] == 0x6D6C0003:
                    assert rule["actions"] == "goto_table:1", rule
        assert ecmp_fabric.controller.metric("mlroute_flows_moved_total") == 0
    finally:
        flows.results_mbps()
