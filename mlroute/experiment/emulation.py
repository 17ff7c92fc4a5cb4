"""Real ryu-manager + Open vSwitch + Mininet: start a controller, build a faithful emulated network, tear both
down cleanly. Shared by ``mlroute experiment`` and the integration tests.

Faithful means the emulation does not cap throughput below the shaped link rate (docs/paper.md, "Emulation
fidelity"): the userspace datapath forwards every packet on one ovs-vswitchd thread, and sends through one socket
whose buffer is ``net.core.wmem_default`` when OVS starts, so jumbo frames (MTU 9000) and an 8 MB default buffer
are needed.
Teardown never runs ``mn -c`` (it kills every ryu-manager and deletes /tmp/*.log): it stops the network and
deletes the bridges and veths it created.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import controller
from mininet_topos.common import host_ipv6

APP = Path(controller.__file__).with_name("app.py")  # the installed controller app, wherever we are run from
TREE = APP.resolve().parents[1]  # the directory that holds that ``controller`` package (a checkout, site-packages)

WMEM_NEEDED = 8 * 1024 * 1024

T = TypeVar("T")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ryu_manager() -> str:
    """The ryu-manager next to this interpreter (the project venv), else the one on PATH."""
    candidate = Path(sys.executable).with_name("ryu-manager")
    return str(candidate) if candidate.exists() else "ryu-manager"


class RestApi:
    """A controller's REST API (``host:rest_port``) and its OpenFlow listener (``host:of_port``): what a run reads
    from the controllers its switches connect to, one it started (``Controller``) or one already running
    (``ExternalController``)."""

    host: str
    of_port: int
    rest_port: int | None

    @property
    def rest_address(self) -> str:
        """Where the REST API listens (a controller started with ``rest_host`` answers there only)."""
        return getattr(self, "rest_host", None) or self.host

    def url(self, path: str) -> str:
        if self.rest_port is None:
            raise ValueError(f"no REST port given for the controller at {self.host}:{self.of_port}")
        return f"http://{self.rest_address}:{self.rest_port}{path}"

    def get(self, path: str, timeout: float = 10) -> Any:
        """GET a REST path: parsed JSON under /mlroute, text elsewhere (/metrics)."""
        with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
            body = r.read().decode()
        return json.loads(body) if path.startswith("/mlroute") else body

    def post(self, path: str, payload: dict | None = None, token: str | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url(path), data=json.dumps(payload or {}).encode(), method="POST",
                                     headers=headers)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read().decode())

    def metric(self, name: str, labels: dict | None = None) -> float:
        """Sum of a Prometheus sample's values (optionally only those with the given labels)."""
        total = 0.0
        for line in self.get("/metrics").splitlines():
            m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)$", line)
            if not m or line.startswith("#") or m.group(1) != name:
                continue
            if labels and not all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
                continue
            total += float(m.group(3))
        return total


