import itertools
import random
from copy import deepcopy

import networkx as nx

from controller.decide import te
from controller.desired import sync, te_rules
from controller.desired.rules import COOKIE_ELEPHANT, COOKIE_FLOW, PRIO_PAIR
from controller.state.jobs import HostPair
from controller.state.monitor import FlowKey
from controller.state.tiers import infer_tiers
from mlroute.routing import metric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import Problem
from tests import topologies
from tests.decision_steps import engineer_step, paths_in_force
from tests.oftable import trace

MBPS = 1e6


def setup(topo=None):
    topo = topo or topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    return topo, tiers, te.fabric_from_topology(topo, tiers, 10 * MBPS, 10 * MBPS)


def stride4_keys():
    return [FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + 4) % 16 + 1}", 6, 40000 + i, 5201) for i in range(8)]


def desired_with(topo, tiers, engineer, keys):
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    return sync.desired_state(topo, tiers, accounting, engineer.pinned, stagger=False, idle_timeout=10)


def packet(key):
    return {"eth_type": 0x0800, "ip_proto": key.proto, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
            "tcp_src": key.src_port, "tcp_dst": key.dst_port}


def test_stride4_elephants_get_disjoint_paths_in_the_simulated_dataplane():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert result.applied and result.after["max_link_load"] == 1 and len(result.moved) == 8
    desired = desired_with(topo, tiers, engineer, keys)
    used = []
    for k in keys:
        src, dst = topo.hosts[k.src_ip], topo.hosts[k.dst_ip]
        t = trace(desired, topo, src.dpid, src.port, packet(k))
        assert t.delivered == {(dst.dpid, dst.port)} and len(t.paths) == 1 and not t.looped
        path = t.paths[0]
        assert tuple(path) == engineer.pinned[k]  # the data plane follows the pinned path exactly
        used += list(zip(path, path[1:]))
    assert len(used) == len(set(used))


def test_hysteresis_keeps_an_equally_good_routing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    before = dict(engineer.pinned)
    again = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert not again.applied and again.moved == [] and engineer.pinned == before


def test_a_failed_link_under_an_elephant_moves_it_and_keeps_most_others():
    topo, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    victim = keys[0]
    a, b = engineer.pinned[victim][1], engineer.pinned[victim][2]
    link = next(lnk for lnk in topo.live_links() if (lnk.src, lnk.dst) == (a, b))
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    _, tiers, fabric = setup(topo)
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert result.applied and victim in result.moved
    assert (a, b) not in zip(engineer.pinned[victim], engineer.pinned[victim][1:])
    assert result.after["max_link_load"] == 2  # pod 0 has 4 elephants leaving on 3 live uplinks
    assert len(result.moved) < len(keys) // 2  # the rest keep their routes (previous paths are preferred)


def test_ecmp_mode_pins_nothing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("ecmp")
    result = engineer_step(engineer, fabric, [(k, None) for k in stride4_keys()])
    assert not result.applied and engineer.pinned == {} and result.before["max_link_load"] >= 1


def test_rules_pin_only_upward_hops_and_count_at_the_ingress():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    rules = te_rules.te_rules(topo, tiers, accounting, engineer.pinned, 10)
    pinned_hops = [r for r in rules if r.cookie == COOKIE_ELEPHANT]
    assert len(pinned_hops) == 8  # one aggregation hop per inter-pod elephant; cores need none
    assert all(tiers.tiers[r.dpid] == "aggregation" for r in pinned_hops)
    counting = [r for r in rules if r.cookie == COOKIE_FLOW]
    assert len(counting) == 8 and all(r.idle_timeout == 10 and r.actions[0][0] == "output" for r in counting)


def test_leaf_spine_elephants_use_distinct_spines():
    topo, tiers, fabric = setup(topologies.leaf_spine(4, 4, 2))
    engineer = te.TrafficEngineer("mlroute")
    keys = [FlowKey(f"10.0.0.{i}", f"10.0.0.{(i + 1) % 8 + 1}", 6, 1000 + i, 5201) for i in (1, 2)]  # leaf 1 -> 2
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    spines = {engineer.pinned[k][1] for k in keys}
    assert len(spines) == 2


