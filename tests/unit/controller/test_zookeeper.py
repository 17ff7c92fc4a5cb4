"""controller/cluster/zookeeper.py against a real ZooKeeper server (tests/zookeeper.py, one per module):
election, the generation bumped at each takeover, a killed or paused leader replaced once its session expires,
ZooKeeper itself down (nobody takes over), shared jobs seen by every node."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.handlers.threading import SequentialThreadingHandler

from controller.cluster.zookeeper import Coordinator
from tests.zookeeper import until

ROOT = Path(__file__).resolve().parents[3]
_names = itertools.count()


class Recorder:
    """A Listener that keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.changed = threading.Condition()

    def _add(self, *event):
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def leading(self, generation):
        self._add("leading", generation)

    def following(self, generation):
        self._add("following", generation)

    def shared(self, key, value):
        self._add("shared", key, value)

    def wait_for(self, predicate, timeout_s=20.0):
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.events), timeout_s), self.events

    def led(self):
        return [e[1] for e in self.events if e[0] == "leading"]



@pytest.fixture
def cluster(zookeeper):
    """A factory of coordinators on a cluster name of this test's own; all stopped afterwards."""
    name, made = f"t{next(_names)}", []

    def make(node_id, session_timeout_s=1.0):
        rec = Recorder()
        node = Coordinator(zookeeper.hosts, name, node_id, f"http://{node_id}:8080", session_timeout_s, rec,
                           handler=SequentialThreadingHandler())
        node.start()
        made.append(node)
        return node, rec
    make.name = name
    yield make
    for node in made:
        node.stop()


def _process(zookeeper, name, node_id, session_timeout_s):
    """A node in a process of its own (tests/zookeeper.py run_node), started and joined."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.zookeeper", zookeeper.hosts, name, node_id,
                             str(session_timeout_s)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = []
    for line in proc.stdout:
        lines.append(line.split())
        if line.startswith("started"):
            return proc, lines
    raise AssertionError(f"node process ended: {lines}")


def test_one_of_three_leads_at_generation_one_and_all_know_the_members(cluster):
    nodes = [cluster(f"n{i}") for i in range(3)]
    until(lambda: sum(n.leading for n, _ in nodes) == 1)
    leader, rec = next((n, r) for n, r in nodes if n.leading)
    assert rec.led() == [1]
    until(lambda: all(n.leader and n.leader["id"] == leader.node_id for n, _ in nodes))
    until(lambda: all(len(n.members) == 3 for n, _ in nodes))
    assert {m["id"] for m in nodes[0][0].status()["members"]} == {"n0", "n1", "n2"}
    assert nodes[1][0].members["n1"]["rest"] == "http://n1:8080"
    for node, r in nodes:  # the followers learnt the generation too
        if node is not leader:
            r.wait_for(lambda ev: ("following", 1) in ev)
            assert node.generation == 1 and not r.led()


def test_a_leader_that_resigns_is_followed_by_another_at_a_larger_generation(cluster):
    a, ra = cluster("a")
    until(lambda: a.leading)
    b, rb = cluster("b")
    a.resign()
    rb.wait_for(lambda ev: ("leading", 2) in ev)
    ra.wait_for(lambda ev: ("following", 1) in ev)  # a stepped down at once
    until(lambda: b.leader is not None and b.leader["generation"] == 2)
    # a campaigns again and waits: b keeps leading, the generation stays
    assert b.leading and not a.leading


def test_a_killed_leader_is_replaced_once_its_session_expires(cluster, zookeeper):
    proc, lines = _process(zookeeper, cluster.name, "victim", 1.0)
    try:
        for line in proc.stdout:
            if line.startswith("leading"):
                break
        b, rb = cluster("b", session_timeout_s=1.0)
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        rb.wait_for(lambda ev: ("leading", 2) in ev)
        took = time.monotonic() - killed
        print(f"takeover after SIGKILL with a 1 s session: {took:.2f} s")
        until(lambda: b.leader == {"id": "b", "rest": "http://b:8080", "generation": 2})
    finally:
        proc.kill()
        proc.wait()


def test_a_paused_leader_steps_down_when_it_resumes_and_the_new_one_has_a_larger_generation(cluster, zookeeper):
    proc, _ = _process(zookeeper, cluster.name, "paused", 1.0)
    try:
        assert next(proc.stdout).split() == ["leading", "1"]
        b, rb = cluster("b", session_timeout_s=1.0)
        proc.send_signal(signal.SIGSTOP)
        rb.wait_for(lambda ev: ("leading", 2) in ev)
        proc.send_signal(signal.SIGCONT)
        # resumed, it learns its session expired and steps down; it never led again meanwhile
        seen = []
        for line in proc.stdout:
            seen.append(line.split())
            if seen[-1][0] == "following":
                break
        assert seen[-1] == ["following", "1"] and ["leading", "2"] not in seen
        assert b.leading
    finally:
        proc.kill()
        proc.wait()


def test_zookeeper_down_the_leader_keeps_its_role_and_nobody_takes_over(cluster, zookeeper):
    a, ra = cluster("a", session_timeout_s=4.0)
    until(lambda: a.leading)
    b, rb = cluster("b", session_timeout_s=4.0)
    until(lambda: b.generation == 1)
    zookeeper.stop()
    try:
        until(lambda: a.state == "suspended" and b.state == "suspended")
        time.sleep(6.0)  # longer than the session timeout: no quorum, so no expiry, no election
        assert a.leading and not b.leading
    finally:
        zookeeper.start()
    until(lambda: a.state == "connected" and b.state == "connected")
    assert a.leading and not b.leading and ra.led() == [1] and rb.led() == []
    assert ("following", 1) not in ra.events  # never stepped down


def test_jobs_written_through_one_node_reach_every_node(cluster):
    nodes = [cluster(f"n{i}") for i in range(3)]
    jobs = [{"name": "ring0", "hosts": ["10.0.0.1", "10.0.0.5"]}]
    nodes[2][0].put("jobs", jobs)
    for _, rec in nodes:
        rec.wait_for(lambda ev: ("shared", "jobs", jobs) in ev)
    with pytest.raises(ValueError, match="unknown shared key"):
        nodes[0][0].put("secrets", 1)


def test_only_the_leader_publishes_the_view(cluster):
    a, ra = cluster("a")
    until(lambda: a.leading)
    b, rb = cluster("b")
    assert not b.publish_view({"pinned": 3})
    assert a.publish_view({"pinned": 4})
    rb.wait_for(lambda ev: ("shared", "view", {"pinned": 4, "generation": 1, "leader": "a"}) in ev)


def test_a_follower_that_leaves_says_nothing_of_an_interrupted_election(cluster, caplog):
    """stop() cancels the lock a follower waits for: it leaves; it is not an election interrupted (a container's
    stop logged "election interrupted (CancelledError); campaigning again", docs/docker.md)."""
    a, _ = cluster("a")
    until(lambda: a.leading)
    b, _ = cluster("b")
    until(lambda: len(b.members) == 2 and b.leader is not None)
    with caplog.at_level("WARNING", logger="mlroute"):
        b.stop()
        time.sleep(0.5)  # its campaign thread sees the cancelled lock
    assert "election interrupted" not in caplog.text, caplog.text
    assert a.leading
