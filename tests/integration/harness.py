"""Real ryu-manager + Open vSwitch + Mininet for integration tests: start, query, and tear down cleanly.

Never runs `mn -c` (it kills every ryu-manager and deletes /tmp/*.log): teardown stops the network, then
deletes the bridges and veths this network created. Controller logs go to the test's own directory.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet_topos"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    """ryu-manager controller/app.py as a subprocess, with its own OpenFlow and REST ports."""

    def __init__(self, workdir, config_text=None, extra_env=None):
        self.workdir = Path(workdir)
        self.of_port = free_port()
        self.rest_port = free_port()
        self.log_path = self.workdir / "ryu.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
        if config_text is not None:
            cfg = self.workdir / "mlroute.yaml"
            cfg.write_text(config_text)
            env["MLROUTE_CONFIG"] = str(cfg)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/ryu-manager"), "--ofp-tcp-listen-port", str(self.of_port),
             "--wsapi-port", str(self.rest_port), "controller/app.py"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ryu-manager exited ({self.proc.returncode}):\n{self.log()}")
            try:
                self.get("/mlroute/topology")
                return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"controller REST not up after {timeout}s:\n{self.log()}")

    def url(self, path):
        return f"http://127.0.0.1:{self.rest_port}{path}"

    def get(self, path):
        with urllib.request.urlopen(self.url(path), timeout=10) as r:
            body = r.read().decode()
        return json.loads(body) if path.startswith("/mlroute") else body

    def post(self, path, payload=None, token=None):
        req = urllib.request.Request(self.url(path), data=json.dumps(payload or {}).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read().decode())

    def metric(self, name, labels=None):
        """Sum of a Prometheus sample's values (optionally only those with the given labels)."""
        total = 0.0
        for line in self.get("/metrics").splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)$", line)
            if not m or m.group(1) != name:
                continue
            if labels and not all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
                continue
            total += float(m.group(3))
        return total

    def log(self):
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def start_network(topo, controller, jumbo=False):
    """Build and start a Mininet network on userspace OVS, connected to ``controller``."""
    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController

    net = Mininet(topo=topo, switch=OVSSwitch, controller=None, autoSetMacs=False, build=False,
                  waitConnected=False)
    net.addController(RemoteController("c0", ip="127.0.0.1", port=controller.of_port))
    net.build()
    net.start()
    if jumbo:
        set_jumbo(net)
    return net


def set_jumbo(net, mtu=9000):
    for host in net.hosts:
        for intf in host.intfList():
            host.cmd(f"ip link set {intf} mtu {mtu}")
    for sw in net.switches:
        for intf in sw.intfList():
            if intf.name != "lo":
                subprocess.run(["ovs-vsctl", "set", "Interface", intf.name, f"mtu_request={mtu}"], check=False)


def stop_network(net):
    """Stop a network and remove whatever it left: bridges, veths. Never `mn -c`. Safe to call twice."""
    if getattr(net, "mlroute_stopped", False):
        return
    net.mlroute_stopped = True
    names = [s.name for s in net.switches]
    try:
        net.stop()
    finally:
        for name in names:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", name], check=False)
        out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            dev = line.split(":")[1].strip().split("@")[0]
            if any(dev.startswith(f"{n}-eth") for n in names):
                subprocess.run(["ip", "link", "del", dev], check=False)


def wait_until(predicate, timeout, interval=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def ping_all(net, timeout_s=1):
    """Like net.pingAll() but quiet and bounded: returns the loss fraction over all ordered host pairs."""
    sent = lost = 0
    for src in net.hosts:
        for dst in net.hosts:
            if src is dst:
                continue
            sent += 1
            out = src.cmd(f"ping -c1 -W{timeout_s} {dst.IP()}")
            if " 0% packet loss" not in out:
                lost += 1
    return lost / sent


def iperf3(net, src, dst, seconds=3, port=5201):
    """A TCP iperf3 run (server on dst, client on src under a hard timeout); returns received Mb/s or 0."""
    server = dst.popen(["iperf3", "-s", "-1", "-p", str(port)])
    time.sleep(0.5)
    out = src.cmd(f"timeout -s KILL {seconds + 10} iperf3 -J -c {dst.IP()} -p {port} -t {seconds}")
    server.kill()
    server.wait()
    try:
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    except (ValueError, KeyError):
        return 0.0
