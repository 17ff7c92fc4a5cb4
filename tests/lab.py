"""The test bench for the Ryu app without a network (like Faucet's valve test bench): ``Lab`` wires
``controller/app.py``'s MlrouteApp, loaded as ryu-manager loads it, to fake switches shaped like a Topology
fixture; packet builders and multipart replies feed it synthetic Ryu events; forwarding is checked by tracing
packets through what the switches hold (tests.oftable)."""

import importlib.util
import ipaddress
from pathlib import Path

from controller.desired.rules import COOKIE_FLOW, COOKIE_FLOW_MISS
from controller.southbound import framework as southbound
from controller.southbound.framework import arp, ethernet, icmpv6, ipv4, ipv6, ofp_event, packet, tcp
from controller.state.flowkey import FlowKey
from tests.decision_steps import te_step
from tests.fakeswitch import OFP, PARSER, FakeSwitch
from tests.oftable import trace

switches, topo_event = southbound.topology()  # Ryu's or os-ken's topology app
Link, Port, Switch = switches.Link, switches.Port, switches.Switch

APP_PATH = Path(__file__).resolve().parents[1] / "controller" / "app.py"
REPLY_HANDLERS = {"EventOFPBarrierReply": "barrier_reply", "EventOFPFlowStatsReply": "flow_stats_reply",
                  "EventOFPGroupDescStatsReply": "group_desc_reply", "EventOFPDescStatsReply": "desc_reply",
                  "EventOFPErrorMsg": "error_handler", "EventOFPTableFeaturesStatsReply": "table_reply",
                  "EventOFPTableStatsReply": "table_reply", "EventOFPGroupFeaturesStatsReply": "group_features_reply",
                  "EventOFPRoleReply": "role_reply", "EventOFPFlowRemoved": "flow_removed"}


def load_app_module():
    """controller/app.py as ryu-manager loads it: a top-level module from its path."""
    spec = importlib.util.spec_from_file_location("mlroute_app_under_test", APP_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Lab:
    """An MlrouteApp wired to fake switches shaped like a Topology fixture (switches, ports, links, hosts)."""

    apps: list = []  # every app a test made: their optimiser workers are stopped at teardown

    def __init__(self, reference, switches=None):
        self.ref = reference
        self.app = load_app_module().MlrouteApp(**{name: cls() for name, cls in southbound.rest_contexts().items()})
        Lab.apps.append(self.app)
        for thread in self.app._threads:  # the test drives resync and TE steps itself
            southbound.kill(thread)
        self.switches = switches or {d: FakeSwitch(d) for d in reference.ports}
        for sw in self.switches.values():
            sw.deliver = self._deliver

    def restart(self):
        """A new controller process over the same switches (their tables kept, as OVS keeps them)."""
        return Lab(self.ref, self.switches)

    def reconnect_all(self):
        """Every switch connects (its tables read back), links are discovered, the controller syncs."""
        for dpid in self.switches:
            self.connect(dpid)
        self.pump()
        self.discover_links()
        self.app.resync()

    def discover_links(self):
        for link in self.ref.links.values():
            src, dst = self._port(link.src, link.src_port), self._port(link.dst, link.dst_port)
            self.app.link_add(topo_event.EventLinkAdd(Link(src, dst)))

    def _deliver(self, name, msg):
        getattr(self.app, REPLY_HANDLERS[name])(getattr(ofp_event, name)(msg))

    def pump(self):
        while sum(sw.pump() for sw in self.switches.values()):
            pass

    def _port(self, dpid, port_no, live=True):
        state = 0 if live else OFP.OFPPS_LINK_DOWN
        ofpport = PARSER.OFPPort(port_no, "00:00:00:00:00:01", b"p", 0, state, 0, 0, 0, 0, 0, 0)
        return Port(dpid, OFP, ofpport)

    def connect(self, dpid, down=()):
        """The switch connects, its ports up except the (dpid, port) ends in ``down``."""
        switch = Switch(self.switches[dpid])
        switch.ports = [self._port(dpid, p, (dpid, p) not in down) for p in sorted(self.ref.ports[dpid])]
        self.switches[dpid].connected = True
        self.app.switch_enter(topo_event.EventSwitchEnter(switch))

    def disconnect(self, dpid):
        """What Ryu reports when a switch's connection drops: dead datapath, switch leave, its links deleted."""
        dp = self.switches[dpid]
        dp.connected = False
        self.app.datapath_dead(ofp_event.EventOFPStateChange(dp))
        self.app.switch_leave(topo_event.EventSwitchLeave(Switch(dp)))
        for link in [ln for ln in self.ref.links.values() if dpid in (ln.src, ln.dst)]:
            src, dst = self._port(link.src, link.src_port), self._port(link.dst, link.dst_port)
            self.app.link_delete(topo_event.EventLinkDelete(Link(src, dst)))

    def bring_up(self):
        for dpid in self.switches:
            self.connect(dpid)
        self.pump()  # the read-back replies of every switch
        self.discover_links()
        for host in self.ref.hosts.values():  # each address speaks: ARP, or a neighbour solicitation for IPv6
            frame = nd_solicitation(host, "fd00::ffff") if ":" in host.ip else arp_request(host, "10.0.0.254")
            self.packet_in(host.dpid, host.port, frame)
        self.app.resync()

    def packet_in(self, dpid, port, data, cookie=0):
        msg = PARSER.OFPPacketIn(self.switches[dpid], buffer_id=OFP.OFP_NO_BUFFER, total_len=len(data),
                                 reason=OFP.OFPR_ACTION, table_id=0, cookie=cookie,
                                 match=PARSER.OFPMatch(in_port=port), data=data)
        self.app.packet_in_handler(ofp_event.EventOFPPacketIn(msg))

    def tables(self):
        return {d: sw.table for d, sw in self.switches.items()}

    def trace(self, src_ip, dst_ip, **fields):
        src = self.ref.hosts[src_ip]
        ip = "ipv6" if ":" in src_ip else "ipv4"
        pkt = {"eth_type": 0x86DD if ip == "ipv6" else 0x0800, "eth_src": src.mac, f"{ip}_src": src_ip,
               f"{ip}_dst": dst_ip, **fields}
        return trace(self.tables(), self.ref, src.dpid, src.port, pkt)


def arp_request(host, target_ip):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=host.mac, ethertype=0x0806))
    p.add_protocol(arp.arp(opcode=arp.ARP_REQUEST, src_mac=host.mac, src_ip=host.ip, dst_mac="00:00:00:00:00:00",
                           dst_ip=target_ip))
    p.serialize()
    return bytes(p.data)


