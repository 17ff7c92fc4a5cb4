"""The lease against a recording stand-in controller: PUT, renew, 404 -> declare again, DELETE; a controller
that is down costs one warning and background retries, never an exception."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from mlroute.torch.client import Controller, Lease, Reply, UnreachableError
from tests.unit.mlroute.torch.recorder import RecordingServer

JOB = {"hosts": ["10.0.0.1", "10.0.0.2"], "rings": [["10.0.0.2", "10.0.0.1"]]}


@pytest.fixture
def rec():
    with RecordingServer() as recorder:
        yield recorder


def _wait_for(predicate, what: str, rounds: int = 400) -> None:
    """Poll (bounded: rounds x 25 ms of waiting at most) until the background thread did what it should."""
    event = threading.Event()
    for _ in range(rounds):
        if predicate():
            return
        event.wait(0.025)
    pytest.fail(f"never happened: {what}")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on return: connecting to it is refused


def test_put_renew_delete_with_the_token(rec):
    lease = Lease(Controller(rec.url, "tok"), "job/1", JOB, lease_s=0.15)
    lease.start()
    assert lease.declared
    put = rec.of("PUT")[0]  # the first PUT ran in the caller's thread: it is there when start() returns
    assert put.path == "/mlroute/jobs/job%2F1" and put.auth == "Bearer tok"
    assert put.body == {**JOB, "lease_s": 0.15}
    _wait_for(lambda: len(rec.of("POST", "/mlroute/jobs/job%2F1/renew")) >= 3, "three renews")
    lease.end()
    lease.end()  # idempotent (atexit after destroy_process_group)
    assert [r.path for r in rec.of("DELETE")] == ["/mlroute/jobs/job%2F1"]
    assert rec.jobs == {}
    count = len(rec.requests)
    threading.Event().wait(0.2)  # over the renew interval: nothing more once ended
    assert len(rec.requests) == count


def test_renew_answering_404_declares_again_at_once_and_says_so_once(rec, caplog):
    rec.forget_on_renew = 2  # the controller loses the job twice (a restart, a lease it let expire)
    lease = Lease(Controller(rec.url), "j", JOB, lease_s=0.15)
    with caplog.at_level(logging.WARNING, logger="mlroute.torch"):
        lease.start()
        _wait_for(lambda: len(rec.of("PUT")) >= 3 and len(rec.of("POST")) >= 4, "re-declared twice, renewing again")
        lease.end()
    assert all(p.body == {**JOB, "lease_s": 0.15} for p in rec.of("PUT"))  # the same ring each time
    methods = [r.method for r in rec.requests]
    first_404 = methods.index("POST")
    assert methods[first_404 + 1] == "PUT"  # the next request after the 404 is the PUT, not a later renew
    assert sum("lost job j" in r.getMessage() for r in caplog.records) == 1
    assert rec.requests[-1].method == "DELETE" and rec.jobs == {}


def test_unreachable_controller_warns_once_backs_off_and_never_raises(caplog):
    ctl = Controller(f"http://127.0.0.1:{_closed_port()}", timeout_s=0.5)
    calls: list[tuple[str, str]] = []
    real_call = ctl.call

    def counting(method, path, body=None):
        calls.append((method, path))
        return real_call(method, path, body)

    ctl.call = counting  # type: ignore[method-assign]
    lease = Lease(ctl, "j", JOB, lease_s=30, backoff=(0.01, 0.04))
    with caplog.at_level(logging.WARNING, logger="mlroute.torch"):
        lease.start()  # returns: the job runs undeclared
        assert not lease.declared
        _wait_for(lambda: len(calls) >= 6, "retries in the background")
        lease.end()
    assert {c[0] for c in calls} == {"PUT"}  # keeps trying to declare, never renews a job it has not got
    assert sum("unreachable" in r.getMessage() for r in caplog.records) == 1
    assert [lease._retry() for _ in range(3)][-1] == 0.04  # the back-off doubles up to its ceiling
    assert not any("DELETE" == c[0] for c in calls)  # never declared: nothing to delete


def test_backoff_doubles_from_first_to_longest():
    lease = Lease(Controller("http://127.0.0.1:9"), "j", JOB, lease_s=30, backoff=(1.0, 5.0))
    assert [lease._retry() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_controller_coming_back_gets_the_job(rec, caplog):
    up = Controller(rec.url)
    down = {"on": True}

    def call(method, path, body=None):
        if down["on"]:
            raise UnreachableError("refused")
        return Controller.call(up, method, path, body)

    up.call = call  # type: ignore[method-assign]
    lease = Lease(up, "j", JOB, lease_s=0.3, backoff=(0.01, 0.02))
    with caplog.at_level(logging.WARNING, logger="mlroute.torch"):
        lease.start()
        assert rec.requests == []
        down["on"] = False
        _wait_for(lambda: rec.of("PUT") and rec.of("POST"), "declared and renewed once the controller is up")
        lease.end()
    assert lease.declared is False and rec.of("DELETE")
    assert sum("reachable again" in r.getMessage() for r in caplog.records) == 1


def test_a_controller_back_after_an_outage_gets_the_job_declared_again_at_once_and_said_once(rec, caplog):
    """A renew that finds no controller (killed, restarting), then the controller answers again: the first call
    that reaches it is a PUT of the same ring, though it still knows the job (a renew would answer 200: a
    controller restored from its state file), and the job's log says so in one line."""
    ctl = Controller(rec.url)
    down = threading.Event()
    missed: list[str] = []

    def call(method, path, body=None):
        if down.is_set():
            missed.append(method)
            raise UnreachableError("connection refused")
        return Controller.call(ctl, method, path, body)

    ctl.call = call  # type: ignore[method-assign]
    lease = Lease(ctl, "j", JOB, lease_s=0.15, backoff=(0.01, 0.02))
    with caplog.at_level(logging.WARNING, logger="mlroute.torch"):
        lease.start()
        _wait_for(lambda: len(rec.of("POST")) >= 1, "a first renew")
        down.set()
        _wait_for(lambda: len(missed) >= 3, "renew and retries refused")
        seen = len(rec.requests)
        down.clear()
        _wait_for(lambda: len(rec.of("POST")) >= 3 and rec.index("POST")[-1] > seen + 1, "renewing again")
        lease.end()
    assert missed[0] == "POST" and set(missed[1:]) == {"PUT"}  # every retry after the failed renew declares
    after = rec.requests[seen:]
    assert after[0].method == "PUT" and after[0].body == {**JOB, "lease_s": 0.15}  # at once, the same ring
    assert [r.method for r in after[1:-1]] == ["POST"] * (len(after) - 2)  # one PUT, then renews as before
    said = [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    assert said == [f"mlroute: controller {rec.url} reachable again: job j declared again, with the same rings"]
    assert sum("unreachable" in r.getMessage() for r in caplog.records) == 1


def test_retries_never_wait_longer_than_a_renew_interval():
    lease = Lease(Controller("http://127.0.0.1:9"), "j", JOB, lease_s=6, backoff=(1.0, 30.0))
    assert [lease._retry() for _ in range(4)] == [1.0, 2.0, 2.0, 2.0]  # lease 6 s: renewed every 2 s


def test_a_refused_declaration_stops_without_raising(caplog):
    ctl = Controller("http://unused")
    answers = [Reply(400, '{"error": "jobs[0].rings[0]: host 10.0.0.1 appears twice"}')]
    ctl.call = lambda method, path, body=None: answers[0]  # type: ignore[method-assign]
    lease = Lease(ctl, "j", JOB, lease_s=30)
    with caplog.at_level(logging.ERROR, logger="mlroute.torch"):
        lease.start()
    assert lease._thread is None and not lease.declared  # nothing keeps hammering a controller that said no
    assert "appears twice" in caplog.text
    answers[0] = Reply(503, "leader changing")
    assert Lease(ctl, "j", JOB, lease_s=30, backoff=(0.5, 1.0)).step() == 0.5  # but a 5xx is retried


def test_redeclare_puts_the_new_rings_from_the_thread(rec):
    lease = Lease(Controller(rec.url), "j", JOB, lease_s=30)
    lease.start()
    new = {**JOB, "rings": [["10.0.0.1", "10.0.0.2"]]}
    lease.redeclare(new)
    _wait_for(lambda: len(rec.of("PUT")) == 2, "the second PUT")
    lease.end()
    assert rec.of("PUT")[1].body == {**new, "lease_s": 30}


def test_malformed_or_unresolvable_url_is_unreachable_not_an_exception():
    for url in ("http://no-such-host.invalid", "not a url"):
        with pytest.raises(UnreachableError):
            Controller(url, timeout_s=0.5).call("PUT", "/mlroute/jobs/j", JOB)
