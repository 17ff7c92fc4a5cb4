"""Short TCP connections with the real controller, Open vSwitch and Mininet: each transport flow reaches the
controller about once (its counting rule goes out from the packet-in handler before the flow's second round
trip), measured from /metrics (issue 10's short-connection soak, scaled to CI)."""

import sys

from mininet_topos.fattree import FatTreeTopo
from tests.integration.harness import ping_all, wait_until

CONFIG = """
te:
  mode: mlroute
  poll_interval_s: 2
  host_link_mbps: 10
"""
CONNECTIONS = 40  # per client, sequential, 100 KB each
SERVER = ("import socket\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('0.0.0.0', 8000)); s.listen(64)\n"
          "print('listening', flush=True)\n"
          "while True:\n"
          "    c, _ = s.accept(); c.recv(100); c.sendall(b'x' * 100000); c.close()\n")
CLIENT = ("import socket, sys\n"
          "done = 0\n"
          "for _ in range(int(sys.argv[2])):\n"
          "    c = socket.create_connection((sys.argv[1], 8000), timeout=10); c.sendall(b'GET /')\n"
          "    n = 0\n"
          "    while n < 100000:\n"
          "        d = c.recv(65536)\n"
          "        if not d: break\n"
          "        n += len(d)\n"
          "    c.close(); done += n == 100000\n"
          "print(done)\n")


def test_short_connections_cost_about_one_packet_in_per_transport_flow(fabric_factory):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    pairs = [(f"h{i}", f"h{i + 8}") for i in range(1, 9)]
    servers = [fab.net.get(dst).popen([sys.executable, "-c", SERVER]) for _, dst in pairs]
    before = fab.controller.metric("mlroute_packet_in_total", {"kind": "newflow"})
    try:
        # every server listens before any client connects (a client refused on its first connect counted 0 of 40)
        assert all(p.stdout.readline().strip() == b"listening" for p in servers)
        clients = [fab.net.get(src).popen([sys.executable, "-c", CLIENT, fab.net.get(dst).IP(), str(CONNECTIONS)])
                   for src, dst in pairs]
        outputs = [c.communicate(timeout=240) for c in clients]
    finally:
        for p in servers:
            p.kill()
            p.wait()
    done = [int(out.decode().strip() or 0) for out, _ in outputs]
    assert done == [CONNECTIONS] * len(pairs), [err.decode()[-300:] for _, err in outputs]
    packet_ins = fab.controller.metric("mlroute_packet_in_total", {"kind": "newflow"}) - before
    flows = 2 * CONNECTIONS * len(pairs)  # each connection is two transport flows, one per direction
    print(f"{packet_ins:.0f} new-flow packet-ins for {flows} transport flows: {packet_ins / flows:.2f} per flow")
    assert packet_ins / flows <= 1.5
