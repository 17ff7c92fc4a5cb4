"""Open vSwitch's own sFlow export, decoded by ours: two standalone userspace bridges (no controller), sFlow
1-in-8 with 1 s counter polling toward our collector on a free localhost port, a UDP stream from one host to
the other. The samples must name the stream's 5-tuple, their interfaces must map (as learned from the counter
samples) to the OpenFlow ports ovs-vsctl reports, and the bytes estimated at the ingress edge must match the
bytes the host port's counters saw. About 15 s."""

import subprocess
import threading
import time

import pytest

from controller.southbound.sflow.agents import AgentMap, sysfs_ifindex
from controller.southbound.sflow.collector import SflowCollector
from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.ingest import SflowIngest
from controller.state.flowkey import FlowKey
from controller.state.sflow_rates import SampleRates
from tests.integration import harness

SAMPLING = 8
DPIDS = {"sfx1": 0xF1, "sfx2": 0xF2}
STREAM = FlowKey("10.0.0.1", "10.0.0.2", 17, 41000, 5301)


def ovs_get(name, column):
    return subprocess.run(["ovs-vsctl", "get", "Interface", name, column], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def net():
    from mininet.link import TCLink
    from mininet.net import Mininet
    from mininet.node import OVSSwitch
    from mininet.topo import Topo

    class TwoBridges(Topo):
        def build(self):
            s1, s2 = (self.addSwitch(n, dpid=f"{d:016x}", datapath="user", failMode="standalone")
                      for n, d in DPIDS.items())
            h1, h2 = self.addHost("sfh1", ip="10.0.0.1/24"), self.addHost("sfh2", ip="10.0.0.2/24")
            self.addLink(h1, s1, txo=False)
            self.addLink(s1, s2, txo=False)
            self.addLink(s2, h2, txo=False)

    network = Mininet(topo=TwoBridges(), switch=OVSSwitch, link=TCLink, controller=None, build=False,
                      waitConnected=False)
    try:
        network.build()
        network.start()
        yield network
    finally:
        harness.stop_network(network)  # the sFlow record goes with its bridges (OVSDB drops unreferenced rows)


def test_open_vswitch_sflow_decoded_and_mapped(net):
    ports = {}  # interface name -> (dpid, OpenFlow port), as ovs-vsctl has them
    for bridge, dpid in DPIDS.items():
        for intf in net.get(bridge).intfList():
            if intf.name != "lo":
                ports[intf.name] = (dpid, int(ovs_get(intf.name, "ofport")))
    access = {ports["sfx1-eth1"], ports["sfx2-eth2"]}  # the host-facing ports

    agents = AgentMap(accept=lambda dpid, port: (dpid, port) in ports.values())
    ingest = SflowIngest(agents, SampleRates(threshold_bps=1e6, window_s=1.0, windows=10, windows_needed=2),
                         CounterRates(), lambda dpid, port: (dpid, port) in access)
    seen = {"agents": set(), "peers": set(), "stream_samples": [], "counter_ifindexes": set(), "datagrams": []}

    def on_datagram(d, peer):
        seen["agents"].add((d.agent, d.sub_agent_id))
        seen["peers"].add(peer[0])
        seen["datagrams"].append(d)
        for s in d.flow_samples:
            p = s.packet
            if p and (p.src_ip, p.dst_ip, p.ip_proto, p.src_port, p.dst_port) == (
                    STREAM.src_ip, STREAM.dst_ip, STREAM.proto, STREAM.src_port, STREAM.dst_port):
                seen["stream_samples"].append((d, s))
        for c in d.counter_samples:
            if c.interface is not None:
                seen["counter_ifindexes"].add(c.interface.if_index)
        ingest.feed(time.monotonic(), d)

    collector = SflowCollector(on_datagram, port=0, agents=agents)
    stop = threading.Event()
    thread = threading.Thread(target=collector.serve, args=(stop, 0.1), daemon=True)
    thread.start()
    try:
        host, port = collector.address
        subprocess.run(["ovs-vsctl", "--", "--id=@s", "create", "sflow", "agent=lo", f'target="{host}:{port}"',
                        "header=128", f"sampling={SAMPLING}", "polling=1", "--", "set", "bridge", "sfx1", "sflow=@s",
                        "--", "set", "bridge", "sfx2", "sflow=@s"], check=True, capture_output=True)
        h1, h2 = net.get("sfh1", "sfh2")
        assert "0% packet loss" in h1.cmd("ping -c 2 -W 1 10.0.0.2")
        assert harness.wait_until(lambda: len(agents) >= len(ports), timeout=5)  # a polling interval or two
        before = ingest.counters.rate(*ports["sfx1-eth1"])
        rx_before = before.rx_bytes
        h2.cmd("iperf3 -s -1 -D -p 5301")
        time.sleep(0.3)
        h1.cmd(f"timeout -s KILL 8 iperf3 -c 10.0.0.2 -p 5301 -u -b 4M -l 1000 -t 3 --cport {STREAM.src_port}")
        time.sleep(2.2)  # the last samples and two more counter polls
    finally:
        stop.set()
        thread.join(timeout=5)
        collector.close()

    # what Open vSwitch exports: the agent address of agent=lo, one sub-agent per bridge
    assert {a for a, _ in seen["agents"]} == {"127.0.0.1"} and seen["peers"] == {"127.0.0.1"}
    assert {sub for _, sub in seen["agents"]} == {0, 1}
    # the map learned from the counter samples is ovs-vsctl's (and the kernel ifindex of each port's device),
    # and the one built from the port names alone is the same
    by_names = AgentMap()
    for name, (dpid, ofport) in ports.items():
        assert by_names.add_port_names("127.0.0.1", dpid, {ofport: name}) == 1
    for name, (dpid, ofport) in ports.items():
        ifindex = int(ovs_get(name, "ifindex"))
        assert ifindex == sysfs_ifindex(name) and ifindex in seen["counter_ifindexes"]
        assert agents.port_of("127.0.0.1", 0, ifindex) == by_names.port_of("127.0.0.1", 0, ifindex) == (dpid, ofport)
    # flow samples of the stream, sampled at both bridges, entering at the right ports
    stream = seen["stream_samples"]
    assert len(stream) > 50 and all(s.sampling_rate == SAMPLING for _, s in stream)
    entered = {agents.input_port(d, s) for d, s in stream}
    assert entered == {ports["sfx1-eth1"], ports["sfx2-eth1"]}
    assert {agents.output_port(d, s) for d, s in stream} == {ports["sfx1-eth2"], ports["sfx2-eth2"]}
    assert all(s.packet.src_mac == h1.MAC() and s.packet.dst_mac == h2.MAC() for _, s in stream)
    # counted once, at sfx1's host port; the estimate agrees with what the port's counters saw
    assert ingest.ingress_of(STREAM) == ports["sfx1-eth1"]
    estimated = sum(w[0] for w in ingest.rates.flows.tracks[STREAM].done) + ingest.rates.flows.tracks[STREAM].cur[0]
    stream_bytes = ingest.counters.rate(*ports["sfx1-eth1"]).rx_bytes - rx_before
    assert 0.7 < estimated / stream_bytes < 1.3, (estimated, stream_bytes)
    assert STREAM in {e.key for e in ingest.rates.elephants()}  # 4 Mb/s for 3 windows over a 1 Mb/s threshold
    assert collector.dropped.get("unknown_agent", 0) <= 2 and not set(collector.dropped) - {"unknown_agent"}
    print(f"\nsFlow from OVS: {collector.stats()}, stream samples {len(stream)}, "
          f"estimated/counters {estimated / stream_bytes:.3f}, ingest {ingest.stats()}")
