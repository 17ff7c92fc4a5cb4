"""Controller-side topology fixtures (Topology objects wired like the Mininet topologies), shared by unit tests.

Port numbers follow the order links are added, as Mininet numbers them, so a test reads like the real fabric.
"""

from controller.topology import Topology


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

    def host(self, dpid, learn=True):
        self.host_n += 1
        n = self.host_n
        port = self._port(dpid)
        if learn:
            self.topo.learn_host(f"10.0.0.{n}", f"00:00:00:00:00:{n:02x}", dpid, port)
        return port


def fat_tree(k=4, hosts=True):
    """k-ary fat-tree: core 3000+i, aggregation 2000+100*pod+i, edge 1000+100*pod+i; hosts 10.0.0.1.. in order."""
    b, half = _Builder(), k // 2
    cores = [b.switch(3001 + i) for i in range(half * half)]
    for pod in range(k):
        aggs = [b.switch(2000 + 100 * pod + i) for i in range(half)]
        edges = [b.switch(1000 + 100 * pod + i) for i in range(half)]
        for i, agg in enumerate(aggs):
            for j in range(half):
                b.link(agg, cores[i * half + j])
            for edge in edges:
                b.link(edge, agg)
        for edge in edges:
            for _ in range(half):
                b.host(edge, learn=hosts)
    return b.topo


def leaf_spine(spines=4, leaves=4, hosts_per_leaf=2, hosts=True):
    b = _Builder()
    spine_ids = [b.switch(201 + i) for i in range(spines)]
    for i in range(leaves):
        leaf = b.switch(101 + i)
        for spine in spine_ids:
            b.link(leaf, spine)
        for _ in range(hosts_per_leaf):
            b.host(leaf, learn=hosts)
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
