"""The core's views for REST and the web view: the switches (capabilities, tables, refusals, audit), the
topology, the elephants and the routing report. Reads only; a mixin of ``controller.core.ControllerCore``.
"""

from __future__ import annotations

from typing import Any

from controller.core_switches import TABLES_USED, SwitchTables
from controller.decide import te
from controller.desired import table_budget
from controller.state.capabilities import SwitchCapabilities
from mlroute.routing import metric
from mlroute.routing.flow import Flow


class CoreViews(SwitchTables):
    """What the REST API and the web view show of the core."""

    def switches_json(self) -> list[dict]:
        """Per switch: what it said it is, its tables' fill and capacity, group support, errors, audit state."""
        out = []
        for dpid in sorted(set(self.capabilities) | self.connected):
            caps = self.capabilities.get(dpid) or SwitchCapabilities(dpid)
            held = self.installed.get(dpid)
            view = caps.to_json(table_budget.table_counts(held) if held is not None else {}, TABLES_USED)
            view.update(connected=dpid in self.connected, groups_installed=len(held.groups) if held else 0,
                        refused=sum(1 for (d, _) in self.refused if d == dpid),
                        over_budget=len(self.over_budget.get(dpid, {})),
                        profile=self.profiles[dpid].to_json() if dpid in self.profiles else None,
                        limits={str(t): n for t, n in self._limits_of(dpid).items()} if dpid in self.connected
                        else {},
                        audit={"period_s": self.audit.period_s, "out": self.audit.out(dpid)})
            out.append(view)
        return out

    def topology_json(self) -> dict:
        return self.topology.to_json(self.tiers.tiers if self.tiers else {})

    def elephants_json(self) -> list[dict]:
        pinned = self.te.pinned
        return [dict(st.key.as_dict(), rate_bps=st.rate_bps, demand_bps=st.demand_bps,
                     path=list(pinned[st.key]) if st.key in pinned else None, active=st.streak > 0)
                for st in self.monitor.elephants()]

    def routing_json(self) -> dict:
        """The routing-core report of the installed routing and of what ECMP would give (estimated)."""
        fabric = self.fabric()
        elephants = [st for st in self.monitor.elephants()
                     if fabric is not None and st.key.src_ip in fabric.hosts and st.key.dst_ip in fabric.hosts]
        out: dict[str, Any] = {"mode": self.te.mode, "elephants": len(elephants), "units": "bits per second",
                               "fabric": self.tiers.kind if self.tiers else "unknown", "installed": None,
                               "ecmp": None, "last_decision": None}
        last = self.te.last
        if last is not None:
            out["last_decision"] = {"applied": last.applied, "reason": last.reason, "moved": len(last.moved),
                                    "optimiser_ms": 1e3 * last.runtime_s,
                                    "max_link_load_before": (last.before or {}).get("max_link_load"),
                                    "max_link_load_after": (last.after or {}).get("max_link_load")}
        if not elephants or fabric is None:  # (elephants are only taken on a known fabric)
            return out
        jobs = self.jobs_by_host()
        flows = [Flow(st.key.src_ip, st.key.dst_ip, demand=st.demand_bps / self.host_bps or None,
                      job=jobs.get(st.key.src_ip), key=st.key) for st in elephants]
        objective = "job" if jobs else self.te.objective
        ecmp = te.run_optimiser("ecmp", fabric, flows).paths
        installed, _ = te.paths_in_force(fabric, flows, self.te.pinned, ecmp)
        out["installed"] = metric.report(fabric, flows, installed, objective=objective)
        out["ecmp"] = metric.report(fabric, flows, ecmp, objective=objective)
        return out