def test_not_a_clos_means_no_traffic_engineering():
    topo = topologies.ring(5)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    assert te.fabric_from_topology(topo, tiers, 1, 1) is None
    result = engineer_step(te.TrafficEngineer("mlroute"), None, [(stride4_keys()[0], None)])
    assert not result.applied


def test_the_fabric_is_made_from_the_live_graph_given_without_writing_to_it():
    """The core hands its live graph (built once per change and shared by the resync) instead of building it
    again on the event loop; the fabric is the same, and the shared graph gets no tier written into it."""
    topo, tiers, built = setup()
    graph = topo.graph()
    given = te.fabric_from_topology(topo, tiers, 10 * MBPS, 10 * MBPS, graph)
    assert not nx.get_node_attributes(graph, "tier")
    assert given.node_list == built.node_list and given.rank == built.rank and given.links == built.links
    assert list(given.capacities) == list(built.capacities) and given.n_tiers == built.n_tiers == 3


def test_job_awareness_switches_to_the_job_objective():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    result = engineer_step(engineer, fabric, [(k, None) for k in keys], jobs={k.src_ip: "ring" for k in keys})
    assert result.after["objective"] == "job"


def test_every_pair_still_delivered_with_pins_installed():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    desired = desired_with(topo, tiers, engineer, keys)
    for src, dst in itertools.permutations(list(topo.hosts.values())[:6], 2):
        t = trace(desired, topo, src.dpid, src.port, {"eth_type": 0x0800, "eth_src": src.mac, "ipv4_src": src.ip,
                                                     "ipv4_dst": dst.ip,
                                                     "ip_proto": 6, "tcp_src": 1, "tcp_dst": 2})
        assert t.delivered == {(dst.dpid, dst.port)}


def test_ended_elephants_are_unpinned_even_without_a_new_routing():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    engineer_step(engineer, fabric, [(k, None) for k in keys[:6]])
    assert set(engineer.pinned) == set(keys[:6])


def random_keys(topo, n, seed):
    rng = random.Random(seed)
    ips = sorted(topo.hosts)
    return [FlowKey(*rng.sample(ips, 2), 6, 40000 + i, 5201) for i in range(n)]


def test_a_first_decision_worse_than_ecmp_is_never_applied():
    # issue 12: coloring on a k=16 fat-tree's first decision raised the max link load above ECMP's (2 -> 5)
    topo, _, fabric = setup(topologies.fat_tree(16))
    keys = random_keys(topo, 100, seed=0)
    engineer = te.TrafficEngineer("coloring")
    proposal = te.run_optimiser("coloring", fabric, [Flow(k.src_ip, k.dst_ip, key=k) for k in keys]).paths
    ecmp_load = engineer_step(engineer, fabric, [(k, None) for k in keys]).before["max_link_load"]
    assert metric.report(fabric, [Flow(k.src_ip, k.dst_ip, key=k) for k in keys], proposal)["max_link_load"] \
        > ecmp_load  # the optimiser's proposal is worse than ECMP here ...
    result = engineer.last
    assert not result.applied and result.moved == [] and engineer.pinned == {}  # ... so nothing is pinned
    assert result.after["max_link_load"] == ecmp_load and "worse" in result.reason


def test_a_worse_routing_is_never_applied_over_pinned_paths():
    # an optimiser that proposes all flows over one core: worse than the installed disjoint routing
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    installed = dict(engineer.pinned)
    engineer.mode, engineer.hysteresis = "gff", False  # no hysteresis: only "never worse" guards
    crowded = keys + [FlowKey("10.0.0.1", "10.0.0.16", 6, 1, 2)]  # a newcomer forces a decision
    result = engineer_step(engineer, fabric, [(k, None) for k in crowded])
    if not result.applied:
        assert {k: engineer.pinned[k] for k in keys} == installed
    else:
        assert metric.compare(metric.rates(fabric, flows_of(crowded), paths_of(engineer, crowded)),
                              metric.rates(fabric, flows_of(crowded), ecmp_with(fabric, installed, crowded)),
                              None, "flow") >= 0


def flows_of(keys):
    return [Flow(k.src_ip, k.dst_ip, key=k) for k in keys]


def paths_of(engineer, keys):
    return [engineer.pinned[k] for k in keys]


def ecmp_with(fabric, pinned, keys):
    flows = flows_of(keys)
    return paths_in_force(fabric, flows, pinned, te.run_optimiser("ecmp", fabric, flows).paths)[0]


