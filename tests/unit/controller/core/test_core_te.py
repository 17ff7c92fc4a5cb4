"""The core's TE step: the elephants' demands are estimated in the decision (the optimiser's worker when there
is one, never the event loop) and come back onto the monitor's flows."""

import pytest

from controller import config
from controller.core import ControllerCore
from controller.decide import te
from controller.decide.decision_requests import Ticket
from controller.decide.optimiser_runner import OptimiserRunner
from controller.state.flowkey import FlowKey
from controller.state.monitor import FlowSample
from mlroute.routing import demand
from tests import topologies
from tests.decision_steps import SlowRunner, paths_in_force, te_step

# Hedera's worked example: A->X, A->Y, B->Y, C->Y have natural demands 2/3, 1/3, 1/3, 1/3 of a NIC
KEYS = [FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201), FlowKey("10.0.0.1", "10.0.0.9", 6, 40001, 5201),
        FlowKey("10.0.0.2", "10.0.0.9", 6, 40002, 5201), FlowKey("10.0.0.3", "10.0.0.9", 6, 40003, 5201)]
EXPECTED = [2 / 3, 1 / 3, 1 / 3, 1 / 3]


def core_with_elephants(runner=None):
    clock = [0.0]
    core = ControllerCore(config.parse(""), lambda: clock[0], runner=runner)
    core.topology = core.packet_in.topology = topologies.fat_tree(4)
    core.sync()
    for key in KEYS:
        src = core.topology.hosts[key.src_ip]
        core.new_transport_flow(key, src.dpid, src.port)
    by_switch: dict = {}
    for key in KEYS:
        by_switch.setdefault(core.topology.hosts[key.src_ip].dpid, []).append(key)
    for i in (1, 2, 3):
        clock[0] = 2.0 * i
        for dpid, keys in by_switch.items():  # one poll reply per ingress switch
            core.flow_stats(dpid, [FlowSample(k, dpid, int(9e6 * 2 * i / 8), 2.0 * i) for k in keys])
    assert all(core.monitor.flows[k].elephant for k in KEYS)
    return core


def test_the_decision_estimates_the_demands_and_the_monitor_shows_them():
    core = core_with_elephants()
    result = te_step(core)
    assert result.applied and list(result.demands) == pytest.approx(EXPECTED)
    shown = [core.monitor.flows[k].demand_bps / core.host_bps for k in KEYS]
    assert shown == pytest.approx(EXPECTED)
    assert [e["demand_bps"] / core.host_bps for e in core.elephants_json()] == pytest.approx(EXPECTED)


def test_with_the_worker_the_event_loop_never_estimates(monkeypatch):
    def not_here(*_args, **_kwargs):
        raise AssertionError("demands estimated in the event loop")

    # this process only (the worker has its own): any estimate made here raises, none is remembered
    monkeypatch.setattr(demand, "_estimate", not_here)
    monkeypatch.setattr(demand, "_LAST", None)
    runner = OptimiserRunner(budget_s=5.0, grace_s=5.0)
    runner.start()
    try:
        assert runner.wait_ready(30)
        core = core_with_elephants(runner)
        result = te_step(core, wait=True)
        assert result.applied and list(result.demands) == pytest.approx(EXPECTED)
        assert [core.monitor.flows[k].demand_bps / core.host_bps for k in KEYS] == pytest.approx(EXPECTED)
    finally:
        runner.close()


def test_a_burst_of_requests_is_answered_by_a_few_decisions_all_taken_by_the_decision_loop():
    runner = SlowRunner()
    core = core_with_elephants(runner)
    now = [0.0]
    core.decisions.clock, core.decisions.max_waiting = (lambda: now[0]), 10_000
    tickets = []
    for i in range(2000):  # REST calls over 2 s; the decision loop ticks once per 10 of them (every 10 ms)
        tickets.append(core.decisions.request(urgent=False))
        if i % 10 == 9:
            now[0] += 0.01
            core.decision_tick()
    while core.decisions.busy:
        now[0] += 0.01
        core.decision_tick()
    assert all(isinstance(t, Ticket) and t.wait(0) for t in tickets)
    assert runner.submitted == core.decisions.decisions <= 2 / 0.5 + 2  # spaced by min_interval_s (0.5 s)
    assert tickets[0].outcome.applied and set(core.te.pinned) == set(KEYS)
    assert core.metrics.te_decisions._value.get() == runner.submitted


def test_a_decision_taken_before_a_topology_change_is_not_applied_after_it():
    """Issue 19's bug: the outcome's generation was never compared, so pins computed on the old fabric were
    applied across a switch that had meanwhile lost its links."""
    runner = SlowRunner()
    core = core_with_elephants(runner)
    core.request_decision()
    core.decision_tick()  # submitted on the intact fabric
    assert runner.busy
    core_switch = 3001
    for port in sorted(core.topology.ports[core_switch]):  # every link of one core goes down meanwhile
        core.port_changed(core_switch, port, live=False)
    results = []
    while core.decisions.busy or runner.busy:
        result = core.decision_tick()
        if result is not None:
            results.append(result)
    first = results[0]
    assert not first.applied and "topology changed" in first.reason, first
    assert all(core_switch not in path for path in core.te.pinned.values()), core.te.pinned
    assert results[-1].applied and set(core.te.pinned) == set(KEYS)  # decided again, on the live fabric


