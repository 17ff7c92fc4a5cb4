"""Recovery from read-back tables (controller.desired.recovery), as plain data: the rules a converged controller left on
the switches, read back by a restarted one whose topology LLDP has only partly found."""

from controller.desired import sync
from controller.desired.recovery import Recovered
from controller.state.tiers import infer_tiers
from controller.state.topology import Topology
from tests import topologies

CONVERGED = topologies.fat_tree(4)
CORE, POD0_EDGE = 3001, 1000  # the core's port 1 faces pod 0's first aggregation switch; the edge holds h1, h2


def converged_tables():
    tiers = infer_tiers(CONVERGED.graph(), CONVERGED.access_switches(), {})
    return sync.desired_state(CONVERGED, tiers, {}, {}, stagger=True, idle_timeout=10)


def restarted(connected, links_between=()):
    """A restarted controller's topology: ``connected`` switches up, LLDP has found the links among
    ``links_between`` only, no host known."""
    topo = Topology()
    for dpid in connected:
        topo.add_switch(dpid, CONVERGED.ports[dpid])
    for link in CONVERGED.links.values():
        if link.src in links_between and link.dst in links_between:
            topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
    return topo


def read(switches):
    tables, recovered = converged_tables(), Recovered()
    for dpid in switches:
        recovered.read(dpid, tables[dpid].flows.values())
        recovered.read_groups(dpid, tables[dpid].groups.values())
    return recovered


def test_a_core_read_back_before_its_neighbours_binds_no_host_at_its_ports():
    # the core reconnected first and LLDP has found only its links to the other pods' aggregation switches:
    # its single-output rules toward pod 0's hosts leave by a port no link is known at yet (the live bug: hosts
    # learned at a core's fabric port, "3 core, 9 edge", the real link refused)
    others = [d for d in CONVERGED.ports if d < 2000 or d > 2100] + [2100, 2101]  # all but pod 0's aggregation
    others = [d for d in others if not 1000 <= d < 1100]  # nor pod 0's edges
    topo = restarted(others, links_between=others)
    assert topo.fabric_ports(CORE) and not topo.is_fabric_port(CORE, 1)  # port 1 looks like a host port
    recovered = read(others)
    found = recovered.resolve_hosts(topo, settled=set(others))
    assert all(dpid >= 1000 and dpid < 2000 for _, _, dpid, _ in found), found  # hosts only at edges
    assert {ip for ip, *_ in found} == {ip for ip, h in CONVERGED.hosts.items() if not 1000 <= h.dpid < 1100}
    assert not any(dpid == CORE for routes in recovered.host_routes.values() for dpid in routes if
                   (dpid, routes[dpid]) in {(d, p) for _, _, d, p in found})


def test_the_read_back_marks_the_ports_its_rules_used_toward_switches():
    recovered = read([CORE, POD0_EDGE])
    assert recovered.fabric[CORE] == set(CONVERGED.ports[CORE])  # every core port is a fabric port
    assert recovered.fabric[POD0_EDGE] == CONVERGED.fabric_ports(POD0_EDGE)  # the uplinks, not the host ports


def test_a_host_known_only_from_a_forwarding_rule_waits_until_its_switch_has_settled():
    tables, recovered = converged_tables(), Recovered()
    for dpid in CONVERGED.ports:
        flows = [r for r in tables[dpid].flows.values() if "eth_src" not in dict(r.match)]  # no host guards
        recovered.read(dpid, flows)
        recovered.read_groups(dpid, tables[dpid].groups.values())
    topo = restarted(CONVERGED.ports, links_between=CONVERGED.ports)
    assert recovered.resolve_hosts(topo, settled=()) == []  # LLDP may not have classified the ports yet
    found = recovered.resolve_hosts(topo, settled=set(CONVERGED.ports))
    assert {(ip, d, p) for ip, _, d, p in found} == {(ip, h.dpid, h.port) for ip, h in CONVERGED.hosts.items()}