def test_strictly_better_still_moves_and_equal_still_keeps():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("ecmp", time_limit=60.0)
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    engineer.mode = "mlroute"
    first = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert first.applied and first.after["max_link_load"] == 1  # better than ECMP's estimate: applied
    engineer.settled = None  # (the applied routing is a fixpoint: forget it, so that the next period searches)
    again = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert not again.applied and again.reason == "no improvement: routing kept" and again.runtime_s > 0


def pair_keys():
    return [HostPair(k.src_ip, k.dst_ip) for k in stride4_keys()]


def test_declared_host_pairs_are_routed_before_any_packet():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    pairs = pair_keys()
    result = engineer_step(engineer, fabric, [(p, None) for p in pairs], jobs={p.src_ip: "ring" for p in pairs})
    assert result.applied and result.after["max_link_load"] == 1 and set(engineer.pinned) == set(pairs)
    # no counting rule exists yet: the pair rules alone carry a new connection along the pinned path
    desired = sync.desired_state(topo, tiers, {}, engineer.pinned, stagger=False, idle_timeout=10)
    for p, k in zip(pairs, stride4_keys()):
        src, dst = topo.hosts[p.src_ip], topo.hosts[p.dst_ip]
        t = trace(desired, topo, src.dpid, src.port, packet(k))
        assert t.delivered == {(dst.dpid, dst.port)} and [tuple(x) for x in t.paths] == [engineer.pinned[p]]
    ingress = [r for r in te_rules.te_rules(topo, tiers, {}, engineer.pinned, 10) if r.priority == PRIO_PAIR]
    assert len(ingress) == 2 * len(pairs) and all(r.actions[0][0] == "controller" for r in ingress)


def test_a_detected_flow_of_a_pinned_pair_inherits_its_path_without_moving():
    topo, tiers, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    pairs, keys = pair_keys(), stride4_keys()
    engineer_step(engineer, fabric, [(p, None) for p in pairs])
    by_pair = dict(engineer.pinned)
    # the 5-tuples appear and replace their pairs (controller.state.jobs.uncovered_pairs): same paths, nothing moves
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert result.moved == [] and {k: engineer.pinned[k] for k in keys} == \
        {k: by_pair[HostPair(k.src_ip, k.dst_ip)] for k in keys}
    # and a counting rule of a not-yet-elephant flow of a pinned pair outputs to the pair's first hop
    engineer.pinned = by_pair
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    counting = [r for r in te_rules.te_rules(topo, tiers, accounting, by_pair, 10) if r.cookie == COOKIE_FLOW]
    assert all(r.actions[0][0] == "output" for r in counting)


def test_job_weights_reach_the_job_objective():
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute")
    keys = stride4_keys()
    jobs = {k.src_ip: ("a" if i < 4 else "b") for i, k in enumerate(keys)}
    result = engineer_step(engineer, fabric, [(k, None) for k in keys], jobs=jobs, weights={"a": 2.0})
    assert result.applied and result.after["objective"] == "job"
    flows = [Flow(k.src_ip, k.dst_ip, job=jobs[k.src_ip], weight={"a": 2.0}.get(jobs[k.src_ip], 1.0))
             for k in keys]
    assert metric.job_labels(flows)[0] == metric.WeightedJob("a", 2.0) and metric.job_labels(flows)[4] == "b"


def settle(fabric, keys, time_limit=60.0):
    """An engineer two periods into ``keys``: applied, then an equal routing kept after a complete search (a
    generous budget: the optimiser's own is twice its construction time, 20 ms here, which a loaded machine
    can overrun). The applied routing settles the engineer by itself (a fixpoint): that is forgotten here, so
    the second period searches."""
    engineer = te.TrafficEngineer("mlroute", time_limit=time_limit)
    engineer_step(engineer, fabric, [(k, None) for k in keys])
    engineer.settled = None
    kept = engineer_step(engineer, fabric, [(k, None) for k in keys])
    return engineer, kept


