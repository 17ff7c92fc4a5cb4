"""The controller cluster's part of the shell (issue 22): role requests, their answers, leadership and shared state.

A mixin of MlrouteApp (controller/app.py), like app_loops. With a ``cluster:`` section every node connects to
every switch; ``self.connections`` holds them all, ``self.datapaths`` only those this node may write to: a
switch enters the core (``_adopt_switch``: read back, then synced) once it confirmed this node as MASTER at the
current generation (controller/cluster/roles.py), and leaves it (``_forget_switch``) the moment this node steps
down, so every write path, which reads ``self.datapaths``, writes nothing on a follower; ``may_write`` guards the
sends once more. A follower keeps a warm view: members, leader, generation, the declared jobs and objective (from
ZooKeeper, applied to its core) and the leader's published summary; as SLAVE it gets port status but no
packet-ins, and its topology app's LLDP is refused, so its own topology is empty until it leads. A new leader
recovers exactly as a restarted controller does (``core.begin_recovery``: read back, additions only until LLDP
and the read-back settle). Without a cluster section nothing here does anything.
"""

import logging

from controller.cluster import roles
from controller.cluster.roles import SwitchRoles
from controller.southbound import framework as southbound
from controller.southbound import ofmsg

LOG = logging.getLogger("mlroute")

VIEW_PERIOD_S = 2.0  # the leader publishes its warm view this often (when it changed)
VIEW_MAX_PINS = 1000  # pinned paths in the published view at most (it stays a small znode)


class _Listener:
    """The coordinator's callbacks, each holding the core's turn (native threads) like any handler."""

    def __init__(self, app):
        self.leading = southbound.serialised(app._cluster_leading)
        self.following = southbound.serialised(app._cluster_following)
        self.shared = southbound.serialised(app._cluster_shared)


