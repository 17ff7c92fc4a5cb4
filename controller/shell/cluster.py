"""The controller cluster's part of the shell: role requests, their answers, leadership and shared state.

A mixin of MlrouteApp (controller/app.py), like app_loops. With a ``cluster:`` section every node connects to
every switch; ``self.connections`` holds them all, ``self.datapaths`` only those this node may write to: a
switch enters the core (``_adopt_switch``: read back, then synced) once it confirmed this node as MASTER at the
current generation (controller/cluster/roles.py), and leaves it (``_forget_switch``) the moment this node steps
down, so every write path, which reads ``self.datapaths``, writes nothing on a follower; ``may_write`` guards the
sends once more.

Why the rest:
- A SLAVE may not send packet-outs (OpenFlow 1.3 §6.3.6), so a follower cannot run LLDP: its topology app holds
  back the ports of switches it may not write to (``lldp_allowed``, southbound/lldp_loop.py) and it learns the
  fabric from the leader's published view instead (links, hosts, pins, jobs; versioned). A new leader adopts
  each switch with the view's links between live ports already in its core, so it routes at once instead of
  after LLDP's first batch (4 s on k=4); LLDP then confirms or replaces them, and the tables are read back as on
  a restart (``core.begin_recovery``).
- A node that steps down starts over with a fresh core (jobs, objective and metrics kept): what it learned as
  leader goes stale while another leads, and a later term reads everything back anyway.
- A leader whose process was held up (SIGSTOP, a long stall) longer than a third of its session may have lost
  the session without knowing yet: it writes nothing until ZooKeeper confirms it still holds the election lock
  (``writes_held``); the switches' generation check fences it in any case, this keeps it from even trying.
"""

import logging
import socket
import time

from controller.cluster import roles
from controller.cluster.roles import SwitchRoles
from controller.southbound import framework as southbound
from controller.southbound import ofmsg
from controller.state import job_leases, tiers

LOG = logging.getLogger("mlroute")

