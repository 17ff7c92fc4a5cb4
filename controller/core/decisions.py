"""The core's traffic engineering: declared jobs in, the decision loop's step (the only caller of the optimiser's
worker), each decision's outcome recorded and handed to its callers, and the pins a restarted controller read back
restored. A mixin of ``controller.core.ControllerCore``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import networkx as nx

from controller.core.state import CoreState
from controller.decide import te
from controller.decide.optimiser_runner import DONE, LATE, Outcome
from controller.desired import sync
from controller.state import jobs as declared_jobs
from controller.state.flowkey import FlowKey
from controller.state.monitor import FlowState

LOG = logging.getLogger("mlroute")

WORKER_WAIT_WARN_S = 30.0  # decisions wanted this long with the optimiser worker not ready: a warning


class TrafficDecisions(CoreState):
    """Jobs, decisions and their outcomes, for the core."""

    def set_jobs(self, jobs: list[dict]) -> None:
        """Declared jobs replaced (REST): the flows of jobs no longer declared leave at once, and a decision
        follows at once (new jobs' sends are routed before their first packet)."""
        still = {ip for job in jobs for ip in job["hosts"]}
        self.monitor.job_ended({ip for job in self.jobs for ip in job["hosts"]} - still)
        self.jobs = list(jobs)
        self.incremental_next = True
        self.request_decision()

    def expire_jobs(self) -> list[str]:
        """Jobs whose lease ran out without a renew end as if deleted (a crashed job holds no routes): their
        flows leave, a decision follows at once. Returns their names. One controller's check; on a cluster the
        leader removes them from ZooKeeper instead (shell/cluster.py), and every core follows."""
        ended = self.leases.expired(self.jobs)
        if ended:
            self.set_jobs(self.leases.live(self.jobs))
            LOG.info("jobs ended: their lease ran out without a renew: %s", ", ".join(ended))
        return ended

    def decision_tick(self, waited: Outcome | None = None) -> te.TEResult | None:
        """The decision loop's step, and the only place that talks to the optimiser's worker: take the decision
        in flight if it ended (applied here; every request it answers gets its result), then start the next
        requested one on the current inputs. Without a worker the decision is made here and now. Returns the
        result of a decision that ended in this step, if any. Never blocks (``waited``: an outcome a caller's own
        blocking wait took from the worker, as tests.decision_steps.te_step's does)."""
        runner, ended = self.runner, None
        if runner is not None and self.decisions.inflight is None and runner.busy:
            # a decision this core did not start: its core was replaced mid-decision (a cluster node stepped
            # down and starts over with the same worker). Its answer is read and dropped; until then the worker
            # is busy, and before, nothing ever read it: the worker stayed busy and no decision started again
            runner.poll()
            if runner.busy:
                return None
        if self.decisions.inflight is not None and runner is not None:
            outcome = waited or runner.poll()
            if outcome is None and runner.busy:
                return None  # still deciding
            ended = self._decided(self._take(outcome))  # (no outcome and not busy: the worker was stopped)
            if ended.reason in te.SEARCH_NEXT:
                return ended  # its rules go out first: the search it asked for starts at the next tick
        if runner is not None and not runner.ready:
            self._waiting_for_worker()
            return ended  # warming up, or a fresh worker after a late decision: the requests wait
        self._worker_waited_since = None
        if self._recovered_pins_pending():
            return ended  # the requests wait (recovery ends within RECOVERY_MIN_S at most)
        if self.decisions.start() is None:
            return ended
        task, states = self._decision_inputs()
        if runner is None:
            try:
                decision = te.decide(task, self.te.clock)
            except Exception:
                self._decided(None)  # its callers are answered; the shell logs the error
                raise
            self.te.take(decision)
            self._demands_taken(states, decision.result)
            return self._decided(decision.result)
        # the decision's elephants ride along as its generation: the flows whose demands it estimates
        if not runner.submit(task, generation=states):
            return self._decided(None)  # the worker died: a fresh one for the next decision
        return ended

    def _waiting_for_worker(self) -> None:
        """Decisions wanted, the worker not ready: after WORKER_WAIT_WARN_S, a warning once a minute (a
        silent stall of every decision is otherwise invisible)."""
        if self.decisions.queued is None:
            return
        now = self.clock()
        if self._worker_waited_since is None:
            self._worker_waited_since = now
        waited = now - self._worker_waited_since
        if waited > WORKER_WAIT_WARN_S and self._short_log.due("optimiser worker"):
            LOG.warning("te: no decision for %.0f s: the optimiser worker is %s (pid %s)", waited,
                        "busy" if self.runner is not None and self.runner.busy else "not ready",
                        self.runner.worker_pid if self.runner is not None else None)

    def _decision_inputs(self) -> tuple[te.TEInput, list[FlowState]]:
        """What a decision starting now is taken on (over the pins in force), and its elephants' flows (in the
        order of its keys, which go on with the host pairs not yet seen as elephants)."""
        incremental, self.incremental_next = self.incremental_next, False
        self.monitor.expire(self.clock())
        elephants = self.monitor.elephants()
        pairs = declared_jobs.uncovered_pairs(self.jobs, [st.key for st in elephants])  # declared sends not seen yet
        # host pairs busy as a whole (sFlow), none of their 5-tuples an elephant
        pairs += [p for p in self.sampled_pairs(st.key for st in elephants) if p not in pairs]
        keys = [st.key for st in elephants] + pairs
        self._restore_pins([st.key for st in elephants])
        # the pin table itself, not a copy: a decision taken over replaces it (te.TrafficEngineer.take), and
        # nothing changes it in place while a decision is in flight (restored pins go in just above)
        self._started = (self.te.last.elephants if self.te.last else 0, len(elephants), self.te.pinned)
        self._decided_graph = self.live_graph()
        # the demands are estimated in the decision (in the worker, off the loop), from the elephants' hosts
        return self.te.input(self.fabric(), [(k, None) for k in keys], self.jobs_by_host(),
                             declared_jobs.weights(self.jobs), estimate=True, incremental=incremental), elephants

    def _decided(self, result: te.TEResult | None) -> te.TEResult:
        """The decision in flight ended (``result`` None: it failed or ran late, the routing in force stays):
        recorded, logged, and handed to every request it answers."""
        previous_count, elephants, _ = self._started
        if result is None:
            result = te.TEResult(False, elephants=elephants, reason="no decision (the optimiser failed or ran "
                                 "late): routing in force kept")
        self._record(result, elephants)
        self.metrics.te_decisions.inc()
        if self.decisions.inflight is not None:
            self.decisions.inflight.sync_round = self.syncs_started
        self.decisions.finish(result)
        if result.reason in te.SEARCH_NEXT:  # newcomers or broken pins placed beside the pins, unsearched: the search
            self.request_decision()  # follows now
        if result.applied or result.elephants != previous_count:
            b, a = result.before or {}, result.after or {}
            LOG.info("te: %d elephants, %s, %d moved; max link load %s -> %s, min rate %.2f -> %.2f Mb/s, "
                     "optimiser %.1f ms", result.elephants, result.reason, len(result.moved),
                     b.get("max_link_load"), a.get("max_link_load"), b.get("min_rate", 0) / 1e6,
                     a.get("min_rate", 0) / 1e6, 1e3 * result.runtime_s)
        return result

    def _demands_taken(self, elephants: list[FlowState], result: te.TEResult) -> None:
        """The demands a decision estimated for its ``elephants`` (in order: its first keys) onto their flows
        (the REST and dashboard figures; a flow the monitor dropped meanwhile is no longer read). Set on the flows
        themselves: looking 10k flow keys up again cost the event loop 5 ms of every decision at k=24."""
        if result.demands is None:
            return
        for st, fraction in zip(elephants, result.demands):
            st.demand_bps = fraction * self.host_bps

    def _take(self, outcome: Outcome | None) -> te.TEResult | None:
        if outcome is None:
            return None
        decision = outcome.decision
        if outcome.status == DONE and decision is not None:
            pinned = self.te.pinned if decision.unchanged else decision.pinned
            stale = self._stale_decision(pinned, decision.identity)
            if stale is not None:  # taken on a topology that changed meanwhile: it must not be installed
                LOG.info("te: a decision taken before a topology change (%s): dropped, deciding again", stale)
                self.request_decision()
                return te.TEResult(False, elephants=self._started[1], reason="the topology changed during the "
                                   "decision: dropped, deciding again")
            self.te.take(decision)
            self._demands_taken(outcome.generation, decision.result)
            return decision.result
        LOG.warning("te: %s decision %s (%s): routing in force kept", self.te.mode,
                    "ran late" if outcome.status == LATE else "failed", outcome.error)
        return None

    def _stale_decision(self, pinned: Mapping[te.RouteKey, te.Path] | None, identity: Any) -> str | None:
        """Why a decision that ended must not be installed, or None: its fabric identity (``identity``, the one
        it was computed for) no longer holds because the switch graph changed while it was decided (a switch or
        link came or went: the optimum may differ even where its pins survive), or one of its pins no longer
        joins its hosts' switches over live links (a host moved). A fabric rebuilt only because hosts were
        learned keeps the decision: a large fabric learns hosts all the time."""
        fabric = self.fabric()
        if (None if fabric is None else fabric.identity) == identity:
            return None
        graph, before = self.live_graph(), self._decided_graph
        if before is not None and before is not graph and _links(before) != _links(graph):
            return "the switch graph changed"
        hosts = self.topology.hosts
        for key, path in (pinned or {}).items():
            src, dst = hosts.get(key.src_ip), hosts.get(key.dst_ip)
            if src is None or dst is None or (path[0], path[-1]) != (src.dpid, dst.dpid) \
                    or sync.pinned_paths_broken({key: path}, graph):
                return f"{key} pinned on {path}, no longer live"
        return None

    def _recovered_pins_pending(self) -> bool:
        """Just restarted over switches that hold pinned elephants whose paths cannot be read yet (their flows
        not seen busy by a poll, their links not yet found by LLDP): a decision now would route them afresh and
        move most of them off the paths they keep (live: 5 of 8 moved 2 s after a restart, the jobs' next
        iterations 1.2-1.8x slower). It waits while such a pin may still read as a path (its destination not known
        yet, a hop out of a live port whose link LLDP has not found yet), at most until LLDP has settled on every
        switch connected (LLDP_SETTLE_S after each connected): then a pin that does not read is broken, routed
        again. A hop out of a port that is down never will read: that pin is routed at once, not 5 s later."""
        if not (self.recovering() and self.recovered.hops) or self._lldp_settled() == set(self.connected):
            return False
        graph = self.topology.graph()
        return any(self._read_recovered(st.key, graph)[1] for st in self.monitor.elephants()
                   if st.key in self.recovered.hops and st.key not in self.te.pinned)

    def _read_recovered(self, key: FlowKey, graph: Any) -> tuple[tuple[int, ...] | None, bool]:
        """The path an elephant's rules recovered from the switches pin, read over ``graph``, and whether one
        that does not read yet may later (:meth:`Recovered.read_pin`; an unknown destination may be learned)."""
        dst = self.topology.hosts.get(key.dst_ip)
        return (None, True) if dst is None else self.recovered.read_pin(key, self.topology, graph, dst.dpid)

    def _restore_pins(self, keys: list[FlowKey]) -> None:
        """Elephants whose pinned rules survived a restart keep those paths (the TE step then judges them
        like any installed routing, so nothing moves without need)."""
        if not self.recovered.hops:
            return
        graph = self.topology.graph()
        for key in keys:
            if key in self.recovered.hops and key not in self.te.pinned and key.dst_ip in self.topology.hosts:
                path = self._read_recovered(key, graph)[0]
                if path is not None:
                    self.te.pinned[key] = path
                    LOG.info("elephant %s: pinned path %s recovered from the switches", key, path)
                self.recovered.forget(key)

    def _record(self, result: te.TEResult, elephants: int) -> None:
        m = self.metrics
        m.elephants.set(elephants)
        if result.runtime_s:
            m.optimiser_seconds.set(result.runtime_s)
        if result.after:
            m.max_link_load.set(result.after["max_link_load"])
        if result.applied:
            m.reoptimisations.inc()
            m.flows_moved.inc(len(result.moved))


def _links(graph: nx.Graph) -> tuple[frozenset, frozenset]:
    """A switch graph's switches and links, comparable across rebuilds."""
    return frozenset(graph), frozenset(frozenset(e) for e in graph.edges)
