import dataclasses

from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.state.topology import CONFLICT, IGNORED, LEARNED, Host, Topology
from tests import topologies


def test_hosts_are_never_learned_on_fabric_ports():
    topo = topologies.fat_tree(4, hosts=False)
    link = topo.live_links()[0]
    assert not topo.learn_host("10.0.0.99", "00:00:00:00:00:99", link.src, link.src_port)
    edge_access = sorted(topo.access_ports(1000))
    assert topo.learn_host("10.0.0.1", "00:00:00:00:00:01", 1000, edge_access[0])
    assert not topo.learn_host("10.0.0.1", "00:00:00:00:00:01", 1000, edge_access[0])  # nothing new


def test_a_port_with_a_bound_host_never_becomes_a_fabric_port_until_the_host_leaves_it():
    topo = topologies.fat_tree(4, hosts=False)
    topo.add_switch(9, [1, 2])
    topo.add_switch(8, [1])
    topo.learn_host("10.0.0.50", "00:00:00:00:00:50", 9, 1)
    assert not topo.add_link(9, 1, 8, 1) and not topo.add_link(8, 1, 9, 1)  # both directions claimed: held
    assert not topo.is_fabric_port(9, 1) and "10.0.0.50" in topo.hosts
    # the host turns out to be elsewhere (its old port went down, then it answers from port 2): the link goes in
    topo.port_down(9, 1)
    assert topo.learn_host("10.0.0.50", "00:00:00:00:00:50", 9, 2)
    topo.port_up(9, 1)
    assert topo.add_link(9, 1, 8, 1) is False and topo.add_link(8, 1, 9, 1) is True
    assert topo.is_fabric_port(9, 1) and topo.hosts["10.0.0.50"].port == 2


def test_live_links_need_both_directions_and_live_ports():
    topo = topologies.leaf_spine(2, 2, 1)
    assert len(topo.live_links()) == 8
    link = topo.live_links()[0]
    topo.remove_link(link.src, link.src_port, link.dst, link.dst_port)
    assert len(topo.live_links()) == 6  # the reverse direction alone is not usable
    topo2 = topologies.leaf_spine(2, 2, 1)
    topo2.port_down(101, 1)
    assert len(topo2.live_links()) == 6


def test_switch_leaving_takes_its_links_and_hosts():
    topo = topologies.leaf_spine(2, 2, 1)
    topo.remove_switch(101)
    assert all(101 not in (link.src, link.dst) for link in topo.links.values())
    assert all(h.dpid != 101 for h in topo.hosts.values())


def test_json_view_has_the_documented_shape():
    topo = topologies.leaf_spine(2, 2, 1)
    j = topo.to_json({201: "spine"})
    assert set(j) == {"switches", "links", "hosts"}
    assert {"dpid": 201, "tier": "spine"} in j["switches"]
    assert set(j["links"][0]) == {"src", "src_port", "dst", "dst_port"}
    assert set(j["hosts"][0]) == {"ip", "mac", "dpid", "port"}


_OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "port_down", "switch_down"]),
                          st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)), max_size=40)


@settings(max_examples=200)  # cheap: plain dict updates
@given(_OPS)
@example([("add", 1, 1, 2, 1), ("add", 1, 1, 3, 2)])  # a re-cabled port
def test_fabric_ports_always_match_the_links_after_any_sequence_of_events(ops):
    """The endpoint index behind is_fabric_port / fabric_ports never drifts from the links it summarises."""
    topo = Topology()
    for dpid in range(1, 5):
        topo.add_switch(dpid, [1, 2, 3])
    for op, a, ap, b, bp in ops:
        if op == "add":
            topo.add_link(a, ap, b, bp)
        elif op == "remove":
            topo.remove_link(a, ap, b, bp)
        elif op == "port_down":
            topo.port_down(a, ap)
        else:
            topo.remove_switch(a)
            topo.add_switch(a, [1, 2, 3])
        for dpid in range(1, 5):
            scanned = {link.src_port for link in topo.links.values() if link.src == dpid} | {
                link.dst_port for link in topo.links.values() if link.dst == dpid}
            assert topo.fabric_ports(dpid) == scanned
            assert all(topo.is_fabric_port(dpid, p) == (p in scanned) for p in (1, 2, 3))


# -- issue 10: no hijack by a conflicting claim, no link from LLDP forged on a host port ---------------------

def test_a_conflicting_claim_is_refused_while_the_old_location_is_up():
    topo = topologies.fat_tree(4)
    victim, attacker = topo.hosts["10.0.0.9"], topo.hosts["10.0.0.1"]
    claim = topo.claim(victim.ip, attacker.mac, attacker.dpid, attacker.port)
    assert claim.verdict == CONFLICT and claim.holders == (victim,)
    assert topo.hosts[victim.ip] == victim and topo.hosts[attacker.ip] == attacker
    assert not topo.learn_host(victim.ip, "02:00:00:00:00:99", attacker.dpid, attacker.port)  # any MAC
    assert topo.hosts[victim.ip] == victim


def test_a_binding_moves_when_its_old_port_is_down():
    topo = topologies.fat_tree(4)
    victim = topo.hosts["10.0.0.9"]
    free = Host(victim.ip, victim.mac, 1000, 99)
    topo.port_up(1000, 99)
    assert topo.claim(*dataclasses.astuple(free)).verdict == CONFLICT
    topo.port_down(victim.dpid, victim.port)
    assert topo.claim(*dataclasses.astuple(free)).verdict == LEARNED and topo.hosts[victim.ip] == free
    assert topo.hosts_at(victim.dpid, victim.port) == []