def controller_env(extra_env: dict | None = None) -> dict[str, str]:
    """The environment a controller process runs in: its ``controller`` and ``mlroute`` imported from ``TREE``,
    the tree ``APP`` is from, first on its path. A venv's editable install maps them to the checkout it was
    installed from, so a second checkout (a clone run beside it) would otherwise run its own ``app.py`` over the
    other checkout's core."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    env.pop("MLROUTE_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join([str(TREE), *filter(None, [env.get("PYTHONPATH")])])
    return env


class Controller(RestApi):
    """The controller as a subprocess with its own OpenFlow and REST ports and log: ``ryu-manager
    controller/app.py`` (``framework="ryu"``, the default) or ``mlroute controller --framework FRAMEWORK`` run by
    the ``mlroute`` next to ``python`` (a venv with that framework; default: this interpreter's), which is the
    default for any other framework and what ``launcher=True`` chooses for Ryu. ``rest_host``: the REST API
    listens on that address only (e.g. a management network's bridge, ``management.py``), not 127.0.0.1."""

    def __init__(self, workdir: str | Path, config_text: str | None = None, extra_env: dict | None = None,
                 framework: str = "ryu", python: str | None = None, launcher: bool | None = None,
                 of_port: int | None = None, rest_host: str | None = None) -> None:
        self.framework = framework
        self.launcher = framework != "ryu" if launcher is None else launcher
        self.python = python or sys.executable
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.rest_host = rest_host
        self.of_port = of_port or free_port()  # a fixed port: a real switch is configured with it
        self.rest_port = free_port()
        self.log_path = self.workdir / "ryu.log"
        env = controller_env(extra_env)
        if config_text is not None:
            cfg = self.workdir / "mlroute.yaml"
            cfg.write_text(config_text)
            env["MLROUTE_CONFIG"] = str(cfg)
        self._env = env
        self._log = open(self.log_path, "w")
        self._log_lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self.proc = self._spawn()

    def command(self) -> list[str]:
        if not self.launcher:
            host = ["--wsapi-host", self.rest_host] if self.rest_host else []
            return [ryu_manager(), "--ofp-tcp-listen-port", str(self.of_port), *host, "--wsapi-port",
                    str(self.rest_port), str(APP)]
        host = ["--rest-host", self.rest_host] if self.rest_host else []
        return [str(Path(self.python).with_name("mlroute")), "controller", "--framework", self.framework,
                "--of-port", str(self.of_port), *host, "--rest-port", str(self.rest_port)]

    def _spawn(self) -> subprocess.Popen:
        proc = subprocess.Popen(self.command(), cwd=self.workdir, env=self._env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._copy_log, args=(proc.stdout,), daemon=True)
        self._reader.start()
        return proc

    def _copy_log(self, stream: Any) -> None:
        """The controller's output into its log, each line behind the wall-clock time it was read (Ryu's own
        lines carry none: a failed run's logs of several controllers then line up as one timeline)."""
        for raw in iter(stream.readline, b""):
            now = time.time()
            stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d} "
            with self._log_lock:
                if self._log.closed:
                    break
                self._log.write(stamp + raw.decode(errors="replace"))
                self._log.flush()
        stream.close()

    def _drain(self) -> None:
        """The process has ended: wait until the rest of its output is in the log."""
        if self._reader is not None and self.proc.poll() is not None:
            self._reader.join(timeout=5)

    def kill(self) -> None:
        """SIGKILL, as a crash would: no clean-up of any kind."""
        self.proc.kill()
        self.proc.wait()
        self._drain()

    def restart(self) -> None:
        """A new controller process on the same OpenFlow and REST ports and log (the switches reconnect)."""
        if self.proc.poll() is None:
            self.kill()
        with self._log_lock:
            self._log.write("\n--- controller restarted ---\n")
            self._log.flush()
        self.proc = self._spawn()

    def wait_ready(self, timeout: float = 30) -> None:
        """Until the REST API answers; raises with the log tail if ryu-manager exits or times out."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the controller exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            try:
                self.get("/mlroute/topology")
                return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"controller REST not up after {timeout}s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        self._drain()
        with self._log_lock:
            if not self._log.closed:
                self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        terminate(self.proc)
        self._drain()
        with self._log_lock:
            self._log.close()


@dataclass(frozen=True)
class ExternalController(RestApi):
    """A controller already running, not started by us (a node of a controller cluster, or one controller):
    switches connect to ``host:of_port``; with a ``rest_port`` its REST answers ``get`` / ``metric`` as a
    ``Controller``'s does. ``parse`` reads ``HOST:OF_PORT`` or ``HOST:OF_PORT/REST_PORT``."""

    host: str
    of_port: int
    rest_port: int | None = None

    ADDRESS: ClassVar[re.Pattern] = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})(?:/(\d{1,5}))?")

    @classmethod
    def parse(cls, text: str) -> ExternalController:
        """``HOST:OF_PORT[/REST_PORT]``, e.g. ``127.0.0.1:6654/8081``; ValueError naming ``text`` if malformed."""
        m = cls.ADDRESS.fullmatch(text.strip())
        ports = [int(p) for p in m.groups()[1:] if p is not None] if m else []
        if not m or not all(1 <= p <= 65535 for p in ports):
            raise ValueError(f"bad controller address {text.strip()!r}: expected HOST:OF_PORT or "
                             "HOST:OF_PORT/REST_PORT (ports 1-65535), e.g. 127.0.0.1:6654/8081")
        return cls(m.group(1), *ports)

    def __str__(self) -> str:
        return f"{self.host}:{self.of_port}" + (f"/{self.rest_port}" if self.rest_port is not None else "")