def nd_solicitation(host, target):
    """A neighbour solicitation from ``host``'s IPv6 address for ``target`` (to its solicited-node group)."""
    group = ipaddress.IPv6Address(int(ipaddress.IPv6Address("ff02::1:ff00:0")) | int(ipaddress.IPv6Address(target))
                                  & 0xFFFFFF).compressed
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="33:33:ff:00:ff:ff", src=host.mac, ethertype=0x86DD))
    p.add_protocol(ipv6.ipv6(src=host.ip, dst=group, nxt=58, hop_limit=255))
    p.add_protocol(icmpv6.icmpv6(type_=135, data=icmpv6.nd_neighbor(dst=target)))
    p.serialize()
    return bytes(p.data)


def tcp_packet(key):
    """A new TCP flow's first segment as the copy rule sends it up (over IPv6 when the key's addresses are)."""
    v6 = ":" in key.src_ip
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="00:00:00:00:00:02", src="00:00:00:00:00:01",
                                     ethertype=0x86DD if v6 else 0x0800))
    p.add_protocol(ipv6.ipv6(src=key.src_ip, dst=key.dst_ip, nxt=6) if v6 else
                   ipv4.ipv4(src=key.src_ip, dst=key.dst_ip, proto=6))
    p.add_protocol(tcp.tcp(src_port=key.src_port, dst_port=key.dst_port))
    p.serialize()
    return bytes(p.data)


def stats_reply(switch, entries):
    reply = PARSER.OFPFlowStatsReply(switch)
    reply.xid, reply.flags, reply.body = 4242, 0, entries
    return ofp_event.EventOFPFlowStatsReply(reply)


def counting_stat(key, in_port, byte_count, seconds):
    ip = {"eth_type": 0x86DD, "ipv6_src": key.src_ip, "ipv6_dst": key.dst_ip} if ":" in key.src_ip else \
        {"eth_type": 0x0800, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip}
    return PARSER.OFPFlowStats(table_id=0, duration_sec=seconds, duration_nsec=0, priority=20, idle_timeout=10,
                               hard_timeout=0, flags=0, cookie=COOKIE_FLOW, packet_count=1, byte_count=byte_count,
                               match=PARSER.OFPMatch(in_port=in_port, ip_proto=6, tcp_src=key.src_port,
                                                     tcp_dst=key.dst_port, **ip),
                               instructions=[])


STRIDE4 = [FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + 4) % 16 + 1}", 6, 40000 + i, 5201) for i in range(8)]
STRIDE4_V6 = [FlowKey(f"fd00::a00:{i + 1:x}", f"fd00::a00:{(i + 4) % 16 + 1:x}", 6, 40000 + i, 5201) for i in range(8)]


def poll(lab, keys, seconds):
    """One flow-stats poll of every ingress switch: each flow has sent 10 Mb/s for ``seconds``."""
    for dpid in {lab.ref.hosts[k.src_ip].dpid for k in keys}:
        entries = [counting_stat(k, lab.ref.hosts[k.src_ip].port, int(seconds * 1.25e6), seconds)
                   for k in keys if lab.ref.hosts[k.src_ip].dpid == dpid]
        lab.app.flow_stats_reply(stats_reply(lab.switches[dpid], entries))


def pin_stride4(lab, keys=STRIDE4):
    for key in keys:
        src = lab.ref.hosts[key.src_ip]
        lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
    lab.app.resync()
    for seconds in (2, 4, 6):  # three polls at 10 Mb/s: elephants after two
        poll(lab, keys, seconds)
    result = te_step(lab.app.core, wait=True)  # the decision is made in the optimiser's worker
    lab.app.resync()
    return result


def stop_apps():
    for app in Lab.apps:
        if app.core.runner is not None:
            app.core.runner.close()
        app._cluster_stop()  # a cluster node leaves ZooKeeper
    Lab.apps.clear()
