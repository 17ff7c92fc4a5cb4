"""The OpenFlow application: a thin shell around ``controller.core.ControllerCore``, on Ryu or os-ken.

Run it with ``ryu-manager controller/app.py`` (Ryu) or ``mlroute controller`` (either framework; LLDP link
discovery is switched on here, no other flags needed). ryu-manager loads this file as a top-level module, so it
imports absolutely. The framework comes from ``controller.southbound.framework``, the only module that imports
one. Each handler turns one OpenFlow or topology event into one core call; ``controller.southbound.ofmsg`` turns
the core's values into messages and parsed replies back into values; ``controller.web.rest`` serves the REST API.
The switches' replies (statistics, read-backs, barriers, descriptions) are ``controller.shell.replies``; the loops
(resync, poll, decision, event-loop lag, sFlow) and the sending are ``controller.shell.loops``; the controller
cluster's roles and leadership (a ``cluster:`` section) are ``controller.shell.cluster``.
"""

import logging
import os
import sys
import time

from controller import config as mlconfig
from controller.core import ControllerCore, time_budget_s
from controller.decide.optimiser_runner import OptimiserRunner
from controller.desired.rules import COOKIE_FLOW, COOKIE_FLOW_MISS
from controller.shell.cluster import ClusterShell
from controller.shell.loops import AppLoops
from controller.shell.replies import SwitchReplies
from controller.southbound import framework as southbound
from controller.southbound import lldp_guard, lldp_loop, ofmsg
from controller.southbound.connect_queue import ConnectQueue
from controller.southbound.framework import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, ofp_event, ofproto_v1_3
from controller.southbound.handlers import set_ev_cls
from controller.southbound.log_throttle import LogThrottle
from controller.southbound.openflow_errors import SentChanges
from controller.state import job_state_file
from controller.state.linkstats import LinkLoad
from controller.state.monitor import StatsAssembler
from controller.web.rest import RestController
from controller.web.rest_limits import ClientRateLimit

LOG = logging.getLogger("mlroute")
CONF = southbound.cfg.CONF
switches, topo_event = southbound.topology()  # registers --observe-links; required app below

CONFIG = mlconfig.load_or_exit()  # a bad file: one line naming file:line:key, exit status 2
southbound.fix_native_hub()  # os-ken's native hub.Event never times out (the topology app's loops stall)
# a port that comes up gets its LLDP at once (lldp_loop.py); the Switches app's own thread, never the turn
lldp_loop.install(switches.Switches, southbound.hub.sleep)
lldp_guard.install(switches.Switches, switches.LLDPPacket.lldp_parse)  # LLDP cannot move links (lldp_guard.py)
southbound.prepare_rest(CONFIG["rest"]["client_timeout_s"])  # slow clients cut off (wsgi_server / http_server)

# The app discovers links itself: no --observe-links needed. REST binds to the configured host (default
# 127.0.0.1, not Ryu's 0.0.0.0) unless --wsapi-host / --wsapi-port (Ryu) or mlroute controller's --rest-host /
# --rest-port were given explicitly.
CONF.set_override("observe_links", True)
if CONFIG["cluster"] is not None:  # the topology app's own LLDP rule is written at connect, before any role:
    CONF.set_override("install_lldp_flow", False)  # on a cluster only the leader writes (mlroute's copy of it)


def _given_on_command_line(option):
    return any(arg == option or arg.startswith(option + "=") for arg in sys.argv[1:])


if southbound.NAME == "ryu" and not _given_on_command_line("--wsapi-host"):  # Ryu's default 0.0.0.0: every interface
    CONF.set_override("wsapi_host", CONFIG["rest"]["host"])
if southbound.NAME == "ryu" and not _given_on_command_line("--wsapi-port"):
    CONF.set_override("wsapi_port", CONFIG["rest"]["port"])