def terminate(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``: the process is gone when this returns."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def check_platform() -> list[str]:
    """Problems that make an emulation unfaithful or impossible, as readable strings (empty: all good)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("Mininet needs root")
    if subprocess.run(["ovs-vsctl", "show"], capture_output=True).returncode != 0:
        problems.append("Open vSwitch is not running (scripts/setup_env.sh starts it)")
    try:
        wmem = int(Path("/proc/sys/net/core/wmem_default").read_text())
        if wmem < WMEM_NEEDED:
            problems.append(f"net.core.wmem_default is {wmem} (< 8 MB): OVS drops packets silently; "
                            "scripts/setup_env.sh raises it and restarts OVS")
    except OSError:
        pass
    return problems


TABLES_CAPPED = (0, 1, 2)  # the tables mlroute writes (controller/desired/rules.py)


def start_network(topo: Any, controller: RestApi | list[RestApi], jumbo: bool = False,
                  table_limit: int | None = None) -> Any:
    """Build and start a Mininet network on userspace OVS, every bridge connected to ``controller`` (a
    ``Controller`` we started or an ``ExternalController``, at its ``host:of_port``; a list: a controller
    cluster, each bridge given all of them, as ``ovs-vsctl set-controller br tcp:a tcp:b tcp:c`` does; a host
    name is resolved here, as Open vSwitch wants an address). ``table_limit``: every
    bridge's tables hold at most that many entries and refuse the next (``flow_limit`` with
    ``overflow_policy=refuse``, set as the bridge is created, before it meets the controller, and reported in
    its table features): a lab switch's small tables (../shared/HARDWARE.md)."""
    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController

    class CappedSwitch(OVSSwitch):
        def bridgeOpts(self) -> str:  # noqa: N802 (Mininet's method name)
            """The bridge's options in Mininet's one ovs-vsctl transaction, plus the Flow_Table row its tables
            share (a name of its own: Mininet batches every bridge into one ovs-vsctl call)."""
            ref = "@ft_" + re.sub(r"\W", "_", self.name)
            tables = " ".join(f"flow_tables:{t}={ref}" for t in TABLES_CAPPED)
            return (f"{super().bridgeOpts()} {tables} -- --id={ref} create Flow_Table flow_limit={table_limit} "
                    "overflow_policy=refuse")

    class Remote(RemoteController):
        def checkListening(self) -> None:  # noqa: N802 (Mininet's method name)
            """Mininet probes the port with telnet and decodes Ryu's binary HELLO as UTF-8, which fails at
            random; the controller's REST answered already (Controller.wait_ready), or the experiment probed an
            external one's OpenFlow port, so it is listening."""

    net = Mininet(topo=topo, switch=OVSSwitch if table_limit is None else CappedSwitch, controller=None,
                  autoSetMacs=False, build=False,
                  waitConnected=False)
    for i, ctl in enumerate(controller if isinstance(controller, list) else [controller]):
        net.addController(Remote(f"c{i}", ip=socket.gethostbyname(ctl.host), port=ctl.of_port))
    try:
        net.build()
        net.start()
        limit_packet_ins(net)
        if jumbo:
            set_jumbo(net)
    except BaseException:
        stop_network(net)
        raise
    return net


PACKET_IN_RATE_PPS = 200  # per switch: new-flow copies, ARP and unknown-destination packets together
PACKET_IN_BURST = 50


def limit_packet_ins(net: Any, rate_pps: int = PACKET_IN_RATE_PPS, burst: int = PACKET_IN_BURST) -> None:
    """Open vSwitch's own packet-in rate limit on every switch's controller connection: a storm of new flows
    from one host is queued and dropped in the switch (the packets themselves are still forwarded; only the
    copies to the controller go), so the controller's event loop keeps up with echo requests and LLDP."""
    ours = {sw.name for sw in net.switches}
    out = subprocess.run(["ovs-vsctl", "--bare", "--format=csv", "--columns=name,controller", "list", "Bridge"],
                         capture_output=True, text=True, check=False).stdout
    uuids = [u for line in out.splitlines() if line.split(",", 1)[0] in ours
             for u in line.split(",", 1)[1].strip('"').split()]
    ovs_vsctl_batch([["set", "Controller", u, f"controller_rate_limit={rate_pps}", f"controller_burst_limit={burst}"]
                     for u in uuids])


def ovs_vsctl_batch(commands: list[list[str]], per_call: int = 200) -> None:
    """Run ovs-vsctl commands a few hundred per call (``--`` between them): each call waits for ovs-vswitchd to
    reconfigure every bridge: at k=8 (80 bridges, 512 ports) a jumbo set-up one port a call took 140 s, batched 2 s."""
    for i in range(0, len(commands), per_call):
        args = ["ovs-vsctl"]
        for command in commands[i:i + per_call]:
            args += ["--", *command]
        subprocess.run(args, check=False, capture_output=True)