def test_an_applied_fixpoint_settles_the_next_period_with_what_its_search_would_say():
    """mlroute says it would return its routing again from itself: the period after it is not searched, and
    what it answers is what the search gives (an engineer made to search again keeps the same pins)."""
    topo, _, fabric = setup(topologies.fat_tree(6))
    rng = random.Random(8)
    keys = [FlowKey(a, b, 6, 40000 + i, 5201) for i, (a, b) in
            enumerate(rng.sample(list(itertools.permutations(sorted(topo.hosts), 2)), 120))]
    elephants = [(k, None) for k in keys]
    engineer = te.TrafficEngineer("mlroute", time_limit=60.0)
    first = engineer_step(engineer, fabric, elephants)
    assert first.applied and engineer.settled is not None
    pins = dict(engineer.pinned)
    searched = deepcopy(engineer)
    searched.settled = None
    second = engineer_step(engineer, fabric, elephants)
    assert second.reason == te.SETTLED and not second.applied and second.runtime_s == 0.0
    assert second.after["max_link_load"] == first.after["max_link_load"] and engineer.pinned == pins
    check = engineer_step(searched, fabric, elephants)
    assert check.reason == te.KEPT and check.runtime_s > 0 and searched.pinned == pins
    # without hysteresis every period is a decision of its own: nothing settles after an applied routing
    plain = te.TrafficEngineer("mlroute", hysteresis=False, time_limit=60.0)
    engineer_step(plain, fabric, elephants)
    assert plain.settled is None


def test_a_settled_decision_is_not_searched_again_on_the_same_inputs():
    _, _, fabric = setup()
    keys = stride4_keys()
    engineer, kept = settle(fabric, keys)
    assert kept.reason == te.KEPT and kept.runtime_s > 0 and engineer.settled is not None
    pins = dict(engineer.pinned)
    again = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert again.reason == te.SETTLED and not again.applied and again.runtime_s == 0.0
    assert again.before == kept.before and again.after == kept.after and engineer.pinned == pins
    assert engineer_step(engineer, fabric, [(k, None) for k in keys]).reason == te.SETTLED  # and it stays settled


def test_any_changed_input_is_searched_again():
    topo, tiers, fabric = setup()
    keys = stride4_keys()
    changes = {
        "an elephant more": lambda e: engineer_step(e, fabric, [(k, None) for k in keys] +
                                             [(FlowKey("10.0.0.9", "10.0.0.2", 6, 41000, 5201), None)]),
        "a demand": lambda e: engineer_step(e, fabric, [(k, 0.5 if i == 0 else None) for i, k in enumerate(keys)]),
        "the jobs": lambda e: engineer_step(e, fabric, [(k, None) for k in keys], jobs={keys[0].src_ip: "a"}),
        "another fabric": lambda e: engineer_step(e, te.fabric_from_topology(topo, tiers, 10 * MBPS, 10 * MBPS),
                                           [(k, None) for k in keys]),
        "a pin": lambda e: (e.pinned.pop(keys[0]), engineer_step(e, fabric, [(k, None) for k in keys]))[1],
    }
    for what, change in changes.items():
        engineer, _ = settle(fabric, keys)
        result = change(engineer)
        assert result.reason != te.SETTLED and result.runtime_s > 0, what


def test_a_failed_link_changes_the_fabric_so_the_decision_is_searched_again():
    _, _, fabric = setup()
    keys = stride4_keys()
    engineer, _ = settle(fabric, keys)
    a, b = engineer.pinned[keys[0]][:2]
    fabric.fail_link(a, b)
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert result.applied and result.reason == "new or broken paths" and keys[0] in result.moved


def test_beside_many_pins_a_failure_places_only_the_broken_pins_without_the_search(monkeypatch):
    # issue 33: a failure's decision (incremental) beside PLACE_BESIDE_FROM flows keeps every pin that holds and
    # places the broken ones (te.REPAIRED) without the optimiser; the full search is the next decision's
    _, _, fabric = setup()
    keys = stride4_keys()
    engineer, _ = settle(fabric, keys)
    old = dict(engineer.pinned)
    victim = keys[0]
    a, b = old[victim][:2]
    fabric.fail_link(a, b)
    monkeypatch.setattr(te, "PLACE_BESIDE_FROM", 0)
    searched = []
    optimise = te.run_optimiser
    monkeypatch.setattr(te, "run_optimiser", lambda mode, *a, **k: searched.append(mode) or optimise(mode, *a, **k))
    decision = te.decide(engineer.input(fabric, [(k, None) for k in keys], incremental=True))
    assert decision.result.reason == te.REPAIRED and searched == ["ecmp"] and decision.result.moved == [victim]
    assert all(decision.pinned[k] == p for k, p in old.items() if k != victim)
    assert (a, b) not in zip(decision.pinned[victim], decision.pinned[victim][1:])
    before, after = decision.result.before, decision.result.after
    assert after["max_link_load"] <= before["max_link_load"] and after["min_rate"] >= before["min_rate"]
    full = te.decide(engineer.input(fabric, [(k, None) for k in keys]))  # not a failure's: searched as before
    assert full.result.reason == "new or broken paths" and "mlroute" in searched


