"""A controller crash under pinned elephants, with the real ryu-manager, Open vSwitch and Mininet: the switches
keep forwarding while it is down (ARP included), and the restarted controller takes over what they hold
without an outage (issue 10's acceptance: SIGKILL for 10 s under 8 pinned stride-4 elephants)."""

import time

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.harness import POLL_S, STRIDE4, ping_all, te_config, wait_until

CONFIG = te_config()
RUN_S = 46


def pinned(fab):
    elephants = fab.controller.get("/mlroute/elephants")
    return len(elephants) >= 8 and all(e["path"] for e in elephants)


def per_second_aggregate(reports):
    """Aggregate Mb/s of every 1-second interval (interval index -> sum over flows)."""
    sums = {}
    for report in reports:
        for i, iv in enumerate((report or {}).get("intervals", [])):
            sums[i] = sums.get(i, 0.0) + iv["sum"]["bits_per_second"] / 1e6
    return [sums[i] for i in sorted(sums)]


def test_sigkill_for_10s_and_restart_under_pinned_elephants(fabric_factory):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=RUN_S)
    started = time.time()
    try:
        assert wait_until(lambda: pinned(fab) or None, timeout=5 * POLL_S + 5, interval=0.5), \
            fab.controller.get("/mlroute/elephants")
        time.sleep(max(0.0, started + 14 - time.time()))
        killed_at = time.time() - started
        fab.controller.kill()
        h13, h16 = fab.net.get("h13"), fab.net.get("h16")
        for h in (h13, h16):
            h.cmd("ip neigh flush all")
        time.sleep(1)
        ping = h13.cmd(f"ping -c 3 -W 1 {h16.IP()}")  # cold ARP caches, no controller
        time.sleep(max(0.0, started + killed_at + 10 - time.time()))
        fab.controller.restart()
        fab.controller.wait_ready()
        up = time.time()
        # the switches reconnect (OVS backs off up to 8 s); then one poll period to pin every elephant again
        assert wait_until(lambda: pinned(fab) or None, timeout=8 + 2 * POLL_S + 2, interval=0.5), \
            fab.controller.get("/mlroute/elephants")
        repinned_s = time.time() - up
    finally:
        reports = flows.reports()
    assert " 0% packet loss" in ping, ping
    agg = per_second_aggregate(reports)
    k = int(killed_at)
    reference = sum(agg[k - 6:k]) / 6
    after = agg[k:k + 26]  # down 10 s, restart, reconnect, re-pin, and 10 s more
    smooth = [sum(after[i:i + 3]) / 3 for i in range(len(after) - 2)]
    print(f"aggregate before the kill {reference:.1f} Mb/s; per second after: {[round(a, 1) for a in after]}; "
          f"re-pinned {repinned_s:.1f} s after the restart")
    # 1-second iperf3 intervals jitter by +-15 % on this shared 2-core VM with no fault at all (measured: 62-90
    # Mb/s around a mean of 79), and alternate: bytes late for one interval land in the next (a clean-clone CI
    # run: ..., 92.2, 54.1, 89.2, ... long after the re-pin). So "no outage" is judged on 3-second means, with a
    # floor for every 2-second mean (a 1 s outage would take one to about half); the old controller (tables
    # wiped on reconnect) fell to 2-28 Mb/s for 11-13 s.
    assert min(smooth) >= 0.9 * reference, (reference, after)
    pairs = [(a + b) / 2 for a, b in zip(after, after[1:])]
    assert min(pairs) >= 0.75 * reference, (reference, after)
    log = fab.controller.log()
    assert "recovered from the switches" in log and "Traceback" not in log
