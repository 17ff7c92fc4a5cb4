"""Traffic for emulated experiments: long iperf3 TCP flows, and real ring all-reduce jobs between hosts."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

from mininet_topos.common import host_ipv6
from mlroute.tolerances import TIME_TOL_S


class Iperf3Flows:
    """One iperf3 server per flow on its destination, then the clients (each under a hard timeout), each on
    its own server and client port so every flow is a distinct transport 5-tuple. Each client's report carries
    its server's own JSON report (``server_output_json``): rates are read on the receiving side."""

    def __init__(self, net: Any, pairs: Iterable[tuple[str, str]], seconds: float, base_port: int = 5300,
                 ipv6: bool = False) -> None:
        """``ipv6``: to the destinations' IPv6 addresses (a dual-stack fabric: ``emulation.add_ipv6``)."""
        self.net = net
        self.pairs = list(pairs)
        self.seconds = seconds
        self.servers: list = []
        self.clients: list = []
        for i, (_, dst) in enumerate(self.pairs):
            self.servers.append(net.get(dst).popen(["iperf3", "-J", "-s", "-1", "-p", str(base_port + i)]))
        time.sleep(0.5)
        for i, (src, dst) in enumerate(self.pairs):
            # an argument list, not shell=True: Mininet's shell mode reads $SHELL, which services and CI lack
            address = host_ipv6(net.get(dst).IP()) if ipv6 else net.get(dst).IP()
            cmd = ["timeout", "-s", "KILL", str(seconds + 15), "iperf3", "-J", "-i", "1", "-c", address,
                   "-p", str(base_port + i), "-t", str(seconds), "--cport", str(base_port + 100 + i),
                   "--get-server-output"]
            self.clients.append(net.get(src).popen(cmd))

    def reports(self) -> list[dict | None]:
        """Wait for the clients; iperf3's JSON per flow (None for a client that failed)."""
        out: list[dict | None] = []
        for client in self.clients:
            text = client.communicate()[0]
            try:
                out.append(json.loads(text))
            except (ValueError, TypeError):
                out.append(None)
        self.stop()
        return out

    def results_mbps(self) -> list[float]:
        """Received Mb/s per flow over the whole run (0 for a failed client)."""
        return [total_mbps(r) for r in self.reports()]

    def stop(self) -> None:
        """Kill every server and client, the client's iperf3 with its ``timeout``: Mininet starts each in a
        session of its own, so the whole process group goes (killing ``timeout`` alone left its iperf3 spinning
        on a socket of a torn-down namespace, at 70 % of a core, for the rest of the run)."""
        for p in self.servers + self.clients:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait()


def total_mbps(report: dict | None) -> float:
    """Received Mb/s over the whole run (0 for a failed client)."""
    if report is None:
        return 0.0
    try:
        return report["end"]["sum_received"]["bits_per_second"] / 1e6
    except (KeyError, TypeError):
        return 0.0


def received_intervals(report: dict | None) -> list[dict]:
    """The receiver's 1-second intervals (``sum``: start, end, bits_per_second) of one flow, [] for a failed
    client. The sender's intervals count bytes written into its socket buffer, which arrive a second later or
    earlier: measured on this 2-core VM with no fault at all, 8 flows' 1-s sender sums swung 65-92 Mb/s around
    a mean of 78 while the receivers' held 75-79."""
    try:
        return list((report or {})["server_output_json"]["intervals"])
    except (KeyError, TypeError):
        return []


def received_mbps(report: dict | None) -> list[float]:
    """Received Mb/s of each 1-second interval of one flow."""
    return [iv["sum"]["bits_per_second"] / 1e6 for iv in received_intervals(report)]


def received_per_second(reports: Iterable[dict | None]) -> list[float]:
    """Received Mb/s of every 1-second interval summed over the flows (interval index -> sum)."""
    sums: dict[int, float] = {}
    for report in reports:
        for i, mbps in enumerate(received_mbps(report)):
            sums[i] = sums.get(i, 0.0) + mbps
    return [sums[i] for i in sorted(sums)]


def steady_mbps(report: dict | None, warmup_s: float) -> float:
    """Mean received rate over the 1-second intervals that start after ``warmup_s`` (the steady part)."""
    rates = [iv["sum"]["bits_per_second"] for iv in received_intervals(report)
             if iv["sum"]["start"] >= warmup_s - TIME_TOL_S]
    return sum(rates) / len(rates) / 1e6 if rates else 0.0


_SINK = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", {port})); s.listen(64)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
_DIALER = """
import socket, time
deadline, opened = time.time() + {seconds}, 0
while opened < {at_least} or time.time() < deadline:
    c = socket.create_connection(("{dst}", {port}), timeout=5)
    c.sendall(b"x" * {size})
    c.close()
    opened += 1
    time.sleep({gap_s})
print(opened)
"""