def test_a_search_cut_short_by_its_time_limit_settles_nothing():
    _, _, fabric = setup()
    engineer, kept = settle(fabric, stride4_keys(), time_limit=0.0)
    assert kept.reason == te.KEPT and engineer.settled is None
    assert engineer_step(engineer, fabric, [(k, None) for k in stride4_keys()]).reason == te.KEPT


def test_the_optimiser_keeps_only_paths_known_to_carry_traffic(monkeypatch):
    """ECMP's estimate (the routing core's hash, not the switch's) is no known path: a first decision hands the
    optimiser no previous routing, a later one the valid pins and nothing for the newcomers."""
    _, _, fabric = setup()
    handed = []

    def spy(name, *args, **kwargs):
        if name != "ecmp":
            handed.append(kwargs.get("previous"))
        return run_optimiser(name, *args, **kwargs)

    run_optimiser = te.run_optimiser
    monkeypatch.setattr(te, "run_optimiser", spy)
    engineer = te.TrafficEngineer("mlroute", time_limit=60.0)
    keys = stride4_keys()
    engineer_step(engineer, fabric, [(k, None) for k in keys[:6]])
    assert handed == [None]
    pins = dict(engineer.pinned)
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert handed[1] == [pins[k] for k in keys[:6]] + [None, None]
    assert set(engineer.pinned) == set(keys) and set(keys[6:]) <= set(result.moved)


def test_the_report_of_a_new_routing_is_the_metric_of_its_paths():
    """The optimiser's own rates stand in for a water-filling of the proposal: the report is the same."""
    topo, tiers, fabric = setup(topologies.fat_tree(6))
    rng = random.Random(4)
    hosts = sorted(topo.hosts)
    keys = [FlowKey(a, b, 6, 40000 + i, 5201) for i, (a, b) in
            enumerate(rng.sample(list(itertools.permutations(hosts, 2)), 150))]
    engineer = te.TrafficEngineer("mlroute", time_limit=60.0)
    result = engineer_step(engineer, fabric, [(k, None) for k in keys])
    assert result.applied
    flows = [Flow(k.src_ip, k.dst_ip) for k in keys]
    expected = metric.report(fabric, flows, [engineer.pinned[k] for k in keys])
    for name in ("max_link_load", "links_at_max", "flows_sharing", "unroutable"):
        assert result.after[name] == expected[name], name
    for name in ("min_rate", "median_rate", "sum_rate", "fraction_of_ideal"):
        assert abs(result.after[name] - expected[name]) <= 1e-9 * max(abs(expected[name]), 1.0), name


def test_a_settled_decision_holds_only_for_the_same_pins_in_the_same_table_order():
    _, _, fabric = setup()
    keys = stride4_keys()
    engineer, _ = settle(fabric, keys)
    settled, pins = engineer.settled, dict(engineer.pinned)
    inputs = settled.inputs
    assert settled.holds(inputs, pins)
    assert not settled.holds(inputs, dict(reversed(list(pins.items()))))  # same content, another order: search
    moved = dict(pins)
    moved[keys[0]] = tuple(reversed(pins[keys[0]]))
    assert not settled.holds(inputs, moved) and not settled.holds(inputs, {k: pins[k] for k in keys[1:]})
    assert not settled.holds(inputs[:-1] + (123.0,), pins)


