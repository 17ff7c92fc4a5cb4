import ipaddress
import itertools
import random

import networkx as nx
import pytest

from controller.desired import forwarding
from controller.desired.rules import ETH_ARP, ETH_IPV4, ETH_IPV6, diff_switch, match
from controller.state.tiers import infer_tiers
from tests import topologies
from tests.oftable import ambiguous, lookup, trace


def ipv4(src, dst):
    return {"eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip}


def assert_all_pairs_delivered(topo):
    desired = forwarding.plan(topo)
    for src, dst in itertools.permutations(topo.hosts.values(), 2):
        t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
        assert not t.looped, (src, dst)
        assert t.delivered == {(dst.dpid, dst.port)}, (src, dst, t)
        assert not t.to_controller and not t.dropped, (src, dst, t)
    return desired


@pytest.mark.parametrize("topo", [topologies.fat_tree(4), topologies.leaf_spine(4, 4, 2), topologies.ring(5)],
                         ids=["fattree4", "leafspine442", "ring5"])
def test_every_host_reaches_every_other_exactly_once_without_loops(topo):
    assert_all_pairs_delivered(topo)


def test_upward_traffic_is_ecmp_over_all_up_paths_and_downward_is_deterministic():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    src = topo.hosts["10.0.0.1"]  # pod 0
    dst = topo.hosts["10.0.0.16"]  # pod 3
    t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
    assert len(t.paths) == 4  # 2 aggregation x 2 core choices: every equal-cost path
    assert len({p[2] for p in t.paths}) == 4  # through all four cores
    edge_rule = forwarding.match(eth_type=ETH_IPV4, ipv4_dst=dst.ip)
    up = desired[src.dpid].flows[(1, 10, edge_rule)]
    assert up.actions[0][0] == "group" and len(desired[src.dpid].groups[up.actions[0][1]].ports) == 2
    core = desired[3001].flows[(1, 10, edge_rule)]
    assert core.actions[0][0] == "output"  # a core has exactly one way down


def test_a_failed_aggregation_core_link_is_routed_around():
    topo = topologies.fat_tree(4)
    link = next(lnk for lnk in topo.live_links() if lnk.src == 2300 and lnk.dst == 3001)  # pod 3's agg to a core
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    desired = assert_all_pairs_delivered(topo)
    src, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
    assert all(3001 not in p for p in t.paths)  # nobody climbs to the core that lost its way down


def test_a_failed_switch_is_routed_around():
    topo = topologies.fat_tree(4)
    topo.remove_switch(2000)
    assert_all_pairs_delivered(topo)


def test_arp_goes_to_controller_and_is_never_flooded():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    h = topo.hosts["10.0.0.1"]
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_ARP})
    assert t.to_controller == [h.dpid] and not t.delivered


def _levels(topo):
    return infer_tiers(topo.graph(), topo.access_switches()).levels


def _ipv6(src, dst):
    return {"eth_type": ETH_IPV6, "ipv6_src": src.ip, "ipv6_dst": dst.ip, "ip_proto": 17}


def _solicit(src, target):
    return {"eth_type": ETH_IPV6, "ipv6_src": src.ip, "ipv6_dst": forwarding.solicited_node(target), "ip_proto": 58,
            "icmpv6_type": 135, "ipv6_nd_target": target}


@pytest.mark.parametrize("clos", [True, False], ids=["compact", "per-host"])
def test_dual_stack_every_ipv6_pair_is_delivered_and_ipv4_is_unchanged(clos):
    """IPv6 beside IPv4: every IPv6 pair delivered once over every equal-cost path, a solicitation for a known
    address copied up once (at the ingress) and delivered to its owner alone, IPv4's rules the same as without
    IPv6."""
    v4 = topologies.fat_tree(4)
    topo = topologies.dual_stack(topologies.fat_tree(4))
    levels = _levels(topo) if clos else None
    desired = forwarding.plan(topo, levels)
    only_v4 = forwarding.plan(v4, _levels(v4) if clos else None)
    def no_ipv6_host(flows):
        return {k: r for k, r in flows.items() if not {"ipv6_dst", "ipv6_nd_target"} & dict(r.match).keys()}

    for dpid, rules in only_v4.items():
        assert no_ipv6_host(desired[dpid].flows) == rules.flows and desired[dpid].groups == rules.groups
        assert not ambiguous(desired[dpid]), ambiguous(desired[dpid])[:2]
    hosts = [h for h in topo.hosts.values() if ":" in h.ip]
    assert len(hosts) == 16
    for src in hosts:
        for dst in hosts:
            if src is dst:
                continue
            t = trace(desired, topo, src.dpid, src.port, _ipv6(src, dst))
            assert t.delivered == {(dst.dpid, dst.port)} and not t.looped and not t.to_controller
            t = trace(desired, topo, src.dpid, src.port, _solicit(src, dst.ip))
            assert t.delivered == {(dst.dpid, dst.port)} and not t.looped and t.to_controller == [src.dpid]


