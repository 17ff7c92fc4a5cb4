"""A new-flow storm from one host with the real controller, Open vSwitch and Mininet (issue 10's acceptance):
20,000 new UDP 5-tuples per second for 15 s while 4 iperf3 pairs run. The switches' packet-in rate limit and
the controller's new-flow budget bound what reaches the controller: no switch disconnects, the pairs keep
their rate, and every host still reaches every other during and right after the storm."""

import sys
import time

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows, received_mbps, steady_mbps
from tests.integration.harness import ping_all, te_config, wait_until

CONFIG = te_config()
PAIRS = [("h5", "h13"), ("h6", "h14"), ("h7", "h15"), ("h8", "h16")]  # pods 1 -> 3, away from the storm
RATE, STORM_S = 20000, 15
STORM = ("import socket, sys, time\n"
         "dst, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])\n"
         "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
         "start, sent = time.time(), 0\n"
         "while time.time() - start < seconds:\n"
         "    due = int((time.time() - start) * rate)\n"
         "    while sent < due:\n"
         "        s.sendto(b'x', (dst, 1024 + sent % 60000))\n"  # one new 5-tuple per packet
         "        sent += 1\n"
         "    time.sleep(0.001)\n"
         "print(sent)\n")


def test_new_flow_storm_from_one_host(fabric_factory):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    flows = Iperf3Flows(fab.net, PAIRS, seconds=8 + STORM_S + 8)
    try:
        time.sleep(8)
        storm = fab.net.get("h1").popen([sys.executable, "-c", STORM, fab.net.get("h2").IP(), str(RATE),
                                         str(STORM_S)])
        time.sleep(STORM_S / 2)
        failed = []
        during = ping_all(fab.net, failed=failed)
        sent = int(storm.communicate(timeout=STORM_S + 30)[0].decode().strip() or 0)
        after = ping_all(fab.net)
    finally:
        reports = flows.reports()
    rates = [received_mbps(r) for r in reports]
    settled = [sum(r[-6:]) / 6 for r in rates]  # pinned and steady, after the storm
    storm_rates = [sum(r[8:8 + STORM_S]) / STORM_S for r in rates]
    log = fab.controller.log()
    print(f"storm sent {sent} packets ({sent / STORM_S:.0f}/s); pairs during {storm_rates} after {settled}; "
          f"ping loss during {during} {failed} after {after}; over budget "
          f"{fab.controller.metric('mlroute_packet_in_total', {'kind': 'newflow_over_budget'}):.0f}")
    assert sent >= 0.9 * RATE * STORM_S
    assert "disconnected" not in log, log[-2000:]
    assert all(s >= 0.9 * b for s, b in zip(storm_rates, settled)), (storm_rates, settled)
    # the storming host's own pings queue behind its 20,000 packets/s on its own 10 Mb/s link: every other
    # pair must get through during the storm, and every pair right after it
    assert [pair for pair in failed if "h1" not in pair] == [] and after == 0
    assert all(steady_mbps(r, 0) > 0 for r in reports)