class MlrouteApp(ClusterShell, SwitchReplies, AppLoops, southbound.App):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = southbound.rest_contexts()
    _REQUIRED_APP = [southbound.SWITCHES_APP]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = CONFIG
        runner = OptimiserRunner(time_budget_s(CONFIG)) if CONFIG["te"]["mode"] != "ecmp" else None
        if runner is not None:
            runner.start()  # warms up in its own process while the switches connect
        self._new_core(runner)
        self.datapaths = {}
        self.assembler = StatsAssembler()
        self.link_load = LinkLoad(time.monotonic)  # port stats of fabric switches -> per-link load
        self.connecting = ConnectQueue()  # switches connected, asked for table features and tables a few at a time
        self._readback_xids = {}  # xid -> dpid of the flow-stats / group-desc requests reading a switch back
        self._audit_xids = {}  # the same for the audit's read-backs (audit.py)
        self.sent_changes = SentChanges()  # (dpid, xid) -> the rule change sent with it (error replies name it)
        self._barriers = {}  # xid -> southbound.Event
        self._wake, self._decide = southbound.Event(), southbound.Event()
        self.post_limit = ClientRateLimit(CONFIG["rest"]["post_rate_per_s"], CONFIG["rest"]["post_burst"],
                                          time.monotonic)
        self._contexts = kwargs
        self._threads = []  # the loops, started with the app (start)
        self._decision_thread = None
        self._decision_ticked = None  # when the decision loop last came round (app_loops._check_decision_loop)
        self._stall_log = LogThrottle(time.monotonic)
        self.rest_server = None  # os-ken: mlroute's own REST server (Ryu serves its WSGI context itself)
        self.collector = None  # the sFlow collector (te.detection sflow | both | auto)
        self._cluster_init()  # with a cluster: section, self.datapaths holds only the switches this node leads
        # a follower's LLDP would be refused (SLAVE): its topology app holds those ports back (lldp_loop.py)
        switches.Switches.lldp_allowed = staticmethod(self.may_write) if self.roles is not None else None
        t = CONFIG["te"]
        LOG.info("mlroute: mode=%s poll=%ss elephant>=%.0f%% of %s Mb/s for %d polls", t["mode"],
                 t["poll_interval_s"], 100 * t["elephant_threshold"], t["host_link_mbps"], t["elephant_polls"])

    def _new_core(self, runner, metrics=None):
        """A core knowing nothing yet (at start; a cluster node that stepped down starts over with one, keeping
        its metrics, jobs and objective): LLDP's guard and the ECMP estimate read the new one."""
        # long syncs yield; a cluster's job leases expire on the wall clock, stored for whichever node leads; one
        # controller keeps its declared jobs in a file (a cluster: in ZooKeeper), read back here
        clustered = CONFIG["cluster"] is not None
        job_file = None if clustered else job_state_file.JobStateFile(
            job_state_file.path_for(CONFIG["state"]["file"], os.environ.get("MLROUTE_CONFIG")), CONFIG["jobs"],
            lease_clock=time.monotonic, wall=time.time, rules=mlconfig.job_rules())
        self.core = ControllerCore(CONFIG, time.monotonic, metrics=metrics, pause=lambda: southbound.sleep(0),
                                   runner=runner, lease_clock=time.time if clustered else None, job_file=job_file)
        self.resync_owed = True  # (a resync the loops owe the core: shell/loops.py's wake)
        self.core.metrics.estimate_ecmp_from(self.core.routing_json)  # evaluated when /metrics is scraped
        ignored = self.core.metrics.lldp_ignored
        guard = lldp_guard.LldpGuard(self.core.topology, lambda why: ignored.labels(why).inc(), time.monotonic)
        guard.admit = southbound.serialised(guard.admit)  # called from the Switches app's thread
        switches.Switches.lldp_guard = guard
        collector = getattr(self, "collector", None)  # (none yet at start)
        if collector is not None and self.core.sflow is not None:
            collector.agents = self.core.sflow.agents  # samples resolved with the new core's map, not the first's

    # -- topology events -------------------------------------------------------------------------------------
    @set_ev_cls(topo_event.EventSwitchEnter)
    def switch_enter(self, ev):
        dp, live = ev.switch.dp, [p.port_no for p in ev.switch.ports if p.is_live()]
        if self.roles is not None:
            return self._cluster_switch_enter(dp, live)  # adopted once it confirms this node as MASTER
        self._adopt_switch(dp, live)

    def _adopt_switch(self, dp, live_ports):
        """A switch this node writes to: the core reads its tables back before anything is sent to it."""
        self.datapaths[dp.id] = dp
        self.core.switch_connected(dp.id, live_ports)
        if self.roles is not None:
            self._seed_links(dp.id)  # a new leader: the links the last one published, LLDP confirms them
        # first what it is (answered in order, so known before the read-back ends and the first sync: the copy
        # policy and the table budget); its table features and tables when its turn comes (connect_queue.py)
        for request in (ofmsg.desc_request(dp), ofmsg.group_features_request(dp)):
            dp.send_msg(request)
        self.connecting.want(dp.id, dp)
        self.ask_connected()
        self.wake(resync=True)

    def _read_tables(self, dp, xids):
        """Ask a switch for mlroute's flow rules and its groups; the replies' xids go to ``xids``."""
        for request in (ofmsg.flow_stats_request(dp), ofmsg.group_desc_request(dp)):
            dp.set_xid(request)
            xids[request.xid] = dp.id
            dp.send_msg(request)

    @set_ev_cls(topo_event.EventSwitchLeave)
    def switch_leave(self, ev):
        dpid = ev.switch.dp.id
        if self.roles is not None:
            self._cluster_switch_gone(dpid, ev.switch.dp)
        if self.datapaths.get(dpid, ev.switch.dp) is not ev.switch.dp:
            return  # the old connection of a switch that has already reconnected
        self.datapaths.pop(dpid, None)
        self.wake(self.core.switch_left(dpid))

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def datapath_dead(self, ev):
        dpid = ev.datapath.id
        if dpid is not None and self.roles is not None:
            self._cluster_switch_gone(dpid, ev.datapath)
        if dpid is not None and self.datapaths.get(dpid) is ev.datapath:
            self._forget_switch(dpid)

    def _forget_switch(self, dpid):
        """Its connection lost, or this node no longer leads it: nothing more is sent to it."""
        self.datapaths.pop(dpid, None)
        self.connecting.forget(dpid)
        self.core.connection_lost(dpid)
        self.assembler.forget(dpid)
        self.link_load.forget(dpid)
        self.sent_changes.forget(dpid)
        self._audit_xids = {x: d for x, d in self._audit_xids.items() if d != dpid}

    @set_ev_cls(topo_event.EventLinkAdd)
    def link_add(self, ev):
        s, d = ev.link.src, ev.link.dst
        self.wake(self.core.link_added(s.dpid, s.port_no, d.dpid, d.port_no))

    @set_ev_cls(topo_event.EventLinkDelete)
    def link_delete(self, ev):
        s, d = ev.link.src, ev.link.dst
        self.wake(self.core.link_deleted(s.dpid, s.port_no, d.dpid, d.port_no))

    @set_ev_cls([topo_event.EventPortAdd, topo_event.EventPortModify, topo_event.EventPortDelete])
    def port_change(self, ev):
        live = ev.port.is_live() and not isinstance(ev, topo_event.EventPortDelete)
        if self.roles is not None:
            self._cluster_port(ev.port.dpid, ev.port.port_no, live)
            if ev.port.dpid not in self.datapaths:
                return  # the core knows only the switches this node leads
        self.wake(self.core.port_changed(ev.port.dpid, ev.port.port_no, live))

    # -- packets and replies ---------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in_handler(self, ev):
        msg, dp = ev.msg, ev.msg.datapath
        if self.roles is not None and dp.id not in self.datapaths:
            return  # a cluster's switch this node does not lead (an EQUAL connection's packet-ins)
        if msg.cookie == COOKIE_FLOW_MISS:
            return self._new_transport_flow(msg)
        kind, pkt = ofmsg.decode_packet_in(dp.id, msg.match["in_port"], msg.data)  # (undecodable: guarded)
        self.core.metrics.packet_in.labels(kind).inc()
        if pkt is None:
            return  # LLDP is Ryu's topology app's business; anything else is not ours
        decision = self.core.packet(pkt)
        self._send_actions(decision.actions, msg.data)
        self.wake(decision.changed)

    def _new_transport_flow(self, msg):
        try:
            key = ofmsg.decode_flow_key(msg.data)
        except Exception:
            LOG.warning("switch %s: undecodable new-flow packet-in skipped", msg.datapath.id)
            return
        self.core.metrics.packet_in.labels("newflow").inc()
        changes, resync = self.core.new_transport_flow(key, msg.datapath.id, msg.match["in_port"])
        for change in changes:
            self._send_change(msg.datapath, change)
        self.wake(resync)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def flow_removed(self, ev):
        if ev.msg.cookie != COOKIE_FLOW:
            return
        resync = False
        try:
            resync = self.core.counting_rule_removed(ev.msg.datapath.id, ofmsg.stats_fields(ev.msg),
                                                     deleted=ev.msg.reason == ev.msg.datapath.ofproto.OFPRR_DELETE)
        except (KeyError, TypeError, ValueError) as exc:
            LOG.warning("switch %s: flow-removed without a usable 5-tuple: %r", ev.msg.datapath.id, exc)
        self.wake(resync)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error_handler(self, ev):
        msg, dp = ev.msg, ev.msg.datapath
        if self.roles is not None and self._cluster_error(dp.id, msg.type, msg.code):
            return  # a role matter (fenced: stepped down), or a switch this node does not lead
        for change in self.core.openflow_error(dp.id, msg.type, msg.code, self.sent_changes.pop(dp.id, msg.xid)):
            self._send_change(dp, change)
        self.wake()

    @set_ev_cls(ofp_event.EventOFPRoleReply, MAIN_DISPATCHER)
    def role_reply(self, ev):
        msg = ev.msg
        if self.roles is not None:
            self._role_reply(msg.datapath.id, msg.role, msg.generation_id)

    def start(self):
        """Called by the app manager once every app exists: REST served, the four loops started."""
        started = super().start()
        api = RestController(self)
        self.rest_server = southbound.serve_rest(self._contexts, api, api.paths(),
                                                 southbound.rest_address(CONFIG["rest"]),
                                                 CONFIG["rest"]["client_timeout_s"])
        self._threads = [southbound.spawn(loop) for loop in (self._resync_loop, self._poll_loop,
                                                             self._decision_loop, self._lag_loop)]
        self._decision_thread = self._threads[2]  # (where it is, should it stall: app_loops._check_decision_loop)
        if self.core.sflow is not None:
            self._start_sflow()
        self._cluster_start(wait=False)  # until ZooKeeper answers, in a thread of its own
        return started

    def release(self):
        """The optimiser's worker process and mlroute's own REST server stopped (idempotent; mlroute
        controller calls it on SIGTERM)."""
        if self.core.runner is not None:
            self.core.runner.close(final=True)  # the optimiser's worker process goes with the app
        if self.rest_server is not None:
            self.rest_server.shutdown()
            self.rest_server = None
        self._cluster_stop()
        if self.collector is not None:
            self._sflow_stop.set()
            self.collector.close()
            self.collector = None

    def stop(self):
        self.release()
        super().stop()

