"""Elephants from sFlow with the real controller, Open vSwitch and Mininet (te.detection: sflow): every switch
exports 1-in-64 samples to the controller's collector; the 8 stride elephants are pinned link-disjoint in the
switches' own tables (detection latency printed), and short background connections get no rule at all."""

import time

import pytest

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.emulation import enable_sflow, free_port, sflow_config
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.flowtables import disjoint_in_the_tables, dump_flows
from tests.integration.harness import STRIDE4, ping_all, te_config, wait_until

SAMPLING = 64
COOKIE_FLOW, COOKIE_SEEN = 0x6D6C0003, 0x6D6C0005
SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 7000)); s.listen(64)
for _ in range({n}):
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
CLIENT = """
import socket, time
for i in range({n}):
    c = socket.create_connection(("{dst}", 7000), timeout=5)
    c.sendall(b"x" * 20000)
    c.close()
print("done")
"""


@pytest.fixture(scope="module")
def sflow_fabric(fabric_factory):
    port = free_port()
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), te_config("mlroute", "  detection: sflow\n" + sflow_config(port)),
                         jumbo=True)
    enable_sflow(fab.net, port, SAMPLING)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    return fab


def test_stride_elephants_are_found_by_sampling_and_pinned_link_disjoint(sflow_fabric):
    fab = sflow_fabric
    started = time.time()
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=18)
    try:
        first: dict = {}  # elephant (server port) -> seconds after the start when REST first showed it pinned

        def all_pinned():
            for e in fab.controller.get("/mlroute/elephants"):
                if e["path"]:
                    first.setdefault(e["dst_port"], round(time.time() - started, 1))
            return len(first) >= 8
        pinned = wait_until(all_pinned, timeout=20, interval=0.2)
        pinned_s = time.time() - started
        crossed = wait_until(lambda: disjoint_in_the_tables(fab), timeout=15, interval=0.5)
        disjoint_s = time.time() - started
        print(f"\nsFlow 1-in-{SAMPLING}: 8 stride elephants pinned {pinned_s:.1f} s after the flows started, "
              f"link-disjoint in the switches' tables at {disjoint_s:.1f} s; each pinned at {sorted(first.values())}")
        outcomes = ("counted", "replayed", "not_ingress", "unknown_interface", "not_transport", "no_header")
        print("flow samples:", {o: fab.controller.metric("mlroute_sflow_samples_total", {"outcome": o})
                                for o in outcomes})
        assert pinned and crossed, fab.controller.get("/mlroute/elephants")
        # exact entries only for the pinned elephants (one each, at its ingress), no per-flow rule otherwise
        counting = [r for sw in fab.net.switches for r in dump_flows(sw.name) if r["cookie"] == COOKIE_FLOW]
        assert len(counting) == 8, counting
        assert fab.controller.metric("mlroute_packet_in_total", {"kind": "newflow"}) == 0
        assert fab.controller.metric("mlroute_sflow_samples_total", {"outcome": "counted"}) > 0
    finally:
        mbps = flows.results_mbps()
    assert min(mbps) > 0, mbps


def test_short_background_connections_get_no_rules_and_make_no_elephants(sflow_fabric):
    fab = sflow_fabric
    edge = fab.net.get("e0_0")  # h1's edge switch
    src, dst = fab.net.get("h1"), fab.net.get("h7")
    before = dump_flows(edge.name)
    server = dst.popen(["python3", "-c", SERVER.format(n=200)])
    time.sleep(0.5)
    client = src.popen(["python3", "-c", CLIENT.format(n=200, dst=dst.IP())], text=True)
    out = client.communicate(timeout=40)[0]
    server.wait(timeout=10)
    assert "done" in out
    during = dump_flows(edge.name)
    mine = [r for r in during if r["cookie"] in (COOKIE_FLOW, COOKIE_SEEN)
            and "7000" in r["match"].values()]
    added = [r for r in during if r["match"] not in [b["match"] for b in before]]
    print(f"\nedge {edge.name}: {len(before)} entries before 200 short connections, {len(during)} after, "
          f"{len(mine)} for them; added: {added}")
    assert mine == []
    # 200 x 20 kB in a few seconds is an elephant as a host pair: at most its two pair entries (TCP, UDP)
    assert all(r["match"].get("nw_src", r["match"].get("ipv4_src")) == src.IP() and "tcp_dst" not in r["match"]
               for r in added) and len(added) <= 2, added
    assert not [e for e in fab.controller.get("/mlroute/elephants") if e["dst_port"] == 7000]
