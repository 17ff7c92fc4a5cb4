"""The app's loops and its sending: what ``controller/app.py``'s MlrouteApp does between the framework's events.

Four loops (green threads under Ryu, native threads holding the core's turn under os-ken; app.py starts them):
the resync loop (sends the core's rule changes step by step, with barriers where make-before-break needs them),
the poll loop (flow, table and port stats, jobs whose lease ran out ended, then a TE decision requested), the
decision loop (the only one that talks to the optimiser's worker) and the event-loop lag probe (/metrics); with
sFlow detection a fifth hands the collector's completed windows to the core. A mixin of MlrouteApp: it reads the
app's ``core``, ``config``, ``datapaths`` and the xid tables the handlers fill.
"""

import logging
import threading
import time

from controller.decide.packet_in import ArpProbe, ArpReply, Forward, NdProbe
from controller.desired.rules import COOKIE_FLOW
from controller.southbound import framework as southbound
from controller.southbound import ofmsg
from controller.southbound.sflow.collector import SflowCollector

LOG = logging.getLogger("mlroute")

BARRIER_TIMEOUT_S = 1.0
LAG_TICK_S = 0.1  # the event-loop lag probe's sleep
DECISION_TICK_S = 0.02  # how often the decision loop looks at a decision in flight or queued
IN_FORCE_POLL_S = 0.01  # how often a job event's answer looks whether its rules are confirmed
DECISION_STALL_S = 30.0  # decisions wanted and the decision loop not come round for this long: a warning, with where


