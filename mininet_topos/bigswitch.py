"""The non-blocking reference: the same hosts (same IPs, MACs and shaped links) on one big switch.

    sudo mn --custom mininet_topos/bigswitch.py --topo bigswitch,16,bw=10 ...
"""

import os
import sys

from mininet.topo import Topo

try:
    from mininet_topos.common import check_host_count, host_params, link_params, switch_params
except ImportError:  # `mn --custom FILE` under a Python without this project (apt's mn, which runs FILE
    # without __file__: the code's own file name is FILE's path)
    exec(open(os.path.join(os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename)), "common.py")).read())


class BigSwitchTopo(Topo):
    def build(self, n_hosts=16, bw=None, datapath="user"):
        check_host_count(int(n_hosts))
        switch = self.addSwitch("bs1", **switch_params(1, datapath))
        for n in range(1, int(n_hosts) + 1):
            self.addLink(self.addHost(f"h{n}", **host_params(n)), switch, **link_params(bw))


topos = {"bigswitch": BigSwitchTopo}
