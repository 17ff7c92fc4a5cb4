"""The Ryu application: a thin shell that turns OpenFlow and topology events into core calls, and the core's
rule values into OpenFlow messages. Run it with ``ryu-manager controller/app.py`` (LLDP link discovery is
switched on here; no other flags needed). Decisions live in Ryu-free modules: topology, tiers, forwarding,
packet_in, rules.
"""

import json
import logging
import sys
import time

from ryu import cfg
from ryu.app.wsgi import ControllerBase, WSGIApplication, route
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.lib.packet import arp, ethernet, ipv4, packet
from ryu.ofproto import ofproto_v1_3
from ryu.topology import event as topo_event
from ryu.topology import switches  # noqa: F401  (registers --observe-links; required app below)
from webob import Response

from controller import config as mlconfig
from controller import forwarding
from controller.metrics import Metrics
from controller.packet_in import ArpReply, Forward, PacketIn, PacketInHandler
from controller.rules import COOKIE_BASE, ETH_ARP, ETH_IPV4, ETH_LLDP, SwitchRules, diff_switch
from controller.tiers import infer_tiers
from controller.topology import Topology

LOG = logging.getLogger("mlroute")
CONF = cfg.CONF

try:
    CONFIG = mlconfig.load()
except mlconfig.ConfigError as exc:
    sys.stderr.write(f"mlroute: invalid configuration: {exc}\n")
    raise SystemExit(2) from None

# The app discovers links itself: no --observe-links needed. REST binds to the configured host (default
# 127.0.0.1, not Ryu's 0.0.0.0) unless --wsapi-host / --wsapi-port were given explicitly.
CONF.set_override("observe_links", True)
if not CONF.wsapi_host:
    CONF.set_override("wsapi_host", CONFIG["rest"]["host"])
if CONF.wsapi_port == 8080 and CONFIG["rest"]["port"] != 8080:
    CONF.set_override("wsapi_port", CONFIG["rest"]["port"])

COOKIE_PREFIX = COOKIE_BASE & 0xFFFF0000
RESYNC_PERIOD_S = 0.2


