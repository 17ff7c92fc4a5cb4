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
from controller import forwarding, te
from controller.metrics import Metrics
from controller.monitor import (PROTO_TCP, PROTO_UDP, FlowKey, FlowMonitor, MalformedStats, MonitorConfig,
                                StatsAssembler, sample_from_stat)
from controller.packet_in import ArpReply, Forward, PacketIn, PacketInHandler
from mlroute.routing.demand import estimate_demands
from mlroute.routing.flow import Flow
from controller.rules import (COOKIE_BASE, COOKIE_ELEPHANT, COOKIE_FLOW, COOKIE_FLOW_MISS, ETH_ARP, ETH_IPV4,
                              ETH_LLDP, GroupRule, SwitchRules, diff_switch)
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


def _given_on_command_line(option):
    return any(arg == option or arg.startswith(option + "=") for arg in sys.argv[1:])


if not _given_on_command_line("--wsapi-host"):  # Ryu's own default is 0.0.0.0: every interface
    CONF.set_override("wsapi_host", CONFIG["rest"]["host"])
if not _given_on_command_line("--wsapi-port"):
    CONF.set_override("wsapi_port", CONFIG["rest"]["port"])

COOKIE_PREFIX = COOKIE_BASE & 0xFFFF0000
BARRIER_TIMEOUT_S = 1.0
STATS_FIELDS = ("ip_proto", "ipv4_src", "ipv4_dst", "tcp_src", "tcp_dst", "udp_src", "udp_dst", "in_port")