class ShortConnections:
    """Short TCP connections (``size`` bytes each, ``gap_s`` apart) from ``src`` to a sink on ``dst``'s ``port``
    for ``seconds`` (and ``at_least`` of them): the mice beside elephants that detection must not take for one."""

    def __init__(self, net: Any, src: str, dst: str, seconds: float, port: int = 7000, at_least: int = 0,
                 size: int = 20000, gap_s: float = 0.05) -> None:
        self.server = net.get(dst).popen(["python3", "-c", _SINK.format(port=port)])
        time.sleep(0.3)
        self.client = net.get(src).popen(["python3", "-c", _DIALER.format(
            dst=net.get(dst).IP(), port=port, seconds=seconds, at_least=at_least, size=size, gap_s=gap_s)])

    def opened(self, timeout: float = 30) -> int:
        """Wait for the dialer; the connections it made. The sink goes with it."""
        try:
            return int(self.client.communicate(timeout=timeout)[0].decode().strip() or 0)
        finally:
            self.stop()

    def stop(self) -> None:
        for p in (self.client, self.server):
            if p.poll() is None:
                p.kill()
                p.wait()


class NewFlowStorm:
    """One host sending another one new UDP 5-tuple per packet (the destination port cycles through 60,000), at
    ``rate`` packets a second for ``seconds``, from the host's namespace: a new-flow storm."""

    SCRIPT = ("import socket, sys, time\n"
              "dst, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])\n"
              "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "start, sent = time.time(), 0\n"
              "while time.time() - start < seconds:\n"
              "    due = int((time.time() - start) * rate)\n"
              "    while sent < due:\n"
              "        s.sendto(b'x', (dst, 1024 + sent % 60000))\n"
              "        sent += 1\n"
              "    time.sleep(0.001)\n"
              "print(sent)\n")

    def __init__(self, host: Any, dst_ip: str, rate: int, seconds: float) -> None:
        self.seconds = seconds
        self.proc = host.popen([sys.executable, "-c", self.SCRIPT, dst_ip, str(rate), str(seconds)])

    def sent(self, grace_s: float = 30) -> int:
        """Waits for the storm to end (at most ``grace_s`` past its length): the packets it sent."""
        return int(self.proc.communicate(timeout=self.seconds + grace_s)[0].decode().strip() or 0)


class RingAllReduce:
    """Ring all-reduce jobs between emulated hosts: one worker process per rank
    (``python -m mlroute.experiment.ring_worker``), each sending ``step_bytes`` to its successor and
    receiving as much from its predecessor per step, 2(n-1) steps per iteration after a compute gap. The
    connections persist across steps and iterations, as NCCL's do, so each ring edge is one transport flow."""

    def __init__(self, net: Any, rings: list[list[str]], step_bytes: float, iterations: int, compute_s: float,
                 base_port: int = 6000) -> None:
        self.rings = rings
        self.procs: list[tuple[int, int, Any]] = []
        for j, ring in enumerate(rings):
            ips = ",".join(net.get(h).IP() for h in ring)
            for rank, host in enumerate(ring):
                cmd = [sys.executable, "-m", "mlroute.experiment.ring_worker", "--rank", str(rank),
                       "--peers", ips, "--port", str(base_port + j), "--bytes", str(int(step_bytes)),
                       "--iterations", str(iterations), "--compute-s", str(compute_s)]
                self.procs.append((j, rank, net.get(host).popen(cmd)))
        self.timeout = 60 + iterations * (compute_s + 60)
        self.steps: dict[int, dict[int, list[float]]] = {}  # ring -> iteration -> the slowest rank's step times

    def results(self) -> list[list[float]]:
        """Per ring, per iteration: the iteration's all-reduce time (slowest rank), in seconds (that rank's step
        times: ``steps``)."""
        per_ring: dict[int, dict[int, float]] = {j: {} for j in range(len(self.rings))}
        deadline = time.time() + self.timeout
        for j, _rank, proc in self.procs:
            try:
                out, _ = proc.communicate(timeout=max(1, deadline - time.time()))
            except Exception:
                proc.kill()
                out, _ = proc.communicate()
            for line in (out or b"").decode(errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                it = rec["iteration"]
                if rec["seconds"] >= per_ring[j].get(it, 0.0):
                    per_ring[j][it] = rec["seconds"]
                    self.steps.setdefault(j, {})[it] = rec.get("steps_s", [])
        return [[per_ring[j][i] for i in sorted(per_ring[j])] for j in sorted(per_ring)]

    def stop(self) -> None:
        for _, _, proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