class AppLoops:
    """The loops and the sending of MlrouteApp (controller/app.py)."""

    # -- loops -----------------------------------------------------------------------------------------------
    def wake(self, resync=False, decide=False):
        """The loops, told what an event requires: a resync (``resync``: the desired state may have changed; or a
        switch the belief holds stale), a decision (``decide``; or one queued or in flight). What is owed stays
        owed until the resync loop takes it."""
        if resync:
            self.resync_owed = True
        if self.resync_due():
            self._wake.set()
        if decide or self.core.decisions.busy:
            self._decide.set()

    def resync_due(self):
        """A resync owed to an event, or a switch the belief holds stale (its tables changed outside a sync)."""
        return self.resync_owed or self.core.belief.any_stale

    def _decision_loop(self):
        """The only caller of the optimiser's worker (core.decision_tick): requested decisions, one at a time."""
        while True:
            self._decision_ticked = time.monotonic()  # (the lag loop's watchdog reads it)
            self._decide.wait(timeout=DECISION_TICK_S if self.core.decisions.busy else 0.5)
            self._decide.clear()
            try:
                if self.core.decision_tick() is not None:
                    self.wake(resync=True)  # its pins, if they changed
            except Exception:
                LOG.exception("TE decision failed; continuing")
                southbound.sleep(0.5)

    def _resync_loop(self):
        while True:
            self._wake.wait(timeout=1.0)
            if self.writes_held():  # stays owed: synced once ZooKeeper confirms the lead (shell/cluster.py)
                southbound.sleep(0.1)
                continue
            self._wake.clear()
            try:
                self._wipe_unread()
                if self.resync_due():
                    self.resync_owed = False  # (events while it runs owe another)
                    self.resync()
                    if self.core.decisions.busy:  # asked for by the sync (a failure under a pin, a takeover)
                        self._decide.set()
                self.confirm_sent()  # (changes sent outside a resync too: new flows' counting rules)
                self.ask_connected()  # (a switch that did not answer frees its turn)
                self.start_audits()
            except Exception:
                LOG.exception("resync failed; will retry")
                self.resync_owed = True
                southbound.sleep(0.5)

    def start_audits(self):
        """Read back the switches whose audit is due (after a resync: every believed change has been sent)."""
        for dpid in self.core.audits_due():
            if dpid in self.datapaths:
                self._read_tables(self.datapaths[dpid], self._audit_xids)

    def _wipe_unread(self):
        for dpid in self.core.readback_overdue():
            dp = self.datapaths.get(dpid)
            writable = dp is not None and self.may_write(dpid)
            for message in ofmsg.wipe(dp, groups=self.core.selects(dpid)) if writable else ():
                dp.send_msg(message)

    def resync(self):
        """Send the core's rule changes step by step, fencing with barriers where make-before-break needs."""
        steps = self.core.sync()
        started = self.core.syncs_started
        for step in steps:
            for dpid, change in step.changes:
                dp = self.datapaths.get(dpid)
                if dp is not None:
                    while (wait := self.core.pace(dpid)) > 0:  # its profile's max_flow_mods_per_s, in order
                        southbound.sleep(wait)
                    self._send_change(dp, change)
            self._barrier([self.datapaths[d] for d in step.barrier_dpids if d in self.datapaths
                           and self.core.barriers(d)])
        self.confirm_sent()
        self.core.sync_sent(started)

    def wait_in_force(self, sync_round, timeout_s):
        """Wait until the rules of a decision that ended after ``sync_round`` syncs had started are sent and
        confirmed by every switch (a barrier after them answered), ``timeout_s`` at most; True if they were."""
        deadline = time.monotonic() + timeout_s
        marks = None
        while True:
            if marks is None:
                marks = self.core.sent_since(sync_round, self.resync_owed)
            if marks is not None and self.core.confirmed_upto(marks):
                return True
            if time.monotonic() >= deadline:
                return False
            southbound.sleep(IN_FORCE_POLL_S)

    def confirm_sent(self):
        """A barrier to every switch with changes sent after its last one: the reply confirms them (not waited
        for; unanswered, the core reads the switch back)."""
        for dpid in self.core.barriers_due():
            dp = self.datapaths.get(dpid)
            if dp is not None:
                self._send_barrier(dp)

    def _send_change(self, dp, change):
        """A rule change as its flow or group mod, remembered by xid: an error reply names it (openflow_errors)."""
        if not self.may_write(dp.id):
            return  # a cluster node that does not lead it (controller/shell/cluster.py)
        msg = ofmsg.compile_change(dp, change)
        dp.set_xid(msg)
        self.sent_changes.record(dp.id, msg.xid, change)
        self.core.change_sent(dp.id, change)
        dp.send_msg(msg)

    def _barrier(self, dps):
        """Wait until the switches confirm they applied everything sent so far, BARRIER_TIMEOUT_S at most in all
        (not per switch: a busy Open vSwitch answering 80 switches' barriers late held one sync step, and every
        topology change behind it, for 80 s: the k=8 fabric's tiers stayed unknown for a minute)."""
        events = []
        for dp in dps:
            event = southbound.Event()
            events.append((self._send_barrier(dp, event), event))
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        for xid, event in events:
            if not event.wait(timeout=max(0.0, deadline - time.monotonic())):
                self._barriers.pop(xid, None)  # a reply after the deadline finds nothing to wake

    def ask_connected(self):
        """Switches connected whose turn it is (connect_queue.py): their table features, then their tables read
        back (in that order on the connection: capacities known before the first sync)."""
        while batch := self.connecting.due():
            for dpid, dp in batch:
                if self.datapaths.get(dpid) is not dp:
                    self.connecting.forget(dpid)  # gone (or reconnected: asked as the new connection)
                    continue
                dp.send_msg(ofmsg.table_features_request(dp))
                self.core.readback_asked(dpid)
                self._read_tables(dp, self._readback_xids)

    def _answered_connect(self, dpid):
        """A connected switch's table features or read-back arrived: the next switch's turn."""
        self.connecting.answered(dpid)
        self.ask_connected()

    def _send_barrier(self, dp, event=None):
        """A barrier request to ``dp`` (its reply sets ``event``); the core confirms the changes before it at the
        reply. Returns its xid."""
        req = ofmsg.barrier_request(dp)
        dp.set_xid(req)
        if event is not None:
            self._barriers[req.xid] = event
        self.core.barrier_sent(dp.id, req.xid)
        dp.send_msg(req)
        return req.xid

    def _lag_loop(self):
        """Event-loop lag for /metrics: a 0.1 s sleep that wakes late was held up by other work in this thread."""
        while True:
            start = time.monotonic()
            southbound.sleep(LAG_TICK_S)
            self.core.metrics.loop_lag.observe(max(0.0, time.monotonic() - start - LAG_TICK_S))
            self._cluster_beat()  # a cluster leader held up (paused) confirms its lead before writing again
            self._check_decision_loop()

    def _check_decision_loop(self):
        """Decisions wanted and the decision loop not come round for DECISION_STALL_S: a warning (once a minute)
        with the loop's stack. The loop's own warnings (a worker not ready, a decision late) cannot fire from a
        loop that is stuck; a CI run's new cluster leader once decided nothing for a minute, without a trace."""
        ticked, thread = self._decision_ticked, self._decision_thread
        if ticked is None or thread is None or not self.core.decisions.busy:
            return
        stalled = time.monotonic() - ticked
        if stalled > DECISION_STALL_S and self._stall_log.due("decision loop"):
            LOG.warning("te: decisions wanted, and the decision loop has not come round for %.0f s; it is at:\n%s",
                        stalled, southbound.where(thread).rstrip())

    def _poll_loop(self):
        """Every period: ask ingress switches for their per-flow counters and fabric switches for their port
        counters, then take a TE decision."""
        period = self.config["te"]["poll_interval_s"]
        while True:
            southbound.sleep(period)
            try:
                for dpid in self.core.stats_switches():
                    dp = self.datapaths.get(dpid)
                    if dp is not None:
                        dp.send_msg(ofmsg.flow_stats_request(dp, COOKIE_FLOW, ofmsg.COOKIE_EXACT))
                for dp in list(self.datapaths.values()):  # table fill: capacities, and tables wiped under us
                    dp.send_msg(ofmsg.table_stats_request(dp))
                for dpid in self.link_load.poll_targets(self.core.topology, self.core.connected):
                    # (sFlow: counter samples instead; under auto, at the switches on sFlow)
                    if dpid in self.datapaths and not self._counter_sampled(dpid):
                        self.datapaths[dpid].send_msg(ofmsg.port_stats_request(self.datapaths[dpid]))
                southbound.sleep(min(0.5, period / 4))  # replies are handled meanwhile by the event thread
                hosts = self.core.housekeeping()
                self._send_actions(hosts.actions)  # host-move probes and their timeouts
                self._expire_jobs()
                self.core.request_decision()  # taken by the decision loop
                self.core.metrics.set_link_utilisation(self.links_json())
                self.wake(resync=hosts.changed, decide=True)
            except Exception:
                LOG.exception("poll failed; continuing")

    def _counter_sampled(self, dpid):
        """Whether ``dpid``'s port counters come from its sFlow counter samples (no port-stats poll there)."""
        return self.core.sflow is not None and (self.core.auto is None or self.core.auto.uses_sflow(dpid))

    def _expire_jobs(self):
        """Jobs whose lease ran out end (controller/state/job_leases.py): in the core on one controller (the
        decision the poll requests next routes without them); on a cluster the leader removes them from
        ZooKeeper and every node follows."""
        if self.roles is None:
            self.core.expire_jobs()
        else:
            self._cluster_expire_jobs()

    def _send_actions(self, actions, data=None):
        """Packet-outs for the core's packet decisions (replies, forwards of ``data``, probes)."""
        for action in actions:
            target = self.datapaths.get(action.dpid)
            if target is None or not self.may_write(action.dpid):
                continue
            if isinstance(action, ArpReply):
                target.send_msg(ofmsg.packet_out(target, action.port, ofmsg.arp_reply_frame(action)))
            elif isinstance(action, Forward) and data is not None:
                target.send_msg(ofmsg.packet_out(target, action.port, data))
            elif isinstance(action, (ArpProbe, NdProbe)):
                target.send_msg(ofmsg.packet_out(target, action.port, action.frame))

    def _start_sflow(self):
        """te.detection sflow | both | auto: the collector in a thread of its own (green under Ryu's monkey-patching,
        native and without the turn under os-ken: it touches only the estimator, under its lock), and a loop
        that hands each completed window to the core."""
        cfg = self.config["sflow"]
        self.collector = SflowCollector(lambda dg, peer: self.core.sflow_datagram(time.monotonic(), dg),
                                        cfg["host"], cfg["port"], agents=self.core.sflow.agents,
                                        rcvbuf_bytes=cfg["rcvbuf_bytes"])
        self._sflow_stop = threading.Event()
        threading.Thread(target=self.collector.serve, args=(self._sflow_stop,), name="sflow", daemon=True).start()
        self._threads.append(southbound.spawn(self._sflow_loop))
        LOG.info("sFlow collector on %s:%s (te.detection %s)", *self.collector.address, self.core.detection)

    def _sflow_loop(self):
        tick = self.config["sflow"]["window_s"] / 4
        while True:
            southbound.sleep(tick)
            try:
                moved = self.core.detection_tick()  # (te.detection: auto) a switch's export heard, or silent
                new = self.core.sflow_tick(self.collector.stats() if self.collector is not None else None)
                if moved or new:
                    self.wake(resync=moved, decide=new)
            except Exception:
                LOG.exception("sFlow tick failed; continuing")
