"""Issue 21's storm, flow statistics vs sFlow, live: k=4 fat-tree at 10 Mb/s (jumbo frames), an iperf3 elephant
h2 -> h10 and, from h1 on the same edge switch, 20,000 new UDP 5-tuples per second to h9 (each a mouse; together
about the NIC's rate). With flow statistics every 5-tuple is a mouse and ECMP spreads the aggregate over both
uplinks, sharing each with the elephant; with sFlow the aggregate is one host-pair demand and gets a path of
its own.

Settings: ``flowstats``, ``sflow:N`` (1-in-N sampling), ``auto:N`` (te.detection auto, every switch exporting at
1-in-N). Prints per setting: the elephant's rate before the storm (mean of seconds 3-8), its worst 5-s window during the
storm as a fraction of that, whether any switch disconnected, and pingall loss right after.

Run as root after scripts/setup_env.sh, in flock /tmp/mininet.lock:
    .venv/bin/python benchmarks/bench_sflow_storm.py [--settings flowstats,sflow:64,auto:64] [--storm-s 20]
"""

import argparse
import sys
import tempfile
import time

from mlroute.experiment import emulation
from mlroute.experiment.traffic import Iperf3Flows, NewFlowStorm, received_mbps

RATE, BEFORE_S, AFTER_S = 20000, 8, 6


def run(setting, storm_s, workdir):
    from mininet_topos.fattree import FatTreeTopo
    detection, _, sampling = setting.partition(":")
    port = emulation.free_port()
    text = f"te:\n  mode: mlroute\n  poll_interval_s: 2\n  host_link_mbps: 10\n  detection: {detection}\n"
    if detection != "flowstats":
        text += emulation.sflow_config(port)
    ctl = emulation.Controller(workdir, text)
    net = None
    try:
        ctl.wait_ready()
        net = emulation.start_network(FatTreeTopo(k=4, bw=10), ctl, jumbo=True)
        if detection != "flowstats":
            emulation.enable_sflow(net, port, int(sampling))
        emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=30, interval=0)
        flows = Iperf3Flows(net, [("h2", "h10")], seconds=BEFORE_S + storm_s + AFTER_S)
        time.sleep(BEFORE_S)
        sent = NewFlowStorm(net.get("h1"), net.get("h9").IP(), RATE, storm_s).sent()
        loss = emulation.ping_all(net)
        report = flows.reports()[0] or {}
        mbps = received_mbps(report)
        before = sum(mbps[3:BEFORE_S]) / (BEFORE_S - 3)
        during = mbps[BEFORE_S:BEFORE_S + storm_s]
        windows = [sum(during[i:i + 5]) / 5 for i in range(0, len(during) - 4)]
        return {"setting": setting, "storm_pps": round(sent / storm_s), "before_mbps": round(before, 2),
                "worst_5s_ratio": round(min(windows) / before, 3) if windows and before else None,
                "disconnects": ctl.log().count("disconnected"), "pingall_loss_after": loss,
                "during_mbps": [round(x, 1) for x in during],
                "te": [line[:160] for line in ctl.log().splitlines() if line.startswith("te:")][-4:]}
    finally:
        if net is not None:
            emulation.stop_network(net)
        ctl.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--settings", default="flowstats,sflow:64")
    ap.add_argument("--storm-s", type=int, default=20)
    args = ap.parse_args()
    problems = emulation.check_platform()
    if problems:
        sys.exit("; ".join(problems))
    for setting in args.settings.split(","):
        with tempfile.TemporaryDirectory() as workdir:
            print(run(setting.strip(), args.storm_s, workdir), flush=True)


if __name__ == "__main__":
    main()
