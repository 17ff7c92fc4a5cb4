"""controller/cluster/zookeeper.py against a real ZooKeeper server (tests/zookeeper.py, one per module):
election, the generation bumped at each takeover, a killed or paused leader replaced once its session expires,
ZooKeeper itself down (nobody takes over), shared jobs seen by every node."""

from __future__ import annotations

import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import SequentialThreadingHandler

from controller.cluster.liveness import LivenessServer
from controller.cluster.zookeeper import Coordinator
from tests.zookeeper import until

pytestmark = pytest.mark.zookeeper  # a real ZooKeeper server: run alone (scripts/test.sh)

ROOT = Path(__file__).resolve().parents[4]
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

    def make(node_id, session_timeout_s=1.0, rec=None, start=True, liveness=False):
        rec = rec or Recorder()
        node = Coordinator(zookeeper.hosts, name, node_id, f"http://{node_id}:8080", session_timeout_s, rec,
                           handler=SequentialThreadingHandler(),
                           liveness=LivenessServer("127.0.0.1") if liveness else None)
        made.append(node)
        if start:
            node.start()
        return node, rec
    make.name = name
    yield make
    for node in made:
        node.stop()


class NodeProcess:
    """A node in a process of its own (tests/zookeeper.py run_node): its event lines read by a thread into a
    queue, so every wait for a line is bounded (a node that never says it would hang the test otherwise), and no
    line is lost between waits (``leading 1`` may come before ``started``)."""

    def __init__(self, zookeeper, name, node_id, session_timeout_s, *liveness):
        """``liveness``: the host its liveness server binds, and the host it publishes (default the same)."""
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zookeeper", zookeeper.hosts, name, node_id,
                                      str(session_timeout_s), *liveness], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        self.lines: list[list[str]] = []  # every line read so far, in order
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next = 0
        self.expect("started")

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put(line.split())
        self._queue.put(None)

    def expect(self, word, timeout_s=20.0):
        """The lines up to and including the next one starting with ``word`` (from where the last call stopped);
        fails after ``timeout_s`` or when the process ends first."""
        deadline = time.monotonic() + timeout_s
        seen = []
        while True:
            while self._next < len(self.lines):
                seen.append(self.lines[self._next])
                self._next += 1
                if seen[-1] and seen[-1][0] == word:
                    return seen
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {word!r} line within {timeout_s:g} s; lines so far: {self.lines}") from None
            if line is None:
                raise AssertionError(f"node process ended before a {word!r} line: {self.lines}")
            self.lines.append(line)

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


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
    # b is in line (its lock node queued) before a resigns; else a, first in line again, may win generation 2
    until(lambda: len(a.client.get_children(f"/mlroute/{cluster.name}/election")) == 2)
    a.resign()
    rb.wait_for(lambda ev: ("leading", 2) in ev)
    ra.wait_for(lambda ev: ("following", 1) in ev)  # a stepped down at once
    until(lambda: b.leader is not None and b.leader["generation"] == 2)
    # a campaigns again and waits: b keeps leading, the generation stays
    assert b.leading and not a.leading


def test_a_killed_leader_is_replaced_once_its_session_expires(cluster, zookeeper):
    victim = NodeProcess(zookeeper, cluster.name, "victim", 1.0)
    try:
        victim.expect("leading", timeout_s=1.0 + 1.0)  # alone: leads within its session + 1 s (maybe before started)
        b, rb = cluster("b", session_timeout_s=1.0)
        killed = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        rb.wait_for(lambda ev: ("leading", 2) in ev)
        took = time.monotonic() - killed
        print(f"takeover after SIGKILL with a 1 s session: {took:.2f} s")
        until(lambda: b.leader == {"id": "b", "rest": "http://b:8080", "generation": 2})
    finally:
        victim.close()


def test_a_paused_leader_steps_down_when_it_resumes_and_the_new_one_has_a_larger_generation(cluster, zookeeper):
    paused = NodeProcess(zookeeper, cluster.name, "paused", 1.0)
    try:
        assert paused.expect("leading")[-1] == ["leading", "1"]
        b, rb = cluster("b", session_timeout_s=1.0)
        paused.proc.send_signal(signal.SIGSTOP)
        rb.wait_for(lambda ev: ("leading", 2) in ev)
        paused.proc.send_signal(signal.SIGCONT)
        # resumed, it learns its session expired and steps down at its own generation first; never led again
        seen = paused.expect("following")
        assert seen[-1] == ["following", "1"] and ["leading", "2"] not in seen
        assert b.leading
    finally:
        paused.close()


