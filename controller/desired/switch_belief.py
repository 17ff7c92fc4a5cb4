"""What the controller believes each switch holds, and how much of it the switch has confirmed.

A rule change is *pending* from the moment a sync plans it (sent right after, paced) until a barrier sent after it
is answered: OpenFlow has the switch answer a barrier only once it has processed (or refused, with an error
naming the change's xid) every message before it. The belief's ``held`` rules include pending changes, so the
planner never sends them twice; the *confirmed* counts leave them out, so what REST and ``/metrics`` call
installed is what the switch has said it holds. A barrier that is not answered in time leaves its changes
pending (neither confirmed nor sent again) and names the switch to be read back; a read-back (at connect, or an
audit) replaces second-hand belief by what the switch reports and confirms every change sent before it was
asked.

A switch whose profile has no barriers confirms at send: nothing else could.

What is held back from a switch is recorded here too: a change it refused (an error naming it), not sent again
for a hold (a full table stays full), the additions its table budget has no room for and the tables that said
they are full; which switches hold something the last plan did not put there (stale: diffed whole next); an
audit's answer until the next sync judges it; and the counting rules a wipe deleted, being put back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.desired.rules import Change, FlowRule, SwitchRules

RuleId = tuple[str, Any]  # ("flow", key) or ("group", id): what names a rule on its switch


@dataclass
class _Journal:
    """One switch's unconfirmed changes, in the order sent, and the barriers out behind them."""

    seq: int = 0  # changes sent to this switch so far (the next one's number is seq + 1)
    pending: list[tuple[int, Change]] = field(default_factory=list)  # (seq, change), oldest first
    planned: dict[int, Change] = field(default_factory=dict)  # id -> a change believed (planned), not yet sent
    fences: dict[int, tuple[int, float]] = field(default_factory=dict)  # barrier xid -> (seq it covers, sent at)


