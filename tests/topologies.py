"""Controller-side topology fixtures (Topology objects wired like the Mininet topologies), shared by unit tests.

Port numbers follow the order links are added, as Mininet numbers them, and DPIDs and host addresses come from
the same numbering as the Mininet topology files, so a test reads like the real fabric at any size.
"""

from controller.state.topology import Topology
from mininet_topos.common import fat_tree_dpids, host_ip, host_ipv6, host_mac, leaf_spine_dpids


class _Builder:
    def __init__(self):
        self.topo = Topology()
        self.next_port = {}
        self.host_n = 0

    def switch(self, dpid):
        self.topo.add_switch(dpid)
        self.next_port[dpid] = 1
        return dpid

    def _port(self, dpid):
        port = self.next_port[dpid]
        self.next_port[dpid] += 1
        self.topo.port_up(dpid, port)
        return port

    def link(self, a, b):
        pa, pb = self._port(a), self._port(b)
        self.topo.add_link(a, pa, b, pb)
        self.topo.add_link(b, pb, a, pa)

    def host(self, dpid, learn=True, ip=None):
        self.host_n += 1
        n = self.host_n
        port = self._port(dpid)
        if learn:
            self.topo.learn_host(ip or host_ip(n), host_mac(n), dpid, port)
        return port


def fat_tree(k=4, hosts=True, aligned=False):
    """k-ary fat-tree numbered like mininet_topos/fattree.py (core 3001+i, aggregation 2000+100*pod+i, edge
    1000+100*pod+i up to k=10); hosts 10.0.0.1.. in pod -> edge -> host order, or with ``aligned``
    10.pod.edge.host (host from 1: per-rack subnets, as a real fabric numbers them)."""
    b, half = _Builder(), k // 2
    core_ids, agg_ids, edge_ids = fat_tree_dpids(k)
    cores = [b.switch(n) for n in core_ids]
    for pod in range(k):
        aggs = [b.switch(n) for n in agg_ids[pod]]
        edges = [b.switch(n) for n in edge_ids[pod]]
        for i, agg in enumerate(aggs):
            for j in range(half):
                b.link(agg, cores[i * half + j])
            for edge in edges:
                b.link(edge, agg)
        for e, edge in enumerate(edges):
            for h in range(half):
                b.host(edge, learn=hosts, ip=f"10.{pod}.{e}.{h + 1}" if aligned else None)
    return b.topo


def leaf_spine(spines=4, leaves=4, hosts_per_leaf=2, hosts=True, aligned=False):
    """Leaf-spine numbered like mininet_topos/leafspine.py (spine 201.., leaf 101.. up to 99 of each); hosts
    10.0.0.1.. in leaf order, or with ``aligned`` 10.leaf.0.host (a subnet per leaf)."""
    b = _Builder()
    spine_dpids, leaf_dpids = leaf_spine_dpids(spines, leaves)
    spine_ids = [b.switch(n) for n in spine_dpids]
    for i, n in enumerate(leaf_dpids):
        leaf = b.switch(n)
        for spine in spine_ids:
            b.link(leaf, spine)
        for h in range(hosts_per_leaf):
            b.host(leaf, learn=hosts, ip=f"10.{i}.0.{h + 1}" if aligned else None)
    return b.topo


def ring(n=5):
    """Not a Clos: n switches in a ring, one host each."""
    b = _Builder()
    ids = [b.switch(i + 1) for i in range(n)]
    for i in range(n):
        b.link(ids[i], ids[(i + 1) % n])
    for s in ids:
        b.host(s)
    return b.topo


ipv6_of = host_ipv6  # (the emulated hosts' IPv6 addresses: mininet_topos.common)


def dual_stack(topo):
    """Every IPv4 host of ``topo`` given its IPv6 address (``host_ipv6``) at its port, with its MAC."""
    for host in [h for h in topo.hosts.values() if ":" not in h.ip]:
        assert topo.learn_host(host_ipv6(host.ip), host.mac, host.dpid, host.port)
    return topo
