"""ECMP without SELECT groups (group_free.py): the plain entries forward every pair exactly as the groups' next
hops do, one path per flow, no group left, no two entries of one priority overlapping; the spreading uses every
up path with a different slice of source bits per tier; and the app sends a switch without groups no group-mod,
whether its group features or its profile says so."""

import itertools

import pytest

from controller.desired import forwarding, group_free, table_budget
from controller.desired.rules import ETH_ARP, ETH_IPV4, ETH_IPV6, FlowRule, match
from controller.state.tiers import infer_tiers
from tests import topologies
from tests.fakeswitch import FakeSwitch
from tests.lab import Lab, stop_apps
from tests.oftable import ambiguous, lookup, trace


def plain_plan(topo, levels_off=False):
    graph = topo.graph()
    tiers = infer_tiers(graph, topo.access_switches())
    desired = forwarding.plan(topo, tiers.levels, True, graph)
    levels = {d: 0 if levels_off else tiers.levels.get(d, 0) for d in desired}
    return desired, group_free.plain_view(desired, levels)


def test_spread_bits_cover_the_ports_evenly():
    assert [group_free.spread_bits(n) for n in (1, 2, 3, 4, 5, 8, 32, 64, 100)] == [0, 1, 3, 2, 4, 3, 5, 6, 6]
    assert group_free.source_slices(1, 2) == (("0.0.0.0", "0.0.0.4"), ("0.0.0.4", "0.0.0.4"))


def test_a_group_entry_becomes_one_entry_per_source_slice_and_its_rest_one_priority_below():
    rule = FlowRule(1, 5, match(in_port=3), (("group", 9),))
    out = group_free.spread(rule, (1, 1, 2, 2), 1)  # a staggered bucket list: each port twice
    assert [(r.priority, dict(r.match).get("ipv4_src"), r.actions) for r in out] == [
        (5, ("0.0.0.0", "0.0.0.2"), (("output", 1),)), (5, ("0.0.0.2", "0.0.0.2"), (("output", 2),)),
        (4, None, (("output", 1),))]
    arp = FlowRule(1, 110, match(eth_type=ETH_ARP, arp_tpa="10.0.0.1"), (("group", 9),))
    assert [r.actions for r in group_free.spread(arp, (1, 2), 0)] == [(("output", 1),)]


CLOS = {"fattree4": lambda: topologies.fat_tree(4), "fattree4-aligned": lambda: topologies.fat_tree(4, aligned=True),
        "leafspine": lambda: topologies.leaf_spine(4, 4, 2), "fattree8": lambda: topologies.fat_tree(8)}


