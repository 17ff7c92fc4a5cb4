"""The incremental desired state equals the from-scratch reference (sync.desired_state) after any events."""

import pickle
import random

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.desired import sync
from controller.desired.flowcopy import CONTROLLER_COPY, MODES, NewFlowCopy
from controller.desired.plan_state import PlanState, _changed_pins
from controller.desired.rules import SwitchRules, diff_keys, diff_switch
from controller.state.accounting import Accounting
from controller.state.flowkey import PROTO_TCP, PROTO_UDP, FlowKey
from controller.state.jobs import HostPair
from controller.state.tiers import infer_tiers
from tests import topologies

IDLE = 10
OPS = ("fail_link", "restore_link", "drop_switch", "restore_switch", "new_flow", "flow_gone", "flow_moves",
       "forget_host", "relearn_host", "move_host", "pin", "pin_pair", "unpin", "describe_switch", "noop")


class World:
    """A topology and the controller's other inputs, changed by events as the controller would see them."""

    def __init__(self, topo, copy=CONTROLLER_COPY):
        self.topo = topo
        self.copy = copy
        self.accounting = Accounting()
        self.pinned = {}
        self.graph = topo.graph()
        self.tiers = infer_tiers(self.graph, topo.access_switches())
        self.cables = sorted({tuple(sorted(((k.src, k.src_port), (k.dst, k.dst_port)))) for k in topo.links.values()})
        self.all_hosts = dict(topo.hosts)
        self.removed = {}  # dpid -> its ports, while it is gone
        self.flows_changed = set()

    def graph_changed(self):
        self.graph = self.topo.graph()
        self.tiers = infer_tiers(self.graph, self.topo.access_switches())

    def apply(self, op, rng):
        if op in ("fail_link", "restore_link", "drop_switch", "restore_switch"):
            self._topology_op(op, rng)
        else:
            self._state_op(op, rng)

    def _topology_op(self, op, rng):
        t = self.topo
        if op == "fail_link":
            (a, pa), (b, pb) = rng.choice(self.cables)
            t.port_down(a, pa)
            t.port_down(b, pb)
            self.graph_changed()
        elif op == "restore_link":
            (a, pa), (b, pb) = rng.choice(self.cables)
            if a in t.ports and b in t.ports:
                t.port_up(a, pa)
                t.port_up(b, pb)
                t.add_link(a, pa, b, pb)
                t.add_link(b, pb, a, pa)
                self.graph_changed()
        elif op == "drop_switch":
            dpid = rng.choice(sorted(t.ports))
            self.removed[dpid] = set(t.ports[dpid])
            t.remove_switch(dpid)
            self.graph_changed()
        elif op == "restore_switch" and self.removed:
            dpid = rng.choice(sorted(self.removed))
            t.add_switch(dpid, self.removed.pop(dpid))
            for (a, pa), (b, pb) in self.cables:
                if dpid in (a, b) and a in t.ports and b in t.ports:
                    t.add_link(a, pa, b, pb)
                    t.add_link(b, pb, a, pa)
            self.graph_changed()

    def _state_op(self, op, rng):
        t = self.topo
        v6 = rng.random() < 0.5  # a flow between two IPv6 hosts or two IPv4 ones (a flow stays in one family)
        family = sorted((h for h in t.hosts.values() if (":" in h.ip) == v6), key=lambda h: h.ip)
        if op in ("new_flow", "flow_moves") and len(family) >= 2:
            src, dst = rng.sample(family, 2)
            key = FlowKey(src.ip, dst.ip, rng.choice((PROTO_TCP, PROTO_UDP)), rng.randrange(1000, 1010), 5201)
            where = (src.dpid, src.port) if op == "new_flow" else (dst.dpid, dst.port)
            self.accounting.observe(key, *where)
            self.flows_changed.add(key)
        elif op == "flow_gone" and self.accounting:
            key = rng.choice(sorted(self.accounting))
            self.accounting.removed(key, self.accounting[key][0])
            self.flows_changed.add(key)
        elif op == "forget_host" and t.hosts:
            del t.hosts[rng.choice(sorted(t.hosts))]
        elif op == "relearn_host":
            h = self.all_hosts[rng.choice(sorted(self.all_hosts))]
            t.learn_host(h.ip, h.mac, h.dpid, h.port)
        elif op == "move_host" and t.hosts:
            h = t.hosts[rng.choice(sorted(t.hosts))]
            other = self.all_hosts[rng.choice(sorted(self.all_hosts))]
            t.learn_host(h.ip, h.mac, other.dpid, other.port)  # two IPs behind one port: shared flow-miss rules
        elif op in ("pin", "pin_pair") and self.accounting:
            key = rng.choice(sorted(self.accounting))
            path = self.some_path(key, rng)
            if path:
                self.pinned = dict(self.pinned)
                self.pinned[key if op == "pin" else HostPair(key.src_ip, key.dst_ip)] = path
        elif op == "describe_switch":  # a switch says what it is: under te.flow_copy auto, its copy policy flips
            dpid = rng.choice(sorted(self.topo.ports))
            self.copy = self.copy.described(dpid, "Nicira, Inc.", "Open vSwitch" if rng.random() < 0.6 else "X")
        elif op == "unpin" and self.pinned:
            self.pinned = dict(self.pinned)
            del self.pinned[rng.choice(sorted(self.pinned, key=repr))]

    def some_path(self, key, rng):
        src, dst = self.topo.hosts.get(key.src_ip), self.topo.hosts.get(key.dst_ip)
        if src is None or dst is None or src.dpid not in self.graph or dst.dpid not in self.graph:
            return None
        try:
            paths = list(nx.all_shortest_paths(self.graph, src.dpid, dst.dpid))
        except nx.NetworkXNoPath:
            return None
        return tuple(rng.choice(paths))

    def reference(self):
        return sync.desired_state(self.topo, self.tiers, self.accounting, self.pinned, stagger=True,
                                  idle_timeout=IDLE, graph=self.graph, copy=self.copy)