@pytest.mark.parametrize("clos", [True, False], ids=["compact", "per-host"])
def test_ipv6_toward_no_known_host_is_never_flooded(clos):
    """A solicitation for an unknown address reaches the controller once and no host; IPv6 toward an unknown
    address reaches the controller at its ingress and nothing else."""
    topo = topologies.dual_stack(topologies.fat_tree(4))
    desired = forwarding.plan(topo, _levels(topo) if clos else None)
    src = topo.hosts[topologies.ipv6_of("10.0.0.1")]
    t = trace(desired, topo, src.dpid, src.port, _solicit(src, "fd00::99:99"))
    assert t.to_controller == [src.dpid] and not t.delivered and not t.looped
    t = trace(desired, topo, src.dpid, src.port, {"eth_type": ETH_IPV6, "ipv6_dst": "fd00::99:99"})
    assert t.to_controller == [src.dpid] and not t.delivered and not t.looped  # never up a host port's default


def test_unknown_destination_goes_to_controller_not_the_fabric():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    h = topo.hosts["10.0.0.1"]
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_IPV4, "ipv4_dst": "10.9.9.9"})
    assert t.to_controller == [h.dpid] and not t.delivered


def test_group_ids_are_stable_across_recomputation():
    a = forwarding.plan(topologies.fat_tree(4))
    b = forwarding.plan(topologies.fat_tree(4))
    assert {d: set(r.groups) for d, r in a.items()} == {d: set(r.groups) for d, r in b.items()}


def test_staggered_buckets_break_hash_polarisation():
    """Model a switch that picks bucket hash mod n_buckets with the same hash at every tier (OVS's default):
    with plain groups an aggregation switch sends everything it gets to one core; staggered, all four."""
    topo = topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    links = {(link.src, link.src_port): link.dst for link in topo.live_links()}
    dst = topo.hosts["10.0.0.16"]
    rule_match = forwarding.match(eth_type=ETH_IPV4, ipv4_dst=dst.ip)

    src = topo.hosts["10.0.0.1"]
    by_link = {(link.src, link.src_port): link for link in topo.live_links()}

    def cores_reached(desired):
        reached = set()
        for h in range(64):  # one hash value per flow
            switch, in_port = src.dpid, src.port  # edge of pod 0
            for _ in range(2):  # edge -> aggregation -> core
                packet = {"eth_type": ETH_IPV4, "ipv4_dst": dst.ip, "in_port": in_port}
                action = lookup(desired[switch], 1, packet).actions[0]
                buckets = desired[switch].groups[action[1]].ports
                link = by_link[(switch, buckets[h % len(buckets)])]
                switch, in_port = link.dst, link.dst_port
            reached.add(switch)
        return reached

    assert links and rule_match
    for plan in (forwarding.plan, forwarding.per_host_plan):  # compact on a Clos, and per host
        assert len(cores_reached(plan(topo, tiers.levels, False, topo.graph()))) == 2
        assert cores_reached(plan(topo, tiers.levels, True, topo.graph())) == {3001, 3002, 3003, 3004}
    assert_all_pairs_delivered(topo)


def test_staggering_stays_within_the_bucket_budget():
    assert forwarding.staggered_buckets((1, 2), 1) == (1, 1, 2, 2)
    assert forwarding.staggered_buckets((1, 2, 3), 0) == (1, 2, 3)
    assert forwarding.staggered_buckets(tuple(range(24)), 1) == tuple(range(24))  # 576 > 64: plain


# -- compact forwarding (a recognised Clos) --------------------------------------------------------------------
def clos_plan(topo):
    graph = topo.graph()
    tiers = infer_tiers(graph, topo.access_switches(), previous=None)
    assert tiers.is_clos
    return forwarding.plan(topo, tiers.levels, True, graph), tiers


