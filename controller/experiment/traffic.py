"""iperf3 traffic for integration tests and experiments: long TCP flows with their own ports."""

import json
import time


class Iperf3Flows:
    """Start one iperf3 server per flow on its destination, then the clients (each under a hard timeout)."""

    def __init__(self, net, pairs, seconds, base_port=5300):
        self.net = net
        self.pairs = list(pairs)
        self.seconds = seconds
        self.servers, self.clients = [], []
        for i, (src, dst) in enumerate(self.pairs):
            self.servers.append(net.get(dst).popen(["iperf3", "-s", "-1", "-p", str(base_port + i)]))
        time.sleep(0.5)
        for i, (src, dst) in enumerate(self.pairs):
            cmd = (f"timeout -s KILL {seconds + 15} iperf3 -J -c {net.get(dst).IP()} -p {base_port + i} "
                   f"-t {seconds} --cport {base_port + 100 + i}")
            self.clients.append(net.get(src).popen(cmd, shell=True))

    def results_mbps(self):
        """Wait for the clients; received Mb/s per flow (0 for a client that failed)."""
        out = []
        for client in self.clients:
            text = client.communicate()[0]
            try:
                out.append(json.loads(text)["end"]["sum_received"]["bits_per_second"] / 1e6)
            except (ValueError, KeyError, TypeError):
                out.append(0.0)
        self.stop()
        return out

    def stop(self):
        for p in self.servers + self.clients:
            if p.poll() is None:
                p.kill()
                p.wait()
