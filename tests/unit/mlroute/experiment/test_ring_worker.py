"""The ring worker's start barrier: no rank starts iteration 0 before every rank of its ring is connected, so a
late rank (slow start-up, a first SYN retried after 1 s) does not make iteration 0 look slow."""

import socket
import threading
import time

import pytest

from mlroute.experiment import ring_worker


def ring_links(n):
    """(succ, pred) socket per rank: rank i's succ is connected to rank i+1's pred."""
    pairs = [socket.socketpair() for _ in range(n)]  # pairs[i]: rank i -> rank i+1
    return [(pairs[i][0], pairs[(i - 1) % n][1]) for i in range(n)]


@pytest.mark.parametrize("late", [0, 2])
def test_no_rank_leaves_the_barrier_before_the_last_one_enters_it(late):
    links = ring_links(4)
    entered, left = {}, {}

    def rank(r):
        if r == late:
            time.sleep(0.3)
        entered[r] = time.monotonic()
        ring_worker._barrier(r, *links[r])
        left[r] = time.monotonic()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(left) == [0, 1, 2, 3]
    assert min(left.values()) >= max(entered.values())
    for _, pred in links:  # the tokens were consumed: the data stream starts clean
        pred.setblocking(False)
        with pytest.raises(BlockingIOError):
            pred.recv(1)


def test_a_wrong_byte_from_the_predecessor_is_an_error():
    succ, _ = socket.socketpair()
    sender, pred = socket.socketpair()
    sender.sendall(b"x")
    with pytest.raises(ConnectionError, match="ring barrier"):
        ring_worker._barrier(1, succ, pred)