def test_zookeeper_down_the_leader_keeps_its_role_and_nobody_takes_over(cluster, zookeeper):
    # (a restarted server gives each restored session one timeout from its start to reconnect; with 4-6 s, a
    # server starved by a loaded machine (a soak beside Mininet runs) once took longer than that to answer the
    # reconnection, and the leader's session expired, rightly: 10 s leaves it the time)
    a, ra = cluster("a", session_timeout_s=10.0)
    until(lambda: a.leading)
    b, rb = cluster("b", session_timeout_s=10.0)
    until(lambda: b.generation == 1)
    zookeeper.stop()
    try:
        until(lambda: a.state == "suspended" and b.state == "suspended")
        time.sleep(11.0)  # longer than the session timeout: no quorum, so no expiry, no election
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


# -- the election's interleavings, forced (issue 38) -------------------------------------------------------------
def _lock_holder_gone(zookeeper, name, node_id):
    """``node_id``'s election lock node vanishes behind its back (as when its session expired while paused)."""
    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start()
    try:
        election = f"/mlroute/{name}/election"
        for child in zk.get_children(election):
            if zk.get(f"{election}/{child}")[0] == node_id.encode():
                zk.delete(f"{election}/{child}")
    finally:
        zk.stop()
        zk.close()


def _expire(zookeeper, node):
    """``node``'s session expires now (closed by a second client on the same session id), as after a pause."""
    zk = KazooClient(hosts=zookeeper.hosts, client_id=node.client.client_id)
    zk.start()
    zk.stop()
    zk.close()


def test_a_node_never_reports_following_for_the_generation_it_is_taking(cluster):
    """The generation's watch delivers this node's own bump before its election returns (the commit's answer is
    held until the watch ran): it must not report following 1 (before: [following 1, leading 1])."""
    a, ra = cluster("a", start=False)
    watched = threading.Event()
    real_watch, real_transaction = a._generation_changed, a.client.transaction

    def watch(data, stat):
        result = real_watch(data, stat)
        if data == b"1":
            watched.set()
        return result

    class CommitAnsweredAfterTheWatch:
        def __init__(self, tx):
            self.tx = tx

        def __getattr__(self, name):
            return getattr(self.tx, name)

        def commit(self):
            results = self.tx.commit()
            watched.wait(5.0)
            return results

    a._generation_changed = watch
    a.client.transaction = lambda: CommitAnsweredAfterTheWatch(real_transaction())
    a.start()
    ra.wait_for(lambda ev: ("leading", 1) in ev)
    assert watched.is_set()
    assert [e for e in ra.events if e[0] != "shared"] == [("leading", 1)]
    assert a.leading and a.generation == 1


class BlockingStepDown(Recorder):
    """A listener whose "following" at ``generation`` waits (up to ``hold_s``) for a newer generation's report:
    if the coordinator lets the watch report past its own step-down, that report lands first."""

    def __init__(self, generation, hold_s=3.0):
        super().__init__()
        self.generation, self.hold_s = generation, hold_s
        self.stepping_down = threading.Event()

    def following(self, generation):
        if generation == self.generation and not self.stepping_down.is_set():
            self.stepping_down.set()
            with self.changed:
                self.changed.wait_for(lambda: any(e[0] == "following" and e[1] > generation for e in self.events),
                                      self.hold_s)
        super().following(generation)


