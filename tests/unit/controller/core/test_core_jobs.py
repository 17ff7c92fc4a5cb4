"""Declared jobs in the controller core (issue 12): routed before their first packet, job events decide at once,
finished elephants stop counting. The core runs without Ryu or a switch; the data plane is the simulated table."""

from controller import config
from controller.core import ControllerCore
from controller.decide import te
from controller.decide.packet_in import PacketIn
from controller.desired import sync
from controller.state.flowkey import FlowKey
from controller.state.jobs import HostPair
from controller.state.monitor import FlowSample
from tests import topologies
from tests.decision_steps import SlowRunner, te_step
from tests.oftable import trace

# allreduce:4x4 as mlroute experiment runs it on a k=4 fat-tree: ring r = hosts r+1, r+5, r+9, r+13
RINGS = [[f"10.0.0.{r + 1 + 4 * i}" for i in range(4)] for r in range(4)]


def declared(rings=RINGS):
    jobs = "".join(f"  - {{name: ring{r}, rings: [[{', '.join(ring)}]]}}\n" for r, ring in enumerate(rings))
    return config.parse("jobs:\n" + jobs)


def make_core(cfg):
    clock = [0.0]
    core = ControllerCore(cfg, lambda: clock[0])
    core.topology = core.packet_in.topology = topologies.fat_tree(4)  # hosts and links as LLDP/ARP would learn
    core.sync()  # tiers from the learned graph
    return core, clock


def ring_pairs(rings=RINGS):
    return [HostPair(r[i], r[(i + 1) % len(r)]) for r in rings for i in range(len(r))]


def test_declared_rings_are_routed_before_their_first_packet():
    core, _ = make_core(declared())
    result = te_step(core)
    assert result.applied and result.after["max_link_load"] == 1
    assert set(core.te.pinned) == set(ring_pairs())
    desired = sync.desired_state(core.topology, core.tiers, core.accounting, core.te.pinned, stagger=False,
                                 idle_timeout=10)
    used = []
    for p in ring_pairs():
        src, dst = core.topology.hosts[p.src_ip], core.topology.hosts[p.dst_ip]
        t = trace(desired, core.topology, src.dpid, src.port, {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": p.src_ip,
                                                               "ipv4_dst": p.dst_ip, "tcp_src": 40000, "tcp_dst": 5201})
        assert t.delivered == {(dst.dpid, dst.port)} and [tuple(x) for x in t.paths] == [core.te.pinned[p]]
        assert t.to_controller  # the first packet still reaches the controller: it gets its counting rule
        used += list(zip(t.paths[0], t.paths[0][1:]))
    assert len(used) == len(set(used))  # iteration 0 already on disjoint paths


def test_undeclared_traffic_pins_nothing_before_it_is_seen():
    core, _ = make_core(config.parse(""))
    assert not te_step(core).applied and core.te.pinned == {}


def elephant(core, clock, key, mbps=9.0):
    src = core.topology.hosts[key.src_ip]
    core.new_transport_flow(key, src.dpid, src.port)
    for i in (1, 2):
        clock[0] = 2.0 * i
        core.flow_stats(src.dpid, [FlowSample(key, src.dpid, int(mbps * 1e6 * 2 * i / 8), 2.0 * i)])
    assert core.monitor.flows[key].elephant


def test_a_detected_flow_takes_its_pairs_place_on_the_same_path():
    core, clock = make_core(declared())
    te_step(core)
    pair = ring_pairs()[0]
    path = core.te.pinned[pair]
    key = FlowKey(pair.src_ip, pair.dst_ip, 6, 40000, 5201)
    elephant(core, clock, key)
    result = te_step(core)
    assert key in core.te.pinned and pair not in core.te.pinned and core.te.pinned[key] == path
    assert result.moved == []


def test_an_elephant_whose_counting_rule_is_removed_leaves_and_triggers_a_decision():
    core, clock = make_core(config.parse(""))
    key = FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201)
    elephant(core, clock, key)
    te_step(core)
    assert key in core.te.pinned
    src = core.topology.hosts[key.src_ip]
    resync = core.counting_rule_removed(src.dpid, {"ip_proto": 6, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
                                                   "tcp_src": 40000, "tcp_dst": 5201, "in_port": src.port})
    assert key not in core.monitor.flows and core.decisions.queued is not None and resync
    core.sync()  # the resync decides at once, without waiting for the next poll
    assert core.decisions.queued is None and key not in core.te.pinned


def test_setting_jobs_ends_the_old_ones_and_routes_the_new_at_once():
    core, clock = make_core(config.parse(""))
    key = FlowKey("10.0.0.1", "10.0.0.5", 6, 40000, 5201)
    elephant(core, clock, key)
    core.set_jobs(config.validate_jobs([{"name": "old", "hosts": ["10.0.0.1"]}], "request body"))
    core.set_jobs(config.validate_jobs([{"name": "new", "rings": [RINGS[1]]}], "request body"))
    assert key not in core.monitor.flows  # its job ended: it leaves pattern memory at once
    assert core.decisions.queued is not None  # a decision asked for at once
    core.sync()
    assert set(core.te.pinned) == set(ring_pairs([RINGS[1]]))


