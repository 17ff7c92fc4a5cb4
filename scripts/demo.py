"""End-to-end demo: the real controller on an emulated k=4 fat-tree (10 Mb/s links), then ECMP vs mlroute.

Prints what it sees: the learned topology and tiers, pingall, a link failure, elephants and their paths, and
the throughput of 16 stride-4 TCP flows in each mode against a non-blocking switch.
"""

import sys
import time
from collections import Counter
from pathlib import Path

from mlroute.experiment import emulation, report, runner
from mlroute.experiment.traffic import Iperf3Flows


def say(msg):
    print(f"[demo] {msg}", flush=True)


def forwarding_demo(workdir):
    from mininet_topos.fattree import FatTreeTopo
    ctl = emulation.Controller(workdir, "te:\n  mode: mlroute\n  poll_interval_s: 2\n  host_link_mbps: 10\n")
    net = None
    try:
        ctl.wait_ready()
        started = time.time()
        net = emulation.start_network(FatTreeTopo(k=4, bw=10), ctl, jumbo=True)
        ok = emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=30, interval=0)
        say(f"pingall: {'0% loss' if ok else 'LOSS'} after {time.time() - started:.1f} s")
        topo = ctl.get("/mlroute/topology")
        tiers = Counter(s["tier"] for s in topo["switches"])
        say(f"learned {len(topo['switches'])} switches ({', '.join(f'{n} {t}' for t, n in sorted(tiers.items()))}), "
            f"{len(topo['links']) // 2} links, {len(topo['hosts'])} hosts")
        net.configLinkStatus("a0_0", "c1", "down")
        ok = emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=15, interval=0)
        say(f"cut a0_0-c1: pingall {'0% loss' if ok else 'LOSS'}")
        net.configLinkStatus("a0_0", "c1", "up")
        flows = Iperf3Flows(net, [(f"h{i + 1}", f"h{(i + 4) % 16 + 1}") for i in range(8)], seconds=12)
        time.sleep(9)
        for e in ctl.get("/mlroute/elephants"):
            say(f"elephant {e['src_ip']}:{e['src_port']} -> {e['dst_ip']}:{e['dst_port']} "
                f"{e['rate_bps'] / 1e6:5.2f} Mb/s path {e['path']}")
        routing = ctl.get("/mlroute/routing")
        if routing["installed"]:
            say(f"max link load: installed {routing['installed']['max_link_load']}, "
                f"ECMP would give {routing['ecmp']['max_link_load']}")
        flows.results_mbps()
        arp_ipv4 = sum(ctl.metric("mlroute_packet_in_total", {"kind": kind}) for kind in ("arp", "ipv4"))
        say(f"packet-ins (ARP+IPv4): {arp_ipv4:.0f}")
    finally:
        if net is not None:
            emulation.stop_network(net)
        ctl.stop()


def main():
    problems = emulation.check_platform()
    if problems:
        print("demo cannot run: " + "; ".join(problems), file=sys.stderr)
        return 2
    out = Path(__file__).resolve().parents[1] / "results" / "demo"  # the checkout's results/ (git-ignored)
    forwarding_demo(out / "forwarding")
    say("comparing routing modes on 16 stride-4 flows (3 runs of 25 s)...")
    spec = runner.ExperimentSpec("fattree", k=4, patterns=["stride:4"], duration=25)
    report.write(runner.run(spec, out / "experiment"), out / "experiment")
    print((out / "experiment" / "summary.md").read_text())
    say(f"results and plots in {out}/experiment/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
