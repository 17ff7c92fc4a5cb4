"""The traffic-engineering acceptance scenario as a measurement: k=4 fat-tree, 10 Mb/s links, the 8 long TCP
flows h1..h8 -> h5..h12 of the stride-4 pattern, controller in `ecmp` and in `mlroute` mode.

Prints the aggregate steady throughput of each mode as a ratio to the ideal 8 x 10 Mb/s and to each other.
Run as root after scripts/setup_env.sh:  .venv/bin/python benchmarks/te_stride4.py [--duration 30] [--repeats 3]
"""

import argparse
import statistics
import sys
import tempfile

from mlroute.experiment import emulation
from mlroute.experiment.traffic import Iperf3Flows, steady_mbps

PAIRS = [(f"h{i + 1}", f"h{(i + 4) % 16 + 1}") for i in range(8)]


def run(mode, duration, workdir):
    from mininet_topos.fattree import FatTreeTopo
    ctl = emulation.Controller(workdir, f"te:\n  mode: {mode}\n  poll_interval_s: 2\n  host_link_mbps: 10\n")
    net = None
    try:
        ctl.wait_ready()
        net = emulation.start_network(FatTreeTopo(k=4, bw=10), ctl, jumbo=True)
        emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=30, interval=0)
        reports = Iperf3Flows(net, PAIRS, duration).reports()
        return sum(steady_mbps(r, min(10, duration / 3)) for r in reports)
    finally:
        if net is not None:
            emulation.stop_network(net)
        ctl.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    problems = emulation.check_platform()
    if problems:
        print("; ".join(problems), file=sys.stderr)
        return 2
    ideal = 8 * 10.0
    got = {"ecmp": [], "mlroute": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for mode in got:
                mbps = run(mode, args.duration, f"{tmp}/{mode}{i}")
                got[mode].append(mbps)
                print(f"run {i + 1} {mode:8s} {mbps:6.1f} Mb/s = {mbps / ideal:.3f} of 8 x 10 Mb/s", flush=True)
    e, m = statistics.mean(got["ecmp"]), statistics.mean(got["mlroute"])
    print(f"mean over {args.repeats}: ecmp {e / ideal:.3f}, mlroute {m / ideal:.3f} of ideal; "
          f"mlroute/ecmp = {m / e:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