def table1_ports(desired, dpid, packet):
    """The ports table 1 of ``dpid`` sends ``packet`` to (every bucket of a group), or None on no / a miss."""
    rule = lookup(desired[dpid], 1, packet)
    if rule is None or rule.priority <= forwarding.PRIO_TABLE_MISS + 1:
        return None
    ports = set()
    for kind, *arg in rule.actions:
        if kind == "output":
            ports.add(arg[0])
        elif kind == "group":
            ports.update(desired[dpid].groups[arg[0]].ports)
    return ports or None


def assert_same_next_hops_as_per_host(topo):
    """For every switch and known host, from every port traffic toward that host can arrive at (its host ports,
    and the fabric ports of neighbours one hop farther from the host's switch), IPv4 and ARP take exactly the
    per-host plan's next hops."""
    desired, _ = clos_plan(topo)
    graph = topo.graph()
    reference = forwarding.per_host_plan(topo, {}, False, graph)
    bound: dict[int, set[int]] = {}
    for h in topo.hosts.values():
        bound.setdefault(h.dpid, set()).add(h.port)
    into: dict[int, list[tuple[int, int]]] = {}  # switch -> (its port, the neighbour there)
    for link in topo.live_links():
        into.setdefault(link.dst, []).append((link.dst_port, link.src))
    for host in topo.hosts.values():
        dist = nx.single_source_shortest_path_length(graph, host.dpid)
        for dpid in topo.ports:
            arrivals = bound.get(dpid, set()) | {p for p, src in into.get(dpid, ())
                                                 if dpid in dist and dist.get(src) == dist[dpid] + 1}
            rule = reference[dpid].flows.get((1, forwarding.PRIO_HOST, forwarding.host_matches(host.ip)[0]))
            want = None if rule is None else {p for kind, *arg in rule.actions for p in (
                reference[dpid].groups[arg[0]].ports if kind == "group" else arg)}
            for in_port in arrivals:
                for packet in ({"eth_type": ETH_IPV4, "ipv4_dst": host.ip}, {"eth_type": ETH_ARP, "arp_tpa": host.ip}):
                    got = table1_ports(desired, dpid, dict(packet, in_port=in_port))
                    assert got == want, (host, dpid, in_port, packet, got, want)
    return desired


