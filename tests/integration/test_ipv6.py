"""Dual stack on the emulated k=4 fat-tree (real controller, Open vSwitch, Mininet, the hosts' own kernels doing
neighbour discovery and duplicate-address detection): every host also has fd00::/64, and IPv6 is forwarded as
IPv4 is, neighbour discovery handled as ARP is, a forged or flooding host treated as in the ARP cases."""

import subprocess
import sys
import time

import pytest

from mininet_topos.common import host_ipv6
from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.emulation import add_ipv6
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.attacks import FORGE_IPV6, FORGE_IPV6_HOSTS
from tests.integration.harness import (
    POLL_S,
    STRIDE4,
    ping_all,
    rate_after_pinning,
    te_config,
    wait_pinned_disjoint,
    wait_until,
)
from tests.integration.tools import Dom, run_chromium

MAX_PER_PORT = 64  # hosts.max_per_port's default
HOST_MBPS = 10
BASE_PORT = 6300  # the IPv6 elephants' iperf3 server ports


@pytest.fixture(scope="module")
def fab(fabric_factory):
    """One dual-stack fat-tree for the file (10 Mb/s hosts, jumbo frames, traffic engineering on): IPv4 converged
    first (as a user's fabric), then every host's IPv6 address added, duplicate-address detection done."""
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), te_config(), jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=45, interval=0), "IPv4 never converged"
    assert add_ipv6(fab.net), "IPv6 addresses still tentative"
    return fab


def bindings(fab):
    return {h["ip"]: (h["dpid"], h["port"], h["mac"]) for h in fab.controller.get("/mlroute/topology")["hosts"]}


def test_every_pair_answers_ping6_and_ipv4_is_unaffected(fab):
    """ping6 between every ordered pair (same edge, same pod, other pods): converged, then a whole round with no
    loss; each host's IPv6 address bound where its IPv4 one is; IPv4 pingall still 0 %."""
    start = time.monotonic()
    failed = []
    converged = wait_until(lambda: ping_all(fab.net, ipv6=True) == 0 or None, timeout=30, interval=0)
    print(f"ping6 all pairs converged {time.monotonic() - start:.1f} s after the addresses were added")
    assert converged, fab.controller.log()[-3000:]
    assert ping_all(fab.net, ipv6=True, failed=failed) == 0, failed
    bound = bindings(fab)
    for host in fab.net.hosts:
        assert bound.get(host_ipv6(host.IP()))[:2] == bound[host.IP()][:2], host.name
    assert ping_all(fab.net) == 0
    edge = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "e0_0"], capture_output=True,
                          text=True).stdout
    assert f"ipv6_dst={host_ipv6('10.0.0.16')}" in edge and f"nd_target={host_ipv6('10.0.0.16')}" in edge, edge
    assert "Traceback" not in fab.controller.log()


def test_rest_the_web_view_and_metrics_show_every_hosts_ipv6_address(fab, tmp_path):
    """GET /mlroute/topology lists each host's IPv6 address at its IPv4 one's port; the web view draws one node
    per host, naming all its addresses; /metrics counts the IPv6 packet-ins (neighbour discovery)."""
    assert wait_until(lambda: ping_all(fab.net, ipv6=True) == 0 or None, timeout=30, interval=0)
    bound = bindings(fab)
    dom = Dom(run_chromium(fab.controller.url("/mlroute/ui"), tmp_path / "profile", "--dump-dom"))
    nodes = dom.find("g", "host")
    assert len(nodes) == 16, [n.get("data-ips") for n in nodes]
    for host in fab.net.hosts:
        node = next(n for n in nodes if n["data-ip"] == host.IP())
        assert host_ipv6(host.IP()) in node["data-ips"].split() and host_ipv6(host.IP()) in node["title"]
        assert bound[host.IP()][:2] == bound[host_ipv6(host.IP())][:2]
    assert fab.controller.metric("mlroute_packet_in_total", {"kind": "ipv6"}) > 0


