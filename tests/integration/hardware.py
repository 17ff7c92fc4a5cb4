"""One real switch in the conformance suite (docs/lab-switches.md), the way Faucet's hardware harness runs its
tests against one: the switch under test takes the place of edge switch e0_0 of the k=4 fat-tree (two host
ports, two uplinks: four ports), cabled to four interfaces of the test machine; the rest of the fabric stays
emulated, so the suite's scenarios (elephants through it, a restart, a cut link) cross the real switch.

``MLROUTE_HW_SWITCH`` names a YAML file::

    dpid: 0x0000aabbccddeeff        # the switch's datapath id
    controller_port: 6653           # the switch connects to tcp:<this machine>:<controller_port>
    ports: {1: enp1s0f0, 2: enp1s0f1, 3: enp2s0f0, 4: enp2s0f1}
        # switch port -> the interface cabled to it: 1, 2 hosts h1, h2; 3, 4 uplinks to a0_0, a0_1
    profile: {profile: generic-of13}  # its switches: entry (the dpid is added)

``emulated_switch`` stands an Open vSwitch bridge outside Mininet in for the hardware (veth pairs for the
cables): the suite runs the harness that way on every CI run.
"""

import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field

import yaml

from mininet_topos.common import host_ip, host_mac
from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment import emulation

JUMBO = 9000
REPLACED = "e0_0"  # the edge switch the hardware stands for
HOST_PORTS = {"h1": 1, "h2": 2}
UPLINK_PORTS = {"a0_0": 3, "a0_1": 4}


@dataclass
class HardwareSwitch:
    dpid: int
    controller_port: int
    ports: dict[int, str]  # switch port -> the test machine's interface cabled to it
    profile: dict = field(default_factory=dict)  # its ``switches:`` entry, less the dpid

    def switches_entry(self) -> str:
        """Its ``switches:`` list entry, as YAML."""
        return yaml.safe_dump([{"dpid": self.dpid, **self.profile}], default_flow_style=False)


def from_environment() -> HardwareSwitch | None:
    """The switch ``MLROUTE_HW_SWITCH`` describes, or None; a bad file names the key."""
    path = os.environ.get("MLROUTE_HW_SWITCH")
    if not path:
        return None
    with open(path) as f:
        spec = yaml.safe_load(f) or {}
    for key in ("dpid", "controller_port", "ports"):
        if key not in spec:
            raise ValueError(f"{path}: {key}: missing (see tests/integration/hardware.py)")
    ports = {int(p): str(nic) for p, nic in dict(spec["ports"]).items()}
    if sorted(ports) != [1, 2, 3, 4]:
        raise ValueError(f"{path}: ports: must name the interfaces cabled to switch ports 1-4, got {sorted(ports)}")
    return HardwareSwitch(int(spec["dpid"]), int(spec["controller_port"]), ports, dict(spec.get("profile") or {}))


class FatTreeAroundHardware(FatTreeTopo):
    """The k=4 fat-tree without e0_0 (and its four links): the hardware is cabled in its place."""

    def addSwitch(self, name, **opts):  # noqa: N802 (Mininet's method name)
        return name if name == REPLACED else super().addSwitch(name, **opts)

    def addLink(self, node1, node2, port1=None, port2=None, key=None, **opts):  # noqa: N802
        if REPLACED in (node1, node2):
            return None
        return super().addLink(node1, node2, port1, port2, key, **opts)


def start_network(hw: HardwareSwitch, controller, bw: int, jumbo: bool = True):
    """The emulated rest of the fabric, connected to ``controller``, with the hardware's cables attached: h1 and
    h2 take the interfaces of ports 1 and 2 (moved into their namespaces, with their addresses), a0_0 and a0_1
    those of ports 3 and 4 (added to their bridges); ``jumbo``: MTU 9000 on them as on the rest (the switch's
    ports must take it too)."""
    from mininet.link import Intf

    net = emulation.start_network(FatTreeAroundHardware(k=4, bw=bw), controller, jumbo=jumbo)
    for name, port in HOST_PORTS.items():
        host, n = net.get(name), int(name[1:])
        nic = Intf(hw.ports[port], node=host)
        host.setMAC(host_mac(n), intf=nic)
        host.setIP(host_ip(n), 8, intf=nic)
        host.cmd(f"ip link set {nic} up" + (f" mtu {JUMBO}" if jumbo else ""))
    for name, port in UPLINK_PORTS.items():
        switch = net.get(name)
        switch.attach(Intf(hw.ports[port], node=switch))
        if jumbo:
            subprocess.run(["ovs-vsctl", "set", "Interface", hw.ports[port], f"mtu_request={JUMBO}"], check=True)
    return net


@contextmanager
def emulated_switch(controller_port: int, profile: dict, dpid: int = 0x1000):
    """An Open vSwitch bridge outside Mininet standing in for the hardware, its four ports cabled by veth pairs
    to interfaces named as a test machine's NICs would be; gone after."""
    nics = {p: f"hwnic{p}" for p in range(1, 5)}
    try:
        for p, nic in nics.items():
            subprocess.run(["ip", "link", "add", nic, "type", "veth", "peer", "name", f"hwsw{p}"], check=True)
            subprocess.run(["ip", "link", "set", f"hwsw{p}", "up"], check=True)
            for end in (nic, f"hwsw{p}"):  # TX checksum offload off: TCP stalls on the userspace datapath otherwise
                subprocess.run(["ethtool", "-K", end, "tx", "off"], check=True, capture_output=True)
        cmd = ["ovs-vsctl", "--", "--may-exist", "add-br", "hw0", "--", "set", "bridge", "hw0",
               "datapath_type=netdev", "protocols=OpenFlow13", "fail_mode=secure",
               f"other_config:datapath-id={dpid:016x}"]
        for p in nics:
            cmd += ["--", "add-port", "hw0", f"hwsw{p}", "--", "set", "Interface", f"hwsw{p}", f"ofport_request={p}"]
        subprocess.run(cmd, check=True)
        subprocess.run(["ovs-vsctl", "set-controller", "hw0", f"tcp:127.0.0.1:{controller_port}"], check=True)
        for p in nics:  # jumbo frames, as the emulated fabric's own ports (emulation.set_jumbo)
            subprocess.run(["ovs-vsctl", "set", "Interface", f"hwsw{p}", f"mtu_request={JUMBO}"], check=True)
        yield HardwareSwitch(dpid, controller_port, nics, profile)
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "hw0"], check=False)
        for p in nics:
            subprocess.run(["ip", "link", "del", f"hwsw{p}"], check=False, capture_output=True)
