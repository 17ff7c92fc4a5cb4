"""k-ary fat-tree (Al-Fares et al.): (k/2)^2 core, k pods of k/2 aggregation + k/2 edge switches, k^3/4 hosts.

    sudo mn --custom mininet_topos/fattree.py --topo fattree,4 --controller remote --switch ovs
    sudo mn --custom mininet_topos/fattree.py --topo fattree,4,bw=10 ...

Against several controllers (a controller cluster, README "Controller cluster"): repeat ``--controller``, one
remote controller per address, and every switch connects to all of them::

    sudo mn --custom mininet_topos/fattree.py --topo fattree,4,bw=10 --switch ovs,protocols=OpenFlow13 \
        --controller remote,ip=127.0.0.1,port=6654 --controller remote,ip=127.0.0.1,port=6655 \
        --controller remote,ip=127.0.0.1,port=6656

(mn names the controllers c0, c1, ...: in its CLI ``c1`` is the core switch c1, which shadows the controller.)

Hosts are h1..h(k^3/4) in pod -> edge -> host order (the order stride patterns use), h n has IP 10.a.b.c = n.
DPIDs are explicit and distinct at every k (``common.fat_tree_dpids``: core 3001+i, aggregation 2000+100*pod+i,
edge 1000+100*pod+i up to k=10, wider decimal fields beyond) only so logs are readable: the controller infers
tiers from the graph, not from DPIDs.
"""

import os
import random
import sys

from mininet.topo import Topo

try:
    from mininet_topos.common import fat_tree_dpids, host_params, link_params, switch_params
except ImportError:  # `mn --custom FILE` under a Python without this project (apt's mn, which runs FILE
    # without __file__: the code's own file name is FILE's path)
    exec(open(os.path.join(os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename)), "common.py")).read())


class FatTreeTopo(Topo):
    def build(self, k=4, bw=None, datapath="user", names="tiers", seed=0):
        """``names``: ``tiers`` (c1.., a<pod>_<i>, e<pod>_<i>, DPIDs by tier: readable logs) or ``shuffled``
        (s1..sN in a seeded random order, DPID N: a fabric whose names and numbers say nothing of its tiers,
        as a user's own topology file may be), e.g. ``--topo fattree,6,names=shuffled,seed=7``."""
        k = int(k)
        core_ids, agg_ids, edge_ids = fat_tree_dpids(k)  # TopologySizeError (a ValueError) for a bad k
        half = k // 2
        link = link_params(bw)
        switch = _namer(self, names, int(seed), 5 * k * k // 4, datapath)
        cores = [switch(f"c{i + 1}", n) for i, n in enumerate(core_ids)]
        host_n = 0
        for pod in range(k):
            aggs = [switch(f"a{pod}_{i}", n) for i, n in enumerate(agg_ids[pod])]
            edges = [switch(f"e{pod}_{i}", n) for i, n in enumerate(edge_ids[pod])]
            for i, agg in enumerate(aggs):
                for j in range(half):
                    self.addLink(agg, cores[i * half + j], **link)
                for edge in edges:
                    self.addLink(edge, agg, **link)
            for edge in edges:
                for _ in range(half):
                    host_n += 1
                    self.addLink(self.addHost(f"h{host_n}", **host_params(host_n)), edge, **link)


def _namer(topo, names, seed, switches, datapath):
    """``switch(name, dpid)`` adding a switch under the naming scheme ``names`` (FatTreeTopo.build)."""
    if names == "tiers":
        return lambda name, n: topo.addSwitch(name, **switch_params(n, datapath))
    if names != "shuffled":
        raise ValueError(f"names must be tiers or shuffled, not {names!r}")
    numbers = list(range(1, switches + 1))
    random.Random(seed).shuffle(numbers)
    drawn = iter(numbers)

    def shuffled(_name, _n):
        n = next(drawn)
        return topo.addSwitch(f"s{n}", **switch_params(n, datapath))
    return shuffled


topos = {"fattree": FatTreeTopo}