class SwitchBelief:
    """Per switch: the rules believed held (``held``, pending changes included) and the changes not yet
    confirmed. The one owner of that state: every correction (an error, a read-back, an audit, a wipe) is a call
    here or on ``held``'s rules."""

    def __init__(self) -> None:
        self.held: dict[int, SwitchRules] = {}  # dpid -> rules as sent (or read back), less refused ones
        self._journals: dict[int, _Journal] = defaultdict(_Journal)
        self.timeouts = 0  # barriers not answered in time, ever
        # (dpid, rule id) -> (when, "KIND/CODE", the change): refused by the switch, held back for a while
        self.refusals: dict[tuple[int, RuleId], tuple[float, str, Change]] = {}
        self._released_early: dict[tuple[int, RuleId], float] = {}  # refused for want of a group, freed by its re-add
        self.over_budget: dict[int, dict[RuleId, Change]] = {}  # dpid -> additions its tables have no room for
        # dpid -> table -> (entries it held when it answered TABLE_FULL, when): that table's capacity for a while
        self.full: dict[int, dict[int, tuple[int, float]]] = {}
        self._stale: set[int] = set()  # switches whose held rules changed outside a sync (see :meth:`mark_stale`)
        self._audits: dict[int, int] = {}  # dpid -> its last change sent when its audit was asked for
        self._audited: dict[int, SwitchRules] = {}  # dpid -> what its audit read back, judged at the next sync
        # dpid -> flow -> when a wipe deleted its counting rule: being put back, not ended by a poll that misses it
        self._restoring: dict[int, dict[Any, float]] = {}

    # -- what was sent and what the switch answered --------------------------------------------------------------
    def planned(self, dpid: int, changes: list[Change]) -> None:
        """``changes`` are in ``held`` already, planned by a sync and sent after it (paced, step by step): until
        each is sent and confirmed, it counts as unconfirmed."""
        journal = self._journals[dpid]
        for change in changes:
            journal.planned[id(change)] = change

    def sent(self, dpid: int, change: Change, confirmed: bool = False) -> None:
        """A change was sent to ``dpid``; ``confirmed``: the switch has no barriers, it counts at once."""
        journal = self._journals[dpid]
        journal.planned.pop(id(change), None)
        journal.seq += 1
        if not confirmed:
            journal.pending.append((journal.seq, change))

    def fence(self, dpid: int, xid: int, now: float) -> bool:
        """A barrier (``xid``) was sent to ``dpid`` after its changes so far; False if none was pending (the
        barrier confirms nothing, it need not be remembered)."""
        journal = self._journals.get(dpid)
        if journal is None or not journal.pending:
            return False
        journal.fences[xid] = (journal.seq, now)
        return True

    def unfenced(self) -> list[int]:
        """Switches with changes sent after their last barrier (a barrier is due)."""
        return sorted(d for d, j in self._journals.items()
                      if j.pending and j.pending[-1][0] > max((s for s, _ in j.fences.values()), default=0))

    def answered(self, dpid: int, xid: int) -> int:
        """The switch answered barrier ``xid``: every change sent before it is confirmed (or was refused, by an
        error that came first). Returns how many were confirmed."""
        journal = self._journals.get(dpid)
        fence = journal.fences.pop(xid, None) if journal is not None else None
        if journal is None or fence is None:
            return 0
        upto = fence[0]
        for earlier in [x for x, (s, _) in journal.fences.items() if s <= upto]:
            del journal.fences[earlier]
        return self._confirm(journal, upto)

    def refused(self, dpid: int, change: Change) -> None:
        """The switch refused ``change`` (an error naming its xid): it is no longer pending."""
        journal = self._journals.get(dpid)
        if journal is None:
            return
        for i, (_, pending) in enumerate(journal.pending):
            if pending is change or pending == change:
                del journal.pending[i]
                return

    def overdue(self, now: float, timeout_s: float) -> list[int]:
        """Switches with a barrier older than ``timeout_s`` unanswered: that barrier is given up (its changes stay
        pending until a read-back tells) and the switch is named once per barrier."""
        late = []
        for dpid, journal in self._journals.items():
            old = [x for x, (_, at) in journal.fences.items() if now - at >= timeout_s]
            for xid in old:
                del journal.fences[xid]
            if old:
                late.append(dpid)
                self.timeouts += len(old)
        return sorted(late)

    def mark(self, dpid: int) -> int:
        """The number of the last change sent to ``dpid`` (a read-back asked for now reflects up to it)."""
        journal = self._journals.get(dpid)
        return 0 if journal is None else journal.seq

    def first_hand(self, dpid: int, upto: int | None = None) -> None:
        """The switch's tables were read (asked for after change ``upto``; None: after every change): what it
        reported is now the belief, so the changes sent before are no longer pending."""
        journal = self._journals.get(dpid)
        if journal is not None:
            self._confirm(journal, journal.seq if upto is None else upto)

    def forget(self, dpid: int) -> None:
        """The switch's connection is gone (or new): nothing is believed of it until it is read back."""
        self.held.pop(dpid, None)
        self._journals.pop(dpid, None)

    @staticmethod
    def _confirm(journal: _Journal, upto: int) -> int:
        keep = [(s, c) for s, c in journal.pending if s > upto]
        confirmed = len(journal.pending) - len(keep)
        journal.pending = keep
        return confirmed

    # -- changed outside a sync -------------------------------------------------------------------------------------
    def mark_stale(self, *dpids: int) -> None:
        """What these switches hold changed outside a sync (read back, audited, a wipe, a group lost, held-back
        changes released, their way of spreading changed): the next sync diffs them whole, not only where the
        plan changed."""
        self._stale.update(dpids)

    @property
    def any_stale(self) -> bool:
        return bool(self._stale)

    def take_stale(self) -> set[int]:
        """The stale switches, for the sync that diffs them whole now; none after."""
        stale, self._stale = self._stale, set()
        return stale

    # -- audits: what a switch reported, judged against the belief at the next sync ---------------------------------
    def audit_asked(self, dpid: int) -> None:
        """An audit of ``dpid`` was asked for now: what it reports reflects every change sent so far."""
        self._audits[dpid] = self.mark(dpid)

    def audit_answered(self, dpid: int, reported: SwitchRules) -> None:
        self._audited[dpid] = reported

    def audit_waiting(self, dpid: int) -> bool:
        """An audit's answer not judged yet."""
        return dpid in self._audited

    def take_audited(self) -> list[tuple[int, SwitchRules, int]]:
        """Audits answered since the last sync: (dpid, what it reported, the last change sent when asked)."""
        audited, self._audited = self._audited, {}
        return [(dpid, reported, self._audits.pop(dpid, 0)) for dpid, reported in audited.items()]

    def forget_audit(self, dpid: int) -> None:
        self._audited.pop(dpid, None)
        self._audits.pop(dpid, None)

    # -- counting rules a wipe deleted, being put back ----------------------------------------------------------------
    def restoring(self, dpid: int, key: Any, since: float) -> None:
        """A wipe deleted ``key``'s counting rule at ``dpid``: put back by the next sync; until then (or
        ``restore_s``) a poll that misses it does not end its flow (:meth:`still_restoring`)."""
        self._restoring.setdefault(dpid, {})[key] = since

    def restores(self, dpid: int) -> bool:
        return dpid in self._restoring

    def still_restoring(self, dpid: int, done: Callable[[Any], bool], now: float, restore_s: float) -> set:
        """The flows of ``dpid`` still being put back: a key leaves once ``done(key)`` (its rule polled again,
        its flow gone) or ``restore_s`` passed; a switch with none left leaves too (cheap for the others)."""
        restoring = self._restoring.get(dpid)
        if restoring is None:
            return set()
        for key in [k for k, since in restoring.items() if done(k) or now - since > restore_s]:
            del restoring[key]
        if not restoring:
            del self._restoring[dpid]
        return set(restoring)

    # -- held back: refused by the switch, or over its table budget ------------------------------------------------
    def refusal(self, dpid: int, rule_id: RuleId, at: float, why: str, change: Change) -> None:
        """``dpid`` refused ``change`` (``why``: the error's "KIND/CODE"): held back until :meth:`release_refusals`
        frees it."""
        self.refusals[(dpid, rule_id)] = (at, why, change)

    def refused_ids(self, dpid: int) -> set[RuleId]:
        return {rid for (d, rid) in self.refusals if d == dpid}

    def release_refusals(self, now: float, hold_s: float) -> set[int]:
        """Refusals older than ``hold_s`` end (their changes may be planned again); the switches they were of."""
        over = [k for k, (t, _, _) in self.refusals.items() if now - t >= hold_s]
        for key in over:
            del self.refusals[key]
        return {dpid for dpid, _ in over}

    def release_waiting_for_group(self, dpid: int, group_id: int, now: float, hold_s: float) -> bool:
        """Group ``group_id`` was sent to ``dpid``: the flows it refused for want of that group end their hold at
        once (once per hold: a switch that refuses one all the same waits the hold out, no resend loop). True
        when any did."""
        self._released_early = {k: t for k, t in self._released_early.items() if now - t < hold_s}
        waiting = [key for key, (_, why, change) in self.refusals.items()
                   if key[0] == dpid and why == "BAD_ACTION/BAD_OUT_GROUP" and isinstance(change.rule, FlowRule)
                   and ("group", group_id) in change.rule.actions and key not in self._released_early]
        for key in waiting:
            del self.refusals[key]
            self._released_early[key] = now
        return bool(waiting)

    def forget_refusals(self, dpid: int) -> None:
        """``dpid``'s tables are to be read back: what they refused before tells nothing of them now."""
        self.refusals = {k: v for k, v in self.refusals.items() if k[0] != dpid}

    def withheld(self) -> list[tuple[int, Change]]:
        """Every change held back from its switch, refused or over budget: (dpid, change)."""
        return [(dpid, change) for (dpid, _), (_, _, change) in self.refusals.items()] + \
            [(dpid, change) for dpid, held in self.over_budget.items() for change in held.values()]

    # -- views ---------------------------------------------------------------------------------------------------
    def pending(self, dpid: int) -> list[Change]:
        """``dpid``'s unconfirmed changes in the order they reach it: sent, then planned and not yet sent."""
        journal = self._journals.get(dpid)
        return [] if journal is None else [c for _, c in journal.pending] + list(journal.planned.values())

    def pending_total(self) -> int:
        return sum(len(j.pending) + len(j.planned) for j in self._journals.values())

    def marks(self) -> dict[int, int]:
        """Per switch, the number of the last change sent to it: what :meth:`confirmed_upto` waits for."""
        return {d: j.seq for d, j in self._journals.items()}

    def confirmed_upto(self, marks: dict[int, int]) -> bool:
        """Every change sent before ``marks`` was taken is confirmed or refused (a switch gone or connected anew
        since, its journal dropped or restarted below its mark, has nothing left to confirm of them)."""
        for dpid, upto in marks.items():
            journal = self._journals.get(dpid)
            if journal is not None and journal.seq >= upto and journal.pending and journal.pending[0][0] <= upto:
                return False
        return True

    def _unconfirmed_presence(self, dpid: int) -> dict[tuple, tuple[bool, int | None]]:
        """Per rule a pending change touches: (present on the switch as last confirmed, its table or None for a
        group), from the first pending change of each (an add is sent for what was not held, a modify or a delete
        for what was)."""
        first: dict[tuple, tuple[bool, int | None]] = {}
        for change in self.pending(dpid):
            rule = change.rule
            ident = ("flow" if isinstance(rule, FlowRule) else "group", rule.key)
            if ident not in first:
                first[ident] = (change.op != "add", rule.table if isinstance(rule, FlowRule) else None)
        return first

    def confirmed_table_counts(self, dpid: int) -> dict[int, int]:
        """Flow entries per table the switch has confirmed: those held, each rule a pending change touches counted
        as it was before that change."""
        counts: dict[int, int] = defaultdict(int)
        held = self.held.get(dpid)
        flows = held.flows if held is not None else {}
        for rule in flows.values():
            counts[rule.table] += 1
        for (kind, key), (present, table) in self._unconfirmed_presence(dpid).items():
            if kind == "flow" and table is not None and present != (key in flows):
                counts[table] += 1 if present else -1
        return {t: n for t, n in counts.items() if n > 0}

    def confirmed_groups(self, dpid: int) -> int:
        held = self.held.get(dpid)
        groups = held.groups if held is not None else {}
        n = len(groups)
        for (kind, key), (present, _) in self._unconfirmed_presence(dpid).items():
            if kind == "group" and present != (key in groups):
                n += 1 if present else -1
        return n

    def confirmed_flows_of(self, dpid: int) -> int:
        """Flow entries ``dpid`` has confirmed: its held ones, each a pending change touches counted as it was
        before it (the work is its pending changes, not its tables: a barrier reply costs what it confirms)."""
        held = self.held.get(dpid)
        flows = held.flows if held is not None else {}
        return len(flows) + sum((1 if present else -1) for (kind, key), (present, _)
                                in self._unconfirmed_presence(dpid).items()
                                if kind == "flow" and present != (key in flows))

    def confirmed_flows(self) -> int:
        """Flow entries every switch has confirmed, in all (``mlroute_rules_installed``, counted at a scrape)."""
        return sum(self.confirmed_flows_of(d) if self._unconfirmed(d) else len(r.flows) for d, r in self.held.items())

    def _unconfirmed(self, dpid: int) -> bool:
        journal = self._journals.get(dpid)
        return journal is not None and bool(journal.pending or journal.planned)