def test_a_host_guard_at_a_port_that_faces_switches_is_not_taken():
    tables, recovered = converged_tables(), Recovered()
    recovered.read(POD0_EDGE, tables[POD0_EDGE].flows.values())
    h1 = CONVERGED.hosts["10.0.0.1"]
    uplink = min(CONVERGED.fabric_ports(POD0_EDGE))
    recovered.bound[h1.ip] = (h1.mac, POD0_EDGE, uplink)  # a stale or forged guard at an uplink
    topo = restarted([POD0_EDGE])  # no link found yet: only the edge's own rules say the port faces switches
    found = {ip: (d, p) for ip, _, d, p in recovered.resolve_hosts(topo)}
    h2 = CONVERGED.hosts["10.0.0.2"]
    assert found == {h2.ip: (h2.dpid, h2.port)}  # h2's guard at its own port; h1's at the uplink is not taken


def test_a_flow_riding_its_declared_pairs_pin_is_read_back_on_the_pairs_path():
    """A 5-tuple not pinned on its own rides its declared host pair's pin: its counting rule sends it to the
    pair's first hop and the pair's hop rules carry it on. Read back, its path follows those rules up to the core,
    not the shortest way down from where its own rules end (live, after a restart: 3 of 8 pins read onto shared
    links, and the first decision moved 5 elephants of running jobs)."""
    import networkx as nx

    from controller.desired.te_rules import te_rules
    from controller.state.flowkey import FlowKey
    from controller.state.jobs import HostPair

    graph = CONVERGED.graph()
    src, dst = CONVERGED.hosts["10.0.0.1"], CONVERGED.hosts["10.0.0.14"]
    agg = next(n for n in graph[src.dpid] if n not in (dst.dpid,) and n != src.dpid)
    guessed = nx.shortest_path(graph, agg, dst.dpid)  # what reading down from the aggregation switch would give
    core = next(c for c in graph[agg] if c != src.dpid and c != guessed[1] and c // 1000 == guessed[1] // 1000)
    path = (src.dpid, agg, core, *nx.shortest_path(graph, core, dst.dpid)[1:])
    key = FlowKey(src.ip, dst.ip, 6, 40000, 5201)
    tiers = infer_tiers(graph, CONVERGED.access_switches(), {})
    rules = te_rules(CONVERGED, tiers, {key: (src.dpid, src.port)}, {HostPair(src.ip, dst.ip): path}, 10, graph)
    recovered = Recovered()
    for dpid in CONVERGED.ports:
        recovered.read(dpid, [r for r in rules if r.dpid == dpid])
    assert recovered.pinned_path(key, CONVERGED, graph, dst.dpid) == path != tuple([src.dpid, *guessed])


def test_a_pin_over_a_link_not_found_yet_may_still_read_one_out_of_a_port_that_is_down_never_will():
    """The recovery gate holds decisions only for pins that may still read as paths: a hop out of a live port
    whose link LLDP has not found yet. A cable cut while the controller was away leaves its port down: that pin
    is broken at once (before, the gate held every decision up to LLDP_SETTLE_S for it)."""
    import networkx as nx

    from controller.desired.te_rules import te_rules
    from controller.state.flowkey import FlowKey

    graph = CONVERGED.graph()
    src, dst = CONVERGED.hosts["10.0.0.1"], CONVERGED.hosts["10.0.0.14"]
    agg = next(n for n in graph[src.dpid] if n != dst.dpid)
    core = next(c for c in graph[agg] if c // 1000 == CORE // 1000)
    path = (src.dpid, agg, core, *nx.shortest_path(graph, core, dst.dpid)[1:])
    key = FlowKey(src.ip, dst.ip, 6, 40000, 5201)
    tiers = infer_tiers(graph, CONVERGED.access_switches(), {})
    rules = te_rules(CONVERGED, tiers, {key: (src.dpid, src.port)}, {key: path}, 10, graph)
    recovered = Recovered()
    for dpid in CONVERGED.ports:
        recovered.read(dpid, [r for r in rules if r.dpid == dpid])
    assert recovered.read_pin(key, CONVERGED, graph, dst.dpid) == (path, False)

    everything_but_the_core = [d for d in CONVERGED.ports if d != core]
    topo = restarted(CONVERGED.ports, links_between=everything_but_the_core)  # the core's links not found yet
    assert recovered.read_pin(key, topo, topo.graph(), dst.dpid) == (None, True)
    up_port = next(p for (d, p), link in CONVERGED.links.items() if d == agg and link.dst == core)
    topo.port_down(agg, up_port)  # the cable was cut while the controller was away
    assert recovered.read_pin(key, topo, topo.graph(), dst.dpid) == (None, False)
    assert recovered.pinned_path(key, topo, topo.graph(), dst.dpid) is None