def snapshot(desired):
    return {d: SwitchRules(dict(r.flows), dict(r.groups)) for d, r in desired.items()}


def check(world, state, flows=None):
    before = snapshot(state.desired)
    dirty = state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned, flows,
                         copy=world.copy)
    assert state.desired == world.reference()
    untouched = [d for d in state.desired if d not in dirty]
    assert all(before.get(d) == state.desired[d] for d in untouched), "a switch that changed was not reported"
    for dpid, keys in state.changed.items():  # the keys it reports are all a diff needs to look at
        assert dpid in dirty
        if keys is None:
            assert dpid not in before
        else:
            full = diff_switch(before[dpid], state.desired[dpid])
            assert diff_keys(before[dpid], state.desired[dpid], *keys) == full


FABRICS = {"fattree4": lambda: topologies.fat_tree(4), "leafspine": lambda: topologies.leaf_spine(3, 4, 2),
           "ring": lambda: topologies.ring(5), "fattree4-aligned": lambda: topologies.fat_tree(4, aligned=True),
           "fattree4-dual-stack": lambda: topologies.dual_stack(topologies.fat_tree(4)),
           "ring-dual-stack": lambda: topologies.dual_stack(topologies.ring(5)),
           "fattree4-aligned-dual-stack": lambda: topologies.dual_stack(topologies.fat_tree(4, aligned=True))}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from(sorted(FABRICS)), seed=st.integers(0, 2 ** 32 - 1),
       ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=30), mode=st.sampled_from(MODES))
def test_incremental_state_equals_the_full_rebuild_after_random_events(fabric, seed, ops, mode):
    copy = NewFlowCopy(mode=mode, hold_s=2)
    world = World(FABRICS[fabric](), copy)
    rng = random.Random(seed)
    state = PlanState(stagger=True, idle_timeout=IDLE, copy=copy)
    check(world, state)
    for op in ops:
        world.apply(op, rng)
        flows, world.flows_changed = world.flows_changed, set()
        check(world, state, flows)


def test_a_new_transport_flow_touches_its_ingress_switch_only():
    world = World(topologies.fat_tree(4))
    state = PlanState(stagger=True, idle_timeout=IDLE)
    state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned)
    h1, h16 = world.topo.hosts["10.0.0.1"], world.topo.hosts["10.0.0.16"]
    key = FlowKey(h1.ip, h16.ip, PROTO_TCP, 40000, 5201)
    world.accounting.observe(key, h1.dpid, h1.port)
    assert state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned, {key}) == {h1.dpid}
    assert state.desired == world.reference()


def test_a_link_failure_rewrites_only_the_switches_whose_rules_change():
    world = World(topologies.fat_tree(4))
    state = PlanState(stagger=True, idle_timeout=IDLE)
    state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned)
    link = next(k for k in world.topo.links.values() if (k.src, k.dst) == (2300, 3001))
    world.topo.port_down(link.src, link.src_port)
    world.topo.port_down(link.dst, link.dst_port)
    world.graph_changed()
    before = snapshot(state.desired)
    dirty = state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned)
    assert state.desired == world.reference()
    assert dirty == {d for d in before if before[d] != state.desired[d]}
    assert 2300 in dirty and 3001 in dirty and len(dirty) < len(before) / 2


