"""Recovery correct at any moment (issue 25): the controller process is killed at every step of a sync sequence
(the fake switches keep what they received before it died) and restarted, again and again; the last one must
converge to exactly what a controller that never died would hold.

A restarted controller sees what it would see live: switches reconnect one by one in a random order (OVS backs
off up to 8 s), LLDP finds the links among connected switches a few at a time, the resync loop runs in
between, time passes. Its clock is the test's. Converged means: every host where it is (none at a fabric port),
the fabric's tiers right, every host reaching every other through what the switches hold, every switch holding
exactly what the controller believes it holds, which is what it wants, and the elephants pinned on link-disjoint
paths that the switches' tables really take.
"""

import contextlib
import random
import time

import pytest

from controller.core.events import LLDP_SETTLE_S
from controller.core.state import RECOVERY_MIN_S
from controller.southbound import framework as southbound
from tests import topologies
from tests.clock import FakeClock
from tests.decision_steps import te_step
from tests.fakeswitch import FakeSwitch, KilledError, MessageBudget
from tests.lab import STRIDE4, Lab, arp_request, pin_stride4, poll, stop_apps

switches, topo_event = southbound.topology()  # Ryu's or os-ken's topology app
Link, Port, Switch = switches.Link, switches.Port, switches.Switch
REF = topologies.fat_tree(4)
SEED = 25
FLAPPED = next(ln for ln in REF.links.values() if ln.src == 2000 and ln.dst == 3001)  # pod 0 aggregation - core


class Controller:
    """One controller process over the switches: the app, its clock, what its LLDP has found."""

    def __init__(self, switches, budget=None, down=()):
        self.lab = Lab(REF, switches)
        self.app, self.core = self.lab.app, self.lab.app.core
        self.clock = FakeClock(time.monotonic())
        self.core.clock = self.clock
        self.core.recovery_ends = self.clock.t + RECOVERY_MIN_S
        for sw in switches.values():
            sw.budget = MessageBudget(budget)
        self.down = {(ln.src, ln.src_port) for ln in down} | {(ln.dst, ln.dst_port) for ln in down}
        self.found = set()

    def _port(self, dpid, port_no):
        return self.lab._port(dpid, port_no, live=(dpid, port_no) not in self.down)

    def connect(self, dpid):
        self.lab.connect(dpid, self.down)
        self.lab.pump()  # its read-back replies

    def lldp(self, rng, everything=False):
        """LLDP finds some of the links it now can: both ends connected and up."""
        up = self.core.connected
        for link in REF.links.values():
            if (link.src in up and link.dst in up and link not in self.found and (link.src, link.src_port)
                    not in self.down and (everything or rng.random() < 0.5)):
                self.found.add(link)
                self.app.link_add(topo_event.EventLinkAdd(Link(self._port(link.src, link.src_port),
                                                               self._port(link.dst, link.dst_port))))

    def wait(self, seconds):
        self.clock.advance(seconds)

    def set_link(self, link, live):
        """Both ends of ``link`` go down or come back: port events, then LLDP's verdict on the link."""
        ends = ((link.src, link.src_port), (link.dst, link.dst_port))
        self.down = self.down - set(ends) if live else self.down | set(ends)
        for dpid, port in ends:
            self.app.port_change(topo_event.EventPortModify(self._port(dpid, port)))
        for ln in (link, link.reverse):
            pair = Link(self._port(ln.src, ln.src_port), self._port(ln.dst, ln.dst_port))
            if live:
                self.found.add(ln)
                self.app.link_add(topo_event.EventLinkAdd(pair))
            else:
                self.found.discard(ln)
                self.app.link_delete(topo_event.EventLinkDelete(pair))


def recovery_events(ctl, rng):
    """What a restarted controller goes through, as a list of steps to run (and to be killed between)."""
    events = []
    for dpid in rng.sample(sorted(REF.ports), len(REF.ports)):
        events += [lambda d=dpid: ctl.connect(d), lambda: ctl.lldp(rng), lambda: ctl.wait(rng.uniform(0, 0.8)),
                   ctl.app.resync]
    events += [lambda: ctl.lldp(rng, everything=True), ctl.app.resync, lambda: ctl.wait(LLDP_SETTLE_S),
               ctl.app.resync]
    return events


def settle(ctl, elephants, seconds=20):
    """After the events: hosts speak, three polls, a decision, recovery ends, the resync loop catches up."""
    for host in REF.hosts.values():
        ctl.lab.packet_in(host.dpid, host.port, arp_request(host, "10.0.0.254"))
    for s in (seconds, seconds + 2, seconds + 4):
        if elephants:
            poll(ctl.lab, elephants, s)
        ctl.wait(2)
        ctl.app.resync()
    te_step(ctl.core, wait=True)
    ctl.app.resync()
    ctl.wait(RECOVERY_MIN_S)
    ctl.app.resync()
    te_step(ctl.core, wait=True)
    ctl.app.resync()