def test_a_decision_is_a_value_exchange_that_changes_nothing_it_is_given():
    """``te.decide(TEInput) -> TEDecision`` is a pure function: the pins and the settled record it is given stay
    as they were; the decision carries the new ones and the fabric identity it was computed for, and a settled
    period answers ``unchanged`` (the pins in force stand) instead of sending them back."""
    _, _, fabric = setup()
    engineer = te.TrafficEngineer("mlroute", time_limit=60.0)
    keys = stride4_keys()
    first = engineer.input(fabric, [(k, None) for k in keys])
    decision = te.decide(first)
    assert first.pinned == {} and first.settled is None and engineer.pinned == {}  # nothing given is changed
    assert decision.identity == fabric.identity and not decision.unchanged and len(decision.pinned) == 8
    engineer.take(decision)
    assert engineer.pinned == decision.pinned and engineer.last is decision.result
    # the applied routing is mlroute's own fixpoint: the next period with the same inputs is settled
    assert engineer.settled is not None
    pins, settled = engineer.pinned, engineer.settled
    again = te.decide(engineer.input(fabric, [(k, None) for k in keys]))
    assert again.unchanged and again.pinned is None and again.result.reason == te.SETTLED
    engineer.take(again)
    assert engineer.pinned is pins and engineer.settled is settled


def test_a_decision_estimates_the_natural_demands_once(monkeypatch):
    """The demands a decision estimates are the reports' non-blocking rates too: one estimate per decision, not
    a second one hidden by the estimator's memo."""
    _, _, fabric = setup()
    calls = []

    def counted(estimate):
        def run(flows, *args, **kwargs):
            calls.append(len(flows))
            return estimate(flows, *args, **kwargs)
        return run

    for name in ("estimate_demands", "estimate_pair_demands"):  # of flows, or of their (src, dst) pairs
        monkeypatch.setattr(te, name, counted(getattr(te, name)))
    result = engineer_step(te.TrafficEngineer("mlroute"), fabric, [(k, None) for k in stride4_keys()], estimate=True)
    assert result.applied and calls == [8]


def test_a_kept_routing_is_settled_when_its_search_ended_or_only_its_work_budget_stopped_it():
    """The optimiser's budget is counted work: a search its budget stopped runs the same again on the same inputs
    and pins, so a routing it kept is settled (at 10k elephants on a k=16 fat-tree every search is cut by work:
    before, every period searched again, ~300 ms of CPU each, for nothing). One the clock cut may differ on a
    less loaded machine: searched again."""
    pinned = {FlowKey("10.0.0.1", "10.0.0.5", 6, 1, 2): (1, 2, 3)}
    result = te.TEResult(False, [], {}, {}, 0.1, 1, te.KEPT)
    for info, settles in (({"search_complete": True}, True), ({"search_complete": False, "cut_by_clock": False}, True),
                          ({"search_complete": False, "cut_by_clock": True}, False), ({}, False)):
        step = te._Step(te.TESettings(), pinned, None, lambda: 0.0)
        step._kept(result, ("inputs",), info)
        assert (step.settled is not None and step.settled.holds(("inputs",), pinned)) is settles, info


# -- a job's arrival beside pins (issue 33): placed without the search when certified, else the full decision --
NEWCOMER = HostPair("10.0.0.1", "10.0.0.5")  # pod 0 -> pod 1, full rate (its hosts send / receive nothing else)
RUNNING = (HostPair("10.0.0.2", "10.0.0.9"), HostPair("10.0.0.13", "10.0.0.6"))  # share its source / dest edge


def path_set(fabric, pair):
    return Problem(fabric, [Flow(pair.src_ip, pair.dst_ip, key=pair)]).sets[0]


def links_of(path):
    return set(zip(path, path[1:]))


def arrival(fabric, pinned, incremental=True, monkeypatch=None):
    """The decision a job event takes when NEWCOMER's job is declared beside RUNNING pinned as ``pinned``."""
    engineer = te.TrafficEngineer("mlroute")
    engineer.pinned = dict(pinned)
    searched = []
    if monkeypatch is not None:  # record which optimisers the decision runs
        optimise = te.run_optimiser

        def recorded(mode, *args, **kwargs):
            searched.append(mode)
            return optimise(mode, *args, **kwargs)
        monkeypatch.setattr(te, "run_optimiser", recorded)
    jobs = {"10.0.0.1": "new", "10.0.0.5": "new", "10.0.0.2": "a", "10.0.0.9": "a", "10.0.0.13": "b",
            "10.0.0.6": "b"}
    decision = te.decide(engineer.input(fabric, [(k, None) for k in (*RUNNING, NEWCOMER)], jobs, estimate=True,
                                        incremental=incremental))
    return decision, searched


