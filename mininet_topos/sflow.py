"""sFlow export for ``mn --custom`` users: every switch of the network exports to mlroute's collector.

Load it before the topology file, as sFlow-RT's Mininet recipe (extras/sflow.py) does: it wraps
``Mininet.start`` so that once the switches exist one ovs-vsctl call points them all at the collector, and
``Mininet.stop`` so the export is cleared before the bridges go::

    MLROUTE_SFLOW_TARGET=127.0.0.1:6343 MLROUTE_SFLOW_SAMPLING=64 \\
    mn --custom mininet_topos/sflow.py,mininet_topos/fattree.py --topo fattree,4,bw=10 \\
       --controller remote,ip=127.0.0.1 --switch ovs,protocols=OpenFlow13

Run the controller with ``te.detection: sflow`` (or ``both``) and ``sflow.port`` matching the target.
"""

import os
import subprocess
import sys

from mininet.net import Mininet

# apt's mn runs a --custom FILE without __file__: the code's own file name is FILE's path
sys.path.insert(0, os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename)))
from common import SFLOW_SAMPLING, SFLOW_TARGET, sflow_clear_command, sflow_command  # noqa: E402


def _wrap_start(start):
    def wrapped(self, *args, **kwargs):
        start(self, *args, **kwargs)
        target = os.environ.get("MLROUTE_SFLOW_TARGET", SFLOW_TARGET)
        sampling = int(os.environ.get("MLROUTE_SFLOW_SAMPLING", SFLOW_SAMPLING))
        subprocess.run(sflow_command([s.name for s in self.switches], target, sampling), check=True)
        print(f"*** sFlow: {len(self.switches)} switches export to {target}, 1-in-{sampling}")
    return wrapped


def _wrap_stop(stop):
    def wrapped(self, *args, **kwargs):
        subprocess.run(sflow_clear_command([s.name for s in self.switches]), check=False)
        stop(self, *args, **kwargs)
    return wrapped


if not getattr(Mininet, "_mlroute_sflow", False):
    Mininet.start = _wrap_start(Mininet.start)
    Mininet.stop = _wrap_stop(Mininet.stop)
    Mininet._mlroute_sflow = True
