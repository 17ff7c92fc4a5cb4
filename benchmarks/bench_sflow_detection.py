"""Detection latency and table cost, flow statistics vs sFlow (issue 21's measurement), live: k=4 fat-tree at
10 Mb/s (jumbo frames, as every emulation here), the 8 stride-4 iperf3 elephants h1..h8 -> h5..h12, and meanwhile
short TCP connections (20 kB each, 50 ms apart: 200 at least, then on for the whole run) h13 -> h15.

Per setting (``flowstats``, ``sflow:N`` at 1-in-N, ``sflow:N:W`` with sflow.window_s W, ``auto:N``: te.detection
auto with every switch exporting at 1-in-N) it prints: when
each elephant was first shown pinned (seconds after the flows started), when all 8 were, false elephants (a
short connection shown as an elephant) in all and per minute, whether the h13 -> h15 pair was routed as one
demand, and the most entries h13's edge switch held in table 0 during the background connections against the
count before them. ``--seconds 60`` gives false elephants over a minute.

Run as root after scripts/setup_env.sh (one emulated network at a time: wrap it in flock /tmp/mininet.lock):
    .venv/bin/python benchmarks/bench_sflow_detection.py [--settings flowstats,sflow:64,sflow:256,sflow:1024]
    .venv/bin/python benchmarks/bench_sflow_detection.py --settings flowstats,sflow:64,auto:64 --seconds 60
"""

import argparse
import subprocess
import sys
import threading
import time

from mlroute.experiment import emulation
from mlroute.experiment.traffic import Iperf3Flows, ShortConnections

PAIRS = [(f"h{i + 1}", f"h{(i + 4) % 16 + 1}") for i in range(8)]
ELEPHANT_PORT = 5300  # Iperf3Flows' first server port


def table0(bridge):
    """(entries in table 0, whether one is a host-pair entry for h13 -> h15: priority 15, no ports)."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge, "table=0"],
                         capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if "priority=" in line]
    return len(lines), any("priority=15," in line and "nw_dst=10.0.0.15" in line for line in lines)


def run(setting, seconds, workdir):
    from mininet_topos.fattree import FatTreeTopo
    detection, _, rest = setting.partition(":")
    sampling, _, window = rest.partition(":")
    port = emulation.free_port()
    text = f"te:\n  mode: mlroute\n  poll_interval_s: 2\n  host_link_mbps: 10\n  detection: {detection}\n"
    if detection != "flowstats":
        text += emulation.sflow_config(port) + (f"  window_s: {window}\n" if window else "")
    ctl = emulation.Controller(workdir, text)
    net = None
    try:
        ctl.wait_ready()
        net = emulation.start_network(FatTreeTopo(k=4, bw=10), ctl, jumbo=True)
        if detection != "flowstats":
            emulation.enable_sflow(net, port, int(sampling))
        emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=30, interval=0)
        time.sleep(2)
        edge = "e3_0"  # h13's
        before = table0(edge)[0]
        most, paired = [before], [False]
        done = threading.Event()

        def watch():
            while not done.is_set():
                n, pair = table0(edge)
                most[0], paired[0] = max(most[0], n), paired[0] or pair
                time.sleep(0.5)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        shorts = ShortConnections(net, "h13", "h15", seconds, at_least=200)  # 200 at least, then on to the end
        started = time.time()
        flows = Iperf3Flows(net, PAIRS, seconds)
        first, false = {}, set()
        while time.time() - started < seconds:
            for e in ctl.get("/mlroute/elephants"):
                if e["dst_port"] == 7000:
                    false.add((e["src_port"], e["dst_port"]))
                elif e["path"] and ELEPHANT_PORT <= e["dst_port"] < ELEPHANT_PORT + len(PAIRS):  # (not a pair demand)
                    first.setdefault(e["dst_port"], round(time.time() - started, 1))
            time.sleep(0.2)
        flows.results_mbps()
        opened = shorts.opened()
        elapsed = time.time() - started
        done.set()
        times = sorted(first.values())
        return {"setting": setting, "pinned_s": times, "all_pinned_s": times[-1] if len(times) == 8 else None,
                "short_connections": opened, "false_elephants": len(false),
                "false_per_minute": round(60 * len(false) / elapsed, 2), "h13_h15_pair_routed": paired[0],
                "edge_table0_before": before, "edge_table0_most": most[0]}
    finally:
        if net is not None:
            emulation.stop_network(net)
        ctl.stop()


def main():
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--settings", default="flowstats,sflow:64,sflow:256,sflow:1024")
    ap.add_argument("--seconds", type=float, default=25)
    args = ap.parse_args()
    problems = emulation.check_platform()
    if problems:
        sys.exit("; ".join(problems))
    for setting in args.settings.split(","):
        with tempfile.TemporaryDirectory() as workdir:
            print(run(setting.strip(), args.seconds, workdir), flush=True)


if __name__ == "__main__":
    main()