def test_a_step_down_is_reported_before_any_newer_generation(cluster, zookeeper):
    """a leads at 1 and loses its lock node (b takes 2); a steps down and, while it reports following 1, c is
    elected at 3: a's reports stay in order (before: following 3 came before following 1, as seen after a
    paused process resumed)."""
    a, ra = cluster("a", rec=BlockingStepDown(1))
    until(lambda: a.leading)
    b, rb = cluster("b")
    c, rc = cluster("c")
    until(lambda: len(a.members) == 3)
    until(lambda: len(a.client.get_children(f"/mlroute/{cluster.name}/election")) == 3)
    _lock_holder_gone(zookeeper, cluster.name, "a")
    rb.wait_for(lambda ev: ("leading", 2) in ev)
    a.resign()
    assert ra.stepping_down.wait(5.0)
    b.resign()  # c is next in line (a's lock node is gone): generation 3
    rc.wait_for(lambda ev: ("leading", 3) in ev)
    ra.wait_for(lambda ev: ("following", 3) in ev)
    follows = [e[1] for e in ra.events if e[0] == "following"]
    assert follows == sorted(follows) and follows[0] == 1, ra.events


def test_a_session_lost_while_waiting_for_the_lock_does_not_end_the_next_term(cluster, zookeeper):
    """b waits for the lock; its session expires and kazoo's lock goes on waiting in the new one; when it gets
    the lock it leads, and stays leading (before: the old session's loss deposed it at once: leading 2,
    following 2, an extra election, every switch flipping MASTER/SLAVE/MASTER)."""
    a, ra = cluster("a", session_timeout_s=2.0)
    until(lambda: a.leading)
    b, rb = cluster("b", session_timeout_s=2.0)
    until(lambda: b.generation == 1 and len(a.client.get_children(f"/mlroute/{cluster.name}/election")) == 2)
    _expire(zookeeper, b)
    until(lambda: b.sessions == 2 and b.state == "connected")
    until(lambda: len(a.client.get_children(f"/mlroute/{cluster.name}/election")) == 2)  # b waits again
    a.resign()
    rb.wait_for(lambda ev: ("leading", 2) in ev)
    time.sleep(1.0)  # a stale deposition acts at once; this leaves it time to show
    assert b.leading and ("following", 2) not in rb.events, rb.events
    assert b.leader_changes == 1


def test_a_lone_node_leads_within_its_session_plus_one_second_every_time(cluster):
    """Each node in turn is alone (the one before it left): it leads at the next generation within its session
    timeout plus one second, having reported following only the generation before it (its predecessor's)."""
    for i in range(8):
        node, rec = cluster(f"lone{i}", session_timeout_s=1.0)
        mine = i + 1
        rec.wait_for(lambda ev, mine=mine: ("leading", mine) in ev, timeout_s=1.0 + 1.0)
        assert [e for e in rec.events if e[0] != "shared"] == [("following", i)] * (i > 0) + [("leading", mine)]
        node.stop()  # the next one is alone again


def test_zookeeper_stopped_mid_campaign_a_lone_node_leads_once_it_is_back(cluster, zookeeper):
    """ZooKeeper dies between the lock and the generation's bump; back 1 s later, the lone node leads within its
    session timeout plus one second."""
    a, ra = cluster("a", session_timeout_s=4.0, start=False)
    real_bump, stopped = a._bump, threading.Event()

    def bump():
        if not stopped.is_set():
            zookeeper.stop()
            stopped.set()
        return real_bump()

    a._bump = bump
    a.start()
    try:
        assert stopped.wait(10.0)
        time.sleep(1.0)
    finally:
        zookeeper.start()
    ra.wait_for(lambda ev: any(e[0] == "leading" for e in ev), timeout_s=4.0 + 1.0)
    assert a.leading and not any(e[0] == "following" for e in ra.events), ra.events


def test_an_election_interrupted_after_the_lock_leaves_no_node_to_wait_on(cluster):
    """The connection is lost between the lock and the bump (the session lives on, so its lock node stays): the
    next turn must not queue behind that node of its own (before: a lone node waited on itself until its session
    expired, never, while the session lived; seen under CI's load as a node that never led)."""
    a, ra = cluster("a", session_timeout_s=4.0, start=False)
    real_bump, failed = a._bump, []

    def bump():
        if not failed:
            failed.append(1)
            raise ConnectionLoss("injected: the connection dropped before the bump")
        return real_bump()

    a._bump = bump
    a.start()
    ra.wait_for(lambda ev: ("leading", 1) in ev, timeout_s=4.0 + 1.0)
    assert failed and a.leading
    assert len(a.client.get_children(f"/mlroute/{cluster.name}/election")) == 1


