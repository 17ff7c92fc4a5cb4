"""A job event is answered once its rules are in the switches (``wait_in_force`` in controller/shell/loops.py, the
core's ``sent_since`` and ``confirmed_upto``): a job that starts sending when its PUT is answered finds its paths
installed, not ECMP's hash (the answer used to come when the decision ended, the rules with the next resync).

The app of tests/lab.py over fake switches; the decision a REST call asks for is taken when it wakes the decision
loop, and the resync loop the lab stopped runs here as a green thread, with another that delivers the switches'
replies when they answer (the real loops take turns the same way: a decision ends, then the resync loop wakes)."""

import pytest

from controller.southbound import framework as southbound
from controller.state.jobs import HostPair
from tests import topologies
from tests.lab import Lab, stop_apps
from tests.unit.controller.rest_bench import call

RING = ["10.0.0.1", "10.0.0.5", "10.0.0.9", "10.0.0.13"]  # one host per pod: every pair crosses the core
PAIRS = [HostPair(RING[i], RING[(i + 1) % len(RING)]) for i in range(len(RING))]


@pytest.fixture
def lab(tmp_path, monkeypatch):
    path = tmp_path / "mlroute.yaml"
    path.write_text("te:\n  mode: mlroute\nrest:\n  token: t\n  max_decision_wait_s: 3\n")
    monkeypatch.setenv("MLROUTE_CONFIG", str(path))
    lab = Lab(topologies.fat_tree(4))
    lab.bring_up()
    assert lab.app.core.runner.wait_ready(60)
    threads = []

    def decide(resync=False, decide=False):
        """The decision loop, as the REST call wakes it: the decision taken to its end (its worker waited for:
        an unpatched threading.Event would not let a green thread take it)."""
        core, runner = lab.app.core, lab.app.core.runner
        ended = core.decision_tick()
        while decide and core.decisions.busy:
            waited = runner.wait(runner.deadline_s) if runner.busy else None
            ended = core.decision_tick(waited) or ended
        if resync or ended is not None:  # (the decision loop wakes the resync loop when a decision ended)
            lab.app.resync_owed = True

    def run(answering=True):
        """The resync loop (it wakes when a decision changed the desired rules), and the switches' replies
        delivered while ``answering``."""
        def resyncs():
            while True:
                if lab.app.resync_due():
                    lab.app.resync_owed = False
                    lab.app.resync()
                southbound.sleep(0.005)

        def replies():
            while True:
                lab.pump()
                southbound.sleep(0.005)

        for sw in lab.switches.values():
            sw.answers_barriers = answering
        lab.app.wake = decide
        threads.extend(southbound.spawn(fn) for fn in (resyncs, replies))

    lab.run = run
    yield lab
    for thread in threads:
        southbound.kill(thread)
    stop_apps()


def pinned_in_the_tables(lab):
    """The pairs whose traffic the switches' tables send along the pinned path (one path, the pin's)."""
    pinned = lab.app.core.te.pinned
    return [p for p in PAIRS if p in pinned and
            [tuple(path) for path in lab.trace(p.src_ip, p.dst_ip, ip_proto=6, tcp_src=40000, tcp_dst=50000).paths]
            == [tuple(pinned[p])]]


def put_ring(lab):
    status, body = call(lab.app, "PUT", "/mlroute/jobs/ring", {"rings": [RING]})
    assert status == 200, body
    return body["decision"]


def test_a_put_is_answered_once_its_pairs_are_pinned_in_the_switches_tables(lab):
    lab.run()
    decision = put_ring(lab)
    assert pinned_in_the_tables(lab) == PAIRS, "answered before the rules were in the switches"
    assert decision["applied"] and decision["in_force"] is True, decision
    assert lab.app.core.belief.pending_total() == 0, "every change confirmed by a barrier reply"
    waited = lab.app.core.metrics.registry.get_sample_value("mlroute_job_rules_confirmed_seconds_count",
                                                             {"confirmed": "true"})
    assert waited == 1, "the wait is in /metrics"


def test_switches_that_confirm_nothing_leave_the_answer_saying_so(lab):
    """(answered when rest.max_decision_wait_s is over: the rules stay pending, not believed held)"""
    lab.run(answering=False)
    decision = put_ring(lab)
    assert decision["applied"] and decision["in_force"] is False, decision
    assert decision["in_force_ms"] > 0
    assert lab.app.core.belief.pending_total() > 0
