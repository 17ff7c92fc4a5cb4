"""The core's dealings with each switch as a holder of tables: what it said it is (description, profile, table
and group features), what it holds (read back at connect, audited now and then, its table fill), what it refused
(OpenFlow errors: the belief undone, held back for a while) and what its tables have no room for (the table
budget). A mixin of ``controller.core.ControllerCore`` over its state (``core.state.CoreState``, set up in its
``__init__``); these are its methods that read and keep it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from controller.core.state import BARRIER_ANSWER_S, READBACK_TIMEOUT_S, CoreState
from controller.desired import flowcopy, switch_profiles, table_budget
from controller.desired.rules import (
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    TABLE_SEEN,
    Change,
    FlowRule,
    GroupRule,
    SwitchRules,
    apply_change,
)
from controller.desired.sync import Step
from controller.southbound.openflow_errors import names as error_names
from controller.state.budget import TokenBucket
from controller.state.capabilities import SwitchCapabilities, table_short

LOG = logging.getLogger("mlroute")

REFUSED_HOLD_S = 30.0  # a rule change a switch refused is not sent again for this long (a full table stays full)
AUDIT_RECOUNT_S = 10.0  # a switch's believed rules per table are recounted at least this often (table stats)
TABLES_USED = (TABLE_CLASSIFY, TABLE_FORWARD, TABLE_SEEN)  # the tables mlroute writes (rules.py)


class SwitchTables(CoreState):
    """What the core knows of each switch's tables, and how it keeps that belief honest."""

    def _forget_audit(self, dpid: int) -> None:
        self.belief.full.pop(dpid, None)
        self.belief.over_budget.pop(dpid, None)
        self._polled.pop(dpid, None)
        self.audit.forget(dpid)
        self.belief.forget_audit(dpid)
        self._static_counts.pop(dpid, None)

    def openflow_error(self, dpid: int, type_: int, code: int, change: Change | None) -> list[Change]:
        """A switch answered a message with an error; ``change`` is the rule change it refers to, if it was one.
        A group added that the switch already has, or modified that it lacks, is sent again the other way (the
        changes returned, to send now). Any other refused change is undone in what the controller believes the
        switch holds (an add or a modify leaves the rule out of it, a delete leaves it in), held back from the
        next resyncs for REFUSED_HOLD_S, counted and logged by name."""
        kind, why = error_names(type_, code)
        self.metrics.openflow_errors.labels(str(dpid), kind, why).inc()
        caps = self.capabilities.get(dpid)
        if caps is not None:
            caps.errors[f"{kind}/{why}"] = caps.errors.get(f"{kind}/{why}", 0) + 1
        held = self.installed.get(dpid)
        if change is not None:
            self.belief.refused(dpid, change)
        if change is None or held is None:
            if self._refusal_log.due((dpid, kind, why)):
                LOG.warning("switch %s: OpenFlow error %s/%s for a message that is no rule change", dpid, kind, why)
            return []
        rule = change.rule
        if isinstance(rule, GroupRule) and (change.op, why) in (("add", "GROUP_EXISTS"), ("modify", "UNKNOWN_GROUP")):
            return [Change("modify" if change.op == "add" else "add", rule)]  # the belief stands once it is sent
        apply_change(held, _undone(change))
        if why == "BAD_OUT_GROUP" and isinstance(rule, FlowRule):
            self._group_gone(dpid, rule)
        if why == "TABLE_FULL" and isinstance(rule, FlowRule):  # what it holds is what that table takes
            count = table_budget.table_counts(held).get(rule.table, 0)
            self.belief.full.setdefault(dpid, {})[rule.table] = (count + table_budget.headroom(count), self.clock())
        self.belief.refusal(dpid, _rule_id(rule), self.clock(), f"{kind}/{why}", change)
        self.metrics.rules_refused.set(len(self.belief.refusals))
        if self._refusal_log.due((dpid, kind, why)):
            LOG.warning("switch %s refused %s %s (%s/%s): not believed installed, sent again in %.0f s at the "
                        "earliest; further refusals of this kind at this switch are counted in "
                        "mlroute_openflow_errors_total", dpid, change.op, rule, kind, why, REFUSED_HOLD_S)
        return []

    def switch_described(self, dpid: int, mfr_desc: str, hw_desc: str,
                         sw_desc: str | None = None) -> str | None:
        """A switch's OpenFlow description arrived: with ``te.flow_copy: auto`` an Open vSwitch marks new flows
        seen itself, any other switch copies them with plain OpenFlow 1.3. Returns an error to log when the
        configured policy cannot work on that switch. (Its profile, copy policy and spreading shape the plan:
        the shell resyncs after it.)"""
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        caps.manufacturer, caps.hardware, caps.software = mfr_desc, hw_desc, sw_desc
        had = self.selects(dpid)
        profile = self.profiles[dpid] = switch_profiles.resolve(self.profile_entries, dpid, mfr_desc, hw_desc,
                                                                  sw_desc or "")
        self._spreading_changed(dpid, had)
        rate = profile.max_flow_mods_per_s
        if rate:
            self.pacing[dpid] = TokenBucket(rate, max(1.0, rate / 10), self.clock)
        else:
            self.pacing.pop(dpid, None)
        copy = self.flow_copy.described(dpid, mfr_desc, hw_desc, None if profile.flow_copy is None
                                        else profile.flow_copy == "learn")
        if copy is not self.flow_copy:
            self.flow_copy = copy
        if self.flow_copy.mode == "auto":
            LOG.info("switch %s (%s / %s): profile %s, new flows copied %s", dpid, mfr_desc, hw_desc, profile.name,
                     "once (Open vSwitch learn)" if copy.learns(dpid) else "with plain OpenFlow 1.3")
        idle = self.config["te"]["flow_idle_timeout_s"]
        if profile.min_idle_timeout_s > idle:
            return (f"switch {dpid}: its profile {profile.name} has idle timeouts of at least "
                    f"{profile.min_idle_timeout_s} s but te.flow_idle_timeout_s is {idle}: its counting rules may "
                    f"be refused; raise te.flow_idle_timeout_s or give it a profile in switches:")
        return flowcopy.unsupported(self.flow_copy, dpid, mfr_desc, hw_desc)

    def pace(self, dpid: int) -> float:
        """Seconds to wait before the next flow or group mod to ``dpid`` (0: send now, its budget taken)."""
        bucket = self.pacing.get(dpid)
        return 0.0 if bucket is None else bucket.take_or_wait()

    def barriers(self, dpid: int) -> bool:
        profile = self.profiles.get(dpid)
        return profile is None or profile.barriers

    def flows_read_back(self, dpid: int, flows: list[FlowRule]) -> None:
        self._read_back(dpid, self.readback.flows_read(dpid, flows))

    def groups_read_back(self, dpid: int, groups: list[GroupRule]) -> None:
        self._read_back(dpid, self.readback.groups_read(dpid, groups))

    def _read_back(self, dpid: int, rules: SwitchRules | None) -> None:
        if rules is not None and dpid in self.connected:
            self.installed[dpid] = rules
            self.belief.first_hand(dpid)
            self.belief.mark_stale(dpid)
            self.found_state = self.found_state or bool(rules.flows)
            for key, in_port in self.recovered.read(dpid, rules.flows.values()).items():
                if key not in self.accounting:
                    self.accounting.observe(key, dpid, in_port)
            self.recovered.read_groups(dpid, rules.groups.values())
            self.audit.checked(dpid)
            LOG.info("switch %s: %d mlroute rules and %d groups read back", dpid, len(rules.flows),
                     len(rules.groups))

    def readback_overdue(self) -> list[int]:
        """Switches that did not report their tables in time: the shell wipes mlroute's rules there."""
        late = [d for d in self.readback.overdue(self.clock()) if d in self.connected]
        for dpid in late:
            LOG.warning("switch %s did not report its tables in %.0f s: rebuilding its rules", dpid,
                        READBACK_TIMEOUT_S)
            self.installed[dpid] = SwitchRules()
            self.belief.first_hand(dpid)  # (wiped: nothing believed, nothing pending)
            self.belief.mark_stale(dpid)
        return late

    def table_features(self, dpid: int, max_entries: Mapping[int, int]) -> None:
        """The switch's table features: how many entries each table holds (where it answers)."""
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        caps.max_entries = {t: n for t, n in max_entries.items() if n > 0}
        self.metrics.table_capacity_of(dpid, caps.max_entries, TABLES_USED)

    def group_features(self, dpid: int, types: frozenset[str], max_groups: Mapping[str, int]) -> None:
        caps = self.capabilities.setdefault(dpid, SwitchCapabilities(dpid))
        had = self.selects(dpid)
        caps.group_types, caps.max_groups = types, dict(max_groups)
        LOG.info("switch %s: group types %s", dpid, ", ".join(sorted(types)) or "none")
        self._spreading_changed(dpid, had)

    def selects(self, dpid: int) -> bool:
        """Whether ECMP on ``dpid`` uses SELECT groups: its profile allows them and the switch has not said it
        lacks them (a switch that has not answered yet is taken at its profile's word)."""
        profile = self.profiles.get(dpid)
        caps = self.capabilities.get(dpid)
        return (profile is None or profile.groups == "select") and (caps is None or caps.select_groups() is not False)

    def group_free(self, switches: Iterable[int]) -> dict[int, int]:
        """Of ``switches``, those that spread without groups (group_free.py), with their tier level."""
        levels = self.tiers.levels if self.tiers is not None else {}
        return {d: levels.get(d, 0) for d in switches if not self.selects(d)}

    def _spreading_changed(self, dpid: int, had: bool) -> None:
        if self.selects(dpid) != had:
            LOG.info("switch %s: ECMP by %s", dpid, "SELECT groups" if not had else "plain entries (no groups)")
            self.belief.mark_stale(dpid)

    def table_stats(self, dpid: int, active: Mapping[int, int]) -> bool:
        """The switch's table stats (polled): its fill, and whether a table holds fewer entries than the
        controller's permanent rules there (a table wiped while connected: audit it now; True, the shell's
        resync loop comes round to start it)."""
        caps = self.capabilities.get(dpid)
        if caps is None or dpid not in self.connected:
            return False
        caps.active, caps.active_at = {t: n for t, n in active.items() if t in TABLES_USED}, self.clock()
        self.metrics.table_entries_of(dpid, caps.active)
        if dpid not in self.installed or self.readback.pending(dpid) or self.audit.out(dpid):
            return False
        short = table_short(caps.active, self._permanent_counts(dpid))
        if short:
            self.audit.urgent(dpid)
            if self._short_log.due(dpid):
                LOG.warning("switch %s: %s %s fewer entries than mlroute installed there: reading it back now",
                            dpid, "table" if len(short) == 1 else "tables", ", ".join(map(str, short)) +
                            (" holds" if len(short) == 1 else " hold"))
        return bool(short)

    def _permanent_counts(self, dpid: int) -> dict[int, int]:
        """Per table, the believed rules without an idle timeout (a counting rule may have just timed out).
        Recounted when the switch's rule count changed or every AUDIT_RECOUNT_S: a k=24 switch holds thousands."""
        flows = self.installed[dpid].flows
        now = self.clock()
        cached = self._static_counts.get(dpid)
        if cached is None or cached[0] != len(flows) or now - cached[1] > AUDIT_RECOUNT_S:
            counts: dict[int, int] = {}
            for rule in flows.values():
                if not rule.idle_timeout:
                    counts[rule.table] = counts.get(rule.table, 0) + 1
            cached = self._static_counts[dpid] = (len(flows), now, counts)
        return cached[2]

    def table_limits(self) -> dict[int, dict[int, int]]:
        """dpid -> table -> entries mlroute may hold there, for the tables with a known small capacity: what
        the switch's table features say, lowered to what it held when it answered TABLE_FULL."""
        limits = {}
        for dpid in self.connected:
            small = self._limits_of(dpid)
            if small:
                limits[dpid] = small
        return limits

    def _limits_of(self, dpid: int) -> dict[int, int]:
        caps = self.capabilities.get(dpid)
        capacity = dict(caps.max_entries) if caps is not None else {}
        profile = self.profiles.get(dpid)
        for table, n in profile.table_capacity.items() if profile is not None else ():
            capacity[table] = min(n, capacity.get(table, n))
        for table, (held, _) in self.belief.full.get(dpid, {}).items():
            capacity[table] = min(held, capacity.get(table, held))
        return {t: table_budget.limit(n) for t, n in capacity.items()
                if t in TABLES_USED and n < table_budget.UNBOUNDED}

    def audits_due(self) -> list[int]:
        """Switches the shell reads back now (flow stats by cookie and group descriptions; answers go to
        ``audit_flows`` / ``audit_groups``). None for a switch still being read back; while recovering only the
        urgent ones (a switch wiped just after a restart: its missing rules are additions, which recovery
        sends; the periodic audits wait, the read-back at connect was one)."""
        self._barriers_overdue()
        sizes = {d: len(r.flows) + len(r.groups) for d, r in self.installed.items()
                 if d in self.connected and not self.readback.pending(d) and not self.belief.audit_waiting(d)}
        started = self.audit.due(sizes, urgent_only=self.recovering())
        for dpid in started:  # what it reports reflects every change sent so far
            self.belief.audit_asked(dpid)
        self.metrics.audits.inc(len(started))
        return started

    def _barriers_overdue(self) -> None:
        """Switches that left a barrier unanswered BARRIER_ANSWER_S: the changes before it stay unconfirmed (not
        installed, not sent again) and the switch is read back now (an urgent audit), counted and logged."""
        for dpid in self.belief.overdue(self.clock(), BARRIER_ANSWER_S):
            if dpid not in self.connected:
                continue
            self.metrics.barrier_timeouts.inc()
            self.audit.urgent(dpid)
            if self._refusal_log.due((dpid, "barrier")):
                LOG.warning("switch %s did not answer a barrier in %.0f s: %d rule changes unconfirmed, reading its "
                            "tables back", dpid, BARRIER_ANSWER_S, len(self.belief.pending(dpid)))

    def barrier_sent(self, dpid: int, xid: int) -> bool:
        """The shell sent barrier ``xid`` to ``dpid`` after its changes so far; False: it confirms nothing."""
        return self.belief.fence(dpid, xid, self.clock())

    def barrier_answered(self, dpid: int, xid: int) -> None:
        """``dpid`` answered barrier ``xid``: the changes sent before it are installed (errors came first)."""
        self.belief.answered(dpid, xid)

    def sync_sent(self, started: int) -> None:
        """The shell sent every change of the sync numbered ``started`` (``syncs_started`` when it began)."""
        self.synced = max(self.synced, started)

    def sent_since(self, sync_round: int, resync_owed: bool) -> dict[int, int] | None:
        """Once everything desired when ``sync_round`` syncs had started has been sent (a later sync sent in full,
        or nothing changed since, ``resync_owed`` false and no switch stale, and no sync is under way): the
        belief's marks to confirm. None before."""
        if self.synced > sync_round or (not resync_owed and not self.belief.any_stale
                                        and self.synced == self.syncs_started):
            return self.belief.marks()
        return None

    def confirmed_upto(self, marks: dict[int, int]) -> bool:
        """Every change sent before ``marks`` were taken is confirmed (or refused) by its switch."""
        return self.belief.confirmed_upto(marks)

    def barriers_due(self) -> list[int]:
        """Connected switches with changes sent after their last barrier: the shell sends each one."""
        return [d for d in self.belief.unfenced() if d in self.connected]

    def audit_flows(self, dpid: int, flows: list[FlowRule]) -> bool:
        """An audit's flow read-back; True once the audit is whole (judged by the next resync)."""
        return self._audit_read(dpid, self.audit.flows_read(dpid, flows))

    def audit_groups(self, dpid: int, groups: list[GroupRule]) -> bool:
        return self._audit_read(dpid, self.audit.groups_read(dpid, groups))

    def _audit_read(self, dpid: int, held: SwitchRules | None) -> bool:
        if held is None or dpid not in self.installed:
            return False
        self.belief.audit_answered(dpid, held)  # judged at the start of the next sync, every believed change sent
        return True

    def change_sent(self, dpid: int, change: Change) -> None:
        """The shell sent a rule change: pending until the switch answers a barrier sent after it (``barriers_due``),
        and an audit out for that switch does not judge that rule. A group (re)added frees the flows refused for
        want of it (BAD_OUT_GROUP)."""
        self.belief.sent(dpid, change, confirmed=not self.barriers(dpid))
        if self.audit.any_out:
            self.audit.touched(dpid, _rule_id(change.rule))
        if isinstance(change.rule, GroupRule) and change.op != "delete":
            self._release_waiting_for(dpid, change.rule.group_id)

    def _group_gone(self, dpid: int, rule: FlowRule) -> None:
        """A flow refused for want of a group mlroute believes installed: the switch lost it (``del-groups``, a
        flush). The belief drops it, so the next sync sends it again (a switch that has it after all answers
        GROUP_EXISTS, and a modify follows), and the switch is read back now for whatever else went with it."""
        held = self.installed.get(dpid)
        if held is None:
            return
        gone = [action[1] for action in rule.actions if action[0] == "group" and action[1] in held.groups]
        for gid in gone:
            del held.groups[gid]
        if gone:
            self.belief.mark_stale(dpid)
            self.audit.urgent(dpid)

    def _release_waiting_for(self, dpid: int, group_id: int) -> None:
        """Flows ``dpid`` refused because group ``group_id`` was missing are sent again after it, not held
        REFUSED_HOLD_S: the group was gone, the switch can take them. Live: an edge switch's flows and groups
        wiped one after the other; the read-back between the two re-added flows toward a group deleted a moment
        later, and its hosts' upward traffic stayed cut off for the 30-s hold."""
        if not self.belief.refusals:  # (called for every group sent: a first install sends thousands, none refused)
            return
        if self.belief.release_waiting_for_group(dpid, group_id, self.clock(), REFUSED_HOLD_S):
            self.belief.mark_stale(dpid)  # diffed in full at the next sync, after the group's step
            self.metrics.rules_refused.set(len(self.belief.refusals))

    def _judge_audits(self) -> None:
        """Audits answered since the last sync: where the switch holds other than believed, the belief takes
        what it holds and the switch is diffed in full (missing rules re-added, extra ones deleted)."""
        for dpid, held, asked_after in self.belief.take_audited():
            belief = self.installed.get(dpid)
            if belief is None or dpid not in self.connected:
                self.audit.forget(dpid)
                continue
            self.belief.first_hand(dpid, asked_after)  # what it reported is the belief now
            refused = self.belief.refused_ids(dpid)
            findings = self.audit.finish(dpid, belief, held)
            findings.missing = [r for r in findings.missing if _rule_id(r) not in refused]
            if not findings:
                continue
            findings.apply(belief)
            self.belief.mark_stale(dpid)
            self._static_counts.pop(dpid, None)
            for kind, n in findings.counts().items():
                if n:
                    self.metrics.audit_findings.labels(kind).inc(n)
            LOG.warning("switch %s: audit found its tables differ from what mlroute installed (%s): repairing",
                        dpid, ", ".join(f"{n} {kind}" for kind, n in findings.counts().items() if n))

    def _release_refused(self) -> None:
        """Refused changes whose hold is over are tried again, and so are those the table budget held back:
        their switches are diffed in full."""
        now = self.clock()
        for tables in self.belief.full.values():  # a table that said TABLE_FULL: its room is tried again
            for table in [t for t, (_, when) in tables.items() if now - when >= REFUSED_HOLD_S]:
                del tables[table]
        again = set(self.belief.over_budget) | self.belief.release_refusals(now, REFUSED_HOLD_S)
        if again:
            self.belief.mark_stale(*again)
        self.metrics.rules_refused.set(len(self.belief.refusals))

    def _without_refused(self, steps: list[Step]) -> list[Step]:
        """``steps`` less the changes switches refused lately (held back: a full table stays full)."""
        out = []
        for step in steps:
            kept = [(d, c) for d, c in step.changes if (d, _rule_id(c.rule)) not in self.belief.refusals]
            if kept:
                out.append(Step(step.phase, kept))
        return out

    def _within_budget(self, steps: list[Step], ready: list[int]) -> list[Step]:
        """``steps`` less the additions the switches' tables have no room for (table_budget.py), which are
        held back: not believed installed, counted, tried again every poll."""
        limits = self.table_limits()
        self._small = bool(limits)
        over_budget = self.belief.over_budget
        for dpid in ready:
            over_budget.pop(dpid, None)
        if limits:
            steps, held = table_budget.admit(steps, self.installed, limits)
            for dpid, change in held:
                over_budget.setdefault(dpid, {})[_rule_id(change.rule)] = change
        self.metrics.rules_over_budget.set(sum(len(h) for h in over_budget.values()))
        return steps


def _undone(change: Change) -> Change:
    """What undoes a refused change in the belief: a refused add or modify is not held, a refused delete is."""
    return Change("add" if change.op == "delete" else "delete", change.rule)


def _rule_id(rule: FlowRule | GroupRule) -> tuple[str, Any]:
    """What names a rule on its switch: a flow's table, priority and match, or a group's id."""
    return ("group", rule.key) if isinstance(rule, GroupRule) else ("flow", rule.key)