def test_a_new_host_and_an_unchanged_graph_rebuild_nothing_else():
    """Off a Clos every switch gets the new host's entries; on a Clos (compact forwarding) only the switches
    whose compact table changes are touched."""
    for topo, every in ((topologies.ring(5), True), (topologies.fat_tree(4), False)):
        world = World(topo)
        gone = world.topo.hosts.pop("10.0.0.5" if not every else "10.0.0.3")
        state = PlanState(stagger=True, idle_timeout=IDLE)
        state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned)
        assert state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned, ()) == set()
        before = snapshot(state.desired)
        world.topo.learn_host(gone.ip, gone.mac, gone.dpid, gone.port)
        dirty = state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned, ())
        assert state.desired == world.reference()
        assert dirty == {d for d in before if before[d] != state.desired[d]}
        if every:
            assert dirty == set(world.topo.ports)  # every switch routes toward it, its own switch delivers
        else:
            assert gone.dpid in dirty and len(dirty) < len(world.topo.ports)


def test_a_host_that_falls_inside_its_prefixes_changes_only_its_own_switch():
    """Pod-aligned addresses: a host learned inside its edge's prefix changes no other switch's table."""
    world = World(topologies.fat_tree(4, aligned=True))
    gone = world.topo.hosts.pop("10.1.0.2")
    state = PlanState(stagger=True, idle_timeout=IDLE)
    state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned)
    world.topo.learn_host(gone.ip, gone.mac, gone.dpid, gone.port)
    dirty = state.update(world.topo, world.graph, world.tiers, world.accounting, world.pinned, ())
    assert state.desired == world.reference()
    assert dirty == {gone.dpid}




def test_failures_and_restores_on_a_larger_fat_tree_equal_the_full_rebuild():
    """k=8: aggregation-core and edge-aggregation links fail one after another (some destinations' distances
    move, some only lose a next hop) and come back, the plan equal to the reference after each."""
    world = World(topologies.fat_tree(8))
    state = PlanState(stagger=True, idle_timeout=IDLE)
    check(world, state)
    top = max(world.topo.ports)
    core_links = [k for k in world.topo.links.values() if k.dst == top][:2]
    below = next(k for k in world.topo.links.values() if k.dst == core_links[0].src and k.src < 2000)
    failed = []
    for link in (*core_links, below):
        world.topo.port_down(link.src, link.src_port)
        world.topo.port_down(link.dst, link.dst_port)
        world.graph_changed()
        check(world, state)
        failed.append(link)
    for link in failed:
        world.topo.port_up(link.src, link.src_port)
        world.topo.port_up(link.dst, link.dst_port)
        world.topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
        world.topo.add_link(link.dst, link.dst_port, link.src, link.src_port)
        world.graph_changed()
        check(world, state)


PIN_KEYS = [FlowKey(f"10.0.0.{i}", "10.0.1.1", PROTO_TCP, 1000 + i, 5201) for i in range(12)] + \
    [HostPair(f"10.0.0.{i}", "10.0.1.1") for i in range(4)]


@settings(max_examples=200, deadline=None)
@given(old=st.dictionaries(st.sampled_from(PIN_KEYS), st.tuples(st.integers(1, 3), st.integers(1, 3))),
       edits=st.lists(st.tuples(st.sampled_from(("set", "drop", "shuffle")), st.sampled_from(PIN_KEYS),
                                st.integers(1, 3)), max_size=6),
       copied=st.booleans(), seed=st.integers(0, 100))
def test_the_pins_that_changed_are_found_however_the_keys_are_ordered(old, edits, copied, seed):
    """Pins walked in step (same keys in the same order), out of step (dropped, added, reordered), and with
    keys equal but not the same objects (a worker's decision comes back unpickled)."""
    new = dict(old)
    for what, key, hop in edits:
        if what == "set":
            new[key] = (hop, hop)
        elif what == "drop":
            new.pop(key, None)
        else:
            items = list(new.items())
            random.Random(seed).shuffle(items)
            new = dict(items)
    if copied:
        new = pickle.loads(pickle.dumps(new))
    assert _changed_pins(old, new) == {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


class CountedKey:
    """A pin key that counts its hashes (a flow key hashes in Python: each costs the event loop)."""

    hashes = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        CountedKey.hashes += 1
        return hash(self.n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountedKey) and other.n == self.n


def test_pins_repaired_at_the_end_are_found_without_looking_up_the_rest():
    """A repaired decision keeps the valid pins in order and re-adds the broken ones last: four of 1,000 moved
    that way cost a few look-ups, not one per pin after the first (every link failure under 10k pins at k=24
    spent ~40 ms of the event loop there)."""
    keys = [CountedKey(n) for n in range(1000)]
    old = {k: (1, 2) for k in keys}
    broken = [keys[100], keys[101], keys[500], keys[900]]
    new = {k: p for k, p in old.items() if k not in broken}
    new.update({k: (1, 3) for k in broken})
    new[keys[700]] = (2, 2)  # and one kept in place but changed
    CountedKey.hashes = 0
    changed = _changed_pins(old, new)
    hashes, CountedKey.hashes = CountedKey.hashes, 0
    assert changed == set(broken) | {keys[700]}
    assert hashes <= 6 * len(changed)  # a look-up in both, and the set of those changed