def test_a_confirmed_move_replaces_the_old_binding():
    topo = topologies.fat_tree(4)
    victim = topo.hosts["10.0.0.9"]
    topo.port_up(1000, 99)
    new = Host(victim.ip, victim.mac, 1000, 99)
    holders = topo.claim(*dataclasses.astuple(new)).holders
    assert topo.move_host(new, holders) and topo.hosts[victim.ip] == new and topo.host_by_mac(victim.mac) == new


def test_a_second_address_on_the_same_port_is_not_a_conflict():
    topo = topologies.fat_tree(4)
    h1 = topo.hosts["10.0.0.1"]
    assert topo.claim("10.0.1.1", h1.mac, h1.dpid, h1.port).verdict == LEARNED
    assert topo.hosts[h1.ip] == h1


def test_forged_lldp_on_a_host_port_neither_creates_nor_deletes_a_link():
    topo = topologies.fat_tree(4)
    attacker = topo.hosts["10.0.0.1"]
    real = next(link for link in topo.live_links() if link.src == 2000)  # an aggregation switch's port
    before = (dict(topo.links), topo.fabric_ports(attacker.dpid))
    # Ryu reports the forged claim (src = the real port, dst = the attacker's port), then the displaced link
    assert not topo.add_link(real.src, real.src_port, attacker.dpid, attacker.port)
    assert not topo.remove_link(real.src, real.src_port, real.dst, real.dst_port)
    assert (dict(topo.links), topo.fabric_ports(attacker.dpid)) == before
    assert topo.hosts[attacker.ip] == attacker and attacker.port in topo.access_ports(attacker.dpid)
    # the real LLDP comes back: Ryu re-adds the real link (known) and deletes the forged one (pending)
    assert not topo.add_link(real.src, real.src_port, real.dst, real.dst_port)
    assert not topo.remove_link(real.src, real.src_port, attacker.dpid, attacker.port)
    assert topo.pending == {} and dict(topo.links) == before[0]
    # once the forged claim is gone, a real deletion is honoured again
    assert topo.remove_link(real.src, real.src_port, real.dst, real.dst_port)


def test_forged_lldp_from_a_port_that_never_sent_anything_is_held_too():
    topo = topologies.fat_tree(4)
    topo.port_up(1000, 99)  # a silent host: no binding
    real = next(link for link in topo.live_links() if link.src == 2000)
    assert not topo.add_link(real.src, real.src_port, 1000, 99)  # one direction only: a host cannot send the other
    assert topo.links[(real.src, real.src_port)] == real and not topo.is_fabric_port(1000, 99)
    assert topo.claim("10.0.0.77", "02:00:00:00:00:77", 1000, 99).verdict == IGNORED  # not learnable meanwhile


def test_a_link_counts_once_both_directions_are_claimed():
    topo = Topology()
    topo.add_switch(1, [1])
    topo.add_switch(2, [1])
    assert not topo.add_link(1, 1, 2, 1) and topo.links == {} and topo.access_ports(1) == set()
    assert topo.add_link(2, 1, 1, 1) and len(topo.live_links()) == 2


def same_graph(a, b):
    """Equal nodes, neighbours and edge data, in the same order (what a whole build gives)."""
    return list(a.nodes(data=True)) == list(b.nodes(data=True)) and \
        [(n, list(nbrs.items())) for n, nbrs in a.adjacency()] == [(n, list(nbrs.items())) for n, nbrs in b.adjacency()]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("down", "up", "drop", "parallel", "switch", "unplug")),
                          st.integers(0, 10 ** 6)), max_size=25))
def test_the_live_graph_after_links_dropped_is_the_one_built_whole(events):
    """``graph()`` derives the graph from the last one where links were only dropped since (a failure): after
    any sequence of ports down and up, links dropped and restored, parallel links and switches gone, it is
    the graph built whole from every live link, in the same order."""
    topo = topologies.fat_tree(4)
    cables = [lnk for lnk in topo.live_links() if lnk.src < lnk.dst]
    spare = {d: 100 for d in topo.ports}
    assert same_graph(topo.graph(), topo._whole_graph()[0])
    for what, n in events:
        link = cables[n % len(cables)]
        if what == "down":
            topo.port_down(link.src, link.src_port)
            topo.port_down(link.dst, link.dst_port)
        elif what == "up":
            topo.port_up(link.src, link.src_port)
            topo.port_up(link.dst, link.dst_port)
            topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
            topo.add_link(link.dst, link.dst_port, link.src, link.src_port)
        elif what == "drop":
            topo.remove_link(link.src, link.src_port, link.dst, link.dst_port)
        elif what == "parallel":  # a second cable between the same switches
            spare[link.src] += 1
            spare[link.dst] += 1
            a, b = spare[link.src], spare[link.dst]
            topo.port_up(link.src, a)
            topo.port_up(link.dst, b)
            topo.add_link(link.src, a, link.dst, b)
            topo.add_link(link.dst, b, link.src, a)
        elif what == "switch":
            topo.remove_switch(link.dst)
            if n % 2:
                topo.add_switch(link.dst, [link.dst_port])
        else:  # one end's port down only
            topo.port_down(link.src, link.src_port)
        if n % 3:  # not every event is followed by a graph: drops accumulate
            assert same_graph(topo.graph(), topo._whole_graph()[0])
    assert same_graph(topo.graph(), topo._whole_graph()[0])


def test_a_failure_derives_the_graph_and_anything_else_builds_it_whole(monkeypatch):
    topo = topologies.fat_tree(4)
    topo.graph()
    built = []
    whole = topo._whole_graph
    monkeypatch.setattr(topo, "_whole_graph", lambda: built.append(1) or whole())
    link = topo.live_links()[0]
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    g = topo.graph()
    assert not built and not g.has_edge(link.src, link.dst)
    topo.port_up(link.src, link.src_port)
    topo.graph()
    assert built == [1]