def test_eight_stride_elephants_over_ipv6_are_pinned_link_disjoint_at_the_non_blocking_rate(fab):
    """The 8 stride-4 iperf3 elephants between the hosts' IPv6 addresses: found from their IPv6 5-tuples' counting
    rules, pinned on link-disjoint paths, and together at >= 0.9 of the non-blocking rate once pinned (iperf3's
    own per-second receive rates: the median second of the ten from two polls after the pins)."""
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=40, base_port=BASE_PORT, ipv6=True)
    started = time.monotonic()
    try:
        pinned_s, disjoint_s, paths = wait_pinned_disjoint(fab.controller, BASE_PORT, len(STRIDE4),
                                                           timeout=6 * POLL_S + 5)
        mine = [e for e in fab.controller.get("/mlroute/elephants")
                if BASE_PORT <= e["dst_port"] < BASE_PORT + len(STRIDE4)]
        since = time.monotonic() - started
    finally:
        reports = flows.reports()
    assert paths is not None, mine
    assert all(":" in e["src_ip"] and ":" in e["dst_ip"] for e in mine), mine
    median, window = rate_after_pinning(reports, since)
    print(f"IPv6 elephants pinned {pinned_s:.1f} s after they started, link-disjoint at {disjoint_s:.1f} s; "
          f"{median:.1f} of {len(STRIDE4) * HOST_MBPS} Mb/s after ({median / (len(STRIDE4) * HOST_MBPS):.2f})")
    assert median >= 0.9 * len(STRIDE4) * HOST_MBPS, window


def test_a_host_claiming_another_hosts_ipv6_address_takes_nothing(fab):
    """h1 advertises h9's IPv6 address as its own (to all nodes and to h5) for 10 s, then tries to configure it
    itself: h9 keeps its binding, h5 reaches h9 over IPv6 from a cold neighbour cache throughout, and h1's
    kernel sees h9 defend the address (duplicate-address detection fails)."""
    h1, h5, h9 = fab.net.get("h1", "h5", "h9")
    victim = host_ipv6(h9.IP())
    before = bindings(fab)[victim]
    attack = h1.popen([sys.executable, "-c", FORGE_IPV6, h1.defaultIntf().name, victim, host_ipv6(h5.IP()), "50"])
    lost = 0
    for _ in range(8):
        h5.cmd(f"ip -6 neigh flush dev {h5.defaultIntf().name}")
        lost += " 0% packet loss" not in h5.cmd(f"ping -6 -c1 -W1 {victim}")
        time.sleep(1)
    sent = int(attack.communicate(timeout=60)[0].decode().strip() or 0)
    assert sent == 100 and lost == 0, (sent, lost)
    assert bindings(fab)[victim] == before
    assert "claim" in fab.controller.log()  # refused and logged, as the ARP case
    h1.cmd(f"ip -6 addr add {victim}/64 dev {h1.defaultIntf().name}")
    try:
        failed = wait_until(lambda: victim in h1.cmd("ip -6 addr show dadfailed") or None, timeout=5, interval=0.2)
        assert failed, h1.cmd("ip -6 addr show")
    finally:
        h1.cmd(f"ip -6 addr del {victim}/64 dev {h1.defaultIntf().name}")
    assert bindings(fab)[victim] == before
    assert ping_all(fab.net, ipv6=True) == 0


def test_one_host_announcing_ten_thousand_ipv6_addresses_learns_at_most_the_port_cap(fab):
    """h1 sends 10,000 neighbour advertisements, each claiming another address with another MAC: its port
    learns at most hosts.max_per_port addresses (its own included), the rest are refused and counted; every
    pair still answers over IPv4 and IPv6."""
    h1 = fab.net.get("h1")
    own = bindings(fab)[h1.IP()]
    attack = h1.popen([sys.executable, "-c", FORGE_IPV6_HOSTS, h1.defaultIntf().name, "10000"])
    sent = int(attack.communicate(timeout=120)[0].decode().strip() or 0)
    time.sleep(2 * POLL_S)  # the resync after the packet-ins
    assert sent == 10_000
    bound = bindings(fab)
    at_port = [ip for ip, (dpid, port, _) in bound.items() if (dpid, port) == own[:2]]
    refused = fab.controller.metric("mlroute_hosts_refused_total")
    print(f"{sent} advertisements: {len(at_port)} addresses at h1's port, {refused:.0f} refused in all")
    assert len(at_port) <= MAX_PER_PORT and len([ip for ip in at_port if ip.startswith("fd00::9:")]) > 0
    assert refused > 0
    assert bound[h1.IP()] == own and bound[host_ipv6(h1.IP())][:2] == own[:2]
    assert "Traceback" not in fab.controller.log()
    assert wait_until(lambda: ping_all(fab.net, ipv6=True) == 0 or None, timeout=20, interval=0)
    assert ping_all(fab.net) == 0
