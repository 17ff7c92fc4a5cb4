"""Flow statistics -> per-transport-flow rates -> persistent elephants, with pattern memory.

Rates come from the switch-reported byte counts and rule durations, never from the controller's wall clock
(polls arrive late on a busy machine; the switch knows how long its rule lived). A flow becomes an elephant
after ``polls_needed`` consecutive polls at or above the threshold. An elephant that goes quiet (a training
job's compute phase) stays known, idle, for ``memory_s`` so its route is still in place when it comes back --
but only while its counting rule exists: a flow whose rule was removed (idle timeout, flow-removed) or whose
job ended (``job_ended``) stops counting at once, so finished flows never hold routes against new ones.
Everything here is plain data: the southbound wing (``southbound/ofstats.py``, ``ofmsg.py``) parses OpenFlow
replies into ``FlowSample`` values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from controller.state.flowkey import PROTO_TCP, PROTO_UDP, FlowKey, key_from_fields  # noqa: F401  (re-exported)

LOG = logging.getLogger("mlroute.monitor")


@dataclass(frozen=True)
class FlowSample:
    key: FlowKey
    dpid: int
    byte_count: int
    duration_s: float


class MalformedStatsError(ValueError):
    """A stats entry that cannot be turned into a sample (missing field, wrong type, negative counter)."""


def sample_from_stat(dpid: int, fields: Mapping[str, Any], byte_count: int, duration_sec: int,
                     duration_nsec: int) -> FlowSample:
    """A FlowSample from one flow-stats entry's match fields and counters; MalformedStatsError if it is not one."""
    try:
        key = key_from_fields(fields)
        byte_count, duration = int(byte_count), int(duration_sec) + int(duration_nsec) / 1e9
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedStatsError(f"switch {dpid}: flow-stats entry without a usable 5-tuple/counters: {exc!r}") \
            from None
    if byte_count < 0 or duration < 0:
        raise MalformedStatsError(f"switch {dpid}: negative counter in flow-stats entry for {key}")
    return FlowSample(key, dpid, byte_count, duration)


class StatsAssembler:
    """Reassembles multipart flow-stats replies (OFPMPF_REPLY_MORE) per switch and request."""

    def __init__(self) -> None:
        self._parts: dict[tuple[int, int], list[Any]] = {}  # (dpid, xid) -> list of entries

    def feed(self, dpid: int, xid: int, entries: Iterable[Any], more: bool) -> list[Any] | None:
        """Add one reply part; returns the complete entry list when the last part arrives, else None."""
        parts = self._parts.setdefault((dpid, xid), [])
        parts.extend(entries)
        if more:
            return None
        return self._parts.pop((dpid, xid))

    def forget(self, dpid: int) -> None:
        """Drop half-assembled replies of a switch that went away."""
        self._parts = {k: v for k, v in self._parts.items() if k[0] != dpid}


@dataclass
class FlowState:
    key: FlowKey
    dpid: int
    bytes: int
    duration_s: float
    rate_bps: float = 0.0
    streak: int = 0  # consecutive polls at or above the threshold
    elephant: bool = False
    last_active: float = 0.0  # controller time of the last poll above the threshold
    demand_bps: float = 0.0
    sampled: bool = False  # its rates come from sFlow samples (``sampled``), not from flow statistics
    # ``key.sort_key()``, once: every decision sorts its elephants by it (10k calls cost the event loop ~4 ms)
    order: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.order = self.key.sort_key()


@dataclass
class MonitorConfig:
    threshold_bps: float
    polls_needed: int = 2
    memory_s: float = 30.0