VIEW_PERIOD_S = 2.0  # the leader publishes its warm view this often (when it changed)
VIEW_MAX_PINS = 1000  # pinned paths in the published view at most (it stays a small znode)
HELD_UP_FRACTION = 1 / 3  # a leader held up this much of its session confirms its lead before writing again
CONFIRM_RETRY_S = 0.2


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
        self._view_version = 0
        self._beat = None  # the lag loop's last tick (controller/shell/loops.py; None: not running): a gap, a hold-up
        self._held = False  # writes held until ZooKeeper confirms this node still leads
        session = self.config["cluster"]["session_timeout_s"] if self.roles is not None else 0.0
        self._held_up_s = max(0.2, HELD_UP_FRACTION * session)

    def _cluster_start(self, wait=True):
        """Join the cluster and publish the view while leading. ``wait`` False: in a thread of its own, trying
        until ZooKeeper answers (the app's start); a follower meanwhile, writing nothing."""
        if self.roles is None:
            return
        from controller.cluster.zookeeper import Coordinator  # kazoo only with a cluster: section

        c, rest = self.config["cluster"], self.config["rest"]
        advertise = c["advertise"] or f"http://{rest['host']}:{rest['port']}"
        self.coordinator = Coordinator(c["zookeeper"], c["name"], c["node_id"], advertise, c["session_timeout_s"],
                                       _Listener(self), **_liveness(rest["host"], advertise, c["liveness_port"]))
        if wait:
            self._cluster_join()
        else:
            self._threads.append(southbound.spawn(self._cluster_join))

    def _cluster_join(self):
        c = self.config["cluster"]
        with southbound.unlocked():
            self.coordinator.start(timeout_s=None)
        self._threads.append(southbound.spawn(self._view_loop))
        LOG.info("cluster %s: node %s joined through %s (session %.1f s)", c["name"], c["node_id"], c["zookeeper"],
                 c["session_timeout_s"])

    def _cluster_stop(self):
        if self.coordinator is not None:
            self.coordinator.stop()
            self.coordinator = None

    def may_write(self, dpid):
        """Flow mods, group mods and packet-outs to ``dpid`` allowed (always, without a cluster)."""
        return self.roles is None or (self.roles.may_write(dpid) and not self.writes_held())

    def writes_held(self):
        """True while this leader, held up past a third of its session, waits for ZooKeeper to confirm its lead."""
        if self.roles is None or not self.roles.leading:
            return False
        gap = 0.0 if self._beat is None else time.monotonic() - self._beat
        if gap > self._held_up_s:
            self._hold(gap)
        return self._held

    def _cluster_beat(self):
        """The lag loop's tick: a late one (the process was paused or stalled) holds the writes."""
        if self.roles is not None:
            self.writes_held()
            self._beat = time.monotonic()

    def _hold(self, gap):
        self._beat = time.monotonic()
        if self._held:
            return
        self._held = True
        self.core.metrics.cluster_writable.set(0)
        LOG.warning("cluster: this process was held up %.1f s (paused? session %.1f s): writing nothing until "
                    "ZooKeeper confirms it still leads", gap, self.config["cluster"]["session_timeout_s"])
        self._threads.append(southbound.spawn(self._confirm_lead))

    def _confirm_lead(self):
        while self._held and self.roles.leading and self.coordinator is not None:
            with southbound.unlocked():
                confirmed = self.coordinator.confirm()
            if confirmed and self.roles.leading and self._held:
                self._held = False
                LOG.info("cluster: ZooKeeper confirms this node still leads (generation %s): writing again; "
                         "every switch read back (changes held meanwhile were not sent)", self.roles.generation)
                for dp in list(self.datapaths.values()):
                    self._read_tables(dp, self._audit_xids)
                self._count_writable()
                self.wake()
                return
            southbound.sleep(CONFIRM_RETRY_S)
        self._held = False  # stepped down meanwhile: may_write says no anyway

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
        if outcome == roles.FENCED:  # (only ever a leader's outcome: it has a generation)
            stale = (err_type, code) == (roles.OFPET_ROLE_REQUEST_FAILED, roles.OFPRRFC_STALE)
            if stale and self.coordinator is not None:
                with southbound.unlocked():  # (a ZooKeeper round trip: the switch remembers a newer one)
                    self.coordinator.skip_ahead(self.roles.generation)
            self._fenced(dpid)
        return outcome != roles.NOTHING or dpid not in self.datapaths

    def _fenced(self, dpid):
        generation = self.roles.generation
        LOG.warning("cluster: switch %s fenced this node (a newer generation than %s holds it): stepping down, "
                    "writing nothing", dpid, generation)
        self._step_down()
        if self.coordinator is not None:
            self.coordinator.resign(generation)  # that term only: a late fence does not end a newer one

    def _step_down(self):
        for dpid in self.roles.step_down():
            self._forget_switch(dpid)
        for dpid in list(self.datapaths):  # adopted but not confirmed at this generation: none should be left
            self._forget_switch(dpid)
        self._held = False
        old = self.core  # what it learned goes stale while another leads: a fresh core, the shared state kept
        self._new_core(old.runner, metrics=old.metrics)
        self.core.jobs = list(old.jobs)
        self.core.te.objective = old.te.objective
        self.core.metrics.cluster_leader.set(0)
        self.core.metrics.cluster_leader_changes.inc()
        self._count_writable()

    def _send_roles(self, requests):
        for request in requests:
            dp = self.connections.get(request.dpid)
            if dp is not None:
                dp.send_msg(ofmsg.role_request(dp, request.role, request.generation))

    def _count_writable(self):
        self.core.metrics.cluster_writable.set(sum(self.may_write(d) for d in self.connections))

    def _seed_links(self, dpid):
        """A switch just adopted: the published view's links between it and the switches adopted before it,
        where both ports are live now (port status reaches a SLAVE too), go into the core as LLDP would put
        them; LLDP confirms them, or removes them when they time out."""
        view = self.cluster_view or {}
        seeded = 0
        for src, src_port, dst, dst_port in view.get("links", ()):
            if dpid not in (src, dst) or src not in self.datapaths or dst not in self.datapaths:
                continue
            if src_port in self._live_ports.get(src, ()) and dst_port in self._live_ports.get(dst, ()):
                self.core.link_added(src, src_port, dst, dst_port)
                seeded += 1
        if seeded:
            LOG.info("switch %s: %d links from the cluster view (version %s)", dpid, seeded, view.get("version"))

    # -- the coordinator's callbacks ----------------------------------------------------------------------------
    def _cluster_leading(self, generation):
        """Elected, the generation bumped: recover like a restart, ask every switch for MASTER."""
        LOG.info("cluster: leading at generation %d: asking %d switches for MASTER", generation,
                 len(self.connections))
        view = self.cluster_view or {}
        self._view_published = None  # its own, from a term before, is not what the followers hold now
        # with the old leader's view, recovery ends once its switches are read back (core: a warm takeover)
        self.core.begin_recovery(warm=view.get("switches", ()) if view.get("links") else (),
                                 tiers=tiers.from_levels(view.get("kind", ""),
                                                         {int(d): lv for d, lv in (view.get("levels") or {}).items()}))
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
            if job_leases.unleased(value) == job_leases.unleased(self.core.jobs):
                self.core.jobs = list(value)  # a renew (only an expiry moved): nothing to route again
                return
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
                self._publish_view()
            except Exception:
                LOG.exception("cluster: publishing the view failed; continuing")

    def _publish_view(self):
        """One period's view, published while leading if it changed since the last one the followers got: one
        that ZooKeeper did not take (a lost connection, the lock gone) is tried again the next period, not
        only once the view changes again (a takeover would start from a view that missed every change since)."""
        if not self.roles.leading:
            return
        view = self._view()
        if view == self._view_published:
            return
        with southbound.unlocked():
            published = self.coordinator.publish_view(dict(view, version=self._view_version + 1))
        if published:
            self._view_version += 1
            self._view_published = view
            LOG.info("cluster: view version %d published (%d links, %d hosts, %d pins)", self._view_version,
                     len(view["links"]), len(view["hosts"]), len(view["pinned"]))

    def _view(self):
        """The leader's warm view: its tiers (a Clos's kind and each switch's level), every admitted directed link
        ([src, port, dst, port]), hosts, jobs, pins."""
        topology = self.core.topology
        pins = sorted(self.core.te.pinned.items(), key=lambda item: str(item[0]))[:VIEW_MAX_PINS]
        inferred = self.core.tiers
        clos = inferred is not None and inferred.is_clos
        return {"switches": sorted(self.datapaths),
                "kind": inferred.kind if clos else None,
                "levels": {str(d): lv for d, lv in sorted(inferred.levels.items())} if clos else {},
                "links": sorted([k.src, k.src_port, k.dst, k.dst_port] for k in topology.links.values()),
                "hosts": sorted([h.ip, h.mac, h.dpid, h.port] for h in topology.hosts.values()),
                "jobs": [j["name"] for j in self.core.jobs],
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

    def cluster_update(self, key, edit):
        """A REST edit of one job stored in ZooKeeper by compare-and-set (``edit``: the value as stored, None when
        unset, -> the new one; it may raise to store nothing), so concurrent edits on any nodes all stay."""
        with southbound.unlocked():
            return self.coordinator.update(key, edit)

    def _cluster_expire_jobs(self):
        """The leader removes the jobs whose (wall-clock) lease ran out from ZooKeeper, judged again on the list as
        stored: a renew that arrived meanwhile keeps its job. Every node's watch then ends them (a decision)."""
        leases = self.core.leases
        if not self.roles.leading or self.coordinator is None or not leases.expired(self.core.jobs):
            return
        try:
            with southbound.unlocked():
                self.coordinator.update("jobs", lambda jobs: None if jobs is None else leases.live(jobs))
        except Exception as exc:  # ZooKeeper away: the next poll tries again
            LOG.warning("cluster: expired jobs not removed from ZooKeeper (%s); trying again next poll",
                        type(exc).__name__)


def _liveness(bind: str, advertise: str, port: int | None) -> dict:
    """The Coordinator's liveness arguments: a server bound on the REST host (``port`` None: none), published at
    the advertised REST URL's host (a wildcard host is this node's own name then)."""
    if port is None:
        return {}
    from urllib.parse import urlsplit

    from controller.cluster.liveness import LivenessServer

    host = urlsplit(advertise).hostname or bind
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    try:
        server = LivenessServer(bind, port)
    except OSError as exc:
        LOG.error("cluster: liveness port %s:%s unavailable (%s): a dead leader here is replaced only when its "
                  "session expires", bind, port, exc)
        return {}
    return {"liveness": server, "liveness_host": host}
