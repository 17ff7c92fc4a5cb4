"""The switches' replies, for MlrouteApp (controller/app.py): multipart statistics reassembled (flow stats of a
poll, a read-back or an audit; port stats; group descriptions; table features and table stats; group features),
barrier replies and descriptions, each turned into one core call. A mixin of MlrouteApp: it reads the app's
``core``, the xid tables of its read-backs and audits, its ``assembler`` and ``link_load``.
"""

import logging

from controller.southbound import ofmsg
from controller.southbound.framework import MAIN_DISPATCHER, ofp_event
from controller.southbound.handlers import set_ev_cls

LOG = logging.getLogger("mlroute")


class SwitchReplies:
    """The reply handlers of MlrouteApp."""

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats_reply(self, ev):
        msg, dpid = ev.msg, ev.msg.datapath.id
        audit = self._audit_xids.get(msg.xid) == dpid
        readback = audit or self._readback_xids.get(msg.xid) == dpid
        # a poll's counting rules are read from the reply bytes (ofstats); Ryu parses entries only for a
        # read-back (ofmsg.LazyFlowStats), whose rules need every field
        parts = list(msg.body) if readback else ofmsg.poll_samples(dpid, msg)
        entries = self.assembler.feed(dpid, msg.xid, parts, bool(msg.flags & ofmsg.REPLY_MORE))
        if entries is None:
            return  # more parts to come
        if readback:
            rules = [ofmsg.rule_from_stats(dpid, s) for s in entries]
            audited = False
            if self._audit_xids.pop(msg.xid, None) is not None:
                audited = self.core.audit_flows(dpid, rules)
            else:
                self._readback_xids.pop(msg.xid, None)
                self.core.flows_read_back(dpid, rules)  # (the switch is stale once read back whole)
                self._answered_connect(dpid)
            return self.wake(resync=audited)
        self.core.flow_stats(dpid, entries)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def port_stats_reply(self, ev):
        msg, dpid = ev.msg, ev.msg.datapath.id
        entries = self.assembler.feed(dpid, msg.xid, list(msg.body), bool(msg.flags & ofmsg.REPLY_MORE))
        for problem in self.link_load.reply(dpid, entries) if entries is not None else ():
            LOG.warning("skipping port-stats entry: %s", problem)

    def links_json(self):
        core = self.core
        if core.sflow is not None:  # counter samples, pushed by the switches (auto: by those on sFlow)
            if core.auto is None:
                return core.sflow.links(core.topology, core.te.pinned, core.fabric_bps)
            return core.sflow.links(core.topology, core.te.pinned, core.fabric_bps, polled=self.link_load.rates,
                                    sampled=core.auto.sampled)
        return self.link_load.links(self.core.topology, self.core.te.pinned, self.core.fabric_bps)

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    def group_desc_reply(self, ev):
        msg, dpid = ev.msg, ev.msg.datapath.id
        entries = self.assembler.feed(dpid, msg.xid, list(msg.body), bool(msg.flags & ofmsg.REPLY_MORE))
        if entries is None:
            return
        audited = False
        if self._audit_xids.pop(msg.xid, None) == dpid:
            audited = self.core.audit_groups(dpid, [ofmsg.group_from_desc(dpid, g) for g in entries])
        elif self._readback_xids.pop(msg.xid, None) == dpid:
            self.core.groups_read_back(dpid, [ofmsg.group_from_desc(dpid, g) for g in entries])
        self.wake(resync=audited)

    @set_ev_cls([ofp_event.EventOFPTableFeaturesStatsReply, ofp_event.EventOFPTableStatsReply], MAIN_DISPATCHER)
    def table_reply(self, ev):
        """Table features (capacities, at connect) and table stats (fill, every poll) of a switch."""
        msg, dpid = ev.msg, ev.msg.datapath.id
        entries = self.assembler.feed(dpid, msg.xid, list(msg.body), bool(msg.flags & ofmsg.REPLY_MORE))
        if entries is None:
            return
        audit_now = False
        if isinstance(ev, ofp_event.EventOFPTableStatsReply):
            audit_now = self.core.table_stats(dpid, ofmsg.table_counts(entries))
        else:
            self.core.table_features(dpid, ofmsg.table_capacities(entries))
            self._answered_connect(dpid)
        self.wake(resync=audit_now)

    @set_ev_cls(ofp_event.EventOFPGroupFeaturesStatsReply, MAIN_DISPATCHER)
    def group_features_reply(self, ev):
        self.core.group_features(ev.msg.datapath.id, *ofmsg.group_features(ev.msg.body))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        self.core.barrier_answered(ev.msg.datapath.id, ev.msg.xid)
        event = self._barriers.pop(ev.msg.xid, None)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPDescStatsReply, MAIN_DISPATCHER)
    def desc_reply(self, ev):
        problem = self.core.switch_described(ev.msg.datapath.id, *ofmsg.description(ev.msg.body))
        if problem:
            LOG.error("%s", problem)
        self.wake(resync=True)  # its profile, copy policy and spreading shape the plan