@dataclass
class FlowMonitor:
    config: MonitorConfig
    flows: dict[FlowKey, FlowState] = field(default_factory=dict)  # added by ``update`` and ``seed_elephant``
    # dpid -> keys of the flows counted there, so a reply touches its own switch's flows only (scanning every
    # flow per reply made a 100k-entry poll of 64 switches quadratic); removals elsewhere are caught up lazily
    _by_switch: dict[int, set[FlowKey]] = field(default_factory=dict, init=False, repr=False, compare=False)
    # dpid -> sampled elephants handed to its flow statistics (te.detection: auto), until a poll first shows them:
    # a poll sent before their counting rule went in does not end them
    _handed: dict[int, set[FlowKey]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def update(self, dpid: int, samples: Iterable[FlowSample], now: float, keep: Set[FlowKey] = frozenset()) -> None:
        """Fold in one complete poll of switch ``dpid``. Flows of that switch missing from it count as silent,
        except those in ``keep`` (their rule is being put back after a wipe: not silent, just not counted now)."""
        seen: set[FlowKey] = set()
        for s in samples:
            if s.key in seen:
                continue
            seen.add(s.key)
            st = self.flows.get(s.key)
            if st is not None and st.sampled:
                continue  # sFlow feeds it (te.detection: both; a pinned elephant's entry is counted too)
            if st is None or st.dpid != dpid or s.duration_s < st.duration_s or s.byte_count < st.bytes:
                # new rule (or re-created after expiry): average over its lifetime so far
                rate = 8 * s.byte_count / s.duration_s if s.duration_s > 0 else 0.0
                if st is None or st.dpid != dpid:
                    st = FlowState(s.key, dpid, s.byte_count, s.duration_s)
                    self.flows[s.key] = st
                    self._by_switch.setdefault(dpid, set()).add(s.key)
            else:
                dt = s.duration_s - st.duration_s
                if dt <= 0:
                    continue  # same snapshot again: nothing to learn
                rate = 8 * (s.byte_count - st.bytes) / dt
            st.bytes, st.duration_s, st.rate_bps = s.byte_count, s.duration_s, rate
            self._judge(st, now)
        keys = self._by_switch.get(dpid, set())
        if dpid in self._handed:
            self._take_handed(dpid, seen, keys)
        self._end_missing(dpid, keys, seen, keep)

    def _end_missing(self, dpid: int, keys: set[FlowKey], seen: Set[FlowKey], keep: Set[FlowKey]) -> None:
        """Flows counted at ``dpid`` (``keys``) its poll did not show (``seen``) and not kept: ended."""
        for key in [k for k in keys if k not in seen and k not in keep]:
            st = self.flows.get(key)
            if st is None or st.dpid != dpid:  # forgotten, or now counted on another switch
                keys.discard(key)
                continue
            # its counting rule is gone (idle timeout, removed): the flow has ended and stops counting now,
            # even if the flow-removed message was lost; a flow that comes back gets a new rule and is re-learnt
            if st.elephant:
                LOG.info("elephant %s ended (counting rule gone)", key)
            del self.flows[key]
            keys.discard(key)

    def sampled(self, rates: Mapping[FlowKey, tuple[int, float, bool | None]], now: float) -> None:
        """Fold in one completed sFlow window: ``rates`` maps each sampled flow to (ingress dpid, bit/s over its
        last ``polls_needed`` windows, whether that is above the threshold by its estimate's standard error; None
        while it was tracked for fewer windows or sampled in one only). That estimate already spans the windows an
        elephant must last, so one such judgement makes an elephant. A flow that flow statistics count already
        is left to them; a sampled flow no longer in ``rates`` (the estimator forgot it: no sample for its idle
        windows) counts as silent, and leaves unless it is an elephant (pattern memory keeps those until ``expire``)."""
        for key, (dpid, bps, above) in rates.items():
            st = self.flows.get(key)
            if st is None:
                st = self.flows[key] = FlowState(key, dpid, 0, 0.0, sampled=True)
            elif not st.sampled:
                continue
            st.dpid, st.rate_bps = dpid, bps
            if above:
                st.streak += 1
                st.last_active = now
                if not st.elephant:
                    st.elephant = True
                    LOG.info("elephant %s (%.2f Mb/s, sampled)", st.key, st.rate_bps / 1e6)
            else:
                st.streak = 0
        for key in [k for k, st in self.flows.items() if st.sampled and k not in rates]:
            st = self.flows[key]
            st.rate_bps = 0.0
            self._judge(st, now)
            if not st.elephant:
                del self.flows[key]

    def _take_handed(self, dpid: int, seen: set[FlowKey], keys: set[FlowKey]) -> None:
        """Handed elephants a poll of ``dpid`` shows are its flows from now on; those forgotten meanwhile leave."""
        handed = self._handed[dpid]
        for key in list(handed):
            st = self.flows.get(key)
            if st is None or st.dpid != dpid or st.sampled:
                handed.discard(key)
            elif key in seen:
                keys.add(key)
                self._by_switch[dpid] = keys
                handed.discard(key)
        if not handed:
            del self._handed[dpid]

    def hand_to_samples(self, dpid: int) -> list[FlowKey]:
        """``dpid`` moved to sFlow (te.detection: auto): the flows its polls counted are fed by samples from the
        next window on, each keeping its state (an elephant stays one), none fed by both; returns their keys."""
        self._handed.pop(dpid, None)
        moved = []
        for key in self._by_switch.pop(dpid, set()):
            st = self.flows.get(key)
            if st is not None and st.dpid == dpid and not st.sampled:
                st.sampled = True
                moved.append(key)
        return moved

    def hand_to_stats(self, dpid: int) -> list[FlowKey]:
        """``dpid`` moved back to flow stats: its sampled elephants are counted by its polls from the first one
        that shows their rule (their rate from that rule's lifetime), the other sampled flows there are forgotten
        (their next packet is a new flow); returns the elephants' keys."""
        kept = []
        for key, st in list(self.flows.items()):
            if not st.sampled or st.dpid != dpid:
                continue
            if not st.elephant:
                del self.flows[key]
                continue
            st.sampled, st.bytes, st.duration_s, st.streak = False, 0, 0.0, 0
            self._handed.setdefault(dpid, set()).add(key)
            kept.append(key)
        return kept

    def _judge(self, st: FlowState, now: float) -> None:
        if st.rate_bps >= self.config.threshold_bps:
            st.streak += 1
            st.last_active = now
            if st.streak >= self.config.polls_needed and not st.elephant:
                st.elephant = True
                LOG.info("elephant %s (%.2f Mb/s)", st.key, st.rate_bps / 1e6)
        else:
            st.streak = 0

    def seed_elephant(self, key: FlowKey, dpid: int, now: float) -> None:
        """An elephant known before its first poll (a cluster takeover: the old leader pinned it, the switch's
        tables say so); its first poll reads its rate over its counting rule's lifetime."""
        st = self.flows.get(key)
        if st is None:
            st = self.flows[key] = FlowState(key, dpid, 0, 0.0)
            self._by_switch.setdefault(dpid, set()).add(key)
        st.elephant, st.streak, st.last_active = True, max(st.streak, self.config.polls_needed), now

    def forget(self, key: FlowKey) -> bool:
        """The flow ended (its counting rule was removed): it stops counting toward routing at once.
        Returns whether it was known."""
        st = self.flows.pop(key, None)
        if st is not None and st.elephant:
            LOG.info("elephant %s ended (counting rule removed)", key)
        return st is not None

    def job_ended(self, hosts: Iterable[str]) -> list[FlowKey]:
        """A job ended (undeclared, or its last iteration): its flows (those sent by ``hosts``) stop counting,
        idle or not, so pattern memory keeps only flows of jobs still running. Returns the keys forgotten."""
        hosts = set(hosts)
        gone = [k for k in self.flows if k.src_ip in hosts]
        for k in gone:
            self.forget(k)
        return gone

    def expire(self, now: float) -> list[FlowKey]:
        """Forget elephants idle for longer than the pattern memory; returns the keys forgotten."""
        gone = [k for k, st in self.flows.items() if st.elephant and st.streak == 0
                and now - st.last_active > self.config.memory_s]
        for k in gone:
            LOG.info("elephant %s ended (idle %.0f s)", k, now - self.flows[k].last_active)
            del self.flows[k]
        return gone

    def elephants(self) -> list[FlowState]:
        """Known elephants (active or idle within the pattern memory), in a stable order."""
        return sorted((st for st in self.flows.values() if st.elephant), key=attrgetter("order"))
