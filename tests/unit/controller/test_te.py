import itertools

from controller import sync, te
from controller.monitor import FlowKey
from controller.rules import COOKIE_ELEPHANT, COOKIE_FLOW
from controller.tiers import infer_tiers
from tests import topologies
from tests.oftable import trace

MBPS = 1e6


def setup(topo=None):
    topo = topo or topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    return topo, tiers, te.fabric_from_topology(topo, tiers, 10 * MBPS, 10 * MBPS)


def stride4_keys():
    return [FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + 4) % 16 + 1}", 6, 40000 + i, 5201) for i in range(8)]


def desired_with(topo, tiers, engineer, keys):
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    return sync.desired_state(topo, tiers, accounting, engineer.pinned, stagger=False, idle_timeout=10)


def packet(key):
    return {"eth_type": 0x0800, "ip_proto": key.proto, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
            "tcp_src": key.src_port, "tcp_dst": key.dst_port}


def test_stride4_elephants_get_disjoint_paths_in_the_simulated_dataplane():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    result = engineer.step(fabric, [(k, None) for k in keys])
    assert result.applied and result.after["max_link_load"] == 1 and len(result.moved) == 8
    desired = desired_with(topo, tiers, engineer, keys)
    used = []
    for k in keys:
        src, dst = topo.hosts[k.src_ip], topo.hosts[k.dst_ip]
        t = trace(desired, topo, src.dpid, src.port, packet(k))
        assert t.delivered == {(dst.dpid, dst.port)} and len(t.paths) == 1 and not t.looped
        path = t.paths[0]
        assert tuple(path) == engineer.pinned[k]  # the data plane follows the pinned path exactly
        used += list(zip(path, path[1:]))
    assert len(used) == len(set(used))


def test_hysteresis_keeps_an_equally_good_routing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer.step(fabric, [(k, None) for k in keys])
    before = dict(engineer.pinned)
    again = engineer.step(fabric, [(k, None) for k in keys])
    assert not again.applied and again.moved == [] and engineer.pinned == before


def test_a_failed_link_under_an_elephant_moves_it_and_keeps_most_others():
    topo, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer.step(fabric, [(k, None) for k in keys])
    victim = keys[0]
    a, b = engineer.pinned[victim][1], engineer.pinned[victim][2]
    link = next(l for l in topo.live_links() if (l.src, l.dst) == (a, b))
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    _, tiers, fabric = setup(topo)
    result = engineer.step(fabric, [(k, None) for k in keys])
    assert result.applied and victim in result.moved
    assert (a, b) not in zip(engineer.pinned[victim], engineer.pinned[victim][1:])
    assert result.after["max_link_load"] == 2  # pod 0 has 4 elephants leaving on 3 live uplinks
    assert len(result.moved) < len(keys) // 2  # the rest keep their routes (previous paths are preferred)


def test_ecmp_mode_pins_nothing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("ecmp")
    result = engineer.step(fabric, [(k, None) for k in stride4_keys()])
    assert not result.applied and engineer.pinned == {} and result.before["max_link_load"] >= 1


def test_rules_pin_only_upward_hops_and_count_at_the_ingress():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer.step(fabric, [(k, None) for k in keys])
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    rules = te.te_rules(topo, tiers, accounting, engineer.pinned, 10)
    pinned_hops = [r for r in rules if r.cookie == COOKIE_ELEPHANT]
    assert len(pinned_hops) == 8  # one aggregation hop per inter-pod elephant; cores need none
    assert all(tiers.tiers[r.dpid] == "aggregation" for r in pinned_hops)
    counting = [r for r in rules if r.cookie == COOKIE_FLOW]
    assert len(counting) == 8 and all(r.idle_timeout == 10 and r.actions[0][0] == "output" for r in counting)


def test_leaf_spine_elephants_use_distinct_spines():
    topo, tiers, fabric = setup(topologies.leaf_spine(4, 4, 2))
    engineer = te.TrafficEngineer("mlroute")
    keys = [FlowKey(f"10.0.0.{i}", f"10.0.0.{(i + 1) % 8 + 1}", 6, 1000 + i, 5201) for i in (1, 2)]  # leaf 1 -> 2
    engineer.step(fabric, [(k, None) for k in keys])
    spines = {engineer.pinned[k][1] for k in keys}
    assert len(spines) == 2


def test_not_a_clos_means_no_traffic_engineering():
    topo = topologies.ring(5)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    assert te.fabric_from_topology(topo, tiers, 1, 1) is None
    result = te.TrafficEngineer("mlroute").step(None, [(stride4_keys()[0], None)])
    assert not result.applied


def test_job_awareness_switches_to_the_job_objective():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    result = engineer.step(fabric, [(k, None) for k in keys], jobs={k.src_ip: "ring" for k in keys})
    assert result.after["objective"] == "job"


def test_every_pair_still_delivered_with_pins_installed():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer.step(fabric, [(k, None) for k in keys])
    desired = desired_with(topo, tiers, engineer, keys)
    for src, dst in itertools.permutations(list(topo.hosts.values())[:6], 2):
        t = trace(desired, topo, src.dpid, src.port, {"eth_type": 0x0800, "ipv4_src": src.ip, "ipv4_dst": dst.ip,
                                                     "ip_proto": 6, "tcp_src": 1, "tcp_dst": 2})
        assert t.delivered == {(dst.dpid, dst.port)}


def test_ended_elephants_are_unpinned_even_without_a_new_routing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer.step(fabric, [(k, None) for k in keys])
    engineer.step(fabric, [(k, None) for k in keys[:6]])
    assert set(engineer.pinned) == set(keys[:6])