@pytest.mark.parametrize("name", sorted(CLOS))
def test_plain_entries_deliver_every_pair_on_one_of_the_groups_paths(name):
    topo = CLOS[name]()
    grouped, plain = plain_plan(topo)
    assert not any(rules.groups for rules in plain.values())
    for rules in plain.values():
        assert not ambiguous(rules), ambiguous(rules)[:2]
    pairs = list(itertools.permutations(topo.hosts.values(), 2))
    for src, dst in pairs[::7] if len(pairs) > 1000 else pairs:
        packet = {"eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip}
        t = trace(plain, topo, src.dpid, src.port, packet)
        assert t.delivered == {(dst.dpid, dst.port)} and len(t.paths) == 1 and not t.looped, (src, dst, t)
        with_groups = trace(grouped, topo, src.dpid, src.port, packet)
        assert t.paths[0] in with_groups.paths, "one of the paths the groups spread over"
        arp = trace(plain, topo, src.dpid, src.port, {"eth_type": ETH_ARP, "arp_tpa": dst.ip})
        assert arp.delivered == {(dst.dpid, dst.port)} and not arp.looped


def cores_used(topo, plain, pod_hosts, dst):
    cores = set()
    for src in pod_hosts:
        t = trace(plain, topo, src.dpid, src.port, {"eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip})
        cores.add(t.paths[0][2])  # edge, aggregation, core
    return cores


def test_each_tier_reads_its_own_source_bits_so_a_pod_spreads_over_every_core():
    topo = topologies.fat_tree(4)
    pod0 = [topo.hosts[f"10.0.0.{i}"] for i in range(1, 5)]
    dst = topo.hosts["10.0.0.16"]
    _, plain = plain_plan(topo)
    assert cores_used(topo, plain, pod0, dst) == {3001, 3002, 3003, 3004}
    _, polarised = plain_plan(topo, levels_off=True)  # the same bits at every tier: half the cores idle
    assert len(cores_used(topo, polarised, pod0, dst)) == 2
    for edge_hosts in (pod0[:2], pod0[2:]):  # an edge's two hosts leave by different uplinks
        ports = {lookup(plain[h.dpid], 1, {"eth_type": ETH_IPV4, "in_port": h.port, "ipv4_src": h.ip,
                                           "ipv4_dst": dst.ip}).actions for h in edge_hosts}
        assert len(ports) == 2


@pytest.mark.parametrize("aligned", [False, True], ids=["sequential", "aligned"])
def test_dual_stack_ipv6_spreads_on_its_source_bits_as_ipv4_does(aligned):
    """IPv6 pairs delivered on one of the groups' paths, a pod's hosts over every core toward one host, and a
    solicitation for a spread destination on one entry (the first next hop); the compact IPv6 prefixes are
    spread as exact entries are."""
    topo = topologies.dual_stack(topologies.fat_tree(4, aligned=aligned))
    grouped, plain = plain_plan(topo)
    assert not any(rules.groups for rules in plain.values())
    assert any(isinstance(f.get("ipv6_dst"), tuple) and "ipv6_src" in f
               for rules in plain.values() for f in (dict(r.match) for r in rules.flows.values()))
    for rules in plain.values():
        assert not ambiguous(rules), ambiguous(rules)[:2]
    hosts = [h for h in topo.hosts.values() if ":" in h.ip]
    for src, dst in itertools.permutations(hosts, 2):
        packet = {"eth_type": ETH_IPV6, "ipv6_src": src.ip, "ipv6_dst": dst.ip}
        t = trace(plain, topo, src.dpid, src.port, packet)
        assert t.delivered == {(dst.dpid, dst.port)} and len(t.paths) == 1 and not t.looped, (src, dst, t)
        assert t.paths[0] in trace(grouped, topo, src.dpid, src.port, packet).paths
        solicit = {"eth_type": ETH_IPV6, "ip_proto": 58, "icmpv6_type": 135, "ipv6_nd_target": dst.ip,
                   "ipv6_dst": forwarding.solicited_node(dst.ip)}
        assert trace(plain, topo, src.dpid, src.port, solicit).delivered == {(dst.dpid, dst.port)}
    if aligned:  # (two hosts per edge numbered .1 and .2: their low two bits, both tiers' slices, move together)
        return
    dst = max(hosts, key=lambda h: (h.dpid, h.port))  # on pod 3's last edge
    cores = {trace(plain, topo, h.dpid, h.port, {"eth_type": ETH_IPV6, "ipv6_src": h.ip, "ipv6_dst": dst.ip})
             .paths[0][2] for h in hosts if h.dpid < 1100}  # pod 0's hosts
    assert cores == {3001, 3002, 3003, 3004}


def test_a_failed_link_leaves_every_plain_entry():
    topo = topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    link = next(link for link in topo.live_links() if tiers.levels[link.src] == 1 and tiers.levels[link.dst] == 2)
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    _, plain = plain_plan(topo)
    assert not [r for r in plain[link.src].flows.values() if ("output", link.src_port) in r.actions]
    for src, dst in itertools.permutations(topo.hosts.values(), 2):
        t = trace(plain, topo, src.dpid, src.port, {"eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip})
        assert t.delivered == {(dst.dpid, dst.port)}


@pytest.mark.parametrize("how", ["features", "profile"])
def test_a_switch_without_groups_gets_no_group_mod_and_still_forwards(how, tmp_path, monkeypatch):
    ref = topologies.fat_tree(4)
    plain = {1000, 2000}  # an edge and an aggregation switch of pod 0
    switches = {d: FakeSwitch(d) for d in ref.ports}
    if how == "features":
        for d in plain:
            switches[d].no_groups = True  # it reports no group types
    else:
        path = tmp_path / "mlroute.yaml"
        path.write_text("switches:\n" + "".join(f"  - dpid: {d}\n    profile: open-vswitch\n    groups: none\n"
                                                for d in sorted(plain)))
        monkeypatch.setenv("MLROUTE_CONFIG", str(path))
    lab = Lab(ref, switches)
    try:
        lab.bring_up()
        lab.pump()
        lab.app.resync()
        assert switches[1001].table.groups and switches[2001].table.groups, "the others spread by groups"
        for d, sw in switches.items():  # (a group-mod to a switch without groups: a violation, failing the test)
            assert not (d in plain and sw.table.groups), d
            assert lab.app.core.installed[d].flows == sw.table.flows, "believed is held"
        for src, dst in itertools.permutations(ref.hosts, 2):
            t = lab.trace(src, dst)
            assert t.delivered == {(ref.hosts[dst].dpid, ref.hosts[dst].port)} and not t.looped, (src, dst, t)
    finally:
        stop_apps()


@pytest.mark.parametrize("aligned", [False, True])
def test_a_k8_fabric_without_groups_fits_tables_of_128_entries(aligned):
    """Issue 20's live target, planned: every table of every switch of a k=8 fat-tree holds at most 128 entries
    (less the budget's headroom), forwarding alone, so pins and counting rules have the rest."""
    topo = topologies.fat_tree(8, aligned=aligned)
    _, plain = plain_plan(topo)
    fill = {}
    for dpid, rules in plain.items():
        for rule in rules.flows.values():
            fill[dpid, rule.table] = fill.get((dpid, rule.table), 0) + 1
    worst = max(fill.values())
    print(f"k=8 {'pod-aligned' if aligned else 'sequential'} addresses, no groups: at most {worst} entries in a table")
    assert worst <= table_budget.limit(128) - 32, "room left for the elephants' pins and counting rules"