class MlrouteApp(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}
    _REQUIRED_APP = ["ryu.topology.switches"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = CONFIG
        self.topology = Topology()
        self.datapaths = {}
        self.installed = {}  # dpid -> SwitchRules as last sent
        self.packet_in = PacketInHandler(self.topology, time.monotonic)
        self.metrics = Metrics()
        self.tiers = None
        self._dirty = False
        kwargs["wsgi"].register(RestController, {"app": self})
        self._resync_thread = hub.spawn(self._resync_loop)

    # -- topology events -----------------------------------------------------------------------------------
    @set_ev_cls(topo_event.EventSwitchEnter)
    def switch_enter(self, ev):
        dp = ev.switch.dp
        self.topology.add_switch(dp.id, [p.port_no for p in ev.switch.ports if p.is_live()])
        self.datapaths[dp.id] = dp
        self._wipe(dp)
        LOG.info("switch %s connected (%d live ports)", dp.id, len(self.topology.ports[dp.id]))
        self._mark_dirty()

    @set_ev_cls(topo_event.EventSwitchLeave)
    def switch_leave(self, ev):
        dpid = ev.switch.dp.id
        self.topology.remove_switch(dpid)
        self.datapaths.pop(dpid, None)
        self.installed.pop(dpid, None)
        LOG.info("switch %s left", dpid)
        self._mark_dirty()

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def datapath_dead(self, ev):
        if ev.datapath.id is not None and self.datapaths.get(ev.datapath.id) is ev.datapath:
            self.datapaths.pop(ev.datapath.id, None)
            self.installed.pop(ev.datapath.id, None)

    @set_ev_cls(topo_event.EventLinkAdd)
    def link_add(self, ev):
        s, d = ev.link.src, ev.link.dst
        if self.topology.add_link(s.dpid, s.port_no, d.dpid, d.port_no):
            self._mark_dirty()

    @set_ev_cls(topo_event.EventLinkDelete)
    def link_delete(self, ev):
        s, d = ev.link.src, ev.link.dst
        if self.topology.remove_link(s.dpid, s.port_no, d.dpid, d.port_no):
            LOG.info("link %s:%s -> %s:%s down", s.dpid, s.port_no, d.dpid, d.port_no)
            self._mark_dirty()

    @set_ev_cls([topo_event.EventPortAdd, topo_event.EventPortModify])
    def port_change(self, ev):
        port = ev.port
        if port.is_live():
            self.topology.port_up(port.dpid, port.port_no)
        else:
            self.topology.port_down(port.dpid, port.port_no)
        self._mark_dirty()

    @set_ev_cls(topo_event.EventPortDelete)
    def port_delete(self, ev):
        self.topology.port_down(ev.port.dpid, ev.port.port_no)
        self._mark_dirty()

    # -- packets -------------------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in_handler(self, ev):
        msg = ev.msg
        dp = msg.datapath
        try:
            pkt = packet.Packet(msg.data)
            eth = pkt.get_protocol(ethernet.ethernet)
            kind = {ETH_ARP: "arp", ETH_IPV4: "ipv4", ETH_LLDP: "lldp"}.get(getattr(eth, "ethertype", None), "other")
            self.metrics.packet_in.labels(kind).inc()
            if kind not in ("arp", "ipv4"):
                return  # LLDP is Ryu's topology app's business; anything else is not ours
            fields = dict(dpid=dp.id, in_port=msg.match["in_port"], eth_src=eth.src, eth_dst=eth.dst,
                          eth_type=eth.ethertype)
            if eth.ethertype == ETH_ARP:
                a = pkt.get_protocol(arp.arp)
                fields.update(arp_op=a.opcode, src_ip=a.src_ip, dst_ip=a.dst_ip)
            else:
                ip = pkt.get_protocol(ipv4.ipv4)
                fields.update(src_ip=ip.src, dst_ip=ip.dst)
        except Exception:  # a malformed packet must not take the controller down
            LOG.warning("switch %s: undecodable packet-in skipped", dp.id, exc_info=True)
            return
        decision = self.packet_in.handle(PacketIn(**fields))
        if decision.learned:
            host = self.topology.hosts.get(fields["src_ip"])
            LOG.info("host %s (%s) at switch %s port %s", host.ip, host.mac, host.dpid, host.port)
            self._mark_dirty()
            self._resync()  # rules toward the new host before its peers answer
        for action in decision.actions:
            target = self.datapaths.get(action.dpid)
            if target is None:
                continue
            if isinstance(action, ArpReply):
                self._send_packet(target, action.port, _arp_reply(action))
            elif isinstance(action, Forward):
                self._send_packet(target, action.port, msg.data)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error_handler(self, ev):
        msg = ev.msg
        LOG.warning("switch %s: OpenFlow error type=%s code=%s", msg.datapath.id, msg.type, msg.code)

    # -- rule synchronisation ------------------------------------------------------------------------------
    def _mark_dirty(self):
        self._dirty = True

    def _resync_loop(self):
        while True:
            hub.sleep(RESYNC_PERIOD_S)
            if self._dirty:
                try:
                    self._resync()
                except Exception:
                    LOG.exception("resync failed; will retry")
                    self._dirty = True

    def desired_rules(self):
        return forwarding.plan(self.topology)

    def _resync(self):
        self._dirty = False
        self._update_tiers()
        desired = self.desired_rules()
        for dpid, dp in list(self.datapaths.items()):
            want = desired.get(dpid)
            if want is None:
                continue
            changes = diff_switch(self.installed.get(dpid), want)
            for change in changes:
                dp.send_msg(_compile(dp, change))
            if changes:
                self.metrics.rule_changes.inc(len(changes))
            self.installed[dpid] = want

    def _update_tiers(self):
        result = infer_tiers(self.topology.graph(), self.topology.access_switches(), self.config["tiers"])
        previous = self.tiers
        self.tiers = result
        if previous is None or (previous.kind, previous.reason) != (result.kind, result.reason):
            if result.is_clos:
                counts = {}
                for tier in result.tiers.values():
                    counts[tier] = counts.get(tier, 0) + 1
                LOG.info("topology is a %s: %s", result.kind, ", ".join(f"{n} {t}" for t, n in sorted(counts.items())))
            else:
                LOG.warning("topology is not a recognised Clos (%s): forwarding over shortest paths", result.reason)

    def _wipe(self, dp):
        """Remove every rule and group mlroute may have left on a (re)connecting switch."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(dp, cookie=COOKIE_PREFIX, cookie_mask=0xFFFF0000, table_id=ofp.OFPTT_ALL,
                                      command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
        dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_SELECT, ofp.OFPG_ALL, []))
        dp.send_msg(parser.OFPBarrierRequest(dp))
        self.installed[dp.id] = SwitchRules()

    def _send_packet(self, dp, port, data):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(port)], data=data))

    # -- views for REST ------------------------------------------------------------------------------------
    def topology_json(self):
        tiers = self.tiers.tiers if self.tiers else {}
        return self.topology.to_json(tiers)


def _arp_reply(reply):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst=reply.to_mac, src=reply.mac, ethertype=ETH_ARP))
    p.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=reply.mac, src_ip=reply.ip,
                           dst_mac=reply.to_mac, dst_ip=reply.to_ip))
    p.serialize()
    return p.data


def _compile(dp, change):
    """A rules.Change (plain values) as the OpenFlow 1.3 message that applies it."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    rule = change.rule
    if hasattr(rule, "group_id"):
        command = {"add": ofp.OFPGC_ADD, "modify": ofp.OFPGC_MODIFY, "delete": ofp.OFPGC_DELETE}[change.op]
        buckets = [parser.OFPBucket(weight=1, watch_port=p, watch_group=ofp.OFPG_ANY,
                                    actions=[parser.OFPActionOutput(p)]) for p in rule.ports]
        return parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, rule.group_id,
                                  buckets if change.op != "delete" else [])
    ofmatch = parser.OFPMatch(**dict(rule.match))
    if change.op == "delete":
        return parser.OFPFlowMod(dp, cookie=rule.cookie, table_id=rule.table, command=ofp.OFPFC_DELETE_STRICT,
                                 priority=rule.priority, match=ofmatch, out_port=ofp.OFPP_ANY,
                                 out_group=ofp.OFPG_ANY)
    actions, instructions = [], []
    for kind, *arg in rule.actions:
        if kind == "output":
            actions.append(parser.OFPActionOutput(arg[0]))
        elif kind == "group":
            actions.append(parser.OFPActionGroup(arg[0]))
        elif kind == "controller":
            actions.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, arg[0]))
        elif kind == "goto":
            instructions.append(parser.OFPInstructionGotoTable(arg[0]))
        else:
            raise ValueError(f"unknown action {kind!r}")
    if actions:
        instructions.insert(0, parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
    command = ofp.OFPFC_ADD if change.op == "add" else ofp.OFPFC_MODIFY_STRICT
    return parser.OFPFlowMod(dp, cookie=rule.cookie, table_id=rule.table, command=command,
                             idle_timeout=rule.idle_timeout, priority=rule.priority, match=ofmatch,
                             instructions=instructions)


class RestController(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data["app"]

    @route("mlroute", "/mlroute/topology", methods=["GET"])
    def get_topology(self, req, **kwargs):
        return _json(self.app.topology_json())

    @route("mlroute", "/metrics", methods=["GET"])
    def get_metrics(self, req, **kwargs):
        body, content_type = self.app.metrics.exposition()
        return Response(body=body, content_type=content_type.split(";")[0], charset="utf-8")


def _json(obj, status=200):
    return Response(body=json.dumps(obj).encode(), status=status, content_type="application/json", charset="utf-8")