class MlrouteApp(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}
    _REQUIRED_APP = ["ryu.topology.switches"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = CONFIG
        tecfg = CONFIG["te"]
        self.host_bps = tecfg["host_link_mbps"] * 1e6
        self.fabric_bps = (tecfg["fabric_link_mbps"] or tecfg["host_link_mbps"]) * 1e6
        self.topology = Topology()
        self.datapaths = {}
        self.installed = {}  # dpid -> SwitchRules as last sent
        self.packet_in = PacketInHandler(self.topology, time.monotonic)
        self.metrics = Metrics()
        self.tiers = None
        self.accounting = {}  # FlowKey -> (ingress dpid, in_port): transport flows with a counting rule
        self.monitor = FlowMonitor(MonitorConfig(tecfg["elephant_threshold"] * self.host_bps,
                                                 tecfg["elephant_polls"], tecfg["pattern_memory_s"]))
        self.assembler = StatsAssembler()
        self.te = te.TrafficEngineer(tecfg["mode"], tecfg["objective"], tecfg["hysteresis"])
        self.jobs = list(CONFIG["jobs"])
        self._barriers = {}  # xid -> hub.Event
        self._dirty = False
        self._wake = hub.Event()
        kwargs["wsgi"].register(RestController, {"app": self})
        self._threads = [hub.spawn(self._resync_loop), hub.spawn(self._poll_loop)]
        LOG.info("mlroute: mode=%s poll=%ss elephant>=%.0f%% of %s Mb/s for %d polls", tecfg["mode"],
                 tecfg["poll_interval_s"], 100 * tecfg["elephant_threshold"], tecfg["host_link_mbps"],
                 tecfg["elephant_polls"])

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
            self.assembler.forget(ev.datapath.id)

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
        if msg.cookie == COOKIE_FLOW_MISS:
            self._new_transport_flow(msg)
            return
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
        for action in decision.actions:
            target = self.datapaths.get(action.dpid)
            if target is None:
                continue
            if isinstance(action, ArpReply):
                self._send_packet(target, action.port, _arp_reply(action))
            elif isinstance(action, Forward):
                self._send_packet(target, action.port, msg.data)

    def _new_transport_flow(self, msg):
        """First packet of a TCP/UDP flow at its ingress: give it a counting rule (one packet-in per flow)."""
        try:
            pkt = packet.Packet(msg.data)
            ip = pkt.get_protocol(ipv4.ipv4)
            l4 = pkt.protocols[2] if len(pkt.protocols) > 2 else None
            key = FlowKey(ip.src, ip.dst, ip.proto, int(l4.src_port), int(l4.dst_port))
        except Exception:
            LOG.warning("switch %s: undecodable new-flow packet-in skipped", msg.datapath.id)
            return
        self.metrics.packet_in.labels("newflow").inc()
        where = (msg.datapath.id, msg.match["in_port"])
        if self.accounting.get(key) != where:
            self.accounting[key] = where
            self._mark_dirty()

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def flow_removed(self, ev):
        msg = ev.msg
        if msg.cookie != COOKIE_FLOW:
            return
        try:
            fields = {f: msg.match.get(f) for f in STATS_FIELDS if msg.match.get(f) is not None}
            key = sample_from_stat(msg.datapath.id, fields, 0, 0, 0).key
        except MalformedStats as exc:
            LOG.warning("%s", exc)
            return
        if self.accounting.get(key, (None,))[0] == msg.datapath.id:
            del self.accounting[key]
            rules = self.installed.get(msg.datapath.id)
            if rules is not None:
                rules.flows = {k: r for k, r in rules.flows.items() if not (r.cookie == COOKIE_FLOW
                               and te.five_tuple_match(key, fields.get("in_port")) == r.match)}
            self._mark_dirty()

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats_reply(self, ev):
        msg = ev.msg
        dpid = msg.datapath.id
        try:
            entries = self.assembler.feed(dpid, msg.xid, list(msg.body), bool(msg.flags & 0x0001))
            if entries is None:
                return  # more parts to come (OFPMPF_REPLY_MORE)
            samples = []
            for stat in entries:
                try:
                    fields = {f: stat.match.get(f) for f in STATS_FIELDS if stat.match.get(f) is not None}
                    samples.append(sample_from_stat(dpid, fields, stat.byte_count, stat.duration_sec,
                                                    stat.duration_nsec))
                except (MalformedStats, AttributeError) as exc:
                    LOG.warning("skipping flow-stats entry: %s", exc)
            self.monitor.update(dpid, samples, time.monotonic())
        except Exception:  # a bad reply from one switch must not disturb the others
            LOG.warning("switch %s: malformed flow-stats reply skipped", dpid, exc_info=True)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        event = self._barriers.pop(ev.msg.xid, None)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error_handler(self, ev):
        msg = ev.msg
        LOG.warning("switch %s: OpenFlow error type=%s code=%s", msg.datapath.id, msg.type, msg.code)

    # -- rule synchronisation (one thread: the resync loop) -------------------------------------------------
    def _mark_dirty(self):
        self._dirty = True
        self._wake.set()

    def _resync_loop(self):
        while True:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if not self._dirty:
                continue
            try:
                self._resync()
            except Exception:
                LOG.exception("resync failed; will retry")
                self._dirty = True
                hub.sleep(0.5)

    def _poll_loop(self):
        """Every period: ask ingress switches for their per-flow counters, then take a TE decision."""
        period = self.config["te"]["poll_interval_s"]
        while True:
            hub.sleep(period)
            try:
                for dpid in sorted({h.dpid for h in self.topology.hosts.values()}):
                    dp = self.datapaths.get(dpid)
                    if dp is not None:
                        parser, ofp = dp.ofproto_parser, dp.ofproto
                        dp.send_msg(parser.OFPFlowStatsRequest(
                            dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, COOKIE_FLOW, 0xFFFFFFFF,
                            parser.OFPMatch()))
                hub.sleep(min(0.5, period / 4))  # replies are handled meanwhile by the event thread
                self.te_step()
            except Exception:
                LOG.exception("poll / TE step failed; continuing")

    def jobs_by_host(self):
        return {ip: job["name"] for job in self.jobs for ip in job["hosts"]}

    def te_step(self):
        """One traffic-engineering decision; marks the rules dirty when the routing changed."""
        self.monitor.expire(time.monotonic())
        elephants = self.monitor.elephants()
        flows = [Flow(st.key.src_ip, st.key.dst_ip) for st in elephants]
        for st, demand in zip(elephants, estimate_demands(flows) if flows else []):
            st.demand_bps = float(demand) * self.host_bps
        fabric = te.fabric_from_topology(self.topology, self.tiers, self.host_bps, self.fabric_bps)
        previous_count = self.te.last.elephants if self.te.last else 0
        previous_pins = set(self.te.pinned)
        result = self.te.step(fabric, [(st.key, st.demand_bps / self.host_bps) for st in elephants],
                              self.jobs_by_host())
        if set(self.te.pinned) != previous_pins:
            self._mark_dirty()  # ended elephants: their pinned hops go
        self.metrics.elephants.set(len(elephants))
        if result.runtime_s:
            self.metrics.optimiser_seconds.set(result.runtime_s)
        if result.after:
            self.metrics.max_link_load.set(result.after["max_link_load"])
        if result.applied:
            self.metrics.reoptimisations.inc()
            self.metrics.flows_moved.inc(len(result.moved))
            self._mark_dirty()
        if result.applied or result.elephants != previous_count:
            b, a = result.before or {}, result.after or {}
            LOG.info("te: %d elephants, %s, %d moved; max link load %s -> %s, min rate %.2f -> %.2f Mb/s, "
                     "optimiser %.1f ms", result.elephants, result.reason, len(result.moved),
                     b.get("max_link_load"), a.get("max_link_load"), b.get("min_rate", 0) / 1e6,
                     a.get("min_rate", 0) / 1e6, 1e3 * result.runtime_s)
        return result

    def _pinned_paths_broken(self, graph):
        if not self.te.pinned:
            return False
        return any(not all(graph.has_edge(a, b) for a, b in zip(p, p[1:])) or any(d not in graph for d in p)
                   for p in self.te.pinned.values())

    def desired_rules(self, graph):
        levels = self.tiers.levels if self.tiers is not None else {}
        desired = forwarding.plan(self.topology, levels, stagger=self.config["te"]["ecmp_stagger"], graph=graph)
        pinned = self.te.pinned if self.te.mode != "ecmp" else {}
        for rule in te.te_rules(self.topology, self.tiers, self.accounting, pinned,
                                self.config["te"]["flow_idle_timeout_s"], graph=graph):
            if rule.dpid in desired:
                desired[rule.dpid].add_flow(rule)
        return desired

    def _resync(self):
        """Bring every switch to its desired rules, make-before-break across switches:
        groups, then elephants' upper hops (barrier), then other adds/changes (ingress rules last), then
        deletions (barrier first), then unused groups."""
        self._dirty = False
        graph = self.topology.graph()  # one snapshot of the live switch graph for this whole resync
        self._update_tiers(graph)
        if self.te.mode != "ecmp" and self._pinned_paths_broken(graph):
            self.te_step()  # a failure under an elephant: move it now, not at the next period
            self._dirty = False
        desired = self.desired_rules(graph)
        phases = [[] for _ in range(5)]
        for dpid, dp in list(self.datapaths.items()):
            want = desired.get(dpid)
            if want is None:
                continue
            for change in diff_switch(self.installed.get(dpid), want):
                phases[_phase(change)].append((dp, change))
            self.installed[dpid] = want
        for i, phase in enumerate(phases):
            for dp, change in phase:
                dp.send_msg(_compile(dp, change))
            if phase and i in (1, 2):
                self._barrier({dp for dp, _ in phase})
        sent = sum(len(p) for p in phases)
        if sent:
            self.metrics.rule_changes.inc(sent)
        self.metrics.rules_installed.set(sum(len(r.flows) for r in self.installed.values()))

    def _barrier(self, dps):
        """Wait (bounded) until the switches confirm they applied everything sent so far."""
        events = []
        for dp in dps:
            req = dp.ofproto_parser.OFPBarrierRequest(dp)
            dp.set_xid(req)
            event = hub.Event()
            self._barriers[req.xid] = event
            dp.send_msg(req)
            events.append(event)
        for event in events:
            event.wait(timeout=BARRIER_TIMEOUT_S)

    def _update_tiers(self, graph):
        result = infer_tiers(graph, self.topology.access_switches(), self.config["tiers"])
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

    def elephants_json(self):
        pinned = self.te.pinned if self.te.mode != "ecmp" else {}
        return [dict(st.key.as_dict(), rate_bps=st.rate_bps, demand_bps=st.demand_bps,
                     path=list(pinned[st.key]) if st.key in pinned else None, active=st.streak > 0)
                for st in self.monitor.elephants()]

    def routing_json(self):
        """The routing-core report of the installed routing and of what ECMP would give (estimated)."""
        fabric = te.fabric_from_topology(self.topology, self.tiers, self.host_bps, self.fabric_bps)
        elephants = [st for st in self.monitor.elephants()
                     if fabric is not None and st.key.src_ip in fabric.hosts and st.key.dst_ip in fabric.hosts]
        out = {"mode": self.te.mode, "elephants": len(elephants), "units": "bits per second",
               "fabric": self.tiers.kind if self.tiers else "unknown", "installed": None, "ecmp": None,
               "last_decision": None}
        if self.te.last is not None:
            last = self.te.last
            out["last_decision"] = {"applied": last.applied, "reason": last.reason, "moved": len(last.moved),
                                    "optimiser_ms": 1e3 * last.runtime_s}
        if not elephants:
            return out
        jobs = self.jobs_by_host()
        flows = [Flow(st.key.src_ip, st.key.dst_ip, demand=st.demand_bps / self.host_bps or None,
                      job=jobs.get(st.key.src_ip), key=st.key) for st in elephants]
        objective = "job" if jobs else self.te.objective
        ecmp = te.run_optimiser("ecmp", fabric, flows).paths
        installed = [self.te.pinned.get(f.key) if self.te.mode != "ecmp" else None for f in flows]
        installed = [p if p is not None and fabric.is_valid_path(f, p) else e
                     for f, p, e in zip(flows, installed, ecmp)]
        out["installed"] = te.metric.report(fabric, flows, installed, objective=objective)
        out["ecmp"] = te.metric.report(fabric, flows, ecmp, objective=objective)
        return out


def _arp_reply(reply):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst=reply.to_mac, src=reply.mac, ethertype=ETH_ARP))
    p.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=reply.mac, src_ip=reply.ip,
                           dst_mac=reply.to_mac, dst_ip=reply.to_ip))
    p.serialize()
    return p.data