def pinnings(fabric):
    """Every pinning of RUNNING, with whether each of NEWCOMER's paths shares a link with one of them."""
    a, b = (path_set(fabric, p) for p in RUNNING)
    new = path_set(fabric, NEWCOMER)
    for pa, pb in itertools.product((a.path(i) for i in range(len(a))), (b.path(i) for i in range(len(b)))):
        blocked = all(links_of(new.path(i)) & (links_of(pa) | links_of(pb)) for i in range(len(new)))
        yield {RUNNING[0]: pa, RUNNING[1]: pb}, blocked


def test_an_arrival_with_room_is_placed_without_the_search_and_as_well_as_the_full_search(monkeypatch):
    topo, _, fabric = setup()
    assert topo.hosts["10.0.0.1"].dpid == topo.hosts["10.0.0.2"].dpid  # the premise: they share an edge
    assert topo.hosts["10.0.0.5"].dpid == topo.hosts["10.0.0.6"].dpid
    free = [pins for pins, blocked in pinnings(fabric) if not blocked]
    assert free
    for pins in free:
        quick, searched = arrival(fabric, pins, monkeypatch=monkeypatch)
        assert quick.result.reason == te.ARRIVAL and searched == ["ecmp"]  # no optimiser ran: ECMP's estimate only
        assert quick.result.moved == [NEWCOMER]
        assert all(quick.pinned[k] == p for k, p in pins.items())  # every pin in force stays where it is
        full, _ = arrival(fabric, pins, incremental=False)
        assert full.result.reason != te.ARRIVAL
        flows = [Flow(k.src_ip, k.dst_ip, key=k) for k in (*RUNNING, NEWCOMER)]
        rates = [metric.rates(fabric, flows, [d.pinned[f.key] for f in flows]) for d in (quick, full)]
        assert metric.leximin_compare(*rates) == 0  # the full search's metric: every flow at its full rate
        assert quick.result.after["max_link_load"] == 1 and quick.result.after["min_rate"] == 10 * MBPS


def test_an_arrival_that_would_collide_gets_the_full_search_and_no_collision():
    # A later job's arrival where every path of its flow shares a link with a running job's pin: placed over the
    # pins it would collide (max link load 2, half rates), and the full search moves a running pin instead
    _, _, fabric = setup()
    cornered = [pins for pins, blocked in pinnings(fabric) if blocked]
    assert cornered
    for pins in cornered:
        decision, _ = arrival(fabric, pins)
        assert decision.result.reason != te.ARRIVAL and decision.result.applied
        assert decision.result.after["max_link_load"] == 1 and decision.result.after["min_rate"] == 10 * MBPS
        used = [links_of(p) for p in decision.pinned.values()]
        assert not (used[0] & used[1] or used[0] & used[2] or used[1] & used[2])  # link-disjoint


def test_beside_many_pins_a_cornered_arrival_is_placed_no_worse_than_what_runs_without_the_search(monkeypatch):
    # Beside PLACE_BESIDE_FROM flows in force (10k pins at k=24: the search is 0.6-0.7 s) a newcomer with no room
    # goes where it overfills least, taken when no worse than what runs (the newcomer on ECMP's groups), and the
    # full search is left to the decision that follows
    _, _, fabric = setup()
    for pins in [pins for pins, blocked in pinnings(fabric) if blocked]:
        monkeypatch.setattr(te, "PLACE_BESIDE_FROM", 0)
        placed, searched = arrival(fabric, pins, monkeypatch=monkeypatch)
        assert placed.result.reason == te.PLACED and searched == ["ecmp"]
        assert placed.result.moved == [NEWCOMER] and all(placed.pinned[k] == p for k, p in pins.items())
        before, after = placed.result.before, placed.result.after
        assert after["max_link_load"] <= before["max_link_load"] and after["min_rate"] >= before["min_rate"]
        monkeypatch.undo()


def test_a_flow_keys_repr_is_the_dataclass_repr():
    """ECMP's estimate hashes the key's repr: the written-out one is the one the dataclass would generate."""
    from dataclasses import fields, make_dataclass

    generated = make_dataclass("FlowKey", [(f.name, f.type) for f in fields(FlowKey)], frozen=True)
    for key in (FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201), FlowKey("a'b", 'c"d', 0, 0, 0)):
        assert repr(key) == repr(generated(*(getattr(key, f.name) for f in fields(FlowKey))))
