"""Switches that connect together are asked for their table features and tables a few at a time (an Open vSwitch
answering twenty at once held every emulated path for 200-300 ms), each in the order that keeps its capacities
known before its first sync, and a read-back's time runs from when it was asked."""

from controller.core.state import READBACK_TIMEOUT_S
from controller.southbound.connect_queue import IN_FLIGHT, ConnectQueue
from tests import topologies
from tests.clock import FakeClock
from tests.lab import Lab, stop_apps

TF, READ = "OFPTableFeaturesStatsRequest", "OFPFlowStatsRequest"


def test_a_few_at_a_time_in_the_order_they_connected():
    clock = FakeClock()
    queue = ConnectQueue(in_flight=2, timeout_s=2.0, clock=clock)
    for dpid in (1, 2, 3, 4):
        queue.want(dpid, f"conn{dpid}")
    assert queue.due() == [(1, "conn1"), (2, "conn2")] and queue.due() == []
    queue.answered(1)
    assert queue.due() == [(3, "conn3")]
    queue.forget(2)  # left
    queue.want(3, "conn3b")  # reconnected: asked again, as the new connection, behind those waiting
    assert queue.due() == [(4, "conn4"), (3, "conn3b")]
    assert len(queue) == 2


def test_a_switch_that_never_answers_frees_its_turn_after_the_timeout():
    clock = FakeClock()
    queue = ConnectQueue(in_flight=1, timeout_s=2.0, clock=clock)
    queue.want(1, "a")
    queue.want(2, "b")
    assert queue.due() == [(1, "a")]
    clock.advance(1.9)
    assert queue.due() == []
    clock.advance(0.1)
    assert queue.due() == [(2, "b")]


def asked(lab, what):
    return {d for d, sw in lab.switches.items() if what in sw.received}


def test_switches_connecting_together_are_asked_in_turns_table_features_before_tables():
    lab = Lab(topologies.fat_tree(4))
    for dpid in lab.switches:  # all twenty connect before any answers (a controller restart)
        lab.connect(dpid)
    assert len(asked(lab, TF)) == IN_FLIGHT and asked(lab, READ) == asked(lab, TF)
    lab.pump()
    assert asked(lab, TF) == set(lab.switches) == asked(lab, READ)
    for sw in lab.switches.values():
        assert sw.received.index(TF) < sw.received.index(READ), "its capacities before its tables"
    core = lab.app.core
    assert all(d in core.installed and core.capabilities[d].max_entries for d in lab.switches)
    stop_apps()


def test_a_read_back_times_out_from_when_it_was_asked_not_from_the_connect():
    lab = Lab(topologies.fat_tree(4))
    clock = FakeClock(1000.0)
    lab.app.core.clock = clock
    for dpid in lab.switches:
        lab.connect(dpid)
    first = asked(lab, READ)
    for sw in lab.switches.values():
        sw.replies.clear()  # nobody answers
    clock.advance(READBACK_TIMEOUT_S + 1)
    lab.app._wipe_unread()
    wiped = {d for d, sw in lab.switches.items() if sw.received.count("OFPFlowMod")}
    assert wiped == first, "only the switches asked that long ago are rebuilt; those waiting their turn are not"
    stop_apps()
