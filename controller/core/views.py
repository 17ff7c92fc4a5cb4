"""The core's views for REST and the web view: the switches (capabilities, tables, refusals, audit), the
topology, the elephants and the routing report. Reads only; a mixin of ``controller.core.ControllerCore``.
"""

from __future__ import annotations

from typing import Any

from controller.core.switches import TABLES_USED, SwitchTables
from controller.state.capabilities import SwitchCapabilities
from controller.state.flowkey import PROTO_PAIR, FlowKey


class CoreViews(SwitchTables):
    """What the REST API and the web view show of the core."""

    def switches_json(self) -> list[dict]:
        """Per switch: what it said it is, its tables' fill (confirmed) and capacity, its rule changes pending, group
        support, errors, audit state, the detection in force there (``te.detection: auto``: per switch)."""
        out = []
        for dpid in sorted(set(self.capabilities) | self.connected):
            caps = self.capabilities.get(dpid) or SwitchCapabilities(dpid)
            # installed: what the switch confirmed (a barrier answered after it, or read back); pending: the rest
            view = caps.to_json(self.belief.confirmed_table_counts(dpid), TABLES_USED)
            view.update(connected=dpid in self.connected, groups_installed=self.belief.confirmed_groups(dpid),
                        pending=len(self.belief.pending(dpid)),
                        refused=len(self.belief.refused_ids(dpid)),
                        over_budget=len(self.belief.over_budget.get(dpid, {})),
                        profile=self.profiles[dpid].to_json() if dpid in self.profiles else None,
                        limits={str(t): n for t, n in self._limits_of(dpid).items()} if dpid in self.connected
                        else {},
                        audit={"period_s": self.audit.period_s, "out": self.audit.out(dpid)},
                        detection=self.detection_of(dpid))
            out.append(view)
        return out

    def topology_json(self) -> dict:
        return self.topology.to_json(self.tiers.tiers if self.tiers else {})

    def elephants_json(self) -> list[dict]:
        """The elephants, and (sFlow) the host pairs busy as a whole with none of their 5-tuples an elephant:
        one demand each, listed as a pair key (proto 0, ports 0), as a pair counted whole under flow stats is."""
        pinned = self.te.pinned
        elephants = self.monitor.elephants()
        out = [dict(st.key.as_dict(), rate_bps=st.rate_bps, demand_bps=st.demand_bps,
                    path=list(pinned[st.key]) if st.key in pinned else None, active=st.streak > 0)
               for st in elephants]
        sflow = self.sflow
        if sflow is None:
            return out
        for pair in self.sampled_pairs(st.key for st in elephants):
            rate = sflow.pair_rate_bps(pair)
            out.append(dict(FlowKey(pair.src_ip, pair.dst_ip, PROTO_PAIR, 0, 0).as_dict(), rate_bps=rate,
                            demand_bps=None, path=list(pinned[pair]) if pair in pinned else None, active=True))
        return out

    def routing_json(self) -> dict:
        """The last decision's own routing-core reports (computed with it, in the optimiser's worker): of the
        routing it left in force and of what ECMP alone would give (estimated); nothing is computed here, so a
        REST read or a /metrics scrape costs no routing. ``elephants``: those on the fabric now."""
        fabric = self.fabric()
        elephants = [st for st in self.monitor.elephants()
                     if fabric is not None and st.key.src_ip in fabric.hosts and st.key.dst_ip in fabric.hosts]
        last = self.te.last
        out: dict[str, Any] = {"mode": self.te.mode, "elephants": len(elephants), "units": "bits per second",
                               "fabric": self.tiers.kind if self.tiers else "unknown",
                               "installed": last.after if last is not None else None,
                               "ecmp": last.ecmp if last is not None else None, "last_decision": None}
        if last is not None:
            out["last_decision"] = {"applied": last.applied, "reason": last.reason, "moved": len(last.moved),
                                    "optimiser_ms": 1e3 * last.runtime_s,
                                    "max_link_load_before": (last.before or {}).get("max_link_load"),
                                    "max_link_load_after": (last.after or {}).get("max_link_load")}
        return out
