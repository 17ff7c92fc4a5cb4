"""A controller crash under pinned elephants, with the real ryu-manager, Open vSwitch and Mininet: the switches
keep forwarding while it is down (ARP included), and the restarted controller takes over what they hold
without an outage (issue 10's acceptance: SIGKILL for 10 s under 8 pinned stride-4 elephants)."""

import time

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows, received_per_second
from tests.integration.flowtables import disjoint_in_the_tables
from tests.integration.harness import (
    POLL_S,
    STRIDE4,
    ping_all,
    ping_all_concurrently,
    point_at,
    te_config,
    wait_until,
)

CONFIG = te_config()
RUN_S = 46


def pinned(fab):
    elephants = fab.controller.get("/mlroute/elephants")
    return len(elephants) >= 8 and all(e["path"] for e in elephants)


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
    agg = received_per_second(reports)
    k = int(killed_at)
    reference = sum(agg[k - 6:k]) / 6
    after = agg[k:k + 26]  # down 10 s, restart, reconnect, re-pin, and 10 s more
    smooth = [sum(after[i:i + 3]) / 3 for i in range(len(after) - 2)]
    print(f"aggregate before the kill {reference:.1f} Mb/s; per second after: {[round(a, 1) for a in after]}; "
          f"re-pinned {repinned_s:.1f} s after the restart")
    # Rates are the receivers' own 1-s intervals (the senders' swing 65-92 Mb/s around 78 with no fault at all:
    # bytes written late into a socket buffer land in the next interval; the receivers' hold 75-79). "No outage"
    # is judged on 3-second means with a floor for every 2-second mean (a 1 s outage would take a 3-s mean to
    # 0.67, a 2-s mean to 0.5); the old controller (tables wiped on reconnect) fell to 2-28 Mb/s for 11-13 s.
    # The second after the restart dips on this 2-core VM (received: 63.8-69.4 of 78 Mb/s in two runs, one
    # ovs-vswitchd thread switching every packet beside the starting controller), lowest 3-s mean 0.93-0.94 and
    # 2-s mean 0.88-0.91: the 3-s bound is 0.8, the 2-s floor 0.75.
    assert min(smooth) >= 0.8 * reference, (reference, after)
    pairs = [(a + b) / 2 for a, b in zip(after, after[1:])]
    assert min(pairs) >= 0.75 * reference, (reference, after)
    log = fab.controller.log()
    assert "recovered from the switches" in log and "Traceback" not in log


def test_three_kills_10s_apart_under_pinned_elephants_converge_within_10s_of_the_last_start(fabric_factory):
    """Issue 25's restarts in a row: SIGKILL and restart three times, 10 s apart, under the 8 elephants. Before
    the fix, one run in four had recovered hosts at a core's fabric port (its table-1 rule toward them read back
    before LLDP had classified the port): 24 % of host pairs failing and elephants sharing links 20-40 s on.
    Here the last restart has pod 0's switches and 3 of the 4 cores reconnect 2.5 s after the others (as OVS's
    reconnect backoff may order them), so one core is read back alone while its port toward pod 0 has no link
    yet: its rules toward pod 0's hosts are their only candidates, every time."""
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    edges = {int(sw.dpid, 16) for sw in fab.net.switches if sw.name.startswith("e")}
    late = [sw.name for sw in fab.net.switches if sw.name.startswith(("a0_", "e0_", "c2", "c3", "c4"))]
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=60)
    try:
        # pinned in the switches, not only decided: a kill 0.35 s after a decision that pinned all 8 at once
        # left the pins half-installed (the ingress rules that move an elephant go last, after a barrier), and
        # controllers restarted within their 10-s recovery add rules but modify none, so no later one could
        # read those pins back or complete its own until the last one's recovery ended (10.8 s after it)
        assert wait_until(lambda: disjoint_in_the_tables(fab), timeout=5 * POLL_S + 5, interval=0.5), \
            fab.controller.get("/mlroute/elephants")
        last_start = time.time() - 10
        for restart in range(3):
            time.sleep(max(0.0, last_start + 10 - time.time()))
            held = late if restart == 2 else []  # the last time, pod 0 and 3 cores reconnect 2.5 s late
            point_at(held, "tcp:127.0.0.1:9")
            fab.controller.kill()
            fab.controller.restart()
            last_start = time.time()
            fab.controller.wait_ready()
        time.sleep(max(0.0, last_start + 2.5 - time.time()))
        point_at(late, f"tcp:127.0.0.1:{fab.controller.of_port}")
        # (a ping may wait 2 s for its answer: the 8 elephants fill the queues of the links it crosses)
        reachable = wait_until(lambda: ping_all_concurrently(fab.net, timeout_s=2) == 0 or None,
                               timeout=last_start + 10 - time.time(), interval=0)
        reachable_s = time.time() - last_start
        paths = wait_until(lambda: disjoint_in_the_tables(fab), timeout=last_start + 10 - time.time(), interval=0.5)
        disjoint_s = time.time() - last_start
        topo = fab.controller.get("/mlroute/topology")
    finally:
        flows.stop()
    print(f"after the last start: every pair reachable at {reachable_s:.1f} s, elephants pinned link-disjoint "
          f"(REST and tables agreeing) at {disjoint_s:.1f} s")
    assert {h["dpid"] for h in topo["hosts"]} <= edges and len(topo["hosts"]) == 16, topo["hosts"]
    tiers = [s["tier"] for s in topo["switches"]]
    assert (tiers.count("core"), tiers.count("edge")) == (4, 8), tiers
    assert reachable, "not every host pair reachable within 10 s of the last start"
    assert paths, f"elephants not pinned link-disjoint within 10 s: {fab.controller.get('/mlroute/elephants')}"
    assert "Traceback" not in fab.controller.log()

