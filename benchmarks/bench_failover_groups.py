"""Issue 20 item 4, live: how long upward traffic stops when the link it takes fails, with ECMP by SELECT groups
(each bucket watches its port: the switch drops a dead bucket itself) and without groups (plain entries spread
on source bits, controller/desired/group_free.py: the controller re-plans from the port-status event and sends
the changed entries).

k=4 fat-tree (real ryu-manager, Open vSwitch, Mininet), TE off (``te.mode: ecmp``: forwarding alone). Per
trial a UDP stream of numbered datagrams at 1,000/s goes from a host of pod 0 to a host of pod 3; after 2 s the
uplink of the source's edge switch that carries it (read from the edge's port counters) is cut. The receiver
reports the longest gap between datagrams and how many never arrived. The link comes back between trials.

Run as root after scripts/setup_env.sh, in flock /tmp/mininet.lock:
    .venv/bin/python benchmarks/bench_failover_groups.py [--trials 3]
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time

from mlroute.experiment import emulation

SENDER = ("import socket, sys, time\n"
          "dst, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])\n"
          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "start, seq = time.time(), 0\n"
          "while time.time() - start < seconds:\n"
          "    while seq < (time.time() - start) * rate:\n"
          "        s.sendto(seq.to_bytes(4, 'big'), (dst, 9000))\n"
          "        seq += 1\n"
          "    time.sleep(0.0005)\n"
          "print(seq)\n")
RECEIVER = ("import socket, sys, time\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind(('0.0.0.0', 9000))\n"
            "s.settimeout(float(sys.argv[1]))\n"
            "seen, last, gap = set(), None, 0.0\n"
            "try:\n"
            "    while True:\n"
            "        data, _ = s.recvfrom(64)\n"
            "        now = time.time()\n"
            "        if last is not None:\n"
            "            gap = max(gap, now - last)\n"
            "        last = now\n"
            "        seen.add(int.from_bytes(data[:4], 'big'))\n"
            "except socket.timeout:\n"
            "    pass\n"
            "print(len(seen), max(seen) + 1 if seen else 0, round(gap * 1000, 1))\n")
RATE, STREAM_S, CUT_AT_S = 1000, 6.0, 2.0
NO_GROUPS = 'switches:\n  - description: "Open vSwitch"\n    profile: open-vswitch\n    groups: none\n'
SRC, DST = "h1", "h13"  # pod 0 -> pod 3


def tx_packets(bridge):
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge], capture_output=True, text=True,
                         check=True).stdout
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"port\s+(\d+):.*?tx pkts=(\d+)", out, re.S)}


def busiest_uplink(net, edge):
    """The (edge, aggregation) link the stream leaves by: the uplink whose transmit counter grows most."""
    uplinks = {}
    for link in net.links:
        for a, b in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
            if a.node.name == edge and b.node.name.startswith("a"):
                uplinks[a.node.ports[a]] = b.node.name
    first = tx_packets(edge)
    time.sleep(0.5)
    second = tx_packets(edge)
    port = max(uplinks, key=lambda p: second.get(p, 0) - first.get(p, 0))
    return uplinks[port]


def trial(net):
    src, dst = net.get(SRC), net.get(DST)
    receiver = dst.popen([sys.executable, "-c", RECEIVER, "1.5"])
    time.sleep(0.3)
    sender = src.popen([sys.executable, "-c", SENDER, dst.IP(), str(RATE), str(STREAM_S)])
    time.sleep(CUT_AT_S - 0.5)
    edge = src.intfs[0].link.intf2.node.name if src.intfs[0].link.intf1.node is src else \
        src.intfs[0].link.intf1.node.name
    agg = busiest_uplink(net, edge)
    net.configLinkStatus(edge, agg, "down")
    try:
        sent = int(sender.communicate(timeout=30)[0].split()[0])
        got, _, gap_ms = receiver.communicate(timeout=30)[0].split()
    finally:
        net.configLinkStatus(edge, agg, "up")
    return f"{edge}-{agg}", sent - int(got), float(gap_ms)


def run(mode, trials, workdir):
    from mininet_topos.fattree import FatTreeTopo
    text = "te:\n  mode: ecmp\n  poll_interval_s: 2\n  host_link_mbps: 10\n" + (NO_GROUPS if mode == "none" else "")
    ctl = emulation.Controller(workdir, text)
    net = None
    rows = []
    try:
        ctl.wait_ready()
        net = emulation.start_network(FatTreeTopo(k=4), ctl)
        emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=40, interval=0)
        for _ in range(trials):
            rows.append(trial(net))
            emulation.wait_until(lambda: len(ctl.get("/mlroute/topology")["links"]) == 64 or None, timeout=15)
            time.sleep(1)
    finally:
        if net is not None:
            emulation.stop_network(net)
        ctl.stop()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    problems = emulation.check_platform()
    if problems:
        sys.exit("; ".join(problems))
    print(f"{'ECMP by':<28} {'link cut':<10} {'lost':>5} {'longest gap':>12}")
    for mode, label in (("select", "SELECT groups (watch_port)"), ("none", "plain entries (no groups)")):
        for link, lost, gap_ms in run(mode, args.trials, tempfile.mkdtemp()):
            print(f"{label:<28} {link:<10} {lost:>5} {gap_ms:>9.1f} ms")


if __name__ == "__main__":
    main()
