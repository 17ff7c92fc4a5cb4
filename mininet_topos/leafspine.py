"""2-tier leaf-spine (Clos): every leaf linked to every spine, HOSTS_PER_LEAF hosts under each leaf.

    sudo mn --custom mininet_topos/leafspine.py --topo leafspine,4,4,2 --controller remote --switch ovs
    sudo mn --custom mininet_topos/leafspine.py --topo leafspine,4,4,2,bw=10 ...

Against several controllers (a controller cluster, README "Controller cluster"): repeat ``--controller``, one
remote controller per address, and every switch connects to all of them::

    sudo mn --custom mininet_topos/leafspine.py --topo leafspine,4,4,2,bw=10 --switch ovs,protocols=OpenFlow13 \
        --controller remote,ip=127.0.0.1,port=6654 --controller remote,ip=127.0.0.1,port=6655

Hosts are h1..h(LEAVES*HOSTS_PER_LEAF) leaf by leaf; DPIDs are explicit and distinct at any size
(``common.leaf_spine_dpids``: spine 200+i, leaf 100+i up to 99 of each, wider beyond) only for readable logs:
the controller infers tiers from the graph.
"""

import os
import sys

from mininet.topo import Topo

try:
    from mininet_topos.common import check_host_count, host_params, leaf_spine_dpids, link_params, switch_params
except ImportError:  # `mn --custom FILE` under a Python without this project (apt's mn, which runs FILE
    # without __file__: the code's own file name is FILE's path)
    exec(open(os.path.join(os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename)), "common.py")).read())


class LeafSpineTopo(Topo):
    def build(self, spines=4, leaves=4, hosts_per_leaf=2, bw=None, datapath="user"):
        spines, leaves, hosts_per_leaf = int(spines), int(leaves), int(hosts_per_leaf)
        if min(spines, leaves, hosts_per_leaf) < 1:
            raise ValueError("spines, leaves and hosts per leaf must all be >= 1")
        spine_ids, leaf_ids = leaf_spine_dpids(spines, leaves)
        check_host_count(leaves * hosts_per_leaf)
        link = link_params(bw)
        spine_names = [self.addSwitch(f"s{i + 1}", **switch_params(n, datapath)) for i, n in enumerate(spine_ids)]
        host_n = 0
        for i, leaf_id in enumerate(leaf_ids):
            leaf = self.addSwitch(f"l{i + 1}", **switch_params(leaf_id, datapath))
            for spine in spine_names:
                self.addLink(leaf, spine, **link)
            for _ in range(hosts_per_leaf):
                host_n += 1
                self.addLink(self.addHost(f"h{host_n}", **host_params(host_n)), leaf, **link)


topos = {"leafspine": LeafSpineTopo}
