"""Coalesced decision requests (controller/decide/decision_requests.py), fed events on a fake clock: one decision in
flight, at most one queued, every ticket answered, refusals with Retry-After when the wait would be too long."""

from controller.decide.decision_requests import BUSY, TOO_MANY, DecisionRequests, Refusal, Ticket, retry_after


def queue(**kwargs):
    now = [0.0]
    kwargs.setdefault("max_waiting", 100_000)
    return DecisionRequests(lambda: now[0], **kwargs), now


def test_requests_join_the_queued_decision_and_all_get_its_outcome():
    q, now = queue()
    tickets = [q.request() for _ in range(1000)]
    assert all(isinstance(t, Ticket) for t in tickets) and q.waiting == 1000
    decision = q.start()
    assert decision is not None and q.start() is None  # one in flight at a time
    now[0] = 0.2
    q.finish("outcome")
    assert all(t.wait(0) and t.outcome == "outcome" for t in tickets)
    assert (q.decisions, q.requests, q.waiting, q.busy) == (1, 1000, 0, False)


def test_requests_during_a_decision_queue_one_more_and_no_more():
    q, now = queue(min_interval_s=0.0)
    first = q.request()
    q.start()
    later = [q.request() for _ in range(500)]  # while the first decision runs: all join one queued decision
    assert q.start() is None
    q.finish("first")
    assert first.outcome == "first" and not any(t.wait(0) for t in later)
    q.start()
    q.finish("second")
    assert all(t.outcome == "second" for t in later)
    assert q.decisions == 2 and q.start() is None  # nothing left to decide


def test_a_burst_over_many_decisions_makes_a_bounded_number_of_them():
    q, now = queue(min_interval_s=0.5)
    answered = 0
    for step in range(10_000):  # 10 s of requests every millisecond, a decision taking 20 ms
        now[0] = step / 1000
        ticket = q.request()
        assert isinstance(ticket, Ticket)
        if q.inflight is not None and now[0] - q.inflight.started >= 0.02:
            answered += q.finish("done").tickets
        q.start()
    assert q.decisions <= 10 / 0.52 + 1  # spaced by the minimum interval: ~19, not 10,000
    assert answered >= 10_000 - 2 * 520  # the rest wait in the decision in flight and the queued one


def test_the_controllers_own_requests_are_urgent_and_not_spaced():
    q, now = queue(min_interval_s=5.0)
    q.request()
    q.start()
    q.finish("a")
    q.request()  # a caller's request right after: spaced
    assert q.start() is None
    assert q.request(ticket=False, urgent=True) is None  # the period, a job event: joins and hurries it
    assert q.start() is not None


def test_a_caller_that_would_wait_too_long_is_refused_with_retry_after():
    q, now = queue(max_wait_s=3.0, min_interval_s=0.0)
    q.request()
    q.start()
    now[0] = 2.0
    q.finish("slow")  # decisions take 2 s
    q.request()
    q.start()
    now[0] = 2.5
    refusal = q.request()  # 1.5 s left of the one in flight + 2 s for the next: 3.5 s > 3 s
    assert isinstance(refusal, Refusal) and refusal.status == BUSY and refusal.retry_after_s == 4
    assert q.refused == 1
    now[0] = 3.5
    assert isinstance(q.request(), Ticket)  # 0.5 + 2 s: fine


def test_too_many_waiting_callers_get_429():
    q, _ = queue(max_waiting=3)
    assert all(isinstance(q.request(), Ticket) for _ in range(3))
    refusal = q.request()
    assert isinstance(refusal, Refusal) and refusal.status == TOO_MANY and refusal.retry_after_s >= 1
    assert q.request(ticket=False) is None  # the controller's own request is never refused


def test_a_ticket_that_timed_out_is_a_503_and_waits_no_more():
    q, now = queue()
    ticket = q.request()  # the worker never gets ready: nothing starts
    now[0] = 10.0
    assert not ticket.wait(0)
    refusal = q.timed_out(ticket)
    assert refusal.status == BUSY and refusal.retry_after_s >= 1 and "10.0 s" in refusal.reason
    assert q.waiting == 0


def test_retry_after_is_whole_seconds_at_least_one():
    assert [retry_after(s) for s in (0, 0.01, 1.0, 1.2)] == [1, 1, 1, 2]