class ClusterShell:
    """Roles, leadership and shared state of MlrouteApp (controller/app.py)."""

    def _cluster_init(self):
        self.connections = {}  # dpid -> datapath: every switch connected to this node
        self._live_ports = {}  # dpid -> its live ports (kept while not adopted: the core learns them on adopt)
        self.roles = SwitchRoles() if self.config["cluster"] is not None else None
        self.coordinator = None
        self.cluster_view = None  # the leader's last published view (followers' warm view)
        self._view_published = None

    def _cluster_start(self):
        """Join the cluster (connects to ZooKeeper, at most 15 s) and start publishing the view when leading."""
        if self.roles is None:
            return
        from controller.cluster.zookeeper import Coordinator  # kazoo only with a cluster: section

        c, rest = self.config["cluster"], self.config["rest"]
        advertise = c["advertise"] or f"http://{rest['host']}:{rest['port']}"
        self.coordinator = Coordinator(c["zookeeper"], c["name"], c["node_id"], advertise, c["session_timeout_s"],
                                       _Listener(self))
        with southbound.unlocked():
            self.coordinator.start()
        self._threads.append(southbound.spawn(self._view_loop))
        LOG.info("cluster %s: node %s joined through %s (session %.1f s)", c["name"], c["node_id"], c["zookeeper"],
                 c["session_timeout_s"])

    def _cluster_stop(self):
        if self.coordinator is not None:
            self.coordinator.stop()
            self.coordinator = None

    def may_write(self, dpid):
        """Flow mods, group mods and packet-outs to ``dpid`` allowed (always, without a cluster)."""
        return self.roles is None or self.roles.may_write(dpid)

    # -- switches ----------------------------------------------------------------------------------------------
    def _cluster_switch_enter(self, dp, live_ports):
        """A switch connected: remembered, asked for this node's role; adopted once it confirms MASTER."""
        self.connections[dp.id] = dp
        self._live_ports[dp.id] = set(live_ports)
        self._send_roles([self.roles.connected(dp.id)])

    def _cluster_switch_gone(self, dpid, dp):
        if self.connections.get(dpid) is dp:
            self.connections.pop(dpid, None)
            self._live_ports.pop(dpid, None)
            self.roles.disconnected(dpid)

    def _cluster_port(self, dpid, port, live):
        ports = self._live_ports.get(dpid)
        if ports is not None:
            (ports.add if live else ports.discard)(port)

    def _role_reply(self, dpid, role, generation):
        outcome = self.roles.reply(dpid, role, generation)
        LOG.info("switch %s: role %s at generation %s", dpid, roles.ROLE_NAMES.get(role, role), generation)
        if outcome == roles.CONFIRMED and dpid not in self.datapaths and dpid in self.connections:
            self._adopt_switch(self.connections[dpid], sorted(self._live_ports.get(dpid, ())))
        elif outcome == roles.FENCED:
            self._fenced(dpid)
        self._count_writable()

    def _cluster_error(self, dpid, err_type, code):
        """True when the error was a role matter (nothing else to do with it)."""
        outcome = self.roles.error(dpid, err_type, code)
        if outcome == roles.FENCED:
            self._fenced(dpid)
        return outcome != roles.NOTHING or dpid not in self.datapaths

    def _fenced(self, dpid):
        LOG.warning("cluster: switch %s fenced this node (a newer generation than %s holds it): stepping down, "
                    "writing nothing", dpid, self.roles.generation)
        self._step_down()
        if self.coordinator is not None:
            self.coordinator.resign()

    def _step_down(self):
        for dpid in self.roles.step_down():
            self._forget_switch(dpid)
        for dpid in list(self.datapaths):  # adopted but not confirmed at this generation: none should be left
            self._forget_switch(dpid)
        self.core.metrics.cluster_leader.set(0)
        self.core.metrics.cluster_leader_changes.inc()
        self._count_writable()

    def _send_roles(self, requests):
        for request in requests:
            dp = self.connections.get(request.dpid)
            if dp is not None:
                dp.send_msg(ofmsg.role_request(dp, request.role, request.generation))

    def _count_writable(self):
        self.core.metrics.cluster_writable.set(sum(self.roles.may_write(d) for d in self.connections))

    # -- the coordinator's callbacks ----------------------------------------------------------------------------
    def _cluster_leading(self, generation):
        """Elected, the generation bumped: recover like a restart, ask every switch for MASTER."""
        LOG.info("cluster: leading at generation %d: asking %d switches for MASTER", generation,
                 len(self.connections))
        self.core.begin_recovery()
        self._send_roles(self.roles.lead(generation))
        self.core.metrics.cluster_leader.set(1)
        self.core.metrics.cluster_generation.set(generation)
        self.core.metrics.cluster_leader_changes.inc()

    def _cluster_following(self, generation):
        if self.roles.leading:
            LOG.warning("cluster: no longer leading (ZooKeeper session lost or resigned): stepping down")
            self._step_down()
        if generation is not None:
            self.core.metrics.cluster_generation.set(generation)
        self._send_roles(self.roles.follow(generation))

    def _cluster_shared(self, key, value):
        """Jobs and the objective set through any node's REST (applied by every core: the leader's acts on
        them, a follower's answers reads); the leader's view kept for the followers."""
        if key == "jobs" and value is not None:
            self.core.set_jobs(value)
            self.core.request_decision()
            LOG.info("cluster: declared jobs from ZooKeeper: %s", ", ".join(j["name"] for j in value) or "none")
            self.wake(decide=True)
        elif key == "objective" and value in ("flow", "job"):
            self.core.te.objective = value
        elif key == "view":
            self.cluster_view = value

    # -- the leader's view and what REST shows ------------------------------------------------------------------
    def _view_loop(self):
        while self.coordinator is not None:
            southbound.sleep(VIEW_PERIOD_S)
            try:
                if self.roles.leading:
                    view = self._view()
                    if view != self._view_published:
                        with southbound.unlocked():
                            self.coordinator.publish_view(view)
                        self._view_published = view
            except Exception:
                LOG.exception("cluster: publishing the view failed; continuing")

    def _view(self):
        topology = self.core.topology
        pins = sorted(self.core.te.pinned.items(), key=lambda item: str(item[0]))[:VIEW_MAX_PINS]
        return {"switches": len(self.datapaths), "links": len(topology.links) // 2,
                "hosts": len(topology.hosts), "jobs": [j["name"] for j in self.core.jobs],
                "pinned": [{"flow": str(key), "path": list(path)} for key, path in pins]}

    def cluster_json(self):
        """GET /mlroute/cluster: this node's role, the leader, the generation, the members, each switch's role."""
        if self.roles is None:
            return {"enabled": False, "role": "standalone"}
        status = self.coordinator.status() if self.coordinator is not None else {}
        return dict(status, enabled=True, role="leader" if self.roles.leading else "follower",
                    switches={str(d): v for d, v in self.roles.view().items()}, view=self.cluster_view)

    def cluster_put(self, key, value):
        """A REST write (jobs, objective) stored in ZooKeeper: the leader applies it wherever it arrived."""
        with southbound.unlocked():
            self.coordinator.put(key, value)