def assert_converged(ctl, elephants, down=()):
    core, switches = ctl.core, ctl.lab.switches
    assert {ip: (h.dpid, h.port) for ip, h in core.topology.hosts.items()} == \
        {ip: (h.dpid, h.port) for ip, h in REF.hosts.items()}, "a host recovered at the wrong port"
    assert core.tiers.tiers == CLEAN_TIERS, core.tiers
    for dpid, sw in switches.items():  # what the switch holds == what the controller believes == what it wants
        assert sw.table.flows == core.installed[dpid].flows == core.plan.desired[dpid].flows, dpid
        assert sw.table.groups == core.installed[dpid].groups == core.plan.desired[dpid].groups, dpid
    for src in REF.hosts:
        for dst in REF.hosts:
            if src != dst:
                t = ctl.lab.trace(src, dst)
                want = REF.hosts[dst]
                assert t.delivered == {(want.dpid, want.port)} and not t.looped and not t.dropped, (src, dst)
    if elephants:
        used, dead = [], {(ln.src, ln.dst) for ln in down} | {(ln.dst, ln.src) for ln in down}
        for key in elephants:
            assert key in core.te.pinned, key
            t = ctl.lab.trace(key.src_ip, key.dst_ip, ip_proto=6, tcp_src=key.src_port, tcp_dst=key.dst_port)
            assert len(t.paths) == 1 and tuple(t.paths[0]) == core.te.pinned[key], key
            used += list(zip(t.paths[0], t.paths[0][1:]))
        assert len(used) == len(set(used)), "pinned elephants share a link"
        assert not set(used) & dead


CLEAN_TIERS = {}


@pytest.fixture(scope="module")
def clean():
    """A controller that never died: the tiers it infers, and the sizes of its first install's and of a
    link flap's sync steps under pinned elephants (where the kills go)."""
    lab = Lab(REF)
    steps = record_steps(lab)
    lab.bring_up()
    CLEAN_TIERS.update(lab.app.core.tiers.tiers)
    install = list(steps)
    pin_stride4(lab)
    ctl = Controller(lab.switches)  # (the same tables, driven by a controller whose links can flap)
    stop_apps()
    yield {"install": install, "flap": repin_steps(ctl)}
    stop_apps()


def record_steps(lab):
    """The number of modifications of each sync step the lab's app sends, as they are planned."""
    sizes, sync = [], lab.app.core.sync

    def recording():
        steps = sync()
        sizes.extend(len(s.changes) for s in steps)
        return steps
    lab.app.core.sync = recording
    return sizes


def repin_steps(ctl):
    """The sync steps of a link flap under pinned elephants (see ``flap``)."""
    flap(ctl, kill_after=None, rng=random.Random(SEED))
    return ctl.flap_steps


def flap(ctl, kill_after, rng):
    """Converge (a restart over converged tables), then the flapped link fails under an elephant and comes back:
    the forwarding moves off it and back, the decisions move the elephant off it and back (make-before-break).
    The controller is killed after ``kill_after`` modifications from the failure on."""
    for event in recovery_events(ctl, rng):
        event()
    settle(ctl, STRIDE4)
    ctl.flap_steps = record_steps(ctl.lab)
    for sw in ctl.lab.switches.values():
        sw.budget = MessageBudget(kill_after)
    for live in (False, True):
        ctl.set_link(FLAPPED, live)
        ctl.app.resync()
        result = te_step(ctl.core, wait=True)
        assert result.applied and result.moved, result
        ctl.app.resync()


@contextlib.contextmanager
def dies():
    """The controller process ends here: killed mid-sync, or (at the last point) just after it."""
    try:
        yield
    except KilledError:
        pass


def kill_points(sizes, extra=()):
    """Every step boundary of a sync, and the middle of every big step (a first install's, a reroute's)."""
    points, total = {0}, 0
    for n in sizes:
        inside = (2,) if n > 50 else ()
        points |= {total + n * q // 4 for q in inside} | {total + n}
        total += n
    return sorted(points | set(extra))


def test_killed_at_every_step_of_a_first_install_then_restarted_converges(clean):
    rng = random.Random(SEED)
    points = kill_points(clean["install"])
    assert len(points) >= 4
    for kill_after in points:
        switches = {d: FakeSwitch(d) for d in REF.ports}
        with dies():
            Controller(switches, budget=kill_after).lab.bring_up()  # reads back, learns hosts, installs it all
        ctl = Controller(switches)
        for event in recovery_events(ctl, rng):
            event()
        settle(ctl, [])
        assert_converged(ctl, [])
        stop_apps()


def test_killed_at_every_step_of_a_link_flap_under_elephants_then_restarted_converges(clean):
    rng = random.Random(SEED + 1)
    points = kill_points(clean["flap"])
    assert len(points) >= 5
    lab = Lab(REF)
    lab.bring_up()
    pin_stride4(lab)
    converged = {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in lab.switches.items()}
    stop_apps()
    for kill_after in points:
        switches = {d: FakeSwitch(d) for d in REF.ports}
        for d, (flows, groups) in converged.items():
            switches[d].table.flows, switches[d].table.groups = dict(flows), dict(groups)
        with dies():
            flap(Controller(switches), kill_after, rng)
        ctl = Controller(switches)
        for event in recovery_events(ctl, rng):
            event()
        settle(ctl, STRIDE4, seconds=40)
        assert_converged(ctl, STRIDE4)
        stop_apps()


@pytest.mark.parametrize("seed", range(3))
def test_three_restarts_in_a_row_killed_partway_through_recovery_converge(seed):
    rng = random.Random(seed)
    lab = Lab(REF)
    lab.bring_up()
    pin_stride4(lab)
    switches = lab.switches
    for restart in range(3):
        ctl = Controller(switches)
        events = recovery_events(ctl, rng)
        last = restart == 2
        for event in events if last else events[:rng.randrange(len(events))]:
            event()
    settle(ctl, STRIDE4, seconds=40)
    assert_converged(ctl, STRIDE4)
    stop_apps()