def test_a_decision_is_dropped_when_any_link_fails_meanwhile_even_one_none_of_its_pins_uses():
    """The fabric identity no longer holds once a link failed, wherever it was: the optimum may differ (the
    issue's rule); a fabric rebuilt because a host was learned meanwhile keeps the decision."""
    runner = SlowRunner()
    core = core_with_elephants(runner)
    core.request_decision()
    core.decision_tick()
    assert runner.busy
    task, _ = runner.task
    used = {frozenset(hop) for path in te.decide(task).pinned.values() for hop in zip(path, path[1:])}
    link = next(k for k in core.topology.live_links() if frozenset((k.src, k.dst)) not in used)
    core.port_changed(link.src, link.src_port, live=False)
    results = []
    while core.decisions.busy or runner.busy:
        result = core.decision_tick()
        if result is not None:
            results.append(result)
    assert not results[0].applied and "topology changed" in results[0].reason, results[0]
    assert results[-1].applied and set(core.te.pinned) == set(KEYS)


def test_the_routing_view_is_the_decisions_own_report_and_costs_no_routing(monkeypatch):
    """GET /mlroute/routing and the /metrics ECMP estimate show the reports the decision computed (the routing it
    left in force, and ECMP's estimate); reading them runs no optimiser and no report in the event loop. They are
    what the view computed itself before: the installed routing's and ECMP's reports of the same flows."""
    from mlroute.routing import metric
    from mlroute.routing.flow import Flow

    core = core_with_elephants()
    result = te_step(core)
    assert result.applied and result.ecmp is not None
    fabric, jobs = core.fabric(), core.jobs_by_host()
    flows = [Flow(k.src_ip, k.dst_ip, demand=core.monitor.flows[k].demand_bps / core.host_bps, key=k) for k in KEYS]
    ecmp = te.run_optimiser("ecmp", fabric, flows).paths
    installed, _ = paths_in_force(fabric, flows, core.te.pinned, ecmp)
    expected = {"installed": metric.report(fabric, flows, installed), "ecmp": metric.report(fabric, flows, ecmp)}
    assert not jobs

    def not_here(*_args, **_kwargs):
        raise AssertionError("a routing computed for a read")

    monkeypatch.setattr(te, "run_optimiser", not_here)
    monkeypatch.setattr(metric, "report", not_here)
    view = core.routing_json()
    assert view["installed"] is result.after and view["ecmp"] is result.ecmp and view["elephants"] == len(KEYS)
    for name in ("installed", "ecmp"):
        for field in ("max_link_load", "flows_sharing", "links_at_max", "min_rate", "median_rate", "sum_rate"):
            assert view[name][field] == pytest.approx(expected[name][field]), (name, field)
    core.metrics.estimate_ecmp_from(core.routing_json)  # as the app wires it: read at scrape time
    line = f"mlroute_ecmp_max_link_load {float(expected['ecmp']['max_link_load'])}".encode()
    assert line in core.metrics.exposition()[0]


def test_a_link_learned_before_a_decision_reads_the_graph_still_makes_the_fabric_a_clos():
    """Live (a cluster's new leader whose view lacked a restored cable): the cable's live, linkless ports made
    its aggregation and core switches look host-facing (not a Clos), LLDP then found it, and the decision loop
    read the graph before the next sync did. The tiers were recomputed only when the sync saw no cached graph,
    so they stayed "not a Clos" with every link known: no elephant pinned for more than a minute."""
    core = core_with_elephants()
    assert core.tiers.is_clos
    fresh = ControllerCore(config.parse(""), core.clock, runner=None)  # a new leader's core: no tiers before
    fresh.topology = fresh.packet_in.topology = core.topology
    cable = next(link for link in core.topology.links.values() if (link.src, link.dst) == (2000, 3001))
    for link in (cable, cable.reverse):
        assert fresh.topology.remove_link(link.src, link.src_port, link.dst, link.dst_port)
    fresh.sync()
    assert not fresh.tiers.is_clos  # a live port without its link looks host-facing
    for link in (cable, cable.reverse):  # LLDP finds the cable
        fresh.link_added(link.src, link.src_port, link.dst, link.dst_port)
    assert fresh.fabric() is None or fresh.tiers.is_clos  # the decision loop reads the graph first ...
    fresh.sync()  # ... then the sync
    assert fresh.tiers.is_clos, fresh.tiers.reason
    assert fresh.fabric() is not None