def test_an_exception_in_the_campaign_is_logged_with_its_stack_and_the_campaign_goes_on(cluster, caplog):
    a, ra = cluster("a", start=False)
    real_bump, failed = a._bump, []

    def bump():
        if not failed:
            failed.append(1)
            raise RuntimeError("injected into the campaign")
        return real_bump()

    a._bump = bump
    with caplog.at_level(logging.WARNING, logger="mlroute"):
        a.start()
        ra.wait_for(lambda ev: ("leading", 1) in ev, timeout_s=1.0 + 1.0)
    failures = [r for r in caplog.records if "campaign failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert "injected into the campaign" in caplog.text and "Traceback" in caplog.text
    assert a.leading


# -- a dead leader proven by its liveness port (controller/cluster/liveness.py) ---------------------------------
LONG_SESSION_S = 30.0  # far longer than any takeover on proof: a takeover before it did not wait for the session


def test_a_killed_leader_is_replaced_on_proof_without_waiting_for_its_session(cluster, zookeeper):
    victim = NodeProcess(zookeeper, cluster.name, "victim", LONG_SESSION_S, "127.0.0.1")
    try:
        victim.expect("leading", timeout_s=10)
        b, rb = cluster("b", session_timeout_s=LONG_SESSION_S, liveness=True)
        c, rc = cluster("c", session_timeout_s=LONG_SESSION_S, liveness=True)
        until(lambda: all(n.leader and n.leader.get("token") and n._watch and n._watch[1].verified for n in (b, c)))
        assert b.leader["liveness"].startswith("127.0.0.1:")
        killed = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        until(lambda: b.leading or c.leading, timeout_s=LONG_SESSION_S / 3)
        took = time.monotonic() - killed
        new, other = (b, c) if b.leading else (c, b)
        assert new.generation == 2 and not other.leading
        until(lambda: other.leader is not None and other.leader["id"] == new.node_id)
        assert b.dead_leaders_released + c.dead_leaders_released >= 1
        print(f"takeover after SIGKILL on proof, {LONG_SESSION_S:g}-s session: {took:.2f} s")
    finally:
        victim.close()


@pytest.mark.parametrize("pause_s, session_s", [(2.0, 4.0), (6.0, 8.0)])
def test_a_paused_leader_is_never_taken_for_dead(cluster, zookeeper, pause_s, session_s):
    """SIGSTOP keeps the process's sockets open: no proof, the followers wait; resumed within its session, the
    leader still leads at its generation, and nobody else led meanwhile."""
    paused = NodeProcess(zookeeper, cluster.name, "paused", session_s, "127.0.0.1")
    try:
        paused.expect("leading", timeout_s=10)
        b, rb = cluster("b", session_timeout_s=session_s, liveness=True)
        until(lambda: b._watch is not None and b._watch[1].verified)
        paused.proc.send_signal(signal.SIGSTOP)
        time.sleep(pause_s)  # shorter than its session: its sockets are open, its session alive
        assert not b.leading and b.dead_leaders_released == 0
        paused.proc.send_signal(signal.SIGCONT)
        time.sleep(0.5)
        assert not b.leading and rb.led() == [] and b.leader["id"] == "paused" and b.leader["generation"] == 1
        paused.proc.stdin.close()  # a clean stop: its session closed, b takes over (generation 2)
        rb.wait_for(lambda ev: ("leading", 2) in ev)
        assert ["following", "1"] not in paused.lines
    finally:
        paused.close()


def test_a_liveness_address_never_verified_proves_nothing(cluster, zookeeper):
    """The leader publishes an address where nothing of its own answers (a wrong advertised host): refused
    connections there prove nothing, so its death is seen only when its session expires."""
    session = 3.0
    victim = NodeProcess(zookeeper, cluster.name, "victim", session, "127.0.0.1", "127.0.0.2")  # 127.0.0.2: refused
    try:
        victim.expect("leading", timeout_s=10)
        b, rb = cluster("b", session_timeout_s=session, liveness=True)
        until(lambda: b._watch is not None)
        killed = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        rb.wait_for(lambda ev: ("leading", 2) in ev, timeout_s=session + 10)
        took = time.monotonic() - killed
        assert took >= 0.8 * session and b.dead_leaders_released == 0 and not b._watch, took
    finally:
        victim.close()
