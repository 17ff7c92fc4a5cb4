"""controller/cluster/liveness.py over real sockets, the watched server in a process of its own: a process that
ends (SIGKILL) is proven dead, one that is paused is not, and nothing that is not proof counts."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.cluster.liveness import LivenessServer, LivenessWatch
from tests.zookeeper import free_port, until

ROOT = Path(__file__).resolve().parents[4]
SERVE = ("import sys; from controller.cluster.liveness import LivenessServer; s = LivenessServer('127.0.0.1'); "
         "print(s.port, s.token, flush=True); s.serve()")


class Watched:
    """A liveness server in a child process (as a leader's), its port and token."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", SERVE], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        port, self.token = self.proc.stdout.readline().split()
        self.port = int(port)

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


class Proofs:
    def __init__(self):
        self.reasons: list[str] = []
        self.sleeps = 0

    def dead(self, why):
        self.reasons.append(why)

    def sleep(self, s):
        self.sleeps += 1
        time.sleep(s)


def watch(port, token, proofs):
    w = LivenessWatch("127.0.0.1", port, token, proofs.dead, proofs.sleep)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    return w, thread


def verified_watch(server, proofs):
    """A watch of ``server`` that has read its token."""
    w, thread = watch(server.port, server.token, proofs)
    until(lambda: w.verified)
    return w, thread


@pytest.fixture
def server():
    watched = Watched()
    yield watched
    watched.close()


def test_a_killed_process_is_proven_dead_once(server):
    proofs = Proofs()
    _, thread = verified_watch(server, proofs)
    server.proc.send_signal(signal.SIGKILL)
    thread.join(10)
    assert not thread.is_alive() and len(proofs.reasons) == 1, proofs.reasons
    assert "closed" in proofs.reasons[0] or "reset" in proofs.reasons[0]


def test_a_paused_process_is_not_taken_for_dead(server):
    proofs = Proofs()
    w, thread = verified_watch(server, proofs)
    server.proc.send_signal(signal.SIGSTOP)
    time.sleep(1.5)
    assert proofs.reasons == [] and thread.is_alive()
    server.proc.send_signal(signal.SIGCONT)
    w.stop()  # a watch stopped (the leader changed) ends without a word
    thread.join(10)
    assert not thread.is_alive() and proofs.reasons == []


def test_a_refused_address_never_verified_proves_nothing():
    proofs = Proofs()
    w, thread = watch(free_port(), "whatever", proofs)
    until(lambda: proofs.sleeps >= 3)  # refused three times
    assert proofs.reasons == [] and not w.verified
    w.stop()
    thread.join(10)


def test_another_token_at_an_unverified_address_proves_nothing_and_is_never_verified(server):
    proofs = Proofs()
    w, thread = watch(server.port, "not-its-token", proofs)
    until(lambda: proofs.sleeps >= 2)
    assert proofs.reasons == [] and not w.verified
    server.proc.send_signal(signal.SIGKILL)  # its end is no proof either: the address was never verified
    until(lambda: proofs.sleeps >= 5)
    assert proofs.reasons == []
    w.stop()
    thread.join(10)


def test_refused_after_the_leader_was_verified_there_is_proof(server):
    """The leader's process verified at its address, then gone while the watch reconnects: refused is proof."""
    proofs = Proofs()
    w = LivenessWatch("127.0.0.1", server.port, server.token, proofs.dead, proofs.sleep)
    w.verified = True  # (as after an earlier connection at this address)
    server.close()
    w.run()
    assert proofs.reasons == ["its liveness port refuses connections"]


def test_the_server_keeps_what_it_accepts_and_forgets_what_followers_closed():
    server = LivenessServer("127.0.0.1")
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", server.port)) as c:
                assert c.recv(100).startswith(b"mlroute-liveness " + server.token.encode())
        kept = socket.create_connection(("127.0.0.1", server.port))
        kept.recv(100)
        until(lambda: len(server._held) <= 2)  # the closed ones pruned at the next accept, the open one held
        kept.settimeout(0.3)
        with pytest.raises(TimeoutError):
            kept.recv(10)  # held open: neither data nor end-of-file while the server lives
        server.close()
        kept.settimeout(5)
        assert kept.recv(10) == b""  # its end: end-of-file at every follower
        kept.close()
    finally:
        server.close()
