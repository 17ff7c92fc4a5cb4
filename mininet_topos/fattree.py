"""k-ary fat-tree (Al-Fares et al.): (k/2)^2 core, k pods of k/2 aggregation + k/2 edge switches, k^3/4 hosts.

    sudo mn --custom mininet_topos/fattree.py --topo fattree,4 --controller remote --switch ovs
    sudo mn --custom mininet_topos/fattree.py --topo fattree,4,bw=10 ...

Hosts are h1..h(k^3/4) in pod -> edge -> host order (the order stride patterns use), h n has IP 10.0.0.n.
DPIDs are explicit (core 3000+i, aggregation 2000+100*pod+i, edge 1000+100*pod+i, all decimal) only so logs are
readable: the controller infers tiers from the graph, not from DPIDs.
"""

import os

from mininet.topo import Topo

try:
    from mininet_topos.common import host_params, link_params, switch_params
except ImportError:  # `mn --custom FILE` under a Python without this project installed (e.g. apt's mn)
    exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "common.py")).read())


class FatTreeTopo(Topo):
    def build(self, k=4, bw=None, datapath="user"):
        k = int(k)
        if k < 2 or k % 2:
            raise ValueError(f"fat-tree arity k must be even and >= 2, got {k}")
        half = k // 2
        link = link_params(bw)
        cores = [self.addSwitch(f"c{i + 1}", **switch_params(3000 + i + 1, datapath)) for i in range(half * half)]
        host_n = 0
        for pod in range(k):
            aggs = [self.addSwitch(f"a{pod}_{i}", **switch_params(2000 + 100 * pod + i, datapath)) for i in range(half)]
            edges = [self.addSwitch(f"e{pod}_{i}", **switch_params(1000 + 100 * pod + i, datapath)) for i in range(half)]
            for i, agg in enumerate(aggs):
                for j in range(half):
                    self.addLink(agg, cores[i * half + j], **link)
                for edge in edges:
                    self.addLink(edge, agg, **link)
            for edge in edges:
                for _ in range(half):
                    host_n += 1
                    self.addLink(self.addHost(f"h{host_n}", **host_params(host_n)), edge, **link)


topos = {"fattree": FatTreeTopo}