def unknown_addresses(topo, n=24):
    known = sorted(int(ipaddress.IPv4Address(h.ip)) for h in topo.hosts.values())
    gaps = [a for a in range(known[0] - 2, known[-1] + 3) if a not in set(known)]
    picks = gaps[:: max(1, len(gaps) // n)] + gaps[-3:]
    return [str(ipaddress.IPv4Address(a)) for a in picks] + ["10.9.9.9", "10.255.255.254", "192.168.0.1"]


def assert_unknown_addresses_end_without_loops(topo, desired, n=24):
    """An unknown address, entering at any host port or over any link, is never looped or delivered: it ends in
    a packet-in or a drop."""
    starts = [(h.dpid, h.port) for h in topo.hosts.values()] + [(k.dst, k.dst_port) for k in topo.live_links()]
    for address in unknown_addresses(topo, n):
        for packet in ({"eth_type": ETH_IPV4, "ipv4_dst": address}, {"eth_type": ETH_ARP, "arp_tpa": address}):
            for dpid, port in starts:
                t = trace(desired, topo, dpid, port, packet)
                assert not t.looped and not t.delivered, (address, dpid, port, t)
                assert t.to_controller or t.dropped


def fail_links(topo, n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        link = rng.choice(topo.live_links())
        topo.port_down(link.src, link.src_port)
        topo.port_down(link.dst, link.dst_port)


CLOS = {"fattree4": lambda: topologies.fat_tree(4), "fattree4-aligned": lambda: topologies.fat_tree(4, aligned=True),
        "leafspine": lambda: topologies.leaf_spine(4, 4, 2),
        "leafspine-aligned": lambda: topologies.leaf_spine(4, 4, 3, aligned=True)}


@pytest.mark.parametrize("name", sorted(CLOS))
def test_compact_forwarding_delivers_every_pair_on_the_per_host_next_hops(name):
    topo = CLOS[name]()
    desired = assert_same_next_hops_as_per_host(topo)
    assert_all_delivered(topo, desired)
    assert_unknown_addresses_end_without_loops(topo, desired)


@pytest.mark.parametrize("name", sorted(CLOS))
@pytest.mark.parametrize("seed", range(4))
def test_compact_forwarding_after_link_failures(name, seed):
    topo = CLOS[name]()
    fail_links(topo, 1 + seed, seed)
    if not infer_tiers(topo.graph(), topo.access_switches()).is_clos:
        pytest.skip("the failures left no Clos")
    desired = assert_same_next_hops_as_per_host(topo)
    assert_all_delivered(topo, desired, reachable_only=True)
    assert_unknown_addresses_end_without_loops(topo, desired)


@pytest.mark.parametrize("aligned", [False, True])
def test_compact_forwarding_on_a_k8_fat_tree_with_failures(aligned):
    topo = topologies.fat_tree(8, aligned=aligned)
    desired = assert_same_next_hops_as_per_host(topo)
    assert_unknown_addresses_end_without_loops(topo, desired, 6)
    fail_links(topo, 3, 8)
    desired = assert_same_next_hops_as_per_host(topo)
    assert_unknown_addresses_end_without_loops(topo, desired, 6)


def assert_all_delivered(topo, desired, reachable_only=False):
    graph = topo.graph()
    for src, dst in itertools.permutations(topo.hosts.values(), 2):
        if reachable_only and not nx.has_path(graph, src.dpid, dst.dpid):
            continue
        for packet in (ipv4(src, dst), {"eth_type": ETH_ARP, "arp_tpa": dst.ip}):
            t = trace(desired, topo, src.dpid, src.port, packet)
            assert not t.looped and t.delivered == {(dst.dpid, dst.port)}, (src, dst, packet, t)


def test_an_aggregation_switch_without_core_links_sends_through_its_edges():
    """The edges below it become transit (traffic from above goes back up): they get entries from any port."""
    topo = topologies.fat_tree(4)
    for link in [k for k in topo.live_links() if k.src == 2000 and k.dst > 3000]:
        topo.port_down(link.src, link.src_port)
        topo.port_down(link.dst, link.dst_port)
    desired = assert_same_next_hops_as_per_host(topo)
    assert_all_delivered(topo, desired)
    assert_unknown_addresses_end_without_loops(topo, desired)


def test_a_core_that_lost_a_pod_gets_specific_entries_elsewhere():
    """Pod-aligned k=8: a core-aggregation link failure costs a handful of prefixes, not a rule per host."""
    topo = topologies.fat_tree(8, aligned=True)
    before, tiers = clos_plan(topo)
    old_before = forwarding.per_host_plan(topo, tiers.levels, True, topo.graph())
    link = next(k for k in topo.live_links() if k.src == 2000 and k.dst == 3001)
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    after = assert_same_next_hops_as_per_host(topo)
    old_after = forwarding.per_host_plan(topo, tiers.levels, True, topo.graph())
    changed = sum(len(diff_switch(before[d], after[d])) for d in after)
    per_host = sum(len(diff_switch(old_before[d], old_after[d])) for d in old_after)
    assert 0 < changed * 5 <= per_host


@pytest.mark.parametrize("aligned", [False, True])
def test_compact_tables_stay_within_the_issue_budgets(aligned):
    """k=8: a host-facing switch's table 1 <= 2 x its hosts + 16; pod-aligned, every switch <= 8k + 32."""
    k = 8
    desired, tiers = clos_plan(topologies.fat_tree(k, aligned=aligned))
    for dpid, rules in desired.items():
        forward = sum(1 for r in rules.flows.values() if r.table == 1)
        if tiers.levels[dpid] == 0:
            assert forward <= 2 * (k // 2) + 16
        if aligned:
            assert forward <= 8 * k + 32
    per_host = forwarding.per_host_plan(topologies.fat_tree(k), {}, False, topologies.fat_tree(k).graph())

    def largest_table_1(plan):  # (table 0, the same in both plans, is not what compaction shrinks)
        return max(sum(1 for r in rules.flows.values() if r.table == 1) for rules in plan.values())

    assert largest_table_1(desired) * 3 < largest_table_1(per_host)


def test_off_a_clos_forwarding_stays_per_host():
    topo = topologies.ring(5)
    graph = topo.graph()
    levels = {d: 0 for d in list(graph.nodes)[:-1]}  # not every switch placed: not a Clos
    assert forwarding.plan(topo, levels, True, graph) == forwarding.per_host_plan(topo, levels, True, graph)
    assert not any(isinstance(v, tuple) for r in forwarding.plan(topo).values() for f in r.flows.values()
                   for _, v in f.match)


def test_a_port_without_a_bound_host_sends_ipv4_to_the_controller_at_its_switch():
    """The host-port default exists only where a host is bound: an unknown sender's IPv4 reaches the controller
    at its own switch (from a host port, where it is learned), not somewhere up the fabric."""
    topo = topologies.fat_tree(4)
    h = topo.hosts.pop("10.0.0.1")
    topo._by_port.pop((h.dpid, h.port), None)
    desired, _ = clos_plan(topo)
    dst = topo.hosts["10.0.0.16"]
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_IPV4, "ipv4_src": h.ip, "ipv4_dst": dst.ip})
    assert t.to_controller == [h.dpid] and not t.delivered
    t = trace(desired, topo, h.dpid, h.port + 1, {"eth_type": ETH_IPV4, "ipv4_dst": dst.ip})  # h2, bound
    assert t.delivered == {(dst.dpid, dst.port)}


def test_prefix_matches_read_back_as_ryu_writes_them():
    assert forwarding.prefix_matches(forwarding.ip_int("10.1.0.0"), 16)[0] == \
        match(eth_type=ETH_IPV4, ipv4_dst=("10.1.0.0", "255.255.0.0"))
    assert forwarding.prefix_matches(forwarding.ip_int("10.1.0.7"), 32) == forwarding.host_matches("10.1.0.7")


# -- compact IPv6 (dual-stack Clos) ------------------------------------------------------------------------------
def ipv6_table1(rules):
    """A switch's table-1 entries toward IPv6 hosts (prefixes, exact addresses, solicitations): not its misses."""
    return [r for r in rules.flows.values()
            if r.table == 1 and {"ipv6_dst", "ipv6_nd_target"} & dict(r.match).keys()]


def assert_ipv6_same_next_hops_as_per_host(topo, desired):
    """Every switch, every IPv6 host, from any port: IPv6 and solicitations take the per-host plan's next hops
    (IPv6 has no host-port default, so the port it arrives at does not matter)."""
    reference = forwarding.per_host_plan(topo, {}, False, topo.graph())
    for host in (h for h in topo.hosts.values() if ":" in h.ip):
        exact, solicit = forwarding.host_matches(host.ip)
        for dpid in topo.ports:
            rule = reference[dpid].flows.get((1, forwarding.PRIO_HOST, exact))
            want = None if rule is None else {p for kind, *arg in rule.actions for p in (
                reference[dpid].groups[arg[0]].ports if kind == "group" else arg)}
            for packet in ({"eth_type": ETH_IPV6, "ipv6_dst": host.ip, "ip_proto": 17}, dict(solicit)):
                got = table1_ports(desired, dpid, packet)
                assert got == want, (host, dpid, packet, got, want)


def unknown_ipv6(topo, n=16):
    """IPv6 addresses no host has: in the gaps between known ones, around them, and far from them."""
    known = sorted(int(ipaddress.IPv6Address(h.ip)) for h in topo.hosts.values() if ":" in h.ip)
    taken = set(known)
    gaps = [a for k in known for a in (k - 1, k + 1, k ^ 0x80) if a not in taken]
    picks = gaps[:: max(1, len(gaps) // n)]
    return [ipaddress.IPv6Address(a).compressed for a in picks] + ["fd00::99:99", "2001:db8::1", "fe80::1"]


DUAL_STACK = {"fattree4": lambda: topologies.dual_stack(topologies.fat_tree(4)),
              "fattree4-aligned": lambda: topologies.dual_stack(topologies.fat_tree(4, aligned=True)),
              "fattree8-aligned": lambda: topologies.dual_stack(topologies.fat_tree(8, aligned=True))}


@pytest.mark.parametrize("name", sorted(DUAL_STACK))
def test_compact_ipv6_delivers_every_pair_on_the_per_host_next_hops(name):
    """Dual-stack Clos: IPv6 compacted into prefixes of ``ipv6_dst`` delivers every IPv6 pair and solicitation
    on the per-host next hops, unambiguously; an unknown IPv6 address is never looped or delivered, and one
    outside every prefix reaches the controller at its ingress."""
    topo = DUAL_STACK[name]()
    desired, _ = clos_plan(topo)
    for rules in desired.values():
        assert not ambiguous(rules), ambiguous(rules)[:2]
    assert_ipv6_same_next_hops_as_per_host(topo, desired)
    hosts = sorted((h for h in topo.hosts.values() if ":" in h.ip), key=lambda h: h.ip)
    pairs = list(itertools.permutations(hosts, 2))
    for src, dst in pairs[:: max(1, len(pairs) // 400)]:
        t = trace(desired, topo, src.dpid, src.port, _ipv6(src, dst))
        assert t.delivered == {(dst.dpid, dst.port)} and not t.looped and not t.to_controller, (src, dst, t)
        t = trace(desired, topo, src.dpid, src.port, _solicit(src, dst.ip))
        assert t.delivered == {(dst.dpid, dst.port)} and not t.looped and t.to_controller == [src.dpid]
    starts = [(h.dpid, h.port) for h in hosts[:: max(1, len(hosts) // 8)]] + \
        [(k.dst, k.dst_port) for k in topo.live_links()][:: max(1, len(topo.links) // 24)]
    for address in unknown_ipv6(topo):
        for dpid, port in starts:
            t = trace(desired, topo, dpid, port, {"eth_type": ETH_IPV6, "ipv6_dst": address, "ip_proto": 17})
            assert not t.looped and not t.delivered and (t.to_controller or t.dropped), (address, dpid, port, t)
    src = hosts[0]
    t = trace(desired, topo, src.dpid, src.port, {"eth_type": ETH_IPV6, "ipv6_dst": "2001:db8::1"})
    assert t.to_controller == [src.dpid] and not t.delivered


def test_compact_ipv6_after_link_failures():
    topo = topologies.dual_stack(topologies.fat_tree(4, aligned=True))
    fail_links(topo, 2, 3)
    if not infer_tiers(topo.graph(), topo.access_switches()).is_clos:
        pytest.skip("the failures left no Clos")
    desired, _ = clos_plan(topo)
    assert_ipv6_same_next_hops_as_per_host(topo, desired)
    for rules in desired.values():
        assert not ambiguous(rules), ambiguous(rules)[:2]


def test_compact_ipv6_tables_are_much_smaller_than_per_host_on_an_aligned_fabric():
    """k=8 pod-aligned dual stack: IPv6 destinations become a handful of prefixes per switch; what remains per
    host is its solicitation entry (``ipv6_nd_target`` cannot be masked)."""
    topo = topologies.dual_stack(topologies.fat_tree(8, aligned=True))
    desired, _ = clos_plan(topo)
    per_host = forwarding.per_host_plan(topo, {}, False, topo.graph())
    for dpid in desired:
        compact = ipv6_table1(desired[dpid])
        reference = ipv6_table1(per_host[dpid])
        destinations = [r for r in compact if "ipv6_nd_target" not in dict(r.match)]
        assert len(destinations) * 8 <= len(reference) // 2, (dpid, len(destinations), len(reference))
        assert len(compact) < len(reference)


def test_no_ipv6_prefix_holds_the_multicast_range():
    """Hosts far apart (unique-local, documentation, link-local addresses) would share a prefix reaching into
    ff00::/8: it is split instead, so a solicitation still meets its target's own entry."""
    topo = topologies.dual_stack(topologies.fat_tree(4))
    for i, (ip, host) in enumerate(zip(("2001:db8::7", "fe80::7", "fe80::8"), list(topo.hosts.values())[3:])):
        assert topo.learn_host(ip, f"00:00:00:00:aa:{i:02x}", host.dpid, host.port)
    desired, _ = clos_plan(topo)
    for rules in desired.values():
        for r in ipv6_table1(rules):
            value = dict(r.match)["ipv6_dst"]
            if isinstance(value, tuple):
                plen = bin(int(ipaddress.IPv6Address(value[1]))).count("1")
                net = ipaddress.IPv6Network(f"{value[0]}/{plen}")
                assert not net.overlaps(ipaddress.IPv6Network("ff00::/8")), r
    hosts = [h for h in topo.hosts.values() if ":" in h.ip]
    for src, dst in itertools.permutations(hosts, 2):
        if (src.dpid, src.port) != (dst.dpid, dst.port):
            t = trace(desired, topo, src.dpid, src.port, _solicit(src, dst.ip))
            assert t.delivered == {(dst.dpid, dst.port)} and not t.looped, (src, dst, t)


def test_ipv6_prefix_matches_read_back_as_ryu_writes_them():
    assert forwarding.prefix_matches(forwarding.ip_int("fd00::a01:0"), 112, 128) == \
        (match(eth_type=ETH_IPV6, ipv6_dst=("fd00::a01:0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:0")),)
    assert forwarding.prefix_matches(forwarding.ip_int("fd00::a01:7"), 128, 128) == \
        forwarding.host_matches("fd00::a01:7")[:1]