def test_a_declared_host_learned_late_triggers_a_decision():
    core, _ = make_core(declared())
    host = core.topology.hosts[RINGS[0][0]]
    core.topology.forget_host(host.ip)
    te_step(core)
    assert HostPair(RINGS[0][0], RINGS[0][1]) not in core.te.pinned  # unknown host: not routable yet
    core.packet(PacketIn(dpid=host.dpid, in_port=host.port, eth_src=host.mac, eth_dst="ff:ff:ff:ff:ff:ff",
                         eth_type=0x0806, arp_op=1, src_ip=host.ip, dst_ip=RINGS[0][1]))
    assert core.decisions.queued is not None  # a decision asked for at once
    core.sync()
    assert HostPair(RINGS[0][0], RINGS[0][1]) in core.te.pinned


def test_with_the_optimiser_worker_a_job_event_is_requested_and_decided_by_the_decision_loop():
    from controller.decide.optimiser_runner import OptimiserRunner

    runner = OptimiserRunner(budget_s=5.0, grace_s=5.0)
    runner.start()
    try:
        assert runner.wait_ready(30)
        core = ControllerCore(config.parse(""), lambda: 0.0, runner=runner)
        core.topology = core.packet_in.topology = topologies.fat_tree(4)
        core.sync()
        core.set_jobs(config.validate_jobs([{"name": "ar", "rings": RINGS}], "request body"))
        core.sync()  # requested, not decided here: only the decision loop talks to the worker
        assert core.decisions.queued is not None and not runner.busy and not core.te.pinned
        decided = core.decisions.decisions
        te_step(core, wait=True)  # the decision loop's ticks (blocking here): the same queued decision
        assert core.decisions.decisions == decided + 1 and set(core.te.pinned) == set(ring_pairs())
    finally:
        runner.close()


def test_a_job_event_decides_incrementally_and_the_next_period_searches_again():
    # issue 33: a job declared beside running pins is placed without the full search (its rules in the switches
    # sooner), the periodic decision after it searches from the routing in force as always
    core, _ = make_core(config.parse(""))
    core.set_jobs(config.validate_jobs([{"name": "first", "rings": [RINGS[0]]}], "request body"))
    core.sync()
    core.set_jobs(config.validate_jobs([{"name": "first", "rings": [RINGS[0]]},
                                        {"name": "second", "rings": [RINGS[1]]}], "request body"))
    task, _ = core._decision_inputs()
    assert task.incremental and not core._decision_inputs()[0].incremental  # that decision only
    core.incremental_next = True
    old = dict(core.te.pinned)
    result = te_step(core)
    assert result.reason == te.ARRIVAL and set(result.moved) == set(ring_pairs([RINGS[1]]))
    assert all(core.te.pinned[k] == p for k, p in old.items())
    assert te_step(core).reason != te.ARRIVAL  # the period: the full decision, from the routing in force


def test_a_placed_arrival_is_followed_at_once_by_the_full_search(monkeypatch):
    # issue 33: beside many pins a job's newcomers without room are placed unsearched (te.PLACED), so its rules go
    # in at once; the full search follows as the next decision, requested by the core, not a period later. Two
    # 8-host rings over the 16 hosts of a k=4 fat-tree: the second, beside the first's pins, finds no room
    monkeypatch.setattr(te, "PLACE_BESIDE_FROM", 0)
    first = {"name": "a", "rings": [[f"10.0.0.{i}" for i in (3, 11, 1, 15, 7, 6, 4, 9)]]}
    second = {"name": "b", "rings": [[f"10.0.0.{i}" for i in (8, 12, 16, 2, 13, 14, 10, 5)]]}
    core, _ = make_core(config.parse(""))
    core.set_jobs(config.validate_jobs([first], "request body"))
    te_step(core)
    old = dict(core.te.pinned)
    core.set_jobs(config.validate_jobs([first, second], "request body"))
    placed = te_step(core)
    assert placed.reason == te.PLACED and set(placed.moved) == set(ring_pairs(second["rings"]))
    assert all(core.te.pinned[k] == p for k, p in old.items()) and placed.after["max_link_load"] == 2
    assert core.decisions.queued is not None and core.decisions.queued.urgent  # the search, asked for already
    searched = core.decision_tick()
    assert searched.applied and searched.reason != te.PLACED and searched.after["max_link_load"] == 1


def test_a_placed_arrivals_rules_go_out_before_the_search_it_asks_for_starts(monkeypatch):
    # with a worker, the tick that takes a placed arrival starts nothing more: the shell resyncs (its rules out)
    # before the next tick sends the search (at 10k pins, building and sending its inputs: 70-100 ms of event loop)
    monkeypatch.setattr(te, "PLACE_BESIDE_FROM", 0)
    first = {"name": "a", "rings": [[f"10.0.0.{i}" for i in (3, 11, 1, 15, 7, 6, 4, 9)]]}
    second = {"name": "b", "rings": [[f"10.0.0.{i}" for i in (8, 12, 16, 2, 13, 14, 10, 5)]]}
    runner = SlowRunner()
    core = ControllerCore(config.parse(""), lambda: 0.0, runner=runner)
    core.topology = core.packet_in.topology = topologies.fat_tree(4)
    core.sync()
    core.set_jobs(config.validate_jobs([first], "request body"))
    te_step(core)
    while core.decisions.busy:
        core.decision_tick()
    core.set_jobs(config.validate_jobs([first, second], "request body"))
    placed = None
    while placed is None:
        placed = core.decision_tick()
    assert placed.reason == te.PLACED and not runner.busy and core.decisions.queued is not None
    core.decision_tick()
    assert runner.busy and runner.task[0].incremental is False  # the search, sent at the next tick