def _phase(change):
    rule = change.rule
    if isinstance(rule, GroupRule):
        return 4 if change.op == "delete" else 0
    if change.op == "delete":
        return 3
    return 1 if rule.cookie == COOKIE_ELEPHANT else 2


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
    flags = ofp.OFPFF_SEND_FLOW_REM if rule.idle_timeout else 0  # expiry must reach the controller
    return parser.OFPFlowMod(dp, cookie=rule.cookie, table_id=rule.table, command=command,
                             idle_timeout=rule.idle_timeout, priority=rule.priority, match=ofmatch,
                             instructions=instructions, flags=flags)


class RestController(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data["app"]

    @route("mlroute", "/mlroute/topology", methods=["GET"])
    def get_topology(self, req, **kwargs):
        return _json(self.app.topology_json())

    @route("mlroute", "/mlroute/elephants", methods=["GET"])
    def get_elephants(self, req, **kwargs):
        return _json(self.app.elephants_json())

    @route("mlroute", "/mlroute/routing", methods=["GET"])
    def get_routing(self, req, **kwargs):
        return _json(self.app.routing_json())

    @route("mlroute", "/mlroute/jobs", methods=["GET"])
    def get_jobs(self, req, **kwargs):
        return _json({"jobs": self.app.jobs})

    @route("mlroute", "/mlroute/jobs", methods=["POST"])
    def post_jobs(self, req, **kwargs):
        denied = self._authorise(req)
        if denied:
            return denied
        try:
            body = json.loads(req.body or b"{}")
            jobs = mlconfig._jobs(body.get("jobs") if isinstance(body, dict) else None, "request body")
        except (ValueError, mlconfig.ConfigError) as exc:
            return _json({"error": str(exc)}, 400)
        self.app.jobs = jobs
        LOG.info("jobs set over REST: %s", ", ".join(j["name"] for j in jobs) or "none")
        return _json({"jobs": jobs})

    @route("mlroute", "/mlroute/recompute", methods=["POST"])
    def post_recompute(self, req, **kwargs):
        denied = self._authorise(req)
        if denied:
            return denied
        result = self.app.te_step()
        return _json({"applied": result.applied, "reason": result.reason, "moved": len(result.moved),
                      "elephants": result.elephants, "optimiser_ms": 1e3 * result.runtime_s})

    def _authorise(self, req):
        token = self.app.config["rest"]["token"]
        if not token:
            return _json({"error": "mutating calls are disabled: set rest.token in the configuration"}, 403)
        given = req.headers.get("Authorization", "")
        if given != f"Bearer {token}" and req.headers.get("X-Auth-Token") != token:
            return _json({"error": "missing or wrong token (Authorization: Bearer <rest.token>)"}, 401)
        return None

    @route("mlroute", "/metrics", methods=["GET"])
    def get_metrics(self, req, **kwargs):
        body, content_type = self.app.metrics.exposition()
        return Response(body=body, content_type=content_type.split(";")[0], charset="utf-8")


def _json(obj, status=200):
    body = json.dumps(obj, default=_plain).encode()
    return Response(body=body, status=status, content_type="application/json", charset="utf-8")


def _plain(value):
    """numpy scalars and the like, as JSON numbers / lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)
