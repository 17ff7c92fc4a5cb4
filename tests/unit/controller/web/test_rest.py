"""rest.py's handlers without a server (webob requests straight into the RestController WSGI application): a
handler's exception is a JSON 500 with an error id, a refused decision carries Retry-After, a POST past the
client's rate is 429."""

import json
import logging
import threading
import time

from webob import Request

from controller import config
from controller.core import ControllerCore
from controller.web.rest import ROUTES, RestController
from controller.web.rest_limits import ClientRateLimit


class App:
    def __init__(self, text="rest:\n  token: t\n"):
        self.core = ControllerCore(config.parse(text), lambda: 0.0)
        self.post_limit = ClientRateLimit(5, 2, lambda: 0.0)
        self.woken = 0

    def wake(self, decide=False):
        self.woken += 1


def call(app, action, method="GET", body=b"", client="10.0.0.1"):
    """The handler named ``action`` called through the application's router (its route's path)."""
    path = next(p for m, p, name in ROUTES if name == action and m == method)
    req = Request.blank(path, method=method, body=body, headers={"Authorization": "Bearer t"},
                        remote_addr=client)
    res = req.get_response(RestController(app))
    return res.status_code, res.headers, json.loads(res.body)


def test_a_path_or_method_no_route_takes_is_a_404_as_under_ryu():
    api = RestController(App())
    assert Request.blank("/mlroute/nothing").get_response(api).status_code == 404
    assert Request.blank("/mlroute/topology", method="DELETE").get_response(api).status_code == 404
    assert Request.blank("/mlroute/ui/app.js").get_response(api).status_code == 200


def test_an_exception_in_a_handler_is_a_json_500_with_an_id_and_the_traceback_in_the_log(caplog):
    app = App()

    def broken():
        raise RuntimeError("Second simultaneous read on fileno 7")
    app.core.topology_json = broken
    with caplog.at_level(logging.ERROR, logger="mlroute"):
        status, _, body = call(app, "get_topology")
    assert status == 500 and set(body) == {"error", "id"} and "simultaneous" not in json.dumps(body)
    assert any(body["id"] in r.getMessage() and r.exc_info for r in caplog.records)


def test_recompute_answers_the_decision_it_joined():
    app = App()  # no optimiser worker: the decision loop's tick (here, in this thread) makes the decision
    answers = []
    caller = threading.Thread(target=lambda: answers.append(call(app, "post_recompute", "POST")))
    caller.start()
    for _ in range(500):
        if app.core.decisions.busy:  # the call's request is queued: it waits for the decision
            break
        time.sleep(0.01)
    assert app.core.decision_tick() is not None
    caller.join(5)
    status, _, body = answers[0]
    assert status == 200 and set(body) == {"applied", "reason", "moved", "elephants", "optimiser_ms"}
    assert app.woken and app.core.decisions.decisions == 1


def test_a_refused_decision_is_a_503_with_retry_after(monkeypatch):
    app = App("rest:\n  token: t\n  max_decision_wait_s: 0.01\n")
    app.core.decisions.duration_s = 5.0  # decisions take 5 s: more than the 0.01 s a caller may wait
    status, headers, body = call(app, "post_recompute", "POST")
    assert status == 503 and headers["Retry-After"] == "5" and body["retry_after_s"] == 5


def test_posts_past_the_clients_rate_are_429_with_retry_after():
    app = App("rest:\n  token: t\n  max_decision_wait_s: 0.01\n")
    app.core.decisions.duration_s = 5.0
    statuses = [call(app, "post_recompute", "POST")[0] for _ in range(3)]
    assert statuses == [503, 503, 429]  # a burst of 2, then the limit (before the decision queue is asked)
    status, headers, body = call(app, "post_objective", "POST", b'{"objective": "job"}')
    assert status == 429 and int(headers["Retry-After"]) >= 1 and "at most 5/s" in body["error"]
    assert call(app, "post_objective", "POST", b'{"objective": "job"}', client="10.0.0.2")[0] == 200
    assert app.core.metrics.rest_refused.labels("rate_limited")._value.get() == 2


def test_switches_answers_what_each_switch_said_and_holds():
    app = App()
    core = app.core
    core.switch_connected(7, [1, 2])
    core.switch_described(7, "Northbound Networks", "Zodiac FX", "0.86")
    core.table_features(7, {0: 512, 1: 512, 2: 0})
    core.group_features(7, frozenset(), {})
    core.table_stats(7, {0: 12, 1: 30, 2: 0, 3: 0})
    status, _, body = call(app, "get_switches")
    assert status == 200
    (sw,) = body["switches"]
    assert sw["dpid"] == 7 and sw["connected"] and sw["description"]["hardware"] == "Zodiac FX"
    assert sw["tables"]["0"] == {"entries": 12, "mlroute_entries": 0, "capacity": 512}
    assert sw["tables"]["2"]["capacity"] is None  # 0: the switch did not say
    assert sw["groups"]["types"] == [] and sw["audit"]["out"] is False
