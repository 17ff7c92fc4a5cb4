"""Per-client POST rate limits and tracebacks kept out of answers (controller/web/rest_limits.py)."""

import logging

import pytest

from controller.web.rest_limits import ClientRateLimit, internal_error


def test_each_client_has_its_own_bucket():
    now = [0.0]
    limit = ClientRateLimit(rate=5, burst=10, clock=lambda: now[0])
    assert [limit.admit("10.0.0.1") for _ in range(10)] == [0.0] * 10
    assert limit.admit("10.0.0.1") == pytest.approx(0.2)  # one token back in 1/5 s
    assert limit.admit("10.0.0.2") == 0.0  # another client is not held up
    now[0] = 0.2
    assert limit.admit("10.0.0.1") == 0.0 and limit.admit("10.0.0.1") > 0
    assert limit.refused == 2


def test_a_flood_is_admitted_at_the_rate():
    now = [0.0]
    limit = ClientRateLimit(rate=5, burst=10, clock=lambda: now[0])
    admitted = 0
    for step in range(10_000):  # 1,000 calls a second for 10 s
        now[0] = step / 1000
        admitted += limit.admit("127.0.0.1") == 0.0
    assert admitted == 10 + 49  # the burst, then 5 a second (the 50th would be due at 10.0 s)


def test_the_client_table_is_bounded_idle_clients_first():
    now = [0.0]
    limit = ClientRateLimit(rate=1, burst=2, clock=lambda: now[0], max_clients=3)
    limit.admit("busy")
    limit.admit("busy")
    now[0] = 0.5  # "busy" has not refilled; the others below are full again by the next one
    for client in ("a", "b"):
        limit.admit(client)
    now[0] = 10.0
    limit.admit("busy")
    limit.admit("busy")
    limit.admit("c")  # room is made: "a" and "b" are full (idle), "busy" is not
    assert len(limit) <= 3 and limit.admit("busy") > 0  # its empty bucket was kept
    for i in range(100):  # the least recently seen go when nobody is idle
        limit.admit(f"x{i}")
    assert len(limit) <= 3


def test_an_internal_error_answers_an_id_and_logs_the_traceback_under_it(caplog):
    log = logging.getLogger("test-rest-limits")
    with caplog.at_level(logging.ERROR, logger=log.name):
        try:
            raise RuntimeError("Second simultaneous read on fileno 7")
        except RuntimeError:
            body = internal_error(log, "POST /mlroute/recompute")
    assert set(body) == {"error", "id"} and len(body["id"]) == 8
    assert "Traceback" not in body["error"] and "simultaneous" not in body["error"] and body["id"] in body["error"]
    record = caplog.records[-1]
    assert body["id"] in record.getMessage() and record.exc_info[0] is RuntimeError
