"""te.detection auto's per-switch choice, fed events on an injected clock: flow stats until the export is heard and
covers the switch, sFlow while it is heard, flow stats again after ``silent_s`` of silence."""

import pytest

from controller.southbound.sflow.switch_detection import FLOWSTATS, SFLOW, Moves, SwitchDetection


def covered(_dpid):
    return True


def test_a_switch_starts_on_flow_stats_and_moves_once_its_export_is_heard():
    choice = SwitchDetection(silent_s=10)
    assert choice.of(1) == FLOWSTATS and not choice.tick(0.0, covered)
    choice.heard(1, 0.5)
    moves = choice.tick(1.0, covered)
    assert moves == Moves(frozenset({1}), frozenset())
    assert choice.of(1) == SFLOW and choice.uses_sflow(1) and choice.sampled == {1}
    assert choice.of(2) == FLOWSTATS  # a switch never heard of stays on flow stats
    assert not choice.tick(2.0, covered)  # a move is reported once


def test_an_export_that_does_not_cover_the_switch_waits():
    choice = SwitchDetection(silent_s=10)
    ready = set()
    choice.heard(1, 0.0)
    assert not choice.tick(1.0, lambda d: d in ready)  # a host port not mapped yet: its samples cannot be placed
    ready.add(1)
    assert choice.tick(2.0, lambda d: d in ready).to_sflow == {1}


def test_silence_moves_a_switch_back_and_a_sample_moves_it_again():
    choice = SwitchDetection(silent_s=10)
    choice.heard(1, 0.0)
    choice.tick(0.0, covered)
    for t in range(1, 10):  # counter samples every polling interval keep it
        choice.heard(1, float(t))
        assert not choice.tick(float(t), covered)
    assert not choice.tick(18.9, covered)  # last heard at 9: silent for 9.9 s
    assert choice.tick(19.0, covered) == Moves(frozenset(), frozenset({1}))
    assert choice.of(1) == FLOWSTATS
    assert not choice.tick(30.0, covered)  # silent: nothing more to report
    choice.heard(1, 31.0)
    assert choice.tick(31.5, covered).to_sflow == {1}


def test_a_late_report_of_an_old_sample_does_not_refresh_the_switch():
    choice = SwitchDetection(silent_s=10)
    choice.heard(1, 5.0)
    choice.tick(5.0, covered)
    choice.heard(1, 2.0)  # out of order: the latest stays
    assert choice.tick(15.0, covered).to_flowstats == {1}


def test_a_sample_heard_long_ago_does_not_move_a_switch_to_sflow():
    choice = SwitchDetection(silent_s=10)
    choice.heard(1, 0.0)
    assert not choice.tick(10.0, covered)
    assert choice.of(1) == FLOWSTATS


def test_switches_move_each_on_its_own():
    choice = SwitchDetection(silent_s=5)
    choice.heard(1, 0.0)
    choice.heard(2, 0.0)
    assert choice.tick(0.0, covered).to_sflow == {1, 2}
    choice.heard(2, 4.0)
    moves = choice.tick(6.0, covered)
    assert moves.to_flowstats == {1} and not moves.to_sflow
    assert choice.sampled == {2}


def test_silent_s_must_be_positive():
    with pytest.raises(ValueError, match="silent_s"):
        SwitchDetection(silent_s=0)