def set_jumbo(net: Any, mtu: int = 9000) -> None:
    """MTU ``mtu`` on every host and switch interface (the userspace datapath needs jumbo frames)."""
    for host in net.hosts:
        for intf in host.intfList():
            host.cmd(f"ip link set {intf} mtu {mtu}")
    ovs_vsctl_batch([["set", "Interface", intf.name, f"mtu_request={mtu}"]
                     for sw in net.switches for intf in sw.intfList() if intf.name != "lo"])


def enable_sflow(net: Any, port: int, sampling: int = 64, polling: int = 1) -> None:
    """Every switch of ``net`` exports sFlow (1-in-``sampling``, counters every ``polling`` s) to the collector
    on 127.0.0.1:``port`` (te.detection: sflow | both); ``stop_network`` clears it."""
    from mininet_topos.common import sflow_command
    subprocess.run(sflow_command([s.name for s in net.switches], f"127.0.0.1:{port}", sampling, polling),
                   check=True, capture_output=True)
    net.mlroute_sflow = True


def sflow_config(port: int) -> str:
    """The controller configuration's sflow: section for a collector on 127.0.0.1:``port``."""
    return f"sflow:\n  host: 127.0.0.1\n  port: {port}\n"


def stop_network(net: Any) -> None:
    """Stop a network and remove what it left: bridges, veths. Never `mn -c`. Safe to call twice."""
    if getattr(net, "mlroute_stopped", False):
        return
    net.mlroute_stopped = True
    names = [s.name for s in net.switches]
    if getattr(net, "mlroute_sflow", False):
        from mininet_topos.common import sflow_clear_command
        subprocess.run(sflow_clear_command(names), check=False, capture_output=True)
    try:
        net.stop()
    except Exception:
        pass  # a half-built network: the explicit cleanup below still runs
    finally:
        for name in names:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", name], check=False)
        out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            dev = line.split(":")[1].strip().split("@")[0]
            if any(dev.startswith(f"{n}-eth") for n in names):
                subprocess.run(["ip", "link", "del", dev], check=False)


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.5) -> T:
    """Poll ``predicate`` until it returns something true or ``timeout`` passes; its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def add_ipv6(net: Any, timeout_s: float = 10) -> bool:
    """Dual stack: every host given its IPv6 address beside its IPv4 one (``mininet_topos.common.host_ipv6``,
    fd00::/64), duplicate-address detection left on as a real host runs it. True once no address of any host
    is tentative (detection done) within ``timeout_s``."""
    for host in net.hosts:
        host.cmd(f"ip -6 addr add {host_ipv6(host.IP())}/64 dev {host.defaultIntf().name}")
    deadline = time.monotonic() + timeout_s
    while any(host.cmd("ip -6 addr show tentative").strip() for host in net.hosts):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def ping_all(net: Any, timeout_s: float = 1, failed: list | None = None, ipv6: bool = False) -> float:
    """Like net.pingAll() but quiet and bounded: the loss fraction over all ordered host pairs (the pairs that
    failed are appended to ``failed`` when a list is given); with ``ipv6``, to their IPv6 addresses
    (``add_ipv6``)."""
    sent = lost = 0
    for src in net.hosts:
        for dst in net.hosts:
            if src is dst:
                continue
            sent += 1
            address = host_ipv6(dst.IP()) if ipv6 else dst.IP()
            if " 0% packet loss" not in src.cmd(f"ping -c1 -W{timeout_s} {address}"):
                lost += 1
                if failed is not None:
                    failed.append((src.name, dst.name))
    return lost / sent


def ping_all_concurrently(net: Any, timeout_s: float = 1) -> float:
    """``ping_all``'s loss fraction, each source pinging every other host at once (one shell per source): a
    32-host fabric's 992 pings take seconds instead of a minute."""
    lost = 0
    for src in net.hosts:
        targets = " ".join(h.IP() for h in net.hosts if h is not src)
        out = src.cmd(f"for ip in {targets}; do (ping -c1 -W{timeout_s} $ip >/dev/null 2>&1 || echo LOST) & done;"
                      " wait")
        lost += out.count("LOST")
    n = len(net.hosts)
    return lost / (n * (n - 1))


def iperf3(net: Any, src: Any, dst: Any, seconds: float = 3, port: int = 5201) -> float:
    """One TCP iperf3 run (server on dst, client on src under a hard timeout); received Mb/s, 0 on failure."""
    server = dst.popen(["iperf3", "-s", "-1", "-p", str(port)])
    time.sleep(0.5)
    out = src.cmd(f"timeout -s KILL {seconds + 10} iperf3 -J -c {dst.IP()} -p {port} -t {seconds}")
    server.kill()
    server.wait()
    try:
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    except (ValueError, KeyError):
        return 0.0
